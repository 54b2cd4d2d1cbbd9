//! The review decision: expand / reserve / dedicate / scale / stop, computed from the brief, the
//! card's evaluated criteria, the newest evidence metrics and the ledger. A pure function: the page,
//! the JSON API and the decision record all call `decide`. The rules are docs/decision.md,
//! applied in order; the first that matches decides and every rule that matched is a reason.

use std::collections::BTreeMap;

use rust_decimal::{prelude::FromPrimitive, Decimal};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::cost_at_slo::{ceil_count, reservation_comparison, ApiBreakEven, MoneyFacts, ReservationComparison};
use crate::{figures::with_currency, validation::TextEnum};

/// The thresholds of decision.md. What "saturated" means is shared with the default card, so those
/// live in `crate::thresholds` and are re-exported here; the break-even ones are the decision's own.
pub mod limits {
    use rust_decimal::Decimal;

    pub use crate::thresholds::{KV_CACHE_SATURATED_PCT, PREEMPTIONS_SATURATED_ABOVE, QUEUE_SHARE_SATURATED};

    /// Rule 8b: with no reserved price of the offer known, a trial at least this busy is told to
    /// ask for one (a reservation could pay); nothing is reserved without a real quote.
    pub const ASK_FOR_RESERVED_PRICE_FROM: Decimal = Decimal::from_parts(60, 0, 0, false, 2);
    /// Rule 8 reserves from the break-even plus this margin of utilization (kept beside the
    /// reservation comparison, which reads it too).
    pub use crate::review::cost_at_slo::BREAK_EVEN_MARGIN;
}

/// The decision. Kept as text (`approvals.decision`, the signal snapshot) in the same lower-case
/// names as on the wire.
// Spelled by `as_str` and read by `FromStr` ([`TextEnum`]); the server reads a stored one back
// through `db::StoredText`, which refuses an unknown value. (A plain comment: the doc comment is
// the published schema's description.)
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Expand,
    Reserve,
    Dedicate,
    Scale,
    Stop,
}

impl Verdict {
    pub const ALL: [Verdict; 5] = [
        Verdict::Expand,
        Verdict::Reserve,
        Verdict::Dedicate,
        Verdict::Scale,
        Verdict::Stop,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Expand => "expand",
            Verdict::Reserve => "reserve",
            Verdict::Dedicate => "dedicate",
            Verdict::Scale => "scale",
            Verdict::Stop => "stop",
        }
    }
}

impl std::str::FromStr for Verdict {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Verdict::ALL.into_iter().find(|v| v.as_str() == s).ok_or(())
    }
}

impl TextEnum for Verdict {
    fn variants() -> &'static [Self] {
        &Verdict::ALL
    }
    fn text(self) -> &'static str {
        self.as_str()
    }
}

impl std::fmt::Display for Verdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A criterion's status, as the card evaluation gives it.
pub use crate::criteria::Status;

/// One evaluated criterion of the current card.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct CriterionOutcome {
    pub key: String,
    pub op: String,
    pub threshold: Value,
    pub stage: u8,
    pub required: bool,
    pub status: Status,
    pub value: Option<Value>,
    pub evidence_id: Option<Uuid>,
    /// Why a failing criterion fails when its value does not say it ("no request completed").
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The newest value of a metric and the evidence it came from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct MetricFact {
    pub value: Value,
    pub evidence_id: Uuid,
}

/// The brief's fields the rules read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct BriefFacts {
    pub workload_kind: String,
    pub only_needs_model_output: bool,
    pub needs_host_control: bool,
    pub data_boundary: String,
    pub max_cost_per_job: Option<Decimal>,
    pub currency: String,
    /// GPUs the sizing says one unit needs.
    pub sized_count: u32,
    /// GPUs in the allocation under test.
    pub current_units: u32,
    /// How the trial is billed (`on-demand`, `spot`, `reserved`, `serverless`).
    pub trial_billing: String,
}

/// The ledger figures the rules read.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LedgerFacts {
    pub cost_per_job: Option<Decimal>,
    pub total: Decimal,
    pub accelerator_hours: Decimal,
    pub idle_hours: Option<Decimal>,
    pub totals: BTreeMap<String, Decimal>,
}

impl LedgerFacts {
    /// (billed accelerator hours − idle hours) ÷ billed accelerator hours, to four places as shown;
    /// undefined without an idle figure or without billed hours.
    pub fn utilization(&self) -> Option<Decimal> {
        self.exact_utilization().map(|u| u.round_dp(4))
    }

    /// The same share unrounded: the rules compare this one, so 0.79996 is below a 0.80 threshold
    /// even though it shows as 0.8000.
    pub fn exact_utilization(&self) -> Option<Decimal> {
        let idle = self.idle_hours?;
        if self.accelerator_hours <= Decimal::ZERO {
            return None;
        }
        Some((self.accelerator_hours - idle) / self.accelerator_hours)
    }
}

