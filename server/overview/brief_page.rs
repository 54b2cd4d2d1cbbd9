//! The brief page (`/briefs/{id}`): the brief, its sizing, the card and its stages, evidence, ledger
//! and readiness. It composes the sections each domain's pages module exports.

use askama::Template;
use axum::{extract::State, http::StatusCode, response::Response};

use serde::Deserialize;

use crate::{
    acceptance::pages as card_pages,
    briefs::model::{target_label, Brief, BriefFields, TARGET_FIELDS},
    error::AppError,
    evidence::pages::{self as evidence_pages, EvidenceListRow},
    figures,
    ids::TrialId,
    ledger::pages as ledger_pages,
    prices::{model::AllocationPrice, service as prices},
    review::{
        gather::{self as review_gather, TrialKv},
        summaries as review_summaries,
    },
    sizing::Sizing,
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
    web::{
        auth::{CsrfForm, PageUser},
        extract::{ApiQuery, BriefPath},
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
    /// Evidence naming another GPU model than the trial's: (evidence id, what it names).
    gpu_mismatch: Option<(String, String)>,
    summary: Summary,
}

/// The top of the brief page: what is tested on which allocation, the smallest options that fit
/// (the whole sizing table is further down), and the stages with their dates.
struct Summary {
    trial_id: String,
    trial_name: String,
    /// "8 × H200 SXM", or `None` when nothing can be tested (no GPU named and nothing fits).
    allocation: Option<String>,
    /// The trial names no GPU: the allocation is the sizing's suggestion, not a choice.
    suggested: bool,
    under_sized: bool,
    options: Vec<OptionLine>,
    fitting: usize,
    total: usize,
    stages: Vec<StageLine>,
}

/// One of the smallest fitting options.
struct OptionLine {
    label: String,
    memory: String,
    headroom: String,
    price: Option<String>,
    under_test: bool,
}

/// One stage of the timeline at the top: its status and when its evidence was taken.
struct StageLine {
    stage: u8,
    name: &'static str,
    status: &'static str,
    status_class: &'static str,
    when: String,
}

/// Options shown in the summary; the rest are in the sizing table.
const SUMMARY_OPTIONS: usize = 3;

/// A price as every page shows it: "20.80 USD/h, spot · Cloud A" — billing always named.
fn price_text(per_hour: rust_decimal::Decimal, currency: &str, billing: &str, provider: &str) -> String {
    let mut text = format!("{} {currency}/h, {billing}", figures::amount(per_hour));
    if !provider.is_empty() {
        text.push_str(&format!(" · {provider}"));
    }
    text
}

/// One line of the summary after another, in the order the page shows them.
fn summary(
    trial: &Trial,
    sizing: &Sizing,
    stages: &[card_pages::StageRow],
    times: &[review_summaries::StageTimes],
    price: Option<&AllocationPrice>,
    currency: &str,
) -> Summary {
    let alloc = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, sizing);
    let under_test = alloc.as_ref().map(|a| a.gpu.model.clone());
    let mut fitting: Vec<_> = sizing.options.iter().filter(|o| o.fits).collect();
    // Smallest first: the memory rented, as the sizing table orders it by default.
    fitting.sort_by(|a, b| (a.memory_gib * f64::from(a.count)).total_cmp(&(b.memory_gib * f64::from(b.count))));
    let mut shown: Vec<_> = fitting.iter().take(SUMMARY_OPTIONS).copied().collect();
    if let Some(gpu) = &under_test {
        if !shown.iter().any(|o| &o.gpu == gpu) {
            if let Some(o) = sizing.options.iter().find(|o| &o.gpu == gpu) {
                shown.push(o);
            }
        }
    }
    Summary {
        trial_id: trial.id.to_string(),
        trial_name: trial.fields.name.clone(),
        allocation: alloc.as_ref().map(Allocation::label),
        suggested: alloc.as_ref().is_some_and(|a| a.suggested),
        under_sized: alloc.as_ref().is_some_and(|a| a.under_sized),
        options: shown
            .into_iter()
            .map(|o| {
                let tested = alloc.as_ref().filter(|a| a.gpu.model == o.gpu);
                OptionLine {
                    // The option under test shows the trial's own count, which may differ from the
                    // smallest count that fits.
                    label: format!("{} × {}", tested.map_or(o.count, |a| a.count), o.gpu),
                    memory: format!("{:.0} GiB each", o.memory_gib),
                    headroom: match tested {
                        Some(a) if a.count != o.count => format!("the sizing needs {}", o.count),
                        _ => format!("{:.0} % headroom", o.headroom_pct),
                    },
                    // The option under test shows the trial's own price, the one the review uses;
                    // the others their cheapest offer.
                    price: match (tested, price) {
                        (Some(_), Some(p)) => {
                            Some(price_text(p.per_hour, currency, &p.billing, &p.provider) + " (the trial's price)")
                        }
                        _ => o
                            .price
                            .as_ref()
                            .map(|p| price_text(p.per_hour, &p.currency, &p.billing, &p.provider)),
                    },
                    under_test: tested.is_some(),
                }
            })
            .collect(),
        fitting: fitting.len(),
        total: sizing.options.len(),
        stages: stage_lines(stages, times),
    }
}

