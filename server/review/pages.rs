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

use uuid::Uuid;

use super::{
    decision::{Reason, Status},
    gather::TrialKv,
    model::monthly_cost,
    money_view::{money_section, MoneySection},
    repo,
    service::{self, needs_reservation, reservation_defaults, Review, VerdictRequest},
};
use crate::{
    auth::Role,
    error::AppError,
    money,
    state::AppState,
    web::{
        auth::{ApiCaller, CsrfForm, PageUser},
        extract::Path,
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/briefs/{id}/review", get(review_page).post(verdict))
        .route("/briefs/{id}/audit", get(audit_page))
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
    facts: Vec<FactView>,
}

struct CriterionView {
    key: String,
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
    y: f64,
    pass: bool,
}

struct CostBar {
    label: String,
    amount: String,
    width: f64,
    y: f64,
}

struct ApprovalView {
    verdict: String,
    decision: String,
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
    brief_id: String,
    brief_name: String,
    decision: &'static str,
    accepted: bool,
    reasons: Vec<ReasonView>,
    stages: Vec<StageView>,
    missing: Vec<(String, String)>,
    latency: Vec<LatencyBar>,
    latency_height: f64,
    costs: Vec<CostBar>,
    cost_height: f64,
    cost_per_job: String,
    approval: Option<ApprovalView>,
    may_decide: bool,
    needs_reservation: bool,
    reservation: BTreeMap<String, String>,
    monthly_preview: String,
    digest: String,
    error: String,
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
    trial_costs_height: f64,
    money: MoneySection,
    /// The decided trial's predicted KV-cache capacity beside vLLM's logged one.
    kv: Option<TrialKv>,
}

impl ReviewPage {
    fn reserved(&self, field: &str) -> &str {
        self.reservation.get(field).map(String::as_str).unwrap_or("")
    }
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

fn reason_view(r: &Reason, brief_id: &str) -> ReasonView {
    ReasonView {
        rule: r.rule.to_string(),
        decision: r.decision.as_str(),
        says: r.says.clone(),
        facts: r
            .facts
            .iter()
            .map(|f| FactView {
                label: f.label.clone(),
                value: f.value.clone(),
                href: href(&f.link, brief_id),
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

fn show_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
                    rule: format!("{} {}", c.op, show_value(&c.threshold)),
                    value: match (c.value.as_ref(), nccl_share(r, &c.key)) {
                        (Some(v), Some(share)) => format!("{} ({share})", show_value(v)),
                        (Some(v), None) => show_value(v),
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
const ROW: f64 = 28.0;

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
            Some((
                c.key.trim_start_matches("serving.").to_owned(),
                v,
                t,
                c.status == Status::Pass,
            ))
        })
        .collect();
    // Each row on its own scale (milliseconds differ by orders of magnitude between metrics): the
    // threshold sits at the same place in every row, so a bar past the line is a miss at a glance.
    rows.into_iter()
        .enumerate()
        .map(|(i, (label, value, threshold, pass))| {
            let max = value.max(threshold).max(f64::MIN_POSITIVE) * 1.25;
            LatencyBar {
                label,
                value,
                threshold,
                value_width: (value / max * CHART_WIDTH).max(1.0),
                threshold_x: 150.0 + threshold / max * CHART_WIDTH,
                y: i as f64 * ROW,
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
        .enumerate()
        .map(|(i, (label, amount))| CostBar {
            label: label.clone(),
            amount: format!("{amount} {}", r.context.inputs.brief.currency),
            width: if max > Decimal::ZERO {
                (amount / max * Decimal::from(380))
                    .round_dp(1)
                    .to_string()
                    .parse()
                    .unwrap_or(0.0)
            } else {
                0.0
            },
            y: i as f64 * ROW,
        })
        .collect()
}

fn approval_view(r: &Review) -> Option<ApprovalView> {
    let a = r.approval.as_ref()?;
    Some(ApprovalView {
        verdict: a.row.verdict.clone(),
        decision: a.row.decision.clone(),
        by: a.row.decided_by.clone(),
        at: a.row.decided_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        comment: a.row.comment.clone(),
        stale: a.stale,
        changed: a.changed.join(", "),
        reservation: a.row.reservation_gpu.as_ref().map(|gpu| {
            format!(
                "{} × {gpu}, {}, {} months from {}, expected {} {} a month",
                a.row.reservation_count.unwrap_or(0),
                a.row.reservation_billing.clone().unwrap_or_default(),
                a.row.reservation_term_months.unwrap_or(0),
                a.row.reservation_start.map(|d| d.to_string()).unwrap_or_default(),
                a.row
                    .reservation_monthly_cost
                    .map(|c| c.to_string())
                    .unwrap_or_default(),
                r.context.inputs.brief.currency,
            )
        }),
    })
}

/// One trial's column in the comparison.
struct TrialColumn {
    id: String,
    name: String,
    allocation: String,
    provider: String,
    decision: &'static str,
    accepted: bool,
    recommended: bool,
    closest: bool,
    criteria: String,
    cost_per_job: String,
    utilization: String,
    /// For a re-run: "better: …; worse: …" since the trial it re-runs.
    changes: Vec<RerunChange>,
    rerun_of: Option<String>,
}

/// A criterion that moved since the trial a re-run re-runs.
struct RerunChange {
    key: String,
    better: bool,
}

/// One trial's value and status of a criterion.
struct ComparisonCell {
    value: String,
    status: &'static str,
}

/// One row of the comparison: a criterion (key and stage) with each trial's value and status.
struct ComparisonRow {
    key: String,
    label: String,
    cells: Vec<ComparisonCell>,
}

/// One bar of the cost-per-job chart across trials.
struct TrialCostBar {
    label: String,
    amount: String,
    width: f64,
    y: f64,
    recommended: bool,
}

fn comparison(r: &Review) -> (Vec<TrialColumn>, Vec<ComparisonRow>, Vec<TrialCostBar>) {
    let currency = &r.brief.fields.currency;
    let columns: Vec<TrialColumn> = r
        .trials
        .iter()
        .map(|t| {
            let trial = &t.context.trial;
            let (passed, required) = t.criteria_passed();
            let name_of = |id: Uuid| {
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
                accepted: t.decision.accepted,
                recommended: r.recommendation.recommended == Some(trial.id),
                closest: r.recommendation.closest == Some(trial.id),
                criteria: format!("{passed} of {required} pass"),
                cost_per_job: match t.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
                    Some(Some(c)) => money::with_currency(c, currency),
                    Some(None) => "undefined (nothing accepted)".into(),
                    None => "no ledger yet".into(),
                },
                utilization: t
                    .decision
                    .utilization
                    .map(|u| format!("{} %", (u * Decimal::from(100)).round_dp(0)))
                    .unwrap_or_else(|| "unknown".into()),
                changes: t
                    .changes
                    .iter()
                    .filter(|c| matches!(c.verdict, "better" | "worse"))
                    .map(|c| RerunChange {
                        key: c.key.clone(),
                        better: c.verdict == "better",
                    })
                    .collect(),
                rerun_of: trial.fields.rerun_of.and_then(name_of),
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
            label: format!("Stage {stage} · {key}"),
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
                            value: c.value.as_ref().map(show_value).unwrap_or_else(|| "—".into()),
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
        .enumerate()
        .map(|(row, (i, c))| {
            let t = &r.trials[*i];
            TrialCostBar {
                label: t.context.trial.fields.name.clone(),
                amount: money::with_currency(*c, currency),
                width: if max.is_zero() {
                    0.0
                } else {
                    (*c / max * Decimal::from(400)).round_dp(1).to_f64().unwrap_or(0.0)
                },
                y: row as f64 * ROW,
                recommended: r.recommendation.recommended == Some(t.context.trial.id),
            }
        })
        .collect();
    (columns, rows, bars)
}

fn page(
    r: &Review,
    user: &PageUser,
    error: String,
    reservation: Option<BTreeMap<String, String>>,
    selected: Option<Uuid>,
) -> ReviewPage {
    let brief_id = r.brief.id.to_string();
    let selected = selected.and_then(|id| r.trial(id)).unwrap_or(&r.trials[r.chosen]);
    let reservation = reservation.unwrap_or_else(|| reservation_defaults(selected));
    let (trial_columns, comparison_rows, trial_costs) = comparison(r);
    let monthly_preview = match (
        reservation.get("count").and_then(|c| c.parse::<u32>().ok()),
        reservation
            .get("rate_per_gpu_hour")
            .and_then(|c| c.parse::<Decimal>().ok()),
    ) {
        (Some(count), Some(rate)) => money::with_currency(monthly_cost(count, rate), &r.context.inputs.brief.currency),
        _ => "needs a rate per GPU-hour (no accelerator lines in the ledger yet)".into(),
    };
    let latency = latency_bars(r);
    let costs = cost_bars(r);
    ReviewPage {
        ctx: user.into(),
        brief_name: r.brief.fields.name.clone(),
        decision: r.decision.decision.as_str(),
        accepted: r.decision.accepted,
        reasons: r.decision.reasons.iter().map(|x| reason_view(x, &brief_id)).collect(),
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
        latency_height: latency.len() as f64 * ROW + 10.0,
        latency,
        cost_height: costs.len() as f64 * ROW + 10.0,
        costs,
        cost_per_job: match r.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
            Some(Some(c)) => format!("{c} {}", r.context.inputs.brief.currency),
            Some(None) => "undefined — nothing accepted yet".into(),
            None => "no ledger yet".into(),
        },
        approval: approval_view(r),
        may_decide: user.0.role >= Role::Manager,
        needs_reservation: needs_reservation(selected.decision.decision),
        reservation,
        monthly_preview,
        digest: r.decision.inputs_digest.clone(),
        error,
        brief_id,
        trial_costs_height: trial_costs.len() as f64 * ROW + 10.0,
        money: money_section(r),
        kv: r.context.kv.clone(),
        several_trials: r.trials.len() > 1,
        trial_name: r.context.trial.fields.name.clone(),
        recommended: r
            .recommendation
            .recommended
            .and_then(|id| r.trial(id))
            .map(|t| t.context.trial.fields.name.clone()),
        closest: r.recommendation.closest.and_then(|id| r.trial(id)).map(|t| {
            (
                t.context.trial.fields.name.clone(),
                t.decision
                    .missing
                    .values()
                    .flatten()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(", "),
            )
        }),
        selected_trial: selected.context.trial.id.to_string(),
        selected_decision: selected.decision.decision.as_str(),
        trial_columns,
        comparison_rows,
        trial_costs,
    }
}

async fn review_page(State(state): State<AppState>, user: PageUser, Path(id): Path<Uuid>) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    render(&page(&r, &user, String::new(), None, None))
}

async fn verdict(
    State(state): State<AppState>,
    Path(id): Path<Uuid>,
    CsrfForm(user, mut form): CsrfForm,
) -> PageResult<Response> {
    let reservation: BTreeMap<String, String> = form
        .iter()
        .filter_map(|(k, v)| k.strip_prefix("reservation.").map(|k| (k.to_owned(), v.clone())))
        .collect();
    let trial = form.get("trial").and_then(|t| Uuid::parse_str(t.trim()).ok());
    let request = VerdictRequest {
        verdict: form.remove("verdict").unwrap_or_default(),
        comment: form.remove("comment").unwrap_or_default(),
        inputs_digest: form.remove("inputs_digest").unwrap_or_default(),
        trial,
        reservation: reservation.clone(),
    };
    match service::record_verdict(&state, id, &user.principal(), request).await {
        Ok(_) => Ok(Redirect::to(&format!("/briefs/{id}/review")).into_response()),
        Err(AppError::Forbidden(m)) => Err(PageError(AppError::Forbidden(m))),
        Err(e @ (AppError::Validation(_) | AppError::Conflict(_))) => {
            let status = e.status();
            let message = match &e {
                AppError::Validation(errors) => errors
                    .iter()
                    .map(|f| format!("{} {}", f.field, f.message))
                    .collect::<Vec<_>>()
                    .join("; "),
                other => other.to_string(),
            };
            let r = service::review(&state, id).await?;
            let selected = trial.and_then(|t| r.trial(t)).unwrap_or(&r.trials[r.chosen]);
            let mut merged = reservation_defaults(selected);
            merged.extend(reservation);
            let mut response = render(&page(&r, &user, message, Some(merged), trial))?;
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

async fn audit_page(State(state): State<AppState>, user: PageUser, Path(id): Path<Uuid>) -> PageResult<Response> {
    let brief = service::load_brief(&state, id).await?;
    let entries = repo::audit_for_brief(&state.pool, id)
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
}

async fn record_md(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Response, AppError> {
    caller.may_read_brief(id)?;
    let r = service::review(&state, id).await?;
    let brief_id = id.to_string();
    let name_of = |id: Uuid| r.trial(id).map(|t| t.context.trial.fields.name.clone());
    let record = DecisionRecord {
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
        stages: stages(&r),
        reasons: r.decision.reasons.iter().map(|x| reason_view(x, &brief_id)).collect(),
        approval: approval_view(&r),
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
        money: money_section(&r),
        money_rule: "| --- ".repeat(r.trials.len() + 1) + "|",
        r: &r,
    };
    let body = record.render()?;
    Ok(([(header::CONTENT_TYPE, "text/markdown; charset=utf-8")], body).into_response())
}

async fn record_json(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Response, AppError> {
    caller.may_read_brief(id)?;
    let r = service::review(&state, id).await?;
    let mut json = service::review_json(&r);
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
