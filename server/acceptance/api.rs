//! JSON API for cards: `/api/v1/briefs/{id}/card…`.

use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{
    defaults::default_card_of,
    evaluate::{CardEvaluation, EvaluatedCriterion, StageEvaluation},
    model::{self, diff, Card, CardDiff, Criterion},
    repo,
    service::{current_card, derived_figures, evaluate_for_trial, StaleCriterion},
};
use crate::{
    audit,
    auth::{Principal, Role},
    briefs::{model::Brief, service as briefs},
    error::{ApiResult, AppError},
    ids::{BriefId, TrialId},
    state::AppState,
    trials::{model::Allocation, service as trials},
    web::{
        auth::ApiCall,
        extract::{ApiJson, ApiQuery, BriefPath, Path},
    },
};

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(show, replace))
        .routes(routes!(list_revisions))
        .routes(routes!(show_revision))
}

/// The card evaluated over the newest evidence, as GET and PUT answer it: criteria with their
/// status, value and evidence.
#[derive(Serialize, ToSchema)]
#[schema(as = Card)]
pub struct CardView {
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// The trial the card is evaluated for (`?trial=`; the brief's first trial by default).
    pub trial: TrialRef,
    /// 0: the generated default card.
    pub revision: i32,
    /// True when no card was saved yet and this is the generated default.
    pub default: bool,
    pub created_by: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
    pub accepted: bool,
    pub criteria: Vec<EvaluatedCriterion>,
    pub stages: Vec<StageEvaluation>,
    /// Unknown metric keys (allowed, probably typos).
    pub warnings: Vec<String>,
    /// Thresholds of this (saved) card that were set for another allocation than the trial's:
    /// what the card says, and what the trial's allocation would get.
    pub stale: Vec<StaleCriterion>,
}

/// Which trial an evaluation is of.
#[derive(Serialize, ToSchema)]
#[schema(as = CardTrial)]
pub struct TrialRef {
    #[schema(value_type = Uuid)]
    pub id: TrialId,
    pub name: String,
    /// "8 × H200 SXM", or empty when the sizing offers nothing.
    pub allocation: String,
    /// The trial names no GPU and tests the sizing's suggestion.
    pub suggested: bool,
}

impl CardView {
    pub fn new(
        brief: BriefId,
        trial: TrialRef,
        card: &Card,
        evaluation: CardEvaluation,
        stale: Vec<StaleCriterion>,
    ) -> Self {
        Self {
            brief_id: brief,
            trial,
            stale,
            revision: card.revision,
            default: card.is_default,
            created_by: card.created_by.clone(),
            created_at: card.created_at,
            accepted: evaluation.accepted(),
            warnings: model::unknown_key_warnings(&card.criteria),
            criteria: evaluation.criteria,
            stages: evaluation.stages,
        }
    }
}

/// The current card of `brief`, evaluated for one trial (the first when none is named).
pub async fn card_view(state: &AppState, brief: &Brief, trial: Option<TrialId>) -> ApiResult<CardView> {
    let trial = trials::pick(state, brief.id, trial).await?;
    let sizing = brief.fields.sizing();
    let alloc = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing);
    let card = current_card(&state.pool, brief).await?;
    let derived = derived_figures(&state.pool, brief, trial.id).await?;
    let evaluated = evaluate_for_trial(&state.pool, brief, &card, trial.id, alloc.as_ref(), &derived).await?;
    let shown = Card {
        criteria: evaluated.criteria.clone(),
        ..card
    };
    let reference = TrialRef {
        id: trial.id,
        name: trial.fields.name.clone(),
        allocation: alloc.as_ref().map(Allocation::label).unwrap_or_default(),
        suggested: alloc.as_ref().is_some_and(|a| a.suggested),
    };
    Ok(CardView::new(
        brief.id,
        reference,
        &shown,
        evaluated.evaluation,
        evaluated.stale,
    ))
}

/// `?trial=` on the card routes.
#[derive(serde::Deserialize)]
pub struct TrialQuery {
    pub trial: Option<TrialId>,
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/card",
    operation_id = "getCard",
    tag = "cards",
    summary = "The current acceptance card (the default card when none was saved), evaluated over the newest evidence",
    params(
        BriefPath,
        ("trial" = Option<Uuid>, Query, description = "evaluate for this trial (default: the brief's first trial)"),
    ),
    responses(
        (status = 200, description = "the evaluated card", body = CardView),
        (status = 404, description = "no such brief"),
    )
)]
async fn show(
    ApiCall { state, caller }: ApiCall,
    path: BriefPath,
    ApiQuery(q): ApiQuery<TrialQuery>,
) -> ApiResult<Json<CardView>> {
    caller.may_read_brief(path.id)?;
    let brief = path.load(&state).await?;
    Ok(Json(card_view(&state, &brief, q.trial).await?))
}

