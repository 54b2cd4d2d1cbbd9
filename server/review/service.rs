//! The review as handlers use it: compute it for a brief, and record a manager's verdict.

use std::collections::BTreeMap;

use chrono::Utc;
use serde::Serialize;
use serde_json::{json, Value};
use sqlx::PgConnection;

use super::{
    comparison::{money_changes, overall_digest, recommend, rerun_changes, Change, Recommendation, TrialStanding},
    decision::{decide, Decision, Status, Verdict},
    gather::{gather, Reads, ReviewContext},
    model::{
        apply_choices, changed_inputs, decision_override, reservation, ApprovalVerdict, DecisionOverride, Reservation,
        ReservationBasis,
    },
    repo::{self, ApprovalRow},
};
use crate::{
    acceptance::{model as acceptance_model, service as cards},
    audit,
    auth::{token, users, Principal, Role},
    briefs::{model::Brief, service as briefs},
    commitments::service as commitments,
    error::AppError,
    ids::{BriefId, TrialId},
    outbox,
    state::AppState,
    trials::service as trials,
    validation::FieldError,
};

/// The latest verdict on a brief and whether the inputs moved since.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct ApprovalState {
    #[serde(flatten)]
    pub row: ApprovalRow,
    /// The review's digest moved since the verdict.
    pub stale: bool,
    /// The inputs that moved.
    pub changed: Vec<String>,
    /// Why it is stale: `regression` (a re-validation run of the commitment it opened regressed,
    /// `regression` says how), `inputs` (they moved), or null while it holds.
    pub stale_reason: Option<&'static str>,
    /// The regression in words: each criterion with its figure when approved and now.
    pub regression: Option<String>,
}

/// One trial's review: what the rules read and what they decided on its evidence and ledger.
pub struct TrialReview {
    pub context: ReviewContext,
    pub decision: Decision,
    /// For a re-run: what got better or worse since the trial it re-runs.
    pub changes: Vec<Change>,
    /// What approving this trial's decision would record (reserve, dedicate, scale), computed by
    /// the one reservation function; `Err` says why there is none (no rate known).
    pub reservation: Option<Result<Reservation, &'static str>>,
}

impl TrialReview {
    fn standing(&self) -> TrialStanding {
        let required = || {
            self.context
                .inputs
                .criteria
                .iter()
                .filter(|c| c.required && c.status != Status::NotApplicable)
        };
        let money = self.context.inputs.money.as_ref();
        TrialStanding {
            trial_id: self.context.trial.id,
            position: self.context.trial.position,
            accepted: self.decision.accepted,
            decision: self.decision.decision,
            monthly_cost: money.and_then(|m| m.monthly_cost),
            cost_per_million_at_slo: money.and_then(|m| m.cost_per_million_output_tokens_at_slo),
            cost_per_job: self.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job),
            gpus: money
                .and_then(|m| Some(m.replicas_for_peak? * m.rate.as_ref()?.gpus_billed))
                .unwrap_or(self.context.inputs.brief.current_units),
            failing_required: required().filter(|c| c.status == Status::Fail).count(),
            missing_required: required().filter(|c| c.status == Status::Missing).count(),
        }
    }

    /// The reservation approving this trial would record, when its decision reserves something.
    pub fn recorded_reservation(&self) -> Option<&Reservation> {
        self.reservation.as_ref()?.as_ref().ok()
    }

    /// How many required criteria that apply to the trial some value could fail: a card whose
    /// required criteria all cannot (`gpu.count ≥ 0`) tested nothing.
    pub fn required_tests_that_can_fail(&self) -> usize {
        self.context
            .inputs
            .criteria
            .iter()
            .filter(|c| c.required && c.status != Status::NotApplicable)
            .filter(|c| {
                let criterion = || -> Option<acceptance_model::Criterion> {
                    Some(acceptance_model::Criterion {
                        key: c.key.clone(),
                        op: c.op.parse().ok()?,
                        threshold: serde_json::from_value(c.threshold.clone()).ok()?,
                        unit: String::new(),
                        stage: c.stage,
                        required: c.required,
                        why: None,
                    })
                };
                criterion().is_none_or(|c| c.can_fail())
            })
            .count()
    }

    pub fn criteria_passed(&self) -> (usize, usize) {
        let required: Vec<_> = self
            .context
            .inputs
            .criteria
            .iter()
            .filter(|c| c.required && c.status != Status::NotApplicable)
            .collect();
        (
            required.iter().filter(|c| c.status == Status::Pass).count(),
            required.len(),
        )
    }
}

