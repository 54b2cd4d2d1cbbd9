//! Black-box tests of the evidence API: a real server over a fresh database per test.

use crate::common;

use std::collections::HashSet;

use base64::Engine as _;
use common::{fixture, spawn_app, spawn_app_with, TestApp};
use rentcheck::config::AppConfig;
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn num(v: &Value, key: &str) -> f64 {
    v["metrics"][key]
        .as_f64()
        .unwrap_or_else(|| panic!("{key} missing or not a number in {}", v["metrics"]))
}

async fn created(res: reqwest::Response) -> Value {
    let status = res.status();
    let body: Value = res.json().await.unwrap();
    assert_eq!(status, 201, "{body}");
    body
}

async fn problem(res: reqwest::Response, status: u16) -> Value {
    assert_eq!(res.status(), status);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    res.json().await.unwrap()
}

async fn evidence_rows(app: &TestApp) -> i64 {
    app.count("evidence").await
}

#[tokio::test]
async fn raw_body_upload_parses_and_stores_exact_bytes() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let bytes = fixture("nvidia-smi-list/h200-x8.txt");
    let res = app
        .post_raw_evidence(&brief, "kind=nvidia-smi-list&stage=1", "text/plain", bytes.clone())
        .await;
    assert!(res.headers()["location"]
        .to_str()
        .unwrap()
        .starts_with("/api/v1/evidence/"));
    let body = created(res).await;
    assert_eq!(body["kind"], "nvidia-smi-list");
    assert_eq!(body["parse_status"], "ok");
    assert_eq!(num(&body, "gpu.count"), 8.0);
    assert_eq!(body["metrics"]["gpu.models"][0], "NVIDIA H200");
    assert_eq!(body["size_bytes"], bytes.len());

    let id = body["id"].as_str().unwrap();
    let detail: Value = app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap();
    assert_eq!(detail["stage"], 1);
    assert_eq!(detail["content_type"], "text/plain");
    assert_eq!(detail["parser_version"], rentcheck::evidence::parsers::PARSER_VERSION);
    assert!(
        detail["uploaded_by"].as_str().unwrap().contains("engineer@example.com"),
        "who sent it: the token and its subject"
    );
    assert!(detail.get("raw").is_none());
    let raw = app.get(&format!("/api/v1/evidence/{id}/raw")).await;
    assert_eq!(raw.headers()["content-type"], "text/plain");
    assert_eq!(raw.headers()["x-content-type-options"], "nosniff");
    assert!(raw.headers().get("content-disposition").is_none());
    assert_eq!(raw.bytes().await.unwrap().to_vec(), bytes);
}

#[tokio::test]
async fn json_envelope_with_data_content_and_base64() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence");
    let bench: Value =
        serde_json::from_slice(&fixture("bench-serving/vllm-bench-serve-p95-failed-requests.json")).unwrap();
    let body = created(
        app.post_json(
            &path,
            &json!({ "kind": "bench-serving", "stage": 3, "collected_at": "2026-11-29T10:00:00Z",
                     "labels": { "run": "a" }, "data": bench }),
        )
        .await,
    )
    .await;
    assert_eq!(num(&body, "serving.ttft_p95_ms"), 160.0);
    assert_eq!(num(&body, "serving.error_rate"), 0.04);
    let detail: Value = app
        .get(&format!("/api/v1/evidence/{}", body["id"].as_str().unwrap()))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(detail["collected_at"], "2026-11-29T10:00:00Z");
    assert_eq!(detail["labels"], json!({ "run": "a" }));
    assert_eq!(detail["content_type"], "application/json");

    let text = String::from_utf8(fixture("nccl-tests/h200-x8-bf16-wrong-rows.txt")).unwrap();
    let body = created(
        app.post_json(&path, &json!({ "kind": "nccl-tests", "stage": 2, "content": text }))
            .await,
    )
    .await;
    assert_eq!(num(&body, "nccl.busbw_peak_gbps"), 402.7);
    assert_eq!(num(&body, "nccl.wrong"), 1.0);

    let b64 = base64::engine::general_purpose::STANDARD.encode(fixture("dcgm-diag/dcgm3-json-r2-pcie-fail.json"));
    let body = created(
        app.post_json(
            &path,
            &json!({ "kind": "dcgm-diag", "stage": 2, "content_base64": b64, "content_type": "application/json" }),
        )
        .await,
    )
    .await;
    assert_eq!(body["metrics"]["dcgm.diag.passed"], false);
    assert_eq!(body["metrics"]["dcgm.diag.failed_tests"], json!(["PCIe"]));
}

