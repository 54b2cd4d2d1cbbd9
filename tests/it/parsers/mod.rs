//! Parser tests on the project's own fixtures (tests/fixtures/<kind>/…), written in the real formats.

mod conformance;
mod formats;
mod ingest;
mod load_points;

use rentcheck::evidence::parsers::*;
use serde_json::Value;
use std::path::PathBuf;

fn fixture(rel: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn ok(kind: EvidenceKind, rel: &str) -> Parsed {
    let b = fixture(rel);
    assert_eq!(detect_kind(&b), Some(kind), "detect {rel}");
    parse(kind, &b).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn num(p: &Parsed, k: &str) -> f64 {
    match p.metrics.get(k) {
        Some(MetricValue::Number(n)) => *n,
        other => panic!(
            "{k}: expected a number, got {other:?}; metrics: {:?}",
            p.metrics.keys().collect::<Vec<_>>()
        ),
    }
}
fn close(p: &Parsed, k: &str, want: f64) {
    let got = num(p, k);
    assert!(
        (got - want).abs() <= 1e-6 * want.abs().max(1.0),
        "{k}: got {got}, want {want}"
    );
}
fn text(p: &Parsed, k: &str) -> String {
    match p.metrics.get(k) {
        Some(MetricValue::Text(t)) => t.clone(),
        other => panic!("{k}: expected text, got {other:?}"),
    }
}
fn boolean(p: &Parsed, k: &str) -> bool {
    match p.metrics.get(k) {
        Some(MetricValue::Bool(b)) => *b,
        other => panic!("{k}: expected bool, got {other:?}"),
    }
}
fn list(p: &Parsed, k: &str) -> Vec<String> {
    match p.metrics.get(k) {
        Some(MetricValue::List(l)) => l.clone(),
        other => panic!("{k}: expected list, got {other:?}"),
    }
}
fn warned(p: &Parsed, needle: &str) -> bool {
    p.warnings.iter().any(|w| w.contains(needle))
}

#[test]
fn kind_names_round_trip() {
    for k in EvidenceKind::ALL {
        assert_eq!(k.as_str().parse::<EvidenceKind>(), Ok(k));
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(json, format!("\"{}\"", k.as_str()));
    }
    assert!("nope".parse::<EvidenceKind>().is_err());
    assert_eq!(
        parse(EvidenceKind::Log, b"\xff\x00anything").unwrap(),
        Parsed::default()
    );
}

#[test]
fn parse_error_display() {
    let e = ParseError {
        line: Some(12),
        column: Some(3),
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "line 12, column 3: bad");
    let e = ParseError {
        line: Some(4),
        column: None,
        message: "bad".into(),
    };
    assert_eq!(e.to_string(), "line 4: bad");
}

#[test]
fn smi_list_h200_x8() {
    let p = ok(EvidenceKind::NvidiaSmiList, "nvidia-smi-list/h200-x8.txt");
    assert_eq!(num(&p, "gpu.count"), 8.0);
    assert_eq!(num(&p, "gpu.mig_count"), 0.0);
    assert_eq!(list(&p, "gpu.models"), vec!["NVIDIA H200".to_string(); 8]);
    assert_eq!(list(&p, "gpu.uuids").len(), 8);
}

#[test]
fn smi_list_mig_legacy_uuid_crlf() {
    let p = ok(
        EvidenceKind::NvidiaSmiList,
        "nvidia-smi-list/a30-x2-mig-legacy-uuid-crlf.txt",
    );
    assert_eq!(num(&p, "gpu.count"), 2.0);
    assert_eq!(num(&p, "gpu.mig_count"), 2.0);
    assert_eq!(num(&p, "gpu.mig_enabled_gpus"), 1.0);
    assert_eq!(list(&p, "gpu.mig_profiles"), vec!["2g.12gb", "2g.12gb"]);
    assert_eq!(list(&p, "gpu.uuids")[1], "GPU-bbbbbbbb-0000-1111-2222-333333333333");
    assert!(p.warnings.is_empty(), "{:?}", p.warnings);
}

#[test]
fn smi_list_truncated_and_failure() {
    let p = ok(EvidenceKind::NvidiaSmiList, "nvidia-smi-list/l4-x2-truncated.txt");
    assert_eq!(num(&p, "gpu.count"), 2.0);
    assert!(warned(&p, "line 2"), "{:?}", p.warnings);
    let e = parse(
        EvidenceKind::NvidiaSmiList,
        &fixture("nvidia-smi-list/driver-failure.txt"),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(e.message.contains("NVIDIA-SMI has failed"));
}

#[test]
fn topo_pcie_with_old_nic_header() {
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/l40s-x4-pcie-sys-old-nic-header.txt",
    );
    assert_eq!(num(&p, "topo.gpu_count"), 4.0);
    assert_eq!(text(&p, "topo.worst_link"), "SYS");
    assert!(!boolean(&p, "topo.nvlink_all_pairs"));
    assert_eq!(num(&p, "topo.min_nvlinks"), 0.0);
}

#[test]
fn topo_bridged_pairs_spaces() {
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/rtx-a6000-x4-nv4-bridged-pairs-spaces.txt",
    );
    assert_eq!(text(&p, "topo.worst_link"), "SYS");
    assert!(!boolean(&p, "topo.nvlink_all_pairs"));
    // The weakest pair has no NVLink: 0, whatever the bridges.
    assert_eq!(num(&p, "topo.min_nvlinks"), 0.0);
}

#[test]
fn topo_pasted_shapes_of_issue_reports() {
    // The underline's ESC bytes lost in a web paste: `[4mGPU0 … GPU NUMA ID[0m` (it was refused).
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/b300-x8-nv18-9nic-sglang-check-env-escape-lost.txt",
    );
    assert_eq!(num(&p, "topo.gpu_count"), 8.0);
    assert_eq!(text(&p, "topo.worst_link"), "NV18");
    assert!(boolean(&p, "topo.nvlink_all_pairs"));
    assert_eq!(num(&p, "topo.min_nvlinks"), 18.0);
    // A blank line between every row (it stopped at the first: "row GPU0 missing").
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/a100-x8-nv12-blank-lines-between-rows.txt",
    );
    assert_eq!(num(&p, "topo.gpu_count"), 8.0);
    assert_eq!(text(&p, "topo.worst_link"), "NV12");
    assert!(boolean(&p, "topo.nvlink_all_pairs"));
    // One bridged pair beside a third card: the weakest pair (over NODE) has none.
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/rtx-a6000-x3-nv4-pair-node-siboehm.txt",
    );
    assert_eq!(
        (num(&p, "topo.gpu_count"), text(&p, "topo.worst_link")),
        (3.0, "NODE".into())
    );
    assert_eq!(num(&p, "topo.min_nvlinks"), 0.0);
}

