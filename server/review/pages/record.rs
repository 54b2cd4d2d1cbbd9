//! The decision record: `decision.md`, the page that shows it, and `decision.json`; and the
//! filters that keep what people typed as text in the Markdown.

use askama::Template;
use axum::{
    extract::State,
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use rust_decimal::prelude::ToPrimitive;

use super::{
    approval::{approval_view, recorded_reservation, ApprovalView},
    criteria::{reason_view, stages, ReasonView, StageView},
};
use crate::{
    auth::Principal,
    error::AppError,
    figures,
    ids::{BriefId, TrialId},
    review::{
        answer,
        cost_at_slo_view::{money_section, MoneySection},
        decision_view,
        model::{ApprovalVerdict, Reservation},
        service::{self, Review, TrialReview},
    },
    state::AppState,
    web::{
        auth::{ApiCall, PageUser},
        extract::BriefPath,
        page::{render, PageContext, PageResult},
    },
};

/// Filters for `decision.md`, a Markdown file askama does not escape: whatever a person or an agent
/// typed (brief and trial names, comments, values) is escaped so it stays text there, and in any
/// HTML a Markdown viewer makes of it.
pub(super) mod filters {
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
            figures::rate_with_currency(res.rate_per_gpu_hour, c),
        ),
        ("term_months".into(), res.term_months.to_string()),
        ("monthly_cost".into(), figures::with_currency(res.monthly_cost, c)),
        ("whole term".into(), figures::with_currency(res.total(), c)),
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
        .map(|(k, v)| (k.clone(), figures::with_currency(*v, currency)))
        .collect();
    rows.push(("total".into(), figures::with_currency(l.total, currency)));
    rows.push((
        "accelerator GPU-hours".into(),
        l.accelerator_hours.to_f64().map(figures::figure).unwrap_or_default(),
    ));
    rows.push((
        "cost per completed job".into(),
        match l.cost_per_job {
            Some(c) => figures::with_currency(c, currency),
            None => "— (nothing accepted yet)".into(),
        },
    ));
    rows.push((
        "utilization (busy share of paid GPU hours)".into(),
        r.decision
            .utilization
            .and_then(|u| u.to_f64())
            .map(figures::percent)
            .unwrap_or_else(|| "unknown".into()),
    ));
    rows
}

/// The decision record of a review, for its Markdown file and its page alike; `base` (the public
/// URL) makes every link in it absolute, so the file still points somewhere once mailed. Field by
/// field in the order the record shows them.
fn decision_record<'a>(r: &'a Review, base: &str) -> DecisionRecord<'a> {
    let name_of = |id: TrialId| r.trial(id).map(|t| t.context.trial.fields.name.clone());
    DecisionRecord {
        recommended: r.recommendation.recommended.and_then(name_of),
        approved_trial: r.approval.as_ref().and_then(|a| a.row.trial_id).and_then(name_of),
        trial_rows: r.trials.iter().map(|t| trial_row(r, t)).collect(),
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
        why: why_sentence(r),
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
                figures::with_currency(c, &r.brief.fields.currency),
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

/// One trial's row of the record's table: name, provider, allocation, decision, accepted,
/// criteria passed and cost per job.
fn trial_row(r: &Review, t: &TrialReview) -> (String, String, String, &'static str, &'static str, String, String) {
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
            Some(c) => figures::with_currency(c, &r.brief.fields.currency),
            None => "—".to_owned(),
        },
    )
}

/// Why the decision is what it is: its first reason, in a sentence.
fn why_sentence(r: &Review) -> String {
    r.decision
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
        .unwrap_or_default()
}

/// The review of brief `id`, for a caller who may read the brief.
async fn readable_review(state: &AppState, caller: &Principal, id: BriefId) -> Result<Review, AppError> {
    caller.may_read_brief(id)?;
    service::review(state, id).await
}

pub(super) async fn record_md(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
) -> Result<Response, AppError> {
    let r = readable_review(&state, &caller, id).await?;
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

pub(super) async fn record_page(
    State(state): State<AppState>,
    user: PageUser,
    BriefPath { id }: BriefPath,
) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    render(&DecisionPage {
        ctx: (&user).into(),
        record: decision_record(&r, &state.config.public_url),
    })
}

pub(super) async fn record_json(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
) -> Result<Response, AppError> {
    let r = readable_review(&state, &caller, id).await?;
    let mut json = answer::review_json(&r);
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
