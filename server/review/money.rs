//! Money per unit of work at the SLO, per trial (trials.md "Money per unit of work"): what an hour of
//! the trial's allocation costs, what a million output tokens cost (overall, and counting only the
//! share of requests that met every target), how much traffic one replica carries at the SLO, what
//! serving the brief's expected peak would cost a month, and whether a managed model API would be
//! cheaper. Pure: exact decimals for money; measured rates and shares come in as the tools print them.

use std::collections::BTreeSet;

use rust_decimal::{prelude::FromPrimitive, Decimal, RoundingStrategy};
use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

use crate::money::HOURS_PER_MONTH;

/// The attainment a load point needs to count towards capacity when the card sets none: the brief's
/// targets are p95 figures, so 95 % of requests within every target.
pub const DEFAULT_ATTAINMENT_TARGET: f64 = 0.95;

/// Where the hourly rate comes from, most specific first.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum RateSource {
    /// The trial's own `rate_per_gpu_hour`.
    Trial,
    /// A current price row of the trial's provider, GPU and billing.
    PriceRow { price_id: Uuid },
    /// What the ledger billed on average per GPU-hour.
    Ledger,
    /// The cheapest current price row of the trial's GPU, any provider (the trial names no rate,
    /// no provider row matches and nothing is billed yet).
    CheapestOffer { price_id: Uuid },
}

/// What an hour of the allocation costs: a rate per GPU-hour times the GPUs paid for (a price row
/// for 8-GPU nodes bills 8 for a 2-GPU trial).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    pub per_gpu_hour: Decimal,
    pub gpus_billed: u32,
    pub source: RateSource,
    /// Where it comes from, in words ("Lambda's on-demand price of 2026-11-01 (lambda.ai)").
    pub description: String,
}

/// One load point: a run of a load test at some request rate and how many requests met the targets.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LoadPoint {
    /// The run's name in a file of several (a sweep), else empty.
    pub run: String,
    pub evidence_id: Uuid,
    /// Requests per second the run achieved.
    pub rate_rps: f64,
    pub output_tokens_per_s: Option<f64>,
    /// Share of requests that met every target at once (0–1), when the run has per-request data.
    pub attainment: Option<f64>,
}

