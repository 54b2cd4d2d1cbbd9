//! `kind=auto`: recognise a format from content. Checks go from the most to the least specific
//! marker; `None` when no text format matches (the caller stores the file as `log`). JSON always
//! gets a kind: JSON no reader knows goes to bench-serving, whose error lists what is read.
//! Launcher prefixes are stripped first, so a tagged nccl-tests log is still nccl-tests.

use super::EvidenceKind as K;

pub(crate) fn detect(bytes: &[u8]) -> Option<K> {
    let s = super::text::decode(bytes).ok()?;
    // Output captured through a launcher is recognised by what it holds, not by its prefixes.
    let stripped = super::launcher::strip(&s);
    detect_text(&stripped.text)
}

// Long, and reads better whole: one test per format, in the order they must be tried.
fn detect_text(s: &str) -> Option<K> {
    let t = s.trim_start();
    if s.contains("\"DCGM GPU Diagnostic\"") || s.contains("\"DCGM Diagnostic\"") {
        return Some(K::DcgmDiag);
    }
    // A line that only starts like JSON (`[node005:291005] PMIX ERROR …` before an nccl-tests banner)
    // is text: the text checks below still run when it is not JSON.
    if t.starts_with('{') || t.starts_with('[') {
        if let Some(kind) = detect_json(t) {
            return Some(kind);
        }
    }
    if s.contains("<nvidia_smi_log") || super::nvidia_smi_text::is_q_text(s) {
        return Some(K::NvidiaSmiQuery);
    }
    if super::nvidia_smi_text::is_table(s) {
        return Some(K::NvidiaSmiQuery);
    }
    if s.contains("# TYPE DCGM_FI_") || s.lines().take(2000).any(|l| l.trim_start().starts_with("DCGM_FI_")) {
        return Some(K::DcgmExporter);
    }
    if s.contains("Serving Benchmark Result") {
        return Some(K::BenchServing);
    }
    if s.contains("| Diagnostic") && s.contains("| Result") || s.contains("Successfully ran diagnostic") {
        return Some(K::DcgmDiag);
    }
    let lines = || s.lines().map(str::trim).filter(|l| !l.is_empty());
    if lines().take(50).any(|l| {
        l.split_once(' ').is_some_and(|(n, rest)| {
            n.parse::<u32>().is_ok() && (rest.starts_with("GPU found") || rest.starts_with("GPUs found"))
        })
    }) {
        return Some(K::DcgmDiscovery);
    }
    if lines().any(|l| {
        let b = l.trim_start_matches('#').trim_start();
        b.starts_with("nThread ") || b.starts_with("Avg bus bandwidth")
    }) || (s.contains("out-of-place") && s.contains("busbw"))
    {
        return Some(K::NcclTests);
    }
    if lines().take(5).any(|l| l.starts_with("GPU ") && l.contains("(UUID: ")) {
        return Some(K::NvidiaSmiList);
    }
    // The listing as PyTorch's and vLLM's collect_env print it, without the UUIDs.
    let listed = |l: &str| {
        l.strip_prefix("GPU ")
            .and_then(|r| r.split_once(": "))
            .is_some_and(|(n, name)| {
                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && name.starts_with(char::is_alphabetic)
            })
    };
    if lines().next().is_some() && lines().take(5).all(listed) {
        return Some(K::NvidiaSmiList);
    }
    let first = lines().next().unwrap_or_default();
    let first_clean = super::text::strip_ansi(first);
    if lines().take(10).any(|l| {
        let l = super::text::strip_ansi(l);
        let mut it = l.split_whitespace();
        it.next() == Some("GPU0")
            && it
                .next()
                .is_some_and(|x| x == "X" || x == "GPU1" || x == "CPU" || x.starts_with("NIC"))
    }) || (first_clean.split_whitespace().next() == Some("GPU0") && s.contains("Legend"))
    {
        return Some(K::NvidiaSmiTopo);
    }
    if s.contains("# TYPE vllm:")
        || s.contains("# TYPE ray_vllm:")
        || s.contains("# TYPE ray_vllm_")
        || lines()
            .take(2000)
            .any(|l| l.starts_with("vllm:") || l.starts_with("ray_vllm:") || l.starts_with("ray_vllm_"))
    {
        return Some(K::VllmMetrics);
    }
    if s.contains("GPU KV cache size:")
        || s.contains("Maximum concurrency for ")
        || (s.contains("vLLM") && s.contains("INFO"))
    {
        return Some(K::VllmLog);
    }
    let head = first.to_ascii_lowercase();
    if head.contains("time to first token")
        || head.contains("request throughput")
        // GenAI-Perf writes "Time To First Token", AIPerf "Time to First Token".
        || head.starts_with("metric,") && s.to_ascii_lowercase().contains("time to first token")
    {
        return Some(K::BenchServing);
    }
    // One column queried: `--query-gpu=ecc.errors.uncorrected.volatile.total --format=csv`.
    if head.trim().starts_with("ecc.errors.uncorrected.") && !head.trim().contains(' ') {
        return Some(K::NvidiaSmiQuery);
    }
    if head.contains(',')
        && (head.contains("memory.total")
            || head.contains("memory.used")
            || head.starts_with("name, uuid")
            || head.contains("driver_version")
            || head.contains("ecc.errors")
            || head.contains("pci.bus_id"))
    {
        return Some(K::NvidiaSmiQuery);
    }
    // A harness's document after log lines that open with a bracket (`[node005:291005] PMIX ERROR:
    // …`, `[INFO] …`), when no text format above took the file.
    let after_logs = s
        .find(['{', '['])
        .and_then(|first| super::text::json_after_log_lines(s, first));
    match after_logs.and_then(|at| detect_json(s.get(at..)?)) {
        Some(kind @ (K::Probe | K::Metrics | K::CheckpointRestore)) => Some(kind),
        _ => None,
    }
}

