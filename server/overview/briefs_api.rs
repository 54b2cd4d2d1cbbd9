//! `GET /api/v1/briefs`: the briefs list of the API, paged by cursor and filtered like the
//! dashboard (the same `brief_list`), each brief with its sizing and its review summary; and
//! `GET`/`PUT /api/v1/briefs/{id}`, whose `status` is the review summary's state.

use std::collections::BTreeSet;

use axum::{
    response::{IntoResponse, Response},
    Json,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use crate::{
    auth::{teams, users, Role},
    briefs::model::{validate, BriefView, NEW_BRIEF_STATUS},
    error::{ApiResult, AppError},
    ids::{BriefId, TeamId, TrialId, UserId},
    overview::{
        brief_list::{self, decode_cursor, encode_cursor, STATES},
        list_query::BriefFilter,
    },
    review::summaries::SummaryRow,
    state::AppState,
    trials::{self, brief_api::brief_input},
    validation::FieldError,
    web::{
        auth::ApiCall,
        extract::{ApiJson, ApiQuery, BriefPath},
    },
};

/// Briefs on a page unless `limit` says otherwise, and the most one page may hold.
const DEFAULT_LIMIT: usize = 50;
const MAX_LIMIT: usize = 200;

#[derive(Deserialize, Default)]
pub struct ListParams {
    /// Words in the name, model name or catalogue model.
    q: Option<String>,
    /// Summary states, comma-separated.
    state: Option<String>,
    /// `me`, an account id or an email.
    owner: Option<String>,
    /// A team's id or name.
    team: Option<String>,
    needs_approval: Option<bool>,
    stale: Option<bool>,
    failing: Option<bool>,
    cursor: Option<String>,
    limit: Option<usize>,
}

/// What a list shows of a brief's review.
#[derive(Serialize, ToSchema)]
#[schema(as = BriefSummary)]
struct SummaryView<'a> {
    decision: &'a str,
    /// awaiting-evidence | needs-approval | stale | approved | rejected
    state: &'a str,
    /// The trial the decision is taken from.
    #[schema(value_type = Uuid)]
    trial_id: TrialId,
    accepted: bool,
    /// A decimal string.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    cost_per_job: Option<rust_decimal::Decimal>,
    criteria_passed: i32,
    criteria_required: i32,
    failing: bool,
    evidence_count: i64,
    last_evidence_at: Option<chrono::DateTime<chrono::Utc>>,
}

impl<'a> From<&'a SummaryRow> for SummaryView<'a> {
    fn from(r: &'a SummaryRow) -> Self {
        let s = &r.summary;
        Self {
            decision: &r.decision,
            state: &s.state,
            trial_id: r.trial_id,
            accepted: r.accepted,
            cost_per_job: s.cost_per_job,
            criteria_passed: s.criteria_passed,
            criteria_required: s.criteria_required,
            failing: s.failing,
            evidence_count: s.evidence_count,
            last_evidence_at: s.last_evidence_at,
        }
    }
}

/// A brief with its review summary.
#[derive(Serialize, ToSchema)]
#[schema(as = BriefListItem)]
struct Item<'a> {
    #[serde(flatten)]
    brief: BriefView<'a>,
    summary: SummaryView<'a>,
}

/// A page of briefs, newest first.
#[derive(Serialize, ToSchema)]
struct BriefPage<'a> {
    /// each brief with its review summary
    items: Vec<Item<'a>>,
    /// pass as ?cursor= for the next page; null at the end
    next_cursor: Option<String>,
}

fn invalid(field: &str, message: impl Into<String>) -> AppError {
    AppError::Validation(vec![FieldError::new(field, message)])
}

