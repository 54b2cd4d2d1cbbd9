//! JSON API for cards: `/api/v1/briefs/{id}/card…`.

use axum::{extract::State, routing::get, Json, Router};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    defaults::default_card_of,
    evaluate::{CardEvaluation, EvaluatedCriterion, StageEvaluation},
    model::{self, diff, Card, CardDiff, Criterion},
    repo,
    service::{current_card, derived_figures, evaluate_card},
};
use crate::{
    audit,
    auth::{Principal, Role},
    briefs::{model::Brief, service as briefs},
    error::{ApiResult, AppError},
    state::AppState,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, Path},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/api/v1/briefs/{id}/card", get(show).put(replace))
        .route("/api/v1/briefs/{id}/card/revisions", get(list_revisions))
        .route("/api/v1/briefs/{id}/card/revisions/{n}", get(show_revision))
}

/// The card as GET and PUT answer it: criteria with their status, value and evidence.
#[derive(Serialize)]
pub struct CardView {
    pub brief_id: Uuid,
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
}

impl CardView {
    pub fn new(brief: Uuid, card: &Card, evaluation: CardEvaluation) -> Self {
        Self {
            brief_id: brief,
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

async fn load_brief(state: &AppState, id: Uuid) -> ApiResult<Brief> {
    briefs::load(&state.pool, id).await
}

/// The current card of `brief`, evaluated.
pub async fn card_view(state: &AppState, brief: &Brief) -> ApiResult<CardView> {
    let card = current_card(&state.pool, brief).await?;
    let derived = derived_figures(&state.pool, brief).await?;
    let evaluation = evaluate_card(&state.pool, brief, &card.criteria, &derived).await?;
    Ok(CardView::new(brief.id, &card, evaluation))
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<CardView>> {
    caller.may_read_brief(id)?;
    let brief = load_brief(&state, id).await?;
    Ok(Json(card_view(&state, &brief).await?))
}

/// Saves `criteria` as the next revision of the brief's card and records it in the audit log, in
/// one transaction. Used by the API and the editor page.
pub async fn save_revision(
    state: &AppState,
    brief: &Brief,
    criteria: &[Criterion],
    who: &Principal,
) -> ApiResult<repo::CardRevision> {
    let before = current_card(&state.pool, brief).await?;
    let mut tx = state.pool.begin().await?;
    let saved = repo::append(&mut tx, brief.id, criteria, &who.label())
        .await?
        .ok_or(AppError::NotFound("brief"))?;
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

async fn replace(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Json<CardView>> {
    caller.may_read_brief(id)?;
    caller.require_person(Role::Engineer)?;
    let Value::Object(map) = &body else {
        return Err(AppError::BadRequest(
            "the body must be a JSON object { criteria: [...] }".into(),
        ));
    };
    let criteria = map
        .get("criteria")
        .ok_or_else(|| AppError::Validation(vec![crate::validation::FieldError::new("criteria", "is required")]))?;
    let card = model::validate_json(criteria).map_err(AppError::Validation)?;
    let brief = load_brief(&state, id).await?;
    save_revision(&state, &brief, &card.criteria, &caller).await?;
    Ok(Json(card_view(&state, &brief).await?))
}

#[derive(Serialize)]
struct RevisionSummary {
    revision: i32,
    created_by: String,
    created_at: DateTime<Utc>,
    criteria: usize,
}

async fn list_revisions(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<Value>> {
    caller.may_read_brief(id)?;
    load_brief(&state, id).await?;
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
    Ok(Json(json!({ "items": items })))
}

/// One stored revision and its diff against the one before (revision 1: against the default card).
#[derive(Serialize)]
pub struct RevisionView {
    pub brief_id: Uuid,
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

async fn show_revision(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path((id, n)): Path<(Uuid, i64)>,
) -> ApiResult<Json<RevisionView>> {
    caller.may_read_brief(id)?;
    let brief = load_brief(&state, id).await?;
    Ok(Json(revision_view(&state, &brief, n).await?))
}