/// An envelope's `data` is the evidence's content as it was sent — spacing, key order and escapes
/// kept — alone or as a batch item, and read once from those bytes: the stored bytes, the answer's
/// `sha256` and `size_bytes`, and the metrics all come from the same text. A member given twice or
/// a `null` kind still reads as a JSON document does (the last wins; "must be a string").
#[tokio::test]
async fn an_envelopes_data_is_kept_as_the_bytes_sent() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence");
    let data =
        "{ \"tool\": \"harness\",\n  \"metrics\": {\"z.last\": 2, \"a.first\": 1.50, \"note\": \"caf\\u00e9\"} }";
    let post = |body: String, url: String| {
        let client = app.client.clone();
        async move {
            client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    let single = created(
        post(
            format!("{{\"kind\": \"metrics\", \"stage\": 3, \"data\": {data}}}"),
            app.url(&path),
        )
        .await,
    )
    .await;
    let batch: Value = post(
        format!("{{\"items\": [ {{\"kind\": \"metrics\", \"stage\": 3, \"data\": {data} }} ]}}"),
        app.url(&format!("{path}/batch")),
    )
    .await
    .json()
    .await
    .unwrap();
    let sent_sha = rentcheck::evidence::model::sha256_hex(data.as_bytes());
    for id in [
        single["id"].as_str().unwrap(),
        batch["items"][0]["id"].as_str().unwrap(),
    ] {
        let raw = app.get(&format!("/api/v1/evidence/{id}/raw")).await;
        assert_eq!(raw.bytes().await.unwrap(), data.as_bytes(), "item {id}");
        let item: Value = app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap();
        assert_eq!(item["sha256"], sent_sha.as_str(), "{item}");
        assert_eq!(item["size_bytes"], data.len(), "{item}");
        assert_eq!(
            item["metrics"],
            json!({ "a.first": 1.5, "z.last": 2.0, "note": "café" }),
            "{item}"
        );
        assert_eq!(item["tool"], "harness", "{item}");
    }
    assert_eq!(single["sha256"], sent_sha.as_str());

    // A member given twice: the last is the one read, as in any JSON document, and `data` is
    // still kept as sent.
    let twice = created(
        post(
            format!("{{\"kind\": \"metrics\", \"stage\": 3, \"stage\": 4, \"data\": {data}}}"),
            app.url(&path),
        )
        .await,
    )
    .await;
    let id = twice["id"].as_str().unwrap();
    let item: Value = app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap();
    assert_eq!(item["stage"], 4, "{item}");
    let raw = app.get(&format!("/api/v1/evidence/{id}/raw")).await;
    assert_eq!(raw.bytes().await.unwrap(), data.as_bytes());
    let p = problem(
        post(
            r#"{"kind": null, "stage": 3, "content": "x"}"#.to_owned(),
            app.url(&path),
        )
        .await,
        422,
    )
    .await;
    assert_eq!(p["errors"][0]["field"], "kind", "{p}");
    assert_eq!(p["errors"][0]["message"], "must be a string", "{p}");
}

#[tokio::test]
async fn multipart_upload_with_fields_as_parts_or_query() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let bytes = fixture("nccl-tests/h200-x8-bf16-wrong-rows.txt");
    let form = reqwest::multipart::Form::new()
        .text("kind", "nccl-tests")
        .text("stage", "2")
        .text("label.node", "gpu-07")
        .part(
            "file",
            reqwest::multipart::Part::bytes(bytes.clone())
                .file_name("all_reduce.txt")
                .mime_str("text/plain")
                .unwrap(),
        );
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let body = created(res).await;
    assert_eq!(num(&body, "nccl.busbw_avg_gbps"), 223.467);
    assert_eq!(num(&body, "nccl.world_size"), 8.0);
    let id = body["id"].as_str().unwrap();
    let detail: Value = app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap();
    assert_eq!(detail["filename"], "all_reduce.txt");
    assert_eq!(detail["labels"]["node"], "gpu-07");
    assert_eq!(detail["tool_version"], "2.13.11");
    let raw = app
        .get(&format!("/api/v1/evidence/{id}/raw"))
        .await
        .bytes()
        .await
        .unwrap();
    assert_eq!(raw.to_vec(), bytes);

    // kind and stage in the query; kind=auto
    let form = reqwest::multipart::Form::new().part(
        "file",
        reqwest::multipart::Part::bytes(fixture("nvidia-smi-topo/l40s-x4-pcie-sys-old-nic-header.txt")),
    );
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=auto&stage=1")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let body = created(res).await;
    assert_eq!(body["kind"], "nvidia-smi-topo");
    assert_eq!(body["metrics"]["topo.nvlink_all_pairs"], false);

    // no file part → 422 naming the field
    let form = reqwest::multipart::Form::new().text("kind", "log").text("stage", "1");
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence")))
        .multipart(form)
        .send()
        .await
        .unwrap();
    let p = problem(res, 422).await;
    assert_eq!(p["errors"][0]["field"], "file");
}

