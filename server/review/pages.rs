//! The review page, the manager's verdict form, the audit page and the decision record.

use std::collections::BTreeMap;

use askama::Template;
use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Json, Router,
};
use rust_decimal::{prelude::ToPrimitive, Decimal};

use super::{
    decision::{Reason, Status, Verdict},
    decision_view,
    first_screen::{self, BriefLine, MoneyFigure},
    gather::TrialKv,
    model::{apply_choices, ApprovalVerdict, Reservation},
    money_view::{money_section, MoneySection},
    service::{self, needs_reservation, Review, TrialReview, VerdictRequest},
};
use crate::{
    auth::Role,
    error::AppError,
    ids::{BriefId, TrialId},
    money,
    state::AppState,
    validation::FieldError,
    web::{
        auth::{ApiCaller, CsrfForm, PageUser},
        extract::{ApiQuery, Path},
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/briefs/{id}/review", get(review_page).post(verdict))
        .route("/briefs/{id}/audit", get(audit_page))
        .route("/briefs/{id}/decision", get(record_page))
        .route("/briefs/{id}/decision.md", get(record_md))
        .route("/briefs/{id}/decision.json", get(record_json))
}

pub const STAGE_NAMES: [&str; 5] = [
    "Environment smoke test",
    "Functional test",
    "Representative load",
    "Failure test",
    "Acceptance review",
];

struct FactView {
    label: String,
    value: String,
    href: Option<String>,
}

struct ReasonView {
    rule: String,
    decision: &'static str,
    says: String,
    /// The reason in plain words (decision_view::reason_sentence).
    sentence: String,
    facts: Vec<FactView>,
}

struct CriterionView {
    key: String,
    /// What the key measures, in words ("The time to the first token (95th percentile)").
    name: String,
    rule: String,
    value: String,
    status: &'static str,
    href: Option<String>,
    required: bool,
}

struct StageView {
    number: u8,
    name: &'static str,
    status: &'static str,
    criteria: Vec<CriterionView>,
}

/// A horizontal bar of the latency chart: the measured value against its threshold.
struct LatencyBar {
    label: String,
    value: f64,
    threshold: f64,
    value_width: f64,
    threshold_x: f64,
    pass: bool,
}

struct CostBar {
    label: String,
    amount: String,
    width: f64,
}

struct ApprovalView {
    /// "approved" or "rejected".
    done: &'static str,
    /// Approved, not rejected: the badge's colour.
    approved: bool,
    verdict: ApprovalVerdict,
    decision: Verdict,
    /// The name of the trial the verdict was given on.
    trial: String,
    /// An override in words: "Approved reserve over the computed expand: <reason>".
    override_line: Option<String>,
    by: String,
    at: String,
    comment: String,
    stale: bool,
    changed: String,
    reservation: Option<String>,
}

#[derive(Template)]
#[template(path = "review/review.html")]
struct ReviewPage {
    ctx: PageContext,
    /// A commitment of the brief whose renewal is due: renew, resize or release, and how.
    renewal: Option<crate::commitments::service::RenewalNotice>,
    brief_id: String,
    brief_name: String,
    decision: &'static str,
    /// What the verdict means for a manager ("keep testing, pay as you go").
    decision_meaning: &'static str,
    /// The approval next to the verdict: by whom, and whether it went stale and why.
    approval_line: String,
    approval_state: &'static str,
    /// "Load figures judged at 8 req/s of the 4–16 req/s sweep (3 load points)."
    operating_line: Option<String>,
    /// Evidence naming another GPU model than the decided trial's.
    gpu_mismatch: Option<(String, String)>,
    /// The GPU model the form's trial's evidence names instead of its own: approving asks to
    /// acknowledge it.
    selected_mismatch: Option<String>,
    /// The approve button's words: what approving records and the trial it names ("Approve:
    /// reserve 8 × H200 SXM for 12 months — trial “8 × H200 · Cloud A”").
    action: String,
    /// The name of the trial the form names.
    selected_name: String,
    /// The reservation comparison of the trial the form names, in words (the approval preview).
    comparison: String,
    /// Rule 8b's call to action: the price import with the decided trial's offer filled in, when
    /// no reserved price of it is known.
    reserved_price_link: Option<String>,
    /// The deciding reason in one plain sentence, and its rule number.
    why: String,
    deciding_rule: String,
    brief_lines: Vec<BriefLine>,
    figures: Vec<MoneyFigure>,
    /// After a verdict was recorded (post/redirect/get): what was recorded, shown at the top.
    flash: Option<String>,
    /// A bad verdict: each field's message, and what is wrong overall (shown at the top).
    field_errors: BTreeMap<String, String>,
    problem: String,
    comment: String,
    override_choice: String,
    override_reason: String,
    /// "20,440 USD a month", and the whole term: "245,280 USD over 12 months".
    monthly_total: String,
    currency: String,
    /// The verb static/review.js puts before "N × GPU for M months" on the approve button.
    approve_verb: &'static str,
    /// Where the reservation's figures come from ("no reserved price is current …").
    reservation_note: String,
    /// Why there is no reservation to approve (no rate known).
    reservation_missing: String,
    accepted: bool,
    reasons: Vec<ReasonView>,
    stages: Vec<StageView>,
    missing: Vec<(String, String)>,
    latency: Vec<LatencyBar>,
    costs: Vec<CostBar>,
    cost_per_job: String,
    approval: Option<ApprovalView>,
    may_decide: bool,
    needs_reservation: bool,
    reservation: BTreeMap<String, String>,
    monthly_preview: String,
    digest: String,
    several_trials: bool,
    /// The trial the brief-level decision above is taken from.
    trial_name: String,
    recommended: Option<String>,
    /// With none recommended: the closest trial and what it lacks.
    closest: Option<(String, String)>,
    /// The trial the approval form names (the recommended one unless the manager picked another).
    selected_trial: String,
    selected_decision: &'static str,
    trial_columns: Vec<TrialColumn>,
    comparison_rows: Vec<ComparisonRow>,
    trial_costs: Vec<TrialCostBar>,
    money: MoneySection,
    /// The decided trial's predicted KV-cache capacity beside vLLM's logged one.
    kv: Option<TrialKv>,
}

impl ReviewPage {
    /// A verdict is recorded and still current, and the manager is not correcting a form: the
    /// approval section shows what was recorded, the form to decide again folded away.
    fn settled(&self) -> bool {
        self.approval.as_ref().is_some_and(|a| !a.stale) && self.problem.is_empty()
    }

    fn reserved(&self, field: &str) -> &str {
        self.reservation.get(field).map(String::as_str).unwrap_or("")
    }

    /// The message for a form field (`reservation.count`, `comment`, `trial`), empty when fine.
    fn error_for(&self, field: &str) -> &str {
        self.field_errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn label_of<'a>(&self, field: &'a str) -> &'a str {
        field_label(field)
    }

    fn reservation_error(&self, field: &str) -> &str {
        self.error_for(&format!("reservation.{field}"))
    }

    /// A reservation field the review computed (shown read-only): all but the term and the start.
    fn fixed(&self, field: &str) -> bool {
        !matches!(field, "term_months" | "start")
    }

    /// What the phone's keyboard should offer for a reservation field.
    fn input_mode(&self, field: &str) -> &'static str {
        match field {
            "count" | "term_months" => "numeric",
            "rate_per_gpu_hour" => "decimal",
            _ => "text",
        }
    }

    /// The element id of a form field: `reservation.count` → `reservation-count`.
    fn field_id(&self, field: &str) -> String {
        field.replace('.', "-")
    }
}

