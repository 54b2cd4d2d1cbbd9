//! Collects what the decision reads for one brief: the brief, its sizing, the evaluated card, the
//! newest metrics and the ledger. A handful of indexed queries; never every evidence row.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use uuid::Uuid;

use super::{
    decision::{BriefFacts, CriterionOutcome, DecisionInputs, LedgerFacts, MetricFact, Status},
    money::{self, money_facts, LoadPoint, MoneyFacts, MoneyInputs, Rate, RateSource},
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
    prices::{
        model::{cheapest, quote, Quote, StoredPrice},
        service as prices,
    },
    sizing::{
        kv_check::{kv_check, KvCheck, KvMeasured},
        Sizing,
    },
    state::AppState,
    trials::{
        model::{Allocation, Trial},
        service as trials,
    },
};

/// Metrics read by rules that apply whether or not the card names them.
/// (`gpu.util_pct_avg`, dcgm-exporter's mean GPU utilization, is the utilization when the ledger
/// has no idle figure.)
pub const RULE_METRICS: [&str; 7] = [
    "dcgm.diag.passed",
    "checkpoint.restore_ok",
    "serving.preemptions_total",
    "serving.kv_cache_usage_max_pct",
    "serving.queue_time_p95_ms",
    "serving.e2e_p95_ms",
    "gpu.util_pct_avg",
];

/// Shown beside a criterion, not read by the rules: what share of the expected bus bandwidth for
/// this topology the NCCL run reached.
const SHOWN_METRICS: [&str; 2] = ["nccl.busbw_pct_of_expected", "nccl.expected_busbw_gbps"];

/// vLLM's start-up log about its KV cache: shown beside the predicted capacity.
const KV_METRICS: [&str; 4] = [
    "serving.kv_cache_tokens",
    "serving.max_concurrency",
    "serving.max_concurrency_tokens_per_request",
    "serving.gpu_memory_utilization",
];

/// Histogram estimates of each target's share, read for the money figures when no load test has
/// per-request data (not decision inputs on their own).
const ESTIMATE_METRICS: [&str; 4] = [
    "serving.slo_attainment_estimated",
    "serving.slo_attainment_ttft",
    "serving.slo_attainment_itl",
    "serving.slo_attainment_e2e",
];

/// Load tests read per trial for its load points: the newest ones; a sweep is usually one file.
const LOAD_TESTS_READ: i64 = 50;

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
    /// Figures shown beside criteria that no rule reads (the NCCL run's share of what the topology
    /// should reach).
    pub shown: BTreeMap<String, MetricFact>,
    /// Predicted KV-cache capacity of the allocation beside the one vLLM logged.
    pub kv: Option<TrialKv>,
}

/// A trial's KV-cache check and the vLLM log it measured from.
#[derive(Clone)]
pub struct TrialKv {
    pub check: KvCheck,
    pub evidence_id: Option<Uuid>,
}

impl TrialKv {
    fn from_logged(brief: &Brief, allocation: &Allocation, logged: &BTreeMap<String, MetricFact>) -> Option<Self> {
        let check = kv_check(
            &brief.fields.sizing_input(),
            allocation.gpu,
            allocation.count,
            &kv_measured(logged),
        )?;
        let evidence_id = KV_METRICS.iter().find_map(|k| logged.get(*k)).map(|m| m.evidence_id);
        Some(Self { check, evidence_id })
    }
}

/// Gathers what the decision reads for every trial of `brief`, in trial order.
pub async fn gather(state: &AppState, brief: &Brief) -> Result<Vec<ReviewContext>, AppError> {
    let sizing = brief.fields.sizing();
    let (trials, card, current_prices) = tokio::try_join!(
        trials::list(state, brief.id),
        async { Ok(cards::current_card(&state.pool, brief).await?) },
        prices::current(state),
    )?;
    let mut out = Vec::with_capacity(trials.len());
    for trial in trials {
        out.push(gather_trial(state, brief, &sizing, &card, &current_prices, trial).await?);
    }
    Ok(out)
}

