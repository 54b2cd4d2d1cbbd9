//! JSON API for evidence: upload and list under a brief, the parsed view and the exact raw bytes.
//! Handlers stay thin: `upload.rs` decodes the body, `service.rs` does the work.

use axum::{
    extract::{DefaultBodyLimit, Request},
    http::{header, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::{
    router::{OpenApiRouter, UtoipaMethodRouterExt},
    routes,
};
use uuid::Uuid;

use super::{
    model::{decode_cursor, is_inline_text},
    repo::EvidenceRow,
    service::{self, Ingested, IngestedAnswer, Links},
    upload::{self, REPLAYED},
};
use crate::{
    auth::teams,
    error::{ApiResult, AppError},
    ids::{BriefId, EvidenceId, TrialId},
    state::AppState,
    trials::service as trials,
    validation::FieldError,
    web::{
        auth::ApiCall,
        extract::{ApiQuery, BriefPath, Path},
    },
};

pub const PAGE_DEFAULT: i64 = 50;
pub const PAGE_MAX: i64 = 200;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // The upload enforces RENTCHECK_MAX_UPLOAD itself while the body streams.
        .routes(routes!(list, upload).layer(DefaultBodyLimit::disable()))
        // The batch reads its body under its own cap while it streams.
        .routes(routes!(upload_batch).layer(DefaultBodyLimit::disable()))
        .routes(routes!(show))
        .routes(routes!(raw))
}

/// One item as lists show it: everything but the metrics and the bytes.
#[derive(Serialize, ToSchema)]
pub struct EvidenceSummary {
    #[schema(value_type = Uuid)]
    pub id: EvidenceId,
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    #[schema(value_type = Uuid)]
    pub trial_id: TrialId,
    pub kind: String,
    pub stage: i16,
    pub parse_status: String,
    pub parse_error: Option<String>,
    pub warnings_count: usize,
    pub content_type: String,
    pub filename: Option<String>,
    pub size_bytes: i64,
    pub sha256: String,
    #[schema(value_type = Object)]
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
                this: service::evidence_path(r.id),
                raw: format!("/api/v1/evidence/{}/raw", r.id),
                page: format!("/evidence/{}", r.id),
            },
        }
    }
}

/// A page of evidence, newest first.
#[derive(Serialize, ToSchema)]
struct EvidencePage {
    items: Vec<EvidenceSummary>,
    /// pass as ?cursor= for the next page; null at the end
    next_cursor: Option<String>,
}

/// The parsed view of one item.
#[derive(Serialize, ToSchema)]
pub struct EvidenceDetail {
    #[serde(flatten)]
    pub summary: EvidenceSummary,
    #[schema(value_type = Object)]
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

#[utoipa::path(
    post,
    path = "/api/v1/briefs/{id}/evidence",
    operation_id = "uploadEvidence",
    tag = "evidence",
    summary = "Upload evidence: a JSON envelope, a raw body with ?kind=&stage=, or multipart with a file part",
    params(
        BriefPath,
        ("kind" = Option<String>, Query, description = "raw and multipart forms: a kind, or auto"),
        ("stage" = Option<i64>, Query, minimum = 1, maximum = 5, description = "raw and multipart forms: 1 to 5"),
        ("collected_at" = Option<String>, Query, description = "RFC 3339; default: now"),
        ("trial" = Option<Uuid>, Query, description = "a trial of the brief (default: its only trial)"),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]+$",
            description = "a retry with the same key and body returns the first answer; keys belong to the caller \
                 (one token, or one person) and expire after 24 hours; 1 to 255 visible ASCII characters"),
    ),
    request_body(content(
        (super::schema::EvidenceEnvelope = "application/json"),
        (super::schema::EvidenceMultipart = "multipart/form-data"),
        (super::schema::RawBytes = "*/*"),
    )),
    responses(
        (status = 201, description = "committed", body = IngestedAnswer,
            headers(("Location" = String, description = "the evidence's URL"))),
        (status = 200, description = "an idempotent replay of the first answer", body = IngestedAnswer,
            headers(("Idempotent-Replayed" = String, description = "present on a replayed answer"))),
        (status = 400, description = "malformed JSON, multipart or query"),
        (status = 404, description = "no such brief"),
        (status = 409, description = "Idempotency-Key reused with another body"),
        (status = 413, description = "larger than RENTCHECK_MAX_UPLOAD"),
        (status = 415, description = "not JSON, multipart, or a raw body with ?kind=&stage="),
        (status = 422, description = "invalid fields, or no content (\"empty evidence: the command produced no output\")"),
    )
)]
async fn upload(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id: brief_id }: BriefPath,
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
            Ingested::Created { id, body } => {
                let location = service::evidence_path(id);
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
#[utoipa::path(
    post,
    path = "/api/v1/briefs/{id}/evidence/batch",
    operation_id = "uploadEvidenceBatch",
    tag = "evidence",
    summary = "Upload up to 500 evidence items in one request (16 MiB): each stored or refused on its own, new items committed together",
    params(BriefPath),
    request_body = super::schema::EvidenceBatch,
    responses(
        (status = 207, description = "one answer per item, in order: { items: [{ index, status (201 stored, 200 replayed, 4xx refused), id?, parse_status?, parse_error?, links?, problem? }] }",
            body = BatchAnswer),
        (status = 400, description = "malformed JSON"),
        (status = 404, description = "no such brief"),
        (status = 413, description = "larger than 16 MiB"),
        (status = 415, description = "not JSON"),
        (status = 422, description = "items missing, empty or more than 500"),
    )
)]
async fn upload_batch(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id: brief_id }: BriefPath,
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
    let items = answers
        .into_iter()
        .enumerate()
        .map(|(index, a)| match a {
            Ok(stored) => BatchItem::Stored {
                index,
                status: if stored.created { 201 } else { 200 },
                id: stored.id,
                parse_status: stored.parse_status,
                parse_error: stored.parse_error,
                warnings: stored.warnings,
                links: SelfLink {
                    this: service::evidence_path(EvidenceId::from(stored.id)),
                },
            },
            Err(e) => BatchItem::Refused {
                index,
                status: e.status().as_u16(),
                problem: e.problem(),
            },
        })
        .collect();
    let answer = BatchAnswer { items };
    Ok((StatusCode::MULTI_STATUS, Json(answer)).into_response())
}