/// What a re-rendered approval form keeps: the values typed and what was wrong with them.
#[derive(Default)]
struct FormState {
    reservation: Option<BTreeMap<String, String>>,
    trial: Option<TrialId>,
    comment: String,
    /// The override's action and reason as typed.
    override_choice: String,
    override_reason: String,
    field_errors: BTreeMap<String, String>,
    problem: String,
}

fn href(link: &Option<String>, brief_id: &str) -> Option<String> {
    let link = link.as_deref()?;
    let (kind, rest) = link.split_once(':')?;
    Some(match kind {
        "evidence" => format!("/evidence/{rest}"),
        "criterion" => format!("#crit-{rest}"),
        "ledger" => format!("/briefs/{brief_id}#ledger"),
        _ => return None,
    })
}

fn reason_view(reason: &Reason, r: &Review) -> ReasonView {
    let brief_id = r.brief.id.to_string();
    let t = &r.trials[r.chosen];
    ReasonView {
        rule: reason.rule.to_string(),
        decision: reason.decision.as_str(),
        says: reason.says.clone(),
        sentence: decision_view::reason_sentence(
            reason,
            t,
            &r.brief.fields.currency,
            r.brief.fields.cost_unit.as_str(),
        ),
        facts: reason
            .facts
            .iter()
            .map(|f| {
                let plain = decision_view::plain_fact(f);
                FactView {
                    label: plain.label,
                    value: plain.value,
                    href: href(&plain.link, &brief_id),
                }
            })
            .collect(),
    }
}

fn status_str(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Missing => "missing",
        Status::NotApplicable => "n/a",
    }
}

/// A measured value with its key's unit, as every page shows it.
fn shown(key: &str, v: &serde_json::Value) -> String {
    money::measured(v, decision_view::unit_of(key))
}

/// Beside the NCCL bus bandwidth: "84 % of what this topology should do (expected 476 GB/s)".
fn nccl_share(r: &Review, key: &str) -> Option<String> {
    if !key.starts_with("nccl.busbw_") {
        return None;
    }
    let shown = &r.context.shown;
    let pct = shown.get("nccl.busbw_pct_of_expected")?.value.as_f64()?;
    let mut text = format!("{} % of what this topology should do", money::figure(pct));
    if let Some(expected) = shown.get("nccl.expected_busbw_gbps").and_then(|m| m.value.as_f64()) {
        text.push_str(&format!(", expected {} GB/s", money::figure(expected)));
    }
    Some(text)
}

fn stages(r: &Review) -> Vec<StageView> {
    (1..=5u8)
        .map(|n| {
            let criteria: Vec<CriterionView> = r
                .context
                .inputs
                .criteria
                .iter()
                .filter(|c| c.stage == n)
                .map(|c| CriterionView {
                    key: c.key.clone(),
                    name: decision_view::capitalized(&decision_view::criterion_name(&c.key)),
                    rule: money::threshold(&c.op, &c.threshold, decision_view::unit_of(&c.key)),
                    value: match (c.value.as_ref(), nccl_share(r, &c.key)) {
                        (Some(v), Some(share)) => format!("{} ({share})", shown(&c.key, v)),
                        (Some(v), None) => shown(&c.key, v),
                        (None, _) => "—".into(),
                    },
                    status: status_str(c.status),
                    href: c.evidence_id.map(|id| format!("/evidence/{id}")),
                    required: c.required,
                })
                .collect();
            let required: Vec<&CriterionView> = criteria.iter().filter(|c| c.required).collect();
            let status = if required.iter().any(|c| c.status == "fail") {
                "fail"
            } else if required.is_empty() {
                "none"
            } else if required.iter().all(|c| c.status == "pass") {
                "pass"
            } else {
                "missing"
            };
            StageView {
                number: n,
                name: STAGE_NAMES[usize::from(n - 1)],
                status,
                criteria,
            }
        })
        .collect()
}

const CHART_WIDTH: f64 = 420.0;

/// A latency key as the chart's row label: "first token (p95)".
fn latency_label(key: &str) -> String {
    let short = key.trim_start_matches("serving.").trim_end_matches("_ms");
    let Some((what, pct)) = short.rsplit_once('_') else {
        return short.to_owned();
    };
    let what = match what {
        "ttft" => "first token",
        "itl" => "between tokens",
        "e2e" => "whole request",
        "queue_time" => "queue wait",
        "prefill" => "prefill",
        "decode" => "decode",
        other => other,
    };
    format!("{what} ({pct})")
}

