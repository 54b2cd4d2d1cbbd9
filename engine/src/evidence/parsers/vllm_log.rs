//! vLLM server start-up log: `GPU KV cache size: N tokens` → `serving.kv_cache_tokens`,
//! `Maximum concurrency for M tokens per request: X` → `serving.max_concurrency` (+
//! `serving.max_concurrency_tokens_per_request`), `gpu_memory_utilization` from the logged engine
//! args, V0's memory profile (`total_gpu_memory (23.55GiB) x gpu_memory_utilization (0.78)`) or
//! vLLM ≥ 0.11's `Desired GPU memory utilization is (0.9, …)`, V0 `# GPU blocks: N` (later V0
//! logs name the device: `# CUDA blocks: N`, `# cuda blocks: N`; never the CPU's). Newer
//! versions log the first two on one line (`GPU KV cache size: N tokens, Maximum concurrency for …`).
//!
//! What a log holds besides one clean start-up:
//! - The line repeated by the workers of one engine (tensor or pipeline parallel, vLLM 0.8–0.10):
//!   the smallest is reported, with a warning.
//! - Data-parallel engines, each logging its own cache (`(EngineCore_DP1 pid=…)`): the server's
//!   cache is theirs added up, as the allocation's predicted cache is the whole allocation's.
//! - A server started more than once in one file (the API server's `non-default args` or version
//!   line after a KV-cache line): the figures are all the last start-up's, never a mix.
//! - A start-up that failed after its KV-cache line (`EngineCore failed to start`, a traceback, out
//!   of memory while capturing CUDA graphs): the figures stay, with a warning naming the line.
//! - Hybrid and sliding-window models, whose token line vLLM computes too small (it splits the
//!   blocks evenly over the cache groups): when it disagrees with concurrency × length, a warning
//!   says so (the KV check judges by the concurrency, which vLLM schedules by).
//!
//! A log without any vLLM marker is an error; a vLLM log cut before the KV-cache lines is Ok with
//! warnings.

use super::text::{self, Needle};
use super::{ParseError, Parsed};

/// One start-up's figures, each with the data-parallel engine that logged it (when the line's
/// process prefix names one).
#[derive(Default)]
struct Startup {
    first_line: usize,
    kv: Vec<(f64, Option<u32>)>,
    /// (tokens per request, concurrency, engine)
    conc: Vec<(f64, f64, Option<u32>)>,
    blocks: Vec<f64>,
    gmu: Option<f64>,
    /// The first line that says the start-up failed, before the server said it was up, and
    /// whether the cache had been sized by then.
    failed: Option<(usize, String, bool)>,
    up: bool,
}

impl Startup {
    fn has_figures(&self) -> bool {
        !self.kv.is_empty() || !self.conc.is_empty() || !self.blocks.is_empty()
    }
}

/// One pass over the log's lines, one arm per line form. `engine_of(n, line)` names the
/// data-parallel engine that printed line `n` (its process prefix may have been stripped).
pub(crate) fn parse(s: &str, engine_of: impl Fn(usize, &str) -> Option<u32>) -> Result<Parsed, ParseError> {
    let mut p = Parsed {
        tool: Some("vllm".into()),
        ..Default::default()
    };
    // The last start-up before `cur` that reached its cache, and how many did.
    let mut earlier: Option<Startup> = None;
    let mut starts = 0;
    let mut cur = Startup {
        first_line: 1,
        ..Default::default()
    };
    let mut marker = false;
    let mut version: Option<String> = None;
    for (i, line) in s.lines().enumerate() {
        let n = i + 1;
        let l = text::strip_ansi(line);
        let l = l.as_ref();
        if MARKERS.iter().any(|m| m.is_in(l)) {
            marker = true;
        }
        if starts_a_server(l) {
            // A start-up that reached its cache is kept; one that did not is over either way.
            if cur.has_figures() {
                earlier = Some(std::mem::take(&mut cur));
                starts += 1;
            } else {
                cur = Startup::default();
            }
            cur.first_line = n;
        }
        read_line(&mut cur, n, l, || engine_of(n, line));
        if version.is_none() {
            version = version_in(l);
        }
    }
    if !marker
        && earlier
            .iter()
            .chain([&cur])
            .all(|u| u.kv.is_empty() && u.conc.is_empty())
    {
        return Err(ParseError::at(
            1,
            "no vLLM log lines found (no `vllm`/`vLLM` marker, no `GPU KV cache size` line)",
        ));
    }
    p.tool_version = version;
    // A last start-up without figures (cut, or failed before its cache) leaves the one before it.
    let (last, later) = match earlier {
        Some(e) if !cur.has_figures() => (e, Some(cur)),
        _ => {
            starts += usize::from(cur.has_figures());
            (cur, None)
        }
    };
    if starts > 1 {
        p.warn(format!(
            "the log holds {starts} start-ups that reached the KV cache (the server was restarted?): every figure \
             is the last one's, from line {}",
            last.first_line
        ));
    }
    report(&mut p, &last);
    if let Some((at, what)) = later
        .as_ref()
        .and_then(|u| u.failed.as_ref().map(|f| (u.first_line, f)))
    {
        p.warn(format!(
            "a later start-up (from line {at}) failed before its KV cache (line {}: {})",
            what.0, what.1
        ));
    }
    Ok(p)
}

