//! The briefs JSON API over HTTP against a real PostgreSQL.

use crate::common;

use common::{merge, spawn_app, valid_brief};
use serde_json::{json, Value};

#[tokio::test]
async fn create_then_read_back_a_brief_with_its_sizing() {
    let app = spawn_app().await;
    let res = app.post_json("/api/v1/briefs", &valid_brief()).await;
    assert_eq!(res.status(), 201);
    let location = res.headers()["location"].to_str().unwrap().to_owned();
    let created: Value = res.json().await.unwrap();
    let id = created["id"].as_str().unwrap();
    assert_eq!(location, format!("/api/v1/briefs/{id}"));
    assert_eq!(created["name"], "Chat assistant 70B");
    assert_eq!(
        created["max_cost_per_job"], "0.004",
        "money is a decimal string, unpadded"
    );
    assert_eq!(created["targets"]["ttft_p95_ms"], 500.0);
    assert_eq!(created["persist"], json!(["weights", "outputs"]));
    assert_eq!(created["status"], "draft");
    for key in [
        "weights_gib",
        "kv_cache_gib",
        "overhead_gib",
        "total_gib",
        "options",
        "billing_advice",
    ] {
        assert!(created["sizing"].get(key).is_some(), "sizing has {key}");
    }

    let fetched: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    assert_eq!(fetched["owner"], "ml-infra@example.com");
    assert_eq!(fetched["sizing"], created["sizing"]);

    let sizing = app.get(&format!("/api/v1/briefs/{id}/sizing")).await;
    assert_eq!(sizing.status(), 200);
    let sizing: Value = sizing.json().await.unwrap();
    assert_eq!(sizing, created["sizing"]);
}

#[tokio::test]
async fn list_is_newest_first() {
    let app = spawn_app().await;
    app.create_brief(json!({ "name": "first" })).await;
    app.create_brief(json!({ "name": "second" })).await;
    let list: Value = app.get("/api/v1/briefs").await.json().await.unwrap();
    let names: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["second", "first"]);
}

#[tokio::test]
async fn put_replaces_the_brief_and_recomputes_sizing() {
    let app = spawn_app().await;
    let created = app.create_brief(json!({})).await;
    let id = created["id"].as_str().unwrap();
    // A client may send back what it read, read-only fields included.
    let mut body = created.clone();
    merge(&mut body, json!({ "concurrency": 64, "name": "Bigger batch" }));
    let res = app.put_json(&format!("/api/v1/briefs/{id}"), &body).await;
    assert_eq!(res.status(), 200);
    let updated: Value = res.json().await.unwrap();
    assert_eq!(updated["name"], "Bigger batch");
    assert_eq!(updated["concurrency"], 64);
    let kv_before = created["sizing"]["kv_cache_gib"].as_f64().unwrap();
    let kv_after = updated["sizing"]["kv_cache_gib"].as_f64().unwrap();
    assert!(
        kv_after > kv_before * 3.9,
        "4× the sequences need ~4× the KV cache: {kv_before} → {kv_after}"
    );
}

async fn problem(res: reqwest::Response, status: u16) -> Value {
    assert_eq!(res.status(), status);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["status"], status);
    assert!(body["title"].is_string() && body["detail"].is_string() && body["type"].is_string());
    body
}