fn latency_bars(r: &Review) -> Vec<LatencyBar> {
    let rows: Vec<(String, f64, f64, bool)> = r
        .context
        .inputs
        .criteria
        .iter()
        .filter(|c| c.key.ends_with("_ms"))
        .filter_map(|c| {
            let v = c.value.as_ref()?.as_f64()?;
            let t = c.threshold.as_f64()?;
            Some((latency_label(&c.key), v, t, c.status == Status::Pass))
        })
        .collect();
    // Each row on its own scale (milliseconds differ by orders of magnitude between metrics): the
    // threshold sits at the same place in every row, so a bar past the line is a miss at a glance.
    rows.into_iter()
        .map(|(label, value, threshold, pass)| {
            let max = value.max(threshold).max(f64::MIN_POSITIVE) * 1.25;
            LatencyBar {
                label,
                value,
                threshold,
                value_width: (value / max * CHART_WIDTH).max(1.0),
                threshold_x: threshold / max * CHART_WIDTH,
                pass,
            }
        })
        .collect()
}

fn cost_bars(r: &Review) -> Vec<CostBar> {
    let Some(ledger) = &r.context.inputs.ledger else {
        return Vec::new();
    };
    let max = ledger.totals.values().copied().max().unwrap_or(Decimal::ZERO);
    ledger
        .totals
        .iter()
        .map(|(label, amount)| CostBar {
            label: label.clone(),
            amount: money::with_currency(*amount, &r.context.inputs.brief.currency),
            width: if max > Decimal::ZERO {
                (amount / max * Decimal::from(380))
                    .round_dp(1)
                    .to_string()
                    .parse()
                    .unwrap_or(0.0)
            } else {
                0.0
            },
        })
        .collect()
}

fn approval_view(r: &Review) -> Option<ApprovalView> {
    let a = r.approval.as_ref()?;
    let currency = &r.context.inputs.brief.currency;
    Some(ApprovalView {
        done: a.row.verdict.done(),
        approved: a.row.verdict == ApprovalVerdict::Approve,
        verdict: a.row.verdict,
        decision: a.row.decision,
        trial: first_screen::approved_trial_name(r).unwrap_or_default(),
        override_line: first_screen::recorded_override(&a.row).map(|o| {
            format!(
                "Approved {} over the computed {}: “{}”",
                o.approved, o.computed, o.reason
            )
        }),
        by: a.row.decided_by.clone(),
        at: a.row.decided_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        comment: a.row.comment.clone(),
        stale: a.stale,
        changed: decision_view::changed_in_words(&a.changed, r),
        reservation: recorded_reservation(r).map(|res| {
            format!(
                "{} × {} ({} {} of {} GPUs), {}, {} from {}, at {} per GPU-hour: {} a month, {} in all",
                res.gpus,
                res.gpu,
                res.replicas,
                if res.replicas == 1 { "replica" } else { "replicas" },
                res.gpus_per_node,
                res.billing,
                super::model::months(res.term_months),
                res.start_date,
                money::with_currency(res.rate_per_gpu_hour, currency),
                money::sum_with_currency(res.monthly_cost, currency),
                money::sum_with_currency(res.total(), currency),
            )
        }),
    })
}

/// The reservation the latest approval recorded, if it recorded one: the object it kept, else
/// (approvals recorded before it was kept) what its columns say.
fn recorded_reservation(r: &Review) -> Option<Reservation> {
    let row = &r.approval.as_ref()?.row;
    if let Some(kept) = row
        .reservation
        .as_ref()
        .and_then(|j| serde_json::from_value::<Reservation>(j.0.clone()).ok())
    {
        return Some(kept);
    }
    let gpus = u32::try_from(row.reservation_count?).ok()?;
    Some(Reservation {
        trial: row.trial_id.unwrap_or(r.context.trial.id),
        provider: row.reservation_provider.clone(),
        gpu: row.reservation_gpu.clone()?,
        gpus_per_node: gpus,
        replicas: 1,
        gpus,
        billing: row.reservation_billing.clone().unwrap_or_default(),
        rate_per_gpu_hour: row.reservation_rate_per_gpu_hour.unwrap_or_default(),
        currency: r.brief.fields.currency.clone(),
        term_months: u32::try_from(row.reservation_term_months?).ok()?,
        monthly_cost: row.reservation_monthly_cost?,
        start_date: row.reservation_start?,
        note: String::new(),
    })
}

/// One trial's column in the comparison.
struct TrialColumn {
    id: String,
    name: String,
    allocation: String,
    provider: String,
    decision: &'static str,
    /// What the decision means for a manager.
    meaning: &'static str,
    accepted: bool,
    recommended: bool,
    closest: bool,
    criteria: String,
    cost_per_job: String,
    utilization: String,
    /// For a re-run: "better: …; worse: …" since the trial it re-runs.
    changes: Vec<RerunChange>,
    rerun_of: Option<String>,
    /// The approve button's words when this trial is chosen in the form (its computed reservation
    /// at the default term): static/review.js shows them when the manager picks it.
    approve_words: String,
    /// Approving it records a reservation.
    reserves: bool,
    /// Its reservation comparison in words (the approval preview follows the select).
    comparison: String,
}

/// A criterion or money figure that moved since the trial a re-run re-runs.
struct RerunChange {
    key: String,
    better: bool,
}

/// A re-run's money row in words.
fn change_label(key: &str) -> String {
    match key {
        "capacity_at_slo_rps" => "capacity at the SLO".into(),
        "cost_per_million_output_tokens_at_slo" => "cost per million output tokens at the SLO".into(),
        "monthly_cost" => "monthly cost at the peak".into(),
        other => decision_view::criterion_name(other),
    }
}

/// One trial's value and status of a criterion.
struct ComparisonCell {
    value: String,
    status: &'static str,
}

/// One row of the comparison: a criterion (key and stage) with each trial's value and status.
struct ComparisonRow {
    key: String,
    /// The metric key alone, shown small under its name.
    metric: String,
    label: String,
    cells: Vec<ComparisonCell>,
}

/// One bar of the cost-per-job chart across trials.
struct TrialCostBar {
    label: String,
    amount: String,
    width: f64,
    recommended: bool,
}

