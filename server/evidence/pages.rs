//! Pages for evidence: `/evidence/{eid}` (metadata, warnings, parsed metrics, raw text), and the
//! evidence list shown on the brief page.

use askama::Template;
use axum::{
    extract::State,
    response::{Html, IntoResponse, Response},
    routing::get,
    Router,
};
use serde_json::Value;

use super::{
    model::{decode_cursor, human_size},
    repo::{self, EvidenceRow},
};
use crate::{
    auth::token,
    error::AppError,
    ids::{BriefId, EvidenceId, TokenId, TrialId},
    state::AppState,
    web::{
        auth::PageUser,
        extract::{ApiQuery, BriefPath, Path},
        page::{render, PageContext, PageResult},
    },
};

/// How much raw text the page shows; the rest is a download.
const PREVIEW_BYTES: i32 = 256 * 1024;
/// Rows in the brief page's evidence list.
pub const BRIEF_PAGE_ROWS: i64 = 50;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/evidence/{id}", get(show))
        .route("/briefs/{id}/evidence", get(list_page))
}

/// One row of the evidence list on the brief page, display-ready.
pub struct EvidenceListRow {
    pub id: String,
    pub kind: String,
    pub stage: i16,
    pub status: String,
    pub status_class: &'static str,
    pub collected: String,
    pub received: String,
    pub size: String,
    pub who: String,
}

fn status_class(status: &str) -> &'static str {
    match status {
        "ok" => "ok",
        "partial" => "warn",
        _ => "bad",
    }
}

fn when(t: chrono::DateTime<chrono::Utc>) -> String {
    t.format("%Y-%m-%d %H:%M:%S UTC").to_string()
}

impl From<&EvidenceRow> for EvidenceListRow {
    fn from(r: &EvidenceRow) -> Self {
        Self {
            id: r.id.to_string(),
            kind: r.kind.clone(),
            stage: r.stage,
            status: r.parse_status.clone(),
            status_class: status_class(&r.parse_status),
            collected: when(r.collected_at),
            received: when(r.received_at),
            size: human_size(r.size_bytes),
            who: r.uploaded_by.clone().unwrap_or_else(|| "—".to_owned()),
        }
    }
}

/// List rows with each token uploader by the name it was given (one query for the lot).
async fn list_rows(state: &AppState, rows: &[EvidenceRow]) -> Result<Vec<EvidenceListRow>, AppError> {
    let jtis: Vec<TokenId> = rows
        .iter()
        .filter_map(|r| r.uploaded_by.as_deref().and_then(token::jti_in_label))
        .collect();
    let names = token::names(&state.pool, &jtis).await?;
    Ok(rows
        .iter()
        .map(|r| {
            let mut row = EvidenceListRow::from(r);
            if let Some(by) = &r.uploaded_by {
                row.who = token::label_with_name(by, &names);
            }
            row
        })
        .collect())
}

/// The newest evidence of one trial of a brief, for the brief page.
pub async fn brief_rows(state: &AppState, brief_id: BriefId, trial: TrialId) -> Result<Vec<EvidenceListRow>, AppError> {
    let rows = repo::list_for_brief(&state.pool, brief_id, Some(trial), None, BRIEF_PAGE_ROWS).await?;
    list_rows(state, &rows).await
}

/// Rows on one page of `/briefs/{id}/evidence`.
const LIST_PAGE_ROWS: i64 = 100;

#[derive(Template)]
#[template(path = "evidence/all.html")]
struct EvidenceListPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    rows: Vec<EvidenceListRow>,
    first_page: bool,
    next_cursor: Option<String>,
}

#[derive(serde::Deserialize)]
struct ListQuery {
    cursor: Option<String>,
}