#[tokio::test]
async fn kind_auto_detects_or_falls_back_to_log_with_a_warning() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let body = created(
        app.post_raw_evidence(
            &brief,
            "kind=auto&stage=1",
            "text/plain",
            fixture("nvidia-smi-list/h200-x8.txt"),
        )
        .await,
    )
    .await;
    assert_eq!(body["kind"], "nvidia-smi-list");
    assert_eq!(body["parse_status"], "ok");

    let body = created(
        app.post_raw_evidence(&brief, "kind=auto&stage=4", "text/plain", b"just some words\n".to_vec())
            .await,
    )
    .await;
    assert_eq!(body["kind"], "log");
    assert_eq!(body["parse_status"], "partial");
    assert!(body["warnings"][0].as_str().unwrap().contains("not recognised"));
}

#[tokio::test]
async fn failed_parse_is_stored_with_the_line_and_partial_keeps_warnings() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let body = created(
        app.post_raw_evidence(
            &brief,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            fixture("nvidia-smi-list/driver-failure.txt"),
        )
        .await,
    )
    .await;
    assert_eq!(body["parse_status"], "failed");
    let err = body["parse_error"].as_str().unwrap();
    assert!(
        err.starts_with("line 1:") && err.contains("NVIDIA-SMI has failed"),
        "{err}"
    );
    assert_eq!(body["metrics"], json!({}));
    assert_eq!(evidence_rows(&app).await, 1);

    let body = created(
        app.post_raw_evidence(
            &brief,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            fixture("nvidia-smi-list/l4-x2-truncated.txt"),
        )
        .await,
    )
    .await;
    assert_eq!(body["parse_status"], "partial");
    assert_eq!(num(&body, "gpu.count"), 2.0);
    assert!(body["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|w| w.as_str().unwrap().contains("line 2")));
}

#[tokio::test]
async fn non_utf8_bytes_are_kept_exactly() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let bytes = fixture("metrics/non-utf8.bin");
    let body = created(
        app.post_raw_evidence(&brief, "kind=metrics&stage=5", "application/json", bytes.clone())
            .await,
    )
    .await;
    assert_eq!(body["parse_status"], "failed");
    assert!(
        body["parse_error"].as_str().unwrap().starts_with("line 1, column 20"),
        "{body}"
    );
    let raw = app
        .get(&format!("/api/v1/evidence/{}/raw", body["id"].as_str().unwrap()))
        .await;
    // not valid UTF-8, so not shown inline even though it claims JSON
    assert_eq!(raw.headers()["content-type"], "application/json");
    assert!(raw.headers()["content-disposition"]
        .to_str()
        .unwrap()
        .starts_with("attachment"));
    assert_eq!(raw.bytes().await.unwrap().to_vec(), bytes);

    // every byte value, as a binary log with no content type
    let all: Vec<u8> = (0..=255u8).cycle().take(4096).collect();
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=log&stage=5")))
        .body(all.clone())
        .send()
        .await
        .unwrap();
    let body = created(res).await;
    assert_eq!(body["parse_status"], "ok");
    let raw = app
        .get(&format!("/api/v1/evidence/{}/raw", body["id"].as_str().unwrap()))
        .await;
    assert_eq!(raw.headers()["content-type"], "application/octet-stream");
    assert_eq!(raw.bytes().await.unwrap().to_vec(), all);

    // and through the JSON envelope
    let b64 = base64::engine::general_purpose::STANDARD.encode(&all);
    let body = created(
        app.post_json(
            &format!("/api/v1/briefs/{brief}/evidence"),
            &json!({ "kind": "log", "stage": 5, "content_base64": b64 }),
        )
        .await,
    )
    .await;
    let raw = app
        .get(&format!("/api/v1/evidence/{}/raw", body["id"].as_str().unwrap()))
        .await;
    assert_eq!(raw.bytes().await.unwrap().to_vec(), all);
}

