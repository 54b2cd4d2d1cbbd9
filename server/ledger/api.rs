//! JSON API for the ledger: `/api/v1/briefs/{id}/ledger` (and `.csv`), and FOCUS billing exports
//! (`?format=focus`).

use std::collections::BTreeMap;

use axum::{
    body::Body,
    extract::{DefaultBodyLimit, FromRequest, Request},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use http_body_util::BodyExt;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use utoipa::{
    openapi::{schema::AnyOfBuilder, Ref, RefOr, Schema},
    ToSchema,
};
use utoipa_axum::{
    router::{OpenApiRouter, UtoipaMethodRouterExt},
    routes,
};
use uuid::Uuid;

use super::{
    channel::ChannelReader,
    csv::{self, CsvError, MAX_IMPORT_LINES},
    focus::{self, CommitmentPurchase, FocusImport, GpusPerResource, HoursFromChargePeriod, NotAdded, Selection},
    model::{validate_line, validate_outputs, LedgerLine, LedgerSummary, LineInput, Outputs, OutputsPatch},
    repo::StoredLine,
    service::{
        self, brief_currency, read_target, store_once, summary, FocusStored, LedgerKey, LedgerWrite, StoreOutcome,
        Target,
    },
};
use crate::{
    auth::{teams, Principal},
    error::{ApiResult, AppError},
    ids::{BriefId, TrialId},
    prices::service as prices,
    state::AppState,
    validation::FieldError,
    web::{
        auth::ApiCall,
        extract::{ApiJson, ApiQuery, BriefPath},
    },
};

/// Largest CSV import, streamed: the body is read until this many bytes and refused (413) beyond.
pub const MAX_CSV_BYTES: usize = 64 * 1024 * 1024;
/// Largest JSON body on the ledger route.
pub const MAX_JSON_BYTES: usize = 16 * 1024 * 1024;
/// Lines per page of `GET …/ledger` (newest first; `?cursor=` for the next page).
pub const PAGE_LINES: i64 = 500;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        // JSON is read whole under this limit; CSV bypasses it and streams under MAX_CSV_BYTES.
        .routes(routes!(show, post).layer(DefaultBodyLimit::max(MAX_JSON_BYTES)))
        .routes(routes!(show_summary))
        .routes(routes!(export))
        // The cap a 413 names (`web::extract::BodyCap`); the routes beside `post` read no body.
        .layer(axum::Extension(crate::web::extract::BodyCap(MAX_JSON_BYTES)))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LedgerPost {
    /// The trial the lines and outputs belong to (a line may name its own).
    #[serde(default)]
    trial: Option<TrialId>,
    #[serde(default)]
    lines: Vec<LineInput>,
    #[serde(default)]
    outputs: Option<BTreeMap<String, Value>>,
}

/// What adding lines (JSON or the ledger's CSV) answers: the lines added and the trial's summary.
#[derive(Serialize, ToSchema)]
#[schema(as = LedgerLinesAdded)]
struct PostAnswer {
    lines_added: u64,
    /// Lines with an interval that the trial already held field for field (the same file sent
    /// again): not added a second time, so a re-import doubles no cost.
    lines_already_in_ledger: u64,
    /// The trial whose summary follows (the request's trial).
    #[schema(value_type = Option<Uuid>)]
    trial: Option<TrialId>,
    #[serde(flatten)]
    summary: LedgerSummary,
}

/// What a ledger import answers: lines (JSON or CSV), or a FOCUS export (`?format=focus`).
#[derive(Serialize)]
#[serde(untagged)]
enum ImportAnswer {
    Lines(PostAnswer),
    Focus(FocusAnswer),
}

/// Either answer (a FOCUS answer has every field of the other, so `anyOf`, not `oneOf`).
impl utoipa::PartialSchema for ImportAnswer {
    fn schema() -> RefOr<Schema> {
        AnyOfBuilder::new()
            .item(Ref::from_schema_name(PostAnswer::name()))
            .item(Ref::from_schema_name(FocusAnswer::name()))
            .description(Some("lines added (JSON or CSV), or a FOCUS export's import"))
            .into()
    }
}

impl ToSchema for ImportAnswer {
    fn name() -> std::borrow::Cow<'static, str> {
        "LedgerImport".into()
    }

    fn schemas(schemas: &mut Vec<(String, RefOr<Schema>)>) {
        schemas.push((
            PostAnswer::name().into(),
            <PostAnswer as utoipa::PartialSchema>::schema(),
        ));
        PostAnswer::schemas(schemas);
        schemas.push((
            FocusAnswer::name().into(),
            <FocusAnswer as utoipa::PartialSchema>::schema(),
        ));
        FocusAnswer::schemas(schemas);
    }
}

