//! The review as handlers use it: compute it for a brief, and record a manager's verdict.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    decision::{decide, Decision, Verdict},
    gather::{gather, ReviewContext},
    model::{changed_inputs, parse_reservation, Reservation},
    repo::{self, ApprovalRow},
};
use crate::{
    audit,
    auth::{Principal, Role},
    briefs::{model::Brief, service as briefs},
    error::AppError,
    state::AppState,
    validation::FieldError,
};

/// The latest verdict on a brief and whether the inputs moved since.
#[derive(Debug, Clone, Serialize)]
pub struct ApprovalState {
    #[serde(flatten)]
    pub row: ApprovalRow,
    pub stale: bool,
    pub changed: Vec<String>,
}

pub struct Review {
    pub brief: Brief,
    pub context: ReviewContext,
    pub decision: Decision,
    pub approval: Option<ApprovalState>,
}

pub async fn load_brief(state: &AppState, id: Uuid) -> Result<Brief, AppError> {
    briefs::load(&state.pool, id).await
}

pub async fn review(state: &AppState, id: Uuid) -> Result<Review, AppError> {
    review_for(state, load_brief(state, id).await?).await
}

/// The review of a brief already loaded.
pub async fn review_for(state: &AppState, brief: Brief) -> Result<Review, AppError> {
    let id = brief.id;
    let context = gather(state, &brief).await?;
    let decision = decide(&context.inputs);
    let approval = repo::latest_approval(&state.pool, id).await?.map(|row| {
        let now = serde_json::to_value(&context.inputs).unwrap_or(Value::Null);
        let stale = row.inputs_digest != decision.inputs_digest;
        let changed = if stale {
            changed_inputs(&row.inputs.0, &now)
        } else {
            Vec::new()
        };
        ApprovalState { row, stale, changed }
    });
    Ok(Review {
        brief,
        context,
        decision,
        approval,
    })
}

/// The JSON answer of `GET /api/v1/briefs/{id}/review`.
pub fn review_json(r: &Review) -> Value {
    json!({
        "brief_id": r.brief.id,
        "decision": r.decision.decision,
        "accepted": r.decision.accepted,
        "reasons": r.decision.reasons,
        "missing": r.decision.missing,
        "inputs_digest": r.decision.inputs_digest,
        "utilization": r.decision.utilization,
        "saturated": r.decision.saturated,
        "suggested_units": r.decision.suggested_units,
        "criteria": r.context.inputs.criteria,
        "ledger": r.context.inputs.ledger,
        "approval": r.approval,
    })
}

/// A manager's verdict as submitted.
pub struct VerdictRequest {
    pub verdict: String,
    pub comment: String,
    pub inputs_digest: String,
    /// Reservation fields as text; missing ones take the defaults.
    pub reservation: BTreeMap<String, String>,
}

/// Reservation defaults from the sizing, the decision and the ledger.
pub fn reservation_defaults(r: &Review) -> BTreeMap<String, String> {
    let inputs = &r.context.inputs;
    let count = r.decision.suggested_units.unwrap_or(inputs.brief.current_units);
    let billing = match r.decision.decision {
        Verdict::Reserve => "reserved",
        Verdict::Dedicate => "dedicated",
        _ => "on-demand",
    };
    let start = (Utc::now() + chrono::Duration::days(1)).date_naive();
    let mut d = BTreeMap::from([
        ("gpu".to_owned(), r.context.trial_gpu.clone()),
        ("count".to_owned(), count.to_string()),
        ("billing".to_owned(), billing.to_owned()),
        (
            "term_months".to_owned(),
            if billing == "on-demand" { "1" } else { "12" }.to_owned(),
        ),
        ("start".to_owned(), start.to_string()),
    ]);
    if let Some(rate) = r.context.ledger_rate {
        d.insert("rate_per_gpu_hour".to_owned(), rate.round_dp(4).to_string());
    }
    d
}

pub fn needs_reservation(decision: Verdict) -> bool {
    matches!(decision, Verdict::Reserve | Verdict::Dedicate | Verdict::Scale)
}

/// Records an approval or rejection. Only managers (and admins); a rejection needs a comment; the
/// digest must be the current one (409 otherwise); approving reserve, dedicate or scale records a
/// reservation.
pub async fn record_verdict(
    state: &AppState,
    brief_id: Uuid,
    actor: &Principal,
    request: VerdictRequest,
) -> Result<ApprovalRow, AppError> {
    actor.require_person(Role::Manager)?;
    if !matches!(request.verdict.as_str(), "approve" | "reject") {
        return Err(AppError::Validation(vec![FieldError::new(
            "verdict",
            "must be approve or reject",
        )]));
    }
    let comment = request.comment.trim().to_owned();
    if request.verdict == "reject" && comment.is_empty() {
        return Err(AppError::Validation(vec![FieldError::new(
            "comment",
            "a rejection needs a comment",
        )]));
    }
    if comment.chars().count() > 10_000 {
        return Err(AppError::Validation(vec![FieldError::new(
            "comment",
            "must be at most 10000 characters",
        )]));
    }
    let mut tx = state.pool.begin().await?;
    // One verdict at a time per brief.
    if !repo::lock_brief(&mut *tx, brief_id).await? {
        return Err(AppError::NotFound("brief"));
    }
    let current = review(state, brief_id).await?;
    if request.inputs_digest != current.decision.inputs_digest {
        return Err(AppError::Conflict(format!(
            "the review changed since it was loaded (digest {} is not the current {}); reload it and decide again",
            request.inputs_digest, current.decision.inputs_digest
        )));
    }
    let reservation: Option<Reservation> =
        if request.verdict == "approve" && needs_reservation(current.decision.decision) {
            let mut fields = reservation_defaults(&current);
            fields.extend(request.reservation.into_iter().filter(|(_, v)| !v.trim().is_empty()));
            Some(parse_reservation(&fields).map_err(AppError::Validation)?)
        } else {
            None
        };
    let inputs = serde_json::to_value(&current.context.inputs).unwrap_or(Value::Null);
    let row = repo::insert_approval(
        &mut *tx,
        &repo::NewApproval {
            brief_id,
            verdict: &request.verdict,
            decision: current.decision.decision.as_str(),
            inputs_digest: &current.decision.inputs_digest,
            comment: &comment,
            decided_by: &actor.label(),
            reservation: reservation.as_ref(),
            inputs: &inputs,
        },
    )
    .await?;
    audit::record(
        &mut *tx,
        &actor.label(),
        &format!("approval.{}", request.verdict),
        &format!("brief:{brief_id}"),
        json!({
            "decision": current.decision.decision,
            "inputs_digest": current.decision.inputs_digest,
            "comment": comment,
            "reservation": reservation,
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(row)
}