#[tokio::test]
async fn vllm_window_after_uses_the_before_scrape() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let before = created(
        app.post_raw_evidence(
            &brief,
            "kind=vllm-metrics&stage=3&label.window=w1&label.phase=before",
            "text/plain; version=0.0.4",
            fixture("vllm-metrics/window-before.txt"),
        )
        .await,
    )
    .await;
    assert_eq!(before["parse_status"], "ok", "{}", before["warnings"]);
    let after = created(
        app.post_raw_evidence(
            &brief,
            "kind=vllm-metrics&stage=3&label.window=w1&label.phase=after",
            "text/plain; version=0.0.4",
            fixture("vllm-metrics/window-after.txt"),
        )
        .await,
    )
    .await;
    assert_eq!(num(&after, "serving.ttft_p50_ms"), 750.0);
    assert_eq!(num(&after, "serving.requests_total"), 20.0);
    assert_eq!(after["metrics"]["serving.window"], true);

    // another window with no `before`: cumulative values, with a warning
    let lone = created(
        app.post_json(
            &format!("/api/v1/briefs/{brief}/evidence"),
            &json!({ "kind": "vllm-metrics", "stage": 3, "labels": { "window": "w2", "phase": "after" },
                     "content": String::from_utf8(fixture("vllm-metrics/window-after.txt")).unwrap() }),
        )
        .await,
    )
    .await;
    assert_eq!(num(&lone, "serving.ttft_p50_ms"), 700.0);
    assert_eq!(lone["parse_status"], "partial");
    assert!(lone["warnings"][0].as_str().unwrap().contains("no `before` scrape"));
}

#[tokio::test]
async fn idempotency_key_replays_the_first_answer_and_refuses_another_body() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let url = app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1"));
    let send = |body: Vec<u8>| {
        app.client
            .post(&url)
            .header("idempotency-key", "collect-1234")
            .header("content-type", "text/plain")
            .body(body)
            .send()
    };
    let first = send(fixture("nvidia-smi-list/h200-x8.txt")).await.unwrap();
    assert_eq!(first.status(), 201);
    assert!(first.headers().get("idempotent-replayed").is_none());
    let first: Value = first.json().await.unwrap();
    let again = send(fixture("nvidia-smi-list/h200-x8.txt")).await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.json::<Value>().await.unwrap(), first);
    let other = send(b"GPU 0: NVIDIA L4 (UUID: GPU-1)\n".to_vec()).await.unwrap();
    let p = problem(other, 409).await;
    assert!(p["detail"].as_str().unwrap().contains("Idempotency-Key"));
    assert_eq!(evidence_rows(&app).await, 1);
    assert_eq!(app.count("idempotency_keys").await, 1);

    // a multipart retry of the same file matches although its boundary differs
    let mp = || {
        reqwest::multipart::Form::new()
            .text("kind", "log")
            .text("stage", "1")
            .part(
                "file",
                reqwest::multipart::Part::bytes(b"hello".to_vec()).file_name("a.log"),
            )
    };
    let post = |form| {
        app.client
            .post(app.url(&format!("/api/v1/briefs/{brief}/evidence")))
            .header("idempotency-key", "mp-1")
            .multipart(form)
            .send()
    };
    assert_eq!(post(mp()).await.unwrap().status(), 201);
    assert_eq!(post(mp()).await.unwrap().status(), 200);

    // a malformed key is a field error
    let res = app
        .client
        .post(&url)
        .header("idempotency-key", "")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(problem(res, 422).await["errors"][0]["field"], "Idempotency-Key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_posts_with_one_key_create_one_row() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let url = app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1"));
    let bytes = fixture("nvidia-smi-list/h200-x8.txt");
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let req = app
            .client
            .post(&url)
            .header("idempotency-key", "same-key")
            .header("content-type", "text/plain")
            .body(bytes.clone());
        tasks.push(tokio::spawn(async move {
            let res = req.send().await.unwrap();
            let status = res.status().as_u16();
            let body: Value = res.json().await.unwrap();
            (status, body["id"].as_str().unwrap_or("").to_owned())
        }));
    }
    let mut statuses = Vec::new();
    let mut ids = HashSet::new();
    for t in tasks {
        let (status, id) = t.await.unwrap();
        statuses.push(status);
        ids.insert(id);
    }
    assert_eq!(evidence_rows(&app).await, 1);
    assert_eq!(statuses.iter().filter(|s| **s == 201).count(), 1, "{statuses:?}");
    assert!(statuses.iter().all(|s| *s == 201 || *s == 200), "{statuses:?}");
    assert_eq!(ids.len(), 1, "{ids:?}");
}