/// Everything the decision reads; its digest pins an approval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionInputs {
    pub brief: BriefFacts,
    pub criteria: Vec<CriterionOutcome>,
    /// Newest value per metric key over all evidence, for the checks that apply whether or not a
    /// criterion names them (`dcgm.diag.passed`, `checkpoint.restore_ok`, saturation signals).
    pub metrics: BTreeMap<String, MetricFact>,
    pub ledger: Option<LedgerFacts>,
    /// Money per unit of work at the SLO (rate and the price rows it came from, load points, cost
    /// per million output tokens); absent while neither a rate nor a load test is known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub money: Option<MoneyFacts>,
}

/// Where a utilization figure comes from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum UtilizationSource {
    /// (billed − idle) ÷ billed accelerator hours, from the ledger.
    Ledger,
    /// The mean GPU utilization dcgm-exporter measured (`gpu.util_pct_avg` ÷ 100), used when the
    /// ledger has no idle figure.
    DcgmExporter {
        evidence_id: Uuid,
    },
    Unknown,
}

impl UtilizationSource {
    fn describe(&self) -> &'static str {
        match self {
            UtilizationSource::Ledger => "over the billed period (the ledger's idle hours)",
            UtilizationSource::DcgmExporter { .. } => {
                "as the GPUs' mean utilization measured by dcgm-exporter (the ledger has no idle figure)"
            }
            UtilizationSource::Unknown => "",
        }
    }

    fn link(&self) -> Option<String> {
        match self {
            UtilizationSource::Ledger | UtilizationSource::Unknown => Some("ledger:utilization".into()),
            UtilizationSource::DcgmExporter { evidence_id } => Some(format!("evidence:{evidence_id}")),
        }
    }
}

/// The ledger's utilization, unrounded; without an idle figure there, dcgm-exporter's mean GPU
/// utilization.
fn exact_utilization(inputs: &DecisionInputs) -> (Option<Decimal>, UtilizationSource) {
    if let Some(u) = inputs.ledger.as_ref().and_then(LedgerFacts::exact_utilization) {
        return (Some(u), UtilizationSource::Ledger);
    }
    let measured = inputs.metrics.get("gpu.util_pct_avg").and_then(|m| {
        let pct = number(&m.value).filter(|p| (0.0..=100.0).contains(p))?;
        // `from_f64` keeps the digits the figure was written with (72.5, not 72.4999…).
        let share = Decimal::from_f64(pct)? / Decimal::ONE_HUNDRED;
        Some((share, m.evidence_id))
    });
    match measured {
        Some((u, evidence_id)) => (Some(u), UtilizationSource::DcgmExporter { evidence_id }),
        None => (None, UtilizationSource::Unknown),
    }
}

/// A fact behind a reason, with where to look.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Fact {
    pub label: String,
    pub value: String,
    /// `criterion:<key>`, `evidence:<id>` or `ledger:<figure>`.
    pub link: Option<String>,
}

/// A rule of docs/decision.md: 1 to 9, 6b (a managed model API is cheaper per good request) and
/// 6c (interruptible capacity for real-time serving). JSON writes the numbered rules as numbers and
/// the lettered ones as strings ("6b", "6c").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Numbered(u8),
    ApiCheaper,
    SpotForRealtime,
    /// 8b: busy enough that reserving could pay, but no reserved price of the offer is known.
    ReservedPriceNeeded,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Numbered(n) => write!(f, "{n}"),
            Rule::ApiCheaper => f.write_str("6b"),
            Rule::SpotForRealtime => f.write_str("6c"),
            Rule::ReservedPriceNeeded => f.write_str("8b"),
        }
    }
}

/// A number (1 to 9) or "6b" / "6c", as `Serialize` below writes it.
impl utoipa::PartialSchema for Rule {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};
        OneOfBuilder::new()
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::Integer)
                    .minimum(Some(1))
                    .maximum(Some(9)),
            )
            .item(
                ObjectBuilder::new()
                    .schema_type(Type::String)
                    .enum_values(Some(["6b", "6c", "8b"])),
            )
            .description(Some("the rule: a number (1 to 9), or \"6b\" / \"6c\" / \"8b\""))
            .into()
    }
}