#[test]
fn topo_degraded_link_flagged_not_fixed() {
    let p = ok(
        EvidenceKind::NvidiaSmiTopo,
        "nvidia-smi-topo/h100-x8-degraded-nv17-ansi-header.txt",
    );
    assert_eq!(num(&p, "topo.gpu_count"), 8.0);
    assert_eq!(text(&p, "topo.worst_link"), "NV17");
    assert!(boolean(&p, "topo.nvlink_all_pairs"));
    assert_eq!(num(&p, "topo.min_nvlinks"), 17.0);
    assert!(!boolean(&p, "topo.nvlink_uniform"));
    assert!(warned(&p, "degraded"));
}

#[test]
fn topo_single_gpu() {
    let p = ok(EvidenceKind::NvidiaSmiTopo, "nvidia-smi-topo/single-gpu.txt");
    assert_eq!(num(&p, "topo.gpu_count"), 1.0);
    // One GPU has no pair: no worst link (a criterion on it is `missing`, not passed by "X").
    assert!(!p.metrics.contains_key("topo.worst_link"), "{:?}", p.metrics);
    assert!(!boolean(&p, "topo.nvlink_all_pairs"));
}

#[test]
fn topo_errors_name_the_line() {
    let e = parse(
        EvidenceKind::NvidiaSmiTopo,
        &fixture("nvidia-smi-topo/truncated-missing-rows.txt"),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(4), "{e}");
    assert!(e.message.contains("GPU2"), "{e}");
    let e = parse(
        EvidenceKind::NvidiaSmiTopo,
        &fixture("nvidia-smi-topo/garbled-cell.txt"),
    )
    .unwrap_err();
    assert_eq!((e.line, e.column), (Some(2), Some(10)), "{e}");
}

