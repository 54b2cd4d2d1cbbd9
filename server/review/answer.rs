//! The review's JSON answer (`GET /api/v1/briefs/{id}/review`): the types the API serializes and
//! the OpenAPI document is derived from, so the two cannot differ. They borrow from a computed
//! [`Review`]; every field is always present (null when unknown). A use-case file: it also serves
//! the answer's bytes from the per-process cache.

use std::collections::BTreeMap;

use bytes::Bytes;
use chrono::{DateTime, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    comparison::Change,
    cost_at_slo::{MoneyFacts, ReservationComparison},
    decision::{CriterionOutcome, LedgerFacts, Reason, UtilizationSource, Verdict},
    model::Reservation,
    repo,
    service::{self, ApprovalState, Review, TrialReview},
};
use crate::{
    acceptance::service::StaleCriterion,
    error::AppError,
    ids::{BriefId, TrialId},
    prices::model::{AllocationPrice, StoredPrice},
    sizing::kv_check::KvCheck,
    state::AppState,
    trials::model::Billing,
    versioned_cache::Lookup,
};

/// The review of a brief. The top-level decision fields describe the recommended trial (else the
/// closest one); `trials` has every trial.
#[derive(Serialize, ToSchema)]
pub struct ReviewAnswer<'a> {
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// The trial the top-level decision is taken from.
    #[schema(value_type = Uuid)]
    pub trial: TrialId,
    /// Never a stopped trial; the cheapest per unit of work among the accepted ones.
    #[schema(value_type = Option<Uuid>)]
    pub recommended_trial: Option<TrialId>,
    /// With none recommendable: the trial with the fewest failing (then missing) required criteria.
    #[schema(value_type = Option<Uuid>)]
    pub closest_trial: Option<TrialId>,
    pub trials: Vec<TrialAnswer<'a>>,
    pub decision: Verdict,
    pub accepted: bool,
    pub reasons: &'a [Reason],
    /// Required criteria without evidence, by stage (the stage number as the key).
    #[schema(value_type = BTreeMap<String, Vec<String>>)]
    pub missing: &'a BTreeMap<u8, Vec<String>>,
    /// Covers every trial: what an approval pins.
    pub inputs_digest: &'a str,
    /// A decimal string.
    pub utilization: Option<Decimal>,
    pub utilization_source: &'a UtilizationSource,
    pub saturated: bool,
    pub suggested_replicas: Option<u32>,
    /// suggested_replicas × the GPUs of the allocation under test.
    pub suggested_units: Option<u32>,
    pub criteria: &'a [CriterionOutcome],
    pub ledger: Option<&'a LedgerFacts>,
    /// The latest verdict on the brief, and whether the inputs moved since.
    pub approval: Option<&'a ApprovalState>,
    /// When this answer was computed (UTC).
    pub as_of: DateTime<Utc>,
    /// True when this is the review from before the brief's latest writes: a brief read by
    /// several requests at once while it is written to is computed one request at a time and at
    /// most once a second, and readers meanwhile get the answer before; read again shortly for
    /// the newer one. An approval pins `inputs_digest`, so an older answer can never be approved
    /// by mistake. Always the last field.
    pub refreshing: bool,
}