impl utoipa::ToSchema for Rule {}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rule::Numbered(n) => s.serialize_u8(*n),
            Rule::ApiCheaper => s.serialize_str("6b"),
            Rule::SpotForRealtime => s.serialize_str("6c"),
            Rule::ReservedPriceNeeded => s.serialize_str("8b"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Reason {
    pub rule: Rule,
    pub decision: Verdict,
    pub says: String,
    pub facts: Vec<Fact>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Decision {
    pub decision: Verdict,
    pub accepted: bool,
    pub reasons: Vec<Reason>,
    /// Required criteria without evidence, by stage.
    pub missing: BTreeMap<u8, Vec<String>>,
    pub utilization: Option<Decimal>,
    /// Where the utilization came from: the ledger's idle hours, else the GPUs' own busy share.
    pub utilization_source: UtilizationSource,
    pub saturated: bool,
    /// For rule 4: the suggested count of replicas of the trial's allocation.
    pub suggested_replicas: Option<u32>,
    /// The reservation comparison rules 8 and 8b read (`cost_at_slo::reservation_comparison`):
    /// break-even, threshold, the monthly money like for like, and whether a reserved price is
    /// needed (rule 8b).
    pub reservation: ReservationComparison,
    pub inputs_digest: String,
}

fn fact(label: &str, value: impl ToString, link: Option<String>) -> Fact {
    Fact {
        label: label.to_owned(),
        value: value.to_string(),
        link,
    }
}

fn criterion_fact(c: &CriterionOutcome) -> Fact {
    let value = c
        .value
        .as_ref()
        .map(Value::to_string)
        .or_else(|| c.reason.clone())
        .unwrap_or_else(|| "no value".into());
    fact(
        &format!("{} {} {}", c.key, c.op, c.threshold),
        value,
        Some(match c.evidence_id {
            Some(id) => format!("evidence:{id}"),
            None => format!("criterion:{}", c.key),
        }),
    )
}

fn number(v: &Value) -> Option<f64> {
    v.as_f64().filter(|n| n.is_finite())
}

/// The saturation signals that are present, as facts; empty when not saturated.
fn saturation_signals(metrics: &BTreeMap<String, MetricFact>) -> Vec<Fact> {
    let num = |key: &str| {
        metrics
            .get(key)
            .and_then(|m| number(&m.value).map(|n| (n, m.evidence_id)))
    };
    let mut signals = Vec::new();
    if let Some((n, id)) = num("serving.preemptions_total") {
        if n > limits::PREEMPTIONS_SATURATED_ABOVE {
            signals.push(fact("serving.preemptions_total > 0", n, Some(format!("evidence:{id}"))));
        }
    }
    if let Some((n, id)) = num("serving.kv_cache_usage_max_pct") {
        if n >= limits::KV_CACHE_SATURATED_PCT {
            signals.push(fact(
                "serving.kv_cache_usage_max_pct ≥ 90",
                n,
                Some(format!("evidence:{id}")),
            ));
        }
    }
    if let (Some((queue, id)), Some((e2e, _))) = (num("serving.queue_time_p95_ms"), num("serving.e2e_p95_ms")) {
        // A hair under the product: 20 % of 3 ms is 0.6000000000000001 in binary, and a queue of
        // 0.6 ms is 20 % of it.
        if e2e > 0.0 && queue >= limits::QUEUE_SHARE_SATURATED * e2e * (1.0 - 1e-12) {
            signals.push(fact(
                "serving.queue_time_p95_ms ≥ 20 % of serving.e2e_p95_ms",
                format!("{queue} of {e2e}"),
                Some(format!("evidence:{id}")),
            ));
        }
    }
    signals
}

/// How far a failing numeric criterion misses: > 1 means worse than the threshold by that factor.
fn miss_ratio(c: &CriterionOutcome) -> Option<f64> {
    let value = number(c.value.as_ref()?)?;
    let threshold = number(&c.threshold)?;
    match c.op.as_str() {
        "lt" | "le" if threshold > 0.0 => Some(value / threshold),
        "gt" | "ge" if value > 0.0 => Some(threshold / value),
        _ => None,
    }
}

/// A boolean metric that is present and false.
fn false_metric<'a>(metrics: &'a BTreeMap<String, MetricFact>, key: &str) -> Option<&'a MetricFact> {
    metrics.get(key).filter(|m| m.value == Value::Bool(false))
}

/// What every rule reads, worked out once from the inputs.
struct Context<'a> {
    inputs: &'a DecisionInputs,
    brief: &'a BriefFacts,
    /// Required criteria that apply: one that does not apply to the trial's allocation is neither
    /// required nor missing.
    required: Vec<&'a CriterionOutcome>,
    accepted: bool,
    /// Required criteria without evidence, by stage.
    missing: BTreeMap<u8, Vec<String>>,
    /// The busy share to four places, as every page and answer shows it.
    utilization: Option<Decimal>,
    /// The busy share unrounded: what rules 8 and 8b compare.
    exact_utilization: Option<Decimal>,
    utilization_source: UtilizationSource,
    /// The saturation signals present, as facts; empty when not saturated.
    signals: Vec<Fact>,
    /// Reserving against paying by the hour for the busy hours, at `utilization`.
    comparison: ReservationComparison,
}

impl<'a> Context<'a> {
    fn new(inputs: &'a DecisionInputs) -> Self {
        let required: Vec<&CriterionOutcome> = inputs
            .criteria
            .iter()
            .filter(|c| c.required && c.status != Status::NotApplicable)
            .collect();
        let accepted = required.iter().all(|c| c.status == Status::Pass);
        let mut missing: BTreeMap<u8, Vec<String>> = BTreeMap::new();
        for c in required.iter().filter(|c| c.status == Status::Missing) {
            missing.entry(c.stage).or_default().push(c.key.clone());
        }
        let (exact_utilization, utilization_source) = exact_utilization(inputs);
        let utilization = exact_utilization.map(|u| u.round_dp(4));
        let comparison = reservation_comparison(inputs.money.as_ref(), utilization);
        Context {
            inputs,
            brief: &inputs.brief,
            required,
            accepted,
            missing,
            utilization,
            exact_utilization,
            utilization_source,
            signals: saturation_signals(&inputs.metrics),
            comparison,
        }
    }

