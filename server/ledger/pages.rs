//! The ledger section of the brief page and its forms: add a line, set outputs, import a ledger CSV
//! or a FinOps FOCUS export (whose result page lists what it left out), export.

use std::collections::BTreeMap;

use askama::Template;
use axum::{
    extract::State,
    response::{IntoResponse, Redirect, Response},
    routing::{get, post},
    Router,
};
use rust_decimal::{prelude::ToPrimitive, Decimal};

use super::{
    api::{csv_response, import_focus},
    csv,
    focus::{self, GpusPerResource, NotAdded},
    model::{as_people_type_it, utilization, validate_line, validate_outputs, Category, LineInput, Outputs},
    repo::{self, StoredLine},
    service::{brief_currency, store, summary, LedgerWrite, Target},
};
use crate::{
    auth::{teams, Role},
    error::AppError,
    ids::{BriefId, TrialId},
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::BriefPath,
        page::{render, PageContext, PageResult},
    },
};

/// Lines shown on the brief page (the CSV export has them all).
const PAGE_LINES: i64 = 20;
/// A pasted CSV on the page may be this large.
const MAX_PASTE_BYTES: usize = 16 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    let import = crate::web::extract::body_limit(
        Router::new().route("/briefs/{id}/ledger/import", post(import)),
        MAX_PASTE_BYTES,
    );
    Router::new()
        .merge(import)
        .route("/briefs/{id}/ledger.csv", get(export))
}

/// One bar of the cost-breakdown chart, laid out on the server.
pub struct Bar {
    pub label: &'static str,
    pub amount: String,
    pub width: u32,
}

/// One line as the page shows it.
pub struct LineView {
    pub category: &'static str,
    pub resource: String,
    pub description: String,
    pub interval: String,
    pub gpus: String,
    pub rate: String,
    pub amount: String,
}

/// Everything the ledger section of the brief page shows, display-ready, for one trial.
pub struct LedgerSection {
    pub brief_id: String,
    pub trial_id: String,
    pub trial_name: String,
    pub currency: String,
    pub cost_per_job: Option<String>,
    pub total: String,
    pub accelerator_hours: String,
    pub accepted: i64,
    pub idle_hours: Option<String>,
    pub failed_jobs: i64,
    pub rejected: i64,
    pub retries: i64,
    pub utilization: Option<String>,
    pub bars: Vec<Bar>,
    pub lines: Vec<LineView>,
    pub lines_total: i64,
    pub outputs: Outputs,
    pub categories: Vec<&'static str>,
    /// The "add a line" form: empty, or as the person typed it with a message at each bad field.
    pub form: LineForm,
    /// The outputs form, the same way.
    pub outputs_form: LineForm,
}

impl LedgerSection {
    /// The stored figure an outputs field shows ("" for idle hours never reported).
    pub fn stored_output(&self, field: &str) -> String {
        let o = &self.outputs;
        match field {
            "accepted" => o.accepted.to_string(),
            "rejected" => o.rejected.to_string(),
            "retries" => o.retries.to_string(),
            "failed_jobs" => o.failed_jobs.to_string(),
            _ => o.idle_hours.map(|h| h.normalize().to_string()).unwrap_or_default(),
        }
    }
}

/// A ledger form as typed, and a message per field it was refused for.
#[derive(Debug)]
pub struct LineForm {
    values: std::collections::HashMap<String, String>,
    errors: BTreeMap<String, String>,
    /// Its fields and their labels, in the page's order.
    fields: &'static [(&'static str, &'static str)],
}

impl Default for LineForm {
    fn default() -> Self {
        Self::empty(&LINE_FORM_FIELDS)
    }
}

/// The outputs form's fields and how the page names them.
pub const OUTPUT_FORM_FIELDS: [(&str, &str); 5] = [
    ("accepted", "Accepted"),
    ("rejected", "Rejected"),
    ("retries", "Retries"),
    ("failed_jobs", "Failed jobs"),
    ("idle_hours", "Idle GPU-hours"),
];

/// The form's fields and how the page names them (in the messages above the form).
pub const LINE_FORM_FIELDS: [(&str, &str); 9] = [
    ("category", "Category"),
    ("resource", "Resource"),
    ("description", "Description"),
    ("starts_at", "Starts at"),
    ("ends_at", "Ends at"),
    ("gpus", "GPUs"),
    ("rate_per_gpu_hour", "Rate per GPU-hour"),
    ("amount", "Amount"),
    ("currency", "Currency"),
];

