//! The card use cases, the door other domains use: the card in force for a brief, its evaluation over
//! the newest evidence and the derived figures (cost per job from the ledger, manifest lint errors).

use std::collections::HashMap;

use serde_json::{json, Value};
use sqlx::{PgConnection, PgPool};

use serde::Serialize;
use uuid::Uuid;

use super::{
    defaults::{default_card_for, default_card_of, depends_on_allocation, needs_several_gpus},
    evaluate::{compare, evaluate_at, CardEvaluation, MetricsSnapshot, OperatingLoad},
    manifest_lint,
    model::{self, Card, Criterion, Threshold},
    repo,
};
use crate::{
    briefs::model::Brief,
    evidence::load_points::{
        is_load_test_key, load_points, operating_point, LoadPoint, Operating, DEFAULT_ATTAINMENT_TARGET,
    },
    ids::{BriefId, TokenId, TrialId},
    ledger::{model::LedgerSummary, service as ledger},
    trials::model::Allocation,
};

/// Load tests read per trial for its load points: the newest ones; a sweep is usually one file.
const LOAD_TESTS_READ: i64 = 50;

pub async fn current_card(db: impl sqlx::PgExecutor<'_>, brief: &Brief) -> Result<Card, sqlx::Error> {
    Ok(match repo::current(db, brief.id).await? {
        Some(r) => Card {
            revision: r.revision,
            is_default: false,
            criteria: r.criteria,
            created_by: Some(r.created_by),
            created_at: Some(r.created_at),
            allocation: r.allocation,
        },
        None => default_card_of(brief),
    })
}

/// The newest revision of the brief's card saved after `since` by `email` or through one of the
/// tokens `jtis` (separation of duties: who changed the card does not approve its result).
pub async fn revision_saved_by(
    db: impl sqlx::PgExecutor<'_>,
    brief: BriefId,
    since: Option<chrono::DateTime<chrono::Utc>>,
    email: &str,
    jtis: &[TokenId],
) -> Result<Option<i32>, sqlx::Error> {
    repo::revision_saved_by(db, brief, since, email, jtis).await
}

/// The evidence keys `criteria` name (not the derived ones), each once.
fn evidence_keys(criteria: &[Criterion]) -> Vec<String> {
    let mut keys: Vec<String> = criteria
        .iter()
        .filter(|c| !model::is_derived(&c.key))
        .map(|c| c.key.clone())
        .collect();
    keys.sort();
    keys.dedup();
    keys
}

/// The newest value per (key, stage) in one trial of every evidence key the card names, in one query.
pub async fn snapshot(
    db: impl sqlx::PgExecutor<'_>,
    trial: TrialId,
    criteria: &[Criterion],
) -> Result<MetricsSnapshot, sqlx::Error> {
    let keys = evidence_keys(criteria);
    if keys.is_empty() {
        return Ok(MetricsSnapshot::default());
    }
    Ok(MetricsSnapshot::from_observations(
        crate::evidence::service::newest_metrics(db, trial, &keys).await?,
    ))
}

/// The derived figures of one trial: its ledger's cost per job, and the brief's manifest lint.
pub async fn derived_figures(
    pool: &PgPool,
    brief: &Brief,
    trial: TrialId,
) -> Result<HashMap<String, Value>, sqlx::Error> {
    let ledger = ledger::summary_from_pool(pool, trial, &brief.fields.currency).await?;
    Ok(derived_figures_from(brief, &ledger))
}

/// Figures computed outside the evidence table, by key: `ledger.cost_per_job` from the trial's
/// ledger (a decimal as a JSON number; absent when undefined, so the criterion stays missing) and
/// `manifest.lint_errors` when the brief has a manifest.
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

/// A criterion of a saved card whose threshold was set for another allocation than the trial's.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StaleCriterion {
    pub key: String,
    pub stage: u8,
    /// The card's threshold.
    pub saved: Threshold,
    /// What the default card asks of this trial's allocation.
    pub for_this_trial: Threshold,
}

/// The card as it applies to one trial: the criteria in force, their evaluation over the trial's
/// evidence, and the allocation-dependent criteria a saved card set for another allocation.
#[derive(Debug, Clone)]
pub struct TrialCard {
    pub criteria: Vec<Criterion>,
    pub evaluation: CardEvaluation,
    pub stale: Vec<StaleCriterion>,
    /// The trial's load points and the one its stage-3 serving criteria were judged at.
    pub load: TrialLoad,
}

/// A trial's load points and its operating point (docs/trials.md, "Load points").
#[derive(Debug, Clone, Default)]
pub struct TrialLoad {
    pub points: Vec<LoadPoint>,
    pub operating: Option<Operating>,
    /// The card's attainment target (`serving.slo_attainment` ≥ …), else the default 95 %.
    pub attainment_target: f64,
}