fn detect_json(t: &str) -> Option<K> {
    use serde_json::Value;
    // Python's json.dumps (SGLang's bench_serving) writes `Infinity` and `NaN`.
    let t = &*super::text::python_json(t);
    // A document wider than an item's key limit is never built: its top-level keys name the kind,
    // whose parser then refuses it with the limit as the error.
    if let Some(super::limits::Scanned { top_keys, .. }) = super::limits::too_wide(t) {
        let has = |k: &str| top_keys.iter().any(|t| t == k);
        return Some(if has("DCGM GPU Diagnostic") || has("DCGM Diagnostic") {
            K::DcgmDiag
        } else if has("checks") {
            K::Probe
        } else if has("metrics") {
            K::Metrics
        } else {
            K::BenchServing
        });
    }
    let v: Value = match serde_json::from_str(t) {
        Ok(v) => v,
        Err(_) => {
            // JSON Lines: judge by the first record
            let first = t.lines().next()?;
            let v: Value = serde_json::from_str(first).ok()?;
            // Only bench-serving has a JSON Lines form; any other first record fails there with
            // the list of formats read.
            return v.is_object().then_some(K::BenchServing);
        }
    };
    json_kind(&v)
}

fn json_kind(v: &serde_json::Value) -> Option<K> {
    // Arrays: the vLLM nightly table, or JSON nothing reads (see the end of this function).
    if v.is_array() {
        return Some(K::BenchServing);
    }
    let o = v.as_object()?;
    if o.contains_key("DCGM GPU Diagnostic") || o.contains_key("DCGM Diagnostic") {
        return Some(K::DcgmDiag);
    }
    if o.get("checks").is_some_and(|c| c.is_object()) {
        return Some(K::Probe);
    }
    if o.get("metrics").is_some_and(|c| c.is_object()) {
        // AIPerf's per-request `profile_export.jsonl` record (`{"metadata": …, "metrics":
        // {"time_to_first_token": {"value": 120.0, "unit": "ms"}, …}}`): a load test, also when
        // the file holds one record; a harness's metrics are plain numbers.
        let aiperf_record = super::bench_stats_json::is_aggregate(o)
            || (super::bench_stats_json::is_record(o)
                && o["metrics"]
                    .as_object()
                    .is_some_and(|m| m.values().any(|v| v.get("unit").is_some())));
        return Some(if aiperf_record { K::BenchServing } else { K::Metrics });
    }
    if super::nccl::is_json_report(o) {
        return Some(K::NcclTests);
    }
    if o.contains_key("written") && o.contains_key("restored") {
        return Some(K::CheckpointRestore);
    }
    if o.contains_key("completed")
        || o.contains_key("request_throughput")
        || o.keys()
            .any(|k| k.ends_with("_ttft_ms") || k.starts_with("results_ttft_s"))
        || o.get("serving").is_some_and(|c| c.is_object())
        || super::bench_guidellm::is_report(o)
        || super::bench_stats_json::is_summary(o)
        || super::bench_stats_json::is_record(o)
    {
        return Some(K::BenchServing);
    }
    // JSON that matches no kind goes to the bench-serving reader too: its error lists every JSON
    // format rentcheck reads, so the upload is `failed` with a reason instead of a `log` with nothing.
    Some(K::BenchServing)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_query_gpu_csv_of_ecc_counters_without_memory_columns_is_nvidia_smi_query() {
        // Synthetic, in the shape `nvidia-smi --query-gpu=index,name,temperature.gpu,
        // ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total --format=csv` prints.
        let csv = "index, name, temperature.gpu, ecc.errors.corrected.volatile.total, ecc.errors.uncorrected.volatile.total\n\
                   0, NVIDIA H100 80GB HBM3, 31, 0, 0\n";
        assert_eq!(detect(csv.as_bytes()), Some(K::NvidiaSmiQuery));
    }

    #[test]
    fn a_slurm_nccl_tests_output_with_pmix_errors_and_nccl_info_lines_is_nccl_tests() {
        // tests/fixtures/nccl-tests/PROVENANCE.md: a real srun -l output with 64 PMIX ERROR and
        // libfabric lines of all ranks before the banner and NCCL INFO lines inside the table.
        let text =
            include_str!("../../../../tests/fixtures/nccl-tests/h100-x16-2node-srun-l-pmix-libfabric-nccl-info.txt");
        assert_eq!(detect(text.as_bytes()), Some(K::NcclTests));
        let got = super::super::parse(K::NcclTests, text.as_bytes()).unwrap();
        // The real run's figures: the largest out-of-place busbw 166.22 GB/s, the tool's average 142.735.
        assert_eq!(got.get_num("nccl.busbw_peak_gbps"), Some(166.22));
        assert_eq!(got.get_num("nccl.busbw_avg_gbps"), Some(142.735));
        assert_eq!(got.get_num("nccl.world_size"), Some(16.0));
    }

    #[test]
    fn sglang_json_lines_with_pythons_infinity_and_nan_are_bench_serving() {
        let text = include_str!(
            "../../../../tests/fixtures/bench-serving/sglang-bench-serving-request-rate-infinity-nan.jsonl"
        );
        assert_eq!(detect(text.as_bytes()), Some(K::BenchServing));
    }

    #[test]
    fn one_aiperf_record_is_bench_serving_and_a_harness_document_is_metrics() {
        // Synthetic, in the shape of AIPerf's profile_export.jsonl: a file of one record was read as
        // a harness `metrics` document, whose numbers its {value, unit} objects are not.
        let record = r#"{"metadata": {"x_request_id": "a", "benchmark_phase": "profiling"}, "metrics": {"time_to_first_token": {"value": 120.0, "unit": "ms"}}, "error": null}"#;
        assert_eq!(detect(record.as_bytes()), Some(K::BenchServing));
        let harness = r#"{"metadata": {"run": "r1"}, "metrics": {"gpu.count": 8}}"#;
        assert_eq!(detect(harness.as_bytes()), Some(K::Metrics));
    }

    #[test]
    fn an_aiperf_csv_export_is_bench_serving() {
        // Synthetic: AIPerf spells the metric "Time to First Token" (GenAI-Perf: "Time To First Token").
        let csv =
            "Metric,avg,min,max,p99,p90,p50,std\nTime to First Token (ms),120.5,80.1,300.2,290.0,200.0,110.0,30.0\n";
        assert_eq!(detect(csv.as_bytes()), Some(K::BenchServing));
    }
}
