//! nccl-tests `*_perf` stdout (all_reduce_perf, all_gather_perf, alltoall_perf, …).
//!
//! * Columns are found from the header tokens (current `… root time algbw busbw #wrong` ×2, or the
//!   old layout without `root` and with a float `error` column), never by position.
//! * `nccl.busbw_peak_gbps`: the largest OUT-OF-PLACE busbw over all sizes (headline);
//!   `nccl.busbw_at_max_size_gbps`: out-of-place busbw at the largest size; `nccl.busbw_avg_gbps`:
//!   the tool's `Avg bus bandwidth` line (average over all sizes).
//! * `nccl.wrong`: rows with `#wrong` > 0 (out-of-place or in-place; `N/A` = not checked). For the
//!   old float `error` column, a row counts when the error exceeds nccl-tests' own tolerance for the
//!   data type (`DeltaMaxValue`: float 1e-5, half/bf16 5e-2, double 1e-12, integers 0): small
//!   rounding errors such as `7e-07` on a float sum are what a healthy run prints, not corruption.
//! * `nccl.world_size`: the number of `Rank n …` lines (the a3mega paste lost some `#`s: accepted).
//! * A run that failed before the table (`Test CUDA failure …`, `Test NCCL failure …`) is NOT a parse
//!   error: it is valid evidence of a failed test. It yields `nccl.run_failed = true`, the failure
//!   lines as warnings and no busbw keys (so busbw criteria are `missing`, and a card can also require
//!   `nccl.run_failed == false`). A file with neither a table nor a failure line is an error.