/// A brief's review: every trial decided on its own, the recommended one, and the brief-level
/// decision (the recommended trial's, else the closest trial's), which `context` and `decision`
/// describe. `decision.inputs_digest` covers every trial: it is what an approval pins.
pub struct Review {
    pub brief: Brief,
    pub trials: Vec<TrialReview>,
    pub recommendation: Recommendation,
    /// Index in `trials` of the trial the brief-level decision is taken from.
    pub chosen: usize,
    pub context: ReviewContext,
    pub decision: Decision,
    pub approval: Option<ApprovalState>,
}

impl Review {
    pub fn trial(&self, id: TrialId) -> Option<&TrialReview> {
        self.trials.iter().find(|t| t.context.trial.id == id)
    }

    /// What the approval record keeps of the inputs: one trial's inputs as before trials existed,
    /// else every trial's by id.
    fn inputs_record(&self) -> Value {
        match self.trials.as_slice() {
            [only] => serde_json::to_value(&only.context.inputs).unwrap_or(Value::Null),
            all => Value::Object(
                all.iter()
                    .map(|t| {
                        (
                            t.context.trial.id.to_string(),
                            serde_json::to_value(&t.context.inputs).unwrap_or(Value::Null),
                        )
                    })
                    .collect(),
            ),
        }
    }
}

/// The whole brief (trial 1's allocation included: the default card reads it).
pub async fn load_brief(state: &AppState, id: BriefId) -> Result<Brief, AppError> {
    trials::load_brief(&state.pool, id).await
}

pub async fn review(state: &AppState, id: BriefId) -> Result<Review, AppError> {
    review_for(state, load_brief(state, id).await?).await
}

/// The review of a brief already loaded.
pub async fn review_for(state: &AppState, brief: Brief) -> Result<Review, AppError> {
    review_with(&mut Reads::Pool(&state.pool), brief).await
}

/// The review of a brief already loaded, every read on `conn` one after another: inside a
/// transaction, the review of its snapshot.
pub async fn review_in(conn: &mut PgConnection, brief: Brief) -> Result<Review, AppError> {
    review_with(&mut Reads::Tx(conn), brief).await
}

async fn review_with(reads: &mut Reads<'_>, brief: Brief) -> Result<Review, AppError> {
    let contexts = gather(reads, &brief).await?;
    // Approving today reserves from tomorrow (UTC); the review's JSON is kept per UTC day.
    let start_date = (Utc::now() + chrono::Duration::days(1)).date_naive();
    let currency = brief.fields.currency.clone();
    let mut trials: Vec<TrialReview> = contexts
        .into_iter()
        .map(|context| {
            let decision = decide(&context.inputs);
            let reservation = needs_reservation(decision.decision).then(|| {
                reservation(&ReservationBasis {
                    trial: context.trial.id,
                    provider: &context.trial.fields.provider,
                    gpu: &context.trial_gpu,
                    currency: &currency,
                    decision: decision.decision,
                    suggested_replicas: decision.suggested_replicas,
                    money: context.inputs.money.as_ref(),
                    start_date,
                })
            });
            TrialReview {
                context,
                decision,
                changes: Vec::new(),
                reservation,
            }
        })
        .collect();
    mark_reruns(&mut trials);
    let recommendation = recommend(&trials.iter().map(TrialReview::standing).collect::<Vec<_>>());
    let chosen = recommendation
        .recommended
        .or(recommendation.closest)
        .and_then(|r| trials.iter().position(|t| t.context.trial.id == r))
        .unwrap_or(0);
    let digests: Vec<(TrialId, String)> = trials
        .iter()
        .map(|t| (t.context.trial.id, t.decision.inputs_digest.clone()))
        .collect();
    let Some(main) = trials.get(chosen) else {
        return Err(AppError::NotFound("trial"));
    };
    let context = main.context.clone();
    let mut decision = main.decision.clone();
    decision.inputs_digest = overall_digest(&digests);
    let mut review = Review {
        brief,
        trials,
        recommendation,
        chosen,
        context,
        decision,
        approval: None,
    };
    review.approval = approval_state(reads, &review).await?;
    Ok(review)
}

