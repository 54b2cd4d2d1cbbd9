//! Collects what the decision reads for one brief: the brief, its sizing, the evaluated card (with
//! each trial's load points and operating point), the newest metrics, the ledger and the prices.
//! A handful of indexed queries; never every evidence row.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use sqlx::{PgConnection, PgPool};
use uuid::Uuid;

use super::{
    cost_at_slo::{money_facts, ApiPrices, MoneyFacts, MoneyInputs, Rate, RateSource, ReservationRates},
    decision::{BriefFacts, CriterionOutcome, DecisionInputs, LedgerFacts, MetricFact, Status},
};
use crate::{
    acceptance::{
        evaluate::CardEvaluation,
        model::Card,
        service::{self as cards, StaleCriterion, TrialLoad},
    },
    briefs::model::Brief,
    error::AppError,
    evidence::{model::Observation, service as evidence},
    ids::TrialId,
    ledger::{self, model::LedgerSummary},
    prices::{
        model::{
            allocation_price, other_currency_rows, reserved_offer, AllocationPrice, Offer, PriceSource, StoredPrice,
        },
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

/// Histogram estimates of each target's share, read for the money figures when the operating
/// point has no per-request data (not decision inputs on their own).
const ESTIMATE_METRICS: [&str; 4] = [
    "serving.slo_attainment_estimated",
    "serving.slo_attainment_ttft",
    "serving.slo_attainment_itl",
    "serving.slo_attainment_e2e",
];

/// The GPU model the evidence names (nvidia-smi -L, dcgmi discovery): checked against the trial's.
const GPU_MODELS: &str = "gpu.models";

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
    /// The trial's one price (the same every page shows), billing named.
    pub price: Option<AllocationPrice>,
    /// Criteria of a saved card set for another allocation than this trial's.
    pub stale: Vec<StaleCriterion>,
    /// Figures shown beside criteria that no rule reads (the NCCL run's share of what the topology
    /// should reach).
    pub shown: BTreeMap<String, MetricFact>,
    /// Predicted KV-cache capacity of the allocation beside the one vLLM logged.
    pub kv: Option<TrialKv>,
    /// Current price rows of the trial's GPU in other currencies: listed, never used.
    pub other_currency: Vec<StoredPrice>,
    /// Evidence that names another GPU model than the trial's: (evidence, what it names).
    pub gpu_mismatch: Option<(Uuid, String)>,
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

/// Where the review's reads go.
pub enum Reads<'a> {
    /// The pool: independent reads side by side, so a page waits for the slowest, not the sum
    /// (docs/reliability.md).
    Pool(&'a PgPool),
    /// One connection, one statement after another: inside a transaction every read sees its
    /// snapshot (a verdict reads the review it records under the brief's lock,
    /// `briefs::service::begin_locked`).
    Tx(&'a mut PgConnection),
}

/// Gathers what the decision reads for every trial of `brief`, in trial order.
pub async fn gather(reads: &mut Reads<'_>, brief: &Brief) -> Result<Vec<ReviewContext>, AppError> {
    let sizing = brief.fields.sizing();
    let (trials, card, current_prices) = match reads {
        Reads::Pool(pool) => {
            let pool: &PgPool = pool;
            tokio::try_join!(
                trials::list_in(pool, brief.id),
                async { Ok(cards::current_card(pool, brief).await?) },
                prices::current_in(pool),
            )?
        }
        Reads::Tx(conn) => (
            trials::list_in(&mut **conn, brief.id).await?,
            cards::current_card(&mut **conn, brief).await?,
            prices::current_in(&mut **conn).await?,
        ),
    };
    let mut out = Vec::with_capacity(trials.len());
    for trial in trials {
        out.push(gather_trial(reads, brief, &sizing, &card, &current_prices, trial).await?);
    }
    Ok(out)
}

/// What the decision reads for one trial: its allocation, its card evaluation (and operating
/// point), its newest rule metrics, its ledger and its money per unit of work: the reads side by
/// side, then one struct of them.
pub async fn gather_trial(
    reads: &mut Reads<'_>,
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
    let (summary, mut metrics) = ledger_and_metrics(reads, brief, trial.id).await?;
    let estimates: BTreeMap<String, MetricFact> = ESTIMATE_METRICS
        .iter()
        .filter_map(|k| metrics.remove_entry(*k))
        .collect();
    let shown: BTreeMap<String, MetricFact> = SHOWN_METRICS.iter().filter_map(|k| metrics.remove_entry(*k)).collect();
    let kv_logged: BTreeMap<String, MetricFact> = KV_METRICS.iter().filter_map(|k| metrics.remove_entry(*k)).collect();
    let gpu_mismatch = metrics
        .remove(GPU_MODELS)
        .and_then(|m| gpu_mismatch(&trial_gpu, &m.value).map(|named| (m.evidence_id, named)));
    let kv = allocation
        .as_ref()
        .and_then(|a| TrialKv::from_logged(brief, a, &kv_logged));
    let derived = cards::derived_figures_from(brief, &summary);
    let card = match reads {
        Reads::Pool(pool) => {
            cards::evaluate_for_trial(pool, brief, card, trial.id, allocation.as_ref(), &derived).await?
        }
        Reads::Tx(conn) => {
            cards::evaluate_for_trial_in(conn, brief, card, trial.id, allocation.as_ref(), &derived).await?
        }
    };
    add_operating_e2e(&mut metrics, &card.load);
    let criteria = outcomes(card.evaluation);
    let (ledger, ledger_rate) = ledger_facts(&summary);
    let price = allocation
        .as_ref()
        .and_then(|a| price_of(current_prices, brief, &trial, a, ledger_rate));
    let money = trial_money(
        brief,
        &trial,
        allocation.as_ref(),
        price.as_ref(),
        current_prices,
        card.load,
        &estimates,
        ledger.as_ref().and_then(LedgerFacts::utilization),
    );
    let other_currency = other_currency(current_prices, &trial_gpu, &brief.fields.currency);
    let inputs = DecisionInputs {
        brief: brief_facts(brief, &trial, sized_count, current_units),
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
        price,
        stale: card.stale,
        shown,
        kv,
        other_currency,
        gpu_mismatch,
    })
}

/// The trial's ledger summary and its newest metrics of the keys the review reads, side by side
/// on the pool (in the caller's transaction one after the other). The ledger summary is read once:
/// the card's derived `ledger.cost_per_job` and the decision's ledger facts share it.
async fn ledger_and_metrics(
    reads: &mut Reads<'_>,
    brief: &Brief,
    trial_id: TrialId,
) -> Result<(LedgerSummary, BTreeMap<String, MetricFact>), AppError> {
    let keys: Vec<String> = RULE_METRICS
        .iter()
        .chain(&ESTIMATE_METRICS)
        .chain(&SHOWN_METRICS)
        .chain(&KV_METRICS)
        .chain(std::iter::once(&GPU_MODELS))
        .map(|k| (*k).to_owned())
        .collect();
    Ok(match reads {
        Reads::Pool(pool) => {
            let pool: &PgPool = pool;
            tokio::try_join!(
                ledger::service::summary_from_pool(pool, trial_id, &brief.fields.currency),
                newest_metrics(pool, trial_id, &keys),
            )?
        }
        Reads::Tx(conn) => (
            ledger::service::summary_in(conn, trial_id, &brief.fields.currency).await?,
            newest_metrics(&mut **conn, trial_id, &keys).await?,
        ),
    })
}

/// The saturation check reads the operating point's end-to-end latency like the card does.
fn add_operating_e2e(metrics: &mut BTreeMap<String, MetricFact>, load: &TrialLoad) {
    // The saturation check reads the operating point's end-to-end latency like the card does.
    if let Some(p) = load.operating_point() {
        if let Some(v) = p.metrics.get("serving.e2e_p95_ms") {
            metrics.insert(
                "serving.e2e_p95_ms".into(),
                MetricFact {
                    value: v.clone(),
                    evidence_id: p.evidence_id,
                },
            );
        }
    }
}

/// The current prices of the trial's GPU in other currencies than the brief's.
fn other_currency(current_prices: &[StoredPrice], trial_gpu: &str, currency: &str) -> Vec<StoredPrice> {
    if trial_gpu.is_empty() {
        Vec::new()
    } else {
        other_currency_rows(current_prices, trial_gpu, currency)
            .into_iter()
            .cloned()
            .collect()
    }
}

/// What the decision reads of the brief and the trial.
fn brief_facts(brief: &Brief, trial: &Trial, sized_count: u32, current_units: u32) -> BriefFacts {
    BriefFacts {
        workload_kind: brief.fields.workload_kind.as_str().to_owned(),
        only_needs_model_output: brief.fields.only_needs_model_output,
        needs_host_control: brief.fields.needs_host_control,
        data_boundary: brief.fields.data_boundary.as_str().to_owned(),
        max_cost_per_job: brief.fields.max_cost_per_job,
        currency: brief.fields.currency.clone(),
        sized_count,
        current_units,
        trial_billing: trial.fields.billing.as_str().to_owned(),
    }
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

/// The newest value of each of `keys` in one trial over all stages, with the evidence it came from
/// (the evidence domain's newest value per stage, then the newest of those per key).
async fn newest_metrics(
    db: impl sqlx::PgExecutor<'_>,
    trial: TrialId,
    keys: &[String],
) -> Result<BTreeMap<String, MetricFact>, sqlx::Error> {
    let mut newest: BTreeMap<String, Observation> = BTreeMap::new();
    for o in evidence::newest_metrics(db, trial, keys).await? {
        match newest.get(&o.key) {
            Some(current) if !o.newer_than(current) => {}
            _ => {
                newest.insert(o.key.clone(), o);
            }
        }
    }
    Ok(newest
        .into_iter()
        .map(|(key, o)| {
            let fact = MetricFact {
                value: o.value,
                evidence_id: o.evidence_id,
            };
            (key, fact)
        })
        .collect())
}

/// The KV-cache check of one trial of `brief` (the brief page shows it without a whole review).
pub async fn trial_kv_check(state: &AppState, brief: &Brief, trial: &Trial) -> Result<Option<TrialKv>, AppError> {
    let sizing = brief.fields.sizing();
    let Some(a) = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing) else {
        return Ok(None);
    };
    let keys: Vec<String> = KV_METRICS.iter().map(|k| (*k).to_owned()).collect();
    let logged = newest_metrics(&state.pool, trial.id, &keys).await?;
    Ok(TrialKv::from_logged(brief, &a, &logged))
}

/// Evidence of `trial` naming a GPU model of another family than the trial's: (evidence, what it
/// names), as the review's first screen says it (the brief page and the trial page say it too).
pub async fn trial_gpu_mismatch(
    state: &AppState,
    brief: &Brief,
    trial: &Trial,
) -> Result<Option<(Uuid, String)>, AppError> {
    let sizing = brief.fields.sizing();
    let Some(a) = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing) else {
        return Ok(None);
    };
    let mut logged = newest_metrics(&state.pool, trial.id, &[GPU_MODELS.to_owned()]).await?;
    Ok(logged
        .remove(GPU_MODELS)
        .and_then(|m| gpu_mismatch(&a.gpu.model, &m.value).map(|named| (m.evidence_id, named))))
}

/// The price of one trial of `brief` as the review shows it (the brief page and the trial page
/// show the same figure): its own rate, its provider's row, its ledger's billed rate, else the
/// cheapest offer of its GPU, billing named.
pub async fn trial_price(state: &AppState, brief: &Brief, trial: &Trial) -> Result<Option<AllocationPrice>, AppError> {
    let sizing = brief.fields.sizing();
    let Some(a) = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing) else {
        return Ok(None);
    };
    let (current, summary) = tokio::try_join!(
        prices::current(state),
        ledger::service::summary(state, trial.id, &brief.fields.currency),
    )?;
    let (_, ledger_rate) = ledger_facts(&summary);
    Ok(price_of(&current, brief, trial, &a, ledger_rate))
}

