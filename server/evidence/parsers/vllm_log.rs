//! vLLM server start-up log: `GPU KV cache size: N tokens` → `serving.kv_cache_tokens`,
//! `Maximum concurrency for M tokens per request: X` → `serving.max_concurrency` (+
//! `serving.max_concurrency_tokens_per_request`), `gpu_memory_utilization` from the logged engine
//! args, V0 `# GPU blocks: N`. With several engines (data parallel) logging the same line, the
//! smallest value is reported, with a warning. A log without any vLLM marker is an error; a vLLM log
//! cut before the KV-cache lines is Ok with warnings.

use super::{text, ParseError, Parsed};

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
        if let Some(rest) = after(l, "# GPU blocks:") {
            if let Some(n) = text::lenient_number(rest) {
                blocks.push(n);
            }
        }
        if gmu.is_none() {
            for pat in [
                "gpu_memory_utilization=",
                "'gpu_memory_utilization': ",
                "\"gpu_memory_utilization\": ",
                "--gpu-memory-utilization ",
                "--gpu-memory-utilization=",
            ] {
                if let Some(rest) = after(l, pat) {
                    gmu = text::lenient_number(rest);
                    break;
                }
            }
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