/// What the decision reads for one trial: its allocation, its card evaluation, its newest rule
/// metrics, its ledger and its money per unit of work.
pub async fn gather_trial(
    state: &AppState,
    brief: &Brief,
    sizing: &Sizing,
    card: &Card,
    current_prices: &[StoredPrice],
    trial: Trial,
) -> Result<ReviewContext, AppError> {
    let allocation = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, sizing);
    let (trial_gpu, sized_count, current_units) = match &allocation {
        Some(a) => (a.gpu.model.clone(), a.sized_count(sizing), a.count),
        None => (String::new(), 1, 1),
    };
    let keys: Vec<String> = RULE_METRICS
        .iter()
        .chain(&ESTIMATE_METRICS)
        .chain(&SHOWN_METRICS)
        .chain(&KV_METRICS)
        .map(|k| (*k).to_owned())
        .collect();
    // Independent reads side by side. The ledger summary is read once: the card's derived
    // `ledger.cost_per_job` and the decision's ledger facts share it.
    let (summary, mut metrics, load_tests) = tokio::try_join!(
        ledger::service::summary(state, trial.id, &brief.fields.currency),
        async { Ok(repo::newest_metrics(&state.pool, trial.id, &keys).await?) },
        async { Ok(repo::load_tests(&state.pool, trial.id, LOAD_TESTS_READ).await?) },
    )?;
    let estimates: BTreeMap<String, MetricFact> = ESTIMATE_METRICS
        .iter()
        .filter_map(|k| metrics.remove_entry(*k))
        .collect();
    let shown: BTreeMap<String, MetricFact> = SHOWN_METRICS.iter().filter_map(|k| metrics.remove_entry(*k)).collect();
    let kv_logged: BTreeMap<String, MetricFact> = KV_METRICS.iter().filter_map(|k| metrics.remove_entry(*k)).collect();
    let kv = allocation
        .as_ref()
        .and_then(|a| TrialKv::from_logged(brief, a, &kv_logged));
    let derived = cards::derived_figures_from(brief, &summary);
    let card = cards::evaluate_for_trial(&state.pool, brief, card, trial.id, allocation.as_ref(), &derived).await?;
    let criteria = outcomes(card.evaluation);
    let (ledger, ledger_rate) = ledger_facts(&summary);
    let money = trial_money(
        brief,
        &trial,
        allocation.as_ref(),
        &criteria,
        current_prices,
        ledger_rate,
        &load_tests,
        &estimates,
    );
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
        money,
    };
    Ok(ReviewContext {
        inputs,
        sizing: sizing.clone(),
        trial,
        allocation,
        trial_gpu,
        ledger_rate,
        stale: card.stale,
        shown,
        kv,
    })
}

/// The KV-cache figures of a vLLM start-up log, from the trial's newest metrics.
pub fn kv_measured(metrics: &BTreeMap<String, MetricFact>) -> KvMeasured {
    let num = |k: &str| {
        metrics
            .get(k)
            .and_then(|m| m.value.as_f64())
            .filter(|v| v.is_finite() && *v >= 0.0)
    };
    KvMeasured {
        tokens: num("serving.kv_cache_tokens").map(|v| v as u64),
        max_concurrency: num("serving.max_concurrency"),
        tokens_per_request: num("serving.max_concurrency_tokens_per_request").map(|v| v as u64),
        gpu_memory_utilization: num("serving.gpu_memory_utilization"),
    }
}

/// The KV-cache check of one trial of `brief` (the brief page shows it without a whole review).
pub async fn trial_kv_check(state: &AppState, brief: &Brief, trial: &Trial) -> Result<Option<TrialKv>, AppError> {
    let sizing = brief.fields.sizing();
    let Some(a) = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing) else {
        return Ok(None);
    };
    let keys: Vec<String> = KV_METRICS.iter().map(|k| (*k).to_owned()).collect();
    let logged = repo::newest_metrics(&state.pool, trial.id, &keys).await?;
    Ok(TrialKv::from_logged(brief, &a, &logged))
}