// Long, and reads better whole: it builds the comparison table's columns, rows and bars from one
// walk over the trials.
fn comparison(r: &Review) -> (Vec<TrialColumn>, Vec<ComparisonRow>, Vec<TrialCostBar>) {
    let currency = &r.brief.fields.currency;
    let columns: Vec<TrialColumn> = r
        .trials
        .iter()
        .map(|t| {
            let trial = &t.context.trial;
            let (passed, required) = t.criteria_passed();
            let name_of = |id: TrialId| {
                r.trials
                    .iter()
                    .find(|o| o.context.trial.id == id)
                    .map(|o| o.context.trial.fields.name.clone())
            };
            TrialColumn {
                id: trial.id.to_string(),
                name: trial.fields.name.clone(),
                allocation: t
                    .context
                    .allocation
                    .as_ref()
                    .map(|a| {
                        let mut label = a.label();
                        if a.suggested {
                            label.push_str(" (suggested)");
                        }
                        label
                    })
                    .unwrap_or_else(|| "—".into()),
                provider: if trial.fields.provider.is_empty() {
                    "—".into()
                } else {
                    trial.fields.provider.clone()
                },
                decision: t.decision.decision.as_str(),
                meaning: first_screen::verdict_meaning(t.decision.decision),
                accepted: t.decision.accepted,
                recommended: r.recommendation.recommended == Some(trial.id),
                closest: r.recommendation.closest == Some(trial.id),
                criteria: format!("{passed} of {required} pass"),
                cost_per_job: match t.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
                    Some(Some(c)) => money::with_currency(c, currency),
                    Some(None) => "not known yet (nothing accepted)".into(),
                    None => "no ledger yet".into(),
                },
                utilization: t
                    .decision
                    .utilization
                    .and_then(|u| u.to_f64())
                    .map(money::percent)
                    .unwrap_or_else(|| "unknown".into()),
                changes: t
                    .changes
                    .iter()
                    .filter(|c| matches!(c.verdict, "better" | "worse"))
                    .map(|c| RerunChange {
                        key: change_label(&c.key),
                        better: c.verdict == "better",
                    })
                    .collect(),
                rerun_of: trial.fields.rerun_of.and_then(name_of),
                approve_words: approve_words(t, t.recorded_reservation()),
                reserves: needs_reservation(t.decision.decision),
                comparison: decision_view::comparison_sentence(t, currency),
            }
        })
        .collect();
    // Every criterion any trial evaluates, in the first trial's order, then the others'.
    let mut keys: Vec<(String, u8)> = Vec::new();
    for t in &r.trials {
        for c in &t.context.inputs.criteria {
            if !keys.iter().any(|(k, s)| *k == c.key && *s == c.stage) {
                keys.push((c.key.clone(), c.stage));
            }
        }
    }
    keys.sort_by_key(|(_, stage)| *stage);
    let rows = keys
        .into_iter()
        .map(|(key, stage)| ComparisonRow {
            metric: key.clone(),
            label: format!(
                "Stage {stage} · {}",
                decision_view::capitalized(&decision_view::criterion_name(&key))
            ),
            key: format!("{key}@{stage}"),
            cells: r
                .trials
                .iter()
                .map(|t| {
                    match t
                        .context
                        .inputs
                        .criteria
                        .iter()
                        .find(|c| c.key == key && c.stage == stage)
                    {
                        Some(c) => ComparisonCell {
                            value: c.value.as_ref().map(|v| shown(&key, v)).unwrap_or_else(|| "—".into()),
                            status: status_str(c.status),
                        },
                        None => ComparisonCell {
                            value: "—".into(),
                            status: "n/a",
                        },
                    }
                })
                .collect(),
        })
        .collect();
    let costs: Vec<(usize, Decimal)> = r
        .trials
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            t.context
                .inputs
                .ledger
                .as_ref()
                .and_then(|l| l.cost_per_job)
                .map(|c| (i, c))
        })
        .collect();
    let max = costs.iter().map(|(_, c)| *c).max().unwrap_or_default();
    let bars = costs
        .iter()
        .map(|(i, c)| {
            let t = &r.trials[*i];
            TrialCostBar {
                label: t.context.trial.fields.name.clone(),
                amount: money::with_currency(*c, currency),
                width: if max.is_zero() {
                    0.0
                } else {
                    (*c / max * Decimal::from(400)).round_dp(1).to_f64().unwrap_or(0.0)
                },
                recommended: r.recommendation.recommended == Some(t.context.trial.id),
            }
        })
        .collect();
    (columns, rows, bars)
}

/// The line that confirms a verdict just recorded, shown at the top after the redirect.
fn confirmation(r: &Review, decided: Option<&str>) -> Option<String> {
    let a = r.approval.as_ref()?;
    if decided? != a.row.id.to_string() {
        return None;
    }
    let at = a.row.decided_at.format("%Y-%m-%d %H:%M UTC");
    let currency = &r.brief.fields.currency;
    let trial = a.row.trial_id.and_then(|id| r.trial(id)).unwrap_or(&r.trials[r.chosen]);
    let recorded = recorded_reservation(r);
    Some(if a.row.verdict == ApprovalVerdict::Approve {
        let mut text = format!(
            "Approved by {} at {at}: {}",
            a.row.decided_by,
            decision_view::action(trial.decision.decision, trial, recorded.as_ref())
        );
        if let Some(res) = &recorded {
            text.push_str(&format!(
                ", {} a month, {} in all",
                money::sum_with_currency(res.monthly_cost, currency),
                money::sum_with_currency(res.total(), currency)
            ));
        }
        text.push('.');
        text
    } else {
        format!(
            "Rejected by {} at {at}: {} was not approved. “{}”",
            a.row.decided_by, a.row.decision, a.row.comment
        )
    })
}

/// The approve button's words: the action approving `t` records and the trial it names, so what
/// the button says is what is recorded ("Approve: stop renting 4 × H100 SXM — trial “4 × H100 · Cloud B”").
fn approve_words(t: &TrialReview, commitment: Option<&Reservation>) -> String {
    format!(
        "Approve: {} — trial “{}”",
        decision_view::action(t.decision.decision, t, commitment),
        t.context.trial.fields.name
    )
}

/// The form's monthly figure and the whole term, from the reservation the approval records
/// (computed by the review, with the manager's term and start applied). static/review.js
/// recomputes the whole term as the manager types.
fn preview(reservation: Option<&Reservation>, currency: &str) -> (String, String) {
    match reservation {
        Some(res) => (
            format!("{} a month", money::sum_with_currency(res.monthly_cost, currency)),
            format!(
                "{} over {}",
                money::sum_with_currency(res.total(), currency),
                super::model::months(res.term_months)
            ),
        ),
        None => ("needs a rate per GPU-hour".into(), String::new()),
    }
}

