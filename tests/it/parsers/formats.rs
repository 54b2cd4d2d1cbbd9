//! The evidence formats added later, tested as a user would meet them: load-test files judged
//! against a brief's latency targets, launcher prefixes, nccl-tests' own data-check tolerance, the
//! expected bus-bandwidth table, nvidia-smi's table and `-q` text, and dcgm-exporter scrapes. Every
//! checked figure is worked out here from the fixture (the comment shows how).

use rentcheck::evidence::parsers::*;
use std::path::PathBuf;

fn fixture(rel: &str) -> Vec<u8> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

fn num(p: &Parsed, k: &str) -> f64 {
    match p.metrics.get(k) {
        Some(MetricValue::Number(n)) => *n,
        other => panic!(
            "{k}: expected a number, got {other:?}; keys: {:?}",
            p.metrics.keys().collect::<Vec<_>>()
        ),
    }
}

fn close(p: &Parsed, k: &str, want: f64) {
    let got = num(p, k);
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "{k}: got {got}, want {want}"
    );
}

fn text(p: &Parsed, k: &str) -> String {
    match p.metrics.get(k) {
        Some(MetricValue::Text(t)) => t.clone(),
        other => panic!("{k}: expected text, got {other:?}"),
    }
}

fn list(p: &Parsed, k: &str) -> Vec<String> {
    match p.metrics.get(k) {
        Some(MetricValue::List(l)) => l.clone(),
        other => panic!("{k}: expected a list, got {other:?}"),
    }
}

fn warned(p: &Parsed, needle: &str) -> bool {
    p.warnings.iter().any(|w| w.contains(needle))
}

fn targets(ttft: f64, tpot: f64, e2e: f64) -> SloTargets {
    SloTargets {
        ttft_ms: Some(ttft),
        tpot_ms: Some(tpot),
        e2e_ms: Some(e2e),
    }
}

// ---- bench-serving ----------------------------------------------------------------------------

/// The brief's targets judged per request on a real `vllm bench serve --save-detailed` file: the
/// attainment is recomputed here from the file's own arrays, the way vLLM's `--goodput` judges a
/// request (TTFT, (latency − TTFT) / (output tokens − 1), latency; an errored request is a miss).
#[test]
fn slo_attainment_from_real_per_request_data() {
    let rel = "bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json";
    let bytes = fixture(rel);
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let (t_ttft, t_tpot, t_e2e) = (400.0, 40.0, 8000.0);
    let (mut met, mut ttft_ok, mut tpot_ok, mut e2e_ok) = (0, 0, 0, 0);
    let requests = crate::common::vllm_requests(&v);
    for r in &requests {
        let (a, b, c) = (
            r.ok && r.ttft_ms <= t_ttft,
            r.ok && r.tpot_ms <= t_tpot,
            r.ok && r.e2e_ms <= t_e2e,
        );
        ttft_ok += a as usize;
        tpot_ok += b as usize;
        e2e_ok += c as usize;
        met += (a && b && c) as usize;
    }
    let total = requests.len() as f64;
    assert_eq!(total, 200.0);
    // the targets were picked so that every one of them bites
    assert!(
        met < ttft_ok.min(tpot_ok).min(e2e_ok) && met > 0,
        "{met} {ttft_ok} {tpot_ok} {e2e_ok}"
    );

    let p = parse_with(EvidenceKind::BenchServing, &bytes, &targets(t_ttft, t_tpot, t_e2e)).unwrap();
    close(&p, "serving.slo_requests", 200.0);
    close(&p, "serving.slo_attainment", met as f64 / total);
    close(&p, "serving.slo_attainment_ttft", ttft_ok as f64 / total);
    close(&p, "serving.slo_attainment_itl", tpot_ok as f64 / total);
    close(&p, "serving.slo_attainment_e2e", e2e_ok as f64 / total);
    // goodput = good requests ÷ the run's duration (vLLM's request_goodput); nothing failed here, so
    // it equals attainment × throughput
    let duration = 23.81432977400027;
    close(&p, "serving.goodput_rps", met as f64 / duration);
    close(&p, "serving.good_requests", met as f64);
    close(&p, "serving.duration_s", duration);
    assert!(warned(&p, "rebuilt as TTFT + the inter-token gaps"));

    // Percentiles the tool did not print come from the per-request data (linear between ranks,
    // as numpy does): p95 of the 200 TTFTs.
    let mut sorted: Vec<f64> = requests.iter().map(|r| r.ttft_ms).collect();
    sorted.sort_by(f64::total_cmp);
    let rank = 0.95 * (sorted.len() - 1) as f64;
    let (lo, frac) = (rank.floor() as usize, rank - rank.floor());
    close(
        &p,
        "serving.ttft_p95_ms",
        sorted[lo] + (sorted[lo + 1] - sorted[lo]) * frac,
    );

    // Without targets there is nothing to judge, and nothing is made up.
    let p = parse(EvidenceKind::BenchServing, &bytes).unwrap();
    assert!(!p.metrics.contains_key("serving.slo_attainment"));
    assert!(!p.metrics.contains_key("serving.goodput_rps"));
    assert!(!warned(&p, "rebuilt"));
}