impl LineForm {
    fn empty(fields: &'static [(&'static str, &'static str)]) -> Self {
        Self {
            values: Default::default(),
            errors: BTreeMap::new(),
            fields,
        }
    }

    /// The outputs form, nothing typed.
    pub fn outputs() -> Self {
        Self::empty(&OUTPUT_FORM_FIELDS)
    }

    /// What the person typed in `field` ("" when nothing).
    pub fn value(&self, field: &str) -> &str {
        self.values.get(field).map(String::as_str).unwrap_or("")
    }

    /// The message for `field` ("" when it is fine).
    pub fn error(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    pub fn is_invalid(&self) -> bool {
        !self.errors.is_empty()
    }

    /// Every message with the label of its field, for the summary above the form.
    pub fn messages(&self) -> Vec<String> {
        self.errors
            .iter()
            .map(|(field, message)| {
                let label = self
                    .fields
                    .iter()
                    .find(|(f, _)| f == field)
                    .map(|(_, l)| *l)
                    .unwrap_or(field.as_str());
                format!("{label}: {message}")
            })
            .collect()
    }

    /// The first field with a message: the one the page focuses.
    pub fn first_invalid(&self) -> &str {
        self.fields
            .iter()
            .map(|(f, _)| *f)
            .find(|f| self.errors.contains_key(*f))
            .unwrap_or("")
    }

    /// The trial the form was for.
    pub fn trial(&self) -> Option<TrialId> {
        self.values.get("trial").and_then(|t| t.trim().parse().ok())
    }
}

const BAR_MAX: u32 = 300;

/// Money for people: the one formatter every page uses (thousands separators; two significant
/// digits below one unit, so 0.00859 reads 0.0086, not 0.01).
fn money(d: Decimal) -> String {
    crate::figures::amount(d)
}

fn line_view(s: &StoredLine) -> LineView {
    let l = &s.line;
    let t = |t: Option<chrono::DateTime<chrono::Utc>>| t.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string());
    LineView {
        category: l.category.as_str(),
        resource: l.resource.clone(),
        description: l.description.clone(),
        interval: match (t(l.starts_at), t(l.ends_at)) {
            (Some(a), Some(b)) => format!("{a} → {b}"),
            _ => "—".to_owned(),
        },
        gpus: l.gpus.map(|g| g.to_string()).unwrap_or_default(),
        rate: l.rate_per_gpu_hour.map(money).unwrap_or_default(),
        amount: money(l.amount),
    }
}

/// Loads one trial's section for the brief page.
pub async fn section(
    state: &AppState,
    brief_id: BriefId,
    trial: (TrialId, &str),
    currency: &str,
) -> Result<LedgerSection, AppError> {
    let (trial_id, trial_name) = trial;
    let (s, outputs, lines, lines_total) = tokio::try_join!(
        summary(state, trial_id, currency),
        async { Ok(repo::outputs(&state.pool, trial_id).await?) },
        async { Ok(repo::newest_lines(&state.pool, trial_id, None, PAGE_LINES).await?) },
        async { Ok(repo::count_lines(&state.pool, trial_id).await?) },
    )?;
    let max = Category::ALL.iter().map(|c| s.totals.get(*c)).max().unwrap_or_default();
    let bars = Category::ALL
        .iter()
        .map(|c| {
            let amount = s.totals.get(*c);
            let width = if max.is_zero() {
                0
            } else {
                (amount * Decimal::from(BAR_MAX) / max).round().to_u32().unwrap_or(0)
            };
            Bar {
                label: c.as_str(),
                amount: money(amount),
                width,
            }
        })
        .collect();
    Ok(LedgerSection {
        brief_id: brief_id.to_string(),
        trial_id: trial_id.to_string(),
        trial_name: trial_name.to_owned(),
        currency: s.currency.clone(),
        cost_per_job: s.cost_per_job.map(money),
        total: money(s.total),
        accelerator_hours: s.accelerator_hours.round_dp(2).normalize().to_string(),
        accepted: s.accepted_outputs,
        idle_hours: s.diagnostics.idle_hours.map(|d| d.to_string()),
        failed_jobs: s.diagnostics.failed_jobs,
        rejected: s.diagnostics.rejected_outputs,
        retries: s.diagnostics.retries,
        utilization: utilization(&s).map(|u| format!("{} %", (u * Decimal::from(100)).round_dp(1))),
        bars,
        lines: lines.iter().map(line_view).collect(),
        lines_total,
        outputs,
        categories: Category::ALL.iter().map(|c| c.as_str()).collect(),
        form: LineForm::default(),
        outputs_form: LineForm::outputs(),
    })
}

