//! vLLM server start-up log: `GPU KV cache size: N tokens` → `serving.kv_cache_tokens`,
//! `Maximum concurrency for M tokens per request: X` → `serving.max_concurrency` (+
//! `serving.max_concurrency_tokens_per_request`), `gpu_memory_utilization` from the logged engine
//! args, V0's memory profile (`total_gpu_memory (23.55GiB) x gpu_memory_utilization (0.78)`) or
//! vLLM ≥ 0.11's `Desired GPU memory utilization is (0.9, …)`, V0 `# GPU blocks: N` (later V0
//! logs name the device: `# CUDA blocks: N`, `# cuda blocks: N`; never the CPU's). Newer
//! versions log the first two on one line (`GPU KV cache size: N tokens, Maximum concurrency for …`). With several engines (data parallel) logging the same line, the
//! smallest value is reported, with a warning. A log without any vLLM marker is an error; a vLLM log
//! cut before the KV-cache lines is Ok with warnings.

use super::{text, ParseError, Parsed};

/// One pass over the log's lines, one arm per line form.
pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("vllm".into()),
        ..Default::default()
    };
    let mut kv: Vec<f64> = Vec::new();
    let mut conc: Vec<(f64, f64)> = Vec::new();
    let mut blocks: Vec<f64> = Vec::new();
    let mut gmu: Option<f64> = None;
    let mut marker = false;
    for line in s.lines() {
        let l = text::strip_ansi(line);
        let l = l.as_ref();
        if l.contains("vllm") || l.contains("vLLM") {
            marker = true;
        }
        if let Some(rest) = after(l, "GPU KV cache size:") {
            if let Some(n) = text::lenient_number(rest) {
                kv.push(n);
            }
        }
        if let Some(rest) = after(l, "Maximum concurrency for ") {
            let toks = text::lenient_number(rest);
            let x = rest.rsplit_once(':').and_then(|(_, x)| text::lenient_number(x));
            if let (Some(t), Some(x)) = (toks, x) {
                conc.push((t, x));
            }
        }
        if let Some(n) = device_blocks(l) {
            blocks.push(n);
        }
        if gmu.is_none() {
            gmu = memory_utilization(l);
        }
        if p.tool_version.is_none() {
            p.tool_version = version_in(l);
        }
    }
    if !marker && kv.is_empty() && conc.is_empty() {
        return Err(ParseError::at(
            1,
            "no vLLM log lines found (no `vllm`/`vLLM` marker, no `GPU KV cache size` line)",
        ));
    }
    if let Some(min) = kv.iter().copied().reduce(f64::min) {
        if kv.len() > 1 {
            p.warn(format!(
                "{} `GPU KV cache size` lines (one per engine?); reporting the smallest",
                kv.len()
            ));
        }
        p.count("serving.kv_cache_tokens", min);
    } else {
        p.warn("no `GPU KV cache size: N tokens` line (log cut before the engine finished starting?)");
    }
    if let Some(&(t, x)) = conc.iter().min_by(|a, b| a.1.total_cmp(&b.1)) {
        p.nonneg("serving.max_concurrency", x);
        p.count("serving.max_concurrency_tokens_per_request", t);
    } else {
        p.warn("no `Maximum concurrency for M tokens per request: X` line");
    }
    if let Some(b) = blocks.iter().copied().reduce(f64::min) {
        p.count("serving.kv_cache_gpu_blocks", b);
    }
    if let Some(g) = gmu {
        if (0.0..=1.0).contains(&g) {
            p.num("serving.gpu_memory_utilization", g);
        } else {
            p.warn(format!("gpu_memory_utilization {g} outside 0..1; not stored"));
        }
    }
    Ok(p)
}

/// The `gpu_memory_utilization` a line logs, in any of the forms vLLM has logged it.
fn memory_utilization(l: &str) -> Option<f64> {
    for pat in [
        "gpu_memory_utilization=",
        "'gpu_memory_utilization': ",
        "\"gpu_memory_utilization\": ",
        "--gpu-memory-utilization ",
        "--gpu-memory-utilization=",
        // vLLM ≥ 0.11's worker: `Desired GPU memory utilization is (0.9, 39.98 GiB)`.
        "Desired GPU memory utilization is (",
        // V0 0.7–0.9's memory profile: `… total_gpu_memory (23.55GiB) x gpu_memory_utilization (0.78) = 18.28GiB`.
        "gpu_memory_utilization (",
    ] {
        if let Some(rest) = after(l, pat) {
            return text::lenient_number(rest);
        }
    }
    None
}

