//! Shapes of real output that the parsers misread before parser version 5, each as people paste
//! it: what the tool prints, where it was seen, and what the metric keys must then say.

use super::{detect_kind, parse, EvidenceKind as K, MetricValue, Parsed};

fn parsed(kind: K, s: &str) -> Parsed {
    parse(kind, s.as_bytes()).unwrap_or_else(|e| panic!("{kind:?}: {e}"))
}

fn list(p: &Parsed, key: &str) -> Vec<String> {
    match p.metrics.get(key) {
        Some(MetricValue::List(l)) => l.clone(),
        other => panic!("{key}: {other:?}"),
    }
}

/// `nvidia-smi --query-gpu=… --format=csv -l 5` (and `-lms 100`, the form GPU loggers use) prints
/// every GPU once per interval under one header: one V100 sampled three times is one GPU, its
/// largest memory used kept, and an aggregate ECC counter read once, not once per sample.
#[test]
fn a_query_gpu_log_of_several_samples_counts_each_gpu_once() {
    let log = "timestamp, index, name, memory.used [MiB], memory.total [MiB], ecc.errors.uncorrected.aggregate.total
2025/05/22 09:42:33.587, 0, Tesla V100-SXM2-32GB, 1 MiB, 32768 MiB, 2
2025/05/22 09:42:33.590, 1, Tesla V100-SXM2-32GB, 3 MiB, 32768 MiB, 0
2025/05/22 09:42:38.588, 0, Tesla V100-SXM2-32GB, 4 MiB, 32768 MiB, 2
2025/05/22 09:42:38.590, 1, Tesla V100-SXM2-32GB, 3 MiB, 32768 MiB, 0
2025/05/22 09:42:43.588, 0, Tesla V100-SXM2-32GB, 2 MiB, 32768 MiB, 2
2025/05/22 09:42:43.590, 1, Tesla V100-SXM2-32GB, 3 MiB, 32768 MiB, 0
";
    let p = parsed(K::NvidiaSmiQuery, log);
    assert_eq!(p.get_num("gpu.count"), Some(2.0));
    assert_eq!(list(&p, "gpu.models").len(), 2);
    assert_eq!(p.get_num("gpu.memory_used_mib_max"), Some(4.0));
    assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), Some(2.0));
    assert!(
        p.warnings.iter().any(|w| w.contains("4 rows were further samples")),
        "{:?}",
        p.warnings
    );
    // Queried again in a shell loop: the header comes again and is no GPU named "name".
    let looped = "index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\n\
                  index, name, memory.total [MiB]\n0, NVIDIA H100 80GB HBM3, 81559 MiB\n";
    let p = parsed(K::NvidiaSmiQuery, looped);
    assert_eq!(list(&p, "gpu.models"), ["NVIDIA H100 80GB HBM3"]);
    // A loop of a query that names no GPU: each block is one sample, a GPU its place in it.
    let unnamed = "memory.used [MiB]\n10 MiB\n20 MiB\nmemory.used [MiB]\n30 MiB\n5 MiB\n";
    let p = parsed(K::NvidiaSmiQuery, unnamed);
    assert_eq!(p.get_num("gpu.count"), Some(2.0));
    assert_eq!(p.get_num("gpu.memory_used_mib_max"), Some(30.0));
}

/// A counter that read 5 and then `[N/A]` (or 0 after a GPU reset) had errors: the largest reading
/// of each ECC counter is kept, not the newest.
#[test]
fn a_sampled_ecc_counter_keeps_its_largest_reading() {
    let log = "timestamp, index, ecc.errors.uncorrected.volatile.total
2025/05/22 09:42:33.587, 0, 5
2025/05/22 09:42:38.588, 0, [N/A]
2025/05/22 09:42:43.588, 0, 0
";
    let p = parsed(K::NvidiaSmiQuery, log);
    assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), Some(5.0));
}

/// `--query-gpu=timestamp,name,memory.used -l 1` names no GPU: two GPUs sampled twice are four rows
/// that nothing tells apart, so no GPU count is given (it would pass a `gpu.count ≥ 4` criterion).
#[test]
fn a_timed_log_that_names_no_gpu_gives_no_count() {
    let log = "timestamp, name, memory.used [MiB]
2025/05/22 09:42:33.587, NVIDIA L4, 100 MiB
2025/05/22 09:42:33.590, NVIDIA L4, 120 MiB
2025/05/22 09:42:34.587, NVIDIA L4, 900 MiB
2025/05/22 09:42:34.590, NVIDIA L4, 130 MiB
";
    let p = parsed(K::NvidiaSmiQuery, log);
    assert_eq!(p.get_num("gpu.count"), None);
    assert!(!p.metrics.contains_key("gpu.models"));
    assert_eq!(p.get_num("gpu.memory_used_mib_max"), Some(900.0));
    assert!(
        p.warnings.iter().any(|w| w.contains("add index to the query")),
        "{:?}",
        p.warnings
    );
}

