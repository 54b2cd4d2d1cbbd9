//! The brief form (new and edit). Here, above the briefs domain, because a brief and its trial 1
//! are one use case (`trials::service::create_brief`, `replace_brief`, `load_brief`). The dashboard
//! and the brief page show every domain at once and live in `overview/`.

use std::collections::HashMap;

use askama::Template;
use axum::{
    extract::State,
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Router,
};

use super::{
    choices::{self, plain, Choices},
    service,
};
use crate::{
    auth::Role,
    briefs::{
        model::{
            target_label, validate, AllocationBoundary, BriefFields, BriefInput, CostUnit, DataBoundary,
            MAX_MODEL_CONFIG_BYTES, TARGET_FIELDS,
        },
        service as briefs,
    },
    sizing::{self, KvCacheDtype, Precision, Sizing, WorkloadKind},
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::BriefPath,
        page::{render, PageContext, PageResult},
    },
};

/// The brief form's body limit: well above its largest field (the config.json, 256 KiB kept), so
/// an oversized file reaches the form's own check and comes back as that field's error with
/// everything else typed kept, instead of the server-wide 1 MiB limit's bare 400. Only
/// a signed-in person's form is read this far (`CsrfForm` checks the session first).
pub const MAX_BRIEF_FORM_BYTES: usize = 8 * 1024 * 1024;

pub fn routes() -> Router<AppState> {
    let pages = Router::new()
        .route("/briefs/new", get(new_form).post(create))
        .route("/briefs/{id}/edit", get(edit_form).post(update));
    crate::web::extract::body_limit(pages, MAX_BRIEF_FORM_BYTES)
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
    kv_cache_dtypes: Choices,
    data_boundaries: Choices,
    allocation_boundaries: Choices,
    cost_units: Choices,
    catalog_models: Choices,
    gpus: Choices,
    target_fields: Vec<(String, &'static str)>,
    arch_fields: &'static [(&'static str, &'static str, &'static str)],
}

/// The architecture fields of the form, with what each means to someone reading config.json.
const ARCH_FIELDS: [(&str, &str, &str); 11] = [
    (
        "num_attention_heads",
        "Attention heads",
        "num_attention_heads: query heads; tensor parallel must divide them",
    ),
    (
        "kv_lora_rank",
        "Latent KV rank (MLA)",
        "kv_lora_rank, for multi-head latent attention (DeepSeek-style)",
    ),
    (
        "qk_rope_head_dim",
        "Rotary head dim (MLA)",
        "qk_rope_head_dim, with the latent rank",
    ),
    (
        "sliding_window",
        "Sliding window (tokens)",
        "sliding_window: local layers cache at most this many tokens",
    ),
    (
        "sliding_window_layers",
        "Sliding-window layers",
        "How many layers use the window (or give layer types)",
    ),
    (
        "layer_types",
        "Layer types",
        "Comma-separated, one per layer: full_attention, sliding_attention, chunked_attention, or linear_attention / mamba for a hybrid's state layers (their sizes come from the config)",
    ),
    (
        "attention_chunk_size",
        "Attention chunk (tokens)",
        "attention_chunk_size, for chunked local attention (Llama 4)",
    ),
    (
        "chunked_layers",
        "Chunked layers",
        "How many layers use chunked attention",
    ),
    ("num_experts", "Experts", "Routed experts per MoE layer"),
    ("experts_per_token", "Experts per token", "Experts each token uses"),
    (
        "active_params_b",
        "Active parameters (billions)",
        "Parameters one token uses, for MoE decode speed",
    ),
];

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
            kv_cache_dtypes: vec![
                (
                    KvCacheDtype::Auto.as_str().to_owned(),
                    "auto — 16-bit, whatever the weight precision".to_owned(),
                ),
                (
                    KvCacheDtype::Fp8.as_str().to_owned(),
                    "fp8 — half the memory per token".to_owned(),
                ),
            ],
            data_boundaries: plain(DataBoundary::ALL.iter().map(|d| d.as_str())),
            allocation_boundaries: plain(AllocationBoundary::ALL.iter().map(|a| a.as_str())),
            cost_units: plain(CostUnit::ALL.iter().map(|c| c.as_str())),
            catalog_models: sizing::models()
                .iter()
                .map(|m| (m.hf_id.clone(), format!("{} ({} B)", m.name, m.params_b)))
                .collect(),
            gpus: choices::gpus(),
            target_fields: TARGET_FIELDS
                .iter()
                .map(|f| (format!("targets.{f}"), target_label(f)))
                .collect(),
            arch_fields: &ARCH_FIELDS,
        }
    }

    fn value(&self, field: &str) -> &str {
        self.values.get(field).map(String::as_str).unwrap_or("")
    }

    fn error(&self, field: &str) -> &str {
        match self.errors.get(field) {
            Some(e) => e,
            None if field == "model_config" && !self.config_errors().is_empty() => "has problems, listed below",
            None => "",
        }
    }

    /// Problems inside the pasted config.json (`model_config.text_config.x`): no input of
    /// their own, so they are listed under it.
    fn config_errors(&self) -> Vec<(&str, &str)> {
        let mut out: Vec<(&str, &str)> = self
            .errors
            .iter()
            .filter(|(f, _)| f.starts_with("model_config."))
            .map(|(f, m)| (f.as_str(), m.as_str()))
            .collect();
        out.sort();
        out
    }

    fn is(&self, field: &str, choice: &str) -> bool {
        self.value(field) == choice
    }

    fn checked(&self, field: &str) -> bool {
        matches!(self.value(field), "on" | "true" | "1" | "yes")
    }
}

fn default_values() -> HashMap<String, String> {
    HashMap::from([
        ("workload_kind".to_owned(), "realtime-inference".to_owned()),
        ("precision".to_owned(), "bf16".to_owned()),
        ("kv_cache_dtype".to_owned(), "auto".to_owned()),
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
            // An oversized config.json is not sent back into the page (megabytes in a textarea):
            // its error says what was wrong; every other field keeps what was typed.
            if page
                .values
                .get("model_config")
                .is_some_and(|v| v.len() > MAX_MODEL_CONFIG_BYTES)
            {
                page.values.insert("model_config".into(), String::new());
                if let Some(message) = page.errors.get_mut("model_config") {
                    message.push_str("; the file is not kept: choose or paste the model's own config.json");
                }
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
            let brief = service::create_brief(&state.pool, &fields, &user.principal()).await?;
            Ok(Redirect::to(&format!("/briefs/{}", brief.id)).into_response())
        }
        Err(page) => form_answer(&page),
    }
}

async fn edit_form(State(state): State<AppState>, user: PageUser, path: BriefPath) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    briefs::may_edit(&state.pool, &user.principal(), path.id).await?;
    let brief = path.load(&state).await?;
    render(&BriefFormPage::new(
        &user,
        &format!("Edit {}", brief.fields.name),
        format!("/briefs/{}/edit", brief.id),
        brief.fields.form_values(),
    ))
}

async fn update(
    State(state): State<AppState>,
    BriefPath { id }: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    user.require(Role::Engineer)?;
    briefs::may_edit(&state.pool, &user.principal(), id).await?;
    let page = BriefFormPage::new(&user, "Edit brief", format!("/briefs/{id}/edit"), values);
    match check_form(page) {
        Ok(fields) => {
            service::replace_brief(&state.pool, id, &fields, &user.principal()).await?;
            Ok(Redirect::to(&format!("/briefs/{id}")).into_response())
        }
        Err(page) => form_answer(&page),
    }
}
