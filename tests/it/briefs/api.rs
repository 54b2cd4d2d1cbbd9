//! The briefs JSON API over HTTP against a real PostgreSQL.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::spawn_app;
use serde_json::{json, Value};

#[tokio::test]
async fn create_then_read_back_a_brief_with_its_sizing() {
    let app = spawn_app().await;
    let res = BriefBuilder::new().post(&app).await;
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
    // `status` is where the review stands (it was "draft" whatever happened).
    assert_eq!(created["status"], "awaiting-evidence");
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

    // Once evidence came the review waits for a manager, and the brief, its replacement and the
    // list say so alike.
    let res = app
        .post_raw_evidence(
            id,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n".to_vec(),
        )
        .await;
    assert_eq!(res.status(), 201);
    let fetched: Value = app.get(&format!("/api/v1/briefs/{id}")).await.json().await.unwrap();
    assert_eq!(fetched["status"], "needs-approval");
    let mut body = fetched.clone();
    for generated in ["id", "sizing", "status", "created_at", "updated_at"] {
        body.as_object_mut().unwrap().remove(generated);
    }
    let replaced = app.put_json(&format!("/api/v1/briefs/{id}"), &body).await;
    assert_eq!(replaced.status(), 200);
    assert_eq!(replaced.json::<Value>().await.unwrap()["status"], "needs-approval");
    let list: Value = app.get("/api/v1/briefs").await.json().await.unwrap();
    assert_eq!(list["items"][0]["status"], list["items"][0]["summary"]["state"]);
    assert_eq!(list["items"][0]["status"], "needs-approval");
}

#[tokio::test]
async fn list_is_newest_first() {
    let app = spawn_app().await;
    BriefBuilder::new().name("first").create(&app).await;
    BriefBuilder::new().name("second").create(&app).await;
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
    let created = BriefBuilder::new().create(&app).await;
    let id = created["id"].as_str().unwrap();
    // A client may send back what it read, read-only fields included.
    let mut body = created.clone();
    body["concurrency"] = json!(64);
    body["name"] = json!("Bigger batch");
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
    // (the field set, its bad value, the field the 422 names)
    let cases: Vec<(&str, Value, &str)> = vec![
        ("params_b", json!("seventy"), "params_b"),
        ("params_b", json!(-1), "params_b"),
        ("params_b", json!(10001), "params_b"),
        ("context_length", json!(10_000_001), "context_length"),
        ("context_length", json!(8192.5), "context_length"),
        ("concurrency", json!(0), "concurrency"),
        ("concurrency", json!(100_001), "concurrency"),
        ("precision", json!("fp64"), "precision"),
        ("workload_kind", json!("mining"), "workload_kind"),
        ("data_boundary", json!(true), "data_boundary"),
        ("needs_host_control", json!("maybe"), "needs_host_control"),
        ("max_cost_per_job", json!(0.25), "max_cost_per_job"),
        ("max_cost_per_job", json!("-1"), "max_cost_per_job"),
        ("currency", json!("dollars"), "currency"),
        ("targets", json!({ "ttft_p95_ms": -5 }), "targets.ttft_p95_ms"),
        ("targets", json!({ "error_rate": 2 }), "targets.error_rate"),
        ("targets", json!({ "latency": 2 }), "targets.latency"),
        ("name", json!("x".repeat(1_000)), "name"),
        ("restore_plan", json!("y".repeat(1_000_000)), "restore_plan"),
        ("name", json!(null), "name"),
        ("catalog_model", json!("acme/unknown-model"), "catalog_model"),
        ("trial_gpu_count", json!(3), "trial_gpu_count"),
        ("persist", json!("weights"), "persist"),
        ("colour", json!("blue"), "colour"),
    ];
    for (set, value, field) in cases {
        let res = BriefBuilder::new().set(set, value.clone()).post(&app).await;
        let p = problem(res, 422).await;
        assert!(
            field_errors(&p).contains(&field.to_owned()),
            "{set}: {value} should fail on {field}: {p}"
        );
    }
    // Several bad fields are all reported at once.
    let bad = BriefBuilder::new()
        .params_b(0.0)
        .precision("fp4")
        .set("concurrency", -3);
    let p = problem(bad.post(&app).await, 422).await;
    let fields = field_errors(&p);
    for f in ["params_b", "precision", "concurrency"] {
        assert!(fields.contains(&f.to_owned()), "{f} in {fields:?}");
    }
    assert_eq!(app.count("briefs").await, 0, "nothing partial is stored");
}

#[tokio::test]
async fn a_body_over_the_limit_is_413() {
    let app = spawn_app().await;
    let res = BriefBuilder::new()
        .k8s_manifest("z".repeat(2 * 1024 * 1024))
        .post(&app)
        .await;
    let p = problem(res, 413).await;
    // The limit the route has, in words (it named the length of axum's own message: "55 bytes").
    assert_eq!(
        p["detail"],
        "the request body is larger than the limit of 1 MiB (1048576 bytes)"
    );
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
    let res = BriefBuilder::new()
        .put(&app, "0190f5c2-0000-7000-8000-000000000000")
        .await;
    problem(res, 404).await;
    problem(app.get("/api/v1/nothing-here").await, 404).await;
    // A person's page says what happened in words, not the API's "brief not found".
    let owner = app.login_owner().await;
    let res = owner.get(app.url("/briefs/0190f5c2-0000-7000-8000-000000000000")).await;
    assert_eq!(res.status(), 404);
    let html = res.text().await.unwrap();
    assert!(html.contains("There is no brief at this address"), "{html}");
}

#[tokio::test]
async fn sql_looking_text_is_stored_verbatim() {
    let app = spawn_app().await;
    let name = "Robert'); DROP TABLE briefs; -- \"quoted\"";
    let created = BriefBuilder::new().name(name).create(&app).await;
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
