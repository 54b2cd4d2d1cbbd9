//! Signals out, as handlers and the worker use them: manage webhooks (kept in the outbox's store)
//! and render the per-brief gauges from the review's kept summaries.

use prometheus::{Encoder, GaugeVec, Opts, Registry, TextEncoder};
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::model;
use crate::{
    audit,
    auth::{Principal, Role},
    commitments::service as commitments,
    error::AppError,
    ids::WebhookId,
    outbox::store::{self as repo, AttemptRow, DeliveryRow, WebhookRow},
    review::summaries,
    secrets,
    state::AppState,
};

/// How many of each webhook's newest deliveries a listing shows.
pub const RECENT_DELIVERIES: i64 = 20;

fn require_admin(actor: &Principal) -> Result<(), AppError> {
    actor.require_person(Role::Admin)?;
    actor.require_unscoped()
}

/// A new webhook, and its secret when rentcheck generated it (answered this once, never again).
#[derive(Serialize, ToSchema)]
#[schema(as = Webhook)]
pub struct Created {
    #[serde(flatten)]
    pub row: WebhookRow,
    /// Only when rentcheck generated it.
    #[serde(rename = "secret", skip_serializing_if = "Option::is_none")]
    pub generated_secret: Option<String>,
}

/// Every webhook; never a secret.
#[derive(Serialize, ToSchema)]
pub struct WebhookList {
    pub items: Vec<WebhookView>,
}

pub async fn create(state: &AppState, actor: &Principal, body: &Value) -> Result<Created, AppError> {
    require_admin(actor)?;
    let new = model::validate(body, state.config.webhooks.allow_http).map_err(AppError::Validation)?;
    if !state.config.webhooks.allow_private {
        let why = match model::address_refusal(&new.url) {
            Some(why) => Some(why),
            None => resolves_to_private(&new.url).await,
        };
        if let Some(why) = why {
            return Err(AppError::Validation(vec![crate::validation::FieldError::new(
                "url", why,
            )]));
        }
    }
    let (secret, generated_secret) = match new.secret {
        Some(s) => (s, None),
        None => {
            let s = secrets::random_token();
            (s.clone(), Some(s))
        }
    };
    let mut tx = state.pool.begin().await?;
    let row = repo::insert_webhook(&mut *tx, &new.url, &new.events, &secret, &actor.label()).await?;
    // The audit names the webhook and its events, never its secret.
    audit::record(
        &mut *tx,
        &actor.label(),
        "webhook.created",
        &format!("webhook:{}", row.id),
        json!({ "url": model::url_for_audit(&row.url), "events": row.events }),
    )
    .await?;
    tx.commit().await?;
    Ok(Created { row, generated_secret })
}

/// Why a webhook URL's host name resolves to a non-public address, if it does now. A name that
/// does not resolve (yet) is let through: every delivery resolves it again and sends only to
/// public addresses (`worker`), which also stops a name re-pointed after it was added.
async fn resolves_to_private(url: &str) -> Option<String> {
    let parsed = reqwest::Url::parse(url).ok()?;
    let host = parsed.host_str()?.to_owned();
    let port = parsed.port_or_known_default().unwrap_or(443);
    let lookup = tokio::net::lookup_host((host.as_str(), port));
    let addrs: Vec<std::net::SocketAddr> = tokio::time::timeout(std::time::Duration::from_secs(3), lookup)
        .await
        .ok()?
        .ok()?
        .collect();
    let refusal = addrs
        .iter()
        .map(|a| a.ip())
        .find_map(|ip| model::non_public(ip).map(|kind| model::private_message(&format!("{host} ({ip})"), kind)));
    refusal
}

/// A delivery and its attempts.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeliveryView {
    #[serde(flatten)]
    pub delivery: DeliveryRow,
    /// Oldest first.
    pub attempts: Vec<AttemptRow>,
}

/// A webhook and its newest deliveries.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct WebhookView {
    #[serde(flatten)]
    pub webhook: WebhookRow,
    /// The newest deliveries first.
    pub deliveries: Vec<DeliveryView>,
}

pub async fn list(state: &AppState, actor: &Principal) -> Result<Vec<WebhookView>, AppError> {
    require_admin(actor)?;
    let hooks = repo::list_webhooks(&state.pool).await?;
    let ids: Vec<WebhookId> = hooks.iter().map(|h| h.id).collect();
    let deliveries = repo::recent_deliveries(&state.pool, &ids, RECENT_DELIVERIES).await?;
    let delivery_ids: Vec<Uuid> = deliveries.iter().map(|d| d.id).collect();
    let attempts = repo::attempts(&state.pool, &delivery_ids).await?;
    Ok(hooks
        .into_iter()
        .map(|webhook| WebhookView {
            deliveries: deliveries
                .iter()
                .filter(|d| d.webhook_id == webhook.id)
                .map(|d| DeliveryView {
                    delivery: d.clone(),
                    attempts: attempts.iter().filter(|a| a.delivery_id == d.id).cloned().collect(),
                })
                .collect(),
            webhook,
        })
        .collect())
}