/// A reservation as the form shows it: every field, the computed ones read-only.
fn form_fields(res: &Reservation) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("gpu".to_owned(), res.gpu.clone()),
        ("count".to_owned(), res.gpus.to_string()),
        ("billing".to_owned(), res.billing.clone()),
        ("term_months".to_owned(), res.term_months.to_string()),
        ("start".to_owned(), res.start_date.to_string()),
        ("rate_per_gpu_hour".to_owned(), money::plain(res.rate_per_gpu_hour)),
    ])
}

/// The reservation the form holds for `t`: the computed one with the manager's choices (term,
/// start) when they are valid.
fn form_reservation(t: &TrialReview, typed: Option<&BTreeMap<String, String>>) -> Option<Reservation> {
    let mut res = t.recorded_reservation()?.clone();
    if let Some(typed) = typed {
        let choices: BTreeMap<String, String> = typed
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "term_months" | "start" | "start_date"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut chosen = res.clone();
        if apply_choices(&mut chosen, &choices).is_ok() {
            res = chosen;
        }
    }
    Some(res)
}

// Long, and reads better whole: it fills the review page's view field by field in the order the
// template shows them.
fn page(r: &Review, user: &PageUser, form: FormState, decided: Option<&str>) -> ReviewPage {
    let brief_id = r.brief.id.to_string();
    let selected = form.trial.and_then(|id| r.trial(id)).unwrap_or(&r.trials[r.chosen]);
    let form_commitment = form_reservation(selected, form.reservation.as_ref());
    // The form shows what the manager typed (kept after an error), over the computed fields.
    let mut reservation = form_commitment.as_ref().map(form_fields).unwrap_or_default();
    if let Some(typed) = &form.reservation {
        for (k, v) in typed {
            if matches!(k.as_str(), "term_months" | "start") {
                reservation.insert(k.clone(), v.clone());
            }
        }
    }
    let currency = &r.context.inputs.brief.currency;
    let (trial_columns, comparison_rows, trial_costs) = comparison(r);
    let (monthly_preview, monthly_total) = preview(form_commitment.as_ref(), currency);
    let chosen = &r.trials[r.chosen];
    // The commitment on the first screen: the approved reservation while it holds, else the one
    // approving the decided trial would record.
    let recorded = match &r.approval {
        Some(a) if a.row.verdict == ApprovalVerdict::Approve && !a.stale => recorded_reservation(r),
        _ => None,
    };
    let computed = chosen.recorded_reservation().cloned();
    let top_commitment = recorded.or(computed);
    let approval = approval_view(r);
    let changed = approval.as_ref().map(|a| a.changed.clone()).unwrap_or_default();
    let latency = latency_bars(r);
    let costs = cost_bars(r);
    ReviewPage {
        ctx: user.into(),
        renewal: None,
        brief_name: r.brief.fields.name.clone(),
        decision: r.decision.decision.as_str(),
        decision_meaning: first_screen::verdict_meaning(r.decision.decision),
        approval_line: first_screen::approval_line(r, &changed),
        approval_state: match &r.approval {
            None => "none",
            Some(a) if a.stale => "stale",
            Some(a) if a.row.verdict == ApprovalVerdict::Approve => "approved",
            Some(_) => "rejected",
        },
        operating_line: first_screen::operating_line(chosen),
        selected_mismatch: selected.context.gpu_mismatch.as_ref().map(|(_, named)| named.clone()),
        gpu_mismatch: chosen
            .context
            .gpu_mismatch
            .as_ref()
            .map(|(id, named)| (id.to_string(), named.clone())),
        reservation_note: form_commitment.as_ref().map(|c| c.note.clone()).unwrap_or_default(),
        reservation_missing: selected
            .reservation
            .as_ref()
            .and_then(|x| x.as_ref().err())
            .map(|why| (*why).to_owned())
            .unwrap_or_default(),
        action: approve_words(selected, form_commitment.as_ref()),
        selected_name: selected.context.trial.fields.name.clone(),
        comparison: decision_view::comparison_sentence(selected, currency),
        reserved_price_link: (!chosen.decision.reservation.break_even_known)
            .then(|| first_screen::reserved_price_import(chosen, currency)),
        why: r
            .decision
            .reasons
            .first()
            .map(|reason| decision_view::reason_sentence(reason, chosen, currency, r.brief.fields.cost_unit.as_str()))
            .unwrap_or_default(),
        deciding_rule: r
            .decision
            .reasons
            .first()
            .map(|x| x.rule.to_string())
            .unwrap_or_default(),
        brief_lines: first_screen::brief_lines(r),
        figures: first_screen::money_figures(r, top_commitment.as_ref()),
        flash: confirmation(r, decided),
        field_errors: form.field_errors,
        problem: form.problem,
        comment: form.comment,
        override_choice: form.override_choice,
        override_reason: form.override_reason,
        monthly_total,
        currency: currency.clone(),
        approve_verb: match selected.decision.decision {
            Verdict::Reserve => "reserve",
            Verdict::Dedicate => "dedicate",
            Verdict::Scale => "scale to",
            _ => "",
        },
        accepted: r.decision.accepted,
        reasons: r.decision.reasons.iter().map(|x| reason_view(x, r)).collect(),
        stages: stages(r),
        missing: r
            .decision
            .missing
            .iter()
            .map(|(stage, keys)| {
                (
                    format!("Stage {stage} · {}", STAGE_NAMES[usize::from(stage - 1).min(4)]),
                    keys.join(", "),
                )
            })
            .collect(),
        latency,
        costs,
        cost_per_job: match r.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
            Some(Some(c)) => money::with_currency(c, currency),
            Some(None) => "not known yet — nothing accepted".into(),
            None => "no ledger yet".into(),
        },
        approval,
        may_decide: user.0.role >= Role::Manager,
        needs_reservation: needs_reservation(selected.decision.decision),
        reservation,
        monthly_preview,
        digest: r.decision.inputs_digest.clone(),
        brief_id,
        money: money_section(r),
        kv: r.context.kv.clone(),
        several_trials: r.trials.len() > 1,
        trial_name: r.context.trial.fields.name.clone(),
        recommended: r
            .recommendation
            .recommended
            .and_then(|id| r.trial(id))
            .map(|t| t.context.trial.fields.name.clone()),
        closest: r
            .recommendation
            .closest
            .and_then(|id| r.trial(id))
            .map(|t| (t.context.trial.fields.name.clone(), lacks(t))),
        selected_trial: selected.context.trial.id.to_string(),
        selected_decision: selected.decision.decision.as_str(),
        trial_columns,
        comparison_rows,
        trial_costs,
    }
}

