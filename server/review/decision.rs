//! The review decision: expand / reserve / dedicate / scale / stop, computed from the brief, the
//! card's evaluated criteria, the newest evidence metrics and the ledger. A pure function: the page,
//! the JSON API and the decision record all call `decide`. The rules are docs/decision.md,
//! applied in order; the first that matches decides and every rule that matched is a reason.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use super::money::MoneyFacts;
use crate::money::with_currency;

/// The thresholds of decision.md, in one place.
///
/// `saturated` = any of: `serving.preemptions_total` > 0 in the load window;
/// `serving.kv_cache_usage_max_pct` ≥ 90; `serving.queue_time_p95_ms` ≥ 20 % of `serving.e2e_p95_ms`.
pub mod limits {
    use rust_decimal::Decimal;

    /// KV-cache usage (percent) at or above which the server counts as saturated.
    pub const KV_CACHE_SATURATED_PCT: f64 = 90.0;
    /// Queue time p95 as a share of end-to-end p95 at or above which requests are queueing.
    pub const QUEUE_SHARE_SATURATED: f64 = 0.20;
    /// Preemptions above this count in the load window mean KV pressure.
    pub const PREEMPTIONS_SATURATED_ABOVE: f64 = 0.0;
    /// Utilization at or above which a reservation pays (rule 8).
    pub const RESERVE_UTILIZATION: Decimal = Decimal::from_parts(60, 0, 0, false, 2);
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Expand,
    Reserve,
    Dedicate,
    Scale,
    Stop,
}

impl Verdict {
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

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Pass,
    Fail,
    Missing,
    /// The criterion does not apply to this trial's allocation (collectives on one GPU).
    #[serde(rename = "n/a")]
    NotApplicable,
}

/// One evaluated criterion of the current card.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CriterionOutcome {
    pub key: String,
    pub op: String,
    pub threshold: Value,
    pub stage: u8,
    pub required: bool,
    pub status: Status,
    pub value: Option<Value>,
    pub evidence_id: Option<Uuid>,
}

/// The newest value of a metric and the evidence it came from.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
}

/// The ledger figures the rules read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LedgerFacts {
    pub cost_per_job: Option<Decimal>,
    pub total: Decimal,
    pub accelerator_hours: Decimal,
    pub idle_hours: Option<Decimal>,
    pub totals: BTreeMap<String, Decimal>,
}

impl LedgerFacts {
    /// (billed accelerator hours − idle hours) ÷ billed accelerator hours; undefined without an
    /// idle figure or without billed hours.
    pub fn utilization(&self) -> Option<Decimal> {
        let idle = self.idle_hours?;
        if self.accelerator_hours <= Decimal::ZERO {
            return None;
        }
        Some(((self.accelerator_hours - idle) / self.accelerator_hours).round_dp(4))
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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

/// The ledger's utilization; without an idle figure there, dcgm-exporter's mean GPU utilization.
fn utilization(inputs: &DecisionInputs) -> (Option<Decimal>, UtilizationSource) {
    if let Some(u) = inputs.ledger.as_ref().and_then(LedgerFacts::utilization) {
        return (Some(u), UtilizationSource::Ledger);
    }
    let measured = inputs.metrics.get("gpu.util_pct_avg").and_then(|m| {
        let pct = number(&m.value).filter(|p| (0.0..=100.0).contains(p))?;
        let share = Decimal::from_f64_retain(pct / 100.0)?.round_dp(4);
        Some((share, m.evidence_id))
    });
    match measured {
        Some((u, evidence_id)) => (Some(u), UtilizationSource::DcgmExporter { evidence_id }),
        None => (None, UtilizationSource::Unknown),
    }
}

/// A fact behind a reason, with where to look.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fact {
    pub label: String,
    pub value: String,
    /// `criterion:<key>`, `evidence:<id>` or `ledger:<figure>`.
    pub link: Option<String>,
}

/// A rule of docs/decision.md: 1 to 9, and 6b (a managed model API is cheaper at the SLO). JSON
/// writes the numbered rules as numbers and 6b as the string "6b".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rule {
    Numbered(u8),
    ApiCheaper,
}

impl std::fmt::Display for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rule::Numbered(n) => write!(f, "{n}"),
            Rule::ApiCheaper => f.write_str("6b"),
        }
    }
}

