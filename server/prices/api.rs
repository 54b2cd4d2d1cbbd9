//! JSON API for price sheets: `POST /api/v1/prices` (a CSV sheet, or `?format=skypilot&provider=`
//! a SkyPilot catalogue; managers and admins) and `GET /api/v1/prices` (the current prices, or
//! every row with `?all=true`).

use axum::{
    body::Bytes,
    extract::{DefaultBodyLimit, FromRequest, Request},
    http::{header, StatusCode},
    response::{IntoResponse, Response},
    Json,
};
use serde::Deserialize;
use utoipa_axum::{
    router::{OpenApiRouter, UtoipaMethodRouterExt},
    routes,
};

use super::{
    model::{PriceList, MAX_ROWS},
    repo,
    service::{self, Format},
    skypilot::PriceImport,
};
use crate::{
    auth::Role,
    error::{ApiResult, AppError},
    state::AppState,
    web::{
        auth::ApiCall,
        extract::{content_type, ApiQuery},
    },
};

/// A sheet of `MAX_ROWS` rows of a few hundred bytes fits well inside this.
const MAX_SHEET_BYTES: usize = 4 * 1024 * 1024;
/// A SkyPilot catalogue lists every instance type of a cloud in every zone (AWS's `vms.csv` is
/// about 2.5 MB); most rows are skipped, so the file may be larger than a sheet.
pub const MAX_CATALOGUE_BYTES: usize = 32 * 1024 * 1024;

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list, import).layer(DefaultBodyLimit::max(MAX_CATALOGUE_BYTES)))
        // The cap a 413 names (`web::extract::BodyCap`).
        .layer(axum::Extension(crate::web::extract::BodyCap(MAX_CATALOGUE_BYTES)))
}

#[derive(Deserialize)]
struct ImportQuery {
    /// `sheet` (default) or `skypilot`.
    format: Option<String>,
    /// The provider whose SkyPilot catalogue this is.
    provider: Option<String>,
    /// The date a catalogue's prices are valid from (default: today).
    valid_from: Option<String>,
}

#[derive(Deserialize)]
struct ListQuery {
    /// Every row ever imported (the history), not only the current ones.
    #[serde(default)]
    all: bool,
}

#[utoipa::path(
    get,
    path = "/api/v1/prices",
    operation_id = "listPrices",
    tag = "prices",
    summary = "The current price of each offer (the newest row per provider, GPU, count, billing, region and \
         currency: a row in one currency never hides the same offer's row in another); ?all=true: every row \
         ever imported",
    params(("all" = Option<bool>, Query, description = "every row, not only the current ones")),
    responses((status = 200, description = "the prices", body = PriceList))
)]
async fn list(ApiCall { state, caller }: ApiCall, ApiQuery(q): ApiQuery<ListQuery>) -> ApiResult<Json<PriceList>> {
    caller.require_person(Role::Engineer)?;
    // Prices belong to no brief: a token limited to one brief reads its brief's money there.
    caller.require_unscoped()?;
    let items = if q.all {
        repo::all(&state.pool, MAX_ROWS as i64 * 10).await?
    } else {
        service::current(&state).await?
    };
    Ok(Json(PriceList { items }))
}

/// `text/csv` with the header `provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,
/// valid_from,source`, or with `?format=skypilot&provider=NAME` a SkyPilot `vms.csv`; all or
/// nothing, every bad cell named by line and column. A catalogue's answer also lists the rows it
/// skipped (CPU-only instances, unknown accelerators, fractions of a GPU, rows without a price).
#[utoipa::path(
    post,
    path = "/api/v1/prices",
    operation_id = "importPrices",
    tag = "prices",
    summary = "Import a price sheet: text/csv with the header \
         provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source (all or nothing); \
         with ?format=skypilot&provider=NAME a SkyPilot catalogue vms.csv (columns found by name: InstanceType, \
         AcceleratorName, AcceleratorCount, Price, SpotPrice, Region, AvailabilityZone): an on-demand row from Price and \
         a spot row from SpotPrice per instance with GPUs the catalogue knows, per GPU-hour, in USD, the lowest price \
         per offer (provider, GPU, count, region, billing) kept, source skypilot:<InstanceType>; CPU-only rows, unknown \
         accelerators, fractions of a GPU and rows without a price are listed in skipped",
    params(
        ("format" = Option<String>, Query, description = "sheet (default) or skypilot"),
        ("provider" = Option<String>, Query, description = "skypilot: the provider whose catalogue this is (required)"),
        ("valid_from" = Option<String>, Query,
            description = "skypilot: the date the catalogue's prices are valid from, YYYY-MM-DD (default: today, UTC)"),
    ),
    request_body(content((String = "text/csv"))),
    responses(
        (status = 201, description = "{ sheet_id, rows, prices }; a catalogue adds catalogue_rows and skipped: [{ reason, says, accelerator, \
             rows, instance_types, lines }]", body = PriceImport,
            headers(("Location" = String, description = "/api/v1/prices"))),
        (status = 413, description = "larger than 4 MiB (a sheet) or 32 MiB (a catalogue)"),
        (status = 403, description = "not a manager or admin, or a token limited to one brief"),
        (status = 415, description = "not text/csv"),
        (status = 422, description = "bad cells, each named by line and column; nothing stored"),
    )
)]
async fn import(
    ApiCall { state, caller }: ApiCall,
    ApiQuery(q): ApiQuery<ImportQuery>,
    req: Request,
) -> ApiResult<Response> {
    caller.require_person(Role::Manager)?;
    // A sheet changes every brief's money: never through a token limited to one brief.
    caller.require_unscoped()?;
    let format = Format::from_params(q.format.as_deref(), q.provider.as_deref(), q.valid_from.as_deref())?;
    let ct = content_type(&req);
    if !(ct.starts_with("text/csv") || ct.starts_with("application/csv")) {
        return Err(AppError::UnsupportedMediaType(match format {
            Format::Sheet => "send the price sheet as text/csv".into(),
            Format::Skypilot { .. } => "send the SkyPilot vms.csv as text/csv".into(),
        }));
    }
    let cap = match format {
        Format::Sheet => MAX_SHEET_BYTES,
        Format::Skypilot { .. } => MAX_CATALOGUE_BYTES,
    };
    #[allow(clippy::disallowed_types)]
    let body = Bytes::from_request(req, &state).await.map_err(|rejection| {
        if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
            AppError::PayloadTooLarge(cap)
        } else {
            AppError::BadRequest(format!("could not read the request body: {}", rejection.body_text()))
        }
    })?;
    if body.len() > cap {
        return Err(AppError::PayloadTooLarge(cap));
    }
    let (sheet, checked) = service::import_as(&state, &body, &format, None, &caller.label()).await?;
    let answer = PriceImport::of(sheet, &checked, matches!(format, Format::Skypilot { .. }));
    Ok((
        StatusCode::CREATED,
        [(header::LOCATION, "/api/v1/prices".to_owned())],
        Json(answer),
    )
        .into_response())
}
