//! Parser speed (docs/perf.md: 1 MB of /metrics text < 10 ms; 1 MB bench JSON < 5 ms).
//! Run: cargo bench --bench parsers -- --warm-up-time 1 --measurement-time 3

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rentcheck::evidence::parsers::{parse, EvidenceKind};

const TARGET: usize = 1024 * 1024;

fn fixture(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One valid scrape of about 1 MB: the fixture's families, each header once, each per-model series
/// repeated with distinct `model_name` values (so no series repeats and every family stays one group).
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
        .filter(|l| l.contains("model_name=\""))
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
            if s.contains("model_name=\"") {
                for i in 0..copies {
                    out.push_str(&s.replacen("model_name=\"", &format!("model_name=\"m{i}-"), 1));
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
    g.finish();
}

criterion_group!(benches, parsers);
criterion_main!(benches);