    fn saturated(&self) -> bool {
        !self.signals.is_empty()
    }

    /// Required criteria that failed, among `stages`.
    fn failed_in(&self, stages: &[u8]) -> Vec<&'a CriterionOutcome> {
        self.required
            .iter()
            .copied()
            .filter(|c| stages.contains(&c.stage) && c.status == Status::Fail)
            .collect()
    }

    /// Rule 8: the utilization when a reserved price of the offer is known, the trial is busy at
    /// least its break-even + the margin, and it is not spot capacity. Compared unrounded: the
    /// shown figures are rounded to four places, the rule is not.
    fn busy_enough_to_reserve(&self) -> Option<Decimal> {
        let rates = &self.inputs.money.as_ref()?.reservation_rates;
        let from = rates.exact_break_even()? + limits::BREAK_EVEN_MARGIN;
        let busy = self.exact_utilization?;
        (busy >= from && self.brief.trial_billing != "spot").then_some(self.utilization?)
    }

    /// Rule 8b: the utilization when no reserved price of the offer is known, yet the trial is
    /// busy enough (≥ 0.60) that one could pay, and it is not spot capacity. A reserved price
    /// without an on-demand one is not this rule: the quote is known, its break-even is not.
    fn busy_without_reserved_price(&self) -> Option<Decimal> {
        if self.comparison.reserved_rate_per_gpu_hour.is_some() || self.brief.trial_billing == "spot" {
            return None;
        }
        let busy = self.exact_utilization?;
        (busy >= limits::ASK_FOR_RESERVED_PRICE_FROM).then_some(self.utilization?)
    }
}

/// A rule of decision.md: the reason it gives when it matches.
type RuleCheck = fn(&Context) -> Option<Reason>;

/// The rules in decision.md's order; the first that matches decides and every match is a reason.
const RULES: [RuleCheck; 10] = [
    managed_api_fits,
    environment_failed,
    cost_above_ceiling,
    load_missed_while_saturated,
    load_missed_where_more_units_will_not_help,
    criteria_missing,
    accepted_but_api_cheaper,
    spot_for_realtime,
    dedicated_host_needed,
    reserve_or_stay_pay_as_you_go,
];

pub fn decide(inputs: &DecisionInputs) -> Decision {
    let ctx = Context::new(inputs);
    let mut reasons: Vec<Reason> = RULES.iter().filter_map(|rule| rule(&ctx)).collect();
    if reasons.is_empty() {
        reasons.push(not_accepted_otherwise(&ctx));
    }
    let suggested_replicas = reasons
        .iter()
        .any(|r| r.rule == Rule::Numbered(4))
        .then(|| scale_out(&ctx).replicas);
    let decision = reasons[0].decision;
    let mut reservation = ctx.comparison.clone();
    // Rule 8b matched, whichever rule decides (a dedicated host of no known reserved price asks
    // for a quote as well), unless the trial is stopped: nothing of it will be reserved.
    reservation.reserved_price_needed =
        decision != Verdict::Stop && reasons.iter().any(|r| r.rule == Rule::ReservedPriceNeeded);
    Decision {
        decision,
        accepted: ctx.accepted,
        reasons,
        missing: ctx.missing,
        utilization: ctx.utilization,
        saturated: !ctx.signals.is_empty(),
        utilization_source: ctx.utilization_source,
        suggested_replicas,
        reservation,
        inputs_digest: inputs_digest(inputs),
    }
}

/// Rule 1: a managed model API is the better abstraction.
fn managed_api_fits(ctx: &Context) -> Option<Reason> {
    let brief = ctx.brief;
    if !(brief.only_needs_model_output && !brief.needs_host_control && brief.data_boundary == "shared-ok") {
        return None;
    }
    Some(Reason {
        rule: Rule::Numbered(1),
        decision: Verdict::Stop,
        says: "The workload only needs model output, needs no host-level control and may share \
               infrastructure: a managed model API is the better abstraction than a rented GPU."
            .into(),
        facts: vec![
            fact("only_needs_model_output", true, None),
            fact("needs_host_control", false, None),
            fact("data_boundary", &brief.data_boundary, None),
        ],
    })
}

/// Rule 2: the environment or its recovery failed: a required stage 1, 2 or 4 criterion, or a
/// diagnostic or restore that reported false whether or not the card names it.
fn environment_failed(ctx: &Context) -> Option<Reason> {
    let mut env_facts: Vec<Fact> = ctx.failed_in(&[1, 2, 4]).into_iter().map(criterion_fact).collect();
    for key in ["dcgm.diag.passed", "checkpoint.restore_ok"] {
        if let Some(m) = false_metric(&ctx.inputs.metrics, key) {
            if !env_facts.iter().any(|f| f.label.starts_with(key)) {
                env_facts.push(fact(key, "false", Some(format!("evidence:{}", m.evidence_id))));
            }
        }
    }
    if env_facts.is_empty() {
        return None;
    }
    Some(Reason {
        rule: Rule::Numbered(2),
        decision: Verdict::Stop,
        says: "The environment or its recovery failed: fix or replace the allocation before any commitment.".into(),
        facts: env_facts,
    })
}