/// Only a TTFT target: TPOT/e2e are not judged, so no rebuilt-latency warning either.
#[test]
fn slo_attainment_with_one_target_only() {
    let bytes = fixture("bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json");
    let v: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    let under = v["ttfts"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.as_f64().unwrap() * 1000.0 <= 350.0)
        .count();
    let t = SloTargets {
        ttft_ms: Some(350.0),
        ..SloTargets::default()
    };
    let p = parse_with(EvidenceKind::BenchServing, &bytes, &t).unwrap();
    close(&p, "serving.slo_attainment", under as f64 / 200.0);
    close(&p, "serving.slo_attainment_ttft", under as f64 / 200.0);
    assert!(!p.metrics.contains_key("serving.slo_attainment_e2e"));
    assert!(!warned(&p, "rebuilt"));
}

/// A GuideLLM sweep: one set of figures per load point, named by its strategy and rate; the
/// un-suffixed keys are the busiest point's; per-request samples judge the targets.
#[test]
fn guidellm_sweep_per_load_point_with_attainment() {
    let bytes = fixture("bench-serving/guidellm-benchmarks-sweep-synthetic.json");
    assert_eq!(detect_kind(&bytes), Some(EvidenceKind::BenchServing));
    let p = parse_with(EvidenceKind::BenchServing, &bytes, &targets(200.0, 30.0, 3000.0)).unwrap();
    assert_eq!(p.tool.as_deref(), Some("guidellm"));
    // three load points: synchronous (1.2 req/s), constant at 4.5 req/s (4.1 achieved), throughput (6.0)
    close(&p, "serving.by_run.synchronous.request_throughput_rps", 1.2);
    close(&p, "serving.by_run.constant_4_5rps.request_throughput_rps", 4.1);
    close(&p, "serving.by_run.throughput.request_throughput_rps", 6.0);
    assert_eq!(text(&p, "serving.run"), "throughput");
    close(&p, "serving.request_throughput_rps", 6.0);
    // constant_4_5rps keeps 4 successful, 1 errored, 1 incomplete request (cancelled at the end of the
    // run: not counted). Against TTFT ≤ 200, TPOT ≤ 30, e2e ≤ 3000 ms:
    //   100/20/1500 meets all; 250/25/2000 misses TTFT; 120/40/2200 misses TPOT;
    //   180/30/3500 misses e2e; the errored request misses everything.
    close(&p, "serving.by_run.constant_4_5rps.completed", 4.0);
    close(&p, "serving.by_run.constant_4_5rps.failed", 1.0);
    close(&p, "serving.by_run.constant_4_5rps.error_rate", 1.0 / 5.0);
    close(&p, "serving.by_run.constant_4_5rps.slo_requests", 5.0);
    close(&p, "serving.by_run.constant_4_5rps.slo_attainment", 1.0 / 5.0);
    close(&p, "serving.by_run.constant_4_5rps.slo_attainment_ttft", 3.0 / 5.0);
    close(&p, "serving.by_run.constant_4_5rps.slo_attainment_itl", 3.0 / 5.0);
    close(&p, "serving.by_run.constant_4_5rps.slo_attainment_e2e", 3.0 / 5.0);
    // Goodput counts the errored request once (as not good): 1 good request over the point's
    // duration, which the report gives as 4 completed at 4.1 requests/s — 1 ÷ (4 ÷ 4.1) = 1.025,
    // not attainment × throughput (0.2 × 4.1 = 0.82, which counts the failure twice).
    close(&p, "serving.by_run.constant_4_5rps.good_requests", 1.0);
    close(&p, "serving.by_run.constant_4_5rps.goodput_rps", 4.1 / 4.0);
    close(&p, "serving.by_run.constant_4_5rps.offered_rps", 4.5);
    // The synchronous point's report kept 2 of its 36 requests (GuideLLM 0.4–0.5 sample 10 of
    // each status by default): said, and no attainment or goodput from the sample (its 2 good
    // requests over the point's 30 s read as 0.07 requests/s for some 1.2).
    assert!(warned(&p, "kept 2 of 36 requests"));
    for key in ["slo_attainment", "goodput_rps", "good_requests"] {
        assert!(
            !p.metrics.contains_key(&format!("serving.by_run.synchronous.{key}")),
            "{key}"
        );
    }
}

