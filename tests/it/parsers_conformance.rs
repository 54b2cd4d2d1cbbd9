//! Conformance over the real tool outputs in ../shared/fixtures/real (skipped when absent): every file
//! is detected as the kind of its folder, parsed without panic, and specific values are checked.

use rentcheck::evidence::parsers::*;
use std::path::PathBuf;

enum V {
    N(f64),
    T(&'static str),
    B(bool),
    L(&'static [&'static str]),
    Len(usize),
    Absent,
}
use V::*;

/// Expected key/values, or Err(line): the parse must fail naming that line.
type Expect = Result<Vec<(&'static str, V)>, usize>;

/// file → expectation
fn table() -> Vec<(&'static str, Expect)> {
    vec![
        (
            "nvidia-smi-list/a100-sxm4-80gb-dgx-a100-mig-mixed-head10.txt",
            Ok(vec![
                ("gpu.count", N(2.0)),
                ("gpu.mig_count", N(8.0)),
                ("gpu.models", L(&["NVIDIA A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"])),
            ]),
        ),
        (
            "nvidia-smi-list/h100-80gb-hbm3-x4-one-mig-2g.20gb.txt",
            Ok(vec![
                ("gpu.count", N(4.0)),
                ("gpu.mig_count", N(1.0)),
                ("gpu.mig_profiles", L(&["2g.20gb"])),
                ("gpu.uuids", Len(4)),
            ]),
        ),
        (
            "nvidia-smi-list/rtx-4070-laptop-windows-single.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["NVIDIA GeForce RTX 4070 Laptop GPU"])),
            ]),
        ),
        (
            "nvidia-smi-list/tesla-p100-sxm2-single-slurm-job.txt",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["Tesla P100-SXM2-16GB"])),
            ]),
        ),
        (
            "nvidia-smi-topo/rtx2080ti-x2-pcie-pix-autodl.txt",
            Ok(vec![
                ("topo.gpu_count", N(2.0)),
                ("topo.worst_link", T("PIX")),
                ("topo.nvlink_all_pairs", B(false)),
                ("topo.min_nvlinks", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/h100-sxm5-x8-nv18-1nic-dstack-collect-env.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.nvlink_all_pairs", B(true)),
                ("topo.min_nvlinks", N(18.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/h200-x8-nv18-8nic-node-record.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.min_nvlinks", N(18.0)),
            ]),
        ),
        (
            "nvidia-smi-topo/b200-x8-nv18-16nic-paste-mangled-nccl-tests-333.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV18")),
                ("topo.nvlink_all_pairs", B(true)),
            ]),
        ),
        (
            "nvidia-smi-topo/a100-x8-nv12-reformatted-ml-engineering.txt",
            Ok(vec![
                ("topo.gpu_count", N(8.0)),
                ("topo.worst_link", T("NV12")),
                ("topo.min_nvlinks", N(12.0)),
            ]),
        ),
        (
            "nvidia-smi-query/a100-sxm4-80gb-x4-mig-driver535-v12.xml",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.attached_gpus", N(4.0)),
                ("gpu.memory_total_mib", N(81920.0)),
                ("gpu.memory_used_mib_max", N(50.0)),
                ("gpu.driver_version", T("535.54.03")),
                ("gpu.cuda_version", T("12.2")),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
                ("gpu.mig_count", N(4.0)),
            ]),
        ),
        (
            "nvidia-smi-query/a100-sxm4-40gb-mig-driver510-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(40960.0)),
                ("gpu.memory_used_mib_max", N(38.0)),
                ("gpu.driver_version", T("510.47.03")),
                ("gpu.cuda_version", T("11.6")),
                ("gpu.mig_count", N(2.0)),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/tesla-t4-driver515-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(15360.0)),
                ("gpu.memory_used_mib_max", N(1032.0)),
                ("gpu.driver_version", T("515.105.01")),
                ("gpu.models", L(&["Tesla T4"])),
                ("gpu.ecc_errors_uncorrected", N(0.0)),
            ]),
        ),
        (
            "nvidia-smi-query/rtx-2080-windows-driver516-v11.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(8192.0)),
                ("gpu.memory_used_mib_max", N(862.0)),
                ("gpu.driver_version", T("516.59")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/rtx-4000-sff-ada-driver595-v13.xml",
            Ok(vec![
                ("gpu.memory_total_mib", N(20475.0)),
                ("gpu.memory_used_mib_max", N(3534.0)),
                ("gpu.driver_version", T("595.84")),
                ("gpu.cuda_version", T("13.2")),
                ("gpu.ecc_errors_uncorrected", Absent),
            ]),
        ),
        (
            "nvidia-smi-query/tesla-p100-query-gpu.csv",
            Ok(vec![
                ("gpu.count", N(1.0)),
                ("gpu.models", L(&["Tesla P100-PCIE-16GB"])),
                ("gpu.memory_used_mib_max", N(0.0)),
                ("gpu.memory_total_mib", N(16383.0)),
            ]),
        ),
        (
            "nvidia-smi-query/h200-x8-query-gpu-csv-with-units.csv",
            Ok(vec![
                ("gpu.count", N(8.0)),
                ("gpu.memory_total_mib", N(143771.0)),
                ("gpu.driver_version", T("570.211.01")),
            ]),
        ),
        (
            "dcgm-discovery/h100-sxm-x4-dcgm-3.1.7-name-null-mig.txt",
            Ok(vec![
                ("dcgm.gpu_count", N(4.0)),
                ("gpu.models", L(&["unknown", "unknown", "unknown", "unknown"])),
                ("gpu.uuids", Len(4)),
                ("dcgm.nvswitch_count", N(0.0)),
            ]),
        ),
        (
            "dcgm-discovery/a100-sxm4-40gb-x8-6-nvswitches-dcgm-docs.txt",
            Ok(vec![
                ("dcgm.gpu_count", N(8.0)),
                ("dcgm.nvswitch_count", N(6.0)),
                ("gpu.models", Len(8)),
            ]),
        ),
        (
            "dcgm-diag/deepops-r1-deployment-pass-legacy-blacklist.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&[])),
                ("dcgm.diag.tests_run", Len(9)),
                ("dcgm.diag.level", N(1.0)),
            ]),
        ),
        (
            "dcgm-diag/deepops-r1-deployment-fail-legacy-blacklist.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                (
                    "dcgm.diag.failed_tests",
                    L(&[
                        "Persistence Mode",
                        "Environment Variables",
                        "Page Retirement",
                        "Graphics Processes",
                        "Inforom",
                    ]),
                ),
                ("dcgm.diag.level", N(1.0)),
            ]),
        ),
        (
            "dcgm-diag/dcgm-3.3.8-h100-x8-r3-fail-early-cuinit-fail-skip.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["GPU Memory"])),
                ("dcgm.diag.skipped_tests", L(&["PCIe", "Memory Bandwidth", "EUD Test"])),
                ("dcgm.diag.warnings", N(8.0)),
                ("dcgm.diag.level", N(3.0)),
                ("dcgm.version", T("3.3.8")),
            ]),
        ),
        (
            "dcgm-diag/dcgm-4.2.3-l40s-x4-pcie-fail-internal-error-warnings.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["pcie"])),
                ("dcgm.diag.tests_run", L(&["software", "memory", "pcie"])),
                ("dcgm.diag.warnings", N(4.0)),
                ("dcgm.diag.level", N(2.0)),
            ]),
        ),
        (
            "dcgm-diag/dcgm-4.4.1-b200-x8-r2-pcie-fail.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(false)),
                ("dcgm.diag.failed_tests", L(&["pcie"])),
                ("dcgm.diag.warnings", N(1.0)),
                ("dcgm.version", T("4.4.1")),
                ("gpu.driver_version", T("570.172.08")),
            ]),
        ),
        (
            "dcgm-diag/nvvs-3.1.0-json-8gpu-with-nulls-and-preamble-dcgm-test.json.txt",
            Ok(vec![
                ("dcgm.diag.passed", B(true)),
                ("dcgm.diag.tests_run", Len(10)),
                ("dcgm.diag.failed_tests", L(&[])),
                ("dcgm.diag.skipped_tests", L(&[])),
                ("dcgm.version", T("3.1.0")),
            ]),
        ),
        (
            "vllm-metrics/datadog-fixture-vllm-v0.5-opt-125m-original-capture.txt",
            Ok(vec![
                ("serving.ttft_p50_ms", N(375.0)),
                ("serving.ttft_p95_ms", N(487.5)),
                ("serving.ttft_p99_ms", N(497.5)),
                ("serving.itl_p95_ms", N(48.75)),
                ("serving.e2e_p95_ms", N(950.0)),
                ("serving.e2e_p99_ms", N(990.0)),
                ("serving.requests_total", N(1.0)),
                ("serving.preemptions_total", N(0.0)),
                ("serving.kv_cache_usage_max_pct", N(0.0)),
                ("serving.requests_waiting_max", N(0.0)),
                ("serving.by_model.facebook/opt-125m.ttft_p95_ms", N(487.5)),
                ("vllm.family.itl", T("vllm:time_per_output_token_seconds")),
            ]),
        ),
        (
            "vllm-metrics/datadog-fixture-vllm-opt-125m-augmented-v1-metric-names.txt",
            Ok(vec![
                ("serving.ttft_p95_ms", N(487.5)),
                ("serving.itl_p95_ms", N(0.01 * 136.8 / 141.0 * 1000.0)),
                ("serving.queue_time_p95_ms", N(285.0)),
                ("serving.prefill_p95_ms", N(285.0)),
                ("serving.decode_p95_ms", N(285.0)),
                ("serving.kv_cache_usage_max_pct", N(0.0)),
                ("vllm.family.itl", T("vllm:inter_token_latency_seconds")),
                ("vllm.family.kv_cache_usage_max_pct", T("vllm:kv_cache_usage_perc")),
            ]),
        ),
        (
            "bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json",
            Ok(vec![
                ("serving.completed", N(200.0)),
                ("serving.error_rate", N(0.0)),
                ("serving.request_throughput_rps", N(8.398304797910107)),
                ("serving.output_tokens_per_s", N(1780.3566341089636)),
                ("serving.ttft_p50_ms", N(349.84637349998593)),
                ("serving.ttft_p99_ms", N(450.3786364301777)),
                ("serving.itl_p99_ms", N(43.595131400124956)),
                ("serving.tpot_p99_ms", N(75.76524432244929)),
                ("serving.e2e_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/vllm-benchmark-serving-console-llama3.3-70b-tp8-qps-inf.txt",
            Ok(vec![
                ("serving.completed", N(200.0)),
                ("serving.request_throughput_rps", N(8.40)),
                ("serving.ttft_p50_ms", N(349.85)),
                ("serving.ttft_p99_ms", N(450.38)),
                ("serving.itl_p99_ms", N(43.60)),
                ("serving.ttft_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/vllm-nightly-benchmark-results-table-tp8-8xa100.json",
            Ok(vec![
                ("serving.run", T("tp8_pp1_qps_inf")),
                ("serving.request_throughput_rps", N(8.398304797910107)),
                ("serving.by_run.tp8_pp1_qps_01.ttft_p99_ms", N(143.80068917976584)),
            ]),
        ),
        (
            "bench-serving/vllm-bench-serve-sglang-pd-gpt-oss-120b-8xh200-conc64.json",
            Ok(vec![
                ("serving.completed", N(500.0)),
                ("serving.max_concurrency", N(64.0)),
                ("serving.ttft_p99_ms", N(270.15254137986625)),
                ("serving.itl_p99_ms", N(11.68369915998484)),
                ("serving.output_tokens_per_s", N(6483.451381493163)),
                ("serving.ttft_p95_ms", Absent),
            ]),
        ),
        (
            "bench-serving/llmperf-summary-fireworks-llama2-70b.json",
            Ok(vec![
                ("serving.ttft_p50_ms", N(516.5989695000235)),
                ("serving.ttft_p95_ms", N(786.8415615500112)),
                ("serving.itl_p95_ms", N(27.247_985_558_942_86)),
                ("serving.e2e_p95_ms", N(4210.630839049929)),
                ("serving.completed", N(150.0)),
                ("serving.error_rate", N(0.0)),
                ("serving.output_tokens_per_s", N(162.86950633872)),
            ]),
        ),
        (
            "bench-serving/genai-perf-analyze-export-gpt2-triton.csv",
            Ok(vec![
                ("serving.run", T("gpt2_run_config_3")),
                ("serving.ttft_p99_ms", N(184.43)),
                ("serving.itl_p99_ms", N(30.90)),
                ("serving.e2e_p99_ms", N(3406.24)),
                ("serving.request_throughput_rps", N(10.12)),
                ("serving.by_run.gpt2_run_config_2.request_throughput_rps", N(9.83)),
            ]),
        ),
        (
            "nccl-tests/h100-80gb-x16-2node-a3mega-all_reduce_perf.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(338.82)),
                ("nccl.busbw_avg_gbps", N(70.742)),
                ("nccl.world_size", N(16.0)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(4.00)),
                ("nccl.busbw_avg_gbps", N(2.05774)),
                ("nccl.world_size", N(2.0)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/rtx2080ti-x2-pcie-alltoall_perf-na-wrong.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(4.61)),
                ("nccl.busbw_avg_gbps", N(2.06935)),
                ("nccl.wrong", N(0.0)),
            ]),
        ),
        (
            "nccl-tests/a100-dgx-4node-32gpu-all_reduce_perf-legacy-error-column.txt",
            Ok(vec![
                ("nccl.busbw_peak_gbps", N(191.05)),
                ("nccl.busbw_avg_gbps", N(113.289)),
                ("nccl.wrong", N(0.0)),
                ("nccl.world_size", Absent),
            ]),
        ),
        (
            "nccl-tests/h100-x8-all_reduce_perf-cuda-init-failure.txt",
            Ok(vec![
                ("nccl.run_failed", B(true)),
                ("nccl.busbw_peak_gbps", Absent),
                ("nccl.busbw_avg_gbps", Absent),
            ]),
        ),
    ]
}

fn real_dir() -> Option<PathBuf> {
    let d = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/fixtures/real");
    if d.is_dir() {
        Some(d)
    } else {
        println!("note: {} not found; real-fixture conformance skipped", d.display());
        None
    }
}

#[test]
fn real_fixtures_expected_values() {
    let Some(dir) = real_dir() else { return };
    for (rel, want) in table() {
        let path = dir.join(rel);
        let Ok(bytes) = std::fs::read(&path) else {
            println!("note: {rel} missing; skipped");
            continue;
        };
        let folder = rel.split('/').next().unwrap();
        let kind: EvidenceKind = folder.parse().unwrap();
        assert_eq!(detect_kind(&bytes), Some(kind), "{rel}: detected kind");
        let res = parse(kind, &bytes);
        match want {
            Err(line) => assert_eq!(res.unwrap_err().line, Some(line), "{rel}"),
            Ok(pairs) => {
                let p = res.unwrap_or_else(|e| panic!("{rel}: {e}"));
                for (k, v) in pairs {
                    let got = p.metrics.get(k);
                    match (&v, got) {
                        (N(w), Some(MetricValue::Number(g))) => {
                            assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{rel}: {k} = {g}, want {w}")
                        }
                        (T(w), Some(MetricValue::Text(g))) => assert_eq!(g, w, "{rel}: {k}"),
                        (B(w), Some(MetricValue::Bool(g))) => assert_eq!(g, w, "{rel}: {k}"),
                        (L(w), Some(MetricValue::List(g))) => assert_eq!(g, w, "{rel}: {k}"),
                        (Len(w), Some(MetricValue::List(g))) => {
                            assert_eq!(g.len(), *w, "{rel}: {k}")
                        }
                        (Absent, None) => {}
                        _ => panic!("{rel}: {k}: got {got:?}"),
                    }
                }
            }
        }
    }
}

#[test]
fn every_real_file_parses_or_fails_cleanly() {
    let Some(dir) = real_dir() else { return };
    let listed: Vec<&str> = table().iter().map(|(r, _)| *r).collect();
    let mut seen = 0;
    for d in std::fs::read_dir(&dir).unwrap() {
        let d = d.unwrap().path();
        if !d.is_dir() {
            continue;
        }
        let folder = d.file_name().unwrap().to_string_lossy().to_string();
        for f in std::fs::read_dir(&d).unwrap() {
            let f = f.unwrap().path();
            let bytes = std::fs::read(&f).unwrap();
            let rel = format!("{folder}/{}", f.file_name().unwrap().to_string_lossy());
            seen += 1;
            if !listed.contains(&rel.as_str()) {
                println!("note: {rel} has no expected values in the table");
            }
            let kind = detect_kind(&bytes);
            if let Ok(k) = folder.parse::<EvidenceKind>() {
                assert_eq!(kind, Some(k), "{rel}: detected kind");
            }
            // no panic for any kind, and a truncated copy must parse or fail with a line
            for k in EvidenceKind::ALL {
                let _ = parse(k, &bytes);
                let half = &bytes[..bytes.len() / 2];
                if let Err(e) = parse(k, half) {
                    assert!(!e.message.is_empty(), "{rel} as {k}");
                }
            }
        }
    }
    assert!(seen >= 30, "only {seen} real files found");
}
