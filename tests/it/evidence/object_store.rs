//! Raw evidence in an object store (`RENTCHECK_EVIDENCE_STORE`): the bytes go to the store under
//! their sha256 before the row commits, the row keeps only the object's name, and every reader
//! (download, page preview, a vLLM window's `before` scrape) gets the same bytes back. Each test
//! runs twice: on a `file://` directory and on a real S3-protocol server (moto, `common::s3`), the
//! latter with the least-privilege key of docs/evidence-bucket-policy.json, path-style requests to
//! a plain-HTTP endpoint, as an S3-compatible deployment (MinIO, Ceph) is configured.

use crate::common;

use std::sync::Arc;

use common::{fixture, s3, spawn_app_with_store, TestApp};
use object_store::{local::LocalFileSystem, path::Path, ObjectStore, ObjectStoreExt};
use rentcheck::{auth::Role, config::AppConfig, evidence::model::sha256_hex, evidence_store::EvidenceStore};
use serde_json::{json, Value};

/// Where a test's objects go, and a way to look at them behind rentcheck's back.
enum Backend {
    File(tempfile::TempDir),
    /// A prefix of its own in the shared test bucket.
    S3(String),
}

impl Backend {
    fn file() -> Self {
        Backend::File(tempfile::tempdir().unwrap())
    }

    fn s3() -> Self {
        Backend::S3(format!("test-{}", uuid::Uuid::new_v4().simple()))
    }

    fn store(&self) -> EvidenceStore {
        match self {
            Backend::File(dir) => {
                EvidenceStore::from_setting(Some(&format!("file://{}", dir.path().display()))).unwrap()
            }
            Backend::S3(prefix) => s3::server().store(prefix),
        }
    }

    /// The objects as an operator sees them: the directory, or the bucket with an admin key.
    fn view(&self) -> Arc<dyn ObjectStore> {
        match self {
            Backend::File(dir) => Arc::new(LocalFileSystem::new_with_prefix(dir.path()).unwrap()),
            Backend::S3(prefix) => s3::server().admin_view(prefix),
        }
    }

    /// Every object's name (rentcheck writes only `sha256/<hex>`), sorted.
    async fn names(&self) -> Vec<String> {
        match self {
            Backend::File(dir) => {
                let mut names: Vec<String> = std::fs::read_dir(dir.path().join("sha256"))
                    .unwrap()
                    .map(|e| format!("sha256/{}", e.unwrap().file_name().to_string_lossy()))
                    .collect();
                names.sort();
                names
            }
            Backend::S3(prefix) => s3::server().object_names(prefix).await,
        }
    }

    async fn object(&self, name: &str) -> Vec<u8> {
        let got = self.view().get(&Path::from(name)).await.unwrap();
        got.bytes().await.unwrap().to_vec()
    }

    /// A store of this kind that cannot take a write: a directory that became a file, or an S3
    /// endpoint nobody listens on (the server stopped).
    fn unreachable(&self) -> EvidenceStore {
        match self {
            Backend::File(dir) => {
                let path = dir.path().join("gone");
                let store = EvidenceStore::from_setting(Some(&format!("file://{}", path.display()))).unwrap();
                std::fs::remove_dir_all(&path).unwrap();
                std::fs::write(&path, b"not a directory").unwrap();
                store
            }
            Backend::S3(prefix) => {
                let server = s3::server();
                let closed = std::net::TcpListener::bind("127.0.0.1:0")
                    .unwrap()
                    .local_addr()
                    .unwrap();
                let vars = server.vars("AKIDEXAMPLE", "secret").into_iter().map(|(k, v)| {
                    if k == "AWS_ENDPOINT" {
                        (k, format!("http://{closed}"))
                    } else {
                        (k, v)
                    }
                });
                EvidenceStore::from_setting_and_vars(Some(&server.setting(prefix)), vars).unwrap()
            }
        }
    }
}

async fn created(response: reqwest::Response) -> Value {
    assert_eq!(response.status(), 201);
    response.json().await.unwrap()
}