/// GuideLLM's `time_per_output_token_ms` counts from the request's start (TTFT included, 0.3 and
/// later); its `inter_token_latency_ms` is vLLM's TPOT. Rewriting the first as GuideLLM writes it
/// changes nothing rentcheck reports.
#[test]
fn guidellm_time_per_output_token_is_not_tpot() {
    let bytes = fixture("bench-serving/guidellm-benchmarks-sweep-synthetic.json");
    let mut report: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
    for b in report["benchmarks"].as_array_mut().unwrap() {
        for q in b["requests"]["successful"].as_array_mut().into_iter().flatten() {
            let ttft = q["time_to_first_token_ms"].as_f64().unwrap();
            let itl = q["inter_token_latency_ms"].as_f64().unwrap();
            let n = q["output_tokens"].as_f64().unwrap();
            // GuideLLM 0.3's request_stats.py: 1000 × (last token − request start) ÷ output tokens.
            q["time_per_output_token_ms"] = serde_json::json!((ttft + itl * (n - 1.0)) / n + 50.0);
        }
        let summary = &mut b["metrics"]["time_per_output_token_ms"]["successful"];
        for v in summary["percentiles"].as_object_mut().unwrap().values_mut() {
            *v = serde_json::json!(v.as_f64().unwrap() + 50.0);
        }
    }
    let rewritten = serde_json::to_vec(&report).unwrap();
    let targets = targets(200.0, 30.0, 3000.0);
    let before = parse_with(EvidenceKind::BenchServing, &bytes, &targets).unwrap();
    let after = parse_with(EvidenceKind::BenchServing, &rewritten, &targets).unwrap();
    assert_eq!(after.metrics, before.metrics);
    close(&after, "serving.by_run.constant_4_5rps.slo_attainment_itl", 3.0 / 5.0);
    close(&after, "serving.by_run.throughput.tpot_p95_ms", 55.0);
}

/// AIPerf's per-request records: percentiles, counts and attainment from the records themselves.
#[test]
fn aiperf_records_are_per_request_data() {
    let bytes = fixture("bench-serving/aiperf-profile-export-records-from-docs.jsonl");
    assert_eq!(detect_kind(&bytes), Some(EvidenceKind::BenchServing));
    // the good record: TTFT 255.886568 ms, latency 297.525228 ms, 9 tokens → TPOT (297.525228 −
    // 255.886568) / 8 = 5.20483 ms; the cancelled one is a miss
    let p = parse_with(EvidenceKind::BenchServing, &bytes, &targets(300.0, 6.0, 300.0)).unwrap();
    assert_eq!(p.tool.as_deref(), Some("aiperf"));
    close(&p, "serving.slo_attainment", 1.0 / 2.0);
    let p = parse_with(EvidenceKind::BenchServing, &bytes, &targets(250.0, 6.0, 300.0)).unwrap();
    close(&p, "serving.slo_attainment", 0.0);
    close(&p, "serving.slo_attainment_itl", 1.0 / 2.0);
    close(&p, "serving.goodput_rps", 0.0);
}

/// GenAI-Perf's and AIPerf's summaries carry statistics objects under `request_throughput`: they
/// are read as what they are, not as a vLLM result with nothing in it.
#[test]
fn genai_perf_and_aiperf_summaries_are_not_vllm_results() {
    for (rel, tool) in [
        (
            "bench-serving/genai-perf-profile-export-trtllm-c100-streaming-perf-analyzer-298.json",
            "genai-perf",
        ),
        (
            "bench-serving/aiperf-profile-export-qwen3.6-nvfp4-rtx5090-c16.json",
            "aiperf",
        ),
    ] {
        let bytes = fixture(rel);
        assert_eq!(detect_kind(&bytes), Some(EvidenceKind::BenchServing), "{rel}");
        let p = parse(EvidenceKind::BenchServing, &bytes).unwrap();
        assert_eq!(p.tool.as_deref(), Some(tool), "{rel}");
        for k in [
            "serving.ttft_p99_ms",
            "serving.itl_p95_ms",
            "serving.e2e_p95_ms",
            "serving.request_throughput_rps",
        ] {
            assert!(num(&p, k) > 0.0, "{rel}: {k}");
        }
        // summary statistics are no per-request data: targets cannot be judged from them
        let p = parse_with(EvidenceKind::BenchServing, &bytes, &targets(200.0, 30.0, 3000.0)).unwrap();
        assert!(!p.metrics.contains_key("serving.slo_attainment"), "{rel}");
    }
}

