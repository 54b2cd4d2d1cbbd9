//! The load the brief implies, in numbers: the request lengths, the capacity the sizing predicts
//! for the allocation, the sweep's offered rates and prompts per point, and the goodput targets.
//! Pure arithmetic, read by the load steps and by the plan's load design.

use super::PlanShared;
use crate::{
    briefs::model::BriefFields,
    collect::plan::{GoodputTarget, LoadDesign},
    sizing::{Precision, SizingOption},
    trials::model::Allocation,
};

/// Seconds each load point aims to last: long enough for stable p95s, short enough for a sweep of
/// six to eight points to fit in a quarter of an hour.
pub const POINT_SECONDS: f64 = 120.0;
/// Requests per load point, at least and at most.
pub const MIN_PROMPTS: u32 = 20;
pub const MAX_PROMPTS: u32 = 3000;
/// Shares of the predicted capacity the sweep offers: from well below (the latency floor) to past
/// it (where the server saturates), since real servers reach 30–70 % of the ceiling.
pub const CAPACITY_SHARES: [f64; 6] = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5];
/// The brief's peak joins the sweep up to this multiple of one replica's capacity; above it the
/// brief needs several replicas and the review sizes them from the capacity at the SLO.
pub const PEAK_CEILING_SHARE: f64 = 2.0;
/// Output tokens when the brief's targets do not imply a length.
pub const DEFAULT_OUTPUT_TOKENS: u32 = 256;

/// Input and output tokens of each request, and why. Output: what the brief's targets imply — a
/// request that takes TTFT plus (n − 1) inter-token gaps ends at the end-to-end target, so
/// n = (e2e − TTFT) ÷ ITL + 1 — else [`DEFAULT_OUTPUT_TOKENS`]; at most half the context. Input:
/// the rest of the context, less a margin for tokenizer drift: the sizing holds `concurrency`
/// sequences at the full context, and a shorter prompt would test a lighter workload than the one
/// rented for.
pub fn lengths(brief: &BriefFields) -> (u32, u32, String) {
    let context = u32::try_from(brief.context_length.max(2)).unwrap_or(u32::MAX);
    let t = &brief.targets;
    let (mut output, mut basis) = match (t.e2e_p95_ms, t.itl_p95_ms) {
        (Some(e2e), Some(itl)) if itl > 0.0 && e2e > t.ttft_p95_ms.unwrap_or(0.0) => {
            let n = ((e2e - t.ttft_p95_ms.unwrap_or(0.0)) / itl).floor() + 1.0;
            let n = n.clamp(16.0, 4096.0) as u32;
            (
                n,
                format!(
                    "{n} output tokens: what the brief's targets imply (end-to-end {} ms − TTFT {} ms) ÷ ITL {} ms + 1",
                    fmt_num(e2e),
                    fmt_num(t.ttft_p95_ms.unwrap_or(0.0)),
                    fmt_num(itl)
                ),
            )
        }
        _ => (
            DEFAULT_OUTPUT_TOKENS,
            format!(
                "{DEFAULT_OUTPUT_TOKENS} output tokens: the brief's targets do not imply a length (that needs an end-to-end and an inter-token target)"
            ),
        ),
    };
    if output > context / 2 {
        output = (context / 2).max(1);
        basis = format!("{output} output tokens: half the brief's context of {context}");
    }
    let margin = (context / 100).max(16);
    let input = context.saturating_sub(output).saturating_sub(margin).max(1);
    basis.push_str(&format!(
        "; {input} input tokens: the rest of the brief's {context}-token context (less {margin} for tokenizer drift), \
         because the sizing holds {} sequences at the full context",
        brief.concurrency
    ));
    (input, output, basis)
}