/// The brief's latest verdict and whether it still holds: stale when the review's inputs moved,
/// or when a re-validation run of the commitment it opened regressed.
async fn approval_state(reads: &mut Reads<'_>, review: &Review) -> Result<Option<ApprovalState>, AppError> {
    let id = review.brief.id;
    let latest = match reads {
        Reads::Pool(pool) => repo::latest_approval(*pool, id).await?,
        Reads::Tx(conn) => repo::latest_approval(&mut **conn, id).await?,
    };
    let regression = match (&latest, reads) {
        (Some(row), Reads::Pool(pool)) => commitments::regression_of(*pool, row.id).await?,
        (Some(row), Reads::Tx(conn)) => commitments::regression_of(&mut **conn, row.id).await?,
        (None, _) => None,
    };
    Ok(latest.map(|row| {
        let stale = row.inputs_digest != review.decision.inputs_digest || regression.is_some();
        let changed = if stale {
            changed_inputs(&row.inputs.0, &review.inputs_record())
        } else {
            Vec::new()
        };
        let stale_reason = stale.then_some(if regression.is_some() { "regression" } else { "inputs" });
        ApprovalState {
            row,
            stale,
            changed,
            stale_reason,
            regression,
        }
    }))
}

/// A re-run says what changed since the trial it re-runs: each criterion, the capacity and the
/// money.
fn mark_reruns(trials: &mut [TrialReview]) {
    for i in 0..trials.len() {
        if let Some(of) = trials[i].context.trial.fields.rerun_of {
            if let Some(earlier) = trials.iter().find(|t| t.context.trial.id == of) {
                let mut changes = rerun_changes(&earlier.context.inputs.criteria, &trials[i].context.inputs.criteria);
                changes.extend(money_changes(
                    earlier.context.inputs.money.as_ref(),
                    trials[i].context.inputs.money.as_ref(),
                ));
                trials[i].changes = changes;
            }
        }
    }
}

/// A manager's verdict as submitted.
pub struct VerdictRequest {
    pub verdict: String,
    pub comment: String,
    pub inputs_digest: String,
    /// The trial the verdict names; absent: the recommended trial (else the first).
    pub trial: Option<TrialId>,
    /// The manager's choices on the computed reservation (term, start date), as text; any other
    /// field must equal what the review computed.
    pub reservation: BTreeMap<String, String>,
    /// An action other than the computed one (decision.md, "Override"), with its reason.
    pub decision: Option<String>,
    pub override_reason: String,
    /// The manager acknowledges that the trial's evidence names another GPU model.
    pub acknowledge_mismatch: bool,
}

pub fn needs_reservation(decision: Verdict) -> bool {
    matches!(decision, Verdict::Reserve | Verdict::Dedicate | Verdict::Scale)
}

/// Records an approval or rejection of one trial's decision. Only managers (and admins); a
/// rejection needs a comment, and so does approving a trial that is not the recommended one; the
/// digest must be the current one (409 otherwise); approving reserve, dedicate or scale records a
/// reservation of that trial's allocation. One transaction holds the brief's lock and reads one
/// snapshot from the moment it got it (`briefs::service::begin_locked`): the review is computed in
/// it, so what is recorded is exactly the review read under the lock.
pub async fn record_verdict(
    state: &AppState,
    brief_id: BriefId,
    actor: &Principal,
    request: VerdictRequest,
) -> Result<ApprovalRow, AppError> {
    actor.require_person(Role::Manager)?;
    let mut tx = briefs::begin_locked(&state.pool, brief_id).await?;
    let row = record_verdict_locked(&mut tx, state, brief_id, actor, request).await?;
    tx.commit().await?;
    Ok(row)
}