/// The load points of one load-test upload, read from its `serving.*` metrics: one per run of a
/// file with several (`serving.by_run.<run>.*`), else the file's own figures. A run without a
/// request rate is no load point.
pub fn load_points(evidence_id: Uuid, metrics: &Map<String, Value>) -> Vec<LoadPoint> {
    let num = |k: &str| {
        metrics
            .get(k)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    // Run names carry no dots (the parser replaces them), so the suffix is what follows the last.
    let runs: BTreeSet<&str> = metrics
        .keys()
        .filter_map(|k| k.strip_prefix("serving.by_run.")?.rsplit_once('.').map(|(run, _)| run))
        .collect();
    let point = |run: &str, prefix: &str| {
        Some(LoadPoint {
            run: run.to_owned(),
            evidence_id,
            rate_rps: num(&format!("{prefix}.request_throughput_rps"))?,
            output_tokens_per_s: num(&format!("{prefix}.output_tokens_per_s")),
            attainment: num(&format!("{prefix}.slo_attainment")).filter(|a| *a <= 1.0),
        })
    };
    if runs.is_empty() {
        point("", "serving").into_iter().collect()
    } else {
        runs.iter()
            .filter_map(|run| point(run, &format!("serving.by_run.{run}")))
            .collect()
    }
}

/// The headline figures of a load test (its un-suffixed keys: the run with the highest request
/// throughput when it has several).
pub fn headline(evidence_id: Uuid, metrics: &Map<String, Value>) -> Option<LoadPoint> {
    let mut only = metrics.clone();
    only.retain(|k, _| !k.starts_with("serving.by_run."));
    let mut p = load_points(evidence_id, &only).pop()?;
    p.run = metrics
        .get("serving.run")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    Some(p)
}

/// What the money figures are computed from.
#[derive(Debug, Clone, Default)]
pub struct MoneyInputs {
    pub rate: Option<Rate>,
    /// The brief's currency: every amount here is in it.
    pub currency: String,
    /// Every load point of the trial's load tests, newest upload first.
    pub points: Vec<LoadPoint>,
    /// The newest load test's headline figures.
    pub newest: Option<LoadPoint>,
    /// Each target's share from a metrics histogram (`serving.slo_attainment_<target>` with
    /// `serving.slo_attainment_estimated`), for when no load point has per-request data.
    pub estimated_shares: Vec<f64>,
    /// The card's attainment target, else [`DEFAULT_ATTAINMENT_TARGET`].
    pub attainment_target: f64,
    pub expected_peak_rps: Option<f64>,
    /// A managed model API's price per million output tokens (the brief's field).
    pub api_price_per_million_tokens: Option<Decimal>,
}

/// The money figures of one trial; each is absent while what it needs is not measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct MoneyFacts {
    pub currency: String,
    pub rate: Option<Rate>,
    pub cost_per_hour: Option<Decimal>,
    /// The load point the figures at the SLO describe: the highest rate that kept the attainment
    /// target (a sweep), else the newest load test's headline run.
    pub operating_point: Option<LoadPoint>,
    pub slo_attainment: Option<f64>,
    /// The attainment is an estimate from histograms: the lowest share of any single target, an
    /// upper bound of the share that met all of them at once.
    pub slo_attainment_estimated: bool,
    pub goodput_rps: Option<f64>,
    /// The newest load test's headline run (the overall cost per million tokens is at its throughput).
    pub headline: Option<LoadPoint>,
    /// At the newest load test's headline throughput, counting every output token.
    pub cost_per_million_output_tokens: Option<Decimal>,
    /// At the operating point, counting only tokens of requests that met every target.
    pub cost_per_million_output_tokens_at_slo: Option<Decimal>,
    /// The highest measured request rate whose attainment reached the target.
    pub capacity_at_slo_rps: Option<f64>,
    pub attainment_target: f64,
    pub load_points: Vec<LoadPoint>,
    /// Replicas of this allocation for the brief's expected peak, and what they cost a month.
    pub expected_peak_rps: Option<f64>,
    pub replicas_for_peak: Option<u32>,
    pub monthly_cost: Option<Decimal>,
    /// The API's price per million tokens and whether it is cheaper than this trial at the SLO.
    pub api_price_per_million_tokens: Option<Decimal>,
    pub api_is_cheaper: Option<bool>,
}

impl MoneyFacts {
    /// Where the rate can be checked: the price row, or the ledger.
    pub fn rate_link(&self) -> Option<String> {
        match &self.rate.as_ref()?.source {
            RateSource::PriceRow { price_id } | RateSource::CheapestOffer { price_id } => {
                Some(format!("price:{price_id}"))
            }
            RateSource::Ledger => Some("ledger:accelerator".into()),
            RateSource::Trial => None,
        }
    }

    /// The price rows the figures used (pinned by the review's digest).
    pub fn price_ids(&self) -> Vec<Uuid> {
        match self.rate.as_ref().map(|r| &r.source) {
            Some(RateSource::PriceRow { price_id } | RateSource::CheapestOffer { price_id }) => vec![*price_id],
            _ => Vec::new(),
        }
    }
}

fn decimal(x: f64) -> Option<Decimal> {
    Decimal::from_f64(x).filter(|d| !d.is_zero() && d.is_sign_positive())
}

/// Four decimal places, half away from zero: enough for a price per million tokens.
fn round4(d: Decimal) -> Decimal {
    d.round_dp_with_strategy(4, RoundingStrategy::MidpointAwayFromZero)
        .normalize()
}