/// `?trial=` on the ledger routes.
#[derive(Deserialize)]
struct TrialQuery {
    trial: Option<TrialId>,
}

/// The query of `POST …/ledger`.
#[derive(Deserialize)]
struct PostQuery {
    trial: Option<TrialId>,
    /// `csv` (default: the ledger's own CSV, or JSON) or `focus` (a FinOps FOCUS export).
    format: Option<String>,
    /// FOCUS: the trial's resource ids, separated by commas.
    resources: Option<String>,
    /// FOCUS: one GPU count for every selected resource, or `RESOURCE=N,…`.
    gpus_per_resource: Option<String>,
}

/// `POST /api/v1/briefs/{id}/ledger[?trial=]`: JSON `{ trial?, lines, outputs }` or a `text/csv`
/// import (optional last column `trial`) → 201 with the summary of the request's trial; with
/// `?format=focus`, a FOCUS export (see [`post_focus`]).
#[utoipa::path(
    post,
    path = "/api/v1/briefs/{id}/ledger",
    operation_id = "postLedger",
    tag = "ledger",
    summary = "Add ledger lines and/or output counts: JSON { lines, outputs } or text/csv with the header \
         category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency (all or nothing); \
         with ?format=focus a FinOps FOCUS 1.x cost-and-usage CSV (AWS, Azure, GCP, OCI exports): the trial's rows \
         (ResourceId in resources=, or Tags carrying rentcheck-trial: <trial id>) become lines, Usage rows \
         only; Purchase, Tax, Credit and Adjustment rows, refunds and rows of a listed resource tagged for another trial are listed in not_added with their sums, never \
         added; re-importing an export adds nothing (rows keyed by resource, charge period and charge description). \
         Answers { format, trial, lines_added, rows_already_imported, rows_read, rows_selected, rows_combined, \
         not_added: [{ charge_category, reason, of, rows, sum, currency, lines }], counted_as_host, \
         hours_from_charge_period: [{ reason, rows, lines }], commitment_purchases: [{ commitment_discount_id, rows, sum, \
         currency, lines }], ...summary }. GPU-hours come from ConsumedQuantity in a time ConsumedUnit, never from the \
         charge period unless the row gives no consumed time (then listed in hours_from_charge_period): \
         201 when lines were added, 200 when none were new",
    params(
        BriefPath,
        ("format" = Option<String>, Query,
            description = "csv (default: the ledger's own CSV, or JSON) or focus (a FinOps FOCUS export, text/csv, streamed)"),
        ("resources" = Option<String>, Query,
            description = "focus: the trial's resource ids (FOCUS ResourceId), separated by commas; rows tagged \
                 rentcheck-trial: <trial> are the trial's too"),
        ("gpus_per_resource" = Option<String>, Query,
            description = "focus: GPUs of every selected resource (8) or per resource (RESOURCE=8,RESOURCE=4); without it, an \
                 instance type an imported SkyPilot catalogue prices gives the count"),
        ("trial" = Option<Uuid>, Query, description = "a trial of the brief (default: its only trial)"),
        ("Idempotency-Key" = Option<String>, Header, min_length = 1, max_length = 255, pattern = "^[!-~]+$",
            description = "a retry with the same key and request stores nothing again and answers 200 with \
                 Idempotent-Replayed: true; keys belong to the caller and expire after 24 hours"),
    ),
    request_body(content(
        (super::schema::LedgerBody = "application/json"),
        (String = "text/csv"),
    )),
    responses(
        (status = 201, description = "stored; lines_added and the summary", body = ImportAnswer),
        (status = 200, description = "a replay of an earlier request with this Idempotency-Key, or nothing new", body = ImportAnswer,
            headers(("Idempotent-Replayed" = String, description = "present on a replayed answer"))),
        (status = 404, description = "no such brief"),
        (status = 409, description = "Idempotency-Key reused with another request"),
        (status = 413, description = "too large"),
        (status = 422, description = "invalid lines, by line and column for CSV; another currency"),
    )
)]
async fn post(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
    ApiQuery(q): ApiQuery<PostQuery>,
    req: Request,
) -> ApiResult<Response> {
    teams::may_send_to_brief(&state.pool, &caller, id).await?;
    match q.format.as_deref().map(str::trim) {
        None | Some("" | "csv" | "json") => {}
        Some("focus") => return post_focus(&state, &caller, id, q, req).await,
        Some(other) => {
            return Err(AppError::Validation(vec![FieldError::new(
                "format",
                format!(
                    "{} is not a ledger format; use csv (the ledger's own) or focus (a FinOps FOCUS export)",
                    csv::shown(other)
                ),
            )]))
        }
    }
    let key = idempotency_key(req.headers())?.map(str::to_owned);
    let currency = brief_currency(&state, id).await?;
    let ct = crate::web::extract::content_type(&req);
    let (lines, outputs, source, named) = if ct.starts_with("text/csv") || ct.starts_with("application/csv") {
        (import_csv(req, &currency).await?, None, "csv", q.trial)
    } else {
        let ApiJson(body) = ApiJson::<LedgerPost>::from_request(req, &state).await?;
        let named = body.trial.or(q.trial);
        let (lines, outputs) = check_json(body, &currency).map_err(AppError::Validation)?;
        (lines, outputs, "json", named)
    };
    let target = Target {
        named,
        token_trial: caller.trial_scope(),
    };
    let scope = caller.idempotency_scope();
    let key = key.as_deref().map(|key| LedgerKey {
        caller: &scope,
        fingerprint: fingerprint(&lines, outputs.as_ref(), named.map(TrialId::as_uuid)),
        key,
    });
    let write = LedgerWrite {
        brief_id: id,
        target,
        actor: &caller.label(),
        source,
        lines: &lines,
        outputs: outputs.as_ref(),
    };
    let outcome = store_once(&state, write, key.as_ref()).await?;
    let (stored, replayed) = match outcome {
        StoreOutcome::Stored(s) => (s, false),
        StoreOutcome::Replayed { added, repeated, trial } => (service::Stored { added, repeated, trial }, true),
    };
    let trial = match stored.trial {
        Some(t) => t,
        None => read_target(&state, id, target)
            .await
            .unwrap_or(TrialId::from(Uuid::nil())),
    };
    let summary = summary(&state, trial, &currency).await?;
    let answer = Json(ImportAnswer::Lines(PostAnswer {
        lines_added: stored.added,
        lines_already_in_ledger: stored.repeated,
        trial: Some(trial),
        summary,
    }));
    if replayed {
        // As evidence answers a retry: 200, marked; the summary is the trial's as it is now.
        return Ok((StatusCode::OK, [(IDEMPOTENT_REPLAYED, "true")], answer).into_response());
    }
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, format!("/api/v1/briefs/{id}/ledger?trial={trial}"))],
        answer,
    )
        .into_response())
}

