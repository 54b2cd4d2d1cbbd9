//! Pages for briefs: the dashboard, the brief form (new and edit) and the brief page.

use std::collections::HashMap;

use askama::Template;
use axum::{
    extract::State,
    response::{Html, IntoResponse, Redirect, Response},
    routing::get,
    Router,
};

use super::{
    model::{validate, AllocationBoundary, Brief, BriefFields, BriefInput, CostUnit, DataBoundary, TARGET_FIELDS},
    repo,
};
use crate::{
    auth::Role,
    error::AppError,
    evidence::{self, pages::EvidenceListRow},
    review::{decision::Status, service as review_service},
    sizing::{self, Precision, Sizing, WorkloadKind},
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::PathId,
        page::{PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/", get(dashboard))
        .route("/briefs/new", get(new_form).post(create))
        .route("/briefs/{id}", get(show))
        .route("/briefs/{id}/edit", get(edit_form).post(update))
}

fn render(t: &impl Template) -> PageResult<Response> {
    Ok(Html(t.render().map_err(AppError::from)?).into_response())
}

/// One row of the dashboard.
struct BriefRow {
    id: String,
    name: String,
    model: String,
    workload: &'static str,
    precision: &'static str,
    best_option: String,
    created: String,
    decision: &'static str,
    progress: String,
    approval: String,
}

#[derive(Template)]
#[template(path = "briefs/list.html")]
struct DashboardPage {
    ctx: PageContext,
    briefs: Vec<BriefRow>,
}

/// Briefs on the dashboard; each row computes its review (a few indexed queries).
const DASHBOARD_BRIEFS: i64 = 100;

async fn dashboard(State(state): State<AppState>, user: PageUser) -> PageResult<Response> {
    let briefs = repo::list(&state.pool, DASHBOARD_BRIEFS).await?;
    let mut rows = Vec::with_capacity(briefs.len());
    for brief in briefs {
        let sizing = brief.fields.sizing();
        let best_option = sizing
            .options
            .iter()
            .find(|o| o.fits)
            .map(|o| format!("{} × {}", o.count, o.gpu))
            .unwrap_or_else(|| "no fit".to_owned());
        let (id, name, model, workload, precision, created) = (
            brief.id.to_string(),
            brief.fields.name.clone(),
            brief.fields.model_name.clone(),
            brief.fields.workload_kind.as_str(),
            brief.fields.precision.as_str(),
            brief.created_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        );
        let review = review_service::review_for(&state, brief).await?;
        let required: Vec<_> = review.context.inputs.criteria.iter().filter(|c| c.required).collect();
        let passed = required.iter().filter(|c| c.status == Status::Pass).count();
        rows.push(BriefRow {
            id,
            name,
            model,
            workload,
            precision,
            best_option,
            created,
            decision: review.decision.decision.as_str(),
            progress: format!("{passed}/{} required", required.len()),
            approval: match &review.approval {
                None => "awaiting review".to_owned(),
                Some(a) if a.stale => format!("{}d (stale)", a.row.verdict),
                Some(a) => format!("{}d {}", a.row.verdict, a.row.decision),
            },
        });
    }
    render(&DashboardPage {
        ctx: (&user).into(),
        briefs: rows,
    })
}

/// A select's choices as (value, label) pairs.
type Choices = Vec<(String, String)>;

fn plain(values: impl IntoIterator<Item = &'static str>) -> Choices {
    values.into_iter().map(|v| (v.to_owned(), v.to_owned())).collect()
}

#[derive(Template)]
#[template(path = "briefs/form.html")]
struct BriefFormPage {
    ctx: PageContext,
    heading: String,
    action: String,
    values: HashMap<String, String>,
    errors: HashMap<String, String>,
    sizing: Option<Sizing>,
    workload_kinds: Choices,
    precisions: Choices,
    data_boundaries: Choices,
    allocation_boundaries: Choices,
    cost_units: Choices,
    catalog_models: Choices,
    gpus: Choices,
    target_fields: Vec<(String, &'static str)>,
}

impl BriefFormPage {
    fn new(user: &PageUser, heading: &str, action: String, values: HashMap<String, String>) -> Self {
        Self {
            ctx: user.into(),
            heading: heading.to_owned(),
            action,
            values,
            errors: HashMap::new(),
            sizing: None,
            workload_kinds: plain(WorkloadKind::ALL.iter().map(|k| k.as_str())),
            precisions: plain(Precision::ALL.iter().map(|p| p.as_str())),
            data_boundaries: plain(DataBoundary::ALL.iter().map(|d| d.as_str())),
            allocation_boundaries: plain(AllocationBoundary::ALL.iter().map(|a| a.as_str())),
            cost_units: plain(CostUnit::ALL.iter().map(|c| c.as_str())),
            catalog_models: sizing::models()
                .iter()
                .map(|m| (m.hf_id.clone(), format!("{} ({} B)", m.name, m.params_b)))
                .collect(),
            gpus: sizing::gpus()
                .iter()
                .map(|g| {
                    (
                        g.model.clone(),
                        format!("{} {} ({} GB)", g.vendor, g.model, g.memory_gb),
                    )
                })
                .collect(),
            target_fields: TARGET_FIELDS
                .iter()
                .map(|f| (format!("targets.{f}"), target_label(f)))
                .collect(),
        }
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

    fn checked(&self, field: &str) -> bool {
        matches!(self.value(field), "on" | "true" | "1" | "yes")
    }
}

fn target_label(field: &str) -> &'static str {
    match field {
        "ttft_p95_ms" => "Time to first token, p95 (ms)",
        "itl_p95_ms" => "Inter-token latency, p95 (ms)",
        "e2e_p95_ms" => "End-to-end latency, p95 (ms)",
        "output_tokens_per_s" => "Output tokens per second",
        "request_throughput_rps" => "Requests per second",
        "error_rate" => "Error rate (0–1)",
        _ => "target",
    }
}

fn default_values() -> HashMap<String, String> {
    HashMap::from([
        ("workload_kind".to_owned(), "realtime-inference".to_owned()),
        ("precision".to_owned(), "bf16".to_owned()),
        ("data_boundary".to_owned(), "shared-ok".to_owned()),
        ("allocation_boundary".to_owned(), "vm".to_owned()),
        ("currency".to_owned(), "USD".to_owned()),
        ("cost_unit".to_owned(), "request".to_owned()),
    ])
}

async fn new_form(user: PageUser) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    render(&BriefFormPage::new(
        &user,
        "New workload brief",
        "/briefs/new".into(),
        default_values(),
    ))
}

/// Validates a submitted form. `Ok` carries the brief to save, or the page to show instead: the
/// form with the user's values and a message at each bad field, or a sizing preview.
fn check_form(mut page: BriefFormPage) -> Result<BriefFields, Box<BriefFormPage>> {
    let result = validate(&BriefInput::Form(&page.values));
    let preview = page.value("intent") == "preview";
    match result {
        Ok(fields) if !preview => Ok(fields),
        Ok(fields) => {
            page.sizing = Some(fields.sizing());
            Err(Box::new(page))
        }
        Err(errors) => {
            for e in errors {
                page.errors.entry(e.field).or_insert(e.message);
            }
            Err(Box::new(page))
        }
    }
}

fn form_answer(page: &BriefFormPage) -> PageResult<Response> {
    let mut response = render(page)?;
    if !page.errors.is_empty() {
        *response.status_mut() = axum::http::StatusCode::UNPROCESSABLE_ENTITY;
    }
    Ok(response)
}

async fn create(State(state): State<AppState>, CsrfForm(user, values): CsrfForm) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let page = BriefFormPage::new(&user, "New workload brief", "/briefs/new".into(), values);
    match check_form(page) {
        Ok(fields) => {
            let brief = repo::insert(&state.pool, &fields).await?;
            Ok(Redirect::to(&format!("/briefs/{}", brief.id)).into_response())
        }
        Err(page) => form_answer(&page),
    }
}

