//! Raw evidence in an object store (`RENTCHECK_EVIDENCE_STORE`): the bytes go to the store under
//! their sha256 before the row commits, the row keeps only the object's name, and every reader
//! (download, page preview, a vLLM window's `before` scrape) gets the same bytes back. Tested with
//! the `file://` store, which goes through the same `object_store` interface as S3.

use crate::common;

use common::{fixture, spawn_app_with_store, TestApp};
use rentcheck::{auth::Role, config::AppConfig, evidence::model::sha256_hex, evidence_store::EvidenceStore};
use serde_json::{json, Value};

async fn spawn_app_storing_in(dir: &std::path::Path) -> TestApp {
    let setting = format!("file://{}", dir.display());
    spawn_app_with_store(
        AppConfig::default(),
        EvidenceStore::from_setting(Some(&setting)).unwrap(),
    )
    .await
}

async fn created(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

#[tokio::test]
async fn raw_bytes_live_in_the_store_and_read_back_everywhere() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_storing_in(dir.path()).await;
    let brief = app.brief_id().await;

    let bytes = fixture("vllm-metrics/window-before.txt");
    let before = created(
        app.post_raw_evidence(
            &brief,
            "kind=vllm-metrics&stage=3&label.window=w1&label.phase=before",
            "text/plain; version=0.0.4",
            bytes.clone(),
        )
        .await,
    )
    .await;
    let id = before["id"].as_str().unwrap();
    let sha = sha256_hex(&bytes);

    // The object holds the bytes; the row holds the name and the size, not the bytes.
    assert_eq!(std::fs::read(dir.path().join("sha256").join(&sha)).unwrap(), bytes);
    let (raw, object, size): (Option<Vec<u8>>, Option<String>, i64) =
        sqlx::query_as("SELECT raw, raw_object, size_bytes FROM evidence WHERE id = $1::uuid")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((raw, object.as_deref()), (None, Some(format!("sha256/{sha}").as_str())));
    assert_eq!(size, bytes.len() as i64);

    // Download: the exact bytes.
    let download = app.get(&format!("/api/v1/evidence/{id}/raw")).await;
    assert_eq!(download.status(), 200);
    assert_eq!(download.bytes().await.unwrap().to_vec(), bytes);

    // The evidence page previews the text, read from the store.
    let viewer = app.login(Role::Engineer).await;
    let page = viewer
        .get(app.url(&format!("/evidence/{id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("vllm:time_to_first_token_seconds_bucket"), "{page}");

    // The `after` scrape of the window reads its `before` from the store: windowed figures.
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
    assert_eq!(after["metrics"]["serving.window"], true);
    assert_eq!(after["metrics"]["serving.requests_total"], json!(20.0));

    // Bytes that are not UTF-8 come back exactly, and the page knows them for binary.
    let binary = b"log line\n\xff\xfe\x00 end\n".to_vec();
    let log = created(
        app.post_raw_evidence(&brief, "kind=log&stage=1", "application/octet-stream", binary.clone())
            .await,
    )
    .await;
    let log_id = log["id"].as_str().unwrap();
    let download = app.get(&format!("/api/v1/evidence/{log_id}/raw")).await;
    assert_eq!(download.bytes().await.unwrap().to_vec(), binary);
    let page = viewer
        .get(app.url(&format!("/evidence/{log_id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("This file is not UTF-8 text"), "{page}");

    // An object deleted from the bucket behind rentcheck's back is an error of its own, not a 503
    // that a client would retry forever.
    std::fs::remove_file(dir.path().join("sha256").join(sha256_hex(&binary))).unwrap();
    let gone = app.get(&format!("/api/v1/evidence/{log_id}/raw")).await;
    assert_eq!(gone.status(), 500);
}

#[tokio::test]
async fn a_retried_upload_is_one_row_and_one_object() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_storing_in(dir.path()).await;
    let brief = app.brief_id().await;
    let body = json!({"kind": "metrics", "stage": 3, "data": {"metrics": {"serving.ttft_p95_ms": 120}}});
    for expected in [201, 200] {
        let response = app
            .client
            .post(app.url(&format!("/api/v1/briefs/{brief}/evidence")))
            .header("Idempotency-Key", "upload-1")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), expected);
    }
    assert_eq!(app.count("evidence").await, 1);
    assert_eq!(std::fs::read_dir(dir.path().join("sha256")).unwrap().count(), 1);
}

#[tokio::test]
async fn an_unwritable_store_answers_503_and_stores_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let app = spawn_app_storing_in(dir.path()).await;
    let brief = app.brief_id().await;
    // The store's directory turns into a file: every write fails, as when a bucket is unreachable.
    std::fs::remove_dir_all(dir.path()).unwrap();
    std::fs::write(dir.path(), b"not a directory").unwrap();

    let response = app
        .post_raw_evidence(&brief, "kind=vllm-metrics&stage=3", "text/plain", b"x 1\n".to_vec())
        .await;
    assert_eq!(response.status(), 503);
    assert_eq!(response.headers()["retry-after"], "5");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        "the evidence store is unavailable; try again shortly"
    );
    assert_eq!(app.count("evidence").await, 0);
    std::fs::remove_file(dir.path()).unwrap();
}
