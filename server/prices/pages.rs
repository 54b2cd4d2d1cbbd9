//! `/prices`: the current price of each offer with its source and date, the sheets imported, and
//! the import (paste or choose a price sheet or a SkyPilot catalogue `vms.csv`, see every row
//! checked — and, for a catalogue, what it leaves out — then confirm; all or nothing).

use std::collections::HashMap;

use askama::Template;
use axum::{
    extract::State,
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use serde::Deserialize;

use super::{
    model::{PriceRow, COLUMNS},
    repo,
    service::{self, Format},
    skypilot::{self, CatalogueImport},
};
use crate::{
    auth::Role,
    error::AppError,
    figures,
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::ApiQuery,
        page::{render, PageContext, PageResult},
    },
};

const MAX_FORM_BYTES: usize = 4 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    let pages = Router::new()
        .route("/prices", get(index).post(confirm))
        .route("/prices/preview", post(preview));
    crate::web::extract::body_limit(pages, MAX_FORM_BYTES)
}

/// A price as the page shows it.
struct PriceLine {
    /// The stored row's id (the anchor a review links to); empty in a preview.
    id: String,
    provider: String,
    gpu: String,
    gpu_count: i32,
    billing: String,
    rate: String,
    region: String,
    valid_from: String,
    source: String,
    line: u32,
}

impl PriceLine {
    fn new(r: &PriceRow) -> Self {
        Self {
            id: String::new(),
            provider: r.provider.clone(),
            gpu: r.gpu.clone(),
            gpu_count: r.gpu_count,
            billing: r.billing.clone(),
            rate: format!("{} {}", figures::amount(r.rate_per_gpu_hour), r.currency),
            region: if r.region.is_empty() {
                "—".into()
            } else {
                r.region.clone()
            },
            valid_from: r.valid_from.to_string(),
            source: r.source.clone(),
            line: r.line,
        }
    }
}

#[derive(Template)]
#[template(path = "prices/index.html")]
struct PricesPage {
    ctx: PageContext,
    current: Vec<PriceLine>,
    sheets: Vec<(String, String, String, i32)>,
    may_import: bool,
    columns: String,
    /// The CSV being previewed (kept in the confirm form) and what the check said.
    csv: String,
    /// `sheet` or `skypilot`, and a catalogue's provider and date (kept in the confirm form).
    format: String,
    provider: String,
    valid_from: String,
    preview: Vec<PriceLine>,
    /// A catalogue's skipped rows: (what they are, accelerator, rows, examples).
    skipped: Vec<(String, String, u64, String)>,
    /// Instance types whose GPU count was corrected: (instance type, the catalogue's count, the real one, rows).
    corrected: Vec<(String, String, i32, u64)>,
    errors: Vec<(String, String)>,
    notice: String,
}

impl PricesPage {
    /// Shows what a check found: the rows it would add and what a catalogue leaves out.
    fn show(&mut self, checked: &CatalogueImport) {
        self.preview = checked.rows.iter().map(PriceLine::new).collect();
        self.skipped = checked
            .skipped
            .iter()
            .map(|s| {
                let mut examples = s.instance_types.join(", ");
                // Only the first few instance types are kept: say when there may be more.
                if s.instance_types.len() >= skypilot::MAX_EXAMPLES {
                    examples.push_str(", …");
                }
                (
                    s.reason.says().to_owned(),
                    if s.accelerator.is_empty() {
                        "—".to_owned()
                    } else {
                        s.accelerator.clone()
                    },
                    s.rows,
                    examples,
                )
            })
            .collect();
        self.corrected = checked
            .corrected
            .iter()
            .map(|c| {
                (
                    c.instance_type.clone(),
                    c.catalogue_count.clone(),
                    c.known_count,
                    c.rows,
                )
            })
            .collect();
    }

    /// Keeps what the person chose, so a re-rendered form shows it again.
    fn keep(&mut self, csv: String, values: &HashMap<String, String>) {
        self.csv = csv;
        self.format = values.get("format").cloned().unwrap_or_else(|| "sheet".into());
        self.provider = values.get("provider").cloned().unwrap_or_default();
        self.valid_from = values.get("valid_from").cloned().unwrap_or_default();
    }
}

/// The format a form names.
fn form_format(values: &HashMap<String, String>) -> Result<Format, AppError> {
    Format::from_params(
        values.get("format").map(String::as_str),
        values.get("provider").map(String::as_str),
        values.get("valid_from").map(String::as_str),
    )
}

/// `?imported=N` after an import; `?offer_*=`: the offer a review asks a reserved price of (rule
/// 8b), filled into the sheet so the manager only types the quoted rate.
#[derive(Deserialize)]
struct IndexQuery {
    imported: Option<usize>,
    offer_provider: Option<String>,
    offer_gpu: Option<String>,
    offer_gpu_count: Option<String>,
    offer_region: Option<String>,
    offer_currency: Option<String>,
}