/// Health scripts query the ECC counter alone: one column, so no comma in the header.
#[test]
fn a_query_of_the_ecc_counter_alone_is_read_and_recognised() {
    let s = "ecc.errors.uncorrected.volatile.total\n0\n0\n";
    assert_eq!(detect_kind(s.as_bytes()), Some(K::NvidiaSmiQuery));
    // The corrected counter is not what the key counts: such a file is no query this reads.
    assert_eq!(detect_kind(b"ecc.errors.corrected.volatile.total\n0\n"), None);
    let p = parsed(K::NvidiaSmiQuery, s);
    assert_eq!(p.get_num("gpu.ecc_errors_uncorrected"), Some(0.0));
    assert_eq!(p.get_num("gpu.count"), Some(2.0));
}

/// PyTorch's and vLLM's `collect_env` print `nvidia-smi -L` with the UUIDs taken out (as in
/// vllm-project/vllm issue 15592): the GPUs are still listed.
#[test]
fn a_gpu_listing_without_uuids_counts_its_gpus() {
    let s = "GPU 0: NVIDIA A100 80GB PCIe\nGPU 1: NVIDIA A100 80GB PCIe\nGPU 2: NVIDIA A100 80GB PCIe\n\
             GPU 3: NVIDIA A100 80GB PCIe\n";
    assert_eq!(detect_kind(s.as_bytes()), Some(K::NvidiaSmiList));
    let p = parsed(K::NvidiaSmiList, s);
    assert_eq!(p.get_num("gpu.count"), Some(4.0));
    assert_eq!(list(&p, "gpu.models"), vec!["NVIDIA A100 80GB PCIe".to_string(); 4]);
    assert!(list(&p, "gpu.uuids").is_empty());
    assert!(
        p.warnings.iter().any(|w| w.contains("without `(UUID: …)`")),
        "{:?}",
        p.warnings
    );
    // `nvidia-smi -q` names a GPU by its bus id: not a listing, whatever kind it was sent as.
    let q = "GPU 00000000:17:00.0\n    Product Name : NVIDIA H100\nGPU 00000000:2A:00.0\n";
    assert_ne!(detect_kind(q.as_bytes()), Some(K::NvidiaSmiList));
    assert!(parse(K::NvidiaSmiList, q.as_bytes()).is_err());
    // In a listing with UUIDs, a line without one was cut short: not counted, under a name it was
    // cut to.
    let cut = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de)\nGPU 1: NVIDIA H1\n";
    let p = parsed(K::NvidiaSmiList, cut);
    assert_eq!(p.get_num("gpu.count"), Some(1.0));
    assert!(p.warnings.iter().any(|w| w.contains("line 2")), "{:?}", p.warnings);
}

/// Ray colours its prefix on a terminal (vllm-project/vllm issue 5477:
/// `\x1b[36m(RayWorkerWrapper pid=4183, ip=10.3.32.122)\x1b[0m ERROR …`).
#[test]
fn a_coloured_ray_prefix_is_stripped() {
    let s = "\x1b[36m(run pid=4183, ip=10.3.32.122)\x1b[0m GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de)\n\
             \x1b[36m(run pid=4183, ip=10.3.32.122)\x1b[0m GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-75c4ee16-a840-6f6c-9a7b-5ed8f41598b8)\n";
    let p = parsed(K::NvidiaSmiList, s);
    assert_eq!(p.get_num("gpu.count"), Some(2.0));
    assert!(p.warnings.iter().any(|w| w.contains("Ray")), "{:?}", p.warnings);
    // Dim, then cyan, as older Ray releases print it.
    let dim = s.replace("\x1b[36m", "\x1b[2m\x1b[36m");
    assert_eq!(parsed(K::NvidiaSmiList, &dim).get_num("gpu.count"), Some(2.0));
}

/// Python's `json.dumps` writes `NaN` and `Infinity` by default: a harness's document keeps its
/// other figures, and the warning says what was left out.
#[test]
fn a_harness_documents_nan_and_infinity_are_left_out_not_the_document() {
    let p = parsed(
        K::Metrics,
        r#"{"metrics": {"serving.ttft_p95_ms": 212.5, "eval.accuracy": NaN, "eval.loss": -Infinity}}"#,
    );
    assert_eq!(p.get_num("serving.ttft_p95_ms"), Some(212.5));
    assert!(!p.metrics.contains_key("eval.accuracy"));
    assert!(
        p.warnings.iter().any(|w| w.contains("NaN and Infinity")),
        "{:?}",
        p.warnings
    );
    let p = parsed(
        K::Probe,
        r#"{"checks": {"cold_start": true, "cold_start_seconds": NaN}}"#,
    );
    assert!(p.metrics.contains_key("probe.cold_start"));
    assert!(!p.metrics.contains_key("probe.cold_start_seconds"));
    let p = parsed(
        K::CheckpointRestore,
        r#"{"written": true, "restored": false, "seconds": Infinity}"#,
    );
    assert!(p.metrics.contains_key("checkpoint.restore_ok"));
    assert!(!p.metrics.contains_key("checkpoint.restore_seconds"));
    // Only the JSON is read so: a log line before it keeps its words and its quotes.
    let p = parsed(
        K::Probe,
        "loading \"model, loss is NaN\n{\"checks\": {\"cold_start\": true, \"drain_seconds\": NaN}}\n",
    );
    assert!(p.metrics.contains_key("probe.cold_start"));
    assert!(
        p.warnings.iter().any(|w| w.contains("NaN and Infinity")),
        "{:?}",
        p.warnings
    );
}