pub fn money_facts(m: &MoneyInputs) -> MoneyFacts {
    let cost_per_hour = m.rate.as_ref().map(|r| r.per_gpu_hour * Decimal::from(r.gpus_billed));
    let per_million = |tokens_per_s: f64| -> Option<Decimal> {
        let hourly = cost_per_hour?;
        let tokens_per_hour = decimal(tokens_per_s)? * Decimal::from(3600);
        Some(round4(hourly * Decimal::from(1_000_000) / tokens_per_hour))
    };
    // The highest rate that kept the target; among equal rates the newest upload (listed first).
    let capacity_point = m
        .points
        .iter()
        .filter(|p| p.attainment.is_some_and(|a| a >= m.attainment_target))
        .fold(None::<&LoadPoint>, |best, p| match best {
            Some(b) if b.rate_rps >= p.rate_rps => Some(b),
            _ => Some(p),
        });
    let operating = capacity_point.or(m.newest.as_ref()).cloned();
    let estimated = m
        .estimated_shares
        .iter()
        .copied()
        .filter(|a| a.is_finite() && (0.0..=1.0).contains(a))
        .reduce(f64::min);
    let (attainment, attainment_estimated) = match (operating.as_ref().and_then(|p| p.attainment), estimated) {
        (Some(a), _) => (Some(a), false),
        (None, Some(e)) if operating.is_some() => (Some(e), true),
        _ => (None, false),
    };
    let cost_at_slo = match (operating.as_ref().and_then(|p| p.output_tokens_per_s), attainment) {
        (Some(t), Some(a)) if a > 0.0 => per_million(t * a),
        _ => None,
    };
    let capacity = capacity_point.map(|p| p.rate_rps);
    let replicas = match (m.expected_peak_rps, capacity) {
        (Some(peak), Some(cap)) if peak > 0.0 && cap > 0.0 => Some((peak / cap).ceil() as u32),
        _ => None,
    };
    let monthly = match (replicas, cost_per_hour) {
        (Some(n), Some(hourly)) => Some((Decimal::from(n) * hourly * HOURS_PER_MONTH).round_dp(2)),
        _ => None,
    };
    MoneyFacts {
        currency: m.currency.clone(),
        rate: m.rate.clone(),
        cost_per_hour,
        slo_attainment: attainment,
        slo_attainment_estimated: attainment_estimated,
        goodput_rps: match (attainment, operating.as_ref()) {
            (Some(a), Some(p)) => Some(a * p.rate_rps),
            _ => None,
        },
        operating_point: operating,
        cost_per_million_output_tokens: m
            .newest
            .as_ref()
            .and_then(|p| p.output_tokens_per_s)
            .and_then(per_million),
        headline: m.newest.clone(),
        cost_per_million_output_tokens_at_slo: cost_at_slo,
        capacity_at_slo_rps: capacity,
        attainment_target: m.attainment_target,
        load_points: m.points.clone(),
        expected_peak_rps: m.expected_peak_rps,
        replicas_for_peak: replicas,
        monthly_cost: monthly,
        api_price_per_million_tokens: m.api_price_per_million_tokens,
        api_is_cheaper: match (m.api_price_per_million_tokens, cost_at_slo) {
            (Some(api), Some(ours)) => Some(ours > api),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn d(s: &str) -> Decimal {
        s.parse().unwrap()
    }

    fn point(rate: f64, attainment: Option<f64>) -> LoadPoint {
        LoadPoint {
            run: format!("constant_{rate}rps"),
            evidence_id: Uuid::nil(),
            rate_rps: rate,
            output_tokens_per_s: Some(rate * 100.0),
            attainment,
        }
    }

    /// 2 GPUs at 2.50 an hour each; the newest load test ran at 10 requests/s, 1,000 output
    /// tokens/s, with 80 % of requests inside every target.
    fn inputs() -> MoneyInputs {
        let newest = LoadPoint {
            output_tokens_per_s: Some(1000.0),
            ..point(10.0, Some(0.8))
        };
        MoneyInputs {
            rate: Some(Rate {
                per_gpu_hour: d("2.50"),
                gpus_billed: 2,
                source: RateSource::Trial,
                description: "the trial's rate".into(),
            }),
            currency: "USD".into(),
            points: vec![newest.clone()],
            newest: Some(newest),
            attainment_target: DEFAULT_ATTAINMENT_TARGET,
            ..MoneyInputs::default()
        }
    }

    #[test]
    fn a_million_tokens_overall_and_at_the_slo_by_hand() {
        let f = money_facts(&inputs());
        // 2 GPUs × 2.50 = 5.00 an hour; 1,000 tokens/s = 3.6 M tokens an hour: 5.00 ÷ 3.6 = 1.3889
        // per million. At the SLO only the 80 % of requests inside every target count:
        // 5.00 ÷ 2.88 = 1.7361.
        assert_eq!(f.cost_per_hour, Some(d("5.00")));
        assert_eq!(f.cost_per_million_output_tokens, Some(d("1.3889")));
        assert_eq!(f.cost_per_million_output_tokens_at_slo, Some(d("1.7361")));
        // Goodput: 80 % of 10 requests/s.
        assert!((f.goodput_rps.unwrap() - 8.0).abs() < 1e-9);
        assert_eq!(f.capacity_at_slo_rps, None, "80 % is below the 95 % target");
        assert!(!f.slo_attainment_estimated);
    }

    #[test]
    fn a_price_row_for_bigger_nodes_bills_every_gpu_of_the_node() {
        let mut m = inputs();
        m.rate = Some(Rate {
            per_gpu_hour: d("2.50"),
            gpus_billed: 8,
            source: RateSource::PriceRow { price_id: Uuid::nil() },
            description: "Lambda's on-demand price for 8-GPU nodes".into(),
        });
        let f = money_facts(&m);
        assert_eq!(f.cost_per_hour, Some(d("20.00")));
        assert_eq!(f.price_ids(), [Uuid::nil()]);
        assert_eq!(f.rate_link(), Some(format!("price:{}", Uuid::nil())));
    }

    #[test]
    fn without_a_rate_or_tokens_there_is_no_price_per_token() {
        let mut m = inputs();
        m.rate = None;
        assert_eq!(money_facts(&m).cost_per_million_output_tokens, None);
        let mut m = inputs();
        m.newest.as_mut().unwrap().output_tokens_per_s = None;
        m.points.clear();
        assert_eq!(money_facts(&m).cost_per_million_output_tokens_at_slo, None);
        let mut m = inputs();
        m.newest.as_mut().unwrap().attainment = None;
        m.points.clear();
        let f = money_facts(&m);
        assert!(f.cost_per_million_output_tokens.is_some());
        assert_eq!(
            f.cost_per_million_output_tokens_at_slo, None,
            "no attainment, no figure at the SLO"
        );
        assert_eq!(f.goodput_rps, None);
    }

    #[test]
    fn histogram_shares_give_a_marked_estimate_bounded_by_the_worst_target() {
        let mut m = inputs();
        m.newest.as_mut().unwrap().attainment = None;
        m.points.clear();
        m.estimated_shares = vec![0.97, 0.9, 0.99];
        let f = money_facts(&m);
        assert_eq!(f.slo_attainment, Some(0.9));
        assert!(f.slo_attainment_estimated);
        assert!((f.goodput_rps.unwrap() - 9.0).abs() < 1e-9);
        // Per-request data wins over the estimate.
        let mut m = inputs();
        m.estimated_shares = vec![0.5];
        assert_eq!(money_facts(&m).slo_attainment, Some(0.8));
    }

    #[test]
    fn capacity_is_the_highest_rate_that_kept_the_slo_and_replicas_follow() {
        let mut m = inputs();
        m.points = vec![
            point(4.0, Some(1.0)),
            point(8.0, Some(0.99)),
            point(12.0, Some(0.96)),
            point(16.0, Some(0.71)),
            point(20.0, None),
        ];
        m.expected_peak_rps = Some(30.0);
        let f = money_facts(&m);
        assert_eq!(f.capacity_at_slo_rps, Some(12.0), "16 requests/s kept only 71 %");
        // The figures at the SLO are those of the 12 requests/s run: 1,200 tokens/s, 96 % inside.
        assert_eq!(f.operating_point.as_ref().unwrap().rate_rps, 12.0);
        assert_eq!(f.slo_attainment, Some(0.96));
        // 5.00 ÷ (1,200 × 0.96 × 3600 ÷ 10^6) = 5.00 ÷ 4.1472 = 1.2056.
        assert_eq!(f.cost_per_million_output_tokens_at_slo, Some(d("1.2056")));
        // 30 requests/s at 12 per replica: 3 replicas × 5.00 an hour × 730 h = 10,950.00 a month.
        assert_eq!(f.replicas_for_peak, Some(3));
        assert_eq!(f.monthly_cost, Some(d("10950")));
        m.attainment_target = 0.99;
        assert_eq!(money_facts(&m).capacity_at_slo_rps, Some(8.0), "a stricter target");
        m.points = vec![point(4.0, Some(0.5))];
        let f = money_facts(&m);
        assert_eq!(f.capacity_at_slo_rps, None, "no load point kept the SLO");
        assert_eq!(f.replicas_for_peak, None);
        assert_eq!(f.operating_point, m.newest, "without a capacity point, the newest test");
    }

    #[test]
    fn the_api_break_even_compares_prices_at_the_slo() {
        let mut m = inputs();
        m.api_price_per_million_tokens = Some(d("1.50"));
        assert_eq!(money_facts(&m).api_is_cheaper, Some(true), "1.7361 at the SLO > 1.50");
        m.api_price_per_million_tokens = Some(d("2.00"));
        assert_eq!(money_facts(&m).api_is_cheaper, Some(false));
        m.newest.as_mut().unwrap().attainment = None;
        m.points.clear();
        assert_eq!(
            money_facts(&m).api_is_cheaper,
            None,
            "unknown without the figure at the SLO"
        );
    }

    #[test]
    fn load_points_come_from_every_run_of_a_sweep_or_the_file_itself() {
        let id = Uuid::from_u128(3);
        let sweep = json!({
            "serving.request_throughput_rps": 15.9,
            "serving.run": "constant_16rps",
            "serving.by_run.constant_4rps.request_throughput_rps": 4.0,
            "serving.by_run.constant_4rps.slo_attainment": 1.0,
            "serving.by_run.constant_4rps.output_tokens_per_s": 410.0,
            "serving.by_run.constant_16rps.request_throughput_rps": 15.9,
            "serving.by_run.constant_16rps.slo_attainment": 0.62,
            "serving.by_run.no_rate.slo_attainment": 0.5,
        });
        let points = load_points(id, sweep.as_object().unwrap());
        let runs: Vec<(&str, f64)> = points.iter().map(|p| (p.run.as_str(), p.rate_rps)).collect();
        assert_eq!(
            runs,
            [("constant_16rps", 15.9), ("constant_4rps", 4.0)],
            "a run without a rate is no point"
        );
        assert_eq!(points[1].output_tokens_per_s, Some(410.0));
        let head = headline(id, sweep.as_object().unwrap()).unwrap();
        assert_eq!((head.run.as_str(), head.rate_rps), ("constant_16rps", 15.9));
        let single = json!({ "serving.request_throughput_rps": 7.5, "serving.slo_attainment": 0.99 });
        let points = load_points(id, single.as_object().unwrap());
        assert_eq!(points.len(), 1);
        assert_eq!(points[0].attainment, Some(0.99));
    }
}