async fn raw_bytes_live_in_the_store_and_read_back_everywhere(backend: Backend) {
    let app = spawn_app_with_store(AppConfig::default(), backend.store()).await;
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
    let name = format!("sha256/{}", sha256_hex(&bytes));

    // The object holds the bytes; the row holds the name and the size, not the bytes.
    assert_eq!(backend.object(&name).await, bytes);
    let (raw, object, size): (Option<Vec<u8>>, Option<String>, i64) =
        sqlx::query_as("SELECT raw, raw_object, size_bytes FROM evidence WHERE id = $1::uuid")
            .bind(id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((raw, object.as_deref()), (None, Some(name.as_str())));
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

    // An object deleted from the bucket behind rentcheck's back is an error of its own (logged
    // with its name), not a 503 that a client would retry forever.
    let binary_name = format!("sha256/{}", sha256_hex(&binary));
    backend.view().delete(&Path::from(binary_name.as_str())).await.unwrap();
    let gone = app.get(&format!("/api/v1/evidence/{log_id}/raw")).await;
    assert_eq!(gone.status(), 500);
    let problem: Value = gone.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("request id"),
        "a 500 names the request id under which its cause is logged: {problem}"
    );
}

#[tokio::test]
async fn file_store_keeps_the_bytes_and_every_reader_gets_them_back() {
    raw_bytes_live_in_the_store_and_read_back_everywhere(Backend::file()).await;
}

#[tokio::test]
async fn s3_store_keeps_the_bytes_and_every_reader_gets_them_back() {
    raw_bytes_live_in_the_store_and_read_back_everywhere(Backend::s3()).await;
}

async fn a_retried_upload_is_one_row_and_one_object(backend: Backend) {
    let app = spawn_app_with_store(AppConfig::default(), backend.store()).await;
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
    assert_eq!(backend.names().await.len(), 1);
}

#[tokio::test]
async fn file_store_a_retried_upload_is_one_row_and_one_object() {
    a_retried_upload_is_one_row_and_one_object(Backend::file()).await;
}

#[tokio::test]
async fn s3_store_a_retried_upload_is_one_row_and_one_object() {
    a_retried_upload_is_one_row_and_one_object(Backend::s3()).await;
}

async fn an_unreachable_store_answers_503_and_stores_nothing(backend: Backend) {
    let app = spawn_app_with_store(AppConfig::default(), backend.unreachable()).await;
    let brief = app.brief_id().await;
    let started = std::time::Instant::now();
    let response = app
        .post_raw_evidence(&brief, "kind=vllm-metrics&stage=3", "text/plain", b"x 1\n".to_vec())
        .await;
    assert_eq!(response.status(), 503);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(15),
        "retries are bounded: answered in {:?}",
        started.elapsed()
    );
    assert_eq!(response.headers()["retry-after"], "5");
    let problem: Value = response.json().await.unwrap();
    assert_eq!(
        problem["detail"],
        "the evidence store is unavailable; try again shortly"
    );
    assert_eq!(app.count("evidence").await, 0);
}

#[tokio::test]
async fn file_store_unwritable_answers_503_and_stores_nothing() {
    an_unreachable_store_answers_503_and_stores_nothing(Backend::file()).await;
}

#[tokio::test]
async fn s3_store_down_answers_503_and_stores_nothing() {
    an_unreachable_store_answers_503_and_stores_nothing(Backend::s3()).await;
}

/// A 12 MiB log: over the multipart threshold, under the default upload cap.
fn large_log() -> Vec<u8> {
    let mut log = b"first line of a large log\n".to_vec();
    let mut n = 0u64;
    while log.len() < 12 * 1024 * 1024 - 64 {
        log.extend_from_slice(format!("{n:016x} step ok loss=0.{:04}\n", n % 9973).as_bytes());
        n += 1;
    }
    log.extend_from_slice(b"LAST LINE OF THE LOG\n");
    log
}

