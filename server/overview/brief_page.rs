//! The brief page (`/briefs/{id}`): the brief, its sizing, the card and its stages, evidence, ledger
//! and readiness. It composes the sections each domain's pages module exports.

use askama::Template;
use axum::{extract::State, response::Response};

use uuid::Uuid;

use serde::Deserialize;

use crate::{
    acceptance::pages as card_pages,
    briefs::{
        model::{target_label, Brief, BriefFields, TARGET_FIELDS},
        service as briefs,
    },
    error::AppError,
    evidence::pages::{self as evidence_pages, EvidenceListRow},
    ledger::pages as ledger_pages,
    money,
    prices::service as prices,
    review::gather::{self as review_gather, TrialKv},
    sizing::Sizing,
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
    web::{
        auth::PageUser,
        extract::{ApiQuery, Path},
        page::{render, PageContext, PageError, PageResult},
    },
};

#[derive(Template)]
#[template(path = "overview/brief.html")]
struct BriefPage {
    ctx: PageContext,
    brief: Brief,
    sizing: Sizing,
    brief_id: String,
    /// The sizing table is ordered by price.
    by_price: bool,
    trials: Vec<TrialRow>,
    /// The trial whose card, evidence and ledger the page shows.
    trial_name: String,
    several_trials: bool,
    facts: Vec<(&'static str, String)>,
    evidence: Vec<EvidenceListRow>,
    acceptance: card_pages::BriefSections,
    ledger: ledger_pages::LedgerSection,
    /// The selected trial's predicted KV-cache capacity beside vLLM's logged one.
    kv: Option<TrialKv>,
}

fn brief_facts(f: &BriefFields) -> Vec<(&'static str, String)> {
    let opt = |v: &Option<String>| v.clone().unwrap_or_else(|| "—".to_owned());
    let given_by = match (&f.model_config, &f.catalog_model) {
        (Some(_), _) => "from config.json",
        (None, Some(_)) => "from catalogue",
        (None, None) => "—",
    };
    let arch = |v: Option<i32>| v.map(|n| n.to_string()).unwrap_or_else(|| given_by.to_owned());
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
                _ => "the sizing's suggestion (see Trials)".to_owned(),
            },
        ),
    ]);
    facts
}

/// One trial as the brief page lists it.
struct TrialRow {
    id: String,
    name: String,
    provider: String,
    allocation: String,
    suggested: bool,
    under_sized: bool,
    billing: &'static str,
    rate: String,
    status: &'static str,
    rerun_of: Option<String>,
    selected: bool,
}

fn trial_rows(trials: &[Trial], sizing: &Sizing, selected: Uuid, currency: &str) -> Vec<TrialRow> {
    trials
        .iter()
        .map(|t| {
            let alloc = Allocation::resolve(t.fields.gpu.as_deref(), t.fields.gpu_count, sizing);
            TrialRow {
                id: t.id.to_string(),
                name: t.fields.name.clone(),
                provider: if t.fields.provider.is_empty() {
                    "—".to_owned()
                } else {
                    t.fields.provider.clone()
                },
                allocation: alloc.as_ref().map(Allocation::label).unwrap_or_else(|| "—".to_owned()),
                suggested: alloc.as_ref().is_some_and(|a| a.suggested),
                under_sized: alloc.as_ref().is_some_and(|a| a.under_sized),
                billing: t.fields.billing.as_str(),
                rate: t
                    .fields
                    .rate_per_gpu_hour
                    .map(|r| format!("{} {} per GPU-hour", money::amount(r), t.fields.currency.as_str()))
                    .unwrap_or_else(|| format!("— ({currency})")),
                status: t.fields.status.as_str(),
                rerun_of: t
                    .fields
                    .rerun_of
                    .and_then(|r| trials.iter().find(|o| o.id == r))
                    .map(|o| o.fields.name.clone()),
                selected: t.id == selected,
            }
        })
        .collect()
}

/// `?trial=`: which trial's card, evidence and ledger the page shows (the first by default).
#[derive(Deserialize)]
pub struct BriefPageQuery {
    trial: Option<Uuid>,
    /// `price`: the sizing table by its cheapest price.
    sizing: Option<String>,
}

pub async fn brief_page(
    State(state): State<AppState>,
    user: PageUser,
    Path(id): Path<Uuid>,
    ApiQuery(q): ApiQuery<BriefPageQuery>,
) -> PageResult<Response> {
    let brief = briefs::load(&state.pool, id).await?;
    let by_price = q.sizing.as_deref() == Some("price");
    let sizing = prices::priced(&state, brief.fields.sizing(), &brief.fields.currency, by_price).await?;
    let facts = brief_facts(&brief.fields);
    let all = trials::list(&state, id).await?;
    let trial = match q.trial {
        Some(t) => all.iter().find(|x| x.id == t).ok_or(AppError::NotFound("trial"))?,
        None => &all[0],
    };
    // The three sections are independent reads: run them side by side, so the page waits for the
    // slowest instead of the sum (it matters when ingest keeps the database busy).
    let (evidence, acceptance, ledger, kv) = tokio::try_join!(
        async { Ok::<_, PageError>(evidence_pages::brief_rows(&state, id, trial.id).await?) },
        card_pages::brief_sections(&state, &brief, trial.id),
        async {
            Ok(ledger_pages::section(&state, brief.id, (trial.id, &trial.fields.name), &brief.fields.currency).await?)
        },
        async { Ok(review_gather::trial_kv_check(&state, &brief, trial).await?) },
    )?;
    render(&BriefPage {
        ctx: (&user).into(),
        trials: trial_rows(&all, &sizing, trial.id, &brief.fields.currency),
        trial_name: trial.fields.name.clone(),
        several_trials: all.len() > 1,
        brief_id: brief.id.to_string(),
        by_price,
        brief,
        sizing,
        facts,
        evidence,
        acceptance,
        ledger,
        kv,
    })
}