impl TrialLoad {
    pub fn operating_point(&self) -> Option<&LoadPoint> {
        self.points.get(self.operating?.index)
    }

    /// The trial's load points and its operating point for `criteria`: the attainment target and
    /// the required stage-3 latency criteria decide which point qualifies.
    pub fn choose(points: Vec<LoadPoint>, criteria: &[Criterion]) -> Self {
        let attainment_target = attainment_target(criteria);
        let latency: Vec<&Criterion> = criteria
            .iter()
            .filter(|c| c.required && c.stage == 3 && c.key.ends_with("_ms") && is_load_test_key(&c.key))
            .collect();
        let passes = |p: &LoadPoint| {
            latency
                .iter()
                .all(|c| p.metrics.get(&c.key).is_none_or(|v| compare(c, v).unwrap_or(false)))
        };
        let operating = operating_point(&points, attainment_target, &passes);
        Self {
            points,
            operating,
            attainment_target,
        }
    }
}

/// The card's attainment target (`serving.slo_attainment` ≥ or > a share), else 95 %.
pub fn attainment_target(criteria: &[Criterion]) -> f64 {
    criteria
        .iter()
        .filter(|c| c.key == "serving.slo_attainment" && matches!(c.op.as_str(), "ge" | "gt"))
        .find_map(|c| match c.threshold {
            Threshold::Number(t) if (0.0..=1.0).contains(&t) => Some(t),
            _ => None,
        })
        .unwrap_or(DEFAULT_ATTAINMENT_TARGET)
}

/// Which criteria apply to a trial: a default card is derived for the trial's allocation (its GPU
/// count and NCCL floor). A saved card keeps its thresholds, except the allocation-dependent ones
/// the person left as generated for the allocation it was saved with: those follow this trial's
/// allocation (after the brief's GPU under test changes, the card does not keep the old one).
/// Allocation-dependent thresholds the person typed, and differing from what this allocation would
/// get, are kept and reported stale. Collectives and links are `n/a` on a single GPU.
/// A card saved before the GPU count was asked of each machine holds the whole allocation's
/// count (16 for two nodes of eight), which one machine's listing can never show: that value is the
/// old default, not a person's choice, and follows the rule of today.
fn whole_allocation_count(card: &Card, c: &Criterion) -> bool {
    let Some((gpu, count)) = &card.allocation else {
        return false;
    };
    let Some(spec) = crate::sizing::gpu_by_name(gpu) else {
        return false;
    };
    let whole = u32::try_from(*count).ok().map(|n| n * spec.devices_per_card);
    c.key == "gpu.count" && c.stage == 1 && whole.is_some_and(|w| c.threshold == Threshold::Number(f64::from(w)))
}

pub fn criteria_for_trial(
    brief: &Brief,
    card: &Card,
    alloc: Option<&Allocation>,
) -> (Vec<Criterion>, Vec<StaleCriterion>) {
    let derived = default_card_for(&brief.fields, alloc.map(|a| (a.gpu, a.count)));
    if card.is_default {
        return (derived, Vec::new());
    }
    let generated_at_save = card
        .allocation
        .as_ref()
        .and_then(|(gpu, count)| Some((crate::sizing::gpu_by_name(gpu)?, u32::try_from(*count).ok()?)))
        .map(|saved| default_card_for(&brief.fields, Some(saved)));
    let same = |a: &Criterion, b: &Criterion| a.key == b.key && a.stage == b.stage;
    let criteria: Vec<Criterion> = card
        .criteria
        .iter()
        .map(|c| {
            let ours = derived.iter().find(|d| same(d, c));
            let untouched = generated_at_save
                .as_ref()
                .and_then(|g| g.iter().find(|d| same(d, c)))
                .is_some_and(|g| g.threshold == c.threshold)
                || whole_allocation_count(card, c);
            match ours {
                Some(ours) if depends_on_allocation(&c.key) && untouched => Criterion {
                    threshold: ours.threshold.clone(),
                    why: ours.why.clone(),
                    ..c.clone()
                },
                _ => c.clone(),
            }
        })
        .collect();
    // A threshold typed for the allocation the card was saved with is not stale on that allocation.
    let same_allocation = match (&card.allocation, alloc) {
        (Some((gpu, count)), Some(a)) => *gpu == a.gpu.model && u32::try_from(*count).ok() == Some(a.count),
        _ => false,
    };
    let stale = criteria
        .iter()
        .filter(|c| !same_allocation && depends_on_allocation(&c.key))
        .filter_map(|c| {
            let ours = derived.iter().find(|d| d.key == c.key && d.stage == c.stage)?;
            (ours.threshold != c.threshold).then(|| StaleCriterion {
                key: c.key.clone(),
                stage: c.stage,
                saved: c.threshold.clone(),
                for_this_trial: ours.threshold.clone(),
            })
        })
        .collect();
    (criteria, stale)
}

