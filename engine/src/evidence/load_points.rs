//! Load points and a trial's operating point (docs/trials.md, "Load points and the operating
//! point"). Pure: the stored `serving.*` metrics of load-test uploads in, points and a choice out.
//!
//! A load test yields one or more **load points**: a file with one result is one point; a file of
//! several runs (a `vllm bench sweep` array, JSON Lines, a GuideLLM sweep) stores each run under
//! `serving.by_run.<run>.<suffix>` and each run is a point. A point carries the rate it was offered
//! (or its concurrency), what it achieved, how long it ran, what completed and failed, its latency
//! quantiles, and — with per-request data — its attainment and goodput.
//!
//! The **operating point** of a trial is the point with the highest achieved request throughput
//! whose attainment reaches the card's target and whose required latency criteria pass; when no
//! point qualifies, the point with the lowest offered rate (the best case, so the failure the card
//! reports is the honest one). Ties are broken by the figures and then by evidence id and run name,
//! never by upload order, so the same points give the same choice whichever arrived first.

use std::{cmp::Ordering, collections::BTreeMap};

use serde::Serialize;
use serde_json::{Map, Value};
use uuid::Uuid;

/// The attainment a point needs when the card sets none: the brief's targets are p95 figures, so
/// 95 % of requests within every target.
pub const DEFAULT_ATTAINMENT_TARGET: f64 = 0.95;

/// The server kept up with the load when what it achieved is within this share of the offered rate
/// (5 %, either way): then the offered rate is the capacity, else the achieved throughput is.
pub const KEPT_UP_WITHIN: f64 = 0.05;

/// Why a load-test criterion fails when nothing of its load point completed.
pub const NOTHING_COMPLETED: &str = "no request completed";

/// One load point.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct LoadPoint {
    pub evidence_id: Uuid,
    /// The run's name in a file of several (a sweep), else empty.
    pub run: String,
    /// The request rate asked for (none for "as fast as possible").
    pub offered_rps: Option<f64>,
    /// The number of requests kept in flight, when the load was set that way.
    pub concurrency: Option<f64>,
    /// Requests per second the run achieved (completed ÷ duration).
    pub achieved_rps: Option<f64>,
    pub duration_s: Option<f64>,
    pub completed: Option<f64>,
    pub failed: Option<f64>,
    pub output_tokens_per_s: Option<f64>,
    /// Good requests ÷ requests sent (0–1), from per-request data.
    pub attainment: Option<f64>,
    /// Good requests ÷ the run's duration.
    pub goodput_rps: Option<f64>,
    /// Output tokens of good requests ÷ the run's duration.
    pub good_output_tokens_per_s: Option<f64>,
    /// This point's own figures under their un-suffixed keys (`serving.ttft_p95_ms`), for the
    /// card's stage-3 criteria.
    #[serde(skip)]
    pub metrics: BTreeMap<String, Value>,
}

impl LoadPoint {
    /// A number of this point by its un-suffixed key.
    pub fn number(&self, key: &str) -> Option<f64> {
        self.metrics
            .get(key)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
    }

    /// Every request sent failed (the tools write 0 for every latency of such a run).
    pub fn nothing_completed(&self) -> bool {
        self.completed == Some(0.0)
    }

    /// Requests sent: completed + failed, when both are known.
    pub fn sent(&self) -> Option<f64> {
        Some(self.completed? + self.failed.unwrap_or(0.0))
    }

    /// What this point can carry at the SLO: the offered rate when the server kept up with it
    /// (achieved within 5 % of it), else what it achieved.
    pub fn capacity_rps(&self) -> Option<f64> {
        match (self.offered_rps, self.achieved_rps) {
            // 1e-9: 7.6 of 8 is 5 % exactly, though 8 − 7.6 is 0.40000000000000036 in binary.
            (Some(offered), Some(achieved)) if (achieved - offered).abs() <= offered * KEPT_UP_WITHIN + 1e-9 => {
                Some(offered)
            }
            (_, Some(achieved)) => Some(achieved),
            (Some(offered), None) => Some(offered),
            (None, None) => None,
        }
    }