/// The summary states the state, needs_approval and stale parameters leave, or `None` for all.
fn states(p: &ListParams) -> Result<Option<Vec<String>>, AppError> {
    let mut allowed: Option<BTreeSet<&str>> = None;
    let mut narrow = |set: BTreeSet<&'static str>| {
        allowed = Some(match allowed.take() {
            None => set,
            Some(a) => a.intersection(&set).copied().collect(),
        });
    };
    if let Some(raw) = p.state.as_deref().filter(|s| !s.trim().is_empty()) {
        let mut set = BTreeSet::new();
        for s in raw.split(',').map(str::trim) {
            let known = STATES
                .iter()
                .find(|k| **k == s)
                .ok_or_else(|| invalid("state", format!("{s:?} is not a state: use {}", STATES.join(", "))))?;
            set.insert(*known);
        }
        narrow(set);
    }
    let waiting: BTreeSet<&str> = ["needs-approval", "stale"].into();
    match p.needs_approval {
        Some(true) => narrow(waiting.clone()),
        Some(false) => narrow(STATES.iter().copied().filter(|s| !waiting.contains(s)).collect()),
        None => {}
    }
    match p.stale {
        Some(true) => narrow(["stale"].into()),
        Some(false) => narrow(STATES.iter().copied().filter(|s| *s != "stale").collect()),
        None => {}
    }
    Ok(allowed.map(|set| set.into_iter().map(str::to_owned).collect()))
}

async fn owner(state: &AppState, caller: &crate::auth::Principal, raw: &str) -> Result<UserId, AppError> {
    let raw = raw.trim();
    if raw == "me" {
        return caller
            .user_id()
            .ok_or_else(|| invalid("owner", "owner=me needs a person's token or session"));
    }
    if let Ok(id) = raw.parse::<UserId>() {
        // An unknown id is refused like an unknown email, rather than answering an empty list.
        return users::by_id(&state.pool, id)
            .await?
            .map(|u| u.id)
            .ok_or_else(|| invalid("owner", format!("no account has the id {id}")));
    }
    users::by_email(&state.pool, raw)
        .await?
        .map(|u| u.id)
        .ok_or_else(|| invalid("owner", format!("no account has the email {raw:?}")))
}

async fn team(state: &AppState, raw: &str) -> Result<TeamId, AppError> {
    let found = match raw.trim().parse::<TeamId>() {
        Ok(id) => teams::team_by_id(&state.pool, id).await,
        Err(_) => teams::team_by_name(&state.pool, raw).await,
    };
    match found {
        Ok(t) => Ok(t.id),
        Err(AppError::NotFound(_)) => Err(invalid("team", format!("there is no team {:?}", raw.trim()))),
        Err(e) => Err(e),
    }
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs",
    operation_id = "listBriefs",
    tag = "briefs",
    summary = "Briefs, newest first, cursor-paginated and filtered; each with its review summary",
    params(
        ("q" = Option<String>, Query, description = "words in the name, model name or catalogue model"),
        ("state" = Option<String>, Query,
            description = "summary states, comma-separated: awaiting-evidence, needs-approval, stale, approved, rejected"),
        ("owner" = Option<String>, Query, description = "me, an account id or an email"),
        ("team" = Option<String>, Query, description = "a team's id or name"),
        ("needs_approval" = Option<bool>, Query, description = "true: awaiting a manager (needs-approval or stale)"),
        ("stale" = Option<bool>, Query, description = "true: the newest verdict is stale"),
        ("failing" = Option<bool>, Query, description = "true: a required criterion fails"),
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 200, description = "briefs per page, 1 to 200 (default 50)"),
    ),
    responses(
        (status = 200, description = "{ items: [brief with summary], next_cursor }", body = BriefPage),
        (status = 422, description = "an unknown state, owner or team, or a damaged cursor"),
    )
)]
pub async fn list(ApiCall { state, caller }: ApiCall, ApiQuery(p): ApiQuery<ListParams>) -> ApiResult<Response> {
    caller.require_person(Role::Engineer)?;
    let limit = p.limit.unwrap_or(DEFAULT_LIMIT);
    if !(1..=MAX_LIMIT).contains(&limit) {
        return Err(invalid("limit", format!("must be 1 to {MAX_LIMIT}")));
    }
    let after = match p.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(decode_cursor(c).ok_or_else(|| invalid("cursor", "is not a next_cursor this API wrote"))?),
    };
    let mut filter = BriefFilter {
        search: p.q.clone().filter(|s| !s.trim().is_empty()),
        states: states(&p)?,
        failing: p.failing,
        ..BriefFilter::default()
    };
    if let Some(raw) = p.owner.as_deref().filter(|s| !s.trim().is_empty()) {
        filter.owner = Some(owner(&state, &caller, raw).await?);
    }
    if let Some(raw) = p.team.as_deref().filter(|s| !s.trim().is_empty()) {
        filter.team = Some(team(&state, raw).await?);
    }
    // A token limited to one brief sees that brief alone, when it meets the filter.
    filter.only = caller.brief_scope();
    let page = brief_list::page(&state, &filter, after, limit).await?;
    let items: Vec<Item<'_>> = page
        .items
        .iter()
        .map(|l| Item {
            brief: BriefView::new(&l.brief, &l.summary.summary.state),
            summary: (&l.summary).into(),
        })
        .collect();
    let answer = BriefPage {
        items,
        next_cursor: page.next.map(encode_cursor),
    };
    // Serialized here: the items borrow the page.
    Ok(Json(answer).into_response())
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}",
    operation_id = "getBrief",
    tag = "briefs",
    summary = "One brief with sizing and status",
    params(BriefPath),
    responses(
        (status = 200, description = "the brief", body = BriefView),
        (status = 404, description = "no such brief"),
    )
)]
pub async fn show(ApiCall { state, caller }: ApiCall, path: BriefPath) -> ApiResult<Response> {
    caller.may_read_brief(path.id)?;
    let brief = path.load(&state).await?;
    let status = status_of(&state, brief.id).await?;
    Ok(Json(BriefView::new(&brief, &status)).into_response())
}

