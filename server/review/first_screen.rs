//! The first screen of the review besides the verdict: the brief in three lines and the money
//! (cost per job against the ceiling, the whole commitment over the term, reserved against on
//! demand for the same GPU-hours). Built from the computed review; decides nothing.

use rust_decimal::{prelude::ToPrimitive, Decimal};

use super::{
    decision_view::{allocation, job_word},
    model::{monthly_cost, total_commitment, Reservation},
    service::{Review, TrialReview},
};
use crate::money;

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

/// The brief in three lines: the model, the workload with its targets and ceiling, and the
/// allocation under test.
pub fn brief_lines(r: &Review) -> Vec<BriefLine> {
    let f = &r.brief.fields;
    let t = &r.trials[r.chosen];
    let mut model = format!(
        "{} in {}, {} tokens of context",
        f.catalog_model.clone().unwrap_or_else(|| f.model_name.clone()),
        f.precision.as_str(),
        money::count(f.context_length)
    );
    if f.catalog_model.as_deref().is_some_and(|c| c != f.model_name) && !f.model_name.is_empty() {
        model = format!("{} ({model})", f.model_name);
    }
    let ms = |name: &str, v: Option<f64>| v.map(|v| format!("{name} ≤ {} ms", money::figure(v)));
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
        targets.push(format!("errors ≤ {}", money::percent(e)));
    }
    let mut workload = format!(
        "{}, {} requests at once",
        workload_words(f.workload_kind.as_str()),
        money::count(f.concurrency)
    );
    if !targets.is_empty() {
        workload.push_str(&format!("; targets: {}", targets.join(", ")));
    }
    if let Some(ceiling) = f.max_cost_per_job {
        workload.push_str(&format!(
            "; at most {} per {}",
            money::with_currency(ceiling, &f.currency),
            job_word(f.cost_unit.as_str())
        ));
    }
    let trial = &t.context.trial.fields;
    let mut under_test = allocation(t);
    if !trial.provider.is_empty() {
        under_test.push_str(&format!(" at {}", trial.provider));
    }
    let rate = trial.rate_per_gpu_hour.or(t.context.ledger_rate);
    match rate {
        Some(rate) => under_test.push_str(&format!(
            ", {} at {} per GPU-hour",
            trial.billing.as_str(),
            money::with_currency(rate, &f.currency)
        )),
        None => under_test.push_str(&format!(", {}", trial.billing.as_str())),
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
    vec![
        BriefLine {
            label: "Model",
            text: model,
        },
        BriefLine {
            label: "Workload",
            text: workload,
        },
        BriefLine {
            label: "Under test",
            text: under_test,
        },
    ]
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

/// The rate the same GPUs cost on demand: the trial's own when it is billed on demand, else what
/// the ledger billed on average.
fn on_demand_rate(t: &TrialReview) -> Option<Decimal> {
    let trial = &t.context.trial.fields;
    match trial.rate_per_gpu_hour {
        Some(rate) if trial.billing.as_str() == "on-demand" => Some(rate),
        _ => t.context.ledger_rate,
    }
}

/// The three money figures: cost per job against the ceiling, the whole commitment, and reserved
/// against on demand for the same GPU-hours. `commitment` is the reservation on the table (the
/// form's values, or the approved reservation).
pub fn money_figures(r: &Review, commitment: Option<&Reservation>) -> Vec<MoneyFigure> {
    let t = &r.trials[r.chosen];
    let currency = &r.brief.fields.currency;
    let unit = job_word(r.brief.fields.cost_unit.as_str());
    let ceiling = r.brief.fields.max_cost_per_job;
    let mut out = Vec::new();
    let cost = t.context.inputs.ledger.as_ref().map(|l| l.cost_per_job);
    out.push(match (cost, ceiling) {
        (Some(Some(cost)), Some(ceiling)) => MoneyFigure {
            id: "cost-per-job",
            label: format!("Cost per completed {unit}"),
            value: money::with_currency(cost, currency),
            note: if cost <= ceiling {
                format!("within the ceiling of {}", money::with_currency(ceiling, currency))
            } else {
                format!("over the ceiling of {}", money::with_currency(ceiling, currency))
            },
            tone: if cost <= ceiling { "ok" } else { "bad" },
        },
        (Some(Some(cost)), None) => MoneyFigure {
            id: "cost-per-job",
            label: format!("Cost per completed {unit}"),
            value: money::with_currency(cost, currency),
            note: "the brief sets no ceiling".into(),
            tone: "",
        },
        (Some(None), _) => MoneyFigure {
            id: "cost-per-job",
            label: format!("Cost per completed {unit}"),
            value: "not known yet".into(),
            note: "no completed jobs counted in the ledger".into(),
            tone: "",
        },
        (None, _) => MoneyFigure {
            id: "cost-per-job",
            label: format!("Cost per completed {unit}"),
            value: "not known yet".into(),
            note: "the ledger has no lines yet".into(),
            tone: "",
        },
    });
    let on_demand = on_demand_rate(t);
    match commitment {
        Some(c) => {
            out.push(MoneyFigure {
                id: "commitment",
                label: format!("Total commitment over {} months", c.term_months),
                value: money::sum_with_currency(
                    total_commitment(c.count, c.rate_per_gpu_hour, c.term_months),
                    currency,
                ),
                note: format!(
                    "{} × {} at {} per GPU-hour × 730 hours × {} months ({} a month)",
                    c.count,
                    c.gpu,
                    money::with_currency(c.rate_per_gpu_hour, currency),
                    c.term_months,
                    money::sum_with_currency(monthly_cost(c.count, c.rate_per_gpu_hour), currency)
                ),
                tone: "",
            });
            let reserved = if c.billing == "reserved" {
                Some((c.rate_per_gpu_hour, "the reservation's rate".to_owned()))
            } else {
                t.context
                    .reserved_quote
                    .as_ref()
                    .map(|q| (q.rate_per_gpu_hour, format!("{}'s reserved price", q.provider)))
            };
            out.push(compare(on_demand, reserved, c.count, c.term_months, currency, t));
        }
        None => {
            let count = t.context.inputs.brief.current_units;
            out.push(MoneyFigure {
                id: "commitment",
                label: "Commitment".into(),
                value: "nothing committed".into(),
                note: match on_demand {
                    Some(rate) => format!(
                        "paying by the hour: {} a month for {count} GPUs at {} per GPU-hour",
                        money::sum_with_currency(monthly_cost(count, rate), currency),
                        money::with_currency(rate, currency)
                    ),
                    None => "paying by the hour; no rate known yet".into(),
                },
                tone: "",
            });
            let reserved = t
                .context
                .reserved_quote
                .as_ref()
                .map(|q| (q.rate_per_gpu_hour, format!("{}'s reserved price", q.provider)));
            out.push(compare(on_demand, reserved, count, 12, currency, t));
        }
    }
    out
}

/// Reserved against on demand for `count` GPUs over `months` months of 730 hours.
fn compare(
    on_demand: Option<Decimal>,
    reserved: Option<(Decimal, String)>,
    count: u32,
    months: u32,
    currency: &str,
    t: &TrialReview,
) -> MoneyFigure {
    let label = format!("Reserved against on demand, {count} GPUs for {months} months");
    let provider = if t.context.trial.fields.provider.is_empty() {
        "the provider".to_owned()
    } else {
        t.context.trial.fields.provider.clone()
    };
    match (on_demand, reserved) {
        (Some(od), Some((rr, source))) => {
            let od_total = total_commitment(count, od, months);
            let rr_total = total_commitment(count, rr, months);
            let saving = od_total - rr_total;
            let (value, tone) = if saving > Decimal::ZERO {
                let pct = (saving / od_total).to_f64().map(money::percent).unwrap_or_default();
                (
                    format!("reserving saves {} ({pct})", money::sum_with_currency(saving, currency)),
                    "ok",
                )
            } else if saving.is_zero() {
                ("no saving: the same rate".to_owned(), "")
            } else {
                (
                    format!("reserving costs {} more", money::sum_with_currency(-saving, currency)),
                    "bad",
                )
            };
            let mut note = format!(
                "on demand {} at {} per GPU-hour; reserved {} at {} ({source})",
                money::sum_with_currency(od_total, currency),
                money::with_currency(od, currency),
                money::sum_with_currency(rr_total, currency),
                money::with_currency(rr, currency)
            );
            if saving.is_zero() {
                note.push_str(&format!(
                    "; ask {provider} for a reserved price, or import one on the Prices page"
                ));
            }
            MoneyFigure {
                id: "reserved-vs-on-demand",
                label,
                value,
                note,
                tone,
            }
        }
        (Some(od), None) => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: format!(
                "on demand: {}",
                money::sum_with_currency(total_commitment(count, od, months), currency)
            ),
            note: format!("no reserved price known: ask {provider} for one, or import one on the Prices page"),
            tone: "",
        },
        (None, _) => MoneyFigure {
            id: "reserved-vs-on-demand",
            label,
            value: "not known yet".into(),
            note: "needs the trial's rate per GPU-hour or ledger lines".into(),
            tone: "",
        },
    }
}