#[test]
fn query_xml_two_gpus_ecc() {
    let p = ok(
        EvidenceKind::NvidiaSmiQuery,
        "nvidia-smi-query/h100-x2-ecc-errors-v12.xml",
    );
    assert_eq!(num(&p, "gpu.count"), 2.0);
    assert_eq!(num(&p, "gpu.memory_total_mib"), 81559.0);
    assert_eq!(num(&p, "gpu.memory_used_mib_max"), 70412.0);
    assert_eq!(text(&p, "gpu.driver_version"), "550.127.05");
    assert_eq!(text(&p, "gpu.cuda_version"), "12.4");
    assert_eq!(num(&p, "gpu.ecc_errors_uncorrected"), 2.0);
    assert_eq!(num(&p, "gpu.ecc_errors_uncorrected_volatile"), 1.0);
    assert_eq!(p.tool_version.as_deref(), Some("550.127.05"));
}

#[test]
fn query_xml_truncated() {
    let r = parse(
        EvidenceKind::NvidiaSmiQuery,
        &fixture("nvidia-smi-query/h100-truncated.xml"),
    );
    let e = r.unwrap_err();
    assert_eq!(e.line, Some(34), "{e}");
    assert!(e.message.contains("XML"), "{e}");
}

#[test]
fn query_csv_ecc_and_crlf() {
    let p = ok(EvidenceKind::NvidiaSmiQuery, "nvidia-smi-query/a10-x2-query-ecc.csv");
    assert_eq!(num(&p, "gpu.count"), 2.0);
    assert_eq!(num(&p, "gpu.memory_total_mib"), 23028.0);
    assert_eq!(num(&p, "gpu.memory_used_mib_max"), 22100.0);
    assert_eq!(num(&p, "gpu.ecc_errors_uncorrected"), 0.0);
    assert_eq!(text(&p, "gpu.driver_version"), "535.183.01");
}

#[test]
fn dcgm_discovery_dcgm4_status() {
    let p = ok(
        EvidenceKind::DcgmDiscovery,
        "dcgm-discovery/l40s-x2-dcgm4-status-last-known.txt",
    );
    assert_eq!(num(&p, "dcgm.gpu_count"), 2.0);
    assert_eq!(list(&p, "gpu.models"), vec!["NVIDIA L40S", "NVIDIA L40S"]);
    assert_eq!(list(&p, "gpu.pci_bus_ids")[1], "00000000:81:00.0");
    assert_eq!(num(&p, "dcgm.nvswitch_count"), 0.0);
    assert_eq!(num(&p, "dcgm.cpu_count"), 1.0);
    assert!(warned(&p, "Inaccessible"));
}

#[test]
fn dcgm_diag_json3_failure() {
    let p = ok(EvidenceKind::DcgmDiag, "dcgm-diag/dcgm3-json-r2-pcie-fail.json");
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.failed_tests"), vec!["PCIe"]);
    assert_eq!(num(&p, "dcgm.diag.warnings"), 1.0);
    assert_eq!(num(&p, "dcgm.diag.level"), 2.0);
    assert_eq!(p.tool_version.as_deref(), Some("3.3.5"));
}

#[test]
fn dcgm_diag_json4_skip_is_not_a_pass() {
    let p = ok(EvidenceKind::DcgmDiag, "dcgm-diag/dcgm4-json-r3-stress-skipped.json");
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["targeted_stress"]);
    assert_eq!(list(&p, "dcgm.diag.tests_run"), vec!["software", "memory", "pcie"]);
    assert_eq!(num(&p, "dcgm.diag.level"), 3.0);
    assert_eq!(text(&p, "gpu.driver_version"), "550.127.05");
    let p = ok(EvidenceKind::DcgmDiag, "dcgm-diag/dcgm4-json-r2-all-pass.json");
    assert!(boolean(&p, "dcgm.diag.passed"));
    assert_eq!(
        num(&p, "dcgm.diag.warnings"),
        1.0,
        "a MEMORY_ALLOC warning under a Pass still counts"
    );
}

