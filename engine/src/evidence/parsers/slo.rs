//! SLO attainment: the share of requests that met every latency target of the brief at once, judged
//! per request the way vLLM's `--goodput` judges it — time to first token, the request's mean time
//! per output token, and its end-to-end latency, each at or below its target, for the targets the
//! brief sets. A failed request is a miss. Attainment is good requests ÷ requests sent (completed +
//! failed); goodput is good requests ÷ the run's duration, as vLLM's `request_goodput` counts it
//! (a failed request is counted once: as a request that is not good). A completed request without
//! output tokens has no time per output token: it cannot miss that target.
//!
//! From histograms (`/metrics`) no request can be followed through all three figures, so only one
//! target at a time can be estimated: the share of observations at or below the target, read off the
//! cumulative buckets with the same linear interpolation `histogram_quantile` uses.

/// The brief's latency targets, in milliseconds. The brief calls them `ttft_p95_ms`, `itl_p95_ms` and
/// `e2e_p95_ms`; each request is held to them.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SloTargets {
    pub ttft_ms: Option<f64>,
    /// Mean time per output token of one request (the brief's inter-token latency target).
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
}

impl SloTargets {
    pub fn is_empty(&self) -> bool {
        self.ttft_ms.is_none() && self.tpot_ms.is_none() && self.e2e_ms.is_none()
    }

    /// The set targets that are usable (finite and above zero): (key suffix, target).
    fn set(&self) -> Vec<(Target, f64)> {
        [
            (Target::Ttft, self.ttft_ms),
            (Target::Tpot, self.tpot_ms),
            (Target::E2e, self.e2e_ms),
        ]
        .into_iter()
        .filter_map(|(t, v)| v.filter(|v| v.is_finite() && *v > 0.0).map(|v| (t, v)))
        .collect()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Ttft,
    Tpot,
    E2e,
}

impl Target {
    fn suffix(self) -> &'static str {
        match self {
            Target::Ttft => "ttft",
            Target::Tpot => "itl",
            Target::E2e => "e2e",
        }
    }
    fn of(self, r: &RequestSample) -> Option<f64> {
        match self {
            Target::Ttft => r.ttft_ms,
            Target::Tpot => r.tpot_ms,
            Target::E2e => r.e2e_ms,
        }
    }
}

/// One request as the benchmark recorded it. Figures a format does not record are `None`.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RequestSample {
    /// Completed without an error.
    pub ok: bool,
    pub ttft_ms: Option<f64>,
    /// `(e2e − ttft) / (output tokens − 1)`, 0 for a one-token answer (as vLLM computes it).
    pub tpot_ms: Option<f64>,
    pub e2e_ms: Option<f64>,
    /// Prompt and output tokens of the request, when the format records them.
    pub input_tokens: Option<f64>,
    pub output_tokens: Option<f64>,
}

impl RequestSample {
    /// Completed, but with no output token: there is no time per output token to judge.
    fn no_output(&self) -> bool {
        self.ok && self.tpot_ms.is_none() && self.output_tokens == Some(0.0)
    }
}

