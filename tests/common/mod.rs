//! Test helpers: a real server on a free port over a fresh PostgreSQL database per test.
#![allow(dead_code)]

use std::str::FromStr;

use rentcheck::{config::AppConfig, db, http, state::AppState};
use serde_json::{json, Value};
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, Executor, PgConnection, PgPool,
};

/// The server PostgreSQL tests create their databases on.
pub fn admin_url() -> String {
    std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned())
}

pub struct TestApp {
    pub base: String,
    pub client: reqwest::Client,
    pub pool: PgPool,
    db_name: String,
}

/// Creates a fresh database, migrates it, and serves the app on 127.0.0.1:0.
pub async fn spawn_app() -> TestApp {
    spawn_app_with(AppConfig::default()).await
}

pub async fn spawn_app_with(config: AppConfig) -> TestApp {
    let db_name = format!("rentcheck_test_{}", uuid::Uuid::new_v4().simple());
    let admin = PgConnectOptions::from_str(&admin_url()).expect("TEST_DATABASE_URL");
    let mut conn = PgConnection::connect_with(&admin)
        .await
        .expect("PostgreSQL must answer at TEST_DATABASE_URL (default postgres://postgres@127.0.0.1:5432/postgres)");
    conn.execute(format!("CREATE DATABASE {db_name}").as_str())
        .await
        .unwrap();
    conn.close().await.unwrap();
    let pool = PgPoolOptions::new()
        .max_connections(5)
        .connect_with(admin.database(&db_name))
        .await
        .unwrap();
    db::migrate(&pool).await.unwrap();

    // Bind first, then spawn: the port is open before any request is sent.
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = http::app(AppState::new(pool.clone(), config));
    tokio::spawn(http::serve(listener, router, std::future::pending()));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    TestApp {
        base,
        client,
        pool,
        db_name,
    }
}

impl TestApp {
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    pub async fn post_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client.post(self.url(path)).json(body).send().await.unwrap()
    }

    pub async fn put_json(&self, path: &str, body: &Value) -> reqwest::Response {
        self.client.put(self.url(path)).json(body).send().await.unwrap()
    }

    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.client.get(self.url(path)).send().await.unwrap()
    }

    pub async fn post_form(&self, path: &str, fields: &[(&str, &str)]) -> reqwest::Response {
        self.client.post(self.url(path)).form(fields).send().await.unwrap()
    }

    pub async fn count(&self, table: &str) -> i64 {
        sqlx::query_scalar(&format!("SELECT count(*) FROM {table}"))
            .fetch_one(&self.pool)
            .await
            .unwrap()
    }

    /// Creates a valid brief through the API and returns its JSON.
    pub async fn create_brief(&self, overrides: Value) -> Value {
        let mut body = valid_brief();
        merge(&mut body, overrides);
        let res = self.post_json("/api/v1/briefs", &body).await;
        assert_eq!(res.status(), 201, "creating a brief");
        res.json().await.unwrap()
    }
}

impl Drop for TestApp {
    fn drop(&mut self) {
        let db_name = std::mem::take(&mut self.db_name);
        // Drop runs inside the test's runtime, which is blocked here; the cleanup gets a runtime of its own
        // on another thread. FORCE ends the server's connections, which belong to the blocked runtime.
        let _ = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                if let Ok(opts) = PgConnectOptions::from_str(&admin_url()) {
                    if let Ok(mut conn) = PgConnection::connect_with(&opts).await {
                        let _ = conn
                            .execute(format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)").as_str())
                            .await;
                    }
                }
            });
        })
        .join();
    }
}

/// A complete, valid brief: Llama 3.1 70B served in bf16, 8k context, 16 sequences.
pub fn valid_brief() -> Value {
    json!({
        "name": "Chat assistant 70B",
        "owner": "ml-infra@example.com",
        "workload_kind": "realtime-inference",
        "model_name": "meta-llama/Llama-3.1-70B-Instruct",
        "model_revision": "main",
        "params_b": 70.55,
        "precision": "bf16",
        "context_length": 8192,
        "concurrency": 16,
        "num_layers": 80,
        "num_kv_heads": 8,
        "head_dim": 128,
        "targets": { "ttft_p95_ms": 500, "itl_p95_ms": 50, "error_rate": 0.01 },
        "data_boundary": "private-network",
        "needs_host_control": false,
        "only_needs_model_output": false,
        "persist": ["weights", "outputs"],
        "restore_plan": "Pull weights from the bucket; restart the pod.",
        "fallback_plan": "Route to the managed API at reduced quality.",
        "max_cost_per_job": "0.004",
        "currency": "USD",
        "cost_unit": "request",
        "allocation_boundary": "vm"
    })
}

pub fn merge(base: &mut Value, overrides: Value) {
    if let (Value::Object(b), Value::Object(o)) = (base, overrides) {
        for (k, v) in o {
            b.insert(k, v);
        }
    }
}

/// A file from tests/fixtures/.
pub fn fixture(rel: &str) -> Vec<u8> {
    let p = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

impl TestApp {
    /// Creates a valid brief and returns its id.
    pub async fn brief_id(&self) -> String {
        self.create_brief(json!({})).await["id"].as_str().unwrap().to_owned()
    }

    /// Uploads `bytes` as a raw body with `?kind=&stage=` (plus any extra query).
    pub async fn post_raw_evidence(
        &self,
        brief: &str,
        query: &str,
        content_type: &str,
        bytes: Vec<u8>,
    ) -> reqwest::Response {
        self.client
            .post(self.url(&format!("/api/v1/briefs/{brief}/evidence?{query}")))
            .header("content-type", content_type)
            .body(bytes)
            .send()
            .await
            .unwrap()
    }
}