#[test]
fn dcgm_diag_json_counts_distinct_warnings() {
    // Adapted in the test from the synthetic all-pass file: its one warning copied onto every
    // GPU's result of the same test is still one warning (one test, one message); a second
    // message is a second warning.
    let mut v: Value = serde_json::from_slice(&fixture("dcgm-diag/dcgm4-json-r2-all-pass.json")).unwrap();
    let mut copied = 0;
    fn each_results(v: &mut Value, f: &mut dyn FnMut(&mut Vec<Value>)) {
        match v {
            Value::Object(m) => {
                if let Some(Value::Array(results)) = m.get_mut("results") {
                    f(results);
                }
                m.values_mut().for_each(|x| each_results(x, f));
            }
            Value::Array(a) => a.iter_mut().for_each(|x| each_results(x, f)),
            _ => {}
        }
    }
    each_results(&mut v, &mut |results| {
        let warning = results.iter().find_map(|r| r.get("warnings").cloned());
        if let Some(w) = warning {
            for r in results.iter_mut() {
                r["warnings"] = w.clone();
                copied += 1;
            }
        }
    });
    assert!(copied > 1, "the warning was copied onto several GPUs");
    let p = parse(EvidenceKind::DcgmDiag, v.to_string().as_bytes()).unwrap();
    assert_eq!(num(&p, "dcgm.diag.warnings"), 1.0);
    let mut second = false;
    each_results(&mut v, &mut |results| {
        if let Some(r) = results.iter_mut().find(|r| r.get("warnings").is_some()) {
            if !second {
                r["warnings"][0]["warning"] = Value::from("Another message (DCGM_FR_TEST)");
                second = true;
            }
        }
    });
    let p = parse(EvidenceKind::DcgmDiag, v.to_string().as_bytes()).unwrap();
    assert_eq!(num(&p, "dcgm.diag.warnings"), 2.0);
}

#[test]
fn dcgm_diag_text_pass_and_partial_skip() {
    let p = ok(EvidenceKind::DcgmDiag, "dcgm-diag/dcgm4-text-a100-x2-r2-all-pass.txt");
    assert!(boolean(&p, "dcgm.diag.passed"));
    assert_eq!(num(&p, "dcgm.diag.level"), 2.0);
    assert_eq!(text(&p, "dcgm.version"), "4.0.0");
    let p = ok(EvidenceKind::DcgmDiag, "dcgm-diag/dcgm4-text-r2-one-gpu-skipped.txt");
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert_eq!(list(&p, "dcgm.diag.skipped_tests"), vec!["pcie"]);
    // dcgmi's own refusal and no table (it was a failed parse, the criterion missing): not every
    // test that should run ran, so no pass, as -j's runtime_error reads; DCGM's reason is kept.
    let p = parse(EvidenceKind::DcgmDiag, &fixture("dcgm-diag/not-a-diag.txt")).unwrap();
    assert!(!boolean(&p, "dcgm.diag.passed"));
    assert!(
        p.warnings
            .iter()
            .any(|w| w.contains("Error: unable to connect to host engine")),
        "{:?}",
        p.warnings
    );
}

#[test]
fn vllm_multi_model_engines_merge() {
    let p = ok(
        EvidenceKind::VllmMetrics,
        "vllm-metrics/v1-two-models-two-engines-empty-e2e.txt",
    );
    close(&p, "serving.ttft_p50_ms", 220.0);
    close(&p, "serving.ttft_p95_ms", 812.5);
    close(&p, "serving.ttft_p99_ms", 1000.0);
    close(
        &p,
        "serving.by_model.meta-llama/Llama-3.1-8B-Instruct.ttft_p50_ms",
        190.0,
    );
    close(
        &p,
        "serving.by_model.meta-llama/Llama-3.1-8B-Instruct.ttft_p95_ms",
        450.0,
    );
    close(&p, "serving.by_model.Qwen/Qwen2.5-7B-Instruct.ttft_p50_ms", 500.0);
    close(&p, "serving.by_model.Qwen/Qwen2.5-7B-Instruct.ttft_p95_ms", 1000.0);
    close(&p, "serving.requests_total", 130.0);
    close(
        &p,
        "serving.by_model.meta-llama/Llama-3.1-8B-Instruct.requests_total",
        110.0,
    );
    close(&p, "serving.preemptions_total", 3.0);
    close(&p, "serving.kv_cache_usage_max_pct", 87.0);
    close(
        &p,
        "serving.by_model.Qwen/Qwen2.5-7B-Instruct.kv_cache_usage_max_pct",
        10.0,
    );
    // The server's queue: every engine's and model's waiting requests added up (the largest one
    // series, 5, was read before; the module has always summed other labels).
    close(&p, "serving.requests_waiting_max", 8.0);
    assert!(
        !p.metrics.contains_key("serving.e2e_p95_ms"),
        "empty histogram → no value"
    );
    assert!(warned(&p, "histogram is empty"));
}