pub async fn delete(state: &AppState, actor: &Principal, id: WebhookId) -> Result<(), AppError> {
    require_admin(actor)?;
    let mut tx = state.pool.begin().await?;
    let url = repo::delete_webhook(&mut *tx, id)
        .await?
        .ok_or(AppError::NotFound("webhook"))?;
    audit::record(
        &mut *tx,
        &actor.label(),
        "webhook.deleted",
        &format!("webhook:{id}"),
        json!({ "url": model::url_for_audit(&url) }),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Names and help of the per-brief gauges (docs/operations.md). Labels are ids, and `decision`
/// one of the five verdicts: never free text, so the series count is bounded by the briefs'.
pub const GAUGES: [(&str, &str); 13] = [
    (
        "rentcheck_brief_decision",
        "The brief-level decision: 1 on the series of the current one",
    ),
    (
        "rentcheck_brief_approval_stale",
        "1 when the brief's newest approval or rejection is stale",
    ),
    (
        "rentcheck_trial_decision",
        "A trial's decision: 1 on the series of the current one",
    ),
    (
        "rentcheck_trial_recommended",
        "1 for the trial the brief-level decision is taken from",
    ),
    (
        "rentcheck_trial_accepted",
        "1 when the trial passes its acceptance criteria",
    ),
    (
        "rentcheck_trial_cost_per_job",
        "Ledger cost per completed job, in the ledger's currency",
    ),
    (
        "rentcheck_trial_utilization_ratio",
        "Utilization the decision read, 0 to 1",
    ),
    ("rentcheck_trial_criteria_passing", "Required criteria passing"),
    ("rentcheck_trial_criteria_required", "Required criteria that apply"),
    (
        "rentcheck_trial_days_since_evidence",
        "Days since the trial's newest evidence arrived",
    ),
    (
        "rentcheck_commitment_utilization",
        "A running commitment's busy share of its committed GPU-hours this month, 0 to 1 (above 1: more ran)",
    ),
    (
        "rentcheck_commitment_monthly_cost",
        "A running commitment's monthly cost (GPUs x rate x 730), in its currency",
    ),
    (
        "rentcheck_commitment_days_left",
        "Days left in a running commitment's term, its last day included",
    ),
];

/// The gauges in Prometheus' text format, from the signal snapshot alone: one query, no review
/// computed per scrape (the watcher keeps the snapshot current).
pub async fn gauges_text(state: &AppState) -> Result<String, AppError> {
    let rows = summaries::gauge_rows(state).await?;
    let registry = Registry::new();
    let vec = |(name, help): (&str, &str), labels: &[&str]| -> Result<GaugeVec, AppError> {
        let g = GaugeVec::new(Opts::new(name, help), labels).map_err(|e| AppError::Internal(e.into()))?;
        registry
            .register(Box::new(g.clone()))
            .map_err(|e| AppError::Internal(e.into()))?;
        Ok(g)
    };
    let trial = ["brief_id", "trial_id"];
    let brief_decision = vec(GAUGES[0], &["brief_id", "decision"])?;
    let stale = vec(GAUGES[1], &["brief_id"])?;
    let trial_decision = vec(GAUGES[2], &["brief_id", "trial_id", "decision"])?;
    let recommended = vec(GAUGES[3], &trial)?;
    let accepted = vec(GAUGES[4], &trial)?;
    let cost = vec(GAUGES[5], &trial)?;
    let utilization = vec(GAUGES[6], &trial)?;
    let passing = vec(GAUGES[7], &trial)?;
    let required = vec(GAUGES[8], &trial)?;
    let days = vec(GAUGES[9], &trial)?;
    let flag = |b: bool| if b { 1.0 } else { 0.0 };
    for r in &rows {
        let (b, t) = (r.brief_id.to_string(), r.trial_id.to_string());
        let ids = [b.as_str(), t.as_str()];
        brief_decision.with_label_values(&[&b, &r.brief_decision]).set(1.0);
        stale.with_label_values(&[&b]).set(flag(r.approval_stale));
        trial_decision.with_label_values(&[&b, &t, &r.decision]).set(1.0);
        recommended.with_label_values(&ids).set(flag(r.recommended));
        accepted.with_label_values(&ids).set(flag(r.accepted));
        // Gauges are floats by Prometheus' design; money stays decimal everywhere else.
        if let Some(c) = r.cost_per_job.and_then(|c| c.to_f64()) {
            cost.with_label_values(&ids).set(c);
        }
        if let Some(u) = r.utilization.and_then(|u| u.to_f64()) {
            utilization.with_label_values(&ids).set(u);
        }
        passing.with_label_values(&ids).set(f64::from(r.criteria_passed));
        required.with_label_values(&ids).set(f64::from(r.criteria_required));
        if let Some(d) = r.days_since_evidence {
            days.with_label_values(&ids).set(d);
        }
    }
    let commitment = ["brief_id", "trial_id", "commitment_id"];
    let c_utilization = vec(GAUGES[10], &commitment)?;
    let c_cost = vec(GAUGES[11], &commitment)?;
    let c_days = vec(GAUGES[12], &commitment)?;
    for g in commitments::gauges(state).await? {
        let (b, t, c) = (g.brief_id.to_string(), g.trial_id.to_string(), g.id.to_string());
        let ids = [b.as_str(), t.as_str(), c.as_str()];
        if let Some(u) = g.utilization.and_then(|u| u.to_f64()) {
            c_utilization.with_label_values(&ids).set(u);
        }
        c_cost
            .with_label_values(&ids)
            .set(g.monthly_cost.to_f64().unwrap_or(0.0));
        c_days.with_label_values(&ids).set(g.days_left as f64);
    }
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .map_err(|e| AppError::Internal(e.into()))?;
    String::from_utf8(out).map_err(|e| AppError::Internal(e.into()))
}