/// JSON that matches no format fails, with an error that says what is read — also under kind=auto.
#[test]
fn unrecognised_json_fails_naming_the_formats_read() {
    for body in [
        br#"{"foo": 1, "bar": [1, 2]}"#.as_slice(),
        br#"{"request_throughput": {"unit": "req/s"}}"#.as_slice(),
        b"[1, 2, 3]".as_slice(),
        b"{\"a\": 1}\n{\"a\": 2}\n".as_slice(),
    ] {
        let shown = String::from_utf8_lossy(body);
        assert_eq!(detect_kind(body), Some(EvidenceKind::BenchServing), "{shown}");
        let e = parse(EvidenceKind::BenchServing, body).unwrap_err();
        for format in [
            "GenAI-Perf",
            "AIPerf",
            "GuideLLM",
            "SGLang",
            "llmperf",
            "vLLM",
            "kind=log",
        ] {
            assert!(e.message.contains(format), "{shown}: {e}");
        }
    }
    let e = parse(EvidenceKind::BenchServing, br#"{"foo": 1, "bar": 2}"#).unwrap_err();
    assert!(
        e.message.contains("top-level keys: foo, bar") || e.message.contains("top-level keys: bar, foo"),
        "{e}"
    );
    // text nothing recognises is still a plain log
    assert_eq!(detect_kind(b"just some words\n"), None);
}

/// SGLang's bench_serving JSONL: one run per line, named by rate and concurrency.
#[test]
fn sglang_jsonl_runs_are_named_by_rate() {
    let p = parse(
        EvidenceKind::BenchServing,
        &fixture("bench-serving/sglang-bench-serving-llama3.3-70b-h200-rate-sweep.jsonl"),
    )
    .unwrap();
    assert_eq!(p.tool.as_deref(), Some("sglang bench_serving"));
    // the first line: 300 requests completed in 298.3675805 s
    close(&p, "serving.by_run.rate_1.completed", 300.0);
    close(&p, "serving.by_run.rate_1.duration_s", 298.3675805060193);
    assert!(warned(&p, "7 runs in this file"));
}

// ---- launcher prefixes ------------------------------------------------------------------------

fn prefixed(bytes: &[u8], prefix: &str) -> Vec<u8> {
    let s = std::str::from_utf8(bytes).unwrap();
    s.lines()
        .map(|l| format!("{prefix}{l}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Every text parser reads output captured through each launcher to the same figures, and says
/// which prefix it stripped.
#[test]
fn launcher_prefixes_give_the_same_figures_for_every_text_kind() {
    let files = [
        (
            EvidenceKind::NcclTests,
            "nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf.txt",
        ),
        (
            EvidenceKind::NcclTests,
            "nccl-tests/h100-80gb-x16-2node-a3mega-all_reduce_perf.txt",
        ),
        (
            EvidenceKind::NvidiaSmiTopo,
            "nvidia-smi-topo/h200-x8-nv18-8nic-node-record.txt",
        ),
        (
            EvidenceKind::NvidiaSmiList,
            "nvidia-smi-list/h100-80gb-hbm3-x4-one-mig-2g.20gb.txt",
        ),
        (
            EvidenceKind::NvidiaSmiQuery,
            "nvidia-smi-query/a10-table-driver550-gpud.txt",
        ),
        (
            EvidenceKind::NvidiaSmiQuery,
            "nvidia-smi-query/a10-q-text-driver550-gpud.txt",
        ),
        (EvidenceKind::DcgmDiag, "dcgm-diag/dcgm-4.4.1-b200-x8-r2-pcie-fail.txt"),
        (
            EvidenceKind::DcgmDiscovery,
            "dcgm-discovery/a100-sxm4-40gb-x8-6-nvswitches-dcgm-docs.txt",
        ),
        (
            EvidenceKind::VllmMetrics,
            "vllm-metrics/datadog-fixture-vllm-v0.5-opt-125m-original-capture.txt",
        ),
        (
            EvidenceKind::DcgmExporter,
            "dcgm-exporter/kops-l4-idle-scrape-dcgm-exporter-driver580.txt",
        ),
        (EvidenceKind::VllmLog, "vllm-log/v1-llama70b-tp4-startup.log"),
        (
            EvidenceKind::BenchServing,
            "bench-serving/vllm-benchmark-serving-console-llama3.3-70b-tp8-qps-inf.txt",
        ),
    ];
    let launchers = [
        ("[1,0]<stdout>:", "mpirun --tag-output"),
        ("0: ", "srun -l"),
        ("(pid=4242) ", "Ray"),
        ("[pod/bench-7f9c/runner] ", "kubectl logs --prefix"),
    ];
    for (kind, rel) in files {
        let plain = fixture(rel);
        let want = parse(kind, &plain).unwrap_or_else(|e| panic!("{rel}: {e}"));
        assert!(!want.metrics.is_empty(), "{rel}");
        for (prefix, name) in launchers {
            let bytes = prefixed(&plain, prefix);
            assert_eq!(detect_kind(&bytes), Some(kind), "{rel} under {name}");
            let got = parse(kind, &bytes).unwrap_or_else(|e| panic!("{rel} under {name}: {e}"));
            assert_eq!(got.metrics, want.metrics, "{rel} under {name}");
            assert!(
                warned(&got, &format!("launcher prefix {name}")),
                "{rel} under {name}: {:?}",
                got.warnings
            );
        }
    }
}

/// The real prefixed runs read as their unprefixed twins do.
#[test]
fn real_prefixed_runs() {
    let plain = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf.txt"),
    )
    .unwrap();
    let kubectl = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/rtx2080ti-x2-pcie-all_reduce_perf-kubectl-prefix.txt"),
    )
    .unwrap();
    assert_eq!(plain.metrics, kubectl.metrics);

    // SkyPilot: a Ray prefix, then mpirun's; a second Ray source prints one line, which is dropped
    let p = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/h200-x16-2node-all_gather-ray-mpirun-tag-output-skypilot.txt"),
    )
    .unwrap();
    assert!(warned(&p, "launcher prefix Ray"));
    assert!(warned(&p, "launcher prefix mpirun --tag-output"));
    assert!(warned(&p, "worker1"));
    close(&p, "nccl.busbw_peak_gbps", 325.72);

    // EKS over EFA: two ranks' INFO lines interleaved; rank 0's table is read
    let p = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/t4-x2-efa-eks-mpirun-tag-output-blueprints.txt"),
    )
    .unwrap();
    close(&p, "nccl.busbw_peak_gbps", 3.15);
    close(&p, "nccl.wrong", 0.0);
}