#[test]
fn vllm_truncated_scrape_is_partial() {
    let p = ok(EvidenceKind::VllmMetrics, "vllm-metrics/v1-two-models-truncated.txt");
    close(&p, "serving.requests_total", 130.0);
    // Qwen's TTFT series is cut before +Inf: it is left out of the merge
    close(&p, "serving.ttft_p95_ms", 450.0);
    assert!(!p
        .metrics
        .contains_key("serving.by_model.Qwen/Qwen2.5-7B-Instruct.ttft_p95_ms"));
    assert!(warned(&p, "cut short"));
}

#[test]
fn vllm_window_diff_and_restart() {
    let before = fixture("vllm-metrics/window-before.txt");
    let after = fixture("vllm-metrics/window-after.txt");
    let p = parse_vllm_window(&before, &after).unwrap();
    close(&p, "serving.ttft_p50_ms", 750.0);
    close(&p, "serving.requests_total", 20.0);
    close(&p, "serving.kv_cache_usage_max_pct", 50.0);
    assert!(boolean(&p, "serving.window"));
    let cumulative = parse(EvidenceKind::VllmMetrics, &after).unwrap();
    close(&cumulative, "serving.ttft_p50_ms", 700.0);
    let p = parse_vllm_window(&after, &fixture("vllm-metrics/window-after-restart.txt")).unwrap();
    assert!(warned(&p, "restarted"));
    assert!(!boolean(&p, "serving.window"));
    close(&p, "serving.requests_total", 4.0);
}

#[test]
fn vllm_rejects_nan_negative_and_huge() {
    let p = ok(EvidenceKind::VllmMetrics, "vllm-metrics/nan-and-negative.txt");
    assert!(!p.metrics.contains_key("serving.kv_cache_usage_max_pct"));
    assert!(!p.metrics.contains_key("serving.requests_waiting_max"));
    assert!(!p.metrics.contains_key("serving.requests_total"));
    assert!(warned(&p, "NaN") && warned(&p, "negative") && warned(&p, "2^53"));
}

#[test]
fn vllm_log_startup() {
    let p = ok(EvidenceKind::VllmLog, "vllm-log/v1-llama70b-tp4-startup.log");
    assert_eq!(num(&p, "serving.kv_cache_tokens"), 1_031_408.0);
    close(&p, "serving.max_concurrency", 31.48);
    assert_eq!(num(&p, "serving.max_concurrency_tokens_per_request"), 32768.0);
    close(&p, "serving.gpu_memory_utilization", 0.92);
    assert_eq!(p.tool_version.as_deref(), Some("0.8.5.post1"));
    let p = ok(EvidenceKind::VllmLog, "vllm-log/v1-cut-before-kv-cache.log");
    assert!(!p.metrics.contains_key("serving.kv_cache_tokens"));
    assert!(warned(&p, "GPU KV cache size"));
}

#[test]
fn bench_vllm_result_with_p95_and_failures() {
    let p = ok(
        EvidenceKind::BenchServing,
        "bench-serving/vllm-bench-serve-p95-failed-requests.json",
    );
    close(&p, "serving.ttft_p50_ms", 110.0);
    close(&p, "serving.ttft_p95_ms", 160.0);
    close(&p, "serving.ttft_p99_ms", 190.0);
    close(&p, "serving.itl_p95_ms", 15.5);
    close(&p, "serving.e2e_p95_ms", 3600.0);
    close(&p, "serving.e2e_p99_9_ms", 4100.0);
    close(&p, "serving.request_throughput_rps", 4.8);
    close(&p, "serving.output_tokens_per_s", 1200.0);
    close(&p, "serving.completed", 96.0);
    close(&p, "serving.error_rate", 0.04);
}