/// Rule 3: cost per completed job above the brief's ceiling.
fn cost_above_ceiling(ctx: &Context) -> Option<Reason> {
    let brief = ctx.brief;
    let (ledger, ceiling) = (ctx.inputs.ledger.as_ref()?, brief.max_cost_per_job?);
    let cost = ledger.cost_per_job.filter(|c| *c > ceiling)?;
    let mut facts = vec![
        fact(
            "cost per completed job",
            format!("{cost} {}", brief.currency),
            Some("ledger:cost_per_job".into()),
        ),
        fact("ceiling", format!("{ceiling} {}", brief.currency), None),
    ];
    facts.extend(ledger.totals.iter().map(|(category, amount)| {
        fact(
            category,
            format!("{amount} {}", brief.currency),
            Some(format!("ledger:{category}")),
        )
    }));
    Some(Reason {
        rule: Rule::Numbered(3),
        decision: Verdict::Stop,
        says: "Each completed job costs more than the brief's ceiling.".into(),
        facts,
    })
}

/// Whether a missed load target had no completed request at all (every request failed).
fn nothing_completed(failures: &[&CriterionOutcome]) -> bool {
    failures
        .iter()
        .any(|c| c.reason.as_deref() == Some(crate::evidence::load_points::NOTHING_COMPLETED))
}

/// How far to scale out for rule 4.
struct ScaleOut {
    /// The worst miss ratio among the failed load criteria (at least 1).
    worst: f64,
    /// GPUs per replica: the trial's allocation.
    per_replica: u32,
    /// Replicas of the trial's allocation (one today) × the worst miss ratio, never fewer than the
    /// sizing's GPUs need.
    replicas: u32,
}

fn scale_out(ctx: &Context) -> ScaleOut {
    let worst = ctx
        .failed_in(&[3])
        .iter()
        .filter_map(|c| miss_ratio(c))
        .fold(1.0_f64, f64::max);
    let per_replica = ctx.brief.current_units.max(1);
    let sized = ctx.brief.sized_count.div_ceil(per_replica).max(1);
    ScaleOut {
        worst,
        per_replica,
        // 0.07 ÷ 0.01 is 7.000000000000001 in binary floating point: that is 7 replicas, not 8.
        replicas: ceil_count(worst).max(sized),
    }
}

/// Rule 4: a load (stage 3) target was missed while the server was saturated: add capacity. A
/// run where no request completed counts too when a saturation signal says why (a full KV cache,
/// preemptions, a long queue): the rule has no exception for it.
fn load_missed_while_saturated(ctx: &Context) -> Option<Reason> {
    let failures = ctx.failed_in(&[3]);
    if failures.is_empty() || !ctx.saturated() {
        return None;
    }
    let ScaleOut {
        worst,
        per_replica,
        replicas,
    } = scale_out(ctx);
    let mut facts: Vec<Fact> = failures.iter().map(|c| criterion_fact(c)).collect();
    facts.extend(ctx.signals.iter().cloned());
    facts.push(fact("worst miss ratio", format!("{worst:.2}"), None));
    facts.push(fact("suggested replicas", replicas, None));
    let missed = if nothing_completed(&failures) {
        "No request of the load test completed while the server was saturated"
    } else {
        "A load target was missed while the server was saturated"
    };
    Some(Reason {
        rule: Rule::Numbered(4),
        decision: Verdict::Scale,
        says: format!(
            "{missed}: add capacity (suggested {replicas} replicas of {per_replica} GPUs, from 1 \
             replica × the worst miss ratio; never below the sizing's {} GPUs).",
            ctx.brief.sized_count
        ),
        facts,
    })
}

/// Rule 5: a load target was missed while the server was not saturated: more units will not fix
/// it (nor a server that completed no request and shows no sign of overload).
fn load_missed_where_more_units_will_not_help(ctx: &Context) -> Option<Reason> {
    let failures = ctx.failed_in(&[3]);
    if failures.is_empty() || ctx.saturated() {
        return None;
    }
    let says = if nothing_completed(&failures) {
        "No request of the load test completed (every request failed) and nothing shows the server \
         was saturated: there is no latency to judge, and more units will not fix a server that \
         answers nothing."
    } else {
        "A load target was missed while the server was not saturated: more units will not fix it."
    };
    Some(Reason {
        rule: Rule::Numbered(5),
        decision: Verdict::Stop,
        says: says.into(),
        facts: failures.iter().map(|c| criterion_fact(c)).collect(),
    })
}

/// Rule 6: required criteria still missing: keep the short allocation until they are measured.
fn criteria_missing(ctx: &Context) -> Option<Reason> {
    if ctx.missing.is_empty() {
        return None;
    }
    Some(Reason {
        rule: Rule::Numbered(6),
        decision: Verdict::Expand,
        says: "Keep the short allocation until these are measured; no reservation before acceptance.".into(),
        facts: ctx
            .missing
            .iter()
            .map(|(stage, keys)| fact(&format!("stage {stage}"), keys.join(", "), None))
            .collect(),
    })
}