/// What `trial` rents, as the prices see it: its GPU and count, provider, billing, region, own
/// rate (when in the brief's currency) and what its ledger billed.
fn offer_of<'a>(brief: &'a Brief, trial: &'a Trial, a: &'a Allocation, ledger_rate: Option<Decimal>) -> Offer<'a> {
    let currency = brief.fields.currency.as_str();
    Offer {
        gpu: &a.gpu.model,
        count: a.count,
        currency,
        provider: &trial.fields.provider,
        billing: Some(trial.fields.billing.as_str()),
        region: trial.fields.region.as_deref(),
        own_rate: trial
            .fields
            .rate_per_gpu_hour
            .filter(|_| trial.fields.currency == currency),
        ledger_rate,
    }
}

/// The one price of a trial's allocation (`prices::model::allocation_price`).
fn price_of(
    current: &[StoredPrice],
    brief: &Brief,
    trial: &Trial,
    a: &Allocation,
    ledger_rate: Option<Decimal>,
) -> Option<AllocationPrice> {
    allocation_price(current, &offer_of(brief, trial, a, ledger_rate))
}

/// The evidence names a GPU model of another family than the trial's: what it names. A model
/// name with no catalogue family in it (a name this catalogue does not know) is not flagged.
fn gpu_mismatch(trial_gpu: &str, models: &serde_json::Value) -> Option<String> {
    let family = |name: &str| -> Option<String> {
        let tokens: Vec<String> = name
            .split(|c: char| !c.is_ascii_alphanumeric())
            .filter(|t| !t.is_empty())
            .map(str::to_ascii_uppercase)
            .collect();
        crate::sizing::gpus()
            .iter()
            .filter_map(|g| g.model.split_whitespace().next())
            .map(str::to_ascii_uppercase)
            .filter(|f| f.chars().any(|c| c.is_ascii_digit()))
            .find(|f| tokens.contains(f))
    };
    let ours = family(trial_gpu)?;
    let names: Vec<&str> = match models {
        serde_json::Value::Array(items) => items.iter().filter_map(|v| v.as_str()).collect(),
        serde_json::Value::String(s) => vec![s.as_str()],
        _ => Vec::new(),
    };
    names
        .into_iter()
        .find(|n| family(n).is_some_and(|f| f != ours))
        .map(str::to_owned)
}

