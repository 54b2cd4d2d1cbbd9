//! The first screen of the review besides the verdict: the brief in three lines, where the load
//! figures were judged, the approval state, and the money (cost per job against the ceiling, the
//! whole commitment of the reservation the review computed, reserved against on demand for the
//! nodes actually rented). Built from the computed review — every amount comes from the same
//! figures the review's JSON and the stored reservation carry; decides nothing.

use super::{
    cost_at_slo::ReservationComparison,
    decision::Verdict,
    decision_view::{allocation, job_word},
    model::{months, ApprovalVerdict, Reservation},
    service::{Review, TrialReview},
};
use rust_decimal::Decimal;

use crate::{briefs::model::BriefFields, figures};

/// One line of the brief at the top of the review.
pub struct BriefLine {
    pub label: &'static str,
    pub text: String,
}

fn workload_words(kind: &str) -> &str {
    match kind {
        "realtime-inference" => "Chat-style serving (real-time inference)",
        "batch-inference" => "Batch inference",
        "training" => "Training",
        "finetune" => "Fine-tuning",
        "media" => "Media generation",
        other => other,
    }
}

/// What a verdict means for a manager, said wherever its badge appears.
pub fn verdict_meaning(decision: Verdict) -> &'static str {
    match decision {
        Verdict::Expand => "keep renting by the hour, commit to nothing yet",
        Verdict::Reserve => "commit to this allocation for a term at a lower rate",
        Verdict::Dedicate => "rent a dedicated server for this workload",
        Verdict::Scale => "add replicas: the targets need more capacity",
        Verdict::Stop => "stop renting this allocation",
    }
}

/// [`verdict_meaning`] of a decision kept as text (the dashboard's stored summary, "expand");
/// empty for anything else.
pub fn meaning(decision: &str) -> &'static str {
    decision.parse().map(verdict_meaning).unwrap_or_default()
}

/// The brief in three lines: the model, the workload with its targets and ceiling, and the
/// allocation under test with its one price, billing named.
pub fn brief_lines(r: &Review) -> Vec<BriefLine> {
    let f = &r.brief.fields;
    let t = &r.trials[r.chosen];
    vec![
        BriefLine {
            label: "Model",
            text: model_line(f),
        },
        BriefLine {
            label: "Workload",
            text: workload_line(f),
        },
        BriefLine {
            label: "Under test",
            text: under_test_line(t, f),
        },
    ]
}

/// The model, its precision and context.
fn model_line(f: &BriefFields) -> String {
    let mut model = format!(
        "{} in {}, {} tokens of context",
        f.catalog_model.clone().unwrap_or_else(|| f.model_name.clone()),
        f.precision.as_str(),
        figures::count(f.context_length)
    );
    if f.catalog_model.as_deref().is_some_and(|c| c != f.model_name) && !f.model_name.is_empty() {
        model = format!("{} ({model})", f.model_name);
    }
    model
}

