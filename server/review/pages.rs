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
use rust_decimal::Decimal;

use uuid::Uuid;

use super::{
    decision::{Reason, Status},
    model::monthly_cost,
    repo,
    service::{self, needs_reservation, reservation_defaults, Review, VerdictRequest},
};
use crate::{
    auth::Role,
    error::AppError,
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
    rule: u8,
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
        rule: r.rule,
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
    }
}

fn show_value(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
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
                    value: c.value.as_ref().map(show_value).unwrap_or_else(|| "—".into()),
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

fn page(r: &Review, user: &PageUser, error: String, reservation: Option<BTreeMap<String, String>>) -> ReviewPage {
    let brief_id = r.brief.id.to_string();
    let reservation = reservation.unwrap_or_else(|| reservation_defaults(r));
    let monthly_preview = match (
        reservation.get("count").and_then(|c| c.parse::<u32>().ok()),
        reservation
            .get("rate_per_gpu_hour")
            .and_then(|c| c.parse::<Decimal>().ok()),
    ) {
        (Some(count), Some(rate)) => format!("{} {}", monthly_cost(count, rate), r.context.inputs.brief.currency),
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
        needs_reservation: needs_reservation(r.decision.decision),
        reservation,
        monthly_preview,
        digest: r.decision.inputs_digest.clone(),
        error,
        brief_id,
    }
}

async fn review_page(State(state): State<AppState>, user: PageUser, Path(id): Path<Uuid>) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    render(&page(&r, &user, String::new(), None))
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
    let request = VerdictRequest {
        verdict: form.remove("verdict").unwrap_or_default(),
        comment: form.remove("comment").unwrap_or_default(),
        inputs_digest: form.remove("inputs_digest").unwrap_or_default(),
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
            let mut merged = reservation_defaults(&r);
            merged.extend(reservation);
            let mut response = render(&page(&r, &user, message, Some(merged)))?;
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

#[derive(Template)]
#[template(path = "review/decision.md")]
struct DecisionRecord<'a> {
    r: &'a Review,
    generated: String,
    stages: Vec<StageView>,
    reasons: Vec<ReasonView>,
    approval: Option<ApprovalView>,
    sizing_rows: Vec<String>,
}

async fn record_md(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> Result<Response, AppError> {
    caller.may_read_brief(id)?;
    let r = service::review(&state, id).await?;
    let brief_id = id.to_string();
    let record = DecisionRecord {
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