/// What a trial that cannot be recommended still lacks: its failing and missing required
/// criteria, or the rule that stopped it.
fn lacks(t: &TrialReview) -> String {
    let mut out: Vec<String> = t
        .context
        .inputs
        .criteria
        .iter()
        .filter(|c| {
            c.required
                && matches!(
                    c.status,
                    super::decision::Status::Fail | super::decision::Status::Missing
                )
        })
        .map(|c| match c.status {
            super::decision::Status::Fail => format!("a passing {}", decision_view::criterion_name(&c.key)),
            _ => decision_view::criterion_name(&c.key),
        })
        .collect();
    if out.is_empty() {
        if let Some(reason) = t.decision.reasons.first().filter(|x| x.decision == Verdict::Stop) {
            out.push(format!("a way past rule {} ({})", reason.rule, reason.says));
        }
    }
    out.join("; ")
}

/// `?decided=<approval id>`: the redirect after a verdict, so the page confirms it at the top;
/// `?trial=<id>`: the trial the approval form names (choosing one without JavaScript reloads the
/// form with it, so the approve button's words are that trial's).
#[derive(serde::Deserialize)]
struct ReviewQuery {
    decided: Option<String>,
    trial: Option<String>,
}

async fn review_page(
    State(state): State<AppState>,
    user: PageUser,
    Path(id): Path<BriefId>,
    ApiQuery(q): ApiQuery<ReviewQuery>,
) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    // A trial id that is not one of the brief's leaves the form on the recommended trial.
    let form = FormState {
        trial: q.trial.and_then(|t| t.trim().parse::<TrialId>().ok()),
        ..FormState::default()
    };
    let mut shown = page(&r, &user, form, q.decided.as_deref());
    shown.renewal = crate::commitments::service::renewal_notice(&state, id).await?;
    render(&shown)
}

/// The label of an approval form field, for the list of problems at the top.
fn field_label(field: &str) -> &str {
    match field {
        "reservation.gpu" => "GPU model",
        "reservation.count" => "Count (GPUs)",
        "reservation.billing" => "Billing model",
        "reservation.term_months" => "Term (months)",
        "reservation.start" | "reservation.start_date" => "Start",
        "reservation.rate_per_gpu_hour" => "Rate per GPU-hour",
        "comment" => "Comment",
        "trial" => "Trial",
        "decision" => "Action to approve instead",
        "override_reason" => "Why (override)",
        "acknowledge_mismatch" => "Another GPU in the evidence",
        "verdict" => "Verdict",
        other => other,
    }
}

/// A field's message as the form shows it: the field's name is the label beside it.
fn field_messages(errors: &[FieldError]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for e in errors {
        let message = decision_view::capitalized(&e.message);
        out.entry(e.field.clone())
            .and_modify(|m| {
                m.push_str("; ");
                m.push_str(&e.message);
            })
            .or_insert(message);
    }
    out
}

async fn verdict(
    State(state): State<AppState>,
    Path(id): Path<BriefId>,
    CsrfForm(user, mut form): CsrfForm,
) -> PageResult<Response> {
    let reservation: BTreeMap<String, String> = form
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("reservation.").map(|k| (k.to_owned(), v.clone())))
        .collect();
    let trial = form.get("trial").and_then(|t| t.trim().parse::<TrialId>().ok());
    // The override button sends `approve-override`: an approval of the action chosen in the
    // override select; the approve button approves the computed action whatever the select says.
    let overriding = form.get("verdict").map(String::as_str) == Some("approve-override");
    if overriding {
        form.insert("verdict".into(), "approve".into());
    }
    let override_choice = form.get("decision").cloned().unwrap_or_default();
    let override_reason = form.get("override_reason").cloned().unwrap_or_default();
    let request = VerdictRequest {
        verdict: form.remove("verdict").unwrap_or_default(),
        comment: form.remove("comment").unwrap_or_default(),
        inputs_digest: form.remove("inputs_digest").unwrap_or_default(),
        trial,
        reservation: reservation.clone(),
        decision: overriding.then(|| override_choice.clone()),
        override_reason: override_reason.clone(),
        acknowledge_mismatch: form.get("acknowledge_mismatch").is_some_and(|v| v == "yes"),
    };
    let comment = request.comment.clone();
    match service::record_verdict(&state, id, &user.principal(), request).await {
        // Post/redirect/get: a reload shows the confirmation again and records nothing twice.
        Ok(row) => Ok(Redirect::to(&format!("/briefs/{id}/review?decided={}", row.id)).into_response()),
        Err(AppError::Forbidden(m)) => Err(PageError(AppError::Forbidden(m))),
        Err(e @ (AppError::Validation(_) | AppError::Conflict(_))) => {
            let status = e.status();
            let (field_errors, problem) = match &e {
                AppError::Validation(errors) => {
                    let fields = field_messages(errors);
                    let problem = format!(
                        "Nothing was recorded: {} to correct below.",
                        if fields.len() == 1 {
                            "one field".to_owned()
                        } else {
                            format!("{} fields", fields.len())
                        }
                    );
                    (fields, problem)
                }
                _ => (
                    BTreeMap::new(),
                    "Nothing was recorded: the review changed since you loaded it (new evidence, ledger lines, \
                     prices or a change to the card). This is the current review: read it and decide again."
                        .to_owned(),
                ),
            };
            let r = service::review(&state, id).await?;
            let form = FormState {
                reservation: Some(reservation),
                trial,
                comment,
                override_choice,
                override_reason,
                field_errors,
                problem,
            };
            let mut response = render(&page(&r, &user, form, None))?;
            *response.status_mut() = status;
            Ok(response)
        }
        Err(e) => Err(PageError(e)),
    }
}