async fn load(state: &AppState, id: uuid::Uuid) -> PageResult<Brief> {
    Ok(repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("brief"))?)
}

async fn edit_form(State(state): State<AppState>, user: PageUser, PathId(id): PathId) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let brief = load(&state, id).await?;
    render(&BriefFormPage::new(
        &user,
        &format!("Edit {}", brief.fields.name),
        format!("/briefs/{id}/edit"),
        brief.fields.form_values(),
    ))
}

async fn update(
    State(state): State<AppState>,
    PathId(id): PathId,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    let page = BriefFormPage::new(&user, "Edit brief", format!("/briefs/{id}/edit"), values);
    match check_form(page) {
        Ok(fields) => {
            repo::update(&state.pool, id, &fields)
                .await?
                .ok_or(AppError::NotFound("brief"))?;
            Ok(Redirect::to(&format!("/briefs/{id}")).into_response())
        }
        Err(page) => form_answer(&page),
    }
}

#[derive(Template)]
#[template(path = "briefs/show.html")]
struct BriefPage {
    ctx: PageContext,
    brief: Brief,
    sizing: Sizing,
    facts: Vec<(&'static str, String)>,
    evidence: Vec<EvidenceListRow>,
    acceptance: crate::acceptance::pages::BriefSections,
    ledger: crate::ledger::pages::LedgerSection,
}

fn brief_facts(f: &BriefFields) -> Vec<(&'static str, String)> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".to_owned());
    let arch = |v: Option<i32>| v.map(|n| n.to_string()).unwrap_or_else(|| "from catalogue".to_owned());
    let yes_no = |b: bool| if b { "yes" } else { "no" }.to_owned();
    let mut facts = vec![
        ("Owner", f.owner.clone()),
        ("Workload", f.workload_kind.as_str().to_owned()),
        ("Model", f.model_name.clone()),
        ("Revision", opt(&f.model_revision)),
        ("Catalogue model", opt(&f.catalog_model)),
        ("Parameters", format!("{} B", f.params_b)),
        ("Precision", f.precision.as_str().to_owned()),
        ("Context length", f.context_length.to_string()),
        ("Concurrency", f.concurrency.to_string()),
        ("Layers", arch(f.num_layers)),
        ("KV heads", arch(f.num_kv_heads)),
        ("Head dim", arch(f.head_dim)),
    ];
    for field in TARGET_FIELDS {
        if let Some(v) = f.targets.get(field) {
            facts.push((target_label(field), v.to_string()));
        }
    }
    facts.extend([
        ("Data boundary", f.data_boundary.as_str().to_owned()),
        ("Needs host-level control", yes_no(f.needs_host_control)),
        ("Only needs model output", yes_no(f.only_needs_model_output)),
        (
            "Must persist",
            if f.persist.is_empty() {
                "—".to_owned()
            } else {
                f.persist.join(", ")
            },
        ),
        ("Restore plan", opt(&f.restore_plan)),
        ("Fallback plan", opt(&f.fallback_plan)),
        (
            "Cost ceiling",
            match f.max_cost_per_job {
                Some(c) => format!("{c} {} per {}", f.currency, f.cost_unit.as_str()),
                None => "—".to_owned(),
            },
        ),
        ("Allocation boundary", f.allocation_boundary.as_str().to_owned()),
        (
            "Trial allocation",
            match (&f.trial_gpu, f.trial_gpu_count) {
                (Some(g), Some(n)) => format!("{n} × {g}"),
                (Some(g), None) => g.clone(),
                _ => "first fitting sizing option".to_owned(),
            },
        ),
    ]);
    facts
}

async fn show(State(state): State<AppState>, user: PageUser, PathId(id): PathId) -> PageResult<Response> {
    let brief = load(&state, id).await?;
    let sizing = brief.fields.sizing();
    let facts = brief_facts(&brief.fields);
    // The three sections are independent reads: run them side by side, so the page waits for the
    // slowest instead of the sum (it matters when ingest keeps the database busy).
    let (evidence, acceptance, ledger) = tokio::try_join!(
        async { Ok::<_, PageError>(evidence::pages::brief_rows(&state, id).await?) },
        crate::acceptance::pages::brief_sections(&state, &brief),
        async { Ok(crate::ledger::pages::section(&state, brief.id, &brief.fields.currency).await?) },
    )?;
    render(&BriefPage {
        ctx: (&user).into(),
        brief,
        sizing,
        facts,
        evidence,
        acceptance,
        ledger,
    })
}