/// An error in prefixed input names the line of the file as uploaded.
#[test]
fn errors_under_a_prefix_name_the_uploaded_line() {
    let plain = fixture("nvidia-smi-topo/garbled-cell.txt");
    let want = parse(EvidenceKind::NvidiaSmiTopo, &plain).unwrap_err();
    let mut bytes = b"Warning: Permanently added 'worker-1' (ED25519) to the list of known hosts.\n".to_vec();
    bytes.extend(prefixed(&plain, "[1,0]<stdout>:"));
    let got = parse(EvidenceKind::NvidiaSmiTopo, &bytes).unwrap_err();
    assert_eq!(got.line, want.line.map(|l| l + 1), "{got}");
}

// ---- nccl-tests -------------------------------------------------------------------------------

fn old_layout(ranks: usize, dtype: &str, errors: [&str; 2], oob: Option<&str>) -> Vec<u8> {
    let mut s = String::from("# nThread 1 nGpus 1 minBytes 1048576 maxBytes 2097152 step: 2(factor) warmup iters: 5 iters: 20 validation: 1\n#\n# Using devices\n");
    for r in 0..ranks {
        s += &format!(
            "#   Rank {r:2} Pid {:6} on node-{} device  {} [0x{r:02x}] NVIDIA A100-SXM4-80GB\n",
            1000 + r,
            r / 8,
            r % 8
        );
    }
    s += "#\n#                                                     out-of-place                       in-place\n";
    s += "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  error\n";
    s += "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)\n";
    s += &format!(
        "     1048576        262144   {dtype}     sum    135.3    7.75   15.02  {}    132.7    7.90   15.31  0e+00\n",
        errors[0]
    );
    s += &format!(
        "     2097152        524288   {dtype}     sum    161.5   12.98   25.15  {}    161.3   13.00   25.18  0e+00\n",
        errors[1]
    );
    if let Some(v) = oob {
        s += &format!("# Out of bounds values : {v}\n");
    }
    s += "# Avg bus bandwidth    : 20.165\n#\n";
    s.into_bytes()
}