use super::{ParseError, Parsed};

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("nccl-tests".into()),
        ..Default::default()
    };
    let mut ranks: Vec<usize> = Vec::new();
    let mut cols: Option<Vec<String>> = None;
    let mut rows = 0usize;
    let mut peak: Option<f64> = None;
    let mut peak_alg: Option<f64> = None;
    let mut at_max: Option<(f64, f64)> = None; // (size, busbw)
    let mut wrong = 0usize;
    let mut avg: Option<f64> = None;
    let mut failures: Vec<String> = Vec::new();
    let mut oob: Option<f64> = None;
    let mut banner = false;
    for (i, raw) in s.lines().enumerate() {
        let ln = i + 1;
        let t = raw.trim();
        let body = t.trim_start_matches('#').trim();
        if body.starts_with("nThread ") {
            banner = true;
            continue;
        }
        if let Some(v) = body.strip_prefix("NCCL version ") {
            p.tool_version
                .get_or_insert_with(|| v.split_whitespace().next().unwrap_or_default().to_string());
            continue;
        }
        if let Some(v) = body.strip_prefix("nccl-tests version ") {
            p.tool_version
                .get_or_insert_with(|| v.split_whitespace().next().unwrap_or_default().to_string());
            continue;
        }
        if let Some(rest) = body.strip_prefix("Rank ") {
            if rest.contains(" Pid ") || rest.contains(" device ") {
                if let Some(r) = rest.split_whitespace().next().and_then(|x| x.parse::<usize>().ok()) {
                    if !ranks.contains(&r) {
                        ranks.push(r);
                    }
                }
            }
            continue;
        }
        if t.contains("Test CUDA failure") || t.contains("Test NCCL failure") || t.contains("Test failure") {
            failures.push(format!("line {ln}: {t}"));
            continue;
        }
        if let Some(rest) = body.strip_prefix("Avg bus bandwidth") {
            avg = rest.trim_start().trim_start_matches(':').trim().parse::<f64>().ok();
            continue;
        }
        if let Some(rest) = body.strip_prefix("Out of bounds values") {
            oob = rest
                .trim_start_matches([' ', ':'])
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok());
            continue;
        }
        if t.starts_with('#') {
            let toks: Vec<&str> = body.split_whitespace().collect();
            if toks.first() == Some(&"size") && toks.contains(&"busbw") {
                cols = Some(toks.iter().map(|x| x.to_string()).collect());
            }
            continue;
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let Some(c) = cols.as_ref() else { continue };
        if toks.first().is_none_or(|x| x.parse::<u64>().is_err()) {
            continue;
        }
        if toks.len() != c.len() {
            p.warn(format!(
                "line {ln}: {} fields but the header has {}; row skipped (cut short?)",
                toks.len(),
                c.len()
            ));
            continue;
        }
        let idx = |name: &str, nth: usize| {
            c.iter()
                .enumerate()
                .filter(|(_, x)| *x == name)
                .nth(nth)
                .map(|(i, _)| i)
        };
        let get = |i: Option<usize>| i.and_then(|i| toks.get(i)).copied();
        let size = get(idx("size", 0)).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
        let dtype = get(idx("type", 0)).unwrap_or("float");
        let busbw = get(idx("busbw", 0)).and_then(|x| x.parse::<f64>().ok());
        let algbw = get(idx("algbw", 0)).and_then(|x| x.parse::<f64>().ok());
        let Some(bw) = busbw.filter(|b| b.is_finite() && *b >= 0.0) else {
            p.warn(format!("line {ln}: unreadable busbw; row skipped"));
            continue;
        };
        rows += 1;
        peak = Some(peak.map_or(bw, |x: f64| x.max(bw)));
        if let Some(a) = algbw.filter(|a| a.is_finite()) {
            peak_alg = Some(peak_alg.map_or(a, |x: f64| x.max(a)));
        }
        if at_max.is_none_or(|(sz, _)| size >= sz) {
            at_max = Some((size, bw));
        }
        let mut bad = false;
        for nth in 0..2 {
            if let Some(w) = get(idx("#wrong", nth)) {
                if w != "N/A" && w.parse::<f64>() != Ok(0.0) {
                    bad = true;
                }
            }
            if let Some(e) = get(idx("error", nth)) {
                if e != "N/A" && e.parse::<f64>().map_or(true, |x| x.is_nan() || x > tolerance(dtype)) {
                    bad = true;
                }
            }
        }
        if bad {
            wrong += 1;
            p.warn(format!("line {ln}: data check failed (#wrong / error) at size {size}"));
        }
    }
    if !ranks.is_empty() {
        p.count("nccl.world_size", ranks.len() as f64);
    }
    if !failures.is_empty() {
        p.boolean("nccl.run_failed", true);
        for f in &failures {
            p.warn(format!("test failed: {f}"));
        }
    }
    if rows == 0 {
        if failures.is_empty() {
            if cols.is_some() || banner {
                return Err(ParseError::at(
                    super::text::last_line(s),
                    "nccl-tests output has no result rows (cut short?)",
                ));
            }
            return Err(ParseError::at(
                1,
                "no nccl-tests table (`# size count type … busbw`) found",
            ));
        }
        return Ok(p);
    }
    if failures.is_empty() {
        p.boolean("nccl.run_failed", false);
    }
    if let Some(x) = peak {
        p.nonneg("nccl.busbw_peak_gbps", x);
    }
    if let Some(x) = peak_alg {
        p.nonneg("nccl.algbw_peak_gbps", x);
    }
    if let Some((sz, bw)) = at_max {
        p.nonneg("nccl.busbw_at_max_size_gbps", bw);
        p.count("nccl.max_size_bytes", sz);
    }
    match avg {
        Some(a) => {
            p.nonneg("nccl.busbw_avg_gbps", a);
        }
        None => p.warn("no `Avg bus bandwidth` line (output cut short?)"),
    }
    if let Some(o) = oob {
        p.count("nccl.out_of_bounds", o);
    }
    p.count("nccl.wrong", wrong as f64);
    p.count("nccl.sizes", rows as f64);
    if ranks.is_empty() {
        p.warn("no `Rank n … device …` lines: world size unknown");
    }
    Ok(p)
}

fn tolerance(dtype: &str) -> f64 {
    match dtype {
        "float" | "float32" => 1e-5,
        "half" | "float16" | "bfloat16" | "fp8_e4m3" | "fp8_e5m2" => 5e-2,
        "double" | "float64" => 1e-12,
        _ => 0.0,
    }
}
