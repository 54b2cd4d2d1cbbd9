//! Signals out, as handlers and the worker use them: manage webhooks, refresh a brief's signal
//! snapshot (noticing `decision.changed` and `approval.stale`), and render the per-brief gauges.

use chrono::{DateTime, Utc};
use prometheus::{Encoder, GaugeVec, Opts, Registry, TextEncoder};
use rust_decimal::prelude::ToPrimitive;
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    model::{self, changed_trials, TrialSignal},
    repo::{self, AttemptRow, DeliveryRow, WebhookRow},
};
use crate::{
    audit,
    auth::{Principal, Role},
    briefs::service as briefs,
    error::AppError,
    outbox,
    review::{
        decision::Status,
        model::ApprovalVerdict,
        service::{self as review, Review},
    },
    secrets,
    state::AppState,
};

/// How many of each webhook's newest deliveries a listing shows.
pub const RECENT_DELIVERIES: i64 = 20;

fn require_admin(actor: &Principal) -> Result<(), AppError> {
    actor.require_person(Role::Admin)?;
    actor.require_unscoped()
}

/// A new webhook, and its secret when rentcheck generated it (shown this once).
pub struct Created {
    pub row: WebhookRow,
    pub generated_secret: Option<String>,
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
        json!({ "url": row.url, "events": row.events }),
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

#[derive(Debug, Clone, Serialize)]
pub struct DeliveryView {
    #[serde(flatten)]
    pub delivery: DeliveryRow,
    /// Oldest first.
    pub attempts: Vec<AttemptRow>,
}

#[derive(Debug, Clone, Serialize)]
pub struct WebhookView {
    #[serde(flatten)]
    pub webhook: WebhookRow,
    /// The newest deliveries first.
    pub deliveries: Vec<DeliveryView>,
}

pub async fn list(state: &AppState, actor: &Principal) -> Result<Vec<WebhookView>, AppError> {
    require_admin(actor)?;
    let hooks = repo::list_webhooks(&state.pool).await?;
    let ids: Vec<Uuid> = hooks.iter().map(|h| h.id).collect();
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

pub async fn delete(state: &AppState, actor: &Principal, id: Uuid) -> Result<(), AppError> {
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
        json!({ "url": url }),
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

/// Recomputes a brief's review and stores it as the brief's signal snapshot; against the snapshot
/// before, a trial whose decision moved gives `decision.changed` and an approval that went stale
/// gives `approval.stale`, written with the snapshot in one transaction. The first snapshot of a
/// brief is its baseline and gives no event. A snapshot computed later than this one is kept.
// Long, and reads better whole: load, compare, write events and the snapshot in one transaction, in
// that order.
pub async fn refresh(state: &AppState, brief_id: Uuid) -> Result<(), AppError> {
    let started = Utc::now();
    let brief = match briefs::load(&state.pool, brief_id).await {
        Err(AppError::NotFound(_)) => return Ok(()),
        other => other?,
    };
    let r = match review::review_for(state, brief).await {
        Err(AppError::NotFound(_)) => return Ok(()),
        other => other?,
    };
    let last_evidence = repo::last_evidence(&state.pool, brief_id).await?;
    let evidence_count = last_evidence.iter().map(|(_, _, n)| n).sum();
    let summary = summarize(&r, evidence_count, last_evidence.iter().map(|(_, at, _)| *at).max());
    let trials: Vec<repo::NewTrialSnapshot> = r
        .trials
        .iter()
        .map(|t| {
            let (passed, required) = t.criteria_passed();
            repo::NewTrialSnapshot {
                trial_id: t.context.trial.id,
                decision: t.decision.decision.as_str().to_owned(),
                accepted: t.decision.accepted,
                cost_per_job: t.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
                utilization: t.decision.utilization,
                criteria_passed: i32::try_from(passed).unwrap_or(i32::MAX),
                criteria_required: i32::try_from(required).unwrap_or(i32::MAX),
                last_evidence_at: last_evidence
                    .iter()
                    .find(|(id, _, _)| *id == t.context.trial.id)
                    .map(|(_, at, _)| *at),
            }
        })
        .collect();
    let after: Vec<TrialSignal> = r
        .trials
        .iter()
        .map(|t| TrialSignal {
            trial_id: t.context.trial.id,
            name: t.context.trial.fields.name.clone(),
            decision: t.decision.decision.as_str().to_owned(),
            accepted: t.decision.accepted,
        })
        .collect();

    let mut tx = state.pool.begin().await?;
    let before = repo::lock_snapshot(&mut tx, brief_id).await?;
    if before.as_ref().is_some_and(|b| b.computed_at > started) {
        return Ok(());
    }
    let before_trials: Vec<TrialSignal> = repo::trial_snapshots(&mut tx, brief_id)
        .await?
        .into_iter()
        .map(|t| TrialSignal {
            trial_id: t.trial_id,
            name: String::new(),
            decision: t.decision,
            accepted: t.accepted,
        })
        .collect();
    let name = &r.brief.fields.name;
    let public_url = &state.config.public_url;
    if let Some(before) = &before {
        for (old, new) in changed_trials(&before_trials, &after) {
            let recommended = r.recommendation.recommended == Some(new.trial_id);
            let state_json = |t: &TrialSignal| json!({ "decision": t.decision, "accepted": t.accepted });
            outbox::enqueue(
                &mut *tx,
                public_url,
                &outbox::Event {
                    kind: outbox::DECISION_CHANGED,
                    brief_id,
                    brief_name: name,
                    trial_id: Some(new.trial_id),
                    old: state_json(old),
                    new: json!({ "decision": new.decision, "accepted": new.accepted, "recommended": recommended }),
                    text: format!(
                        "Brief {name}, trial {}: the decision is now {}{} (was {}{})",
                        new.name,
                        new.decision,
                        if new.accepted { ", accepted" } else { "" },
                        old.decision,
                        if old.accepted { ", accepted" } else { "" },
                    ),
                },
            )
            .await?;
        }
        if let Some(approval) = r.approval.as_ref().filter(|a| a.stale) {
            let known = before.approval_id == Some(approval.row.id) && before.approval_stale;
            if !known {
                outbox::enqueue(
                    &mut *tx,
                    public_url,
                    &outbox::Event {
                        kind: outbox::APPROVAL_STALE,
                        brief_id,
                        brief_name: name,
                        trial_id: approval.row.trial_id,
                        old: json!({
                            "approval": approval.row.id,
                            "verdict": approval.row.verdict,
                            "decision": approval.row.decision,
                            "inputs_digest": approval.row.inputs_digest,
                            "stale": false,
                        }),
                        new: json!({
                            "stale": true,
                            "inputs_digest": r.decision.inputs_digest,
                            "changed": approval.changed,
                        }),
                        text: format!(
                            "Brief {name}: the {} of {} by {} is stale, its inputs changed ({})",
                            if approval.row.verdict == ApprovalVerdict::Approve {
                                "approval"
                            } else {
                                "rejection"
                            },
                            approval.row.decision,
                            approval.row.decided_by,
                            if approval.changed.is_empty() {
                                "see the review".to_owned()
                            } else {
                                approval.changed.join(", ")
                            },
                        ),
                    },
                )
                .await?;
            }
        }
    }
    repo::store_snapshot(
        &mut tx,
        &repo::NewSnapshot {
            brief_id,
            trial_id: r.context.trial.id,
            decision: r.decision.decision.as_str().to_owned(),
            accepted: r.decision.accepted,
            approval_id: r.approval.as_ref().map(|a| a.row.id),
            approval_stale: r.approval.as_ref().is_some_and(|a| a.stale),
            computed_at: started,
            summary,
        },
        &trials,
    )
    .await?;
    tx.commit().await?;
    Ok(())
}

pub use super::repo::{BriefSummary, SummaryRow};

/// What lists show of a computed review: the decided trial's cost per completed job and required
/// criteria, whether one of those fails, the evidence, and where the approval stands.
pub fn summarize(r: &Review, evidence_count: i64, last_evidence_at: Option<DateTime<Utc>>) -> repo::BriefSummary {
    let chosen = &r.trials[r.chosen];
    let (passed, required) = chosen.criteria_passed();
    let state = match &r.approval {
        None if evidence_count == 0 => "awaiting-evidence",
        None => "needs-approval",
        Some(a) if a.stale => "stale",
        Some(a) if a.row.verdict == ApprovalVerdict::Approve => "approved",
        Some(_) => "rejected",
    };
    repo::BriefSummary {
        cost_per_job: chosen.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
        criteria_passed: i32::try_from(passed).unwrap_or(i32::MAX),
        criteria_required: i32::try_from(required).unwrap_or(i32::MAX),
        failing: chosen
            .context
            .inputs
            .criteria
            .iter()
            .any(|c| c.required && c.status == Status::Fail),
        evidence_count,
        last_evidence_at,
        approval_verdict: r.approval.as_ref().map(|a| a.row.verdict.as_str().to_owned()),
        approval_decision: r.approval.as_ref().map(|a| a.row.decision.as_str().to_owned()),
        state: state.to_owned(),
    }
}

/// The current summaries of `ids`, in that order. A brief with changes still queued (or never
/// summarised) is refreshed first, here: a reader never waits for the watcher and never shows a
/// summary older than the last committed change.
pub async fn current(state: &AppState, ids: &[Uuid]) -> Result<Vec<repo::SummaryRow>, AppError> {
    for id in repo::not_current(&state.pool, ids).await? {
        repo::claim_dirty_of(&state.pool, &[id]).await?;
        if let Err(e) = refresh(state, id).await {
            repo::mark_dirty(&state.pool, id).await?;
            return Err(e);
        }
    }
    let mut rows = repo::summaries(&state.pool, ids).await?;
    rows.sort_by_key(|r| ids.iter().position(|id| *id == r.brief_id));
    Ok(rows)
}

/// Refreshes up to `limit` briefs marked changed at least `settle` ago; answers how many it took.
/// A brief whose refresh fails is marked again, for the next round.
pub async fn refresh_changed(state: &AppState, limit: i64, settle: std::time::Duration) -> Result<usize, AppError> {
    let ids = repo::claim_dirty(&state.pool, limit, settle).await?;
    for &id in &ids {
        if let Err(e) = refresh(state, id).await {
            tracing::warn!(brief = %id, error = %e, "refreshing a brief's signals failed; will try again");
            repo::mark_dirty(&state.pool, id).await?;
        }
    }
    Ok(ids.len())
}

/// Names and help of the per-brief gauges (docs/operations.md). Labels are ids, and `decision`
/// one of the five verdicts: never free text, so the series count is bounded by the briefs'.
pub const GAUGES: [(&str, &str); 10] = [
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
];

/// The gauges in Prometheus' text format, from the signal snapshot alone: one query, no review
/// computed per scrape (the watcher keeps the snapshot current).
pub async fn gauges_text(state: &AppState) -> Result<String, AppError> {
    let rows = repo::gauges(&state.pool).await?;
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
    let mut out = Vec::new();
    TextEncoder::new()
        .encode(&registry.gather(), &mut out)
        .map_err(|e| AppError::Internal(e.into()))?;
    String::from_utf8(out).map_err(|e| AppError::Internal(e.into()))
}