/// The old float `error` column is judged as nccl-tests judges it: the data type's tolerance
/// (float 1e-5, half 1e-2) × (ranks − 1); the `Out of bounds values` verdict wins.
#[test]
fn legacy_error_column_uses_the_tools_tolerance_times_ranks() {
    let wrong = |b: &[u8]| num(&parse(EvidenceKind::NcclTests, b).unwrap(), "nccl.wrong");
    // 16 float ranks: tolerance 1e-5 × 15 = 1.5e-4. 1e-4 passes, 2e-4 does not.
    assert_eq!(wrong(&old_layout(16, "float", ["1e-04", "2e-04"], None)), 1.0);
    // the same errors on 32 ranks (3.1e-4) are both within tolerance
    assert_eq!(wrong(&old_layout(32, "float", ["1e-04", "2e-04"], None)), 0.0);
    // 2 ranks: the bare tolerance, 1e-5: both rows are over
    assert_eq!(wrong(&old_layout(2, "float", ["1e-04", "2e-04"], None)), 2.0);
    // half precision: 1e-2 × 7 = 7e-2 on 8 ranks
    assert_eq!(wrong(&old_layout(8, "half", ["6e-02", "8e-02"], None)), 1.0);
    // the tool's verdict wins both ways
    let p = parse(
        EvidenceKind::NcclTests,
        &old_layout(2, "float", ["1e-04", "2e-04"], Some("0 OK")),
    )
    .unwrap();
    close(&p, "nccl.wrong", 0.0);
    assert!(warned(&p, "verdict is OK"));
    let p = parse(
        EvidenceKind::NcclTests,
        &old_layout(32, "float", ["1e-04", "2e-04"], Some("3 FAILED")),
    )
    .unwrap();
    close(&p, "nccl.wrong", 1.0);
    close(&p, "nccl.out_of_bounds", 3.0);
}

/// `#wrong` counts (nccl-tests ≥ 2.10): any above 0 is a wrong row; `N/A` (validation off) is
/// not a count.
#[test]
fn wrong_count_column() {
    let p = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/h200-x8-bf16-wrong-rows.txt"),
    )
    .unwrap();
    close(&p, "nccl.wrong", 1.0);
    let p = parse(
        EvidenceKind::NcclTests,
        &fixture("nccl-tests/h100-x16-2node-srun-l-nccl-tests-290.txt"),
    )
    .unwrap();
    close(&p, "nccl.wrong", 0.0);

    // Adapted in the test from the bf16 fixture: a wrong count in the in-place column only, and an
    // `OK` verdict line that disagrees with it. The count is never overruled.
    let text = String::from_utf8(fixture("nccl-tests/h200-x8-bf16-wrong-rows.txt")).unwrap();
    let in_place_only = text
        .replace(
            "150.20      3    103.0   85.83  149.20      0",
            "150.20      0    103.0   85.83  149.20      2",
        )
        .replace("# Out of bounds values : 3 FAILED", "# Out of bounds values : 0 OK");
    assert_ne!(in_place_only, text);
    let p = parse(EvidenceKind::NcclTests, in_place_only.as_bytes()).unwrap();
    close(&p, "nccl.wrong", 1.0);
}

/// The expected all-reduce bus bandwidth of an allocation, from `data/nccl_expected_busbw.csv`.
#[test]
fn expected_busbw_by_topology() {
    // one node of 8 H100 SXM: the measured NVSwitch figure, 476 GB/s
    let e = expected_busbw("NVIDIA H100 80GB HBM3", 8, 1, None).unwrap();
    close_f(e.gbps, 476.0);
    assert_eq!(e.row, "hopper-nvswitch");
    // the catalogue's name finds the same row
    close_f(expected_busbw("H100 SXM", 8, 1, None).unwrap().gbps, 476.0);
    // two nodes: bounded by the NICs, 8 × 47 GB/s for 400 Gb/s NDR (assumed when not known)
    let e = expected_busbw("NVIDIA H100 80GB HBM3", 16, 2, None).unwrap();
    close_f(e.gbps, 8.0 * 47.0);
    assert!(e.nics_assumed);
    // GCP A3 Mega has 8 × 200 Gb/s: 8 × 23.5 = 188 GB/s, which its real 338.82 GB/s beats
    let e = expected_busbw("NVIDIA H100 80GB HBM3", 16, 2, Some(Nics { count: 8, gbps: 200.0 })).unwrap();
    close_f(e.gbps, 188.0);
    close_f(
        pct_of_expected(166.22, &expected_busbw("H100 SXM", 16, 2, None).unwrap()).unwrap(),
        166.22 / 376.0 * 100.0,
    );
    // a single NIC per node for 8 GPUs: one NIC's worth
    let e = expected_busbw("H100 SXM", 16, 2, Some(Nics { count: 1, gbps: 400.0 })).unwrap();
    close_f(e.gbps, 47.0);
    // PCIe parts, one node
    close_f(expected_busbw("L40S", 2, 1, None).unwrap().gbps, 25.0);
    close_f(
        expected_busbw("NVIDIA GeForce RTX 2080 Ti", 2, 1, None).unwrap().gbps,
        12.6,
    );
    // one GPU runs no collective; an unknown GPU has no figure
    assert!(expected_busbw("H100 SXM", 1, 1, None).is_none());
    assert!(expected_busbw("Imaginary X1", 8, 1, None).is_none());
}