/// One trial's decision and money at the SLO, all read at its operating point.
#[derive(Serialize, ToSchema)]
pub struct TrialAnswer<'a> {
    #[schema(value_type = Uuid)]
    pub trial: TrialId,
    pub name: &'a str,
    pub provider: &'a str,
    pub allocation: Option<AllocationAnswer<'a>>,
    pub billing: Billing,
    pub decision: Verdict,
    pub accepted: bool,
    pub reasons: &'a [Reason],
    /// Required criteria without evidence, by stage (the stage number as the key).
    #[schema(value_type = BTreeMap<String, Vec<String>>)]
    pub missing: &'a BTreeMap<u8, Vec<String>>,
    pub inputs_digest: &'a str,
    pub cost_per_job: Option<Decimal>,
    pub utilization: Option<Decimal>,
    pub utilization_source: &'a UtilizationSource,
    /// The reservation comparison (decision.md), the figures rules 8 and 8b read: reserved ÷
    /// on-demand rate of the offer (null when no reserved price is known).
    pub break_even: Option<Decimal>,
    /// Whether the break-even came from the offer's reserved and on-demand prices.
    pub break_even_known: bool,
    /// Break-even + 0.05: the busy share from which rule 8 reserves.
    pub reserve_threshold: Option<Decimal>,
    /// GPUs × reserved rate × 730.
    pub reserved_monthly: Option<Decimal>,
    /// GPUs × on-demand rate × 730 × utilization: paying by the hour only for the busy hours.
    pub on_demand_busy_monthly: Option<Decimal>,
    /// on_demand_busy_monthly − reserved_monthly (negative: reserving costs more).
    pub reserve_saving_monthly: Option<Decimal>,
    /// Rule 8b: busy enough that reserving could pay, but no reserved price of the offer is known.
    pub reserved_price_needed: bool,
    /// The reserved price per GPU-hour below which reserving would pay at this busy share.
    pub reserve_pays_below_rate: Option<Decimal>,
    /// The whole comparison (GPUs compared, both rates, the saving's share).
    pub reservation_comparison: &'a ReservationComparison,
    /// The trial's one price, billing named.
    pub price: Option<&'a AllocationPrice>,
    /// Good requests ÷ requests sent, at the operating point.
    pub slo_attainment: Option<f64>,
    pub slo_attainment_estimated: bool,
    /// Good requests ÷ the operating point's duration.
    pub goodput_rps: Option<f64>,
    pub cost_per_hour: Option<Decimal>,
    pub cost_per_million_output_tokens: Option<Decimal>,
    /// Counting only the output tokens of good requests.
    pub cost_per_million_output_tokens_at_slo: Option<Decimal>,
    pub capacity_at_slo_rps: Option<f64>,
    pub replicas: Option<u32>,
    pub replicas_for_peak: Option<u32>,
    pub monthly_cost: Option<Decimal>,
    pub api_is_cheaper: Option<bool>,
    pub operating_point: Option<OperatingPointAnswer<'a>>,
    /// What approving this trial's decision would record.
    pub reservation: Option<&'a Reservation>,
    /// Why a decision that reserves has no reservation (no rate known).
    pub reservation_missing: Option<&'static str>,
    /// Evidence naming another GPU model than the trial's.
    pub gpu_mismatch: Option<GpuMismatch<'a>>,
    /// Current prices of the trial's GPU in other currencies: listed, never used.
    pub other_currency_prices: &'a [StoredPrice],
    pub money: Option<&'a MoneyFacts>,
    /// Predicted KV-cache capacity of the allocation beside the one vLLM logged.
    pub kv_capacity: Option<&'a KvCheck>,
    pub criteria_passed: usize,
    pub criteria_required: usize,
    pub criteria: &'a [CriterionOutcome],
    /// Criteria of a saved card set for another allocation than this trial's.
    pub stale_criteria: &'a [StaleCriterion],
    /// The trial this one re-runs.
    #[schema(value_type = Option<Uuid>)]
    pub rerun_of: Option<TrialId>,
    /// What got better or worse since the trial this one re-runs.
    pub changes_since_rerun_of: &'a [Change],
}

/// The allocation under test (the sizing's suggestion when the trial names no GPU).
#[derive(Serialize, ToSchema)]
#[schema(as = ReviewAllocation)]
pub struct AllocationAnswer<'a> {
    pub gpu: &'a str,
    pub count: u32,
    /// Taken from the sizing because the trial names no GPU.
    pub suggested: bool,
    /// The sizing says this allocation cannot hold the brief.
    pub under_sized: bool,
}

/// The load point every figure at the SLO is read at.
#[derive(Serialize, ToSchema)]
pub struct OperatingPointAnswer<'a> {
    pub evidence_id: Uuid,
    /// The run's name in a sweep file, else empty.
    pub run: &'a str,
    pub offered_rps: Option<f64>,
    pub achieved_rps: Option<f64>,
    pub slo_attainment: Option<f64>,
    pub goodput_rps: Option<f64>,
    /// It reached the attainment target with its latency criteria passing.
    pub qualified: bool,
    pub described: &'a str,
}