/// Sends raw HTTP/1.1 and returns the status line, after writing `head` and then `body_chunks`
/// until the server answers or the chunks run out. Returns (status line, bytes of body written).
async fn raw_http(app: &TestApp, head: String, chunks: impl Iterator<Item = Vec<u8>>) -> (String, usize) {
    let addr = app.base.trim_start_matches("http://").to_owned();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(head.as_bytes()).await.unwrap();
    let mut written = 0;
    let mut buf = vec![0u8; 4096];
    for chunk in chunks {
        // stop as soon as an answer is waiting
        if let Ok(Ok(n)) = tokio::time::timeout(std::time::Duration::from_millis(5), s.read(&mut buf)).await {
            if n > 0 {
                return (
                    String::from_utf8_lossy(&buf[..n])
                        .lines()
                        .next()
                        .unwrap_or("")
                        .to_owned(),
                    written,
                );
            }
        }
        if s.write_all(&chunk).await.is_err() {
            break;
        }
        written += chunk.len();
    }
    let n = tokio::time::timeout(std::time::Duration::from_secs(10), s.read(&mut buf))
        .await
        .expect("the server answered")
        .unwrap();
    (
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_owned(),
        written,
    )
}

#[tokio::test]
async fn oversized_bodies_are_refused_while_streaming() {
    let app = spawn_app_with(AppConfig {
        max_upload: 64 * 1024,
        ..AppConfig::default()
    })
    .await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence?kind=log&stage=1");
    let token = &app.token;

    // Content-Length over the cap: 413 without the body being sent at all
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        10 * 1024 * 1024
    );
    // (Only the head is sent: an answer that waited for the body would never come.)
    let (status, _) = raw_http(&app, head, std::iter::empty()).await;
    assert!(status.contains(" 413 "), "{status}");

    // chunked, no Content-Length: cut off soon after 64 KiB, long before the 10 MiB would end
    let head =
        format!("POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {token}\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n");
    let chunk = {
        let mut c = format!("{:x}\r\n", 8192).into_bytes();
        c.extend(vec![b'b'; 8192]);
        c.extend(b"\r\n");
        c
    };
    let (status, written) = raw_http(&app, head, std::iter::repeat_n(chunk, 1280)).await;
    assert!(status.contains(" 413 "), "{status}");
    assert!(
        written < 1024 * 1024,
        "the server read {written} bytes before answering"
    );

    // at the cap is fine; the JSON envelope and multipart obey the cap too
    let res = app
        .post_raw_evidence(&brief, "kind=log&stage=1", "text/plain", vec![b'c'; 64 * 1024])
        .await;
    assert_eq!(res.status(), 201);
    let big = "d".repeat(70 * 1024);
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/evidence"),
            &json!({ "kind": "log", "stage": 1, "content": big }),
        )
        .await;
    let p = problem(res, 413).await;
    assert!(p["detail"].as_str().unwrap().contains("65536"));
    assert_eq!(evidence_rows(&app).await, 1);
}

#[tokio::test]
async fn a_default_app_accepts_more_than_the_global_one_mib_limit() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let res = app
        .post_raw_evidence(&brief, "kind=log&stage=1", "text/plain", vec![b'e'; 3 * 1024 * 1024])
        .await;
    assert_eq!(res.status(), 201);
}