fn back(id: BriefId, trial: Option<TrialId>) -> Response {
    match trial {
        Some(t) => Redirect::to(&format!("/briefs/{id}?trial={t}#ledger")).into_response(),
        None => Redirect::to(&format!("/briefs/{id}#ledger")).into_response(),
    }
}

/// The trial a form names (a hidden `trial` field on the brief page's ledger forms).
fn form_target(values: &std::collections::HashMap<String, String>) -> Target {
    Target {
        named: values.get("trial").and_then(|t| t.trim().parse().ok()),
        token_trial: None,
    }
}

/// `POST /briefs/{id}/ledger/lines` from the brief page's form: stores the line and answers the
/// redirect back, or hands back the form as typed with a message at each bad field, for the brief
/// page (which owns the route, as it is the page re-rendered) to show again.
pub async fn add_line(
    state: &AppState,
    id: BriefId,
    user: &PageUser,
    values: &std::collections::HashMap<String, String>,
) -> PageResult<Result<Response, LineForm>> {
    user.require(Role::Engineer)?;
    teams::may_send_to_brief(&state.pool, &user.principal(), id).await?;
    let currency = brief_currency(state, id).await?;
    let get = |k: &str| values.get(k).cloned();
    let input = LineInput {
        category: get("category"),
        resource: get("resource"),
        description: get("description"),
        starts_at: get("starts_at"),
        ends_at: get("ends_at"),
        gpus: get("gpus"),
        rate_per_gpu_hour: get("rate_per_gpu_hour"),
        amount: get("amount"),
        currency: get("currency"),
        trial: None,
    };
    let line = match validate_line(&as_people_type_it(input, &currency), &currency) {
        Ok(line) => line,
        Err(errors) => {
            let mut form = LineForm {
                values: values.clone(),
                ..LineForm::default()
            };
            for e in errors {
                // The validator speaks to programs (RFC 3339); a person typed into a form that also
                // takes `2026-11-20 09:00`, so say that instead.
                let message = if matches!(e.field.as_str(), "starts_at" | "ends_at") && e.message.contains("RFC 3339") {
                    format!(
                        "is not a time we can read (got {:?}): type it as 2026-11-20 09:00 (UTC), or with an offset as 2026-11-20T09:00:00-05:00",
                        values.get(&e.field).map(|v| v.trim()).unwrap_or("")
                    )
                } else {
                    e.message
                };
                // One message per field: the first is the one to fix first.
                form.errors.entry(e.field).or_insert(message);
            }
            return Ok(Err(form));
        }
    };
    let target = form_target(values);
    let write = LedgerWrite {
        brief_id: id,
        target,
        actor: &user.0.email,
        source: "form",
        lines: &[line],
        outputs: None,
    };
    store(state, write).await?;
    Ok(Ok(back(id, target.named)))
}

/// `POST /briefs/{id}/ledger/outputs` from the brief page's outputs form: stores the figures and
/// answers the redirect back, or hands back the form as typed with a message at each bad field
/// (the brief page, which owns the route, shows it again). Counts may be typed as people write
/// them (`1,200`).
pub async fn set_outputs(
    state: &AppState,
    id: BriefId,
    user: &PageUser,
    values: &std::collections::HashMap<String, String>,
) -> PageResult<Result<Response, LineForm>> {
    user.require(Role::Engineer)?;
    teams::may_send_to_brief(&state.pool, &user.principal(), id).await?;
    brief_currency(state, id).await?;
    let target = form_target(values);
    let raw: BTreeMap<String, Option<String>> = values
        .iter()
        .filter(|(k, _)| !matches!(k.as_str(), "trial" | "csrf_token"))
        .map(|(k, v)| {
            // Counts may be grouped; idle hours are a decimal, whose comma may be a decimal mark.
            let v = if k == "idle_hours" {
                v.trim().to_owned()
            } else {
                without_digit_grouping(v)
            };
            (k.clone(), Some(v))
        })
        .collect();
    let patch = match validate_outputs(&raw) {
        Ok(patch) => patch,
        Err(errors) => {
            let mut form = LineForm {
                values: values.clone(),
                ..LineForm::outputs()
            };
            for e in errors {
                form.errors.entry(e.field).or_insert(e.message);
            }
            return Ok(Err(form));
        }
    };
    let write = LedgerWrite {
        brief_id: id,
        target,
        actor: &user.0.email,
        source: "form",
        lines: &[],
        outputs: Some(&patch),
    };
    store(state, write).await?;
    Ok(Ok(back(id, target.named)))
}

