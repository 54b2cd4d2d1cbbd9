//! `POST /api/v1/briefs/{id}/evidence`: read the body under the upload cap while it streams, decode
//! one of the three forms into an [`Upload`], parse it (before any transaction), then commit the
//! evidence row — and the `Idempotency-Key` row with the answer — in one transaction.

use std::collections::HashMap;

use axum::{
    body::Body,
    extract::{FromRequest, Multipart, Request},
    http::{header, HeaderMap, HeaderName, HeaderValue, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use bytes::Bytes;
use http_body_util::{BodyExt, LengthLimitError, Limited};
use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    model::{analyse, clean_content_type, resolve_kind, sha256_hex, Outcome, Upload, Window},
    parsers::{EvidenceKind, SloTargets, PARSER_VERSION},
    repo,
};
use crate::{
    error::{ApiResult, AppError, FieldError},
    state::AppState,
};

pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

/// Inputs at least this large are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_MAX: usize = 256 * 1024;

/// The `Idempotency-Key` header: 1–255 visible ASCII characters, or absent.
pub fn idempotency_key(headers: &HeaderMap) -> ApiResult<Option<String>> {
    let Some(v) = headers.get(IDEMPOTENCY_KEY) else {
        return Ok(None);
    };
    match v.to_str() {
        Ok(s) if !s.is_empty() && s.len() <= 255 && s.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(s.to_owned())),
        _ => Err(AppError::Validation(vec![FieldError::new(
            "Idempotency-Key",
            "must be 1 to 255 visible ASCII characters",
        )])),
    }
}

/// Reads the whole body, failing with 413 as soon as it passes `max` bytes: at once when
/// `Content-Length` says so, otherwise when the streamed (e.g. chunked) frames add up past it.
pub async fn read_capped(body: Body, headers: &HeaderMap, max: usize) -> ApiResult<Bytes> {
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > max as u64) {
        return Err(AppError::PayloadTooLarge(max));
    }
    match Limited::new(body, max).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => Err(AppError::PayloadTooLarge(max)),
        Err(e) => Err(AppError::BadRequest(format!("could not read the request body: {e}"))),
    }
}

enum Form {
    Envelope,
    Raw,
    Multipart,
}

fn is_json(ct: &str) -> bool {
    ct.starts_with("application/json") || (ct.starts_with("application/") && ct.contains("+json"))
}

/// Decodes the request into an upload. Which form it is depends on the content type and the query:
/// multipart → the `file` part; `?kind=` or `?stage=` present → the raw body, whatever its type;
/// JSON without them → the envelope; anything else → 415.
pub async fn decode(req: Request, max: usize) -> ApiResult<Upload> {
    let (parts, body) = req.into_parts();
    let ct_header = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let ct = ct_header.as_deref().unwrap_or("").trim().to_ascii_lowercase();
    let query: HashMap<String, String> =
        serde_urlencoded::from_str::<Vec<(String, String)>>(parts.uri.query().unwrap_or(""))
            .map_err(|e| AppError::BadRequest(format!("malformed query string: {e}")))?
            .into_iter()
            .collect();
    let form = if ct.starts_with("multipart/form-data") {
        Form::Multipart
    } else if query.contains_key("kind") || query.contains_key("stage") {
        Form::Raw
    } else if is_json(&ct) {
        Form::Envelope
    } else {
        return Err(AppError::UnsupportedMediaType(format!(
            "got Content-Type {}: send a JSON envelope (application/json), a raw body with ?kind=&stage=, \
             or multipart/form-data with a file part",
            if ct.is_empty() { "none" } else { &ct }
        )));
    };
    let raw = read_capped(body, &parts.headers, max).await?;
    match form {
        Form::Raw => Upload::from_fields(&query, clean_content_type(ct_header.as_deref()), None, raw)
            .map_err(AppError::Validation),
        Form::Envelope => {
            let v: Value =
                serde_json::from_slice(&raw).map_err(|e| AppError::BadRequest(format!("malformed JSON: {e}")))?;
            Upload::from_envelope(&v).map_err(AppError::Validation)
        }
        Form::Multipart => {
            let req = Request::from_parts(parts, Body::from(raw));
            decode_multipart(req, query).await
        }
    }
}

/// The body is already in memory (read under the cap), so a multipart error is a malformed body.
fn multipart_error(e: axum::extract::multipart::MultipartError) -> AppError {
    AppError::BadRequest(format!("malformed multipart body: {}", e.body_text()))
}

/// Text parts (`kind`, `stage`, `collected_at`, `labels`, `label.<name>`) join the query's fields;
/// exactly one `file` part holds the evidence.
async fn decode_multipart(req: Request, mut fields: HashMap<String, String>) -> ApiResult<Upload> {
    let mut mp = Multipart::from_request(req, &())
        .await
        .map_err(|e| AppError::BadRequest(format!("malformed multipart request: {}", e.body_text())))?;
    let mut file = None;
    while let Some(field) = mp.next_field().await.map_err(multipart_error)? {
        let name = field.name().unwrap_or("").to_owned();
        if name == "file" {
            if file.is_some() {
                return Err(AppError::Validation(vec![FieldError::new(
                    "file",
                    "send one file part per request",
                )]));
            }
            let ct = field.content_type().map(str::to_owned);
            let filename = field.file_name().map(str::to_owned);
            let data = field.bytes().await.map_err(multipart_error)?;
            file = Some((ct, filename, data));
        } else {
            let text = field.text().await.map_err(multipart_error)?;
            fields.insert(name, text);
        }
    }
    let Some((ct, filename, data)) = file else {
        return Err(AppError::Validation(vec![FieldError::new(
            "file",
            "a part named file is required",
        )]));
    };
    Upload::from_fields(&fields, clean_content_type(ct.as_deref()), filename, data).map_err(AppError::Validation)
}