struct AuditLine {
    at: String,
    actor: String,
    action: String,
    details: String,
}

#[derive(Template)]
#[template(path = "review/audit.html")]
struct AuditPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    entries: Vec<AuditLine>,
}

async fn audit_page(State(state): State<AppState>, user: PageUser, Path(id): Path<BriefId>) -> PageResult<Response> {
    let brief = service::load_brief(&state, id).await?;
    let entries = crate::audit::for_brief(&state.pool, id)
        .await?
        .into_iter()
        .map(|e| AuditLine {
            at: e.at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            actor: e.actor,
            action: e.action,
            details: e.details.0.to_string(),
        })
        .collect();
    render(&AuditPage {
        ctx: (&user).into(),
        brief_id: id.to_string(),
        brief_name: brief.fields.name,
        entries,
    })
}

/// Filters for `decision.md`, a Markdown file askama does not escape: whatever a person or an agent
/// typed (brief and trial names, comments, values) is escaped so it stays text there, and in any
/// HTML a Markdown viewer makes of it.
mod filters {
    /// Backslash-escapes the characters Markdown (and inline HTML) act on; line breaks become
    /// spaces, so a value cannot start a heading or end a table row.
    pub fn md<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        let text = value.to_string();
        let mut out = String::with_capacity(text.len());
        for c in text.chars() {
            match c {
                '\\' | '`' | '*' | '_' | '[' | ']' | '<' | '>' | '|' | '!' | '&' | '~' | '#' | '(' | ')' => {
                    out.push('\\');
                    out.push(c);
                }
                c if c.is_control() => out.push(' '),
                c => out.push(c),
            }
        }
        Ok(out)
    }

    /// "Must be a date" → "must be a date", after a field's label and a colon.
    pub fn lower_first<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        let text = value.to_string();
        let mut chars = text.chars();
        Ok(match chars.next() {
            Some(first) => first.to_lowercase().chain(chars).collect(),
            None => text,
        })
    }

    /// For inside a code span, where backslashes do not escape: no backticks, no line breaks.
    pub fn code<T: std::fmt::Display>(value: T, _: &dyn askama::Values) -> askama::Result<String> {
        Ok(value
            .to_string()
            .chars()
            .map(|c| if c == '`' || c.is_control() { '\'' } else { c })
            .collect())
    }
}

#[derive(Template)]
#[template(path = "review/decision.md")]
struct DecisionRecord<'a> {
    r: &'a Review,
    recommended: Option<String>,
    /// name, provider, allocation, decision, accepted, criteria, cost per job.
    trial_rows: Vec<(String, String, String, &'static str, &'static str, String, String)>,
    approved_trial: Option<String>,
    generated: String,
    stages: Vec<StageView>,
    reasons: Vec<ReasonView>,
    approval: Option<ApprovalView>,
    sizing_rows: Vec<String>,
    money: MoneySection,
    /// `| --- | --- |` for the money table: one column per trial after the figure's name.
    money_rule: String,
    /// The deciding reason in one plain sentence.
    why: String,
    /// The ledger's figures as people read them: (figure, value).
    ledger_rows: Vec<(String, String)>,
    ceiling: String,
    /// Weights, KV cache, overhead and total, in GiB with two decimals.
    sizing_line: String,
    /// The reservation recorded (or that approving would record), field by field.
    reservation_rows: Vec<(String, String)>,
    /// Each trial's reservation comparison in words: (trial, sentence).
    comparison_lines: Vec<(String, String)>,
    /// The public URL without its trailing slash: links in the record are absolute.
    base: String,
}

impl DecisionRecord<'_> {
    /// A reservation field's name as the page says it (the Markdown file keeps the field names).
    fn label<'k>(&self, key: &'k str) -> &'k str {
        match key {
            "trial" => "Trial",
            "provider" => "Provider",
            "gpu" => "GPU",
            "gpus_per_node" => "GPUs per node",
            "replicas" => "Replicas (nodes)",
            "gpus" => "GPUs in all",
            "billing" => "Billing",
            "rate_per_gpu_hour" => "Rate per GPU-hour",
            "term_months" => "Term, months",
            "monthly_cost" => "Monthly cost",
            "whole term" => "Whole term",
            "start_date" => "Starts",
            "note" => "Where the rate comes from",
            other => other,
        }
    }

    /// A reservation field's value as the page shows it: the trial by its name, not its id.
    fn shown(&self, key: &str, value: &str) -> String {
        if key == "trial" {
            if let Some(t) = value.parse::<TrialId>().ok().and_then(|id| self.r.trial(id)) {
                return t.context.trial.fields.name.clone();
            }
        }
        value.to_owned()
    }

    /// A link of the record, absolute from the public URL when it is a path of this server.
    fn link(&self, href: &str) -> String {
        if href.starts_with('/') {
            format!("{}{href}", self.base)
        } else {
            href.to_owned()
        }
    }
}

/// A reservation as the decision record lists it, every amount through the money formatter.
fn reservation_rows(res: &Reservation) -> Vec<(String, String)> {
    let c = &res.currency;
    vec![
        ("trial".into(), res.trial.to_string()),
        ("provider".into(), res.provider.clone().unwrap_or_else(|| "—".into())),
        ("gpu".into(), res.gpu.clone()),
        ("gpus_per_node".into(), res.gpus_per_node.to_string()),
        ("replicas".into(), res.replicas.to_string()),
        ("gpus".into(), res.gpus.to_string()),
        ("billing".into(), res.billing.clone()),
        (
            "rate_per_gpu_hour".into(),
            money::with_currency(res.rate_per_gpu_hour, c),
        ),
        ("term_months".into(), res.term_months.to_string()),
        ("monthly_cost".into(), money::with_currency(res.monthly_cost, c)),
        ("whole term".into(), money::with_currency(res.total(), c)),
        ("start_date".into(), res.start_date.to_string()),
        ("note".into(), res.note.clone()),
    ]
}

