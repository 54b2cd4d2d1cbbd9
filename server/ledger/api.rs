//! JSON API for the ledger: `/api/v1/briefs/{id}/ledger` (and `.csv`).

use std::collections::BTreeMap;

use axum::{
    body::Body,
    extract::{DefaultBodyLimit, FromRequest, Request, State},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    routing::get,
    Json, Router,
};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use uuid::Uuid;

use super::{
    csv::{self, ChannelReader, MAX_IMPORT_LINES},
    model::{validate_line, validate_outputs, LedgerLine, LedgerSummary, LineInput, Outputs, OutputsPatch},
    repo::StoredLine,
    service::{self, brief_currency, store, summary},
};
use crate::{
    error::{ApiResult, AppError},
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCaller,
        extract::{ApiJson, ApiQuery, Path},
    },
};

/// Largest CSV import, streamed: the body is read until this many bytes and refused (413) beyond.
pub const MAX_CSV_BYTES: usize = 64 * 1024 * 1024;
/// Largest JSON body on the ledger route.
pub const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;
/// Lines per page of `GET …/ledger` (newest first; `?cursor=` for the next page).
pub const PAGE_LINES: i64 = 500;

pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/api/v1/briefs/{id}/ledger",
            get(show)
                .post(post)
                // JSON is read whole under this limit; CSV bypasses it and streams under MAX_CSV_BYTES.
                .layer(DefaultBodyLimit::max(MAX_JSON_BYTES)),
        )
        .route("/api/v1/briefs/{id}/ledger/summary", get(show_summary))
        .route("/api/v1/briefs/{id}/ledger.csv", get(export))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerPost {
    #[serde(default)]
    lines: Vec<LineInput>,
    #[serde(default)]
    outputs: Option<BTreeMap<String, Value>>,
}

#[derive(Serialize)]
struct PostAnswer {
    lines_added: u64,
    #[serde(flatten)]
    summary: LedgerSummary,
}

/// `POST /api/v1/briefs/{id}/ledger`: JSON `{ lines, outputs }` or a `text/csv` import → 201 with the summary.
async fn post(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    req: Request,
) -> ApiResult<Response> {
    caller.may_send_to_brief(id)?;
    let currency = brief_currency(&state, id).await?;
    let ct = crate::web::extract::content_type(&req);
    let (lines, outputs, source) = if ct.starts_with("text/csv") || ct.starts_with("application/csv") {
        (import_csv(req, &currency).await?, None, "csv")
    } else {
        let ApiJson(body) = ApiJson::<LedgerPost>::from_request(req, &state).await?;
        let (lines, outputs) = check_json(body, &currency).map_err(AppError::Validation)?;
        (lines, outputs, "json")
    };
    let added = store(&state, id, &caller.label(), source, &lines, outputs.as_ref()).await?;
    let summary = summary(&state, id, &currency).await?;
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/v1/briefs/{id}/ledger"))],
        Json(PostAnswer {
            lines_added: added,
            summary,
        }),
    )
        .into_response())
}

fn check_json(body: LedgerPost, currency: &str) -> Result<(Vec<LedgerLine>, Option<OutputsPatch>), Vec<FieldError>> {
    if body.lines.is_empty() && body.outputs.is_none() {
        return Err(vec![FieldError::new("lines", "send lines, outputs, or both")]);
    }
    if body.lines.len() > MAX_IMPORT_LINES {
        return Err(vec![FieldError::new(
            "lines",
            format!("more than {MAX_IMPORT_LINES} lines in one request; split it"),
        )]);
    }
    let mut errors = Vec::new();
    let mut lines = Vec::with_capacity(body.lines.len());
    for (i, input) in body.lines.iter().enumerate() {
        match validate_line(input, currency) {
            Ok(l) => lines.push(l),
            Err(es) => errors.extend(
                es.into_iter()
                    .map(|e| FieldError::new(format!("lines[{i}].{}", e.field), e.message)),
            ),
        }
    }
    let outputs = match body.outputs {
        None => None,
        Some(raw) => {
            let raw = raw
                .into_iter()
                .map(|(k, v)| {
                    let v = match v {
                        Value::Null => None,
                        Value::String(s) => Some(s),
                        other => Some(other.to_string()),
                    };
                    (k, v)
                })
                .collect();
            match validate_outputs(&raw) {
                Ok(p) => Some(p),
                Err(es) => {
                    errors.extend(
                        es.into_iter()
                            .map(|e| FieldError::new(format!("outputs.{}", e.field), e.message)),
                    );
                    None
                }
            }
        }
    };
    if errors.is_empty() {
        Ok((lines, outputs))
    } else {
        Err(errors)
    }
}