const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// The `Idempotency-Key` header: 1–255 visible ASCII characters, or 400.
fn idempotency_key(headers: &axum::http::HeaderMap) -> Result<Option<&str>, AppError> {
    let Some(value) = headers.get("idempotency-key") else {
        return Ok(None);
    };
    match value.to_str() {
        Ok(k) if !k.is_empty() && k.len() <= 255 && k.bytes().all(|b| b.is_ascii_graphic()) => Ok(Some(k)),
        _ => Err(AppError::BadRequest(
            "Idempotency-Key must be 1–255 visible ASCII characters".into(),
        )),
    }
}

/// What makes two posts the same request: their checked lines, outputs and trial.
/// `trial` is the bare UUID: its `Debug` text is part of the fingerprints stored with keys.
fn fingerprint(lines: &[LedgerLine], outputs: Option<&OutputsPatch>, trial: Option<Uuid>) -> String {
    use sha2::Digest;
    let text = format!(
        "{}\n{outputs:?}\n{trial:?}",
        serde_json::to_string(lines).unwrap_or_default()
    );
    sha2::Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
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
    let currency = currency.to_owned();
    stream_csv(req, move |reader| csv::parse(reader, &currency)).await
}

/// What a FOCUS import answers: what it added, what it left out and why, and the trial's summary.
#[derive(Serialize, ToSchema)]
#[schema(as = LedgerFocusImported)]
struct FocusAnswer {
    /// `focus`.
    #[schema(value_type = String, pattern = "^focus$")]
    format: &'static str,
    #[schema(value_type = Uuid)]
    trial: TrialId,
    lines_added: u64,
    /// Lines of this export an earlier import already added (re-importing adds nothing).
    rows_already_imported: u64,
    rows_read: u64,
    rows_selected: u64,
    /// Rows of one identity (resource, charge period, description) added into one line.
    rows_combined: u64,
    /// Purchases, taxes, credits, adjustments and refunds: listed with their sums, never added.
    not_added: Vec<NotAdded>,
    /// Compute resources whose GPU count is unknown (give `gpus_per_resource`, or import the
    /// offer catalogue that prices their instance type): their lines are host lines.
    counted_as_host: Vec<String>,
    /// Accelerator lines whose GPU-hours are their whole charge period, because the row gives no
    /// consumed time (`ConsumedQuantity` in a time `ConsumedUnit`) or one longer than the period.
    /// Every other accelerator line counts its consumed time.
    hours_from_charge_period: Vec<HoursFromChargePeriod>,
    /// Commitments bought in this export (`Purchase` rows with a `CommitmentDiscountId`), by id: never added.
    commitment_purchases: Vec<CommitmentPurchase>,
    #[serde(flatten)]
    summary: LedgerSummary,
}