#[test]
fn bench_per_request_arrays_win() {
    let p = ok(EvidenceKind::BenchServing, "bench-serving/vllm-per-request-arrays.json");
    close(&p, "serving.ttft_p50_ms", 250.0);
    close(&p, "serving.ttft_p95_ms", 385.0);
    close(&p, "serving.ttft_p99_ms", 397.0);
    close(&p, "serving.itl_p50_ms", 35.0);
    close(&p, "serving.error_rate", 0.2);
}

#[test]
fn bench_json_lines_and_console_and_genai_perf() {
    let p = ok(EvidenceKind::BenchServing, "bench-serving/vllm-append-result.jsonl");
    assert_eq!(text(&p, "serving.run"), "conc32");
    close(&p, "serving.by_run.conc8.request_throughput_rps", 1.5);
    close(&p, "serving.by_run.conc8.error_rate", 0.0);
    close(&p, "serving.request_throughput_rps", 4.8);
    let p = ok(EvidenceKind::BenchServing, "bench-serving/console-truncated.txt");
    close(&p, "serving.completed", 50.0);
    close(&p, "serving.error_rate", 2.0 / 52.0);
    assert!(!p.metrics.contains_key("serving.ttft_p99_ms"));
    assert!(warned(&p, "cut short"));
    let p = ok(
        EvidenceKind::BenchServing,
        "bench-serving/genai-perf-profile-export-synthetic.csv",
    );
    close(&p, "serving.ttft_p95_ms", 80.5);
    close(&p, "serving.itl_p95_ms", 13.1);
    close(&p, "serving.e2e_p99_ms", 1790.0);
    close(&p, "serving.request_throughput_rps", 9.94);
    assert_eq!(p.tool.as_deref(), Some("genai-perf"));
    assert!(parse(EvidenceKind::BenchServing, &fixture("bench-serving/unknown.json")).is_err());
}

#[test]
fn nccl_wrong_rows_and_truncation() {
    let p = ok(EvidenceKind::NcclTests, "nccl-tests/h200-x8-bf16-wrong-rows.txt");
    close(&p, "nccl.busbw_peak_gbps", 402.7);
    close(&p, "nccl.busbw_at_max_size_gbps", 400.9);
    close(&p, "nccl.busbw_avg_gbps", 223.467);
    assert_eq!(num(&p, "nccl.world_size"), 8.0);
    assert_eq!(num(&p, "nccl.wrong"), 1.0);
    assert_eq!(p.tool_version.as_deref(), Some("2.13.11"));
    let p = ok(EvidenceKind::NcclTests, "nccl-tests/h200-x8-truncated-no-footer.txt");
    close(&p, "nccl.busbw_peak_gbps", 310.4);
    assert!(!p.metrics.contains_key("nccl.busbw_avg_gbps"));
    assert!(warned(&p, "Avg bus bandwidth"));
    let p = ok(
        EvidenceKind::NcclTests,
        "nccl-tests/legacy-error-column-half-over-tolerance.txt",
    );
    assert_eq!(num(&p, "nccl.wrong"), 1.0);
    assert!(parse(EvidenceKind::NcclTests, &fixture("nccl-tests/not-nccl.txt")).is_err());
}