/// `1,200` and `1 200` as `1200`: a count's digits grouped by three, as people write counts.
/// Anything else (`1,5`, `0,500`) is left for the validator to refuse, never guessed.
fn without_digit_grouping(v: &str) -> String {
    let t = v.trim();
    let mut groups = t.split([',', ' ']);
    let first_ok = groups
        .next()
        .is_some_and(|g| (1..=3).contains(&g.len()) && !g.starts_with('0') && g.bytes().all(|b| b.is_ascii_digit()));
    let grouped =
        t.contains([',', ' ']) && first_ok && groups.all(|g| g.len() == 3 && g.bytes().all(|b| b.is_ascii_digit()));
    if grouped {
        t.replace([',', ' '], "")
    } else {
        t.to_owned()
    }
}

/// What a FOCUS import did, for people: what was added, what was left out and why.
#[derive(Template)]
#[template(path = "ledger/focus_result.html")]
struct FocusResultPage {
    ctx: PageContext,
    brief_id: String,
    trial_id: String,
    lines_added: u64,
    rows_read: u64,
    rows_selected: u64,
    rows_already_imported: u64,
    rows_combined: u64,
    /// (charge category, why, whose, rows, sum with currency, first lines).
    not_added: Vec<(String, String, String, u64, String, String)>,
    counted_as_host: Vec<String>,
    /// (why, rows, first lines).
    hours_from_charge_period: Vec<(String, u64, String)>,
    /// (commitment id, rows, sum with currency, first lines).
    commitment_purchases: Vec<(String, u64, String, String)>,
    total: String,
    cost_per_job: Option<String>,
    currency: String,
}

fn not_added_row(n: &NotAdded) -> (String, String, String, u64, String, String) {
    (
        n.charge_category.clone(),
        match n.reason {
            "refund" => "a negative usage row (a refund)".to_owned(),
            "tagged for another trial" => {
                "a listed resource, but its Tags give another trial's id: left to that trial".to_owned()
            }
            _ => "not usage".to_owned(),
        },
        match n.of {
            "account" => "the account (no resource named)".to_owned(),
            _ => "this trial's resources".to_owned(),
        },
        n.rows,
        format!("{} {}", money(n.sum), n.currency),
        quoted_lines(&n.lines),
    )
}

fn quoted_lines(lines: &[u64]) -> String {
    lines.iter().map(u64::to_string).collect::<Vec<_>>().join(", ")
}

/// A ledger import that was refused: each problem at its field, the form again as it was sent (the
/// file's text in the paste box, the format and the FOCUS choices), the trial it was for named,
/// and a way back to the brief's ledger.
#[derive(Template)]
#[template(path = "ledger/import_error.html")]
struct ImportErrorPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    trial_id: String,
    trial_name: String,
    format: String,
    csv: String,
    resources: String,
    gpus_per_resource: String,
    /// The file's problems (`csv`) and the FOCUS fields' (`resources`, `gpus_per_resource`):
    /// (where, message).
    file_errors: Vec<(String, String)>,
    field_errors: BTreeMap<String, String>,
}

impl ImportErrorPage {
    fn error_for(&self, field: &str) -> &str {
        self.field_errors.get(field).map(String::as_str).unwrap_or("")
    }
}

/// The largest paste a refused import shows again (a bigger file is named, not echoed: choose it
/// again).
const MAX_ECHOED_BYTES: usize = 512 * 1024;