/// `POST /api/v1/briefs/{id}/ledger?format=focus&trial=TID[&resources=…][&gpus_per_resource=…]`:
/// a FinOps FOCUS cost-and-usage CSV, streamed like a ledger CSV (same caps, errors by line and
/// column). The trial's rows (listed resources, or tagged `rentcheck-trial`) become lines; 201 when
/// it added lines, 200 when every row was imported before.
async fn post_focus(
    state: &AppState,
    caller: &Principal,
    id: BriefId,
    q: PostQuery,
    req: Request,
) -> ApiResult<Response> {
    let currency = brief_currency(state, id).await?;
    let ct = crate::web::extract::content_type(&req);
    if !(ct.starts_with("text/csv") || ct.starts_with("application/csv")) {
        return Err(AppError::UnsupportedMediaType(
            "send the FOCUS export as text/csv (gzip it with Content-Encoding: gzip if it is large)".into(),
        ));
    }
    let gpus = GpusPerResource::parse(q.gpus_per_resource.as_deref()).map_err(|e| AppError::Validation(vec![e]))?;
    let target = Target {
        named: q.trial,
        token_trial: caller.trial_scope(),
    };
    let (stored, import) = import_focus(
        state,
        id,
        target,
        &caller.label(),
        q.resources.as_deref(),
        gpus,
        |selection, currency| stream_csv(req, move |reader| focus::parse(reader, &currency, &selection)),
    )
    .await?;
    let answer = focus_answer(state, &currency, stored, import).await?;
    let status = if answer.lines_added > 0 {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        [(
            header::LOCATION,
            format!("/api/v1/briefs/{id}/ledger?trial={}", answer.trial),
        )],
        Json(ImportAnswer::Focus(answer)),
    )
        .into_response())
}