/// Evidence that names another GPU model than the trial's.
#[derive(Serialize, ToSchema)]
pub struct GpuMismatch<'a> {
    pub evidence_id: Uuid,
    /// The GPU model the evidence names.
    pub named: &'a str,
    pub trial_gpu: &'a str,
}

impl<'a> ReviewAnswer<'a> {
    pub fn of(r: &'a Review) -> Self {
        Self {
            brief_id: r.brief.id,
            trial: r.context.trial.id,
            recommended_trial: r.recommendation.recommended,
            closest_trial: r.recommendation.closest,
            trials: r.trials.iter().map(TrialAnswer::of).collect(),
            decision: r.decision.decision,
            accepted: r.decision.accepted,
            reasons: &r.decision.reasons,
            missing: &r.decision.missing,
            inputs_digest: &r.decision.inputs_digest,
            utilization: r.decision.utilization,
            utilization_source: &r.decision.utilization_source,
            saturated: r.decision.saturated,
            suggested_replicas: r.decision.suggested_replicas,
            suggested_units: r
                .decision
                .suggested_replicas
                .map(|n| n * r.context.inputs.brief.current_units.max(1)),
            criteria: &r.context.inputs.criteria,
            ledger: r.context.inputs.ledger.as_ref(),
            approval: r.approval.as_ref(),
            as_of: Utc::now(),
            refreshing: false,
        }
    }
}

impl<'a> TrialAnswer<'a> {
    pub fn of(t: &'a TrialReview) -> Self {
        let (criteria_passed, criteria_required) = t.criteria_passed();
        let c = &t.context;
        let money = c.inputs.money.as_ref();
        Self {
            trial: c.trial.id,
            name: &c.trial.fields.name,
            provider: &c.trial.fields.provider,
            allocation: c.allocation.as_ref().map(|a| AllocationAnswer {
                gpu: &a.gpu.model,
                count: a.count,
                suggested: a.suggested,
                under_sized: a.under_sized,
            }),
            billing: c.trial.fields.billing,
            decision: t.decision.decision,
            accepted: t.decision.accepted,
            reasons: &t.decision.reasons,
            missing: &t.decision.missing,
            inputs_digest: &t.decision.inputs_digest,
            cost_per_job: c.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
            utilization: t.decision.utilization,
            utilization_source: &t.decision.utilization_source,
            break_even: t.decision.reservation.break_even,
            break_even_known: t.decision.reservation.break_even_known,
            reserve_threshold: t.decision.reservation.reserve_threshold,
            reserved_monthly: t.decision.reservation.reserved_monthly,
            on_demand_busy_monthly: t.decision.reservation.on_demand_busy_monthly,
            reserve_saving_monthly: t.decision.reservation.reserve_saving_monthly,
            reserved_price_needed: t.decision.reservation.reserved_price_needed,
            reserve_pays_below_rate: t.decision.reservation.reserve_pays_below_rate,
            reservation_comparison: &t.decision.reservation,
            price: c.price.as_ref(),
            slo_attainment: money.and_then(|m| m.slo_attainment),
            slo_attainment_estimated: money.is_some_and(|m| m.slo_attainment_estimated),
            goodput_rps: money.and_then(|m| m.goodput_rps),
            cost_per_hour: money.and_then(|m| m.cost_per_hour),
            cost_per_million_output_tokens: money.and_then(|m| m.cost_per_million_output_tokens),
            cost_per_million_output_tokens_at_slo: money.and_then(|m| m.cost_per_million_output_tokens_at_slo),
            capacity_at_slo_rps: money.and_then(|m| m.capacity_at_slo_rps),
            replicas: money.and_then(|m| m.replicas_for_peak),
            replicas_for_peak: money.and_then(|m| m.replicas_for_peak),
            monthly_cost: money.and_then(|m| m.monthly_cost),
            api_is_cheaper: money.and_then(|m| m.api_is_cheaper),
            operating_point: money
                .and_then(|m| m.operating_point.as_ref())
                .map(|p| OperatingPointAnswer {
                    evidence_id: p.evidence_id,
                    run: &p.run,
                    offered_rps: p.offered_rps,
                    achieved_rps: p.achieved_rps,
                    slo_attainment: p.slo_attainment,
                    goodput_rps: p.goodput_rps,
                    qualified: p.qualified,
                    described: &p.described,
                }),
            reservation: t.recorded_reservation(),
            reservation_missing: t.reservation.as_ref().and_then(|r| r.as_ref().err()).copied(),
            gpu_mismatch: c.gpu_mismatch.as_ref().map(|(id, named)| GpuMismatch {
                evidence_id: *id,
                named,
                trial_gpu: &c.trial_gpu,
            }),
            other_currency_prices: &c.other_currency,
            money,
            kv_capacity: c.kv.as_ref().map(|k| &k.check),
            criteria_passed,
            criteria_required,
            criteria: &c.inputs.criteria,
            stale_criteria: &c.stale,
            rerun_of: c.trial.fields.rerun_of,
            changes_since_rerun_of: &t.changes,
        }
    }
}