#[tokio::test]
async fn nonsense_gets_415_400_422_and_404_never_500() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence");
    // neither JSON, multipart nor ?kind=&stage=
    let res = app
        .client
        .post(app.url(&path))
        .header("content-type", "text/plain")
        .body("{\"kind\": \"log\"}")
        .send()
        .await
        .unwrap();
    problem(res, 415).await;
    // claims JSON, is not
    let res = app
        .client
        .post(app.url(&path))
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert!(problem(res, 400).await["detail"]
        .as_str()
        .unwrap()
        .contains("malformed JSON"));
    // bad fields, each named
    let res = app
        .post_json(&path, &json!({ "kind": "gpu-magic", "stage": 0, "content": 5 }))
        .await;
    let p = problem(res, 422).await;
    let fields: Vec<&str> = p["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["kind", "stage", "content"]);
    let res = app
        .post_json(&path, &json!({ "kind": "log", "stage": 1, "content": "a", "data": {} }))
        .await;
    problem(res, 422).await;
    let res = app
        .post_json(&path, &json!({ "kind": "log", "stage": 1, "content_base64": "***" }))
        .await;
    assert_eq!(problem(res, 422).await["errors"][0]["field"], "content_base64");
    let res = app.post_json(&path, &json!([1, 2])).await;
    problem(res, 422).await;
    // raw: stage missing or out of range
    let res = app
        .post_raw_evidence(&brief, "kind=log", "text/plain", b"x".to_vec())
        .await;
    assert_eq!(problem(res, 422).await["errors"][0]["field"], "stage");
    let res = app
        .post_raw_evidence(&brief, "kind=log&stage=6", "text/plain", b"x".to_vec())
        .await;
    problem(res, 422).await;
    let res = app
        .post_raw_evidence(
            &brief,
            "kind=log&stage=1&collected_at=yesterday",
            "text/plain",
            b"x".to_vec(),
        )
        .await;
    assert_eq!(problem(res, 422).await["errors"][0]["field"], "collected_at");
    // a broken multipart body
    let res = app
        .client
        .post(app.url(&path))
        .header("content-type", "multipart/form-data; boundary=zzz")
        .body("--zzz\r\nnonsense")
        .send()
        .await
        .unwrap();
    problem(res, 400).await;
    // unknown brief, unknown or malformed evidence id
    let missing = uuid::Uuid::now_v7();
    let res = app
        .post_raw_evidence(&missing.to_string(), "kind=log&stage=1", "text/plain", b"x".to_vec())
        .await;
    problem(res, 404).await;
    problem(app.get(&format!("/api/v1/briefs/{missing}/evidence")).await, 404).await;
    problem(app.get(&format!("/api/v1/evidence/{missing}")).await, 404).await;
    problem(app.get(&format!("/api/v1/evidence/{missing}/raw")).await, 404).await;
    problem(app.get("/api/v1/evidence/not-a-uuid").await, 404).await;
    problem(app.get(&format!("{path}?cursor=garbage")).await, 422).await;
    problem(app.get(&format!("{path}?limit=abc")).await, 400).await;
    assert_eq!(evidence_rows(&app).await, 0);
}

