//! JSON API for evidence: upload and list under a brief, the parsed view and the exact raw bytes.
//! Handlers stay thin (auth will add an extractor argument to each); the work is in `ingest.rs`.

use axum::{
    extract::{DefaultBodyLimit, Request, State},
    http::{header, HeaderValue},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{
    ingest,
    model::{decode_cursor, encode_cursor, is_inline_text},
    repo::{self, EvidenceRow},
};
use crate::{
    error::{ApiResult, AppError},
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCaller,
        extract::{ApiQuery, PathId},
    },
};

pub const PAGE_DEFAULT: i64 = 50;
pub const PAGE_MAX: i64 = 200;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/briefs/{id}/evidence",
            // The upload enforces RENTCHECK_MAX_UPLOAD itself while the body streams.
            get(list).post(upload).layer(DefaultBodyLimit::disable()),
        )
        .route("/api/v1/evidence/{id}", get(show))
        .route("/api/v1/evidence/{id}/raw", get(raw))
}

#[derive(Serialize)]
pub struct Links {
    #[serde(rename = "self")]
    pub this: String,
    pub raw: String,
    pub page: String,
}

/// One item as lists show it: everything but the metrics and the bytes.
#[derive(Serialize)]
pub struct EvidenceSummary {
    pub id: Uuid,
    pub brief_id: Uuid,
    pub kind: String,
    pub stage: i16,
    pub parse_status: String,
    pub parse_error: Option<String>,
    pub warnings_count: usize,
    pub content_type: String,
    pub filename: Option<String>,
    pub size_bytes: i64,
    pub sha256: String,
    pub labels: Value,
    pub collected_at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub uploaded_by: Option<String>,
    pub links: Links,
}

impl From<&EvidenceRow> for EvidenceSummary {
    fn from(r: &EvidenceRow) -> Self {
        Self {
            id: r.id,
            brief_id: r.brief_id,
            kind: r.kind.clone(),
            stage: r.stage,
            parse_status: r.parse_status.clone(),
            parse_error: r.parse_error.clone(),
            warnings_count: r.warnings.0.len(),
            content_type: r.content_type.clone(),
            filename: r.filename.clone(),
            size_bytes: r.size_bytes,
            sha256: r.sha256.clone(),
            labels: r.labels.0.clone(),
            collected_at: r.collected_at,
            received_at: r.received_at,
            uploaded_by: r.uploaded_by.clone(),
            links: Links {
                this: format!("/api/v1/evidence/{}", r.id),
                raw: format!("/api/v1/evidence/{}/raw", r.id),
                page: format!("/evidence/{}", r.id),
            },
        }
    }
}

/// The parsed view of one item.
#[derive(Serialize)]
pub struct EvidenceDetail {
    #[serde(flatten)]
    pub summary: EvidenceSummary,
    pub metrics: Value,
    pub warnings: Vec<String>,
    pub tool: Option<String>,
    pub tool_version: Option<String>,
    pub parser_version: String,
}

impl From<EvidenceRow> for EvidenceDetail {
    fn from(r: EvidenceRow) -> Self {
        Self {
            summary: EvidenceSummary::from(&r),
            metrics: r.metrics.0,
            warnings: r.warnings.0,
            tool: r.tool,
            tool_version: r.tool_version,
            parser_version: r.parser_version,
        }
    }
}

async fn upload(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    PathId(brief_id): PathId,
    req: Request,
) -> ApiResult<Response> {
    caller.may_send_to_brief(brief_id)?;
    let key = ingest::idempotency_key(req.headers())?;
    // A token scoped to this brief proves it exists (its row references the brief, cascading);
    // anyone else learns of a missing brief before the body is read.
    if caller.brief_scope() != Some(brief_id) && !repo::brief_exists(&state.pool, brief_id).await? {
        return Err(AppError::NotFound("brief"));
    }
    let upload = ingest::decode(req, state.config.max_upload).await?;
    ingest::ingest(&state, brief_id, key, upload, Some(&caller.label())).await
}

#[derive(Deserialize)]
struct ListQuery {
    cursor: Option<String>,
    limit: Option<i64>,
}

async fn list(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    PathId(brief_id): PathId,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<Value>> {
    caller.may_read_brief(brief_id)?;
    let after = match q.cursor.as_deref().filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => Some(decode_cursor(c).ok_or_else(|| {
            AppError::Validation(vec![FieldError::new("cursor", "is not a cursor this API gave out")])
        })?),
    };
    let limit = q.limit.unwrap_or(PAGE_DEFAULT);
    if !(1..=PAGE_MAX).contains(&limit) {
        return Err(AppError::Validation(vec![FieldError::new(
            "limit",
            "must be from 1 to 200",
        )]));
    }
    // A token scoped to this brief proves it exists (its row references the brief, cascading).
    if caller.brief_scope() != Some(brief_id) && !repo::brief_exists(&state.pool, brief_id).await? {
        return Err(AppError::NotFound("brief"));
    }
    let mut rows = repo::list_for_brief(&state.pool, brief_id, after, limit + 1).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| encode_cursor(r.received_at, r.id))
    } else {
        None
    };
    let items: Vec<EvidenceSummary> = rows.iter().map(EvidenceSummary::from).collect();
    Ok(Json(serde_json::json!({ "items": items, "next_cursor": next_cursor })))
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    PathId(id): PathId,
) -> ApiResult<Json<EvidenceDetail>> {
    let row = repo::get(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("evidence"))?;
    caller.may_read_brief(row.brief_id)?;
    Ok(Json(row.into()))
}

/// The exact bytes with their stored content type. Never sniffed, never run: `nosniff` and a
/// sandboxing CSP always, and anything but plain text/JSON is an attachment.
async fn raw(State(state): State<AppState>, ApiCaller(caller): ApiCaller, PathId(id): PathId) -> ApiResult<Response> {
    let r = repo::raw(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("evidence"))?;
    caller.may_read_brief(r.brief_id)?;
    let ct =
        HeaderValue::from_str(&r.content_type).unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let (content_type, filename) = (r.content_type.clone(), r.filename.clone());
    let bytes = state.evidence_store.load(r.stored.into()).await?;
    let inline = is_inline_text(&content_type) && std::str::from_utf8(&bytes).is_ok();
    let mut response = bytes.into_response();
    let h = response.headers_mut();
    h.insert(header::CONTENT_TYPE, ct);
    h.insert(header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("default-src 'none'; sandbox"),
    );
    if !inline {
        let name: String = filename
            .unwrap_or_else(|| format!("evidence-{id}"))
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || "._-".contains(c) {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
            h.insert(header::CONTENT_DISPOSITION, v);
        }
    }
    Ok(response)
}