/// The ledger table of the decision record, every amount through the money formatter.
fn record_ledger_rows(r: &Review) -> Vec<(String, String)> {
    let Some(l) = &r.context.inputs.ledger else {
        return Vec::new();
    };
    let currency = &r.brief.fields.currency;
    let mut rows: Vec<(String, String)> = l
        .totals
        .iter()
        .map(|(k, v)| (k.clone(), money::with_currency(*v, currency)))
        .collect();
    rows.push(("total".into(), money::with_currency(l.total, currency)));
    rows.push((
        "accelerator GPU-hours".into(),
        l.accelerator_hours.to_f64().map(money::figure).unwrap_or_default(),
    ));
    rows.push((
        "cost per completed job".into(),
        match l.cost_per_job {
            Some(c) => money::with_currency(c, currency),
            None => "— (nothing accepted yet)".into(),
        },
    ));
    rows.push((
        "utilization (busy share of paid GPU hours)".into(),
        r.decision
            .utilization
            .and_then(|u| u.to_f64())
            .map(money::percent)
            .unwrap_or_else(|| "unknown".into()),
    ));
    rows
}

/// The decision record of a review, for its Markdown file and its page alike; `base` (the public
/// URL) makes every link in it absolute, so the file still points somewhere once mailed.
// Long, and reads better whole: it fills the decision record field by field in the order the record
// shows them.
fn decision_record<'a>(r: &'a Review, base: &str) -> DecisionRecord<'a> {
    let name_of = |id: TrialId| r.trial(id).map(|t| t.context.trial.fields.name.clone());
    DecisionRecord {
        recommended: r.recommendation.recommended.and_then(name_of),
        approved_trial: r.approval.as_ref().and_then(|a| a.row.trial_id).and_then(name_of),
        trial_rows: r
            .trials
            .iter()
            .map(|t| {
                let (passed, required) = t.criteria_passed();
                (
                    t.context.trial.fields.name.clone(),
                    if t.context.trial.fields.provider.is_empty() {
                        "—".to_owned()
                    } else {
                        t.context.trial.fields.provider.clone()
                    },
                    t.context.allocation.as_ref().map(|a| a.label()).unwrap_or_default(),
                    t.decision.decision.as_str(),
                    if t.decision.accepted { "yes" } else { "no" },
                    format!("{passed} of {required}"),
                    match t.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job) {
                        Some(c) => money::with_currency(c, &r.brief.fields.currency),
                        None => "—".to_owned(),
                    },
                )
            })
            .collect(),
        generated: chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC").to_string(),
        stages: stages(r),
        reasons: r.decision.reasons.iter().map(|x| reason_view(x, r)).collect(),
        approval: approval_view(r),
        sizing_rows: r
            .context
            .sizing
            .options
            .iter()
            .filter(|o| o.fits)
            .take(5)
            .map(|o| {
                format!(
                    "| {} | {} | {} GiB | {:.1} % |",
                    o.gpu, o.count, o.memory_gib, o.headroom_pct
                )
            })
            .collect(),
        money: money_section(r),
        money_rule: "| --- ".repeat(r.trials.len() + 1) + "|",
        why: r
            .decision
            .reasons
            .first()
            .map(|reason| {
                decision_view::reason_sentence(
                    reason,
                    &r.trials[r.chosen],
                    &r.brief.fields.currency,
                    r.brief.fields.cost_unit.as_str(),
                )
            })
            .unwrap_or_default(),
        ledger_rows: record_ledger_rows(r),
        comparison_lines: r
            .trials
            .iter()
            .map(|t| {
                (
                    t.context.trial.fields.name.clone(),
                    decision_view::comparison_sentence(t, &r.brief.fields.currency),
                )
            })
            .collect(),
        reservation_rows: match &r.approval {
            Some(a) if a.row.verdict == ApprovalVerdict::Approve => recorded_reservation(r),
            Some(_) => None,
            None => r.trials[r.chosen].recorded_reservation().cloned(),
        }
        .as_ref()
        .map(reservation_rows)
        .unwrap_or_default(),
        ceiling: match r.brief.fields.max_cost_per_job {
            Some(c) => format!(
                "{} per {}",
                money::with_currency(c, &r.brief.fields.currency),
                r.brief.fields.cost_unit.as_str()
            ),
            None => "none".into(),
        },
        sizing_line: {
            let z = &r.context.sizing;
            format!(
                "Weights {:.2} GiB, KV cache {:.2} GiB, overhead {:.2} GiB, total {:.2} GiB.",
                z.weights_gib, z.kv_cache_gib, z.overhead_gib, z.total_gib
            )
        },
        base: base.trim_end_matches('/').to_owned(),
        r,
    }
}

async fn record_md(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<BriefId>,
) -> Result<Response, AppError> {
    caller.may_read_brief(id)?;
    let r = service::review(&state, id).await?;
    let body = decision_record(&r, &state.config.public_url).render()?;
    Ok(([(header::CONTENT_TYPE, "text/markdown; charset=utf-8")], body).into_response())
}

/// The decision record as a page: what `decision.md` holds, rendered, beside its downloads.
#[derive(Template)]
#[template(path = "review/decision.html")]
struct DecisionPage<'a> {
    ctx: PageContext,
    record: DecisionRecord<'a>,
}

async fn record_page(State(state): State<AppState>, user: PageUser, Path(id): Path<BriefId>) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    render(&DecisionPage {
        ctx: (&user).into(),
        record: decision_record(&r, &state.config.public_url),
    })
}

async fn record_json(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<BriefId>,
) -> Result<Response, AppError> {
    caller.may_read_brief(id)?;
    let r = service::review(&state, id).await?;
    let mut json = super::answer::review_json(&r);
    if let Some(obj) = json.as_object_mut() {
        obj.insert("brief".into(), serde_json::to_value(&r.brief).unwrap_or_default());
        obj.insert(
            "sizing".into(),
            serde_json::to_value(&r.context.sizing).unwrap_or_default(),
        );
        obj.insert(
            "inputs".into(),
            serde_json::to_value(&r.context.inputs).unwrap_or_default(),
        );
        obj.insert("generated_at".into(), serde_json::json!(chrono::Utc::now()));
    }
    Ok((StatusCode::OK, Json(json)).into_response())
}
