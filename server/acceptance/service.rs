//! The card use cases, the door other domains use: the card in force for a brief, its evaluation over
//! the newest evidence and the derived figures (cost per job from the ledger, manifest lint errors).

use std::collections::HashMap;

use serde_json::{json, Value};
use sqlx::PgPool;

use super::{
    defaults::default_card_of,
    evaluate::{evaluate, CardEvaluation, MetricsSnapshot},
    manifest_lint,
    model::{self, Card, Criterion},
    repo,
};
use crate::{briefs::model::Brief, ledger::model::LedgerSummary, ledger::service as ledger};

pub async fn current_card(pool: &PgPool, brief: &Brief) -> Result<Card, sqlx::Error> {
    Ok(match repo::current(pool, brief.id).await? {
        Some(r) => Card {
            revision: r.revision,
            is_default: false,
            criteria: r.criteria,
            created_by: Some(r.created_by),
            created_at: Some(r.created_at),
        },
        None => default_card_of(brief),
    })
}

/// The newest value per (key, stage) of every evidence key the card names, in one query.
pub async fn snapshot(pool: &PgPool, brief: &Brief, criteria: &[Criterion]) -> Result<MetricsSnapshot, sqlx::Error> {
    let mut keys: Vec<String> = criteria
        .iter()
        .filter(|c| !model::is_derived(&c.key))
        .map(|c| c.key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    if keys.is_empty() {
        return Ok(MetricsSnapshot::default());
    }
    Ok(MetricsSnapshot::from_observations(
        repo::newest_metrics(pool, brief.id, &keys).await?,
    ))
}

/// Figures computed outside the evidence table, by key. Today: `manifest.lint_errors` when the
/// brief has a manifest. `ledger.cost_per_job` is left to the ledger module: whoever merges it
/// inserts it here (a decimal as a JSON number; absent when undefined, so the criterion stays missing).
pub async fn derived_figures(pool: &PgPool, brief: &Brief) -> Result<HashMap<String, Value>, sqlx::Error> {
    let ledger = ledger::summary_from_pool(pool, brief.id, &brief.fields.currency).await?;
    Ok(derived_figures_from(brief, &ledger))
}

/// [`derived_figures`] from a ledger summary the caller already has (the review reads it anyway).
pub fn derived_figures_from(brief: &Brief, ledger: &LedgerSummary) -> HashMap<String, Value> {
    let mut derived = HashMap::new();
    if let Some(cost) = ledger.cost_per_job {
        // Compared with a numeric threshold; the exact decimal stays in the ledger and the review.
        use rust_decimal::prelude::ToPrimitive;
        derived.insert(model::COST_PER_JOB.to_owned(), json!(cost.to_f64()));
    }
    if let Some(manifest) = &brief.fields.k8s_manifest {
        derived.insert(
            model::LINT_ERRORS.to_owned(),
            json!(manifest_lint::lint(manifest).error_count()),
        );
    }
    derived
}

/// The current card of `brief`, evaluated over its newest evidence and derived figures.
pub async fn evaluate_brief(pool: &PgPool, brief: &Brief) -> Result<CardEvaluation, sqlx::Error> {
    let card = current_card(pool, brief).await?;
    let derived = derived_figures(pool, brief).await?;
    evaluate_card(pool, brief, &card.criteria, &derived).await
}

/// Evaluates any list of criteria for `brief` with the caller's derived figures.
pub async fn evaluate_card(
    pool: &PgPool,
    brief: &Brief,
    criteria: &[Criterion],
    derived: &HashMap<String, Value>,
) -> Result<CardEvaluation, sqlx::Error> {
    let snap = snapshot(pool, brief, criteria).await?;
    Ok(evaluate(criteria, &snap, derived))
}
