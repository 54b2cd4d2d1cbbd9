//! Acceptance cards, their evaluation over the evidence, the staged timeline, the readiness
//! checklist and the Kubernetes manifest lint. See docs/acceptance.md.
//!
//! For the review engine: [`current_card`], [`evaluate_brief`] (I/O) and the pure
//! [`evaluate::evaluate`] over a [`evaluate::MetricsSnapshot`] and a map of derived figures.

pub mod api;
pub mod defaults;
pub mod evaluate;
pub mod manifest_lint;
pub mod model;
pub mod pages;
pub mod readiness;
pub mod repo;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use sqlx::PgPool;

pub use evaluate::{
    evaluate, CardEvaluation, EvaluatedCriterion, MetricsSnapshot, Observation, StageEvaluation, Status,
};
pub use model::{Criterion, Op, Threshold};

use crate::briefs::model::Brief;

/// The card in force for a brief: its newest saved revision, or the generated default (revision 0).
#[derive(Debug, Clone)]
pub struct Card {
    pub revision: i32,
    pub is_default: bool,
    pub criteria: Vec<Criterion>,
    pub created_by: Option<String>,
    pub created_at: Option<DateTime<Utc>>,
}

/// The default card of a brief (never stored; revision 0).
pub fn default_card(brief: &Brief) -> Card {
    Card {
        revision: 0,
        is_default: true,
        criteria: defaults::default_card(&brief.fields, &brief.fields.sizing()),
        created_by: None,
        created_at: None,
    }
}

pub async fn current_card(pool: &PgPool, brief: &Brief) -> Result<Card, sqlx::Error> {
    Ok(match repo::current(pool, brief.id).await? {
        Some(r) => Card {
            revision: r.revision,
            is_default: false,
            criteria: r.criteria,
            created_by: Some(r.created_by),
            created_at: Some(r.created_at),
        },
        None => default_card(brief),
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
    let mut conn = pool.acquire().await?;
    let ledger = crate::ledger::repo::summary(&mut conn, brief.id, &brief.fields.currency).await?;
    Ok(derived_figures_from(brief, &ledger))
}

/// [`derived_figures`] from a ledger summary the caller already has (the review reads it anyway).
pub fn derived_figures_from(brief: &Brief, ledger: &crate::ledger::model::LedgerSummary) -> HashMap<String, Value> {
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