fn close_f(got: f64, want: f64) {
    assert!(
        (got - want).abs() <= 1e-9 * want.abs().max(1.0),
        "got {got}, want {want}"
    );
}

/// NCCL_DEBUG=INFO names the NICs: the expected figure uses them, not the assumption.
#[test]
fn nics_from_nccl_info_lines() {
    let mut s = String::new();
    for r in 0..16 {
        s += &format!(
            "#  Rank {r:2} Group  0 Pid  {} on node-{} device  {} [0x00] NVIDIA H100 80GB HBM3\n",
            100 + r,
            r / 8,
            r % 8
        );
    }
    s += "node-0:100:100 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB eth0:10.0.0.1<0>\n";
    s += "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n";
    s += "  8589934592    2147483648     float     sum      -1  60000.0  143.17  268.44      0  60000.0  143.17  268.44      0\n";
    s += "# Avg bus bandwidth    : 268.44\n";
    let p = parse(EvidenceKind::NcclTests, s.as_bytes()).unwrap();
    // 4 NICs, speed not printed: 400 Gb/s assumed per NIC → 4 × 47 = 188 GB/s
    close(&p, "nccl.nodes", 2.0);
    close(&p, "nccl.expected_busbw_gbps", 4.0 * 47.0);
    close(&p, "nccl.busbw_pct_of_expected", 268.44 / 188.0 * 100.0);
}

// ---- nvidia-smi -------------------------------------------------------------------------------

/// The plain table and `-q` text of the same A10 give the same card.
#[test]
fn nvidia_smi_table_and_q_text_agree() {
    let table = parse(
        EvidenceKind::NvidiaSmiQuery,
        &fixture("nvidia-smi-query/a10-table-driver550-gpud.txt"),
    )
    .unwrap();
    let q = parse(
        EvidenceKind::NvidiaSmiQuery,
        &fixture("nvidia-smi-query/a10-q-text-driver550-gpud.txt"),
    )
    .unwrap();
    for k in [
        "gpu.count",
        "gpu.memory_total_mib",
        "gpu.memory_used_mib_max",
        "gpu.ecc_errors_uncorrected",
    ] {
        assert_eq!(num(&table, k), num(&q, k), "{k}");
    }
    assert_eq!(list(&table, "gpu.models"), list(&q, "gpu.models"));
    assert_eq!(text(&table, "gpu.driver_version"), text(&q, "gpu.driver_version"));
    // the table shows only the volatile counter: said so
    assert!(warned(&table, "volatile"));
    assert!(!warned(&q, "volatile"));
}

/// `--query-gpu` with only `ecc.errors.uncorrected.volatile.total`: the figure comes from it, with
/// a warning that it counts since the last driver load.
#[test]
fn volatile_ecc_fallback() {
    let csv = "index, name, memory.total [MiB], ecc.errors.uncorrected.volatile.total\n\
               0, NVIDIA H100 80GB HBM3, 81559 MiB, 0\n\
               1, NVIDIA H100 80GB HBM3, 81559 MiB, 2\n";
    let p = parse(EvidenceKind::NvidiaSmiQuery, csv.as_bytes()).unwrap();
    close(&p, "gpu.ecc_errors_uncorrected", 2.0);
    assert!(warned(&p, "volatile"));
    // with the aggregate counter too, the aggregate wins and nothing is said
    let csv = "index, name, memory.total [MiB], ecc.errors.uncorrected.aggregate.total, ecc.errors.uncorrected.volatile.total\n\
               0, NVIDIA H100 80GB HBM3, 81559 MiB, 5, 0\n";
    let p = parse(EvidenceKind::NvidiaSmiQuery, csv.as_bytes()).unwrap();
    close(&p, "gpu.ecc_errors_uncorrected", 5.0);
    assert!(!warned(&p, "volatile"));
}