/// [`record_verdict`] in the caller's transaction, which holds the brief's lock and its snapshot
/// (`briefs::service::begin_locked`); the caller commits. Every check and write of a verdict runs
/// in that one transaction, in the steps below.
pub async fn record_verdict_locked(
    conn: &mut PgConnection,
    state: &AppState,
    brief_id: BriefId,
    actor: &Principal,
    request: VerdictRequest,
) -> Result<ApprovalRow, AppError> {
    actor.require_person(Role::Manager)?;
    let (verdict, comment) = verdict_and_comment(&request)?;
    // Read in the caller's transaction: its snapshot is the state under the brief's lock, so a
    // write that commits meanwhile (a price import, a trial edit) is not half read, and one under
    // the brief (evidence, ledger lines, a card revision) waits for the lock.
    let brief = trials::load_brief_in(conn, brief_id).await?;
    let current = review_in(conn, brief).await?;
    if request.inputs_digest != current.decision.inputs_digest {
        return Err(AppError::Conflict(format!(
            "the review changed since it was loaded (digest {} is not the current {}); reload it and decide again",
            request.inputs_digest, current.decision.inputs_digest
        )));
    }
    let trial_id = request.trial.unwrap_or(current.context.trial.id);
    let trial = chosen_trial(&current, trial_id)?;
    if verdict == ApprovalVerdict::Approve {
        check_approval(conn, brief_id, trial_id, actor, trial).await?;
        check_not_recommended_said(&current, trial_id, &comment)?;
    }
    let overridden = decision_override(
        verdict,
        trial.decision.decision,
        request.decision.as_deref(),
        &request.override_reason,
    )
    .map_err(AppError::Validation)?;
    let decision = overridden.as_ref().map_or(trial.decision.decision, |o| o.approved);
    let mismatch_acknowledged = acknowledged_mismatch(verdict, &request, trial)?;
    let mut reservation = reservation_to_record(verdict, overridden.as_ref(), trial, &current, &request)?;
    let continues = match reservation.as_mut() {
        Some(r) => Some(starts_after_the_term_it_renews(conn, brief_id, r).await?),
        None => None,
    };
    let inputs = current.inputs_record();
    let row = repo::insert_approval(
        &mut *conn,
        &repo::NewApproval {
            brief_id,
            trial_id,
            verdict,
            decision,
            inputs_digest: &current.decision.inputs_digest,
            comment: &comment,
            decided_by: &actor.label(),
            reservation: reservation.as_ref(),
            decision_override: overridden.as_ref(),
            mismatch_acknowledged: mismatch_acknowledged.as_deref(),
            inputs: &inputs,
        },
    )
    .await?;
    if let (Some(r), Some(continues)) = (&reservation, continues) {
        open_commitment(conn, &row, brief_id, r, continues, trial, actor).await?;
    }
    let recorded = Recorded {
        brief_id,
        trial_id,
        verdict,
        decision,
        comment: &comment,
        reservation: reservation.as_ref(),
        overridden: overridden.as_ref(),
        mismatch_acknowledged: mismatch_acknowledged.as_deref(),
    };
    announce(conn, state, actor, &current, trial, &recorded).await?;
    Ok(row)
}

/// A reservation approved while the brief's commitment is due for renewal renews it (a new
/// commitment linked to the old one), so it starts the day after that term's last day: from
/// tomorrow, or a day the manager chose inside the term, the two would overlap and every day of
/// the overlap would count twice in the portfolio. Answers what the reservation continues, which
/// the commitment it opens is read from.
async fn starts_after_the_term_it_renews(
    conn: &mut PgConnection,
    brief_id: BriefId,
    r: &mut Reservation,
) -> Result<commitments::Continues, AppError> {
    let continues = commitments::continues(&mut *conn, brief_id, r).await?;
    if let commitments::Continues::Renew { last_day, .. } = continues {
        if r.start_date <= last_day {
            r.start_date = last_day.succ_opt().unwrap_or(last_day);
        }
    }
    Ok(continues)
}

/// Approving a trial that is not the recommended one needs a comment saying why.
fn check_not_recommended_said(current: &Review, trial_id: TrialId, comment: &str) -> Result<(), AppError> {
    if current.recommendation.recommended.is_some_and(|r| r != trial_id) && comment.is_empty() {
        return Err(AppError::Validation(vec![FieldError::new(
            "comment",
            "approving a trial that is not the recommended one needs a comment saying why",
        )]));
    }
    Ok(())
}

/// The commitment an approval that reserves opens, with the offer's on-demand rate and the
/// criteria it was approved on.
async fn open_commitment(
    conn: &mut PgConnection,
    row: &ApprovalRow,
    brief_id: BriefId,
    r: &Reservation,
    continues: commitments::Continues,
    trial: &TrialReview,
    actor: &Principal,
) -> Result<(), AppError> {
    let approved = commitments::Approved {
        approval_id: row.id,
        brief_id,
        approved_at: row.decided_at,
        reservation: r,
        on_demand_rate: trial
            .context
            .inputs
            .money
            .as_ref()
            .and_then(|m| m.reservation_rates.on_demand_rate),
        criteria: serde_json::to_value(&trial.context.inputs.criteria).unwrap_or(Value::Null),
        continues,
    };
    commitments::open_for_approval(&mut *conn, &approved, &actor.label()).await?;
    Ok(())
}