/// A trial's price as the money figures carry it.
fn rate_of(p: &AllocationPrice) -> Rate {
    Rate {
        per_gpu_hour: p.per_gpu_hour,
        gpus_billed: p.gpus_billed,
        billing: p.billing.clone(),
        provider: p.provider.clone(),
        source: match &p.source {
            PriceSource::Trial => RateSource::Trial,
            PriceSource::PriceRow { price_id } => RateSource::PriceRow { price_id: *price_id },
            PriceSource::Ledger => RateSource::Ledger,
            PriceSource::CheapestOffer { price_id } => RateSource::CheapestOffer { price_id: *price_id },
        },
        description: p.description.clone(),
    }
}

/// The brief's API prices: input and output per million tokens, else the older single price as
/// the output price with input free.
fn api_prices(brief: &Brief) -> Option<ApiPrices> {
    let f = &brief.fields;
    match (f.api_price_input_per_million, f.api_price_output_per_million) {
        (input, Some(output)) => Some(ApiPrices {
            input_per_million: input.unwrap_or_default(),
            output_per_million: output,
            output_price_only: false,
        }),
        (Some(input), None) => f.api_price_per_million_tokens.map(|output| ApiPrices {
            input_per_million: input,
            output_per_million: output,
            output_price_only: false,
        }),
        (None, None) => f.api_price_per_million_tokens.map(|output| ApiPrices {
            input_per_million: Decimal::ZERO,
            output_per_million: output,
            output_price_only: true,
        }),
    }
}