    /// The load as people read it: "8 req/s", "64 at once", or the achieved throughput.
    pub fn load_label(&self) -> String {
        match (self.offered_rps, self.concurrency, self.achieved_rps) {
            (Some(r), _, _) => format!("{} req/s", crate::figures::figure(r)),
            (None, Some(c), _) => format!("{} requests at once", crate::figures::figure(c)),
            (None, None, Some(a)) => format!("{} req/s achieved", crate::figures::figure(a)),
            _ => "one load test".into(),
        }
    }
}

/// The metric keys a load test measures; at stage 3 they come from the operating point.
pub fn is_load_test_key(key: &str) -> bool {
    let Some(rest) = key.strip_prefix("serving.") else {
        return false;
    };
    let latency = ["ttft_", "tpot_", "itl_", "e2e_"]
        .iter()
        .any(|m| rest.starts_with(m) && rest.ends_with("_ms"));
    latency
        || rest.starts_with("slo_attainment")
        || matches!(
            rest,
            "request_throughput_rps"
                | "output_tokens_per_s"
                | "total_tokens_per_s"
                | "error_rate"
                | "goodput_rps"
                | "completed"
                | "failed"
        )
}

/// The load points of one load-test upload, from its stored `serving.*` metrics: one per run of
/// a file with several (`serving.by_run.<run>.*`), else the file's own figures.
pub fn load_points(evidence_id: Uuid, metrics: &Map<String, Value>) -> Vec<LoadPoint> {
    // Run names carry no dots (the parser replaces them), so the suffix follows the last dot.
    let mut runs: BTreeMap<&str, BTreeMap<String, Value>> = BTreeMap::new();
    for (k, v) in metrics {
        if let Some((run, suffix)) = k.strip_prefix("serving.by_run.").and_then(|r| r.rsplit_once('.')) {
            runs.entry(run)
                .or_default()
                .insert(format!("serving.{suffix}"), v.clone());
        }
    }
    if runs.is_empty() {
        let own: BTreeMap<String, Value> = metrics
            .iter()
            .filter(|(k, _)| k.starts_with("serving.") && !k.starts_with("serving.by_"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        return point(evidence_id, "", own).into_iter().collect();
    }
    runs.into_iter()
        .filter_map(|(run, own)| point(evidence_id, run, own))
        .collect()
}

fn point(evidence_id: Uuid, run: &str, metrics: BTreeMap<String, Value>) -> Option<LoadPoint> {
    let num = |k: &str| {
        metrics
            .get(k)
            .and_then(Value::as_f64)
            .filter(|x| x.is_finite() && *x >= 0.0)
    };
    let p = LoadPoint {
        evidence_id,
        run: run.to_owned(),
        offered_rps: num("serving.offered_rps").filter(|r| *r > 0.0),
        // Uploads read before parser version 8 named the load tool's concurrency as vLLM's
        // start-up figure is named; here, of a load test, it can only be the tool's.
        concurrency: num("serving.load_concurrency")
            .or_else(|| num("serving.max_concurrency"))
            .filter(|c| *c > 0.0),
        achieved_rps: num("serving.request_throughput_rps"),
        duration_s: num("serving.duration_s").filter(|d| *d > 0.0),
        completed: num("serving.completed"),
        failed: num("serving.failed"),
        output_tokens_per_s: num("serving.output_tokens_per_s"),
        attainment: num("serving.slo_attainment").filter(|a| *a <= 1.0),
        goodput_rps: num("serving.goodput_rps"),
        good_output_tokens_per_s: num("serving.good_output_tokens_per_s"),
        metrics: BTreeMap::new(),
    };
    // A run that measured nothing a card or the money reads is no load point.
    let measured = metrics.keys().any(|k| is_load_test_key(k));
    measured.then_some(LoadPoint { metrics, ..p })
}

/// The operating point: which point, and whether it met the target (else it is the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Operating {
    pub index: usize,
    /// It reached the attainment target and its latency criteria pass.
    pub qualified: bool,
}

/// Lower is better for the fallback: the lowest offered rate, then the fewest requests at once,
/// then the lowest achieved throughput; an unknown figure sorts last.
fn by_offered_load(a: &LoadPoint, b: &LoadPoint) -> Ordering {
    let key = |p: &LoadPoint| [p.offered_rps, p.concurrency, p.achieved_rps].map(|x| x.unwrap_or(f64::INFINITY));
    let (ka, kb) = (key(a), key(b));
    ka.iter()
        .zip(kb.iter())
        .map(|(x, y)| x.total_cmp(y))
        .find(|o| o.is_ne())
        .unwrap_or(Ordering::Equal)
        .then_with(|| identity(a, b))
}

/// Upload order never decides: the evidence id and the run name do.
fn identity(a: &LoadPoint, b: &LoadPoint) -> Ordering {
    a.evidence_id.cmp(&b.evidence_id).then_with(|| a.run.cmp(&b.run))
}

/// The operating point of `points`: the highest achieved throughput among the points whose
/// attainment reaches `attainment_target` (a point without per-request data is judged on its
/// latencies alone), that completed something and that `latencies_pass`; else the point with the
/// lowest offered rate. `None` without points.
pub fn operating_point(
    points: &[LoadPoint],
    attainment_target: f64,
    latencies_pass: &dyn Fn(&LoadPoint) -> bool,
) -> Option<Operating> {
    let qualifies = |p: &LoadPoint| {
        !p.nothing_completed() && p.attainment.is_none_or(|a| a >= attainment_target) && latencies_pass(p)
    };
    let best = points
        .iter()
        .enumerate()
        .filter(|(_, p)| qualifies(p))
        .max_by(|(_, a), (_, b)| {
            let rps = |p: &LoadPoint| p.achieved_rps.unwrap_or(f64::NEG_INFINITY);
            rps(a)
                .total_cmp(&rps(b))
                // Equal throughput: the lower offered load is the truer capacity.
                .then_with(|| by_offered_load(b, a))
        })
        .map(|(index, _)| Operating { index, qualified: true });
    best.or_else(|| {
        points
            .iter()
            .enumerate()
            .min_by(|(_, a), (_, b)| by_offered_load(a, b))
            .map(|(index, _)| Operating {
                index,
                qualified: false,
            })
    })
}

/// "judged at 8 req/s of the 4–16 req/s sweep": where the trial's load figures come from.
pub fn describe(points: &[LoadPoint], operating: Operating) -> String {
    let Some(p) = points.get(operating.index) else {
        return String::new();
    };
    let at = p.load_label();
    if points.len() < 2 {
        return format!("judged at {at}, the one load point");
    }
    let range = |of: fn(&LoadPoint) -> Option<f64>, unit: &str| {
        let xs: Vec<f64> = points.iter().filter_map(of).collect();
        (xs.len() == points.len()).then(|| {
            let lo = xs.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = xs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            format!("{}–{} {unit}", crate::figures::figure(lo), crate::figures::figure(hi))
        })
    };
    let span = range(|p| p.offered_rps, "req/s")
        .or_else(|| range(|p| p.concurrency, "at once"))
        .or_else(|| range(|p| p.achieved_rps, "req/s achieved"));
    match span {
        Some(span) => format!("judged at {at} of the {span} sweep ({} load points)", points.len()),
        None => format!("judged at {at} of {} load points", points.len()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn p(id: u128, offered: f64, achieved: f64, attainment: Option<f64>, ttft: f64) -> LoadPoint {
        let metrics = json!({
            "serving.offered_rps": offered,
            "serving.request_throughput_rps": achieved,
            "serving.completed": 100.0,
            "serving.failed": 0.0,
            "serving.ttft_p95_ms": ttft,
        });
        let mut metrics = metrics.as_object().unwrap().clone();
        if let Some(a) = attainment {
            metrics.insert("serving.slo_attainment".into(), json!(a));
        }
        load_points(Uuid::from_u128(id), &metrics).remove(0)
    }

    fn ttft_under(limit: f64) -> impl Fn(&LoadPoint) -> bool {
        move |p| p.number("serving.ttft_p95_ms").is_none_or(|v| v <= limit)
    }

    #[test]
    fn the_busiest_point_that_keeps_the_target_whatever_the_order() {
        let sweep = vec![
            p(1, 4.0, 4.0, Some(1.0), 120.0),
            p(2, 8.0, 7.9, Some(0.97), 300.0),
            p(3, 16.0, 11.0, Some(0.40), 2400.0),
        ];
        let pass = ttft_under(500.0);
        let op = operating_point(&sweep, 0.95, &pass).unwrap();
        assert_eq!((sweep[op.index].run.as_str(), op.qualified), ("", true));
        assert_eq!(sweep[op.index].offered_rps, Some(8.0));
        let mut reversed = sweep.clone();
        reversed.reverse();
        let again = operating_point(&reversed, 0.95, &pass).unwrap();
        assert_eq!(reversed[again.index], sweep[op.index], "upload order never decides");
        // 7.9 of 8 offered is within 5 %: the server kept up, so 8 req/s is the capacity.
        assert_eq!(sweep[op.index].capacity_rps(), Some(8.0));
        assert_eq!(sweep[2].capacity_rps(), Some(11.0), "overloaded: what it achieved");
        // Within 5 % either way, 5 % itself included; beyond it above (a burst of a short run)
        // the achieved rate is what was carried.
        let at = |offered: f64, achieved: f64| p(4, offered, achieved, Some(1.0), 100.0).capacity_rps();
        assert_eq!(at(8.0, 7.6), Some(8.0));
        assert_eq!(at(8.0, 8.4), Some(8.0));
        assert_eq!(at(8.0, 8.5), Some(8.5), "6.25 % above: not within 5 %");
        assert_eq!(at(8.0, 7.5), Some(7.5));
        assert_eq!(
            describe(&sweep, op),
            "judged at 8 req/s of the 4–16 req/s sweep (3 load points)"
        );
    }

    #[test]
    fn a_latency_miss_disqualifies_and_with_none_left_the_lowest_offered_rate_is_judged() {
        let sweep = vec![
            p(3, 16.0, 11.0, Some(0.40), 2400.0),
            p(1, 4.0, 4.0, Some(0.90), 120.0),
            p(2, 8.0, 7.9, Some(0.97), 900.0),
        ];
        let op = operating_point(&sweep, 0.95, &ttft_under(500.0)).unwrap();
        assert_eq!((sweep[op.index].offered_rps, op.qualified), (Some(4.0), false));
        assert!(operating_point(&[], 0.95, &ttft_under(500.0)).is_none());
    }

    #[test]
    fn a_run_where_nothing_completed_never_qualifies() {
        let mut failed = p(1, 2.0, 0.0, None, 0.0);
        failed.completed = Some(0.0);
        assert!(failed.nothing_completed());
        let op = operating_point(std::slice::from_ref(&failed), 0.95, &|_| true).unwrap();
        assert!(!op.qualified);
    }

    #[test]
    fn each_run_of_a_sweep_is_a_point_and_a_run_without_figures_is_none() {
        let id = Uuid::from_u128(3);
        let sweep = json!({
            "serving.request_throughput_rps": 15.9,
            "serving.run": "rate_16",
            "serving.by_run.rate_4.request_throughput_rps": 4.0,
            "serving.by_run.rate_4.offered_rps": 4.0,
            "serving.by_run.rate_4.slo_attainment": 1.0,
            "serving.by_run.rate_16.request_throughput_rps": 15.9,
            "serving.by_run.rate_16.ttft_p95_ms": 812.0,
            "serving.by_run.notes.model": "m",
        });
        let points = load_points(id, sweep.as_object().unwrap());
        let runs: Vec<&str> = points.iter().map(|p| p.run.as_str()).collect();
        assert_eq!(runs, ["rate_16", "rate_4"]);
        assert_eq!(points[0].number("serving.ttft_p95_ms"), Some(812.0));
        assert!(is_load_test_key("serving.e2e_p99_9_ms") && !is_load_test_key("serving.queue_time_p95_ms"));
    }
}