/// Rule 6b: accepted, but a managed model API is cheaper per good request than the trial.
fn accepted_but_api_cheaper(ctx: &Context) -> Option<Reason> {
    if !ctx.accepted {
        return None;
    }
    api_cheaper(ctx.brief, ctx.inputs.money.as_ref())
}

/// Rule 6c: accepted, but on interruptible capacity for real-time serving.
fn spot_for_realtime(ctx: &Context) -> Option<Reason> {
    let brief = ctx.brief;
    if !(ctx.accepted && brief.trial_billing == "spot" && brief.workload_kind == "realtime-inference") {
        return None;
    }
    Some(Reason {
        rule: Rule::SpotForRealtime,
        decision: Verdict::Stop,
        says: "The trial runs on interruptible (spot) capacity, which can be reclaimed mid-request and \
               carries no availability promise: test the same allocation on demand or reserved; spot \
               suits batch work with checkpoints."
            .into(),
        facts: vec![
            fact("billing", "spot", None),
            fact("workload_kind", &brief.workload_kind, None),
        ],
    })
}

/// Rule 7: accepted, and the brief needs host-level control or a dedicated host.
fn dedicated_host_needed(ctx: &Context) -> Option<Reason> {
    let brief = ctx.brief;
    let dedicated_boundary = brief.data_boundary == "dedicated-host";
    if !(ctx.accepted && (brief.needs_host_control || dedicated_boundary)) {
        return None;
    }
    let mut facts = Vec::new();
    if brief.needs_host_control {
        facts.push(fact("needs_host_control", true, None));
    }
    if dedicated_boundary {
        facts.push(fact("data_boundary", "dedicated-host", None));
    }
    Some(Reason {
        rule: Rule::Numbered(7),
        decision: Verdict::Dedicate,
        says: "Accepted, and the brief requires host-level control or a dedicated host.".into(),
        facts,
    })
}

/// Rules 8, 8b and 9: accepted: reserve when busy enough past the offer's break-even; busy, but no
/// reserved price of the offer known: stay pay-as-you-go and ask for one; else stay pay-as-you-go.
fn reserve_or_stay_pay_as_you_go(ctx: &Context) -> Option<Reason> {
    if !ctx.accepted {
        return None;
    }
    Some(
        match (ctx.busy_enough_to_reserve(), ctx.busy_without_reserved_price()) {
            (Some(u), _) => reserve(ctx, u),
            (None, Some(u)) => ask_for_reserved_price(ctx, u),
            (None, None) => stay_pay_as_you_go(ctx),
        },
    )
}

/// A share as a percentage with one decimal, as a finance reader checks it: 0.777 → "77.7 %".
fn pct(share: Decimal) -> String {
    format!("{} %", (share * Decimal::ONE_HUNDRED).round_dp(1).normalize())
}

/// Rule 8: accepted and busy at utilization `u`, past the offer's break-even + 5 points: reserve.
fn reserve(ctx: &Context, u: Decimal) -> Reason {
    let brief = ctx.brief;
    let money = ctx.inputs.money.as_ref();
    let c = &ctx.comparison;
    let mut facts = vec![
        fact("utilization", u, ctx.utilization_source.link()),
        break_even_fact(c, money, &brief.currency),
    ];
    let link = money
        .and_then(|m| m.reservation_rates.reserved_price_id)
        .map(|id| format!("price:{id}"));
    let saving = c.reserve_saving_monthly.unwrap_or_default();
    facts.push(fact("saving per month", with_currency(saving, &brief.currency), link));
    Reason {
        rule: Rule::Numbered(8),
        decision: Verdict::Reserve,
        says: format!(
            "Accepted and busy {} {}: at least the break-even {} + 5 points = {}, so reserve: {}.",
            pct(u),
            ctx.utilization_source.describe(),
            pct(c.break_even.unwrap_or_default()),
            pct(c.reserve_threshold.unwrap_or_default()),
            comparison_in_words(c, &brief.currency)
        ),
        facts,
    }
}

/// Rule 8b: accepted and busy at `u` (≥ 0.60), but no reserved price of the offer is known:
/// nothing is reserved without a real quote; say below which reserved price reserving would pay.
fn ask_for_reserved_price(ctx: &Context, u: Decimal) -> Reason {
    let brief = ctx.brief;
    let c = &ctx.comparison;
    let below = match c.reserve_pays_below_rate {
        Some(rate) => format!(
            "reserving would pay at a reserved price below {} per GPU-hour ({} less 5 points, of the on-demand {})",
            with_currency(rate, &brief.currency),
            pct(u),
            crate::figures::rate_with_currency(c.on_demand_rate_per_gpu_hour.unwrap_or_default(), &brief.currency)
        ),
        None => "no on-demand price of the offer is known either, so no reserved price can be compared".into(),
    };
    let mut facts = vec![fact("utilization", u, ctx.utilization_source.link())];
    if let Some(rate) = c.reserve_pays_below_rate {
        facts.push(fact(
            "reserved price below which reserving pays",
            format!("{} per GPU-hour", with_currency(rate, &brief.currency)),
            ctx.inputs
                .money
                .as_ref()
                .and_then(|m| m.reservation_rates.on_demand_price_id)
                .map(|id| format!("price:{id}")),
        ));
    }
    facts.push(break_even_fact(c, ctx.inputs.money.as_ref(), &brief.currency));
    Reason {
        rule: Rule::ReservedPriceNeeded,
        decision: Verdict::Expand,
        says: format!(
            "Accepted and busy {} {}, so nothing is reserved yet: stay pay-as-you-go; {below}; no reserved \
             price of this offer is known — ask the provider for one, and import it.",
            pct(u),
            ctx.utilization_source.describe(),
        ),
        facts,
    }
}