fn field_errors(problem: &Value) -> Vec<String> {
    problem["errors"]
        .as_array()
        .map(|a| a.iter().map(|e| e["field"].as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn malformed_json_is_400_problem() {
    let app = spawn_app().await;
    let res = app
        .client
        .post(app.url("/api/v1/briefs"))
        .header("content-type", "application/json")
        .body("{\"name\": ")
        .send()
        .await
        .unwrap();
    let p = problem(res, 400).await;
    assert!(p["detail"].as_str().unwrap().contains("malformed JSON"));

    let res = app
        .client
        .post(app.url("/api/v1/briefs"))
        .header("content-type", "text/plain")
        .body("name=x")
        .send()
        .await
        .unwrap();
    problem(res, 415).await;

    let res = app.post_json("/api/v1/briefs", &json!([1, 2])).await;
    problem(res, 400).await;
    assert_eq!(app.count("briefs").await, 0);
}

#[tokio::test]
async fn invalid_fields_are_422_with_every_field_named_and_nothing_stored() {
    let app = spawn_app().await;
    let cases: Vec<(Value, &str)> = vec![
        (json!({ "params_b": "seventy" }), "params_b"),
        (json!({ "params_b": -1 }), "params_b"),
        (json!({ "params_b": 10001 }), "params_b"),
        (json!({ "context_length": 10_000_001 }), "context_length"),
        (json!({ "context_length": 8192.5 }), "context_length"),
        (json!({ "concurrency": 0 }), "concurrency"),
        (json!({ "concurrency": 100_001 }), "concurrency"),
        (json!({ "precision": "fp64" }), "precision"),
        (json!({ "workload_kind": "mining" }), "workload_kind"),
        (json!({ "data_boundary": true }), "data_boundary"),
        (json!({ "needs_host_control": "maybe" }), "needs_host_control"),
        (json!({ "max_cost_per_job": 0.25 }), "max_cost_per_job"),
        (json!({ "max_cost_per_job": "-1" }), "max_cost_per_job"),
        (json!({ "currency": "dollars" }), "currency"),
        (json!({ "targets": { "ttft_p95_ms": -5 } }), "targets.ttft_p95_ms"),
        (json!({ "targets": { "error_rate": 2 } }), "targets.error_rate"),
        (json!({ "targets": { "latency": 2 } }), "targets.latency"),
        (json!({ "name": "x".repeat(1_000) }), "name"),
        (json!({ "restore_plan": "y".repeat(1_000_000) }), "restore_plan"),
        (json!({ "name": null }), "name"),
        (json!({ "catalog_model": "acme/unknown-model" }), "catalog_model"),
        (json!({ "trial_gpu_count": 3 }), "trial_gpu_count"),
        (json!({ "persist": "weights" }), "persist"),
        (json!({ "colour": "blue" }), "colour"),
    ];
    for (overrides, field) in cases {
        let mut body = valid_brief();
        merge(&mut body, overrides.clone());
        let res = app.post_json("/api/v1/briefs", &body).await;
        let p = problem(res, 422).await;
        assert!(
            field_errors(&p).contains(&field.to_owned()),
            "{overrides} should fail on {field}: {p}"
        );
    }
    // Several bad fields are all reported at once.
    let mut body = valid_brief();
    merge(
        &mut body,
        json!({ "params_b": 0, "precision": "fp4", "concurrency": -3 }),
    );
    let p = problem(app.post_json("/api/v1/briefs", &body).await, 422).await;
    let fields = field_errors(&p);
    for f in ["params_b", "precision", "concurrency"] {
        assert!(fields.contains(&f.to_owned()), "{f} in {fields:?}");
    }
    assert_eq!(app.count("briefs").await, 0, "nothing partial is stored");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let app = spawn_app().await;
    let mut body = valid_brief();
    merge(&mut body, json!({ "k8s_manifest": "z".repeat(2 * 1024 * 1024) }));
    let res = app.post_json("/api/v1/briefs", &body).await;
    problem(res, 413).await;
    assert_eq!(app.count("briefs").await, 0);
}

#[tokio::test]
async fn unknown_brief_ids_are_404_problems() {
    let app = spawn_app().await;
    for path in [
        "/api/v1/briefs/0190f5c2-0000-7000-8000-000000000000",
        "/api/v1/briefs/not-a-uuid",
        "/api/v1/briefs/0190f5c2-0000-7000-8000-000000000000/sizing",
    ] {
        problem(app.get(path).await, 404).await;
    }
    let res = app
        .put_json("/api/v1/briefs/0190f5c2-0000-7000-8000-000000000000", &valid_brief())
        .await;
    problem(res, 404).await;
    problem(app.get("/api/v1/nothing-here").await, 404).await;
}

#[tokio::test]
async fn sql_looking_text_is_stored_verbatim() {
    let app = spawn_app().await;
    let name = "Robert'); DROP TABLE briefs; -- \"quoted\"";
    let created = app.create_brief(json!({ "name": name })).await;
    let id = created["id"].as_str().unwrap();
    let fetched: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    assert_eq!(fetched["name"], name);
    assert_eq!(app.count("briefs").await, 1);
}

#[tokio::test]
async fn health_and_readiness() {
    let app = spawn_app().await;
    assert_eq!(app.get("/healthz").await.status(), 200);
    let ready = app.get("/readyz").await;
    assert_eq!(ready.status(), 200);
    let body: Value = ready.json().await.unwrap();
    assert_eq!(body["status"], "ready");
    assert!(app.get("/healthz").await.headers().contains_key("x-request-id"));
}