/// Evaluates the card for one trial with the caller's derived figures.
pub async fn evaluate_for_trial(
    pool: &PgPool,
    brief: &Brief,
    card: &Card,
    trial: TrialId,
    alloc: Option<&Allocation>,
    derived: &HashMap<String, Value>,
) -> Result<TrialCard, sqlx::Error> {
    let (criteria, stale) = criteria_for_trial(brief, card, alloc);
    let (snap, tests) = tokio::try_join!(
        snapshot(pool, trial, &criteria),
        crate::evidence::service::load_tests(pool, trial, LOAD_TESTS_READ),
    )?;
    Ok(trial_card(criteria, stale, snap, tests, alloc, derived))
}

/// [`evaluate_for_trial`] on the caller's connection: inside its transaction, its snapshot (the
/// verdict's review reads everything under the brief's lock).
pub async fn evaluate_for_trial_in(
    conn: &mut PgConnection,
    brief: &Brief,
    card: &Card,
    trial: TrialId,
    alloc: Option<&Allocation>,
    derived: &HashMap<String, Value>,
) -> Result<TrialCard, sqlx::Error> {
    let (criteria, stale) = criteria_for_trial(brief, card, alloc);
    let snap = snapshot(&mut *conn, trial, &criteria).await?;
    let tests = crate::evidence::service::load_tests(&mut *conn, trial, LOAD_TESTS_READ).await?;
    Ok(trial_card(criteria, stale, snap, tests, alloc, derived))
}

/// The card as it applies to one trial, from what was read of its evidence.
fn trial_card(
    criteria: Vec<Criterion>,
    stale: Vec<StaleCriterion>,
    snap: MetricsSnapshot,
    tests: Vec<(Uuid, serde_json::Map<String, Value>)>,
    alloc: Option<&Allocation>,
    derived: &HashMap<String, Value>,
) -> TrialCard {
    let ids: Vec<Uuid> = tests.iter().map(|(id, _)| *id).collect();
    let points = tests.iter().flat_map(|(id, m)| load_points(*id, m)).collect();
    let load = TrialLoad::choose(points, &criteria);
    let operating = load.operating_point().map(|point| OperatingLoad {
        point,
        load_tests: &ids,
    });
    let single_gpu = alloc.is_some_and(|a| a.count * a.gpu.devices_per_card <= 1);
    let evaluation = evaluate_at(&criteria, &snap, derived, operating.as_ref(), &|c| {
        single_gpu && needs_several_gpus(&c.key)
    });
    TrialCard {
        criteria,
        evaluation,
        stale,
        load,
    }
}

/// The current card of `brief` evaluated for one trial on the evidence received after `since`
/// only (a re-validation after an approval): each figure's newest value since then, and the load
/// points of the newest run's load tests only, so neither the approved run's good load point nor
/// an earlier re-run's masks a worse one. Derived figures are the ledger's as they stand.
pub async fn evaluate_trial_since(
    pool: &PgPool,
    brief: &Brief,
    trial: TrialId,
    alloc: Option<&Allocation>,
    since: chrono::DateTime<chrono::Utc>,
) -> Result<TrialCard, sqlx::Error> {
    let card = current_card(pool, brief).await?;
    let derived = derived_figures(pool, brief, trial).await?;
    let (criteria, stale) = criteria_for_trial(brief, &card, alloc);
    let keys = evidence_keys(&criteria);
    let observations = if keys.is_empty() {
        Vec::new()
    } else {
        crate::evidence::service::newest_metrics(pool, trial, &keys).await?
    };
    let snap = MetricsSnapshot::from_observations(observations.into_iter().filter(|o| o.received_at > since));
    let tests = crate::evidence::service::newest_run_load_tests(pool, trial, since, LOAD_TESTS_READ).await?;
    Ok(trial_card(criteria, stale, snap, tests, alloc, &derived))
}

/// The current card of `brief`, evaluated for one trial over its newest evidence and derived figures.
pub async fn evaluate_trial(
    pool: &PgPool,
    brief: &Brief,
    trial: TrialId,
    alloc: Option<&Allocation>,
) -> Result<TrialCard, sqlx::Error> {
    let card = current_card(pool, brief).await?;
    let derived = derived_figures(pool, brief, trial).await?;
    evaluate_for_trial(pool, brief, &card, trial, alloc, &derived).await
}
