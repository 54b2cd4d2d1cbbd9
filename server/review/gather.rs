//! Collects what the decision reads for one brief: the brief, its sizing, the evaluated card, the
//! newest metrics and the ledger. A handful of indexed queries; never every evidence row.

use std::collections::BTreeMap;

use rust_decimal::Decimal;

use super::{
    decision::{BriefFacts, CriterionOutcome, DecisionInputs, LedgerFacts, Status},
    repo,
};
use crate::{
    acceptance::{self, evaluate::Status as EvalStatus, service as cards},
    briefs::model::Brief,
    error::AppError,
    ledger::{self, model::LedgerSummary},
    sizing::Sizing,
    state::AppState,
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

/// Everything the review page shows besides the decision itself.
pub struct ReviewContext {
    pub inputs: DecisionInputs,
    pub sizing: Sizing,
    /// The GPU under test and its count.
    pub trial_gpu: String,
    /// The average billed rate per GPU-hour, when the ledger has accelerator lines.
    pub ledger_rate: Option<Decimal>,
}

/// The GPU and count under test (the same allocation the default card tests), and the count the
/// sizing says that GPU needs.
pub fn trial_allocation(brief: &Brief, sizing: &Sizing) -> (String, u32, u32) {
    match acceptance::defaults::trial_allocation(&brief.fields, sizing) {
        Some((gpu, current)) => {
            let sized = sizing
                .options
                .iter()
                .find(|o| o.gpu == gpu.model)
                .map(|o| o.count)
                .unwrap_or(current);
            (gpu.model.clone(), sized, current)
        }
        None => (String::new(), 1, 1),
    }
}

pub async fn gather(state: &AppState, brief: &Brief) -> Result<ReviewContext, AppError> {
    let sizing = brief.fields.sizing();
    let (trial_gpu, sized_count, current_units) = trial_allocation(brief, &sizing);
    let keys: Vec<String> = RULE_METRICS.iter().map(|k| (*k).to_owned()).collect();
    // Independent reads side by side. The ledger summary is read once: the card's derived
    // `ledger.cost_per_job` and the decision's ledger facts share it.
    let (summary, card, metrics) = tokio::try_join!(
        ledger::service::summary(state, brief.id, &brief.fields.currency),
        async { Ok(cards::current_card(&state.pool, brief).await?) },
        async { Ok(repo::newest_metrics(&state.pool, brief.id, &keys).await?) },
    )?;
    let criteria: Vec<CriterionOutcome> = card_outcomes(state, brief, &card, &summary).await?;
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
        sizing,
        trial_gpu,
        ledger_rate,
    })
}

/// The current card's criteria, evaluated over the newest evidence (acceptance module).
async fn card_outcomes(
    state: &AppState,
    brief: &Brief,
    card: &acceptance::Card,
    summary: &LedgerSummary,
) -> Result<Vec<CriterionOutcome>, AppError> {
    let derived = cards::derived_figures_from(brief, summary);
    let evaluation = cards::evaluate_card(&state.pool, brief, &card.criteria, &derived).await?;
    Ok(evaluation
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
            },
            value: e.value,
            evidence_id: e.evidence_id,
        })
        .collect())
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