/// The verdict asked for and its comment, trimmed: a rejection says why, in at most 10,000
/// characters.
fn verdict_and_comment(request: &VerdictRequest) -> Result<(ApprovalVerdict, String), AppError> {
    let Ok(verdict) = request.verdict.parse::<ApprovalVerdict>() else {
        return Err(AppError::Validation(vec![FieldError::new(
            "verdict",
            "must be approve or reject",
        )]));
    };
    let comment = request.comment.trim().to_owned();
    if verdict == ApprovalVerdict::Reject && comment.is_empty() {
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
    Ok((verdict, comment))
}

/// The trial the verdict is on, one of the brief's.
fn chosen_trial(current: &Review, trial_id: TrialId) -> Result<&TrialReview, AppError> {
    current.trial(trial_id).ok_or_else(|| {
        AppError::Validation(vec![FieldError::new(
            "trial",
            format!(
                "is not a trial of this brief; its trials are: {}",
                current
                    .trials
                    .iter()
                    .map(|t| format!("{} ({})", t.context.trial.fields.name, t.context.trial.id))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )])
    })
}

/// Whether `actor` may approve `trial`: its card must test something, and whoever changed the card
/// since the last approval does not also approve the result.
async fn check_approval(
    conn: &mut PgConnection,
    brief_id: BriefId,
    trial_id: TrialId,
    actor: &Principal,
    trial: &TrialReview,
) -> Result<(), AppError> {
    // "Accepted" means every required criterion passed; with none required, nothing was
    // checked (a card made all optional), and approving it would record an acceptance test
    // that tested nothing.
    if trial.decision.accepted && trial.required_tests_that_can_fail() == 0 {
        return Err(AppError::Validation(vec![FieldError::new(
            "verdict",
            "the card has no required criterion that applies and could fail (a threshold every value meets, \
             such as gpu.count ≥ 0, tests nothing), so this trial was accepted without any test: mark at least \
             one real criterion required on the card before approving",
        )]));
    }
    // Separation of duties: whoever changed the card since the last approval (its thresholds,
    // which criteria count) does not also approve the result; another manager does.
    let email = match actor {
        Principal::User { email, .. } => Some(email.clone()),
        Principal::Token { user: Some(u), .. } => users::by_id(&mut *conn, *u).await?.map(|u| u.email),
        Principal::Token { .. } => None,
    };
    // Three reads, each of its owner's table: the last approval, the person's tokens, the card.
    let since = repo::last_approved_at(&mut *conn, brief_id, trial_id).await?;
    let jtis = match actor.user_id() {
        Some(person) => token::jtis_of(&mut *conn, person).await?,
        None => Vec::new(),
    };
    let email = email.as_deref().unwrap_or("");
    if let Some(revision) = cards::revision_saved_by(&mut *conn, brief_id, since, email, &jtis).await? {
        return Err(AppError::Forbidden(format!(
            "you changed this brief's card (revision {revision}) since its last approval, so another manager \
             must approve it; you may still reject it"
        )));
    }
    Ok(())
}

/// The GPU model the trial's evidence names instead of its own, when an approval acknowledges it;
/// an error when an approval does not.
fn acknowledged_mismatch(
    verdict: ApprovalVerdict,
    request: &VerdictRequest,
    trial: &TrialReview,
) -> Result<Option<String>, AppError> {
    // Evidence that names another GPU model than the trial's may come from another machine:
    // approving it is a choice the manager makes knowingly, and it is recorded.
    let mismatch = trial.context.gpu_mismatch.as_ref().map(|(_, named)| named.clone());
    if verdict == ApprovalVerdict::Approve && !request.acknowledge_mismatch {
        if let Some(named) = &mismatch {
            return Err(AppError::Validation(vec![FieldError::new(
                "acknowledge_mismatch",
                format!(
                    "the evidence of this trial names {named}, not its {}: confirm that you approve it anyway",
                    trial.context.trial_gpu
                ),
            )]));
        }
    }
    Ok(if verdict == ApprovalVerdict::Approve {
        mismatch
    } else {
        None
    })
}

/// The reservation an approval records: the review's, or what an overriding decision would
/// reserve, with the manager's choices applied; none for a rejection.
fn reservation_to_record(
    verdict: ApprovalVerdict,
    overridden: Option<&DecisionOverride>,
    trial: &TrialReview,
    current: &Review,
    request: &VerdictRequest,
) -> Result<Option<Reservation>, AppError> {
    // An override that reserves records what approving that action would record; reserving
    // itself only at the offer's reserved price, never a "reservation" at the hourly rate.
    let overridden_reservation = match overridden {
        Some(o)
            if o.approved == Verdict::Reserve && trial.decision.reservation.reserved_rate_per_gpu_hour.is_none() =>
        {
            return Err(AppError::Validation(vec![FieldError::new(
                "decision",
                "no reserved price of this offer is known, so there is nothing to reserve at: import the \
                 provider's reserved price first (Prices)",
            )]));
        }
        Some(o) if needs_reservation(o.approved) => Some(reservation(&ReservationBasis {
            trial: trial.context.trial.id,
            provider: &trial.context.trial.fields.provider,
            gpu: &trial.context.trial_gpu,
            currency: &current.brief.fields.currency,
            decision: o.approved,
            suggested_replicas: trial.decision.suggested_replicas,
            money: trial.context.inputs.money.as_ref(),
            start_date: (Utc::now() + chrono::Duration::days(1)).date_naive(),
        })),
        Some(_) => None,
        None => trial.reservation.clone(),
    };
    Ok(match (&overridden_reservation, verdict) {
        (Some(Ok(computed)), ApprovalVerdict::Approve) => {
            let mut r = computed.clone();
            apply_choices(&mut r, &request.reservation).map_err(AppError::Validation)?;
            Some(r)
        }
        (Some(Err(why)), ApprovalVerdict::Approve) => {
            return Err(AppError::Validation(vec![FieldError::new("reservation", *why)]));
        }
        _ => None,
    })
}

/// What a recorded verdict says, for its audit entry and its webhook event.
struct Recorded<'a> {
    brief_id: BriefId,
    trial_id: TrialId,
    verdict: ApprovalVerdict,
    decision: Verdict,
    comment: &'a str,
    reservation: Option<&'a Reservation>,
    overridden: Option<&'a DecisionOverride>,
    mismatch_acknowledged: Option<&'a str>,
}

/// The verdict in the audit log, and as a webhook event in the outbox.
async fn announce(
    conn: &mut PgConnection,
    state: &AppState,
    actor: &Principal,
    current: &Review,
    trial: &TrialReview,
    r: &Recorded<'_>,
) -> Result<(), AppError> {
    audit::record(
        &mut *conn,
        &actor.label(),
        &format!("approval.{}", r.verdict),
        &format!("brief:{}", r.brief_id),
        json!({
            "trial": r.trial_id,
            "recommended_trial": current.recommendation.recommended,
            "decision": r.decision,
            "inputs_digest": current.decision.inputs_digest,
            "comment": r.comment,
            "reservation": r.reservation,
            "override": r.overridden,
            "mismatch_acknowledged": r.mismatch_acknowledged,
        }),
    )
    .await?;
    let trial_name = &trial.context.trial.fields.name;
    outbox::enqueue(
        &mut *conn,
        &state.config.public_url,
        &outbox::Event {
            kind: outbox::APPROVAL_RECORDED,
            brief_id: r.brief_id,
            brief_name: &current.brief.fields.name,
            trial_id: Some(r.trial_id),
            old: current.approval.as_ref().map_or(Value::Null, |a| {
                json!({ "verdict": a.row.verdict, "decision": a.row.decision, "trial": a.row.trial_id, "stale": a.stale })
            }),
            new: json!({
                "verdict": r.verdict,
                "decision": r.decision,
                "trial": r.trial_id,
                "decided_by": actor.label(),
                "comment": r.comment,
                "inputs_digest": current.decision.inputs_digest,
                "override": r.overridden,
                "mismatch_acknowledged": r.mismatch_acknowledged,
            }),
            text: format!(
                "{} {} {}{} on brief {} (trial {trial_name})",
                actor.label(),
                r.verdict.done(),
                r.decision.as_str(),
                r.overridden
                    .map(|o| format!(" over the computed {}: {}", o.computed, o.reason))
                    .unwrap_or_default(),
                current.brief.fields.name,
            ),
        },
    )
    .await?;
    Ok(())
}