/// Each stage's status and when its evidence came.
fn stage_lines(stages: &[card_pages::StageRow], times: &[review_summaries::StageTimes]) -> Vec<StageLine> {
    let day = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%d").to_string();
    stages
        .iter()
        .map(|s| {
            let when = match times.iter().find(|t| t.stage == i16::from(s.stage)) {
                // Judged without an upload: stage 5's cost per job comes from the ledger.
                None if s.stage == 5 && (s.status_class == "ok" || s.status_class == "bad") => {
                    "from the ledger".to_owned()
                }
                None => "no evidence yet".to_owned(),
                Some(t) if day(t.first) == day(t.last) => {
                    format!(
                        "{} · {} upload{}",
                        day(t.last),
                        t.uploads,
                        if t.uploads == 1 { "" } else { "s" }
                    )
                }
                Some(t) => format!("{} → {} · {} uploads", day(t.first), day(t.last), t.uploads),
            };
            StageLine {
                stage: s.stage,
                name: s.name,
                status: s.status,
                status_class: s.status_class,
                when,
            }
        })
        .collect()
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
        ("Context length", figures::count(f.context_length)),
        ("Concurrency", figures::count(f.concurrency)),
        ("Layers", arch(f.num_layers)),
        ("KV heads", arch(f.num_kv_heads)),
        ("Head dim", arch(f.head_dim)),
    ];
    for field in TARGET_FIELDS {
        if let Some(v) = f.targets.get(field) {
            facts.push((target_label(field), figures::figure(v)));
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
                Some(c) => format!(
                    "{} per {}",
                    figures::with_currency(c, &f.currency),
                    f.cost_unit.as_str()
                ),
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

fn trial_rows(
    trials: &[Trial],
    prices: &[Option<AllocationPrice>],
    sizing: &Sizing,
    selected: TrialId,
    currency: &str,
) -> Vec<TrialRow> {
    trials
        .iter()
        .zip(prices)
        .map(|(t, price)| {
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
                // The trial's one price (the review's), billing named.
                rate: match price {
                    Some(p) => format!(
                        "{} {currency} per GPU-hour, {}{}",
                        figures::amount(p.per_gpu_hour),
                        p.billing,
                        if p.provider.is_empty() || p.provider == t.fields.provider {
                            String::new()
                        } else {
                            format!(" ({})", p.provider)
                        }
                    ),
                    None => format!("— ({currency})"),
                },
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
#[derive(Deserialize, Default)]
pub struct BriefPageQuery {
    trial: Option<TrialId>,
    /// `memory`: the sizing table by memory rented; otherwise by cheapest price when any option
    /// has one (fitting options first).
    sizing: Option<String>,
}

pub async fn brief_page(
    State(state): State<AppState>,
    user: PageUser,
    path: BriefPath,
    ApiQuery(q): ApiQuery<BriefPageQuery>,
) -> PageResult<Response> {
    render(&load_page(&state, &user, path, q).await?)
}

/// `POST /briefs/{id}/ledger/lines`, the brief page's "add a line" form. A line that does not
/// validate shows this page again (422) with what was typed and a message at each bad field,
/// rather than an error page that loses the input.
pub async fn add_ledger_line(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    match ledger_pages::add_line(&state, path.id, &user, &values).await? {
        Ok(stored) => Ok(stored),
        Err(form) => ledger_form_refused(&state, &user, path, form, |ledger, form| ledger.form = form).await,
    }
}

/// `POST /briefs/{id}/ledger/outputs`, the brief page's outputs form: refused figures show this
/// page again (422) with what was typed and a message at each bad field.
pub async fn set_ledger_outputs(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    match ledger_pages::set_outputs(&state, path.id, &user, &values).await? {
        Ok(stored) => Ok(stored),
        Err(form) => ledger_form_refused(&state, &user, path, form, |ledger, form| ledger.outputs_form = form).await,
    }
}

/// `POST /briefs/{id}/readiness`, a checklist item confirmed: a link that cannot be kept shows
/// this page again (422) with the link as typed and why, at the item's row.
pub async fn confirm_readiness(
    State(state): State<AppState>,
    path: BriefPath,
    CsrfForm(user, values): CsrfForm,
) -> PageResult<Response> {
    match card_pages::confirm(&state, &user, &path, &values).await? {
        Ok(stored) => Ok(stored),
        Err(refused) => {
            let mut page = load_page(&state, &user, path, BriefPageQuery::default()).await?;
            page.acceptance.refused_link = Some(refused);
            let mut response = render(&page)?;
            *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(response)
        }
    }
}

/// The brief page again (422) with a refused ledger form in its place, as typed.
async fn ledger_form_refused(
    state: &AppState,
    user: &PageUser,
    path: BriefPath,
    form: ledger_pages::LineForm,
    place: fn(&mut ledger_pages::LedgerSection, ledger_pages::LineForm),
) -> PageResult<Response> {
    let query = BriefPageQuery {
        trial: form.trial(),
        sizing: None,
    };
    let mut page = load_page(state, user, path, query).await?;
    place(&mut page.ledger, form);
    let mut response = render(&page)?;
    *response.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
    Ok(response)
}

/// The brief page's reads, side by side, then one view of them.
async fn load_page(state: &AppState, user: &PageUser, path: BriefPath, q: BriefPageQuery) -> PageResult<BriefPage> {
    let brief = path.load(state).await?;
    let id = brief.id;
    // The summary and the allocation under test read the engine's order (memory rented); only the
    // table shown is reordered by price, below.
    let sizing = prices::priced(
        state,
        brief.fields.sizing(),
        &brief.fields.currency,
        brief.fields.workload_kind,
        false,
    )
    .await?;
    let by_price = q.sizing.as_deref() != Some("memory") && sizing.options.iter().any(|o| o.price.is_some());
    let facts = brief_facts(&brief.fields);
    let all = trials::list(state, id).await?;
    let trial = match q.trial {
        Some(t) => all.iter().find(|x| x.id == t).ok_or(AppError::NotFound("trial"))?,
        None => &all[0],
    };
    // The three sections are independent reads: run them side by side, so the page waits for the
    // slowest instead of the sum (it matters when ingest keeps the database busy).
    let (evidence, acceptance, ledger, times, kv, price, mismatch) = tokio::try_join!(
        async { Ok::<_, PageError>(evidence_pages::brief_rows(state, id, trial.id).await?) },
        card_pages::brief_sections(state, &brief, trial.id),
        async {
            Ok(ledger_pages::section(state, brief.id, (trial.id, &trial.fields.name), &brief.fields.currency).await?)
        },
        async { Ok(review_summaries::stage_times(state, brief.id, trial.id).await?) },
        async { Ok(review_gather::trial_kv_check(state, &brief, trial).await?) },
        async { Ok(review_gather::trial_price(state, &brief, trial).await?) },
        async { Ok(review_gather::trial_gpu_mismatch(state, &brief, trial).await?) },
    )?;
    // Every trial's one price, as the review shows it.
    let mut prices = Vec::with_capacity(all.len());
    for t in &all {
        prices.push(if t.id == trial.id {
            price.clone()
        } else {
            review_gather::trial_price(state, &brief, t).await?
        });
    }
    let mut sizing = sizing;
    unfit_where_kv_is_short(&mut sizing, kv.as_ref());
    let summary = summary(
        trial,
        &sizing,
        &acceptance.stages,
        &times,
        price.as_ref(),
        &brief.fields.currency,
    );
    Ok(BriefPage {
        summary,
        ctx: user.into(),
        trials: trial_rows(&all, &prices, &sizing, trial.id, &brief.fields.currency),
        trial_name: trial.fields.name.clone(),
        several_trials: all.len() > 1,
        brief_id: brief.id.to_string(),
        by_price,
        brief,
        sizing: if by_price {
            let mut shown = sizing;
            crate::prices::model::order_by_price(&mut shown);
            shown
        } else {
            sizing
        },
        facts,
        evidence,
        acceptance,
        ledger,
        kv,
        gpu_mismatch: mismatch.map(|(id, named)| (id.to_string(), named)),
    })
}

/// An option marked "fits" never contradicts the KV box: when the measured KV cache of the
/// allocation under test is short at the brief's context, that option does not fit.
fn unfit_where_kv_is_short(sizing: &mut Sizing, kv: Option<&TrialKv>) {
    if let Some(check) = kv.map(|k| &k.check).filter(|c| c.short()) {
        for o in sizing
            .options
            .iter_mut()
            .filter(|o| o.gpu == check.gpu && o.count <= check.count && o.fits)
        {
            o.fits = false;
            o.load_note = Some(
                "fits on paper, but the measured KV cache of the trial is short at the brief's context (see the KV \
                 cache box)"
                    .into(),
            );
        }
    }
}