impl Serialize for Rule {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rule::Numbered(n) => s.serialize_u8(*n),
            Rule::ApiCheaper => s.serialize_str("6b"),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// For rule 4: the suggested unit count.
    pub suggested_units: Option<u32>,
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
        if e2e > 0.0 && queue >= limits::QUEUE_SHARE_SATURATED * e2e {
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

pub fn decide(inputs: &DecisionInputs) -> Decision {
    let brief = &inputs.brief;
    // A criterion that does not apply to the trial's allocation is neither required nor missing.
    let required = || {
        inputs
            .criteria
            .iter()
            .filter(|c| c.required && c.status != Status::NotApplicable)
    };
    let accepted = required().all(|c| c.status == Status::Pass);
    let mut missing: BTreeMap<u8, Vec<String>> = BTreeMap::new();
    for c in required().filter(|c| c.status == Status::Missing) {
        missing.entry(c.stage).or_default().push(c.key.clone());
    }
    let (utilization, utilization_source) = utilization(inputs);
    let signals = saturation_signals(&inputs.metrics);
    let saturated = !signals.is_empty();
    let mut reasons = Vec::new();
    let mut suggested_units = None;

    // 1. A managed model API is the better abstraction.
    if brief.only_needs_model_output && !brief.needs_host_control && brief.data_boundary == "shared-ok" {
        reasons.push(Reason {
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
        });
    }

    // 2. The environment or its recovery failed.
    let mut env_facts: Vec<Fact> = required()
        .filter(|c| matches!(c.stage, 1 | 2 | 4) && c.status == Status::Fail)
        .map(criterion_fact)
        .collect();
    for key in ["dcgm.diag.passed", "checkpoint.restore_ok"] {
        if let Some(m) = false_metric(&inputs.metrics, key) {
            if !env_facts.iter().any(|f| f.label.starts_with(key)) {
                env_facts.push(fact(key, "false", Some(format!("evidence:{}", m.evidence_id))));
            }
        }
    }
    if !env_facts.is_empty() {
        reasons.push(Reason {
            rule: Rule::Numbered(2),
            decision: Verdict::Stop,
            says: "The environment or its recovery failed: fix or replace the allocation before any commitment.".into(),
            facts: env_facts,
        });
    }

    // 3. Cost per completed job above the ceiling.
    if let (Some(ledger), Some(ceiling)) = (&inputs.ledger, brief.max_cost_per_job) {
        if let Some(cost) = ledger.cost_per_job.filter(|c| *c > ceiling) {
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
            reasons.push(Reason {
                rule: Rule::Numbered(3),
                decision: Verdict::Stop,
                says: "Each completed job costs more than the brief's ceiling.".into(),
                facts,
            });
        }
    }

    // 4 and 5. A load (stage 3) SLO missed, with or without saturation.
    let load_failures: Vec<&CriterionOutcome> = required()
        .filter(|c| c.stage == 3 && c.status == Status::Fail)
        .collect();
    if !load_failures.is_empty() {
        let mut facts: Vec<Fact> = load_failures.iter().map(|c| criterion_fact(c)).collect();
        if saturated {
            let worst = load_failures
                .iter()
                .filter_map(|c| miss_ratio(c))
                .fold(1.0_f64, f64::max);
            let units = ((f64::from(brief.current_units.max(1)) * worst).ceil() as u32).max(brief.sized_count);
            suggested_units = Some(units);
            facts.extend(signals.iter().cloned());
            facts.push(fact("worst miss ratio", format!("{worst:.2}"), None));
            facts.push(fact("suggested units", units, None));
            reasons.push(Reason {
                rule: Rule::Numbered(4),
                decision: Verdict::Scale,
                says: format!(
                    "A load target was missed while the server was saturated: add capacity \
                     (suggested {units} units, from {} × the worst miss ratio; never below the sizing's {}).",
                    brief.current_units, brief.sized_count
                ),
                facts,
            });
        } else {
            reasons.push(Reason {
                rule: Rule::Numbered(5),
                decision: Verdict::Stop,
                says: "A load target was missed while the server was not saturated: more units will not fix it.".into(),
                facts,
            });
        }
    }

    // 6. Required criteria still missing.
    if !missing.is_empty() {
        let facts = missing
            .iter()
            .map(|(stage, keys)| fact(&format!("stage {stage}"), keys.join(", "), None))
            .collect();
        reasons.push(Reason {
            rule: Rule::Numbered(6),
            decision: Verdict::Expand,
            says: "Keep the short allocation until these are measured; no reservation before acceptance.".into(),
            facts,
        });
    }

    if accepted {
        // 6b. A managed model API is cheaper for this output than the trial at its SLO.
        if let Some(reason) = api_cheaper(brief, inputs.money.as_ref()) {
            reasons.push(reason);
        }
        // 7. Dedicated host needed.
        if brief.needs_host_control || brief.data_boundary == "dedicated-host" {
            let mut facts = Vec::new();
            if brief.needs_host_control {
                facts.push(fact("needs_host_control", true, None));
            }
            if brief.data_boundary == "dedicated-host" {
                facts.push(fact("data_boundary", "dedicated-host", None));
            }
            reasons.push(Reason {
                rule: Rule::Numbered(7),
                decision: Verdict::Dedicate,
                says: "Accepted, and the brief requires host-level control or a dedicated host.".into(),
                facts,
            });
        }
        // 8 and 9. Reserve when busy enough, else stay pay-as-you-go.
        match utilization {
            Some(u) if u >= limits::RESERVE_UTILIZATION => reasons.push(Reason {
                rule: Rule::Numbered(8),
                decision: Verdict::Reserve,
                says: format!(
                    "Accepted and busy: utilization {u} is at least 0.60 {}.",
                    utilization_source.describe()
                ),
                facts: vec![fact("utilization", u, utilization_source.link())],
            }),
            _ => {
                let batch = matches!(brief.workload_kind.as_str(), "batch-inference" | "media");
                reasons.push(Reason {
                    rule: Rule::Numbered(9),
                    decision: Verdict::Expand,
                    says: if batch {
                        "Accepted, but not busy enough to reserve: stay pay-as-you-go and prefer \
                         interruptible capacity with a resumable queue."
                            .into()
                    } else {
                        "Accepted, but not busy enough to reserve (or utilization unknown): stay pay-as-you-go.".into()
                    },
                    facts: vec![fact(
                        "utilization",
                        utilization.map(|u| u.to_string()).unwrap_or_else(|| "unknown".into()),
                        utilization_source.link(),
                    )],
                });
            }
        }
    }

    if reasons.is_empty() {
        // Not accepted, yet no rule above names why (e.g. a failed stage-5 criterion other than
        // cost): nothing may be committed, so the short allocation stays.
        reasons.push(Reason {
            rule: Rule::Numbered(9),
            decision: Verdict::Expand,
            says: "Not accepted: a required criterion failed; stay pay-as-you-go until it passes.".into(),
            facts: required()
                .filter(|c| c.status == Status::Fail)
                .map(criterion_fact)
                .collect(),
        });
    }
    let decision = reasons[0].decision;
    Decision {
        decision,
        accepted,
        reasons,
        missing,
        utilization,
        utilization_source,
        saturated,
        suggested_units,
        inputs_digest: inputs_digest(inputs),
    }
}

/// Rule 6b: the brief names a managed API's price per million output tokens, may leave the host
/// (no host-level control, boundary not dedicated-host), and a million output tokens at the SLO cost
/// more on this trial than on the API.
fn api_cheaper(brief: &BriefFacts, money: Option<&MoneyFacts>) -> Option<Reason> {
    let m = money?;
    let api = m.api_price_per_million_tokens?;
    let ours = m.cost_per_million_output_tokens_at_slo?;
    if brief.needs_host_control || brief.data_boundary == "dedicated-host" || ours <= api {
        return None;
    }
    let currency = &brief.currency;
    let mut facts = vec![
        fact(
            "cost per million output tokens at the SLO",
            with_currency(ours, currency),
            m.operating_point
                .as_ref()
                .map(|p| format!("evidence:{}", p.evidence_id)),
        ),
        fact(
            "managed API price per million output tokens",
            with_currency(api, currency),
            None,
        ),
    ];
    if let Some(p) = &m.operating_point {
        facts.push(fact(
            "traffic it assumes",
            format!(
                "{:.1} requests/s, {:.0} output tokens/s, {:.1} % of requests inside every target",
                p.rate_rps,
                p.output_tokens_per_s.unwrap_or(0.0),
                m.slo_attainment.unwrap_or(0.0) * 100.0
            ),
            Some(format!("evidence:{}", p.evidence_id)),
        ));
    }
    if let Some(hourly) = m.cost_per_hour {
        facts.push(fact(
            "accelerator cost per hour",
            with_currency(hourly, currency),
            m.rate_link(),
        ));
    }
    Some(Reason {
        rule: Rule::ApiCheaper,
        decision: Verdict::Stop,
        says: format!(
            "A managed model API is cheaper for this output: a million output tokens cost {} here at the \
             SLO against {} on the API. Setting needs_host_control or a dedicated-host data boundary \
             (if the workload truly needs them), a lower rate or more throughput per GPU would change this.",
            with_currency(ours, currency),
            with_currency(api, currency)
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