/// `/briefs/{id}/evidence`: every upload of a brief (all trials), newest first, a page at a time —
/// the page a person follows, where the API answers the same list as JSON.
async fn list_page(
    State(state): State<AppState>,
    user: PageUser,
    path: BriefPath,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> PageResult<Response> {
    let brief = path.load(&state).await?;
    let id = brief.id;
    let after = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(decode_cursor(c).ok_or_else(|| {
            AppError::BadRequest("This page link is damaged: start again from the newest evidence.".into())
        })?),
    };
    let (rows, next_cursor) = super::service::list_page(&state, id, None, after, LIST_PAGE_ROWS).await?;
    render(&EvidenceListPage {
        ctx: (&user).into(),
        brief_id: id.to_string(),
        brief_name: brief.fields.name,
        rows: list_rows(&state, &rows).await?,
        first_page: after.is_none(),
        next_cursor,
    })
}

/// Raw bytes as the page shows them.
enum RawView {
    /// UTF-8 text (escaped by askama), and whether it was cut at the preview size.
    Text(String, bool),
    /// Not UTF-8: offered as a download only.
    Binary,
}

#[derive(Template)]
#[template(path = "evidence/show.html")]
struct EvidencePage {
    ctx: PageContext,
    id: String,
    brief_id: String,
    kind: String,
    status: String,
    status_class: &'static str,
    parse_error: Option<String>,
    facts: Vec<(&'static str, String)>,
    labels: Vec<(String, String)>,
    warnings: Vec<String>,
    metrics: Vec<(String, String)>,
    raw: RawView,
}

fn display_value(v: &Value) -> String {
    crate::figures::value(v)
}

fn raw_view(prefix: Vec<u8>, size: i64) -> RawView {
    let cut = size > prefix.len() as i64;
    match String::from_utf8(prefix) {
        Ok(s) => RawView::Text(s, cut),
        // A preview cut inside a multi-byte character is still text.
        Err(e) if cut && e.utf8_error().error_len().is_none() => {
            let valid = e.utf8_error().valid_up_to();
            let mut bytes = e.into_bytes();
            bytes.truncate(valid);
            RawView::Text(String::from_utf8(bytes).unwrap_or_default(), true)
        }
        Err(_) => RawView::Binary,
    }
}

async fn show(State(state): State<AppState>, user: PageUser, Path(id): Path<EvidenceId>) -> PageResult<Response> {
    let row = repo::get(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("evidence"))?;
    let prefix = match repo::raw_prefix(&state.pool, id, PREVIEW_BYTES).await? {
        Some(stored) => {
            let end = (row.size_bytes.max(0) as u64).min(PREVIEW_BYTES as u64);
            state.evidence_store.load_range(stored, 0..end).await?
        }
        None => Vec::new(),
    };
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".to_owned());
    let facts = vec![
        ("Kind", row.kind.clone()),
        ("Stage", row.stage.to_string()),
        ("Collected", when(row.collected_at)),
        ("Received", when(row.received_at)),
        ("Uploaded by", opt(&row.uploaded_by)),
        (
            "Size",
            format!("{} ({} bytes)", human_size(row.size_bytes), row.size_bytes),
        ),
        ("Content type", row.content_type.clone()),
        ("File name", opt(&row.filename)),
        ("SHA-256", row.sha256.clone()),
        ("Tool", opt(&row.tool)),
        ("Tool version", opt(&row.tool_version)),
        ("Parser version", row.parser_version.clone()),
    ];
    let labels = row
        .labels
        .0
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), display_value(v))).collect())
        .unwrap_or_default();
    let metrics = row
        .metrics
        .0
        .as_object()
        .map(|m| m.iter().map(|(k, v)| (k.clone(), display_value(v))).collect())
        .unwrap_or_default();
    let page = EvidencePage {
        ctx: (&user).into(),
        id: row.id.to_string(),
        brief_id: row.brief_id.to_string(),
        kind: row.kind.clone(),
        status: row.parse_status.clone(),
        status_class: status_class(&row.parse_status),
        parse_error: row.parse_error.clone(),
        facts,
        labels,
        warnings: row.warnings.0.clone(),
        metrics,
        raw: raw_view(prefix, row.size_bytes),
    };
    Ok(Html(page.render().map_err(AppError::from)?).into_response())
}