/// A log line that opens with a bracket (`mpirun`'s `[node005:291005] PMIX ERROR: …`, `[INFO] …`)
/// before the JSON is text before it, like any other.
#[test]
fn a_bracketed_log_line_before_the_json_is_passed_over() {
    let s = "[node005:291005] PMIX ERROR: ERROR in file gds_ds12_lock_pthread.c at line 168\n\
             [INFO] probes done\n{\"checks\": {\"cold_start\": true}}\n";
    let p = parsed(K::Probe, s);
    assert!(p.metrics.contains_key("probe.cold_start"));
    assert_eq!(detect_kind(s.as_bytes()), Some(K::Probe));
    // Python logging's, PyTorch's and a rank's tags.
    for line in [
        "[2024-09-11 08:00:00,123] INFO loading",
        "[W socket.cpp:464] [c10d] The server socket has failed to listen",
        "[rank0]: probes done",
    ] {
        let s = format!("{line}\n{{\"metrics\": {{\"eval.accuracy\": 0.91}}}}\n");
        assert_eq!(parsed(K::Metrics, &s).get_num("eval.accuracy"), Some(0.91), "{line}");
        assert_eq!(detect_kind(s.as_bytes()), Some(K::Metrics), "{line}");
    }
    // JSON that is broken stays an error at its own line.
    let e = parse(K::Probe, b"[INFO] probes done\n{\"checks\": {\"cold_start\": tru}}\n").unwrap_err();
    assert_eq!(e.line, Some(2), "{e}");
}

/// A checkpoint harness names itself as the other harness documents do.
#[test]
fn a_checkpoint_document_keeps_its_tool_and_version() {
    let p = parsed(
        K::CheckpointRestore,
        r#"{"tool": "ckpt-harness", "tool_version": "1.4.2", "written": true, "restored": true, "seconds": 12.5}"#,
    );
    assert_eq!(p.tool.as_deref(), Some("ckpt-harness"));
    assert_eq!(p.tool_version.as_deref(), Some("1.4.2"));
    assert_eq!(p.get_num("checkpoint.restore_seconds"), Some(12.5));
}

/// SGLang's `bench_serving` without streaming writes `Mean ITL (ms): 0.00`, `P99 ITL (ms): 0.00`
/// for 996 completed requests (WILLIAM-qmul/SGLang-dLoRA, dlora_results.md @ ff367e62): nothing was
/// measured, so no ITL key (an ITL target passed on it), and its `-0.00` median TPOT is 0.
#[test]
fn latencies_a_run_wrote_as_zero_for_completed_requests_are_left_out() {
    let text =
        include_str!("../../../../tests/fixtures/bench-serving/sglang-console-nonstreaming-rate-sweep-dlora.txt");
    let p = parsed(K::BenchServing, text);
    let keys: Vec<&String> = p.metrics.keys().collect();
    assert!(keys.iter().all(|k| !k.contains("itl_")), "{keys:?}");
    assert!(p.get_num("serving.ttft_p99_ms").is_some(), "{keys:?}");
    assert!(
        p.metrics
            .iter()
            .all(|(k, v)| !k.contains("tpot_p50") || matches!(v, MetricValue::Number(n) if n.is_sign_positive())),
        "{:?}",
        p.metrics
    );
    assert!(
        p.warnings.iter().any(|w| w.contains("every ITL figure is 0")),
        "{:?}",
        p.warnings
    );
}

/// Newer `vllm bench serve --save-detailed` files keep each request's `latencies` (vLLM's
/// benchmarks/serve.py: `"latencies": [output.latency …]`): the end-to-end percentiles come from
/// them (the default `--percentile-metrics` leave e2el out of the summary, so there were none) and
/// TPOT is (latency − TTFT) ÷ (tokens − 1), not rebuilt from the gaps.
#[test]
fn per_request_latencies_give_exact_end_to_end_figures() {
    let doc = r#"{"backend": "vllm", "completed": 2, "failed": 0, "duration": 1.0,
        "request_throughput": 2.0, "output_throughput": 6.0,
        "ttfts": [0.1, 0.2], "itls": [[0.02, 0.02], [0.03, 0.03]], "latencies": [0.2, 0.3],
        "output_lens": [3, 3], "errors": ["", ""]}"#;
    let p = parsed(K::BenchServing, doc);
    assert_eq!(p.get_num("serving.e2e_p50_ms"), Some(250.0));
    assert_eq!(
        p.get_num("serving.e2e_p99_ms").map(|x| (x * 1000.0).round() / 1000.0),
        Some(299.0)
    );
    // (200 − 100) ÷ 2 and (300 − 200) ÷ 2: 50 ms each (the gaps alone said 20 and 30).
    assert_eq!(p.get_num("serving.tpot_p50_ms"), Some(50.0));
}
