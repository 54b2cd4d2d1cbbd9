//! Collects what the decision reads for one brief: the brief, its sizing, the evaluated card, the
//! newest metrics and the ledger. A handful of indexed queries; never every evidence row.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::{
    decision::{BriefFacts, CriterionOutcome, DecisionInputs, LedgerFacts, Status},
    repo,
};
use crate::{
    acceptance::{
        evaluate::{CardEvaluation, Status as EvalStatus},
        model::Card,
        service::{self as cards, StaleCriterion},
    },
    briefs::model::Brief,
    error::AppError,
    ledger::{self, model::LedgerSummary},
    sizing::Sizing,
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
};

/// Metrics read by rules that apply whether or not the card names them.
pub const RULE_METRICS: [&str; 6] = [
    "dcgm.diag.passed",
    "checkpoint.restore_ok",
    "serving.preemptions_total",
    "serving.kv_cache_usage_max_pct",
    "serving.queue_time_p95_ms",
    "serving.e2e_p95_ms",
];

/// Everything the review page shows of one trial besides its decision.
#[derive(Clone)]
pub struct ReviewContext {
    pub inputs: DecisionInputs,
    pub sizing: Sizing,
    /// The trial under review.
    pub trial: Trial,
    /// Its allocation (the sizing's suggestion when it names no GPU).
    pub allocation: Option<Allocation>,
    /// The GPU under test.
    pub trial_gpu: String,
    /// The average billed rate per GPU-hour, when the ledger has accelerator lines.
    pub ledger_rate: Option<Decimal>,
    /// Criteria of a saved card set for another allocation than this trial's.
    pub stale: Vec<StaleCriterion>,
}

/// Gathers what the decision reads for every trial of `brief`, in trial order.
pub async fn gather(state: &AppState, brief: &Brief) -> Result<Vec<ReviewContext>, AppError> {
    let sizing = brief.fields.sizing();
    let (trials, card) = tokio::try_join!(trials::list(state, brief.id), async {
        Ok(cards::current_card(&state.pool, brief).await?)
    })?;
    let mut out = Vec::with_capacity(trials.len());
    for trial in trials {
        out.push(gather_trial(state, brief, &sizing, &card, trial).await?);
    }
    Ok(out)
}

/// What the decision reads for one trial: its allocation, its card evaluation, its newest rule
/// metrics and its ledger.
pub async fn gather_trial(
    state: &AppState,
    brief: &Brief,
    sizing: &Sizing,
    card: &Card,
    trial: Trial,
) -> Result<ReviewContext, AppError> {
    let allocation = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, sizing);
    let (trial_gpu, sized_count, current_units) = match &allocation {
        Some(a) => (a.gpu.model.clone(), a.sized_count(sizing), a.count),
        None => (String::new(), 1, 1),
    };
    let keys: Vec<String> = RULE_METRICS.iter().map(|k| (*k).to_owned()).collect();
    // Independent reads side by side. The ledger summary is read once: the card's derived
    // `ledger.cost_per_job` and the decision's ledger facts share it.
    let (summary, metrics) = tokio::try_join!(
        ledger::service::summary(state, trial.id, &brief.fields.currency),
        async { Ok(repo::newest_metrics(&state.pool, trial.id, &keys).await?) },
    )?;
    let derived = cards::derived_figures_from(brief, &summary);
    let card = cards::evaluate_for_trial(&state.pool, brief, card, trial.id, allocation.as_ref(), &derived).await?;
    let criteria = outcomes(card.evaluation);
    let (ledger, ledger_rate) = ledger_facts(&summary);
    let inputs = DecisionInputs {
        brief: BriefFacts {
            workload_kind: brief.fields.workload_kind.as_str().to_owned(),
            only_needs_model_output: brief.fields.only_needs_model_output,
            needs_host_control: brief.fields.needs_host_control,
            data_boundary: brief.fields.data_boundary.as_str().to_owned(),
            max_cost_per_job: brief.fields.max_cost_per_job,
            currency: brief.fields.currency.clone(),
            sized_count,
            current_units,
        },
        criteria,
        metrics,
        ledger,
    };
    Ok(ReviewContext {
        inputs,
        sizing: sizing.clone(),
        trial,
        allocation,
        trial_gpu,
        ledger_rate,
        stale: card.stale,
    })
}

/// The evaluated criteria as the decision reads them.
fn outcomes(evaluation: CardEvaluation) -> Vec<CriterionOutcome> {
    evaluation
        .criteria
        .into_iter()
        .map(|e| CriterionOutcome {
            key: e.criterion.key,
            op: e.criterion.op.as_str().to_owned(),
            threshold: serde_json::to_value(&e.criterion.threshold).unwrap_or(serde_json::Value::Null),
            stage: e.criterion.stage,
            required: e.criterion.required,
            status: match e.status {
                EvalStatus::Pass => Status::Pass,
                EvalStatus::Fail => Status::Fail,
                EvalStatus::Missing => Status::Missing,
                EvalStatus::NotApplicable => Status::NotApplicable,
            },
            value: e.value,
            evidence_id: e.evidence_id,
        })
        .collect()
}

/// The ledger's figures (none before the first line or output count), and its average billed
/// accelerator rate per GPU-hour.
fn ledger_facts(s: &LedgerSummary) -> (Option<LedgerFacts>, Option<Decimal>) {
    let empty = s.total.is_zero() && s.accepted_outputs == 0 && s.diagnostics.idle_hours.is_none();
    if empty {
        return (None, None);
    }
    // What the billed accelerator time cost per GPU-hour, from the summary's own figures.
    let rate = (s.accelerator_hours > Decimal::ZERO).then(|| (s.totals.accelerator / s.accelerator_hours).round_dp(4));
    let t = &s.totals;
    let totals = BTreeMap::from([
        ("accelerator".to_owned(), t.accelerator),
        ("host".to_owned(), t.host),
        ("storage".to_owned(), t.storage),
        ("network".to_owned(), t.network),
        ("support".to_owned(), t.support),
        ("license".to_owned(), t.license),
    ]);
    (
        Some(LedgerFacts {
            cost_per_job: s.cost_per_job,
            total: s.total,
            accelerator_hours: s.accelerator_hours,
            idle_hours: s.diagnostics.idle_hours,
            totals,
        }),
        rate,
    )
}