/// The comparison as a finance reader checks it by hand: "reserving saves 697.88 USD a month
/// (4.4 %) at 77.7 % busy: 8 GPUs reserved at 2.60 cost 15,184 USD a month against 15,881.88 USD
/// on demand for the busy hours (8 × 3.50 × 730 h × 77.7 %)".
pub fn comparison_in_words(c: &ReservationComparison, currency: &str) -> String {
    let (Some(saving), Some(reserved), Some(busy), Some(u), Some(n), Some(rr), Some(od)) = (
        c.reserve_saving_monthly,
        c.reserved_monthly,
        c.on_demand_busy_monthly,
        c.utilization,
        c.gpus,
        c.reserved_rate_per_gpu_hour,
        c.on_demand_rate_per_gpu_hour,
    ) else {
        return "no saving can be worked out without both prices of the offer and the busy share".into();
    };
    let verb = if saving >= Decimal::ZERO { "saves" } else { "costs" };
    let share = c
        .reserve_saving_share
        .map(|s| format!(" ({})", pct(s.abs())))
        .unwrap_or_default();
    format!(
        "reserving {verb} {}{share} a month{} at {} busy: {n} GPUs reserved at {} per GPU-hour cost {} a month \
         against {} on demand for the busy hours only ({n} × {} × 730 h × {})",
        crate::figures::sum_with_currency(saving.abs(), currency),
        if saving >= Decimal::ZERO { "" } else { " more" },
        pct(u),
        crate::figures::rate_with_currency(rr, currency),
        crate::figures::sum_with_currency(reserved, currency),
        crate::figures::sum_with_currency(busy, currency),
        crate::figures::rate_with_currency(od, currency),
        pct(u),
    )
}

/// Work that waits in a queue rather than answering people as they ask: every kind but real-time
/// inference (batch inference, media, and training and fine-tuning, which resume from their
/// checkpoints). Rule 9 advises it interruptible capacity.
pub fn is_batch_work(workload_kind: &str) -> bool {
    workload_kind != "realtime-inference"
}

/// Rule 9: accepted, but not busy enough to reserve (or spot capacity): stay pay-as-you-go.
fn stay_pay_as_you_go(ctx: &Context) -> Reason {
    let brief = ctx.brief;
    let batch = is_batch_work(&brief.workload_kind);
    let why = if brief.trial_billing == "spot" {
        "the trial is billed as spot capacity, which is not reserved".to_owned()
    } else {
        let c = &ctx.comparison;
        match (c.reserve_threshold, c.break_even) {
            (Some(from), Some(break_even)) => format!(
                "not busy enough to reserve (or utilization unknown): {}; we reserve from {} busy (break-even {} + \
                 5 points of margin)",
                comparison_in_words(c, &brief.currency),
                pct(from),
                pct(break_even),
            ),
            _ if c.reserved_rate_per_gpu_hour.is_some() => "a reserved price of this offer is known, but no \
                 on-demand price of this offer is known, so its break-even cannot be worked out and nothing is \
                 reserved: import the offer's on-demand price"
                .to_owned(),
            _ => "not busy enough to ask for a reserved price (or utilization unknown): below 60 % busy, \
                  paying by the hour is the safe choice"
                .to_owned(),
        }
    };
    Reason {
        rule: Rule::Numbered(9),
        decision: Verdict::Expand,
        says: if batch {
            format!(
                "Accepted, but {why}: stay pay-as-you-go and prefer interruptible capacity with a \
                 resumable queue."
            )
        } else {
            format!("Accepted, but {why}: stay pay-as-you-go.")
        },
        facts: vec![
            fact(
                "utilization",
                ctx.utilization
                    .map(|u| u.to_string())
                    .unwrap_or_else(|| "unknown".into()),
                ctx.utilization_source.link(),
            ),
            break_even_fact(&ctx.comparison, ctx.inputs.money.as_ref(), &ctx.brief.currency),
        ],
    }
}

/// 9, when no rule above matched: not accepted, yet nothing above names why (a failed stage-5
/// criterion other than cost): nothing may be committed, so the short allocation stays.
fn not_accepted_otherwise(ctx: &Context) -> Reason {
    Reason {
        rule: Rule::Numbered(9),
        decision: Verdict::Expand,
        says: "Not accepted: a required criterion failed; stay pay-as-you-go until it passes.".into(),
        facts: ctx
            .required
            .iter()
            .filter(|c| c.status == Status::Fail)
            .map(|c| criterion_fact(c))
            .collect(),
    }
}