fn replay(stored: repo::StoredResponse, fingerprint: &str) -> ApiResult<Response> {
    if stored.request_sha256 != fingerprint {
        return Err(AppError::Conflict(
            "this Idempotency-Key was already used with a different request body".into(),
        ));
    }
    // The first answer was a 201; a replay says 200 and marks itself.
    let _ = stored.response_status;
    let mut r = (StatusCode::OK, Json(stored.response_body.0)).into_response();
    r.headers_mut().insert(REPLAYED, HeaderValue::from_static("true"));
    Ok(r)
}

fn fk_to_not_found(e: sqlx::Error) -> AppError {
    match &e {
        sqlx::Error::Database(db)
            if matches!(db.constraint(), Some("evidence_brief_fk" | "idempotency_keys_brief_fk")) =>
        {
            AppError::NotFound("brief")
        }
        _ => e.into(),
    }
}

/// Parses, then commits. `uploaded_by` stays `None` until authentication fills it.
pub async fn ingest(
    state: &AppState,
    brief_id: Uuid,
    key: Option<String>,
    upload: Upload,
    uploaded_by: Option<&str>,
) -> ApiResult<Response> {
    let fingerprint = upload.fingerprint();
    // A retry of a finished request is answered without parsing again.
    if let Some(key) = &key {
        if let Some(stored) = repo::find_idempotent(&state.pool, brief_id, key).await? {
            return replay(stored, &fingerprint);
        }
    }

    let (kind, kind_warning) = resolve_kind(upload.kind, &upload.raw);
    let window = match upload.window_after() {
        Some(w) if kind.has_window() => {
            let before = match repo::window_before(&state.pool, brief_id, kind.as_str(), w).await? {
                Some(stored) => Some(state.config.raw_store.load(stored).await?),
                None => None,
            };
            Some((w.to_owned(), before))
        }
        _ => None,
    };
    // Serving evidence is judged against the brief's latency targets (SLO attainment).
    let targets = if matches!(kind, EvidenceKind::BenchServing | EvidenceKind::VllmMetrics) {
        repo::slo_targets(&state.pool, brief_id).await?
    } else {
        SloTargets::default()
    };
    let raw = upload.raw.clone();
    let run = move || {
        let w = match &window {
            None => Window::NotWindowed,
            Some((_, Some(before))) => Window::Before(before),
            Some((id, None)) => Window::Unmatched(id),
        };
        analyse(kind, &raw, w, kind_warning, &targets)
    };
    let outcome: Outcome = if upload.raw.len() < PARSE_INLINE_MAX {
        run()
    } else {
        tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| AppError::Internal(anyhow::anyhow!("parser task failed: {e}")))?
    };

    let id = Uuid::now_v7();
    let sha256 = sha256_hex(&upload.raw);
    let labels = Value::Object(upload.labels.clone());
    let body = json!({
        "id": id,
        "brief_id": brief_id,
        "kind": kind.as_str(),
        "stage": upload.stage,
        "parse_status": outcome.status.as_str(),
        "parse_error": outcome.error,
        "metrics": outcome.metrics,
        "warnings": outcome.warnings,
        "sha256": sha256,
        "size_bytes": upload.raw.len(),
        "links": {
            "self": format!("/api/v1/evidence/{id}"),
            "raw": format!("/api/v1/evidence/{id}/raw"),
            "page": format!("/evidence/{id}"),
        },
    });

    // With an object store the bytes are written first: a row that commits always has its bytes.
    let raw_object = state.config.raw_store.put(&sha256, &upload.raw).await?;
    let new_evidence = repo::NewEvidence {
        id,
        brief_id,
        kind: kind.as_str(),
        stage: upload.stage,
        content_type: &upload.content_type,
        filename: upload.filename.as_deref(),
        raw: &upload.raw,
        raw_object: raw_object.as_deref(),
        sha256: &sha256,
        metrics: &outcome.metrics,
        warnings: &outcome.warnings,
        parse_status: outcome.status.as_str(),
        parse_error: outcome.error.as_deref(),
        tool: outcome.tool.as_deref(),
        tool_version: outcome.tool_version.as_deref(),
        parser_version: PARSER_VERSION,
        labels: &labels,
        collected_at: upload.collected_at,
        uploaded_by,
    };
    if let Some(key) = &key {
        // The key's row and the evidence commit together, so a replay always finds the evidence.
        let mut tx = state.pool.begin().await?;
        let claimed = repo::claim_idempotency_key(&mut *tx, brief_id, key, &fingerprint, 201, &body, id)
            .await
            .map_err(fk_to_not_found)?;
        if !claimed {
            // Another request with this key committed while we parsed: answer as it did.
            tx.rollback().await?;
            let stored = repo::find_idempotent(&state.pool, brief_id, key)
                .await?
                .ok_or_else(|| AppError::Internal(anyhow::anyhow!("idempotency row vanished")))?;
            return replay(stored, &fingerprint);
        }
        repo::insert(&mut *tx, &new_evidence).await.map_err(fk_to_not_found)?;
        tx.commit().await?;
    } else {
        // Without a key the evidence row is the only write: one autocommitted statement.
        repo::insert(&state.pool, &new_evidence)
            .await
            .map_err(fk_to_not_found)?;
    }
    state
        .metrics
        .observe_ingest(kind.as_str(), outcome.status.as_str(), upload.raw.len());

    let location = format!("/api/v1/evidence/{id}");
    Ok((StatusCode::CREATED, [(header::LOCATION, location)], Json(body)).into_response())
}