/// Reads a FOCUS export for the brief's trial (`read` gets the selection and the brief's currency
/// and parses the file) and stores its lines: the API streams the body, the page parses a pasted
/// text. Returns what was stored and what was read.
pub(crate) async fn import_focus<F, Fut>(
    state: &AppState,
    id: BriefId,
    target: Target,
    actor: &str,
    resources: Option<&str>,
    gpus: GpusPerResource,
    read: F,
) -> Result<(FocusStored, FocusImport), AppError>
where
    F: FnOnce(Selection, String) -> Fut,
    Fut: std::future::Future<Output = Result<FocusImport, AppError>>,
{
    let currency = brief_currency(state, id).await?;
    let trial = read_target(state, id, target).await?;
    let catalogue = prices::catalogue_instance_gpus(state)
        .await?
        .into_iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v))
        .collect();
    let selection = Selection {
        trial_id: trial,
        resources: Selection::resources_from(resources),
        gpus,
        catalogue,
    };
    let import = read(selection, currency).await?;
    let stored = service::store_focus(state, id, trial, target.token_trial, actor, &import).await?;
    Ok((stored, import))
}

async fn focus_answer(
    state: &AppState,
    currency: &str,
    stored: FocusStored,
    import: FocusImport,
) -> Result<FocusAnswer, AppError> {
    Ok(FocusAnswer {
        format: "focus",
        trial: stored.trial,
        lines_added: stored.added,
        rows_already_imported: stored.already_imported,
        rows_read: import.rows_read,
        rows_selected: import.rows_selected,
        rows_combined: import.rows_combined,
        not_added: import.not_added,
        counted_as_host: import.counted_as_host,
        hours_from_charge_period: import.hours_from_charge_period,
        commitment_purchases: import.commitment_purchases,
        summary: summary(state, stored.trial, currency).await?,
    })
}

/// Streams a CSV body into `parse` on a blocking thread, chunk by chunk, refusing it (413) as soon
/// as it passes `MAX_CSV_BYTES`: the rest is never read. Nothing is stored here.
async fn stream_csv<T, P>(req: Request, parse: P) -> Result<T, AppError>
where
    T: Send + 'static,
    P: FnOnce(ChannelReader) -> Result<T, CsvError> + Send + 'static,
{
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_CSV_BYTES as u64) {
        return Err(AppError::PayloadTooLarge(MAX_CSV_BYTES));
    }
    let (tx, rx) = mpsc::channel::<bytes::Bytes>(16);
    let parser = tokio::task::spawn_blocking(move || parse(ChannelReader::new(rx)));
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
    trial: Option<TrialId>,
}

/// One trial's ledger: its summary, output counts and newest 500 lines.
#[derive(Serialize, ToSchema)]
#[schema(as = Ledger)]
struct LedgerView {
    /// The trial this ledger is of.
    #[schema(value_type = Uuid)]
    trial: TrialId,
    summary: LedgerSummary,
    outputs: Outputs,
    lines: Vec<StoredLine>,
    lines_total: i64,
    /// Pass as `?cursor=` for the next (older) page; null on the last page.
    next_cursor: Option<i64>,
}

