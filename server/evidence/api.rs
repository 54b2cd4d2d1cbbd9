//! JSON API for evidence: upload and list under a brief, the parsed view and the exact raw bytes.
//! Handlers stay thin: `upload.rs` decodes the body, `service.rs` does the work.

use axum::{
    extract::{DefaultBodyLimit, Request, State},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    routing::{get, post},
    Json, Router,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::{
    model::{decode_cursor, is_inline_text},
    repo::EvidenceRow,
    service::{self, Ingested},
    upload::{self, REPLAYED},
};
use crate::{
    auth::teams,
    error::{ApiResult, AppError},
    state::AppState,
    trials::service as trials,
    validation::FieldError,
    web::{
        auth::ApiCaller,
        extract::{ApiQuery, Path},
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
        .route(
            "/api/v1/briefs/{id}/evidence/batch",
            // The batch reads its body under its own cap while it streams.
            post(upload_batch).layer(DefaultBodyLimit::disable()),
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
    pub trial_id: Uuid,
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
            trial_id: r.trial_id,
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
    Path(brief_id): Path<Uuid>,
    req: Request,
) -> ApiResult<Response> {
    teams::may_send_to_brief(&state.pool, &caller, brief_id).await?;
    let key = upload::idempotency_key(req.headers())?;
    // A missing brief is answered before the body is read.
    let trials = trials::for_upload(&state, brief_id).await?;
    let upload = upload::decode(req, state.config.max_upload).await?;
    // Which trial: the one named, else the token's, else the brief's only one (422 naming them).
    let trial = trials::choose(&state, &trials, upload.trial, caller.trial_scope()).await?;
    Ok(
        match service::ingest(
            &state,
            brief_id,
            trial,
            key,
            &caller.idempotency_scope(),
            upload,
            Some(&caller.label()),
        )
        .await?
        {
            Ingested::Created(body) => {
                let location = body["links"]["self"].as_str().unwrap_or_default().to_owned();
                (StatusCode::CREATED, [(header::LOCATION, location)], Json(body)).into_response()
            }
            // The first answer was a 201; a replay says 200 and marks itself.
            Ingested::Replayed(body) => {
                let mut r = (StatusCode::OK, Json(body)).into_response();
                r.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
                r
            }
        },
    )
}

/// `POST /briefs/{id}/evidence/batch`: each item stored or refused on its own, the same rules as
/// one upload; the answer is 207 with one entry per item, in order.
async fn upload_batch(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(brief_id): Path<Uuid>,
    req: Request,
) -> ApiResult<Response> {
    teams::may_send_to_brief(&state.pool, &caller, brief_id).await?;
    let mut trials = trials::for_upload(&state, brief_id).await?;
    let entries = upload::decode_batch(req, state.config.max_upload).await?;
    let mut items = Vec::with_capacity(entries.len());
    for entry in entries {
        let decoded = match entry.upload {
            Ok(upload) => match trials::choose(&state, &trials, upload.trial, caller.trial_scope()).await {
                Ok(trial) => {
                    // Started by its first item; the others need not start it again.
                    if let Some(t) = trials.iter_mut().find(|t| t.id == trial) {
                        t.planned = false;
                    }
                    Ok((trial, upload))
                }
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        items.push(service::BatchItem {
            decoded,
            key: entry.key,
        });
    }
    let answers = service::ingest_batch(
        &state,
        brief_id,
        items,
        &caller.idempotency_scope(),
        Some(&caller.label()),
    )
    .await?;
    let items: Vec<Value> = answers
        .iter()
        .enumerate()
        .map(|(index, a)| match a {
            Ok(ingested) => {
                let b = ingested.body();
                serde_json::json!({
                    "index": index,
                    "status": if matches!(ingested, Ingested::Created(_)) { 201 } else { 200 },
                    "id": b["id"],
                    "parse_status": b["parse_status"],
                    "parse_error": b["parse_error"],
                    "warnings": b["warnings"].as_array().map_or(0, Vec::len),
                    "links": { "self": b["links"]["self"] },
                })
            }
            Err(e) => serde_json::json!({
                "index": index,
                "status": e.status().as_u16(),
                "problem": e.problem(),
            }),
        })
        .collect();
    Ok((StatusCode::MULTI_STATUS, Json(serde_json::json!({ "items": items }))).into_response())
}

#[derive(Deserialize)]
struct ListQuery {
    cursor: Option<String>,
    limit: Option<i64>,
    /// Only this trial's evidence.
    trial: Option<Uuid>,
}

async fn list(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(brief_id): Path<Uuid>,
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
    service::require_brief(&state, brief_id, caller.brief_scope() == Some(brief_id)).await?;
    // A trial of another brief is no trial of this one (its evidence is that brief's to show).
    if let Some(trial) = q.trial {
        if trials::load(&state, trial).await?.brief_id != brief_id {
            return Err(AppError::NotFound("trial"));
        }
    }
    let (rows, next_cursor) = service::list_page(&state, brief_id, q.trial, after, limit).await?;
    let items: Vec<EvidenceSummary> = rows.iter().map(EvidenceSummary::from).collect();
    Ok(Json(serde_json::json!({ "items": items, "next_cursor": next_cursor })))
}

async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<EvidenceDetail>> {
    let row = service::get(&state, id).await?;
    caller.may_read_brief(row.brief_id)?;
    Ok(Json(row.into()))
}

/// The exact bytes with their stored content type. Never sniffed, never run: `nosniff` and a
/// sandboxing CSP always, and anything but plain text/JSON is an attachment.
async fn raw(State(state): State<AppState>, ApiCaller(caller): ApiCaller, Path(id): Path<Uuid>) -> ApiResult<Response> {
    let r = service::raw(&state, id).await?;
    caller.may_read_brief(r.brief_id)?;
    let ct =
        HeaderValue::from_str(&r.content_type).unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let (content_type, filename, bytes) = (r.content_type, r.filename, r.bytes);
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