/// Saves `criteria` as the next revision of the brief's card and records it in the audit log, in
/// one transaction. Used by the API and the editor page.
pub async fn save_revision(
    state: &AppState,
    brief: &Brief,
    criteria: &[Criterion],
    who: &Principal,
) -> ApiResult<repo::CardRevision> {
    crate::auth::teams::may_edit_brief(&state.pool, who, brief.id).await?;
    let before = current_card(&state.pool, brief).await?;
    // The allocation the editor and the API show the card for (the first trial's): a threshold
    // left as generated for it follows the allocation when it changes (`criteria_for_trial`).
    let first = trials::pick(state, brief.id, None).await?;
    let alloc = Allocation::resolve(
        first.fields.gpu.as_deref(),
        first.fields.gpu_count,
        &brief.fields.sizing(),
    );
    let alloc = alloc
        .as_ref()
        .map(|a| (a.gpu.model.as_str(), i32::try_from(a.count).unwrap_or(i32::MAX)));
    let mut tx = state.pool.begin().await?;
    // Concurrent saves number themselves in turn.
    briefs::lock(&mut *tx, brief.id).await?;
    let saved = repo::append(&mut tx, brief.id, criteria, &who.label(), alloc).await?;
    let d = diff(&before.criteria, criteria);
    audit::record(
        &mut *tx,
        &who.label(),
        "card.revise",
        &format!("brief:{}", brief.id),
        json!({
            "revision": saved.revision,
            "criteria": criteria.len(),
            "added": d.added.len(),
            "removed": d.removed.len(),
            "changed": d.changed.len(),
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(saved)
}

#[utoipa::path(
    put,
    path = "/api/v1/briefs/{id}/card",
    operation_id = "putCard",
    tag = "cards",
    summary = "Save the card as a new revision",
    params(BriefPath),
    request_body = super::schema::CardBody,
    responses(
        (status = 200, description = "the new revision, evaluated", body = CardView),
        (status = 404, description = "no such brief"),
        (status = 422, description = "invalid criteria (per field: criteria[i].field)"),
    )
)]
async fn replace(
    ApiCall { state, caller }: ApiCall,
    path: BriefPath,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<CardView>> {
    let id = path.id;
    caller.may_read_brief(id)?;
    caller.require_person(Role::Engineer)?;
    crate::auth::teams::may_edit_brief(&state.pool, &caller, id).await?;
    let Value::Object(map) = &body else {
        return Err(AppError::BadRequest(
            "the body must be a JSON object { criteria: [...] }".into(),
        ));
    };
    let criteria = map
        .get("criteria")
        .ok_or_else(|| AppError::Validation(vec![crate::validation::FieldError::new("criteria", "is required")]))?;
    let card = model::validate_json(criteria).map_err(AppError::Validation)?;
    let brief = path.load(&state).await?;
    save_revision(&state, &brief, &card.criteria, &caller).await?;
    Ok(Json(card_view(&state, &brief, None).await?))
}

/// A saved revision of the card.
#[derive(Serialize, ToSchema)]
#[schema(as = CardRevisionSummary)]
struct RevisionSummary {
    revision: i32,
    created_by: String,
    created_at: DateTime<Utc>,
    /// How many criteria it has.
    criteria: usize,
}

/// Every saved revision of the card, newest first.
#[derive(Serialize, ToSchema)]
struct CardRevisions {
    items: Vec<RevisionSummary>,
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/card/revisions",
    operation_id = "listCardRevisions",
    tag = "cards",
    summary = "Every saved revision of the card, newest first",
    params(BriefPath),
    responses(
        (status = 200, description = "{ items: [{ revision, created_by, created_at, criteria }] }",
            body = CardRevisions),
        (status = 404, description = "no such brief"),
    )
)]
async fn list_revisions(ApiCall { state, caller }: ApiCall, path: BriefPath) -> ApiResult<Json<CardRevisions>> {
    let id = path.id;
    caller.may_read_brief(id)?;
    path.load(&state).await?;
    let items: Vec<RevisionSummary> = repo::revisions(&state.pool, id)
        .await?
        .into_iter()
        .map(|r| RevisionSummary {
            revision: r.revision,
            created_by: r.created_by,
            created_at: r.created_at,
            criteria: r.criteria.len(),
        })
        .collect();
    let answer = CardRevisions { items };
    Ok(Json(answer))
}

/// One saved revision and its diff against the one before (revision 1: against the default card).
#[derive(Serialize, ToSchema)]
#[schema(as = CardRevision)]
pub struct RevisionView {
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    pub revision: i32,
    pub created_by: String,
    pub created_at: DateTime<Utc>,
    pub criteria: Vec<Criterion>,
    /// The revision the diff is against; 0 is the generated default card.
    pub previous: i32,
    pub diff: CardDiff,
}

/// Loads revision `n` of `brief` with its diff.
pub async fn revision_view(state: &AppState, brief: &Brief, n: i64) -> ApiResult<RevisionView> {
    let n = i32::try_from(n).map_err(|_| AppError::NotFound("revision"))?;
    let r = repo::revision(&state.pool, brief.id, n)
        .await?
        .ok_or(AppError::NotFound("revision"))?;
    let previous = if n > 1 {
        repo::revision(&state.pool, brief.id, n - 1)
            .await?
            .map(|p| p.criteria)
            .unwrap_or_default()
    } else {
        default_card_of(brief).criteria
    };
    Ok(RevisionView {
        brief_id: brief.id,
        revision: r.revision,
        created_by: r.created_by,
        created_at: r.created_at,
        diff: diff(&previous, &r.criteria),
        criteria: r.criteria,
        previous: n - 1,
    })
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/card/revisions/{n}",
    operation_id = "getCardRevision",
    tag = "cards",
    summary = "One saved revision and its diff against the previous one (revision 1: against the default card)",
    params(
        BriefPath,
        ("n" = i64, Path, description = "revision number, from 1"),
    ),
    responses(
        (status = 200, description = "{ brief_id, revision, created_by, created_at, criteria, previous, diff: { added, removed, changed } }",
            body = RevisionView),
        (status = 404, description = "no such brief or revision"),
    )
)]
async fn show_revision(
    ApiCall { state, caller }: ApiCall,
    path: BriefPath,
    Path((_, n)): Path<(BriefId, i64)>,
) -> ApiResult<Json<RevisionView>> {
    caller.may_read_brief(path.id)?;
    let brief = path.load(&state).await?;
    Ok(Json(revision_view(&state, &brief, n).await?))
}