/// Streams a CSV body into the parser on a blocking thread, chunk by chunk, refusing it (413) as soon
/// as it passes `MAX_CSV_BYTES`: the rest is never read. Nothing is stored here.
async fn import_csv(req: Request, currency: &str) -> Result<Vec<LedgerLine>, AppError> {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_CSV_BYTES as u64) {
        return Err(AppError::PayloadTooLarge(MAX_CSV_BYTES));
    }
    let (tx, rx) = mpsc::channel::<bytes::Bytes>(16);
    let currency = currency.to_owned();
    let parser = tokio::task::spawn_blocking(move || csv::parse(ChannelReader::new(rx), &currency));
    let mut body: Body = req.into_body();
    let mut read = 0usize;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|e| AppError::BadRequest(format!("could not read the request body: {e}")))?;
        let Ok(chunk) = frame.into_data() else { continue };
        read += chunk.len();
        if read > MAX_CSV_BYTES {
            drop(tx); // the parser sees the end and finishes; its answer is discarded
            return Err(AppError::PayloadTooLarge(MAX_CSV_BYTES));
        }
        if tx.send(chunk).await.is_err() {
            break; // the parser stopped early (a bad header, too many errors): no need to read on
        }
    }
    drop(tx);
    parser
        .await
        .map_err(|e| AppError::Internal(anyhow::Error::new(e).context("CSV parser task")))?
        .map_err(AppError::from)
}

#[derive(Deserialize)]
struct ShowQuery {
    cursor: Option<i64>,
}

#[derive(Serialize)]
struct LedgerView {
    summary: LedgerSummary,
    outputs: Outputs,
    lines: Vec<StoredLine>,
    lines_total: i64,
    /// Pass as `?cursor=` for the next (older) page; null on the last page.
    next_cursor: Option<i64>,
}

/// `GET /api/v1/briefs/{id}/ledger[?cursor=]`: summary, outputs and the newest 500 lines.
async fn show(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> ApiResult<Json<LedgerView>> {
    caller.may_read_brief(id)?;
    let currency = brief_currency(&state, id).await?;
    let summary = summary(&state, id, &currency).await?;
    let outputs = service::outputs(&state, id).await?;
    let (lines, next_cursor) = service::lines_page(&state, id, q.cursor, PAGE_LINES).await?;
    let lines_total = service::count_lines(&state, id).await?;
    Ok(Json(LedgerView {
        summary,
        outputs,
        lines,
        lines_total,
        next_cursor,
    }))
}

/// `GET /api/v1/briefs/{id}/ledger/summary`: the summary alone (what the review engine reads).
async fn show_summary(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Json<LedgerSummary>> {
    caller.may_read_brief(id)?;
    let currency = brief_currency(&state, id).await?;
    Ok(Json(summary(&state, id, &currency).await?))
}

/// The lines as CSV with the import header, in the order they were added.
pub(crate) async fn csv_response(state: &AppState, id: Uuid) -> Result<Response, AppError> {
    let body = service::export_csv(state, id).await?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"ledger-{id}.csv\""),
            ),
        ],
        body,
    )
        .into_response())
}

async fn export(
    State(state): State<AppState>,
    ApiCaller(caller): ApiCaller,
    Path(id): Path<Uuid>,
) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    csv_response(&state, id).await
}