/// The review JSON of a brief, as the API sends it: computed, or the bytes computed before while
/// no write that can change it has committed since (and it is still the same UTC day). The count
/// is read before the review is computed, so what is kept under a count is never older than it.
/// While another request is computing the brief's newer review, or within a second of a
/// computation that other readers waited on, the one before is sent with `refreshing: true` (its
/// `as_of` says when it was computed) rather than computing it again; a reader alone always gets
/// its own writes.
pub async fn review_body(state: &AppState, id: BriefId) -> Result<Bytes, AppError> {
    let version = (repo::change_count(&state.pool, id).await?, Utc::now().date_naive());
    let turn = match state.review_cache.lookup(id, version) {
        Lookup::Current(body) => return Ok(body),
        Lookup::Previous(body) => return Ok(marked_refreshing(&body)),
        Lookup::Compute(turn) => turn,
    };
    let r = service::review(state, id).await?;
    let body = Bytes::from(serde_json::to_vec(&ReviewAnswer::of(&r)).map_err(|e| AppError::Internal(e.into()))?);
    turn.put(version, body.clone());
    Ok(body)
}

const NOT_REFRESHING: &[u8] = br#","refreshing":false}"#;

/// `body` (a serialized [`ReviewAnswer`], whose last field is `refreshing: false`) with
/// `refreshing: true`: a copy of the bytes with the last field's value swapped, no second
/// serialization.
fn marked_refreshing(body: &Bytes) -> Bytes {
    match body.strip_suffix(NOT_REFRESHING) {
        Some(head) => {
            let mut marked = Vec::with_capacity(body.len());
            marked.extend_from_slice(head);
            marked.extend_from_slice(br#","refreshing":true}"#);
            Bytes::from(marked)
        }
        // Not reachable while `refreshing` is the struct's last field (a test pins it); the answer
        // is still a correct, older review, only without the mark.
        None => body.clone(),
    }
}

/// The JSON answer of `GET /api/v1/briefs/{id}/review` as a value ([`ReviewAnswer`] is what the API
/// serializes); the decision record adds its fields to it.
pub fn review_json(r: &Review) -> Value {
    serde_json::to_value(ReviewAnswer::of(r)).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_older_answer_is_marked_refreshing_by_its_last_field() {
        let answer = serde_json::json!({"decision": "expand", "as_of": "2026-12-03T08:00:00Z", "refreshing": false});
        let body = Bytes::from(serde_json::to_vec(&answer).unwrap());
        let marked: Value = serde_json::from_slice(&marked_refreshing(&body)).unwrap();
        assert_eq!(marked["refreshing"], true);
        assert_eq!(marked["decision"], "expand");
        assert_eq!(marked["as_of"], "2026-12-03T08:00:00Z");
    }
}