/// The API server's own first lines: once per `vllm serve`, whatever its engines and workers log.
fn starts_a_server(l: &str) -> bool {
    SERVER_STARTS.iter().any(|m| m.is_in(l))
}

/// Lines that end a start-up: the engine or a worker gave up, or ran out of memory.
static FAILURES: [Needle; 6] = [
    Needle::new("EngineCore failed to start"),
    Needle::new("Engine core initialization failed"),
    Needle::new("WorkerProc hit an exception"),
    Needle::new("Traceback (most recent call last)"),
    Needle::new("CUDA out of memory"),
    Needle::new("OutOfMemoryError"),
];
/// A vLLM log says its name somewhere.
static MARKERS: [Needle; 2] = [Needle::new("vllm"), Needle::new("vLLM")];
static SERVER_STARTS: [Needle; 2] = [Needle::new("API server version "), Needle::new("non-default args:")];
/// The server is up: a failure after it is a request's, not the start-up's.
static SERVER_UP: [Needle; 2] = [
    Needle::new("Application startup complete"),
    Needle::new("Uvicorn running on"),
];
static KV_CACHE: Needle = Needle::new("GPU KV cache size:");
static CONCURRENCY: Needle = Needle::new("Maximum concurrency for ");
static BLOCKS: Needle = Needle::new(" blocks:");
/// The forms vLLM has logged `gpu_memory_utilization` in.
static UTILIZATION: [Needle; 8] = [
    Needle::new("gpu_memory_utilization="),
    Needle::new("'gpu_memory_utilization': "),
    Needle::new("\"gpu_memory_utilization\": "),
    Needle::new("--gpu-memory-utilization="),
    Needle::new("--gpu-memory-utilization "),
    Needle::new("--gpu-memory-utilization from "),
    // vLLM ≥ 0.11's worker: `Desired GPU memory utilization is (0.9, 39.98 GiB)`.
    Needle::new("Desired GPU memory utilization is ("),
    // V0 0.7–0.9's memory profile: `… total_gpu_memory (23.55GiB) x gpu_memory_utilization (0.78) = 18.28GiB`.
    Needle::new("gpu_memory_utilization ("),
];
/// `vLLM API server version 0.6.3`, `Initializing a V1 LLM engine (v0.10.1.1)`, `vLLM version 0.9.0`.
static VERSIONS: [Needle; 3] = [
    Needle::new("API server version "),
    Needle::new("vLLM version "),
    Needle::new("LLM engine (v"),
];

fn read_line(u: &mut Startup, n: usize, l: &str, engine: impl Fn() -> Option<u32>) {
    if let Some(rest) = KV_CACHE.after(l) {
        if let Some(v) = text::lenient_number(rest) {
            u.kv.push((v, engine()));
        }
    }
    if let Some(rest) = CONCURRENCY.after(l) {
        let toks = text::lenient_number(rest);
        let x = rest.rsplit_once(':').and_then(|(_, x)| text::lenient_number(x));
        if let (Some(t), Some(x)) = (toks, x) {
            u.conc.push((t, x, engine()));
        }
    }
    if let Some(b) = device_blocks(l) {
        u.blocks.push(b);
    }
    if u.gmu.is_none() {
        u.gmu = memory_utilization(l);
    }
    if !u.up && u.failed.is_none() {
        if SERVER_UP.iter().any(|m| m.is_in(l)) {
            u.up = true;
        } else if FAILURES.iter().any(|f| f.is_in(l)) {
            let what: String = l.trim().chars().take(160).collect();
            u.failed = Some((n, what, !u.kv.is_empty()));
        }
    }
}