/// A price sheet of one reserved row of the offer `q` names, the rate left for the manager to type;
/// `None` when no offer is named. Commas and line breaks are dropped from what is filled in so
/// the row stays one row of nine cells.
fn reserved_offer_sheet(q: &IndexQuery, today: chrono::NaiveDate) -> Option<String> {
    let cell = |v: &Option<String>| {
        v.as_deref()
            .unwrap_or_default()
            .chars()
            .filter(|c| !matches!(c, ',' | '\n' | '\r' | '"'))
            .take(200)
            .collect::<String>()
    };
    let gpu = cell(&q.offer_gpu);
    if gpu.is_empty() {
        return None;
    }
    Some(format!(
        "{}\n{},{gpu},{},reserved,,{},{},{today},",
        COLUMNS.join(","),
        cell(&q.offer_provider),
        cell(&q.offer_gpu_count),
        cell(&q.offer_currency),
        cell(&q.offer_region),
    ))
}

async fn page(state: &AppState, user: &PageUser) -> PageResult<PricesPage> {
    let current = service::current(state).await?;
    let sheets = repo::sheets(&state.pool, 20).await?;
    Ok(PricesPage {
        ctx: user.into(),
        current: current
            .iter()
            .map(|p| PriceLine {
                id: p.id.to_string(),
                ..PriceLine::new(&p.row)
            })
            .collect(),
        sheets: sheets
            .into_iter()
            .map(|s| {
                (
                    s.imported_at.format("%Y-%m-%d %H:%M UTC").to_string(),
                    s.imported_by,
                    s.filename.unwrap_or_default(),
                    s.row_count,
                )
            })
            .collect(),
        may_import: user.0.role >= Role::Manager,
        columns: COLUMNS.join(","),
        csv: String::new(),
        format: "sheet".into(),
        provider: String::new(),
        valid_from: String::new(),
        preview: Vec::new(),
        skipped: Vec::new(),
        corrected: Vec::new(),
        errors: Vec::new(),
        notice: String::new(),
    })
}

async fn index(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<IndexQuery>,
) -> PageResult<Response> {
    let mut p = page(&state, &user).await?;
    if let Some(n) = q.imported {
        p.notice = format!("Imported {n} prices. The newest price of each offer is current.");
    }
    if let Some(sheet) = reserved_offer_sheet(&q, chrono::Utc::now().date_naive()) {
        p.csv = sheet;
        p.notice = "The offer a review asks a reserved price of is filled in below: type the reserved rate per \
                    GPU-hour the provider quoted between the two commas after “reserved”, put where the quote \
                    comes from last, then check the file."
            .into();
    }
    render(&p)
}

/// Checks the pasted or chosen sheet or catalogue and shows every row (or every bad cell) before
/// anything is stored.
async fn preview(State(state): State<AppState>, CsrfForm(user, values): CsrfForm) -> PageResult<Response> {
    user.require(Role::Manager)?;
    let csv = values.get("csv").cloned().unwrap_or_default();
    let mut p = page(&state, &user).await?;
    let checked = match form_format(&values) {
        Ok(format) => service::check_off_runtime(csv.as_bytes(), &format)
            .await
            .map(|checked| (format, checked)),
        Err(e) => Err(e),
    };
    match checked {
        Ok((format, checked)) => {
            p.show(&checked);
            p.keep(csv, &values);
            if let Format::Skypilot { valid_from, .. } = format {
                // The confirm stores what was previewed, even after midnight.
                p.valid_from = valid_from.to_string();
            }
        }
        Err(AppError::Validation(errors)) => {
            p.errors = errors.into_iter().map(|e| (e.field, e.message)).collect();
            p.keep(csv, &values);
        }
        Err(e) => return Err(e.into()),
    }
    let failed = !p.errors.is_empty();
    let mut response = render(&p)?;
    if failed {
        *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    }
    Ok(response)
}

/// Stores the previewed sheet or catalogue (checked again: nothing is trusted from the form).
async fn confirm(State(state): State<AppState>, CsrfForm(user, values): CsrfForm) -> PageResult<Response> {
    user.require(Role::Manager)?;
    let csv = values.get("csv").cloned().unwrap_or_default();
    let values: HashMap<String, String> = values;
    let stored = match form_format(&values) {
        Ok(format) => {
            service::import_as(
                &state,
                csv.as_bytes(),
                &format,
                values.get("filename").map(String::as_str),
                &user.0.email,
            )
            .await
        }
        Err(e) => Err(e),
    };
    match stored {
        Ok((_, checked)) => Ok(Redirect::to(&format!("/prices?imported={}", checked.rows.len())).into_response()),
        Err(AppError::Validation(errors)) => {
            let mut p = page(&state, &user).await?;
            p.errors = errors.into_iter().map(|e| (e.field, e.message)).collect();
            p.keep(csv, &values);
            let mut response = render(&p)?;
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(response)
        }
        Err(e) => Err(e.into()),
    }
}
