//! Pages for trials: add one to a brief (or re-run one), edit one, end one. The brief page lists
//! them; the review compares them.

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
    choices::{self, plain, Choices},
    model::{Allocation, Billing, Trial, TrialStatus},
    service,
};
use crate::{
    auth::{teams, Role},
    briefs::model::Brief,
    error::AppError,
    ids::{BriefId, PriceId, TrialId},
    prices::service as prices,
    sizing,
    state::AppState,
    validation::{FieldError, Input},
    web::{
        auth::{CsrfForm, PageUser},
        extract::{ApiQuery, BriefPath, Path},
        page::{render, PageContext, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/briefs/{id}/trials/new", get(new_form).post(create))
        .route("/trials/{tid}", get(edit_form).post(update))
        .route("/trials/{tid}/end", post(end))
}

#[derive(Template)]
#[template(path = "trials/form.html")]
struct TrialFormPage {
    ctx: PageContext,
    heading: String,
    action: String,
    brief_id: BriefId,
    brief_name: String,
    values: HashMap<String, String>,
    errors: HashMap<String, String>,
    gpus: Choices,
    billings: Choices,
    statuses: Choices,
    rerun_choices: Choices,
    /// The brief is served in real time: a spot trial asks to be confirmed (decision rule 6c).
    realtime: bool,
    /// The trial's allocation when the sizing says it cannot hold the brief ("1 × L4").
    under_sized: Option<String>,
}

impl TrialFormPage {
    fn new(user: &PageUser, heading: String, action: String, brief: &Brief, trials: &[Trial]) -> Self {
        Self {
            ctx: user.into(),
            heading,
            action,
            brief_id: brief.id,
            brief_name: brief.fields.name.clone(),
            values: HashMap::new(),
            errors: HashMap::new(),
            gpus: choices::gpus(),
            billings: plain(Billing::ALL.iter().map(|b| b.as_str())),
            statuses: plain(TrialStatus::ALL.iter().map(|s| s.as_str())),
            rerun_choices: trials
                .iter()
                .map(|t| (t.id.to_string(), t.fields.name.clone()))
                .collect(),
            realtime: brief.fields.workload_kind == sizing::WorkloadKind::RealtimeInference,
            under_sized: None,
        }
    }

    /// Whether the form shows the spot confirmation: a real-time brief with spot chosen.
    fn asks_spot_confirmation(&self) -> bool {
        self.realtime && self.is("billing", "spot")
    }

    fn value(&self, field: &str) -> &str {
        self.values.get(field).map(String::as_str).unwrap_or("")
    }

    fn error(&self, field: &str) -> &str {
        self.errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn is(&self, field: &str, choice: &str) -> bool {
        self.value(field) == choice
    }
}

/// A trial's fields as the form shows them.
fn form_values(t: &Trial) -> HashMap<String, String> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    HashMap::from([
        ("name".to_owned(), t.fields.name.clone()),
        ("provider".to_owned(), t.fields.provider.clone()),
        ("region".to_owned(), opt(&t.fields.region)),
        ("gpu".to_owned(), opt(&t.fields.gpu)),
        (
            "gpu_count".to_owned(),
            t.fields.gpu_count.map(|n| n.to_string()).unwrap_or_default(),
        ),
        ("billing".to_owned(), t.fields.billing.as_str().to_owned()),
        (
            "rate_per_gpu_hour".to_owned(),
            t.fields.rate_per_gpu_hour.map(|r| r.to_string()).unwrap_or_default(),
        ),
        ("currency".to_owned(), t.fields.currency.clone()),
        ("status".to_owned(), t.fields.status.as_str().to_owned()),
        ("notes".to_owned(), opt(&t.fields.notes)),
        (
            "rerun_of".to_owned(),
            t.fields.rerun_of.map(|r| r.to_string()).unwrap_or_default(),
        ),
        (
            "started_at".to_owned(),
            t.fields
                .started_at
                .map(|d| d.format("%Y-%m-%d").to_string())
                .unwrap_or_default(),
        ),
    ])
}

#[derive(Deserialize)]
struct NewQuery {
    rerun_of: Option<String>,
    /// A price row to start from ("create a trial from this price"), and the GPU count wanted.
    price: Option<String>,
    count: Option<u32>,
}

async fn new_form(
    State(state): State<AppState>,
    user: PageUser,
    path: BriefPath,
    ApiQuery(q): ApiQuery<NewQuery>,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    teams::may_edit_brief(&state.pool, &user.principal(), path.id).await?;
    let brief = path.load(&state).await?;
    let brief_id = brief.id;
    let trials = service::list(&state, brief_id).await?;
    let defaults = service::defaults_for(&brief, &trials);
    let mut page = TrialFormPage::new(
        &user,
        format!("Add a trial to {}", brief.fields.name),
        format!("/briefs/{brief_id}/trials/new"),
        &brief,
        &trials,
    );
    // A re-run starts from the trial it re-runs: same allocation, provider and rate.
    let rerun = q
        .rerun_of
        .and_then(|r| r.parse::<TrialId>().ok())
        .and_then(|r| trials.iter().find(|t| t.id == r));
    if let Some(earlier) = rerun {
        page.values = form_values(earlier);
        page.values.insert("rerun_of".into(), earlier.id.to_string());
        page.values.insert("status".into(), "planned".into());
        page.values.remove("started_at");
        page.heading = format!("Re-run {} of {}", earlier.fields.name, brief.fields.name);
    }
    // A trial from a price row: that offer's provider, GPU, billing, rate and region.
    if let Some(price) = q.price.as_deref().and_then(|p| p.parse::<PriceId>().ok()) {
        let p = prices::get(&state, price).await?;
        let count = q.count.filter(|c| *c > 0).unwrap_or(p.row.gpu_count.max(1) as u32);
        for (k, v) in [
            ("provider", p.row.provider.clone()),
            ("gpu", p.row.gpu.clone()),
            ("gpu_count", count.to_string()),
            ("billing", p.row.billing.clone()),
            ("rate_per_gpu_hour", p.row.rate_per_gpu_hour.to_string()),
            ("currency", p.row.currency.clone()),
            ("region", p.row.region.clone()),
            (
                "notes",
                format!(
                    "From the price sheet: {} (valid from {}).",
                    p.row.source, p.row.valid_from
                ),
            ),
        ] {
            page.values.insert(k.into(), v);
        }
        page.heading = format!(
            "Try {} × {} at {} for {}",
            count, p.row.gpu, p.row.provider, brief.fields.name
        );
    }
    page.values.insert("name".into(), defaults.name);
    page.values.entry("currency".into()).or_insert(defaults.currency);
    page.values
        .entry("billing".into())
        .or_insert_with(|| "on-demand".into());
    render(&page)
}

fn form_with_errors(mut page: TrialFormPage, values: HashMap<String, String>, e: AppError) -> PageResult<Response> {
    match e {
        AppError::Validation(errors) => {
            page.values = values;
            for e in errors {
                page.errors.entry(e.field).or_insert(e.message);
            }
            let mut response = render(&page)?;
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(response)
        }
        other => Err(other.into()),
    }
}

/// What the spot box says, and the error when it is left empty.
const SPOT_UNCONFIRMED: &str = "Spot capacity can be taken back at any moment, so it is not for \
real-time serving and the review will not recommend it for this brief. Tick the box to save this \
trial anyway, to test on it.";

/// A real-time brief's trial turned to spot is saved only once the person ticks that they know
/// (decision rule 6c): the error sits at the box, the input kept. `was_spot`: the trial already was.
fn unconfirmed_spot(brief: &Brief, values: &HashMap<String, String>, was_spot: bool) -> Option<AppError> {
    let value = |k: &str| values.get(k).map(String::as_str);
    (brief.fields.workload_kind == sizing::WorkloadKind::RealtimeInference
        && !was_spot
        && value("billing") == Some("spot")
        && value("confirm_spot") != Some("yes"))
    .then(|| AppError::Validation(vec![FieldError::new("confirm_spot", SPOT_UNCONFIRMED)]))
}

async fn create(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    teams::may_edit_brief(&state.pool, &user.principal(), path.id).await?;
    let brief = path.load(&state).await?;
    let brief_id = brief.id;
    let created = match unconfirmed_spot(&brief, &values, false) {
        Some(e) => Err(e),
        None => service::create(&state, brief_id, &Input::Form(&values), &user.0.email).await,
    };
    match created {
        Ok(trial) => Ok(Redirect::to(&format!("/briefs/{brief_id}?added={}#trials", trial.id)).into_response()),
        Err(e) => {
            let trials = service::list(&state, brief_id).await?;
            let page = TrialFormPage::new(
                &user,
                format!("Add a trial to {}", brief.fields.name),
                format!("/briefs/{brief_id}/trials/new"),
                &brief,
                &trials,
            );
            form_with_errors(page, values, e)
        }
    }
}

async fn edit_page(state: &AppState, user: &PageUser, trial: &Trial) -> PageResult<TrialFormPage> {
    let brief = service::load_brief(&state.pool, trial.brief_id).await?;
    let trials: Vec<Trial> = service::list(state, brief.id)
        .await?
        .into_iter()
        .filter(|t| t.id != trial.id)
        .collect();
    let mut page = TrialFormPage::new(
        user,
        format!("{} — {}", trial.fields.name, brief.fields.name),
        format!("/trials/{}", trial.id),
        &brief,
        &trials,
    );
    page.values = form_values(trial);
    page.under_sized = Allocation::resolve(
        trial.fields.gpu.as_deref(),
        trial.fields.gpu_count,
        &brief.fields.sizing(),
    )
    .filter(|a| a.under_sized)
    .map(|a| a.label());
    Ok(page)
}

async fn edit_form(State(state): State<AppState>, user: PageUser, Path(id): Path<TrialId>) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let trial = service::load(&state, id).await?;
    teams::may_edit_brief(&state.pool, &user.principal(), trial.brief_id).await?;
    render(&edit_page(&state, &user, &trial).await?)
}

async fn update(
    State(state): State<AppState>,
    Path(id): Path<TrialId>,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let current = service::load(&state, id).await?;
    teams::may_edit_brief(&state.pool, &user.principal(), current.brief_id).await?;
    let brief = service::load_brief(&state.pool, current.brief_id).await?;
    let saved = match unconfirmed_spot(&brief, &values, current.fields.billing == Billing::Spot) {
        Some(e) => Err(e),
        None => service::replace(&state, id, &Input::Form(&values), &user.0.email).await,
    };
    match saved {
        Ok(trial) => Ok(Redirect::to(&format!("/briefs/{}?saved={}#trials", trial.brief_id, trial.id)).into_response()),
        Err(e) => {
            let page = edit_page(&state, &user, &current).await?;
            form_with_errors(page, values, e)
        }
    }
}

/// Ends a trial: its status becomes `ended`, stamped now; everything else stays.
async fn end(
    State(state): State<AppState>,
    Path(id): Path<TrialId>,
    CsrfForm(user, _): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let current = service::load(&state, id).await?;
    teams::may_edit_brief(&state.pool, &user.principal(), current.brief_id).await?;
    let mut values = form_values(&current);
    values.insert("status".into(), "ended".into());
    values.remove("started_at");
    if let Some(started) = current.fields.started_at {
        values.insert("started_at".into(), started.to_rfc3339());
    }
    let trial = service::replace(&state, id, &Input::Form(&values), &user.0.email).await?;
    Ok(Redirect::to(&format!("/briefs/{}?ended={}#trials", trial.brief_id, trial.id)).into_response())
}