/// The figures of one start-up: per engine the smallest of its workers' lines, the engines added up.
fn report(p: &mut Parsed, u: &Startup) {
    let kv = per_engine(u.kv.iter().map(|&(v, e)| (v, e)));
    let conc = per_engine(u.conc.iter().map(|&(_, x, e)| (x, e)));
    if let Some(f) = &kv {
        if f.engines > 1 {
            p.warn(format!(
                "{} data-parallel engines logged their KV cache: their {} tokens are added up",
                f.engines,
                f.parts
                    .iter()
                    .map(|v| format!("{v:.0}"))
                    .collect::<Vec<_>>()
                    .join(" + ")
            ));
        } else if u.kv.len() > 1 {
            p.warn(format!(
                "{} `GPU KV cache size` lines (one per worker); reporting the smallest",
                u.kv.len()
            ));
        }
        p.count("serving.kv_cache_tokens", f.total);
    } else {
        p.warn("no `GPU KV cache size: N tokens` line (log cut before the engine finished starting?)");
    }
    let length = u.conc.iter().map(|c| c.0).reduce(f64::min);
    if let (Some(f), Some(len)) = (&conc, length) {
        p.nonneg("serving.max_concurrency", f.total);
        p.count("serving.max_concurrency_tokens_per_request", len);
        if let Some(k) = &kv {
            disagreement(p, k.total, f.total, len);
        }
    } else {
        p.warn("no `Maximum concurrency for M tokens per request: X` line");
    }
    if let Some(b) = u.blocks.iter().copied().reduce(f64::min) {
        p.count("serving.kv_cache_gpu_blocks", b);
    }
    if let Some(g) = u.gmu {
        if (0.0..=1.0).contains(&g) {
            p.num("serving.gpu_memory_utilization", g);
        } else {
            p.warn(format!("gpu_memory_utilization {g} outside 0..1; not stored"));
        }
    }
    if let Some((at, what, true)) = &u.failed {
        p.warn(format!(
            "the start-up failed after its KV cache was sized (line {at}: {what}): the figures are what it \
             logged before; the server may never have served"
        ));
    }
}

/// vLLM's concurrency is tokens ÷ length, to two decimals, for a model whose layers all cache
/// every token; a hybrid or sliding-window model's token line is smaller (vllm-project/vllm#40691).
fn disagreement(p: &mut Parsed, tokens: f64, concurrency: f64, length: f64) {
    let implied = concurrency * length;
    if crate::sizing::kv_check::token_line_too_small(tokens, implied, length) {
        let count = |v: f64| crate::figures::count(v.floor() as i64);
        p.warn(format!(
            "vLLM's KV cache line says {} tokens, but its concurrency says {concurrency} × {} = {}: vLLM logs \
             the token figure too small for hybrid and sliding-window models; the concurrency is what it \
             schedules by",
            count(tokens),
            count(length),
            count(implied)
        ));
    }
}

struct PerEngine {
    total: f64,
    engines: usize,
    parts: Vec<f64>,
}

/// The smallest figure of each engine (lines without an engine are one engine), added up.
fn per_engine(figures: impl Iterator<Item = (f64, Option<u32>)>) -> Option<PerEngine> {
    // Engines in the order first seen, each with its smallest figure; a map finds them, so a log of
    // many engines stays linear.
    let mut order: Vec<Option<u32>> = Vec::new();
    let mut smallest: std::collections::HashMap<Option<u32>, f64> = std::collections::HashMap::new();
    for (v, e) in figures {
        smallest
            .entry(e)
            .and_modify(|min| *min = min.min(v))
            .or_insert_with(|| {
                order.push(e);
                v
            });
    }
    // Lines with and without an engine tag are the same engines seen through different prefixes.
    if smallest.contains_key(&None) {
        let min = smallest.values().copied().reduce(f64::min)?;
        return Some(PerEngine {
            total: min,
            engines: 1,
            parts: vec![min],
        });
    }
    let parts: Vec<f64> = order.iter().filter_map(|e| smallest.get(e).copied()).collect();
    Some(PerEngine {
        total: parts.iter().sum(),
        engines: parts.len(),
        parts,
    })
    .filter(|f| f.engines > 0)
}