/// `GET /api/v1/briefs/{id}/ledger[?trial=&cursor=]`: one trial's summary, outputs and newest 500
/// lines (a brief with several trials needs `?trial=`).
#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/ledger",
    operation_id = "getLedger",
    tag = "ledger",
    summary = "Lines (newest 500 per page), outputs and the summary",
    params(
        BriefPath,
        ("cursor" = Option<i64>, Query, description = "next_cursor of the previous page"),
        ("trial" = Option<Uuid>, Query, description = "a trial of the brief (default: its only trial)"),
    ),
    responses(
        (status = 200, description = "{ summary, outputs, lines, lines_total, next_cursor }", body = LedgerView),
        (status = 404, description = "no such brief"),
        (status = 422, description = "trial is not one of the brief's, the brief has several and none is named, or a bad cursor"),
    )
)]
async fn show(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
    ApiQuery(q): ApiQuery<ShowQuery>,
) -> ApiResult<Json<LedgerView>> {
    let (trial, currency) = readable_trial(&state, &caller, id, q.trial).await?;
    let summary = summary(&state, trial, &currency).await?;
    let outputs = service::outputs(&state, trial).await?;
    let (lines, next_cursor) = service::lines_page(&state, trial, q.cursor, PAGE_LINES).await?;
    let lines_total = service::count_lines(&state, trial).await?;
    Ok(Json(LedgerView {
        trial,
        summary,
        outputs,
        lines,
        lines_total,
        next_cursor,
    }))
}

/// `GET /api/v1/briefs/{id}/ledger/summary[?trial=]`: one trial's summary alone (what the review
/// engine reads).
#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/ledger/summary",
    operation_id = "getLedgerSummary",
    tag = "ledger",
    summary = "The ledger summary alone",
    params(
        BriefPath,
        ("trial" = Option<Uuid>, Query, description = "a trial of the brief (default: its only trial)"),
    ),
    responses(
        (status = 200, description = "the summary: { currency, accelerator_hours, totals: { accelerator, host, storage, network, support, \
        license }, total, accepted_outputs, cost_per_job, diagnostics: { idle_hours, failed_jobs, rejected_outputs, \
        retries } } (money as decimal strings)", body = LedgerSummary),
        (status = 404, description = "no such brief"),
        (status = 422, description = "trial is not one of the brief's, or the brief has several and none is named"),
    )
)]
async fn show_summary(
    ApiCall { state, caller }: ApiCall,
    BriefPath { id }: BriefPath,
    ApiQuery(q): ApiQuery<TrialQuery>,
) -> ApiResult<Json<LedgerSummary>> {
    let (trial, currency) = readable_trial(&state, &caller, id, q.trial).await?;
    Ok(Json(summary(&state, trial, &currency).await?))
}

/// The trial a read names (else the token's, else the brief's only one) and the brief's currency,
/// once the caller may read the brief.
async fn readable_trial(
    state: &AppState,
    caller: &Principal,
    id: BriefId,
    named: Option<TrialId>,
) -> Result<(TrialId, String), AppError> {
    caller.may_read_brief(id)?;
    let currency = brief_currency(state, id).await?;
    let target = Target {
        named,
        token_trial: caller.trial_scope(),
    };
    Ok((read_target(state, id, target).await?, currency))
}

/// The lines as CSV with the import header, in the order they were added.
pub(crate) async fn csv_response(state: &AppState, id: BriefId) -> Result<Response, AppError> {
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

#[utoipa::path(
    get,
    path = "/api/v1/briefs/{id}/ledger.csv",
    operation_id = "exportLedgerCsv",
    tag = "ledger",
    summary = "Every ledger line as CSV with the import header",
    params(BriefPath),
    responses(
        (status = 200, description = "the lines", content((String = "text/csv"))),
        (status = 404, description = "no such brief"),
    )
)]
async fn export(ApiCall { state, caller }: ApiCall, BriefPath { id }: BriefPath) -> ApiResult<Response> {
    caller.may_read_brief(id)?;
    csv_response(&state, id).await
}