#[utoipa::path(
    put,
    path = "/api/v1/briefs/{id}",
    operation_id = "replaceBrief",
    tag = "briefs",
    summary = "Replace every field of a brief; sizing is recomputed",
    params(BriefPath),
    request_body = crate::briefs::schema::BriefBody,
    responses(
        (status = 200, description = "the brief", body = BriefView),
        (status = 404, description = "no such brief"),
        (status = 422, description = "invalid fields"),
    )
)]
pub async fn replace(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
    ApiJson(body): ApiJson<Value>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    let fields = validate(&brief_input(&body)?).map_err(AppError::Validation)?;
    let brief = trials::service::replace_brief(&state.pool, id, &fields, &caller).await?;
    let status = status_of(&state, brief.id).await?;
    Ok(Json(BriefView::new(&brief, &status)).into_response())
}

/// Where a brief's review stands: its current summary's state (computed now when changes are
/// still queued), `awaiting-evidence` before it has one.
async fn status_of(state: &AppState, id: BriefId) -> Result<String, AppError> {
    let summary = crate::review::summaries::current(state, &[id]).await?;
    Ok(summary
        .into_iter()
        .next()
        .map_or_else(|| NEW_BRIEF_STATUS.to_owned(), |r| r.summary.state))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(state: Option<&str>, needs_approval: Option<bool>, stale: Option<bool>) -> ListParams {
        ListParams {
            state: state.map(str::to_owned),
            needs_approval,
            stale,
            ..ListParams::default()
        }
    }

    #[test]
    fn state_needs_approval_and_stale_narrow_together() {
        assert_eq!(states(&params(None, None, None)).unwrap(), None);
        assert_eq!(
            states(&params(None, Some(true), None)).unwrap(),
            Some(vec!["needs-approval".to_owned(), "stale".to_owned()])
        );
        assert_eq!(
            states(&params(Some("approved, stale"), Some(true), None)).unwrap(),
            Some(vec!["stale".to_owned()])
        );
        assert_eq!(
            states(&params(None, Some(true), Some(false))).unwrap(),
            Some(vec!["needs-approval".to_owned()])
        );
        assert!(states(&params(Some("pending"), None, None)).is_err());
    }
}