/// The workload with its targets, expected peak and cost ceiling.
fn workload_line(f: &BriefFields) -> String {
    let ms = |name: &str, v: Option<f64>| v.map(|v| format!("{name} ≤ {} ms", figures::figure(v)));
    let mut targets: Vec<String> = [
        ms("first token", f.targets.ttft_p95_ms),
        ms("between tokens", f.targets.itl_p95_ms),
        ms("whole request", f.targets.e2e_p95_ms),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !targets.is_empty() {
        let last = targets.len() - 1;
        targets[last].push_str(" (95th percentile)");
    }
    if let Some(e) = f.targets.error_rate {
        targets.push(format!("errors ≤ {}", figures::percent(e)));
    }
    let mut workload = format!(
        "{}, {} requests at once",
        workload_words(f.workload_kind.as_str()),
        figures::count(f.concurrency)
    );
    if !targets.is_empty() {
        workload.push_str(&format!("; targets: {}", targets.join(", ")));
    }
    if let Some(peak) = f.expected_peak_rps {
        workload.push_str(&format!(
            "; expected peak {} requests/s with {} % headroom",
            figures::figure(peak),
            figures::figure(f.headroom_pct.unwrap_or(0.0))
        ));
    }
    if let Some(ceiling) = f.max_cost_per_job {
        workload.push_str(&format!(
            "; at most {} per {}",
            figures::with_currency(ceiling, &f.currency),
            job_word(f.cost_unit.as_str())
        ));
    }
    workload
}

/// The allocation under test with its one price, billing named.
fn under_test_line(t: &TrialReview, f: &BriefFields) -> String {
    let trial = &t.context.trial.fields;
    let mut under_test = allocation(t);
    if !trial.provider.is_empty() {
        under_test.push_str(&format!(" at {}", trial.provider));
    }
    match &t.context.price {
        Some(p) => under_test.push_str(&format!(
            ", {} at {} per GPU-hour",
            p.billing,
            figures::rate_with_currency(p.per_gpu_hour, &f.currency)
        )),
        None => under_test.push_str(&format!(", {}, no price known yet", trial.billing.as_str())),
    }
    under_test.push_str(&format!(" (trial “{}”)", trial.name));
    if let Some(a) = &t.context.allocation {
        if a.suggested {
            under_test.push_str(" — suggested by the sizing: the trial names no GPU");
        }
        if a.under_sized {
            under_test.push_str(" — smaller than the sizing says the model needs");
        }
    }
    under_test
}

/// Where the trial's load figures were judged: "Load figures judged at 8 req/s of the 4–16 req/s
/// sweep (3 load points)", and whether that point met the target.
pub fn operating_line(t: &TrialReview) -> Option<String> {
    let p = t.context.inputs.money.as_ref()?.operating_point.as_ref()?;
    let mut text = format!("Load figures {}", p.described);
    if !p.qualified {
        text.push_str(": no load point met the targets, so the lowest load is judged");
    }
    text.push('.');
    Some(text)
}

/// The name of the trial the latest verdict was given on (the first trial's for a verdict from
/// before verdicts named a trial).
pub fn approved_trial_name(r: &Review) -> Option<String> {
    let row = &r.approval.as_ref()?.row;
    let trial = match row.trial_id {
        Some(id) => r.trial(id)?,
        None => r.trials.first()?,
    };
    Some(trial.context.trial.fields.name.clone())
}

/// The override a verdict recorded, if any.
pub fn recorded_override(row: &super::repo::ApprovalRow) -> Option<super::model::DecisionOverride> {
    serde_json::from_value(row.decision_override.as_ref()?.0.clone()).ok()
}

/// The approval next to the verdict: who approved what on which trial and when, and whether it
/// went stale: "Approved (stop) — 4 × H100 · Cloud B, by … on …".
pub fn approval_line(r: &Review, changed: &str) -> String {
    match &r.approval {
        None => "Not approved yet.".into(),
        Some(a) => {
            let done = if a.row.verdict == ApprovalVerdict::Approve {
                "Approved"
            } else {
                "Rejected"
            };
            let trial = approved_trial_name(r)
                .map(|name| format!(" — {name},"))
                .unwrap_or_default();
            let over = recorded_override(&a.row)
                .map(|o| format!(" over the computed {}", o.computed))
                .unwrap_or_default();
            let mut text = format!(
                "{done} ({}{over}){trial} by {} on {}",
                a.row.decision,
                a.row.decided_by,
                a.row.decided_at.format("%Y-%m-%d %H:%M UTC")
            );
            if let Some(why) = &a.regression {
                text.push_str(&format!(" — stale: a re-run after it regressed. {why}. Decide again."));
            } else if a.stale {
                text.push_str(&format!(
                    " — stale: since then {changed} changed, so it no longer holds; decide again."
                ));
            } else {
                text.push('.');
            }
            text
        }
    }
}

/// One money figure at the top of the review.
pub struct MoneyFigure {
    pub id: &'static str,
    pub label: String,
    pub value: String,
    pub note: String,
    /// "ok", "bad" or "" (neutral).
    pub tone: &'static str,
}

/// The three money figures: cost per job against the ceiling, the commitment (the reservation the
/// review computed, or the one an approval recorded), and reserved against on demand for the
/// nodes that reservation rents. `commitment` is the reservation on the table.
pub fn money_figures(r: &Review, commitment: Option<&Reservation>) -> Vec<MoneyFigure> {
    let t = &r.trials[r.chosen];
    let currency = &r.brief.fields.currency;
    vec![
        cost_per_job_figure(r, t),
        commitment_figure(t, commitment, currency),
        reserved_against_on_demand(t, currency),
    ]
}

/// Cost per job against the brief's ceiling.
fn cost_per_job_figure(r: &Review, t: &TrialReview) -> MoneyFigure {
    let unit = job_word(r.brief.fields.cost_unit.as_str());
    let ceiling = r.brief.fields.max_cost_per_job;
    let currency = &r.brief.fields.currency;
    let cost = t.context.inputs.ledger.as_ref().map(|l| l.cost_per_job);
    match (cost, ceiling) {
        (Some(Some(cost)), Some(ceiling)) => {
            let (cost_text, ceiling_text) = figures::compared_with_currency(cost, ceiling, currency);
            MoneyFigure {
                id: "cost-per-job",
                label: "Cost per completed job".to_owned(),
                value: format!("{cost_text} per {unit}"),
                note: if cost <= ceiling {
                    format!("within the ceiling of {ceiling_text}")
                } else {
                    format!("over the ceiling of {ceiling_text}")
                },
                tone: if cost <= ceiling { "ok" } else { "bad" },
            }
        }
        (Some(Some(cost)), None) => MoneyFigure {
            id: "cost-per-job",
            label: "Cost per completed job".to_owned(),
            value: format!("{} per {unit}", figures::with_currency(cost, currency)),
            note: "the brief sets no ceiling".into(),
            tone: "",
        },
        (Some(None), _) => MoneyFigure {
            id: "cost-per-job",
            label: "Cost per completed job".to_owned(),
            value: "not known yet".into(),
            note: "no completed jobs counted in the ledger".into(),
            tone: "",
        },
        (None, _) => MoneyFigure {
            id: "cost-per-job",
            label: "Cost per completed job".to_owned(),
            value: "not known yet".into(),
            note: "the ledger has no lines yet".into(),
            tone: "",
        },
    }
}

/// The commitment: the reservation on the table, else what paying by the hour costs (or why
/// nothing can be reserved yet).
fn commitment_figure(t: &TrialReview, commitment: Option<&Reservation>, currency: &str) -> MoneyFigure {
    match commitment {
        Some(c) => MoneyFigure {
            id: "commitment",
            label: format!("Total commitment over {}", months(c.term_months)),
            value: figures::sum_with_currency(c.total(), currency),
            note: format!(
                "{}, {} at {} per GPU-hour × 730 h{}{}",
                c.size_in_words(),
                c.billing,
                figures::rate_with_currency(c.rate_per_gpu_hour, currency),
                if c.term_months == 1 {
                    String::new()
                } else {
                    format!(
                        " × {} ({} a month)",
                        months(c.term_months),
                        figures::sum_with_currency(c.monthly_cost, currency)
                    )
                },
                if c.billing == "reserved" {
                    ""
                } else {
                    "; the trial's own rate: no reserved price is current"
                }
            ),
            tone: "",
        },
        None => {
            let reason = t.reservation.as_ref().and_then(|r| r.as_ref().err());
            MoneyFigure {
                id: "commitment",
                label: "Commitment".into(),
                value: "nothing committed".into(),
                note: match (&t.context.price, reason) {
                    (_, Some(why)) => format!("nothing can be reserved yet: {why}"),
                    (Some(p), None) => format!(
                        "paying by the hour: {} a month for {} GPUs at {} per GPU-hour ({})",
                        figures::sum_with_currency(p.per_month, currency),
                        p.gpus_billed,
                        figures::rate_with_currency(p.per_gpu_hour, currency),
                        p.billing
                    ),
                    (None, None) => "paying by the hour; no price known yet".into(),
                },
                tone: "",
            }
        }
    }
}

/// Reserved against on demand like for like (decision.md, "The reservation comparison"): the
/// reserved monthly cost against paying by the hour only for the busy hours, for the GPUs a
/// reservation would rent — the figures rules 8 and 8b compared (`Decision::reservation`), never
/// against the on-demand cost of every hour. Each case of what is known about the offer's prices
/// is written where it is matched.
fn reserved_against_on_demand(t: &TrialReview, currency: &str) -> MoneyFigure {
    let c = &t.decision.reservation;
    let provider = if t.context.trial.fields.provider.is_empty() {
        "the provider".to_owned()
    } else {
        t.context.trial.fields.provider.clone()
    };
    let label = match c.gpus {
        Some(n) => format!("Reserving against paying by the hour, {n} GPUs"),
        None => "Reserving against paying by the hour".into(),
    };
    let share = |d: Option<rust_decimal::Decimal>| {
        d.and_then(|d| rust_decimal::prelude::ToPrimitive::to_f64(&d))
            .map(figures::percent)
            .unwrap_or_default()
    };
    let busy = share(c.utilization);
    match (c.reserve_saving_monthly, c.reserved_monthly, c.on_demand_busy_monthly) {
        (Some(saving), Some(reserved), Some(on_demand)) => {
            saving_figure(c, label, (saving, reserved, on_demand), currency)
        }
        (None, None, Some(_)) => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: "no reserved price known".into(),
            note: match c.reserve_pays_below_rate {
                Some(below) => format!(
                    "nothing is reserved without one; at {busy} busy, reserving would pay at a reserved price below {} \
                     per GPU-hour: ask {provider} for one",
                    // A worked-out threshold, not a price given: shown as an amount.
                    figures::with_currency(below, currency)
                ),
                None => format!("nothing is reserved without one: ask {provider} for one"),
            },
            tone: "",
        },
        (_, Some(reserved), None) => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: format!("reserved: {} a month", figures::sum_with_currency(reserved, currency)),
            note: if c.on_demand_rate_per_gpu_hour.is_none() {
                format!("no on-demand price of the same offer is known: ask {provider} for one")
            } else {
                "how busy the trial was is not known (the ledger has no idle hours), so the busy hours cannot be \
                 priced"
                    .to_owned()
            },
            tone: "",
        },
        _ if c.on_demand_rate_per_gpu_hour.is_some() => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: "no reserved price known".into(),
            note: format!(
                "how busy the trial was is not known (the ledger has no idle hours): nothing is reserved; ask \
                 {provider} for a reserved price"
            ),
            tone: "",
        },
        _ => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: "not known yet".into(),
            note: "needs the offer's on-demand and reserved prices (the trial's rate, or a price sheet)".into(),
            tone: "",
        },
    }
}

