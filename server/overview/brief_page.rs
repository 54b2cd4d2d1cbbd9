//! The brief page (`/briefs/{id}`): the brief, its sizing, the card and its stages, evidence, ledger
//! and readiness. It composes the sections each domain's pages module exports.

use askama::Template;
use axum::{extract::State, response::Response};

use uuid::Uuid;

use crate::{
    acceptance::pages as card_pages,
    briefs::{
        model::{target_label, Brief, BriefFields, TARGET_FIELDS},
        service as briefs,
    },
    evidence::pages::{self as evidence_pages, EvidenceListRow},
    ledger::pages as ledger_pages,
    sizing::Sizing,
    state::AppState,
    web::{
        auth::PageUser,
        extract::Path,
        page::{render, PageContext, PageError, PageResult},
    },
};

#[derive(Template)]
#[template(path = "overview/brief.html")]
struct BriefPage {
    ctx: PageContext,
    brief: Brief,
    sizing: Sizing,
    facts: Vec<(&'static str, String)>,
    evidence: Vec<EvidenceListRow>,
    acceptance: card_pages::BriefSections,
    ledger: ledger_pages::LedgerSection,
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

pub async fn brief_page(State(state): State<AppState>, user: PageUser, Path(id): Path<Uuid>) -> PageResult<Response> {
    let brief = briefs::load(&state.pool, id).await?;
    let sizing = brief.fields.sizing();
    let facts = brief_facts(&brief.fields);
    // The three sections are independent reads: run them side by side, so the page waits for the
    // slowest instead of the sum (it matters when ingest keeps the database busy).
    let (evidence, acceptance, ledger) = tokio::try_join!(
        async { Ok::<_, PageError>(evidence_pages::brief_rows(&state, id).await?) },
        card_pages::brief_sections(&state, &brief),
        async { Ok(ledger_pages::section(&state, brief.id, &brief.fields.currency).await?) },
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