// ---- dcgm-exporter ----------------------------------------------------------------------------

/// A before/after pair: counters are the window's difference, gauges as of `after`.
#[test]
fn dcgm_exporter_window() {
    let before = fixture("dcgm-exporter/l4-window-before.txt");
    let after = fixture("dcgm-exporter/l4-window-after.txt");
    let p = parse_window(EvidenceKind::DcgmExporter, &before, &after, &SloTargets::default()).unwrap();
    // DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION is in mJ: the after value minus the before value, /1000
    let energy = |b: &[u8]| -> f64 {
        let s = std::str::from_utf8(b).unwrap();
        let line = s
            .lines()
            .find(|l| l.starts_with("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{"))
            .unwrap();
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    close(&p, "gpu.energy_joules", (energy(&after) - energy(&before)) / 1000.0);
    close(&p, "gpu.energy_joules", 4200.0);
    close(&p, "gpu.util_pct_avg", 87.0);
    close(&p, "gpu.memory_used_mib_max", 20310.0);
    assert_eq!(p.metrics.get("dcgm_exporter.window"), Some(&MetricValue::Bool(true)));
    // swapped, the energy counter goes down: a restart, said, and the `after` values alone
    let p = parse_window(EvidenceKind::DcgmExporter, &after, &before, &SloTargets::default()).unwrap();
    assert!(warned(&p, "went down"));
    assert!(!p.metrics.contains_key("gpu.energy_joules"));
}

/// Two H100s, one split into MIG instances: memory per GPU sums its instances; an XID and the
/// volatile ECC counter are reported.
#[test]
fn dcgm_exporter_mig_xid_ecc_nvlink() {
    let bytes = fixture("dcgm-exporter/h100-x2-mig-xid-ecc-nvlink-synthetic.txt");
    assert_eq!(detect_kind(&bytes), Some(EvidenceKind::DcgmExporter));
    let p = parse(EvidenceKind::DcgmExporter, &bytes).unwrap();
    close(&p, "dcgm_exporter.gpus", 2.0);
    // GPU 0 uses 71000 MiB; GPU 1's two instances use 30000 + 45000 = 75000
    close(&p, "gpu.memory_used_mib_max", 75000.0);
    // utilisation 90 and 40 → mean 65, max 90
    close(&p, "gpu.util_pct_avg", 65.0);
    close(&p, "gpu.util_pct_max", 90.0);
    assert_eq!(list(&p, "gpu.xid_codes"), vec!["79".to_string()]);
    close(&p, "gpu.xid_errors", 1.0);
    // volatile double-bit ECC 2 + 1, no aggregate counter exported
    close(&p, "gpu.ecc_errors_uncorrected", 3.0);
    assert!(warned(&p, "volatile"));
    // NVLink TX + RX on GPU 0: 290 GB/s
    close(&p, "gpu.nvlink_bandwidth_gbps_max", 290.0);
    close(&p, "gpu.power_w_max", 612.5);
    close(&p, "gpu.temp_c_max", 71.0);
}

/// From `/metrics` histograms only a per-target share can be estimated, and it is marked so.
#[test]
fn vllm_metrics_attainment_is_a_per_target_estimate() {
    let bytes = fixture("vllm-metrics/datadog-fixture-vllm-v0.5-opt-125m-original-capture.txt");
    let t = SloTargets {
        ttft_ms: Some(400.0),
        ..SloTargets::default()
    };
    let p = parse_with(EvidenceKind::VllmMetrics, &bytes, &t).unwrap();
    // The one TTFT observation lies in the (0.25 s, 0.5 s] bucket; 400 ms is 0.6 of the way
    // through it, so linear interpolation puts 0.6 of the bucket at or below the target.
    close(&p, "serving.slo_attainment_ttft", (0.4 - 0.25) / (0.5 - 0.25));
    assert_eq!(
        p.metrics.get("serving.slo_attainment_estimated"),
        Some(&MetricValue::Bool(true)),
        "marked as an estimate"
    );
    assert!(
        p.warnings.is_empty(),
        "an estimate is not a failure to read: {:?}",
        p.warnings
    );
    // no joint figure: that needs per-request data
    assert!(!p.metrics.contains_key("serving.slo_attainment"));
    assert!(!p.metrics.contains_key("serving.goodput_rps"));
}
