//! Parser speed (docs/evidence.md: a 1 MB input in well under 10 ms; docs/benchmarks.md has the
//! figures). Every input is built from a fixture of its format, grown to about 1 MB.
//! Run: cargo bench --bench parsers -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use engine::evidence::parsers::{parse, parse_window, parse_with, EvidenceKind, Parsed, SloTargets};
use serde_json::{json, Value};

const TARGET: usize = 1024 * 1024;

fn fixture(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One valid scrape of about 1 MB: the fixture's families, each header once, each per-model series
/// repeated with distinct `engine` values (so no series repeats and every family stays one group;
/// the models stay the fixture's, so the metric keys stay under the limit per item).
fn vllm_metrics_1mb() -> String {
    let src = fixture("vllm-metrics/v1-two-models-two-engines-empty-e2e.txt");
    // families: (header lines, sample lines)
    let mut families: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for line in src.lines() {
        if line.starts_with('#') {
            if families.last().is_none_or(|(_, samples)| !samples.is_empty()) {
                families.push((Vec::new(), Vec::new()));
            }
            families.last_mut().unwrap().0.push(line);
        } else if !line.trim().is_empty() {
            if families.is_empty() {
                families.push((Vec::new(), Vec::new()));
            }
            families.last_mut().unwrap().1.push(line);
        }
    }
    let per_copy: usize = families
        .iter()
        .flat_map(|(_, s)| s.iter())
        .filter(|l| l.contains("model_name=\"") && l.contains("engine=\""))
        .map(|l| l.len() + 8)
        .sum();
    let copies = TARGET / per_copy.max(1) + 1;
    let mut out = String::with_capacity(TARGET + 64 * 1024);
    for (headers, samples) in &families {
        for h in headers {
            out.push_str(h);
            out.push('\n');
        }
        for s in samples {
            if s.contains("model_name=\"") && s.contains("engine=\"") {
                for i in 0..copies {
                    out.push_str(&s.replacen("engine=\"", &format!("engine=\"{i}"), 1));
                    out.push('\n');
                }
            } else {
                out.push_str(s);
                out.push('\n');
            }
        }
    }
    out
}

/// A `vllm bench serve --save-detailed` result of about 1 MB (per-request arrays).
fn bench_json_1mb() -> String {
    let n = 20_000;
    let ttfts: Vec<String> = (0..n)
        .map(|i| format!("{:.6}", 0.05 + (i % 997) as f64 * 0.0003))
        .collect();
    let itls: Vec<String> = (0..n)
        .map(|i| format!("[{:.5},{:.5},{:.5}]", 0.011 + (i % 13) as f64 * 0.001, 0.012, 0.013))
        .collect();
    let errors: Vec<&str> = (0..n)
        .map(|i| if i % 50 == 0 { "\"Timeout\"" } else { "\"\"" })
        .collect();
    let lens: Vec<String> = (0..n).map(|i| (100 + i % 400).to_string()).collect();
    format!(
        "{{\"backend\": \"vllm\", \"model_id\": \"meta-llama/Llama-3.1-8B-Instruct\", \"num_prompts\": {n}, \
         \"completed\": {}, \"request_throughput\": 12.5, \"output_throughput\": 3100.0, \"ttfts\": [{}], \
         \"itls\": [{}], \"errors\": [{}], \"output_lens\": [{}], \"input_lens\": [{}]}}",
        n - n / 50,
        ttfts.join(", "),
        itls.join(", "),
        errors.join(", "),
        lens.join(", "),
        lens.join(", ")
    )
}

/// The brief's targets used wherever attainment is computed.
const TARGETS: SloTargets = SloTargets {
    ttft_ms: Some(200.0),
    tpot_ms: Some(30.0),
    e2e_ms: Some(8000.0),
};

/// A dcgm-exporter scrape of about 1 MB: the fixture's series repeated for as many GPUs (a
/// Prometheus federation of a few dozen 8-GPU nodes), `value_bump` added to every sample.
fn dcgm_exporter_1mb(rel: &str, value_bump: f64) -> String {
    let src = fixture(rel);
    let mut families: Vec<(Vec<&str>, Vec<&str>)> = Vec::new();
    for line in src.lines().filter(|l| !l.trim().is_empty()) {
        if line.starts_with('#') {
            if families.last().is_none_or(|(_, s)| !s.is_empty()) {
                families.push((Vec::new(), Vec::new()));
            }
            families.last_mut().unwrap().0.push(line);
        } else {
            if families.is_empty() {
                families.push((Vec::new(), Vec::new()));
            }
            families.last_mut().unwrap().1.push(line);
        }
    }
    let per_gpu: usize = families.iter().flat_map(|(_, s)| s.iter()).map(|l| l.len() + 4).sum();
    let gpus = TARGET / per_gpu.max(1) + 1;
    let mut out = String::with_capacity(TARGET + 64 * 1024);
    for (headers, samples) in &families {
        for h in headers {
            out.push_str(h);
            out.push('\n');
        }
        for sample in samples {
            let (series, value) = sample.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap();
            for g in 0..gpus {
                let series = series.replacen("gpu=\"0\"", &format!("gpu=\"{g}\""), 1).replacen(
                    "UUID=\"GPU-",
                    &format!("UUID=\"GPU-{g:04}"),
                    1,
                );
                out.push_str(&format!("{series} {}\n", value + value_bump));
            }
        }
    }
    out
}

/// The plain `nvidia-smi` table with one GPU block per card, about 1 MB.
fn nvidia_smi_table_1mb() -> String {
    let src = fixture("nvidia-smi-query/rtx2080ti-x2-table-driver550-autodl.txt");
    let lines: Vec<&str> = src.lines().collect();
    // banner and column headers: up to the `|====` line; one GPU block: its three rows and a border
    let head = lines.iter().position(|l| l.starts_with("|====")).unwrap() + 1;
    let block = &lines[head..head + 4];
    let tail = &lines[head + 8..];
    let mut out = lines[..head].join("\n") + "\n";
    let mut i = 0;
    while out.len() < TARGET {
        for (k, l) in block.iter().enumerate() {
            let l = if k == 0 {
                l.replacen("   0  ", &format!("{:>4}  ", i % 10_000), 1).replacen(
                    "B4:00.0",
                    &format!("{:02X}:{:02X}.0", (i / 256) % 256, i % 256),
                    1,
                )
            } else {
                (*l).to_owned()
            };
            out.push_str(&l);
            out.push('\n');
        }
        i += 1;
    }
    out + &tail.join("\n") + "\n"
}

/// `nvidia-smi -q` text with one `GPU 0000…` section per card, about 1 MB.
fn nvidia_smi_q_text_1mb() -> String {
    let src = fixture("nvidia-smi-query/a10-q-text-driver550-gpud.txt");
    let at = src.find("GPU 00000000:06:00.0").unwrap();
    let (head, gpu) = src.split_at(at);
    let mut out = head.to_owned();
    let mut i = 0;
    while out.len() < TARGET {
        out.push_str(&gpu.replace(
            "00000000:06:00.0",
            &format!("00000000:{:02X}:{:02X}.0", i / 256, i % 256),
        ));
        i += 1;
    }
    out
}

/// nccl-tests under `mpirun --tag-output` with `NCCL_DEBUG=INFO`: 16 ranks' INFO lines, rank 0's
/// banner and table, every line prefixed, about 1 MB.
fn nccl_tagged_1mb() -> String {
    let table = fixture("nccl-tests/h100-x8-all_reduce_perf-nvls-nccl-tests-290.txt");
    let mut out = String::with_capacity(TARGET + 64 * 1024);
    let mut n = 0;
    while out.len() < TARGET - table.len() * 2 {
        let rank = n % 16;
        out.push_str(&format!(
            "[1,{rank}]<stdout>:node-{}:{}:{} [{}] NCCL INFO Channel {:02}/0 : {rank}[{}] -> {}[{}] via P2P/CUMEM/read\n",
            rank / 8,
            4000 + rank,
            4100 + rank,
            rank % 8,
            n % 32,
            rank % 8,
            (rank + 1) % 16,
            (rank + 1) % 8
        ));
        n += 1;
    }
    for l in table.lines() {
        out.push_str("[1,0]<stdout>:");
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// AIPerf's per-request `profile_export.jsonl`: the documentation's record repeated with varied
/// latencies, one in fifty cancelled, about 1 MB.
fn aiperf_records_1mb() -> String {
    let src = fixture("bench-serving/aiperf-profile-export-records-from-docs.jsonl");
    let mut lines = src.lines();
    let good: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    let bad = lines.next().unwrap();
    let mut out = String::with_capacity(TARGET + 4096);
    let mut i = 0u64;
    while out.len() < TARGET {
        if i % 50 == 49 {
            out.push_str(bad);
        } else {
            let mut r = good.clone();
            let ttft = 80.0 + (i % 997) as f64 * 0.4;
            r["metadata"]["request_start_ns"] = json!(1_759_813_207_532_900_363u64 + i * 40_000_000);
            r["metadata"]["request_end_ns"] = json!(1_759_813_207_838_764_604u64 + i * 40_000_000);
            r["metrics"]["time_to_first_token"]["value"] = json!(ttft);
            r["metrics"]["request_latency"]["value"] = json!(ttft + 40.0 + (i % 13) as f64);
            out.push_str(&r.to_string());
        }
        out.push('\n');
        i += 1;
    }
    out
}

/// AIPerf's summary `profile_export_aiperf.json`, grown to about 1 MB by a telemetry block of
/// per-second GPU samples next to the latency statistics (ignored by the reader; one key, so the
/// item stays under the limit of metric keys).
fn aiperf_summary_1mb() -> String {
    let mut v: Value = serde_json::from_str(&fixture(
        "bench-serving/aiperf-profile-export-qwen3.6-nvfp4-rtx5090-c16.json",
    ))
    .unwrap();
    let size = v.to_string().len();
    // One sample such as 412.37 with its comma: about 7 bytes.
    let samples: Vec<f64> = (0..TARGET.saturating_sub(size) / 7 + 1)
        .map(|i| 400.0 + (i % 2311) as f64 / 100.0)
        .collect();
    v.as_object_mut()
        .unwrap()
        .insert("gpu_power_usage_samples".into(), json!(samples));
    v.to_string()
}

/// A GuideLLM sweep whose constant-rate points kept every request, about 1 MB.
fn guidellm_1mb() -> String {
    let mut v: Value =
        serde_json::from_str(&fixture("bench-serving/guidellm-benchmarks-sweep-synthetic.json")).unwrap();
    let benchmarks = v["benchmarks"].as_array_mut().unwrap();
    let template = benchmarks[1].clone();
    let one = template["requests"]["successful"][0].clone();
    let mut point = template;
    let mut requests = Vec::new();
    for i in 0..800 {
        let mut r = one.clone();
        r["time_to_first_token_ms"] = json!(90.0 + (i % 211) as f64);
        r["time_per_output_token_ms"] = json!(18.0 + (i % 17) as f64);
        r["request_latency"] = json!(1.2 + (i % 31) as f64 * 0.1);
        requests.push(r);
    }
    point["requests"]["successful"] = Value::Array(requests);
    let mut k = 0;
    while serde_json::to_string(&*benchmarks).unwrap().len() < TARGET {
        let mut p = point.clone();
        p["config"]["strategy"]["rate"] = json!(5.0 + k as f64 * 0.5);
        benchmarks.push(p);
        k += 1;
    }
    v.to_string()
}

/// SGLang `bench_serving --output-file` JSON Lines: one line per request rate, each with the
/// per-request arrays `--output-details` adds, about 1 MB.
fn sglang_jsonl_1mb() -> String {
    let line: Value = serde_json::from_str(
        fixture("bench-serving/sglang-bench-serving-llama3.3-70b-h200-rate-sweep.jsonl")
            .lines()
            .next()
            .unwrap(),
    )
    .unwrap();
    let mut out = String::new();
    let mut rate = 1.0;
    while out.len() < TARGET {
        let n = 2500;
        let mut l = line.clone();
        l["request_rate"] = json!(rate);
        l["ttfts"] = json!((0..n).map(|i| 0.05 + (i % 97) as f64 * 0.001).collect::<Vec<_>>());
        l["itls"] = json!((0..n)
            .map(|i| vec![0.011 + (i % 7) as f64 * 0.001, 0.012])
            .collect::<Vec<_>>());
        l["output_lens"] = json!((0..n).map(|i| 3 + i % 5).collect::<Vec<_>>());
        l["errors"] = json!((0..n).map(|_| "").collect::<Vec<_>>());
        out.push_str(&l.to_string());
        out.push('\n');
        rate *= 2.0;
    }
    out
}

fn check(kind: EvidenceKind, name: &str, parsed: Result<Parsed, impl std::fmt::Debug>, key: &str) {
    let p = parsed.unwrap_or_else(|e| panic!("{name}: the generated input does not parse: {e:?}"));
    assert!(
        p.metrics.contains_key(key),
        "{name} ({kind}): no {key}; {:?}",
        p.warnings
    );
}

fn parsers(c: &mut Criterion) {
    let metrics = vllm_metrics_1mb();
    let parsed = parse(EvidenceKind::VllmMetrics, metrics.as_bytes()).expect("the generated scrape parses");
    assert!(
        parsed.metrics.contains_key("serving.ttft_p95_ms"),
        "{:?}",
        parsed.warnings
    );
    let bench = bench_json_1mb();
    let parsed = parse(EvidenceKind::BenchServing, bench.as_bytes()).expect("the generated result parses");
    assert!(
        parsed.metrics.contains_key("serving.ttft_p99_ms"),
        "{:?}",
        parsed.warnings
    );
    eprintln!(
        "vllm-metrics input: {} bytes; bench JSON input: {} bytes",
        metrics.len(),
        bench.len()
    );

    let mut g = c.benchmark_group("parsers");
    g.throughput(Throughput::Bytes(metrics.len() as u64));
    g.bench_function("vllm_metrics_1mb", |b| {
        b.iter(|| parse(EvidenceKind::VllmMetrics, std::hint::black_box(metrics.as_bytes())))
    });
    g.throughput(Throughput::Bytes(bench.len() as u64));
    g.bench_function("bench_serving_json_1mb", |b| {
        b.iter(|| parse(EvidenceKind::BenchServing, std::hint::black_box(bench.as_bytes())))
    });
    g.bench_function("bench_serving_json_slo_1mb", |b| {
        b.iter(|| {
            parse_with(
                EvidenceKind::BenchServing,
                std::hint::black_box(bench.as_bytes()),
                &TARGETS,
            )
        })
    });
    check(
        EvidenceKind::BenchServing,
        "bench_serving_json_slo_1mb",
        parse_with(EvidenceKind::BenchServing, bench.as_bytes(), &TARGETS),
        "serving.slo_attainment",
    );

    // The formats added later (genai-perf, TensorRT-LLM, ...), one input each.
    let inputs: Vec<(&str, EvidenceKind, String, &str)> = vec![
        (
            "aiperf_records_jsonl_1mb",
            EvidenceKind::BenchServing,
            aiperf_records_1mb(),
            "serving.slo_attainment",
        ),
        (
            "aiperf_summary_json_1mb",
            EvidenceKind::BenchServing,
            aiperf_summary_1mb(),
            "serving.ttft_p99_ms",
        ),
        (
            "guidellm_sweep_json_1mb",
            EvidenceKind::BenchServing,
            guidellm_1mb(),
            "serving.by_run.constant_4_5rps.slo_attainment",
        ),
        (
            "sglang_jsonl_1mb",
            EvidenceKind::BenchServing,
            sglang_jsonl_1mb(),
            "serving.slo_attainment",
        ),
        (
            "dcgm_exporter_1mb",
            EvidenceKind::DcgmExporter,
            dcgm_exporter_1mb("dcgm-exporter/kops-l4-idle-scrape-dcgm-exporter-driver580.txt", 0.0),
            "gpu.util_pct_avg",
        ),
        (
            "nvidia_smi_table_1mb",
            EvidenceKind::NvidiaSmiQuery,
            nvidia_smi_table_1mb(),
            "gpu.memory_total_mib",
        ),
        (
            "nvidia_smi_q_text_1mb",
            EvidenceKind::NvidiaSmiQuery,
            nvidia_smi_q_text_1mb(),
            "gpu.memory_total_mib",
        ),
        (
            "nccl_tests_mpirun_tagged_1mb",
            EvidenceKind::NcclTests,
            nccl_tagged_1mb(),
            "nccl.busbw_peak_gbps",
        ),
    ];
    for (name, kind, input, key) in &inputs {
        check(*kind, name, parse_with(*kind, input.as_bytes(), &TARGETS), key);
        eprintln!("{name}: {} bytes", input.len());
        g.throughput(Throughput::Bytes(input.len() as u64));
        g.bench_function(*name, |b| {
            b.iter(|| parse_with(*kind, std::hint::black_box(input.as_bytes()), &TARGETS))
        });
    }
    // A dcgm-exporter window: two 1 MB scrapes, counters differenced.
    let before = dcgm_exporter_1mb("dcgm-exporter/l4-window-before.txt", 0.0);
    let after = dcgm_exporter_1mb("dcgm-exporter/l4-window-after.txt", 0.0);
    check(
        EvidenceKind::DcgmExporter,
        "dcgm_exporter_window_2x1mb",
        parse_window(
            EvidenceKind::DcgmExporter,
            before.as_bytes(),
            after.as_bytes(),
            &TARGETS,
        ),
        "gpu.energy_joules",
    );
    g.throughput(Throughput::Bytes((before.len() + after.len()) as u64));
    g.bench_function("dcgm_exporter_window_2x1mb", |b| {
        b.iter(|| {
            parse_window(
                EvidenceKind::DcgmExporter,
                std::hint::black_box(before.as_bytes()),
                std::hint::black_box(after.as_bytes()),
                &TARGETS,
            )
        })
    });
    g.finish();
}

criterion_group!(benches, parsers);
criterion_main!(benches);
