//! The new evidence formats through the ingest API: `kind=auto` finds them, JSON nothing reads is
//! `failed` with the list of formats (never `partial` with nothing), and serving results are judged
//! against the brief's own latency targets.

use crate::common::builders::BriefBuilder;
use crate::common::{fixture, spawn_app};
use rentcheck::evidence::parsers::{parse_with, EvidenceKind, MetricValue, SloTargets};
use serde_json::{json, Value};

async fn created(res: reqwest::Response) -> Value {
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    body
}

#[tokio::test]
async fn serving_results_are_judged_against_the_briefs_targets() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .targets(json!({ "ttft_p95_ms": 400, "itl_p95_ms": 40, "e2e_p95_ms": 8000 }))
        .create_id(&app)
        .await;
    let bytes = fixture("bench-serving/vllm-benchmark-serving-llama3.3-70b-tp8-8xa100-qps-inf.json");
    let body = created(
        app.post_raw_evidence(&brief, "kind=auto&stage=3", "application/json", bytes.clone())
            .await,
    )
    .await;
    assert_eq!(body["kind"], "bench-serving");
    // The brief's targets reached the parser: the same figures as the pure parser gives for them
    // (tests/it/parsers/formats.rs recomputes those from the file's arrays).
    let targets = SloTargets {
        ttft_ms: Some(400.0),
        tpot_ms: Some(40.0),
        e2e_ms: Some(8000.0),
    };
    let want = parse_with(EvidenceKind::BenchServing, &bytes, &targets).unwrap();
    for key in [
        "serving.slo_attainment",
        "serving.goodput_rps",
        "serving.slo_attainment_e2e",
    ] {
        let Some(MetricValue::Number(w)) = want.metrics.get(key) else {
            panic!("{key} missing from the pure parse")
        };
        assert_eq!(body["metrics"][key].as_f64(), Some(*w), "{key}: {body}");
    }
    assert!(body["metrics"]["serving.slo_attainment"].as_f64().unwrap() < 1.0);

    // A brief without latency targets gets no attainment.
    let plain = BriefBuilder::new()
        .targets(json!({ "ttft_p95_ms": null, "itl_p95_ms": null, "error_rate": 0.01 }))
        .create_id(&app)
        .await;
    let body = created(
        app.post_raw_evidence(&plain, "kind=bench-serving&stage=3", "application/json", bytes)
            .await,
    )
    .await;
    assert!(body["metrics"].get("serving.slo_attainment").is_none(), "{body}");
}

#[tokio::test]
async fn kind_auto_reads_the_new_formats_and_fails_unknown_json_with_a_reason() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    for (rel, kind, key) in [
        (
            "bench-serving/genai-perf-profile-export-trtllm-c100-streaming-perf-analyzer-298.json",
            "bench-serving",
            "serving.ttft_p99_ms",
        ),
        (
            "bench-serving/aiperf-profile-export-qwen3.6-nvfp4-rtx5090-c16.json",
            "bench-serving",
            "serving.ttft_p95_ms",
        ),
        (
            "bench-serving/guidellm-benchmarks-sweep-synthetic.json",
            "bench-serving",
            "serving.request_throughput_rps",
        ),
        (
            "dcgm-exporter/kops-l4-idle-scrape-dcgm-exporter-driver580.txt",
            "dcgm-exporter",
            "gpu.util_pct_avg",
        ),
        (
            "nvidia-smi-query/a10-table-driver550-gpud.txt",
            "nvidia-smi-query",
            "gpu.memory_total_mib",
        ),
        (
            "nccl-tests/t4-x2-efa-eks-mpirun-tag-output-blueprints.txt",
            "nccl-tests",
            "nccl.busbw_pct_of_expected",
        ),
    ] {
        let body = created(
            app.post_raw_evidence(&brief, "kind=auto&stage=1", "application/octet-stream", fixture(rel))
                .await,
        )
        .await;
        assert_eq!(body["kind"], kind, "{rel}: {body}");
        assert_ne!(body["parse_status"], "failed", "{rel}: {body}");
        assert!(body["metrics"][key].is_number(), "{rel}: {key} in {body}");
    }

    let body = created(
        app.post_raw_evidence(
            &brief,
            "kind=auto&stage=1",
            "application/json",
            br#"{"run": "x", "p99": 12}"#.to_vec(),
        )
        .await,
    )
    .await;
    assert_eq!(body["parse_status"], "failed", "{body}");
    assert_eq!(body["metrics"], json!({}));
    let err = body["parse_error"].as_str().unwrap();
    for format in ["GenAI-Perf", "AIPerf", "GuideLLM", "SGLang", "top-level keys: p99, run"] {
        assert!(err.contains(format), "{err}");
    }
}

#[tokio::test]
async fn a_run_where_nothing_completed_is_stored_without_latency_and_fails_no_target_silently() {
    use crate::common::vllm_points::{load_point, Load};
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .targets(json!({ "ttft_p95_ms": 400, "itl_p95_ms": 40, "error_rate": 0.01 }))
        .create_id(&app)
        .await;
    // The real `--save-detailed` run with every request failed as vLLM writes failures, and the
    // summary of zeros the tool prints over no request (tests/it/common/vllm_points.rs).
    let mut point = load_point(Load::at(8.0, 25.0).failing(200));
    for k in [
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "p95_ttft_ms",
        "p95_tpot_ms",
        "p99_itl_ms",
    ] {
        point[k] = Value::from(0.0);
    }
    let body = created(
        app.post_raw_evidence(
            &brief,
            "kind=auto&stage=3",
            "application/json",
            point.to_string().into_bytes(),
        )
        .await,
    )
    .await;
    assert_eq!(body["kind"], "bench-serving");
    let stored: Value = app
        .get(body["links"]["self"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    let metrics = stored["metrics"].as_object().unwrap();
    assert_eq!(metrics["serving.completed"], 0.0);
    assert_eq!(metrics["serving.error_rate"], 1.0);
    let latency: Vec<&String> = metrics.keys().filter(|k| k.ends_with("_ms")).collect();
    assert!(
        latency.is_empty(),
        "a latency of 0 would pass every target: {latency:?}"
    );

    // On the card the latency criteria fail for want of any completed request (never a pass on
    // the tool's zeros), and so does the error rate.
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let criterion = |key: &str| {
        card["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == key && c["stage"] == 3)
            .cloned()
            .unwrap_or_else(|| panic!("{key} in {card}"))
    };
    for key in ["serving.ttft_p95_ms", "serving.tpot_p95_ms"] {
        let c = criterion(key);
        assert_eq!(c["status"], "fail", "{c}");
        assert_eq!(c["reason"], "no request completed", "{c}");
    }
    assert_eq!(criterion("serving.error_rate")["status"], "fail");
}