async fn import(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    let id = path.id;
    let kept = values.clone();
    match import_checked(&state, id, &user, values).await {
        Err(crate::web::page::PageError(AppError::Validation(errors))) => {
            let brief = path.load(&state).await?;
            let trials = crate::trials::service::list(&state, id).await?;
            let named = form_target(&kept).named;
            let trial = named
                .and_then(|t| trials.iter().find(|x| x.id == t))
                .or(trials.first())
                .ok_or(AppError::NotFound("trial"))?;
            let mut field_errors = BTreeMap::new();
            let mut file_errors = Vec::new();
            for e in errors {
                if matches!(e.field.as_str(), "resources" | "gpus_per_resource" | "format") {
                    field_errors.entry(e.field).or_insert(e.message);
                } else {
                    file_errors.push((e.field, e.message));
                }
            }
            let csv = kept.get("csv").cloned().unwrap_or_default();
            let page = ImportErrorPage {
                ctx: (&user).into(),
                brief_id: id.to_string(),
                brief_name: brief.fields.name.clone(),
                trial_id: trial.id.to_string(),
                trial_name: trial.fields.name.clone(),
                format: kept.get("format").cloned().unwrap_or_else(|| "csv".into()),
                csv: if csv.len() <= MAX_ECHOED_BYTES {
                    csv
                } else {
                    String::new()
                },
                resources: kept.get("resources").cloned().unwrap_or_default(),
                gpus_per_resource: kept.get("gpus_per_resource").cloned().unwrap_or_default(),
                file_errors,
                field_errors,
            };
            let mut response = render(&page)?;
            *response.status_mut() = axum::http::StatusCode::UNPROCESSABLE_ENTITY;
            Ok(response)
        }
        other => other,
    }
}

async fn import_checked(
    state: &AppState,
    id: BriefId,
    user: &PageUser,
    mut values: std::collections::HashMap<String, String>,
) -> PageResult<Response> {
    let state = state.clone();
    user.require(Role::Engineer)?;
    teams::may_send_to_brief(&state.pool, &user.principal(), id).await?;
    let currency = brief_currency(&state, id).await?;
    let target = form_target(&values);
    let text = values.remove("csv").unwrap_or_default();
    if values.get("format").map(|f| f.trim()) == Some("focus") {
        let gpus = GpusPerResource::parse(values.get("gpus_per_resource").map(String::as_str))
            .map_err(|e| AppError::Validation(vec![e]))?;
        let (stored, import) = import_focus(
            &state,
            id,
            target,
            &user.0.email,
            values.get("resources").map(String::as_str),
            gpus,
            |selection, currency| async move {
                tokio::task::spawn_blocking(move || focus::parse(text.as_bytes(), &currency, &selection))
                    .await
                    .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?
                    .map_err(AppError::from)
            },
        )
        .await?;
        let s = summary(&state, stored.trial, &currency).await?;
        return render(&FocusResultPage {
            ctx: user.into(),
            brief_id: id.to_string(),
            trial_id: stored.trial.to_string(),
            lines_added: stored.added,
            rows_read: import.rows_read,
            rows_selected: import.rows_selected,
            rows_already_imported: stored.already_imported,
            rows_combined: import.rows_combined,
            not_added: import.not_added.iter().map(not_added_row).collect(),
            counted_as_host: import.counted_as_host,
            hours_from_charge_period: import
                .hours_from_charge_period
                .iter()
                .map(|h| (h.reason.to_owned(), h.rows, quoted_lines(&h.lines)))
                .collect(),
            commitment_purchases: import
                .commitment_purchases
                .iter()
                .map(|c| {
                    (
                        c.commitment_discount_id.clone(),
                        c.rows,
                        format!("{} {}", money(c.sum), c.currency),
                        quoted_lines(&c.lines),
                    )
                })
                .collect(),
            total: money(s.total),
            cost_per_job: s.cost_per_job.map(money),
            currency: s.currency,
        });
    }
    let lines = tokio::task::spawn_blocking(move || csv::parse(text.as_bytes(), &currency))
        .await
        .map_err(|e| AppError::Internal(anyhow::Error::new(e)))?
        .map_err(AppError::from)?;
    let write = LedgerWrite {
        brief_id: id,
        target,
        actor: &user.0.email,
        source: "csv-form",
        lines: &lines,
        outputs: None,
    };
    store(&state, write).await?;
    Ok(back(id, target.named))
}

async fn export(State(state): State<AppState>, user: PageUser, BriefPath { id }: BriefPath) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    Ok(csv_response(&state, id).await?)
}