#[test]
fn checkpoint_probe_metrics() {
    let p = ok(EvidenceKind::CheckpointRestore, "checkpoint-restore/ok.json");
    assert!(boolean(&p, "checkpoint.restore_ok"));
    close(&p, "checkpoint.restore_seconds", 42.5);
    let p = ok(
        EvidenceKind::CheckpointRestore,
        "checkpoint-restore/restore-failed.json",
    );
    assert!(!boolean(&p, "checkpoint.restore_ok"));
    assert!(parse(
        EvidenceKind::CheckpointRestore,
        &fixture("checkpoint-restore/missing-field.json")
    )
    .is_err());
    let e = parse(
        EvidenceKind::CheckpointRestore,
        &fixture("checkpoint-restore/truncated.json"),
    )
    .unwrap_err();
    assert_eq!(e.line, Some(1));
    assert!(e.column.is_some());

    let p = ok(EvidenceKind::Probe, "probe/harness.json");
    assert!(boolean(&p, "probe.alert_fired"));
    assert!(!boolean(&p, "probe.drain_restart"));
    close(&p, "probe.cold_start_s", 41.2);
    assert!(warned(&p, "bad name"));

    let p = ok(EvidenceKind::Metrics, "metrics/custom-tool.json");
    close(&p, "disk.read_mbps", 6800.5);
    assert_eq!(text(&p, "disk.model"), "Samsung PM9A3");
    assert_eq!(list(&p, "disk.devices"), vec!["nvme0n1", "nvme1n1"]);
    assert!(!p.metrics.contains_key("huge"));
    assert_eq!(p.tool.as_deref(), Some("fio"));
    let e = parse(EvidenceKind::Metrics, &fixture("metrics/non-utf8.bin")).unwrap_err();
    assert_eq!((e.line, e.column), (Some(1), Some(20)), "{e}");
}

/// Property test (hand-rolled, deterministic): histogram_quantile is monotonic in q and stays within
/// the bounds of the bucket that holds the rank.
#[test]
fn histogram_quantile_properties() {
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    for _ in 0..2000 {
        let n = 1 + (rnd() % 12) as usize;
        let mut bound = 0.0f64;
        let mut cum = 0.0f64;
        let mut buckets = Vec::new();
        for _ in 0..n {
            bound += 0.001 + (rnd() % 1000) as f64 / 100.0;
            cum += (rnd() % 50) as f64;
            buckets.push((bound, cum));
        }
        cum += (rnd() % 5) as f64;
        buckets.push((f64::INFINITY, cum));
        // shuffle: the function must not depend on input order
        for i in (1..buckets.len()).rev() {
            let j = (rnd() % (i as u64 + 1)) as usize;
            buckets.swap(i, j);
        }
        let last_finite = bound;
        let mut prev = f64::NEG_INFINITY;
        for step in 0..=100 {
            let q = step as f64 / 100.0;
            let v = histogram_quantile(q, &buckets);
            if cum == 0.0 {
                assert_eq!(v, None);
                continue;
            }
            let v = v.expect("value");
            assert!(v.is_finite(), "q={q} v={v} {buckets:?}");
            assert!(v >= prev - 1e-9, "not monotonic at q={q}: {v} < {prev} {buckets:?}");
            assert!((0.0..=last_finite + 1e-9).contains(&v), "q={q} v={v} out of range");
            prev = v;
        }
    }
    // Prometheus reference cases
    let b = [
        (0.1, 10.0),
        (0.25, 60.0),
        (0.5, 90.0),
        (1.0, 98.0),
        (f64::INFINITY, 100.0),
    ];
    assert!((histogram_quantile(0.5, &b).unwrap() - 0.22).abs() < 1e-12);
    assert_eq!(histogram_quantile(0.99, &b), Some(1.0)); // +Inf bucket → last finite bound
    assert_eq!(histogram_quantile(0.5, &[(1.0, 0.0), (f64::INFINITY, 0.0)]), None);
    assert_eq!(histogram_quantile(0.5, &[(1.0, 3.0)]), None); // no +Inf
    assert_eq!(histogram_quantile(1.5, &b), Some(f64::INFINITY));
}

#[test]
fn never_panics_on_mangled_inputs() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    for d in std::fs::read_dir(&root).unwrap() {
        let d = d.unwrap().path();
        if !d.is_dir() {
            continue; // README.md
        }
        for f in std::fs::read_dir(d).unwrap() {
            files.push(f.unwrap().path());
        }
    }
    for f in files {
        let b = std::fs::read(&f).unwrap();
        for cut in [0, 1, b.len() / 3, b.len() / 2, b.len().saturating_sub(1)] {
            let part = &b[..cut.min(b.len())];
            let _ = detect_kind(part);
            for k in EvidenceKind::ALL {
                let _ = parse(k, part);
            }
        }
    }
}