/// The break-even as a fact: the offer's reserved ÷ on-demand rate, or that no reserved price of
/// the offer is known.
fn break_even_fact(c: &ReservationComparison, money: Option<&MoneyFacts>, currency: &str) -> Fact {
    let rates = money.map(|m| &m.reservation_rates);
    let link = rates.and_then(|r| r.reserved_price_id).map(|id| format!("price:{id}"));
    match (
        c.break_even,
        c.reserved_rate_per_gpu_hour,
        c.on_demand_rate_per_gpu_hour,
    ) {
        // As a finance reader checks it: "74.3 % (reserved 2.60 USD ÷ on demand 3.50 USD per GPU-hour)".
        (Some(break_even), Some(reserved), Some(on_demand)) => fact(
            "reservation break-even",
            format!(
                "{} (reserved {} ÷ on demand {} per GPU-hour)",
                pct(break_even),
                crate::figures::rate_with_currency(reserved, currency),
                crate::figures::rate_with_currency(on_demand, currency)
            ),
            link,
        ),
        (_, Some(_), None) => fact(
            "reservation break-even",
            "unknown: no on-demand price of the offer is known",
            link,
        ),
        _ => fact(
            "reservation break-even",
            "unknown: no reserved price of the offer is known",
            None,
        ),
    }
}

/// The API's prices per million tokens as a fact: input and output, or output only.
fn api_prices_fact(api: &ApiBreakEven, currency: &str) -> Fact {
    fact(
        "API prices per million tokens",
        if api.output_price_only {
            format!(
                "output {} (output price only: input counted free)",
                with_currency(api.output_price_per_million, currency)
            )
        } else {
            format!(
                "input {}, output {}",
                with_currency(api.input_price_per_million, currency),
                with_currency(api.output_price_per_million, currency)
            )
        },
        None,
    )
}

/// Rule 6b: the brief gives a managed API's prices, may leave the host (no host-level control,
/// boundary not dedicated-host), and a good request costs more on this trial than on the API.
fn api_cheaper(brief: &BriefFacts, money: Option<&MoneyFacts>) -> Option<Reason> {
    let m = money?;
    let api = m.api.as_ref().filter(|a| a.api_is_cheaper)?;
    if brief.needs_host_control || brief.data_boundary == "dedicated-host" {
        return None;
    }
    let currency = &brief.currency;
    let at = m
        .operating_point
        .as_ref()
        .map(|p| format!("evidence:{}", p.evidence_id));
    let busy = match api.utilization {
        Some(u) => format!(
            "at the ledger's measured utilization of {} (idle hours are paid too)",
            pct(u)
        ),
        None => "if kept busy all the time (the ledger has no idle figure)".to_owned(),
    };
    let mut facts = vec![
        fact(
            "cost per good request here",
            with_currency(api.our_cost_per_good_request, currency),
            at.clone(),
        ),
        fact(
            "cost per good request on the API",
            with_currency(api.api_cost_per_request, currency),
            None,
        ),
        fact(
            "cost per million output tokens here",
            with_currency(api.our_cost_per_million_output_tokens, currency),
            at.clone(),
        ),
        fact(
            "cost per million output tokens on the API",
            with_currency(api.api_cost_per_million_output_tokens, currency),
            None,
        ),
        api_prices_fact(api, currency),
        fact(
            "a good request's tokens",
            format!(
                "{:.0} in, {:.0} out on average",
                api.mean_input_tokens, api.mean_output_tokens
            ),
            at.clone(),
        ),
        fact("utilization assumed", &busy, Some("ledger:utilization".into())),
    ];
    if let Some(g) = m.goodput_rps {
        facts.push(fact("goodput", format!("{g:.2} good requests/s"), at));
    }
    Some(Reason {
        rule: Rule::ApiCheaper,
        decision: Verdict::Stop,
        says: format!(
            "A managed model API is cheaper for this traffic: a good request costs {} here {busy}, against {} on \
             the API ({} against {} per million output tokens). The brief's fields that would change this: \
             needs_host_control or a dedicated-host data_boundary (if the workload truly needs them), the API's \
             prices, or a lower rate or more good requests per second on the trial.",
            with_currency(api.our_cost_per_good_request, currency),
            with_currency(api.api_cost_per_request, currency),
            with_currency(api.our_cost_per_million_output_tokens, currency),
            with_currency(api.api_cost_per_million_output_tokens, currency),
        ),
        facts,
    })
}

/// SHA-256 over the canonical JSON of everything the decision reads (maps are ordered, so the same
/// inputs give the same digest and any change to an input changes it).
pub fn inputs_digest(inputs: &DecisionInputs) -> String {
    let json = serde_json::to_vec(inputs).unwrap_or_default();
    <sha2::Sha256 as sha2::Digest>::digest(&json)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[cfg(test)]
#[path = "decision_tests.rs"]
mod tests;