/// The requests per second this allocation can serve, predicted from the sizing: the decode
/// ceiling (the sizing's aggregate decode tokens/s at full memory bandwidth, scaled to the trial's
/// GPU count) shared with the prefill ceiling (2 × active parameters × input tokens of compute per
/// request at the GPUs' dense peak): 1 ÷ C = output ÷ decode tokens/s + prefill FLOPs ÷ peak FLOP/s.
/// A ceiling: real servers reach roughly half of it.
pub fn predicted_capacity_rps(
    brief: &BriefFields,
    option: &SizingOption,
    alloc: &Allocation,
    input: u32,
    output: u32,
) -> Option<(f64, String)> {
    if option.decode_tokens_per_s_max <= 0.0 || option.count == 0 {
        return None;
    }
    let scale = f64::from(alloc.count) / f64::from(option.count);
    let decode = option.decode_tokens_per_s_max * scale;
    let mut seconds = f64::from(output) / decode;
    let mut basis = format!(
        "{} × {}: decode ceiling {} tokens/s (the sizing's {} tokens/s for {} GPUs{}) ÷ {output} output tokens",
        alloc.count,
        alloc.gpu.model,
        crate::figures::number(round_sig(decode, 3)),
        crate::figures::number(option.decode_tokens_per_s_max),
        option.count,
        if (scale - 1.0).abs() > 1e-9 {
            ", scaled to this trial's GPUs"
        } else {
            ""
        }
    );
    let tflops = match brief.precision {
        Precision::Fp8 | Precision::Int8 => alloc.gpu.fp8_dense_tflops.or(alloc.gpu.fp16_bf16_dense_tflops),
        _ => alloc.gpu.fp16_bf16_dense_tflops,
    };
    let active_b = brief
        .architecture
        .active_params_b
        .or(brief.catalog_entry().map(|m| m.active_params_b))
        .unwrap_or(brief.params_b);
    if let Some(tf) = tflops.filter(|t| *t > 0.0) {
        let flops = 2.0 * active_b * 1e9 * f64::from(input);
        let peak = tf * 1e12 * f64::from(alloc.count);
        seconds += flops / peak;
        basis.push_str(&format!(
            ", sharing the GPUs with prefill (2 × {} B active parameters × {input} input tokens at {} dense TFLOPS × {})",
            fmt_num(active_b),
            fmt_num(tf),
            alloc.count
        ));
    }
    let c = 1.0 / seconds;
    (c.is_finite() && c > 0.0).then(|| {
        (
            c,
            format!(
                "{basis}: about {} req/s at most; real servers reach roughly half",
                fmt_num(round_sig(c, 2))
            ),
        )
    })
}

/// `x` to `digits` significant digits.
pub fn round_sig(x: f64, digits: i32) -> f64 {
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let scale = 10f64.powi(digits - 1 - x.abs().log10().floor() as i32);
    (x * scale).round() / scale
}

/// A number without a spurious `.0`, as flags and labels want it.
pub fn fmt_num(x: f64) -> String {
    let r = (x * 1e6).round() / 1e6;
    if r.fract() == 0.0 && r.abs() < 1e15 {
        format!("{}", r as i64)
    } else {
        format!("{r}")
    }
}

/// The offered rates of the sweep, ascending, each with why it is there.
pub fn sweep_rates(capacity: Option<f64>, peak: Option<f64>, target_rps: Option<f64>) -> Vec<(f64, String)> {
    let mut rates: Vec<(f64, String, bool)> = Vec::new();
    match (capacity, peak) {
        (Some(c), _) => {
            for share in CAPACITY_SHARES {
                rates.push((
                    share * c,
                    format!(
                        "{} % of the predicted capacity ({} req/s)",
                        fmt_num(share * 100.0),
                        fmt_num(round_sig(c, 2))
                    ),
                    false,
                ));
            }
        }
        (None, Some(p)) => {
            for share in [0.25, 0.5, 1.0, 1.5, 2.0] {
                rates.push((
                    share * p,
                    format!(
                        "{} % of the brief's peak ({} req/s): the sizing predicts no capacity",
                        fmt_num(share * 100.0),
                        fmt_num(p)
                    ),
                    false,
                ));
            }
        }
        (None, None) => {
            for r in [0.5, 1.0, 2.0, 4.0, 8.0] {
                rates.push((
                    r,
                    "a default step: neither the sizing nor the brief gives a rate".into(),
                    false,
                ));
            }
        }
    }
    if let Some(p) = peak.filter(|p| *p > 0.0) {
        match capacity {
            Some(c) if p > PEAK_CEILING_SHARE * c => {}
            _ => rates.push((p, "the brief's expected peak".into(), true)),
        }
    }
    if let Some(t) = target_rps.filter(|t| *t > 0.0) {
        rates.push((t, "the brief's request-throughput target".into(), true));
    }
    for r in &mut rates {
        r.0 = round_sig(r.0, 2).max(0.01);
    }
    // The brief's own rates win over a nearby share (within 10 %).
    rates.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.total_cmp(&b.0)));
    let mut kept: Vec<(f64, String)> = Vec::new();
    for (rate, why, _) in rates {
        match kept.iter_mut().find(|(k, _)| (rate - *k).abs() <= 0.1 * k.max(rate)) {
            Some(existing) if existing.0 == rate && !existing.1.contains(&why) => {
                existing.1.push_str(&format!("; {why}"));
            }
            Some(_) => {}
            None => kept.push((rate, why)),
        }
    }
    kept.sort_by(|a, b| a.0.total_cmp(&b.0));
    kept
}