/// The rate an hour of the trial's allocation costs at, most specific first: the trial's own rate;
/// a current price row of its provider, GPU and billing (region too when it names one); the
/// ledger's average billed rate; the cheapest current row of its GPU from any provider. Every
/// amount is in the brief's currency: a row in another currency is never used.
fn trial_rate(
    brief_currency: &str,
    trial: &Trial,
    allocation: Option<&Allocation>,
    current_prices: &[StoredPrice],
    ledger_rate: Option<Decimal>,
) -> Option<Rate> {
    let count = allocation.map_or(1, |a| a.count);
    if let Some(rate) = trial
        .fields
        .rate_per_gpu_hour
        .filter(|_| trial.fields.currency == brief_currency)
    {
        return Some(Rate {
            per_gpu_hour: rate,
            gpus_billed: count,
            source: RateSource::Trial,
            description: "the trial's own rate".into(),
        });
    }
    let gpu = allocation.map(|a| a.gpu.model.as_str())?;
    let provider = trial.fields.provider.trim();
    let offered = current_prices
        .iter()
        .filter(|p| {
            !provider.is_empty()
                && p.row.provider.eq_ignore_ascii_case(provider)
                && p.row.gpu == gpu
                && p.row.billing == trial.fields.billing.as_str()
                && p.row.currency == brief_currency
                && trial
                    .fields
                    .region
                    .as_deref()
                    .is_none_or(|r| r.trim().is_empty() || p.row.region.eq_ignore_ascii_case(r.trim()))
        })
        .map(|p| quote(p, count))
        .min_by(|a, b| a.per_hour.cmp(&b.per_hour));
    if let Some(q) = offered {
        return Some(Rate {
            per_gpu_hour: q.rate_per_gpu_hour,
            gpus_billed: q.gpus_billed,
            source: RateSource::PriceRow { price_id: q.price_id },
            description: quote_description(&q, "price"),
        });
    }
    if let Some(rate) = ledger_rate {
        return Some(Rate {
            per_gpu_hour: rate,
            gpus_billed: count,
            source: RateSource::Ledger,
            description: "the ledger's average billed rate".into(),
        });
    }
    cheapest(current_prices, gpu, count, brief_currency).map(|q| Rate {
        per_gpu_hour: q.rate_per_gpu_hour,
        gpus_billed: q.gpus_billed,
        source: RateSource::CheapestOffer { price_id: q.price_id },
        description: quote_description(&q, "cheapest current offer"),
    })
}

/// "Lambda's on-demand price of 2026-11-01 (lambda.ai/pricing), 8 GPUs billed".
fn quote_description(q: &Quote, what: &str) -> String {
    let mut text = format!("{}'s {} {what} of {}", q.provider, q.billing, q.valid_from);
    if !q.source.is_empty() {
        text.push_str(&format!(" ({})", q.source));
    }
    text.push_str(&format!(", {} GPUs billed", q.gpus_billed));
    text
}

/// The trial's money per unit of work (trials.md): its rate, its load points, the card's
/// attainment target and the brief's expected peak and API price. `None` while neither a rate nor
/// a load test is known.
#[allow(clippy::too_many_arguments)]
fn trial_money(
    brief: &Brief,
    trial: &Trial,
    allocation: Option<&Allocation>,
    criteria: &[CriterionOutcome],
    current_prices: &[StoredPrice],
    ledger_rate: Option<Decimal>,
    load_tests: &[(uuid::Uuid, serde_json::Map<String, serde_json::Value>)],
    estimates: &BTreeMap<String, MetricFact>,
) -> Option<MoneyFacts> {
    let currency = &brief.fields.currency;
    let rate = trial_rate(currency, trial, allocation, current_prices, ledger_rate);
    let points: Vec<LoadPoint> = load_tests
        .iter()
        .flat_map(|(id, metrics)| money::load_points(*id, metrics))
        .collect();
    let newest = load_tests
        .iter()
        .find_map(|(id, metrics)| money::headline(*id, metrics));
    if rate.is_none() && newest.is_none() && points.is_empty() {
        return None;
    }
    // Histogram shares count only when they come with the flag that says they are estimates.
    let estimated_shares = match estimates.get("serving.slo_attainment_estimated") {
        Some(flag) if flag.value == serde_json::Value::Bool(true) => estimates
            .iter()
            .filter(|(k, m)| k.as_str() != "serving.slo_attainment_estimated" && m.evidence_id == flag.evidence_id)
            .filter_map(|(_, m)| m.value.as_f64())
            .collect(),
        _ => Vec::new(),
    };
    let attainment_target = criteria
        .iter()
        .find(|c| c.key == "serving.slo_attainment" && matches!(c.op.as_str(), "ge" | "gt"))
        .and_then(|c| c.threshold.as_f64())
        .filter(|t| (0.0..=1.0).contains(t))
        .unwrap_or(money::DEFAULT_ATTAINMENT_TARGET);
    Some(money_facts(&MoneyInputs {
        rate,
        currency: currency.clone(),
        points,
        newest,
        estimated_shares,
        attainment_target,
        expected_peak_rps: brief.fields.expected_peak_rps,
        api_price_per_million_tokens: brief.fields.api_price_per_million_tokens,
    }))
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