/// The data-parallel engine in a vLLM V1 process prefix: its rank in `(EngineCore_DP1 pid=…)`, and
/// before vLLM 0.11 `(EngineCore_1 pid=…)`; with Ray's data-parallel backend the actor's pid in
/// `(DPEngineCoreActor pid=5439, ip=…)` (ray-project/kuberay#4366), the only thing that tells them
/// apart.
pub(crate) fn engine_tag(line: &str) -> Option<u32> {
    if let Some(at) = line.find("(DPEngineCoreActor pid=") {
        let rest = &line[at + "(DPEngineCoreActor pid=".len()..];
        return rest[..rest.bytes().take_while(u8::is_ascii_digit).count()].parse().ok();
    }
    let at = line.find("(EngineCore_")?;
    let rest = &line[at + "(EngineCore_".len()..];
    let rest = rest.strip_prefix("DP").unwrap_or(rest);
    let digits: &str = &rest[..rest.bytes().take_while(u8::is_ascii_digit).count()];
    let after = &rest[digits.len()..];
    if digits.is_empty() || !after.starts_with(' ') {
        return None;
    }
    digits.parse().ok()
}

/// The `gpu_memory_utilization` a line logs, in any of the forms vLLM has logged it.
fn memory_utilization(l: &str) -> Option<f64> {
    // A form followed by words (`increase --gpu-memory-utilization to 0.9019`, vLLM ≥ 0.18's
    // advice) gives no figure: the next form may (`The current --gpu-memory-utilization=0.9000`).
    UTILIZATION
        .iter()
        .find_map(|form| form.after(l).and_then(text::lenient_number))
}

/// V0's `# GPU blocks: 5102, # CPU blocks: 2048`; from 0.6.4 the device is the platform's
/// dispatch key (`executor_base.py`: `# CUDA blocks: 5519`, `# cuda blocks: 41345`).
fn device_blocks(l: &str) -> Option<f64> {
    if !BLOCKS.is_in(l) {
        return None;
    }
    l.match_indices("# ").find_map(|(i, _)| {
        let (device, count) = l[i + 2..].split_once(" blocks:")?;
        let named = !device.is_empty() && device.len() <= 8 && device.bytes().all(|b| b.is_ascii_alphanumeric());
        (named && !device.eq_ignore_ascii_case("cpu"))
            .then(|| text::lenient_number(count))
            .flatten()
    })
}