/// Output tokens one load point's requests may ask for in all. `vllm bench serve --save-detailed`
/// keeps every inter-token gap as a number of some twenty characters and every generated text: at
/// about 27 bytes a token, 500,000 tokens is some 13 MB, inside the server's 16 MiB upload, where
/// 3,000 requests of 256 tokens (19 MB) was refused.
pub const MAX_OUTPUT_TOKENS_PER_POINT: u32 = 500_000;

/// Requests at one rate: [`POINT_SECONDS`] of arrivals, within [`MIN_PROMPTS`]..[`MAX_PROMPTS`],
/// and no more than [`MAX_OUTPUT_TOKENS_PER_POINT`] output tokens in all (a shorter point at a
/// high rate, rather than a result the server cannot take).
pub fn prompts_at(rate: f64, output_tokens: u32) -> u32 {
    let by_tokens = (MAX_OUTPUT_TOKENS_PER_POINT / output_tokens.max(1)).max(MIN_PROMPTS);
    ((rate * POINT_SECONDS).ceil() as u32).clamp(MIN_PROMPTS, MAX_PROMPTS.min(by_tokens))
}

pub(super) fn goodput_targets(brief: &BriefFields) -> Vec<GoodputTarget> {
    let t = &brief.targets;
    [("ttft", t.ttft_p95_ms), ("tpot", t.itl_p95_ms), ("e2el", t.e2e_p95_ms)]
        .into_iter()
        .filter_map(|(metric, ms)| {
            ms.filter(|v| *v > 0.0).map(|ms| GoodputTarget {
                metric: metric.into(),
                ms,
            })
        })
        .collect()
}

/// The rates the load sweep offers, from the predicted capacity, the brief's peak and target.
pub(super) fn sweep_of(shared: &PlanShared<'_>) -> Vec<(f64, String)> {
    let brief = shared.brief;
    sweep_rates(
        shared.capacity.as_ref().map(|c| c.0),
        brief.expected_peak_rps,
        brief.targets.request_throughput_rps,
    )
}

/// How the load sweep was designed, for the plan's reader.
pub(super) fn load_design(shared: &PlanShared<'_>) -> LoadDesign {
    let capacity = &shared.capacity;
    LoadDesign {
        input_tokens: shared.input_tokens,
        output_tokens: shared.output_tokens,
        lengths_basis: shared.lengths_basis.clone(),
        capacity_rps: capacity.as_ref().map(|c| round_sig(c.0, 3)),
        capacity_basis: capacity.as_ref().map_or_else(
            || match shared.alloc {
                Some(_) => "the sizing predicts no decode throughput for this allocation".to_owned(),
                None => "the sizing has no option for this trial".to_owned(),
            },
            |c| c.1.clone(),
        ),
        rates_rps: sweep_of(shared).iter().map(|r| r.0).collect(),
        goodput: shared.goodput.clone(),
        why: "The sweep brackets the brief's need: from well below the predicted capacity (the latency floor) to past it \
              (where the server saturates), with the brief's own peak and throughput target as points of their own. \
              The review's operating point is the highest throughput that still meets the card."
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sweep_keeps_the_briefs_own_rates_and_drops_near_duplicates() {
        let r = sweep_rates(Some(10.0), Some(5.2), Some(20.0));
        let rates: Vec<f64> = r.iter().map(|x| x.0).collect();
        assert_eq!(rates, [1.0, 2.5, 5.2, 7.5, 10.0, 15.0, 20.0]);
        assert!(r[2].1.contains("peak"), "5.2 replaces the 50 % point: {r:?}");
        // A peak far above one replica's capacity is not offered to one replica.
        assert!(!sweep_rates(Some(1.0), Some(100.0), None).iter().any(|x| x.0 == 100.0));
        // Without a predicted capacity the peak anchors the sweep.
        let r: Vec<f64> = sweep_rates(None, Some(4.0), None).iter().map(|x| x.0).collect();
        assert_eq!(r, [1.0, 2.0, 4.0, 6.0, 8.0]);
        assert_eq!(prompts_at(0.1, 256), MIN_PROMPTS);
        assert_eq!(prompts_at(2.0, 256), 240);
        assert_eq!(prompts_at(1000.0, 16), MAX_PROMPTS);
        // 3,000 requests of 256 tokens would be a 19 MB result: 1,953 fit.
        assert_eq!(prompts_at(1000.0, 256), 1953);
        assert_eq!(prompts_at(1000.0, 100_000), MIN_PROMPTS);
    }
}