/// What [`attainment`] found.
#[derive(Debug, Clone, PartialEq)]
pub struct Attainment {
    /// Requests that met every judged target.
    pub met: usize,
    /// Requests judged (failed ones included).
    pub total: usize,
    /// `met / total`.
    pub fraction: f64,
    /// Per target: (key suffix `ttft` | `itl` | `e2e`, share of requests that met it).
    pub per_target: Vec<(&'static str, f64)>,
    /// Targets the brief sets that no request's data can judge (the format does not record them).
    pub not_judged: Vec<&'static str>,
    /// Output and prompt tokens of the good requests, when every good request records them.
    pub good_output_tokens: Option<f64>,
    pub good_input_tokens: Option<f64>,
}

/// Attainment of `requests` against `targets`; None when no target is set or there is no request.
pub fn attainment(requests: &[RequestSample], targets: &SloTargets) -> Option<Attainment> {
    let set = targets.set();
    if set.is_empty() || requests.is_empty() {
        return None;
    }
    // Nothing completed: every request sent is a miss, whatever the format records.
    if !requests.iter().any(|r| r.ok) {
        return Some(Attainment {
            met: 0,
            total: requests.len(),
            fraction: 0.0,
            per_target: set.iter().map(|(t, _)| (t.suffix(), 0.0)).collect(),
            not_judged: Vec::new(),
            good_output_tokens: Some(0.0),
            good_input_tokens: Some(0.0),
        });
    }
    // A target no successful request has a figure for cannot be judged: leave it out (and say so)
    // rather than fail every request on it.
    let (judged, not_judged): (Vec<_>, Vec<_>) = set
        .into_iter()
        .partition(|(t, _)| requests.iter().any(|r| r.ok && t.of(r).is_some()));
    if judged.is_empty() {
        return Some(Attainment {
            met: 0,
            total: requests.len(),
            fraction: f64::NAN,
            per_target: Vec::new(),
            not_judged: not_judged.iter().map(|(t, _)| t.suffix()).collect(),
            good_output_tokens: None,
            good_input_tokens: None,
        });
    }
    let meets = |r: &RequestSample, t: Target, limit: f64| {
        r.ok && (t.of(r).is_some_and(|v| v <= limit) || (t == Target::Tpot && r.no_output()))
    };
    let good: Vec<&RequestSample> = requests
        .iter()
        .filter(|r| judged.iter().all(|(t, limit)| meets(r, *t, *limit)))
        .collect();
    let met = good.len();
    let tokens = |of: fn(&RequestSample) -> Option<f64>| -> Option<f64> {
        good.iter()
            .map(|r| of(r).filter(|n| n.is_finite() && *n >= 0.0))
            .sum::<Option<f64>>()
    };
    let total = requests.len();
    Some(Attainment {
        met,
        total,
        fraction: met as f64 / total as f64,
        per_target: judged
            .iter()
            .map(|(t, limit)| {
                let n = requests.iter().filter(|r| meets(r, *t, *limit)).count();
                (t.suffix(), n as f64 / total as f64)
            })
            .collect(),
        not_judged: not_judged.iter().map(|(t, _)| t.suffix()).collect(),
        good_output_tokens: tokens(|r| r.output_tokens),
        good_input_tokens: tokens(|r| r.input_tokens),
    })
}

/// Share of a histogram's observations at or below `x`, from cumulative buckets
/// `(upper bound, cumulative count)` that include `+Inf`. Buckets of several series (a model's
/// data-parallel engines, several models) come together: the counts of one bound add up, as
/// Prometheus' `sum by (le)` adds them. Inside a bucket the observations are taken as spread evenly
/// (Prometheus' own assumption); above the last finite bound nothing is known, so those
/// observations count as above `x`. None when the histogram is empty or has no `+Inf` bucket.
pub fn histogram_share_at_or_below(x: f64, buckets: &[(f64, f64)]) -> Option<f64> {
    if !x.is_finite() || buckets.iter().any(|(u, c)| u.is_nan() || c.is_nan()) {
        return None;
    }
    let mut sorted: Vec<(f64, f64)> = buckets.to_vec();
    sorted.sort_by(|p, q| p.0.total_cmp(&q.0));
    let mut b: Vec<(f64, f64)> = Vec::with_capacity(sorted.len());
    for (upper, count) in sorted {
        match b.last_mut() {
            Some(last) if last.0 == upper => last.1 += count,
            _ => b.push((upper, count)),
        }
    }
    let total = b.iter().find(|(u, _)| *u == f64::INFINITY).map(|(_, c)| *c)?;
    if total <= 0.0 {
        return None;
    }
    let mut prev = (0.0_f64, 0.0_f64);
    let mut max_count = 0.0_f64;
    for &(upper, count) in &b {
        // Counts are cumulative: a smaller one later is a broken exposition; keep them monotonic.
        let count = count.max(max_count);
        max_count = count;
        if upper == f64::INFINITY {
            return Some((prev.1 / total).clamp(0.0, 1.0));
        }
        if x < upper {
            if x <= prev.0 || upper <= prev.0 {
                return Some((prev.1 / total).clamp(0.0, 1.0));
            }
            let inside = (count - prev.1) * (x - prev.0) / (upper - prev.0);
            return Some(((prev.1 + inside) / total).clamp(0.0, 1.0));
        }
        prev = (upper, count);
    }
    Some((prev.1 / total).clamp(0.0, 1.0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(ok: bool, ttft: f64, tpot: f64, e2e: f64) -> RequestSample {
        RequestSample {
            ok,
            ttft_ms: Some(ttft),
            tpot_ms: Some(tpot),
            e2e_ms: Some(e2e),
            input_tokens: Some(100.0),
            output_tokens: Some(10.0),
        }
    }

    #[test]
    fn every_target_at_once_and_failures_are_misses() {
        let rs = [
            req(true, 100.0, 20.0, 1000.0),  // meets all
            req(true, 300.0, 20.0, 1000.0),  // ttft miss
            req(true, 100.0, 50.0, 1000.0),  // tpot miss
            req(false, 100.0, 20.0, 1000.0), // failed
            req(true, 200.0, 30.0, 2000.0),  // exactly on every target: meets
        ];
        let t = SloTargets {
            ttft_ms: Some(200.0),
            tpot_ms: Some(30.0),
            e2e_ms: Some(2000.0),
        };
        let a = attainment(&rs, &t).unwrap();
        assert_eq!((a.met, a.total), (2, 5));
        assert_eq!(a.fraction, 0.4);
        // ttft: requests 1, 3, 5 meet (4 failed) = 3/5; tpot: 1, 2, 5 = 3/5; e2e: all but the failed = 4/5.
        assert_eq!(a.per_target, vec![("ttft", 0.6), ("itl", 0.6), ("e2e", 0.8)]);
        // The two good requests' tokens: 2 × 10 output, 2 × 100 prompt.
        assert_eq!((a.good_output_tokens, a.good_input_tokens), (Some(20.0), Some(200.0)));
        assert!(attainment(&rs, &SloTargets::default()).is_none());
    }

    #[test]
    fn a_completed_request_without_output_tokens_cannot_miss_the_time_per_token() {
        let empty = RequestSample {
            ok: true,
            ttft_ms: Some(50.0),
            tpot_ms: None,
            e2e_ms: Some(60.0),
            input_tokens: Some(10.0),
            output_tokens: Some(0.0),
        };
        let t = SloTargets {
            ttft_ms: Some(100.0),
            tpot_ms: Some(30.0),
            e2e_ms: None,
        };
        let a = attainment(&[empty, req(true, 50.0, 40.0, 60.0)], &t).unwrap();
        assert_eq!(
            (a.met, a.total),
            (1, 2),
            "the empty answer is good; the slow one is not"
        );
        assert_eq!(a.good_output_tokens, Some(0.0));
    }

    #[test]
    fn a_target_the_format_cannot_judge_is_named_not_failed() {
        let rs = [RequestSample {
            ok: true,
            ttft_ms: Some(50.0),
            ..RequestSample::default()
        }];
        let t = SloTargets {
            ttft_ms: Some(100.0),
            tpot_ms: None,
            e2e_ms: Some(10.0),
        };
        let a = attainment(&rs, &t).unwrap();
        assert_eq!((a.met, a.fraction), (1, 1.0));
        assert_eq!(a.not_judged, vec!["e2e"]);
    }

    #[test]
    fn histogram_share_interpolates_inside_the_bucket() {
        // 10 observations: 4 in (0, 0.1], 4 in (0.1, 0.5], 2 above 0.5.
        let b = [(0.1, 4.0), (0.5, 8.0), (f64::INFINITY, 10.0)];
        assert_eq!(histogram_share_at_or_below(0.1, &b), Some(0.4));
        // 0.3 is half-way through (0.1, 0.5]: 4 + 4 × 0.5 = 6 of 10.
        assert_eq!(histogram_share_at_or_below(0.3, &b), Some(0.6));
        // 0.05 is half-way through (0, 0.1]: 2 of 10.
        assert_eq!(histogram_share_at_or_below(0.05, &b), Some(0.2));
        // Beyond the last finite bound the +Inf bucket's observations stay above.
        assert_eq!(histogram_share_at_or_below(9.0, &b), Some(0.8));
        assert_eq!(histogram_share_at_or_below(0.3, &[(0.1, 4.0)]), None);
        assert_eq!(histogram_share_at_or_below(0.3, &[(f64::INFINITY, 0.0)]), None);
    }

    #[test]
    fn two_engines_buckets_add_up_by_bound() {
        // Data-parallel engines 0 and 1 of one model, 100 requests each: 90 and 10 of them at or
        // below 0.25 s. Half of the 200 are; the first engine's +Inf alone would say 100 %.
        let engines = [
            (0.25, 90.0),
            (0.5, 100.0),
            (f64::INFINITY, 100.0),
            (0.25, 10.0),
            (0.5, 100.0),
            (f64::INFINITY, 100.0),
        ];
        assert_eq!(histogram_share_at_or_below(0.25, &engines), Some(0.5));
        assert_eq!(histogram_share_at_or_below(0.5, &engines), Some(1.0));
    }
}