/// The version a line names (`VERSIONS`).
fn version_in(l: &str) -> Option<String> {
    let rest = VERSIONS.iter().find_map(|v| v.after(l))?;
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
        let p = parse(log, |_, l| engine_tag(l)).unwrap();
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
            let p = parse(&log, |_, l| engine_tag(l)).unwrap();
            assert_eq!(p.get_num("serving.kv_cache_gpu_blocks"), Some(blocks), "{line}");
        }
        let cpu_only = parse("INFO vllm # CPU blocks: 9362", |_, _| None).unwrap();
        assert_eq!(cpu_only.get_num("serving.kv_cache_gpu_blocks"), None);
        let p = parse(
            "INFO 08-29 13:08:35 [worker.py:287] Memory profiling takes 4.1 seconds\n\
             INFO 08-29 13:08:35 [worker.py:287] the current vLLM instance can use total_gpu_memory (23.55GiB) x \
             gpu_memory_utilization (0.78) = 18.28GiB\n",
            |_, _| None,
        )
        .unwrap();
        assert_eq!(p.get_num("serving.gpu_memory_utilization"), Some(0.78));
    }

    fn warned(p: &Parsed, part: &str) -> bool {
        p.warnings.iter().any(|w| w.contains(part))
    }

    #[test]
    fn data_parallel_engines_add_up_and_a_tensor_parallel_repeat_does_not() {
        // vLLM V1 names each data-parallel engine in its process prefix (vllm-project/vllm#25106).
        let dp = "(APIServer pid=1) INFO 09-24 20:50:00 [api_server.py:1] vLLM API server version 0.11.0\n\
                  (EngineCore_DP0 pid=3176030) INFO 09-24 20:53:41 [kv_cache_utils.py:1087] GPU KV cache size: 500,000 tokens\n\
                  (EngineCore_DP1 pid=3176031) INFO 09-24 20:53:41 [kv_cache_utils.py:1087] GPU KV cache size: 498,000 tokens\n\
                  (EngineCore_DP0 pid=3176030) INFO 09-24 20:53:41 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 15.26x\n\
                  (EngineCore_DP1 pid=3176031) INFO 09-24 20:53:41 [kv_cache_utils.py:1091] Maximum concurrency for 32,768 tokens per request: 15.20x\n";
        let p = super::super::parse(super::super::EvidenceKind::VllmLog, dp.as_bytes()).unwrap();
        assert_eq!(
            p.get_num("serving.kv_cache_tokens"),
            Some(998_000.0),
            "{:?}",
            p.warnings
        );
        assert_eq!(p.get_num("serving.max_concurrency"), Some(30.46));
        assert!(warned(&p, "2 data-parallel engines"), "{:?}", p.warnings);
        // Before vLLM 0.11 the prefix was `(EngineCore_1 pid=…)`.
        assert_eq!(engine_tag("(EngineCore_1 pid=4661) INFO x"), Some(1));
        assert_eq!(engine_tag("(EngineCore pid=4661) INFO x"), None);
        // One engine's workers repeat the line (vLLM 0.8–0.10): the smallest, never a sum.
        let tp = "INFO vLLM API server version 0.9.1\n\
                  (VllmWorker rank=0 pid=11) INFO GPU KV cache size: 335,360 tokens\n\
                  (VllmWorker rank=1 pid=12) INFO GPU KV cache size: 335,168 tokens\n";
        let p = parse(tp, |_, l| engine_tag(l)).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(335_168.0));
        assert!(warned(&p, "one per worker"), "{:?}", p.warnings);
    }

    #[test]
    fn a_restarted_server_is_judged_by_its_last_start_up_alone() {
        let log = "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.8.5\n\
                   INFO 05-01 10:00:00 [cli_args.py:1] non-default args: {'gpu_memory_utilization': 0.8}\n\
                   INFO 05-01 10:01:00 [kv_cache_utils.py:1] GPU KV cache size: 100,000 tokens\n\
                   INFO 05-01 10:01:00 [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 12.21x\n\
                   INFO 05-01 11:00:00 [api_server.py:1] vLLM API server version 0.9.1\n\
                   INFO 05-01 11:00:00 [cli_args.py:1] non-default args: {'gpu_memory_utilization': 0.95}\n\
                   INFO 05-01 11:01:00 [kv_cache_utils.py:1] GPU KV cache size: 300,000 tokens\n\
                   INFO 05-01 11:01:00 [kv_cache_utils.py:1] Maximum concurrency for 8,192 tokens per request: 36.62x\n";
        let p = parse(log, |_, _| None).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(300_000.0));
        assert_eq!(p.get_num("serving.max_concurrency"), Some(36.62));
        assert_eq!(p.get_num("serving.gpu_memory_utilization"), Some(0.95));
        assert!(warned(&p, "2 start-ups"), "{:?}", p.warnings);
        // A later start-up that died before its cache leaves the earlier figures, and says so.
        let died = format!(
            "{}INFO 05-01 12:00:00 [api_server.py:1] vLLM API server version 0.9.1\n\
             ERROR 05-01 12:00:30 [core.py:1] EngineCore failed to start.\n",
            &log[..log.find("INFO 05-01 11:00:00").unwrap()]
        );
        let p = parse(&died, |_, _| None).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(100_000.0));
        assert!(
            warned(&p, "a later start-up (from line 5) failed before its KV cache"),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn a_start_up_that_failed_after_sizing_its_cache_is_said_so() {
        // nlzy/vllm-gfx906#44: the cache was sized, then CUDA graph capture ran out of memory.
        let log = "(EngineCore_0 pid=4661) INFO 09-29 05:54:47 [kv_cache_utils.py:849] GPU KV cache size: 305,808 tokens\n\
                   (EngineCore_0 pid=4661) INFO 09-29 05:54:47 [kv_cache_utils.py:853] Maximum concurrency for 16,384 tokens per request: 18.67x\n\
                   (VllmWorker PP0_TP0 pid=4797) ERROR 09-29 05:54:49 [multiproc_executor.py:596] WorkerProc hit an exception.\n";
        let p = parse(log, |_, l| engine_tag(l)).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(305_808.0));
        assert!(
            warned(&p, "the start-up failed after its KV cache was sized (line 3"),
            "{:?}",
            p.warnings
        );
        // A traceback after the server is up is a request's, not the start-up's.
        let up = log.replace(
            "(VllmWorker PP0_TP0",
            "INFO Application startup complete.\n(VllmWorker PP0_TP0",
        );
        let p = parse(&up, |_, l| engine_tag(l)).unwrap();
        assert!(!warned(&p, "start-up failed"), "{:?}", p.warnings);
    }

    #[test]
    fn a_hybrid_models_token_line_that_disagrees_with_its_concurrency_is_said_so() {
        // vllm-project/vllm#40691 (0.19.0, Qwen3.5): 290,864 ÷ 32,768 is 8.9, not 33.04.
        let log = "INFO [kv_cache_utils.py:1319] GPU KV cache size: 290,864 tokens\n\
                   INFO [kv_cache_utils.py:1324] Maximum concurrency for 32,768 tokens per request: 33.04x\n";
        let p = parse(log, |_, _| None).unwrap();
        assert_eq!(
            p.get_num("serving.kv_cache_tokens"),
            Some(290_864.0),
            "the line, as logged"
        );
        assert!(
            warned(
                &p,
                "290,864 tokens, but its concurrency says 33.04 × 32,768 = 1,082,654"
            ),
            "{:?}",
            p.warnings
        );
        // A full-attention model's two figures agree up to the concurrency's two decimals
        // (vllm-project/vllm#10517: 1478 blocks × 16 = 23,648 tokens, 0.82x of 29,000).
        let agree = "INFO vLLM GPU KV cache size: 23,648 tokens\n\
                     INFO Maximum concurrency for 29000 tokens per request: 0.82x\n";
        let p = parse(agree, |_, _| None).unwrap();
        assert!(!warned(&p, "its concurrency says"), "{:?}", p.warnings);
    }

    #[test]
    fn the_utilization_advice_of_newer_vllm_gives_the_current_value() {
        // LMCache/LMCache#3326 (vLLM ≥ 0.18): the advice names the option before its value.
        let log = "(EngineCore pid=9) INFO [gpu_worker.py:1] vLLM: The current --gpu-memory-utilization=0.9000 is \
                   equivalent to --gpu-memory-utilization=0.8981 without CUDA graph memory profiling. To maintain the \
                   same effective KV cache size as before, increase --gpu-memory-utilization to 0.9019.\n";
        let p = parse(log, |_, _| None).unwrap();
        assert_eq!(p.get_num("serving.gpu_memory_utilization"), Some(0.9));
        let from = "INFO vLLM increase --gpu-memory-utilization from 0.7000 to 0.7021\n";
        assert_eq!(
            parse(from, |_, _| None)
                .unwrap()
                .get_num("serving.gpu_memory_utilization"),
            Some(0.7)
        );
    }

    /// vLLM 0.11 with Ray's data-parallel backend (ray-project/kuberay#4366): each engine is a
    /// `DPEngineCoreActor` told apart by its pid, under the API server's own prefix.
    #[test]
    fn rays_data_parallel_engine_actors_add_up() {
        let log = "(APIServer pid=5332) INFO 01-12 06:15:00 [api_server.py:1] vLLM API server version 0.11.0\n\
                   (APIServer pid=5332) (DPEngineCoreActor pid=5439, ip=10.233.69.249) INFO 01-12 06:16:00 [kv_cache_utils.py:1087] GPU KV cache size: 938,544 tokens\n\
                   (APIServer pid=5332) (DPEngineCoreActor pid=5862) INFO 01-12 06:16:00 [kv_cache_utils.py:1087] GPU KV cache size: 938,544 tokens\n";
        let p = super::super::parse(super::super::EvidenceKind::VllmLog, log.as_bytes()).unwrap();
        assert_eq!(
            p.get_num("serving.kv_cache_tokens"),
            Some(1_877_088.0),
            "{:?}",
            p.warnings
        );
    }

    /// A start-up that failed before its cache, then a new one: the new one is judged on its own
    /// (its line, its own failure after sizing its cache).
    #[test]
    fn a_start_up_after_one_that_failed_early_is_judged_on_its_own() {
        let log = "INFO 05-01 10:00:00 [api_server.py:1] vLLM API server version 0.9.1\n\
                   ERROR 05-01 10:00:30 [core.py:1] EngineCore failed to start.\n\
                   INFO 05-01 11:00:00 [api_server.py:1] vLLM API server version 0.9.1\n\
                   INFO 05-01 11:01:00 [kv_cache_utils.py:1] GPU KV cache size: 300,000 tokens\n\
                   ERROR 05-01 11:01:30 [core.py:1] torch.OutOfMemoryError: CUDA out of memory.\n";
        let p = parse(log, |_, _| None).unwrap();
        assert_eq!(p.get_num("serving.kv_cache_tokens"), Some(300_000.0));
        assert!(
            p.warnings
                .iter()
                .any(|w| w.contains("failed after its KV cache was sized (line 5")),
            "{:?}",
            p.warnings
        );
    }
}