/// One answer per item of a batch, in order.
#[derive(Serialize, ToSchema)]
#[schema(as = EvidenceBatchAnswer)]
pub struct BatchAnswer {
    pub items: Vec<BatchItem>,
}

/// One item's answer in a batch: stored (201), replayed (200) or refused (4xx, with the problem).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
#[schema(as = EvidenceBatchItem)]
pub enum BatchItem {
    Stored {
        /// The item's place in the request, from 0.
        index: usize,
        /// 201 stored, 200 replayed.
        status: u16,
        id: Uuid,
        /// ok, partial or failed
        parse_status: String,
        parse_error: Option<String>,
        /// How many warnings the parser gave.
        warnings: usize,
        links: SelfLink,
    },
    Refused {
        /// The item's place in the request, from 0.
        index: usize,
        /// 4xx.
        status: u16,
        /// Why it was refused (an RFC 9457 problem).
        #[schema(value_type = Object)]
        problem: Value,
    },
}

/// The stored item's URL.
#[derive(Serialize, ToSchema)]
#[schema(as = EvidenceSelfLink)]
pub struct SelfLink {
    #[serde(rename = "self")]
    pub this: String,
}

#[derive(Deserialize)]
struct ListQuery {
    cursor: Option<String>,
    limit: Option<i64>,
    /// Only this trial's evidence.
    trial: Option<TrialId>,
}

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/evidence",
    operation_id = "listEvidence",
    tag = "evidence",
    summary = "Evidence of a brief, newest first, cursor-paginated",
    params(
        BriefPath,
        ("cursor" = Option<String>, Query, description = "next_cursor of the previous page"),
        ("limit" = Option<i64>, Query, minimum = 1, maximum = 200, description = "1 to 200; default 50"),
        ("trial" = Option<Uuid>, Query, description = "only this trial's evidence"),
    ),
    responses(
        (status = 200, description = "a page", body = EvidencePage),
        (status = 404, description = "no such brief"),
        (status = 422, description = "bad cursor or limit"),
    )
)]
async fn list(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id: brief_id }: BriefPath,
    ApiQuery(q): ApiQuery<ListQuery>,
) -> ApiResult<Json<EvidencePage>> {
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
    let answer = EvidencePage { items, next_cursor };
    Ok(Json(answer))
}

#[utoipa::path(
    get,
    path = "/api/v1/evidence/{id}",
    operation_id = "getEvidence",
    tag = "evidence",
    summary = "One evidence item, parsed (no raw bytes)",
    params(("id" = Uuid, Path, description = "evidence id")),
    responses(
        (status = 200, description = "the item", body = EvidenceDetail),
        (status = 404, description = "no such evidence"),
    )
)]
async fn show(ApiCall { state, caller }: ApiCall, Path(id): Path<EvidenceId>) -> ApiResult<Json<EvidenceDetail>> {
    let row = service::get(&state, id).await?;
    caller.may_read_brief(row.brief_id)?;
    Ok(Json(row.into()))
}

/// The exact bytes with their stored content type. Never sniffed, never run: `nosniff` and a
/// sandboxing CSP always, and anything but plain text/JSON is an attachment.
#[utoipa::path(
    get,
    path = "/api/v1/evidence/{id}/raw",
    operation_id = "getEvidenceRaw",
    tag = "evidence",
    summary = "The exact uploaded bytes with their stored content type",
    params(("id" = Uuid, Path, description = "evidence id")),
    responses(
        (status = 200, description = "the bytes; X-Content-Type-Options: nosniff; attachment unless plain text or JSON",
            content(("*/*"))),
        (status = 404, description = "no such evidence"),
    )
)]
async fn raw(ApiCall { state, caller }: ApiCall, Path(id): Path<EvidenceId>) -> ApiResult<Response> {
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