async fn a_large_upload_goes_up_in_parts_and_reads_back(backend: &Backend) -> String {
    let app = spawn_app_with_store(AppConfig::default(), backend.store()).await;
    let brief = app.brief_id().await;
    let log = large_log();
    assert!(log.len() > rentcheck::evidence_store::MULTIPART_THRESHOLD);
    let item = created(
        app.post_raw_evidence(&brief, "kind=log&stage=1", "text/plain", log.clone())
            .await,
    )
    .await;
    let id = item["id"].as_str().unwrap();
    let name = format!("sha256/{}", sha256_hex(&log));
    assert_eq!(backend.names().await, vec![name.clone()]);
    assert!(backend.object(&name).await == log, "the object is byte-exact");

    let download = app.get(&format!("/api/v1/evidence/{id}/raw")).await;
    assert_eq!(download.status(), 200);
    assert!(download.bytes().await.unwrap() == log, "the download is byte-exact");

    // The page reads only the first 256 KiB (a range read) and says so.
    let viewer = app.login(Role::Engineer).await;
    let page = viewer
        .get(app.url(&format!("/evidence/{id}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(page.contains("first line of a large log"));
    assert!(page.contains("Showing the first 256 KiB"));
    assert!(!page.contains("LAST LINE OF THE LOG"));
    name
}

#[tokio::test]
async fn file_store_a_large_upload_goes_up_in_parts_and_reads_back() {
    a_large_upload_goes_up_in_parts_and_reads_back(&Backend::file()).await;
}

#[tokio::test]
async fn s3_store_a_large_upload_goes_up_in_parts_and_reads_back() {
    let backend = Backend::s3();
    let name = a_large_upload_goes_up_in_parts_and_reads_back(&backend).await;
    // S3 names a multipart object's ETag "<hash>-<parts>": 12 MiB went up as 5 + 5 + 2 MiB.
    let meta = backend.view().head(&Path::from(name.as_str())).await.unwrap();
    let etag = meta.e_tag.unwrap();
    assert!(etag.trim_matches('"').ends_with("-3"), "ETag {etag}");
}

#[tokio::test]
async fn s3_store_with_wrong_credentials_stops_the_start_and_fails_uploads_plainly() {
    let server = s3::server();
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());

    // At start-up: the check that `rentcheck serve` runs says what is wrong.
    server.store(&prefix).check().await.unwrap();
    let refused = server
        .store_with_wrong_secret(&prefix)
        .check()
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("refused rentcheck's credentials"), "{refused}");
    assert!(refused.contains("AWS_SECRET_ACCESS_KEY"), "{refused}");
    let no_bucket =
        EvidenceStore::from_setting_and_vars(Some("s3://no-such-bucket-for-rentcheck/x"), server.admin_vars())
            .unwrap()
            .check()
            .await
            .unwrap_err()
            .to_string();
    assert!(no_bucket.contains("has no such bucket"), "{no_bucket}");

    // The real binary stops before it touches any database, or writes anything into its data dir
    // (the default one here: XDG_DATA_HOME points it into a temporary folder, even for root).
    let data_home = tempfile::tempdir().unwrap();
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_rentcheck"));
    command
        .arg("serve")
        .env("XDG_DATA_HOME", data_home.path())
        .env_remove("RENTCHECK_DATA_DIR")
        .env("RENTCHECK_EVIDENCE_STORE", server.setting(&prefix))
        .env("RENTCHECK_ADDR", "127.0.0.1:0")
        .env("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none")
        .env("RUST_LOG", "error");
    for (k, v) in server.vars("AKIDNOSUCHKEY", "secret") {
        command.env(k, v);
    }
    let output = command.output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("refused rentcheck's credentials"), "{stderr}");
    assert!(
        std::fs::read_dir(data_home.path()).unwrap().next().is_none(),
        "a start refused for its evidence store writes no data dir and no signing secret"
    );

    // A server that started anyway (the key was revoked later) answers an upload with a 500 that
    // is logged, not a 503 to retry forever, and stores nothing.
    let app: TestApp = spawn_app_with_store(AppConfig::default(), server.store_with_wrong_secret(&prefix)).await;
    let brief = app.brief_id().await;
    let response = app
        .post_raw_evidence(&brief, "kind=log&stage=1", "text/plain", b"hello\n".to_vec())
        .await;
    assert_eq!(response.status(), 500);
    assert_eq!(app.count("evidence").await, 0);
}