/// The trial's money per unit of work (trials.md): its price, its load points and operating
/// point, the card's attainment target, the brief's expected peak, headroom and API prices, and
/// the offer's reserved and on-demand rates. `None` while neither a price nor a load test is known.
#[allow(clippy::too_many_arguments)]
fn trial_money(
    brief: &Brief,
    trial: &Trial,
    allocation: Option<&Allocation>,
    price: Option<&AllocationPrice>,
    current_prices: &[StoredPrice],
    load: TrialLoad,
    estimates: &BTreeMap<String, MetricFact>,
    ledger_utilization: Option<Decimal>,
) -> Option<MoneyFacts> {
    if price.is_none() && load.points.is_empty() {
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
    let reservation_rates = allocation
        .map(|a| {
            let offer = offer_of(brief, trial, a, None);
            let r = reserved_offer(current_prices, &offer, price);
            ReservationRates {
                reserved_rate: r.reserved.as_ref().map(|q| q.rate_per_gpu_hour),
                reserved_price_id: r.reserved.as_ref().map(|q| q.price_id),
                reserved_gpus_billed: r.reserved.as_ref().map(|q| q.gpus_billed),
                reserved_description: r.reserved.as_ref().map(|q| {
                    let mut text = format!("{}'s reserved price of {}", q.provider, q.valid_from);
                    if !q.source.is_empty() {
                        text.push_str(&format!(" ({})", q.source));
                    }
                    text
                }),
                on_demand_rate: r.on_demand_rate,
                on_demand_price_id: r.on_demand_price_id,
            }
        })
        .unwrap_or_default();
    Some(money_facts(&MoneyInputs {
        rate: price.map(rate_of),
        currency: brief.fields.currency.clone(),
        points: load.points,
        operating: load.operating,
        estimated_shares,
        attainment_target: load.attainment_target,
        expected_peak_rps: brief.fields.expected_peak_rps,
        headroom_pct: brief.fields.headroom_pct.unwrap_or(0.0),
        api: api_prices(brief),
        ledger_utilization,
        reservation_rates,
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
            // Only a failure's reason is an input (a wrong type, no request completed); a missing
            // criterion's hint is not.
            reason: e.reason.filter(|_| e.status == Status::Fail && e.value.is_none()),
            status: e.status,
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
    // What the billed accelerator time cost per GPU-hour, from the summary's own figures. Time that
    // cost nothing (free credits, lines with no amount) prices no trial: a rate of 0 ranked it the
    // cheapest of all.
    let rate = (s.accelerator_hours > Decimal::ZERO)
        .then(|| (s.totals.accelerator / s.accelerator_hours).round_dp(4))
        .filter(|r| *r > Decimal::ZERO);
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

#[cfg(test)]
mod tests {
    use rust_decimal::Decimal;
    use serde_json::json;

    use super::{gpu_mismatch, ledger_facts};
    use crate::ledger::model::{CategoryTotals, Diagnostics, LedgerSummary};

    #[test]
    fn accelerator_time_that_cost_nothing_prices_no_trial() {
        let summary = |accelerator: i64| LedgerSummary {
            currency: "USD".into(),
            accelerator_hours: Decimal::from(10),
            totals: CategoryTotals {
                accelerator: Decimal::from(accelerator),
                ..CategoryTotals::default()
            },
            total: Decimal::from(accelerator),
            accepted_outputs: 100,
            cost_per_job: None,
            diagnostics: Diagnostics::default(),
        };
        assert_eq!(ledger_facts(&summary(25)).1, Some(Decimal::new(25, 1)));
        // Free credits or lines with no amount: no rate of 0, which ranked the trial the cheapest.
        assert_eq!(ledger_facts(&summary(0)).1, None);
    }

    #[test]
    fn evidence_naming_another_gpu_family_is_flagged() {
        let smi = json!(["NVIDIA H100 80GB HBM3", "NVIDIA H100 80GB HBM3"]);
        assert_eq!(gpu_mismatch("H200 SXM", &smi).as_deref(), Some("NVIDIA H100 80GB HBM3"));
        assert_eq!(gpu_mismatch("H100 SXM", &smi), None);
        assert_eq!(gpu_mismatch("A100 80GB SXM", &json!(["NVIDIA A100-SXM4-80GB"])), None);
        assert_eq!(
            gpu_mismatch("H100 SXM", &json!(["Some Future GPU"])),
            None,
            "unknown: not flagged"
        );
    }
}