#[tokio::test]
async fn list_is_newest_first_and_cursor_paginated() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let other = app.brief_id().await;
    let mut ids = Vec::new();
    for i in 0..5 {
        let body = created(
            app.post_raw_evidence(
                &brief,
                &format!("kind=log&stage={}", i % 5 + 1),
                "text/plain",
                vec![b'x'; i + 1],
            )
            .await,
        )
        .await;
        ids.push(body["id"].as_str().unwrap().to_owned());
    }
    created(
        app.post_raw_evidence(&other, "kind=log&stage=1", "text/plain", b"other".to_vec())
            .await,
    )
    .await;
    ids.reverse();

    let mut seen = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    loop {
        let q = match &cursor {
            Some(c) => format!("?limit=2&cursor={c}"),
            None => "?limit=2".to_owned(),
        };
        let page: Value = app
            .get(&format!("/api/v1/briefs/{brief}/evidence{q}"))
            .await
            .json()
            .await
            .unwrap();
        pages += 1;
        for item in page["items"].as_array().unwrap() {
            assert!(item.get("metrics").is_none());
            seen.push(item["id"].as_str().unwrap().to_owned());
        }
        match page["next_cursor"].as_str() {
            Some(c) => cursor = Some(c.to_owned()),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    assert_eq!(seen, ids);
    let all: Value = app
        .get(&format!("/api/v1/briefs/{brief}/evidence"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 5);
    assert!(all["next_cursor"].is_null());
}

#[tokio::test]
async fn metrics_endpoint_exposes_requests_ingest_and_pool() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    created(
        app.post_raw_evidence(
            &brief,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            fixture("nvidia-smi-list/driver-failure.txt"),
        )
        .await,
    )
    .await;
    app.get("/no/such/page").await;
    let res = app.get("/metrics").await;
    assert_eq!(res.status(), 200);
    assert!(res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = res.text().await.unwrap();
    let has = |needle: &str| assert!(text.contains(needle), "missing {needle} in:\n{text}");
    has(r#"rentcheck_http_requests_total{method="POST",route="/api/v1/briefs/{id}/evidence",status="2xx"} 1"#);
    has(r#"rentcheck_http_requests_total{method="POST",route="/api/v1/briefs",status="2xx"} 1"#);
    has(r#"rentcheck_http_requests_total{method="GET",route="unmatched",status="4xx"} 1"#);
    has(
        r#"rentcheck_http_request_duration_seconds_bucket{method="POST",route="/api/v1/briefs/{id}/evidence",status="2xx",le="+Inf"} 1"#,
    );
    let size = fixture("nvidia-smi-list/driver-failure.txt").len();
    has(&format!(
        r#"rentcheck_evidence_ingest_bytes_total{{kind="nvidia-smi-list"}} {size}"#
    ));
    has(r#"rentcheck_evidence_parse_failures_total{kind="nvidia-smi-list"} 1"#);
    has(r#"rentcheck_db_pool_connections{state="in_use"}"#);
    has(r#"rentcheck_db_pool_connections{state="idle"}"#);
}

/// What `nvidia-smi -L | curl … --data-binary @-` sends where nvidia-smi is missing: nothing. In
/// every form the upload is refused with the reason, and nothing is stored (no row, no key, no
/// "failed" item on the dashboard).
#[tokio::test]
async fn an_empty_upload_in_any_form_is_422_and_stores_nothing() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence");
    let said = "empty evidence: the command produced no output";
    let assert_refused = |body: Value, form: &str| {
        assert_eq!(body["status"], 422, "{form}: {body}");
        assert_eq!(body["detail"], said, "{form}: {body}");
    };

    // A raw body, as the curl line sends it, with an Idempotency-Key.
    let res = app
        .client
        .post(app.url(&format!("{path}?kind=nvidia-smi-list&stage=1")))
        .header("content-type", "application/octet-stream")
        .header("idempotency-key", "node-1-gpus-2026120112")
        .body(Vec::<u8>::new())
        .send()
        .await
        .unwrap();
    assert_refused(problem(res, 422).await, "raw");
    // Multipart with an empty file part.
    let form = reqwest::multipart::Form::new()
        .text("kind", "auto")
        .text("stage", "1")
        .part(
            "file",
            reqwest::multipart::Part::bytes(Vec::new()).file_name("gpus.txt"),
        );
    let res = app.client.post(app.url(&path)).multipart(form).send().await.unwrap();
    assert_refused(problem(res, 422).await, "multipart");
    // A JSON envelope whose content is empty, as text and as base64.
    for envelope in [
        json!({ "kind": "nvidia-smi-list", "stage": 1, "content": "" }),
        json!({ "kind": "log", "stage": 1, "content_base64": "" }),
    ] {
        assert_refused(problem(app.post_json(&path, &envelope).await, 422).await, "envelope");
    }
    // One empty item of a batch is refused on its own; the other is stored.
    let batch = app
        .post_json(
            &format!("{path}/batch"),
            &json!({ "items": [
                { "kind": "nvidia-smi-list", "stage": 1, "content": "", "idempotency_key": "empty-1" },
                { "kind": "nvidia-smi-list", "stage": 1,
                  "content": String::from_utf8(fixture("nvidia-smi-list/h200-x8.txt")).unwrap() },
            ] }),
        )
        .await;
    assert_eq!(batch.status(), 207);
    let answers: Value = batch.json().await.unwrap();
    assert_eq!(answers["items"][0]["status"], 422, "{answers}");
    assert_eq!(answers["items"][0]["problem"]["detail"], said, "{answers}");
    assert_eq!(answers["items"][1]["status"], 201, "{answers}");

    assert_eq!(
        evidence_rows(&app).await,
        1,
        "only the batch's non-empty item is stored"
    );
    assert_eq!(
        app.count("idempotency_keys").await,
        0,
        "no key is kept for a refused upload"
    );
    // The same key with real output is then a first upload, not a replay of the refusal.
    let res = app
        .client
        .post(app.url(&format!("{path}?kind=nvidia-smi-list&stage=1")))
        .header("content-type", "text/plain")
        .header("idempotency-key", "node-1-gpus-2026120112")
        .body(fixture("nvidia-smi-list/h200-x8.txt"))
        .send()
        .await
        .unwrap();
    created(res).await;
}