/// V0's `# GPU blocks: 5102, # CPU blocks: 2048`; from 0.6.4 the device is the platform's
/// dispatch key (`executor_base.py`: `# CUDA blocks: 5519`, `# cuda blocks: 41345`).
fn device_blocks(l: &str) -> Option<f64> {
    l.match_indices("# ").find_map(|(i, _)| {
        let (device, count) = l[i + 2..].split_once(" blocks:")?;
        let named = !device.is_empty() && device.len() <= 8 && device.bytes().all(|b| b.is_ascii_alphanumeric());
        (named && !device.eq_ignore_ascii_case("cpu"))
            .then(|| text::lenient_number(count))
            .flatten()
    })
}

fn after<'a>(l: &'a str, pat: &str) -> Option<&'a str> {
    l.find(pat).and_then(|i| l.get(i + pat.len()..))
}

/// `vLLM API server version 0.6.3`, `Initializing a V1 LLM engine (v0.10.1.1)`, `vLLM version 0.9.0`.
fn version_in(l: &str) -> Option<String> {
    let rest = after(l, "API server version ")
        .or_else(|| after(l, "vLLM version "))
        .or_else(|| after(l, "LLM engine (v"))?;
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-'))
        .collect();
    (!v.is_empty() && v.starts_with(|c: char| c.is_ascii_digit())).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_newest_one_line_shape_and_the_desired_utilization_line_are_read() {
        // Synthetic, in the shapes of vLLM ≥ 0.11 (`kv_cache_utils.py` logs both figures in one
        // line; `gpu_worker.py` logs the utilization it was asked for).
        let log = "(EngineCore_DP0 pid=1944) INFO 09-24 20:53:41 [kv_cache_utils.py:1869] GPU KV cache size: 588,913 tokens, \
                   Maximum concurrency for 32,768 tokens per request: 17.97x\n\
                   (Worker_TP2_EP2 pid=2080) INFO 09-24 20:54:35 [gpu_worker.py:391] Free memory on device (43.93/44.42 GiB) \
                   on startup. Desired GPU memory utilization is (0.9, 39.98 GiB). Actual usage is 27.72 GiB for weight\n";
        let p = parse(log).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(588_913.0));
        assert_eq!(p.get_num("serving.max_concurrency"), Some(17.97));
        assert_eq!(p.get_num("serving.max_concurrency_tokens_per_request"), Some(32_768.0));
        assert_eq!(p.get_num("serving.gpu_memory_utilization"), Some(0.9));
    }

    #[test]
    fn v0_logs_that_name_the_device_give_their_blocks_and_utilization() {
        // The shapes of vLLM 0.6.4–0.9's `executor_base.py` and `worker.py` lines.
        for (line, blocks) in [
            (
                "INFO 05-30 16:23:28 executor_base.py:110] # CUDA blocks: 5519, # CPU blocks: 9362",
                5519.0,
            ),
            (
                "INFO 06-26 16:55:19 [executor_base.py:112] # cuda blocks: 41345, # CPU blocks: 21845",
                41345.0,
            ),
            (
                "INFO 08-01 10:00:00 gpu_executor.py:122] # GPU blocks: 5102, # CPU blocks: 2048",
                5102.0,
            ),
        ] {
            let log = format!("INFO 05-30 16:23:01 api_server.py:585] vLLM API server version 0.6.4\n{line}\n");
            let p = parse(&log).unwrap();
            assert_eq!(p.get_num("serving.kv_cache_gpu_blocks"), Some(blocks), "{line}");
        }
        let cpu_only = parse("INFO vllm # CPU blocks: 9362").unwrap();
        assert_eq!(cpu_only.get_num("serving.kv_cache_gpu_blocks"), None);
        let p = parse(
            "INFO 08-29 13:08:35 [worker.py:287] Memory profiling takes 4.1 seconds\n\
             INFO 08-29 13:08:35 [worker.py:287] the current vLLM instance can use total_gpu_memory (23.55GiB) x \
             gpu_memory_utilization (0.78) = 18.28GiB\n",
        )
        .unwrap();
        assert_eq!(p.get_num("serving.gpu_memory_utilization"), Some(0.78));
    }
}