/// What reserving saves (or costs) a month against paying on demand for the busy hours, when
/// both prices and how busy the trial was are known.
fn saving_figure(
    c: &ReservationComparison,
    label: String,
    (saving, reserved, on_demand): (Decimal, Decimal, Decimal),
    currency: &str,
) -> MoneyFigure {
    let share = |d: Option<Decimal>| {
        d.and_then(|d| rust_decimal::prelude::ToPrimitive::to_f64(&d))
            .map(figures::percent)
            .unwrap_or_default()
    };
    let rate = |d: Option<Decimal>| figures::rate_with_currency(d.unwrap_or_default(), currency);
    let (n, busy) = (c.gpus.unwrap_or_default(), share(c.utilization));
    MoneyFigure {
        id: "reserved-vs-on-demand",
        label,
        value: format!(
            "{} {} a month",
            if saving >= rust_decimal::Decimal::ZERO {
                "saves"
            } else {
                "costs"
            },
            figures::sum_with_currency(saving.abs(), currency),
        ),
        note: format!(
            "{}{}: reserved {} against {} on demand for the busy hours only ({n} × {} × 730 h × {busy}); \
         reserving pays from {} busy (break-even {} + 5 points)",
            c.reserve_saving_share.map(|s| share(Some(s.abs()))).unwrap_or_default(),
            if saving >= rust_decimal::Decimal::ZERO {
                " less"
            } else {
                " more"
            },
            figures::sum_with_currency(reserved, currency),
            figures::sum_with_currency(on_demand, currency),
            rate(c.on_demand_rate_per_gpu_hour),
            share(c.reserve_threshold),
            share(c.break_even),
        ),
        tone: if c
            .utilization
            .zip(c.reserve_threshold)
            .is_some_and(|(u, from)| u >= from)
        {
            "ok"
        } else {
            ""
        },
    }
}

/// The price import with the trial's offer filled in (provider, GPU, GPUs per node, region,
/// currency, billing reserved): where a manager enters the reserved price rule 8b asks for.
pub fn reserved_price_import(t: &TrialReview, currency: &str) -> String {
    let price = t.context.price.as_ref();
    let provider = price
        .map(|p| p.provider.clone())
        .filter(|p| !p.is_empty())
        .unwrap_or_else(|| t.context.trial.fields.provider.clone());
    let count = price.map(|p| p.gpus_billed);
    let query = serde_urlencoded::to_string([
        ("offer_provider", provider),
        ("offer_gpu", t.context.trial_gpu.clone()),
        ("offer_gpu_count", count.map(|n| n.to_string()).unwrap_or_default()),
        ("offer_region", price.map(|p| p.region.clone()).unwrap_or_default()),
        ("offer_currency", currency.to_owned()),
    ])
    .unwrap_or_default();
    format!("/prices?{query}#import")
}
