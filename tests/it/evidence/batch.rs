//! `POST /api/v1/briefs/{id}/evidence/batch`: several items in one request, each stored or
//! refused on its own by the rules of one upload, new items committed together, per-item
//! idempotency keys.

use crate::common;

use common::{bearer_client, fixture, spawn_app};
use rentcheck::auth::Role;
use serde_json::{json, Value};

fn smi() -> String {
    String::from_utf8(fixture("nvidia-smi-query/a10-x2-query-ecc.csv")).unwrap()
}

#[tokio::test]
async fn each_item_is_stored_or_refused_on_its_own_and_answered_in_order() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/evidence/batch");
    let body = json!({ "items": [
        { "kind": "nvidia-smi-query", "stage": 1, "content": smi(), "labels": { "host": "gpu-1" } },
        { "kind": "metrics", "stage": 3, "data": { "metrics": { "serving.ttft_p95_ms": 310 } } },
        { "kind": "metrics", "stage": 9, "data": { "metrics": {} } },
        { "kind": "nccl-tests", "stage": 2, "content": "this is not an nccl-tests output" },
    ]});
    let res = app.post_json(&path, &body).await;
    assert_eq!(res.status(), 207);
    let answer: Value = res.json().await.unwrap();
    let items = answer["items"].as_array().unwrap();
    assert_eq!(items.len(), 4);
    assert_eq!(items[0]["status"], 201, "{}", items[0]);
    assert_eq!(items[0]["parse_status"], "ok");
    assert_eq!(items[1]["status"], 201);
    assert_eq!(items[2]["status"], 422, "a bad stage refuses that item only");
    assert_eq!(items[2]["problem"]["errors"][0]["field"], "stage");
    assert_eq!(items[3]["status"], 201, "a parse failure is stored, as for one upload");
    assert_eq!(items[3]["parse_status"], "failed");
    assert_eq!(app.count("evidence").await, 3);

    // Each stored item reads back like one uploaded alone, with its labels.
    let first: Value = app
        .get(items[0]["links"]["self"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first["kind"], "nvidia-smi-query");
    assert_eq!(first["labels"]["host"], "gpu-1");
    assert!(first["metrics"]
        .as_object()
        .unwrap()
        .keys()
        .any(|k| k.starts_with("gpu.")));
    let second: Value = app
        .get(items[1]["links"]["self"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(second["metrics"]["serving.ttft_p95_ms"], 310.0);
}

#[tokio::test]
async fn idempotency_keys_make_a_resent_batch_store_nothing_twice() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/evidence/batch");
    let items: Vec<Value> = (0..50)
        .map(|i| {
            json!({ "kind": "metrics", "stage": 3, "idempotency_key": format!("run-7-item-{i}"),
                          "data": { "metrics": { "serving.ttft_p95_ms": 300 + i } } })
        })
        .collect();
    let first: Value = app
        .post_json(&path, &json!({ "items": items }))
        .await
        .json()
        .await
        .unwrap();
    assert!(first["items"].as_array().unwrap().iter().all(|i| i["status"] == 201));
    assert_eq!(app.count("evidence").await, 50);

    // The harness did not hear the answer and sends the same batch again.
    let again: Value = app
        .post_json(&path, &json!({ "items": items }))
        .await
        .json()
        .await
        .unwrap();
    for (a, b) in first["items"]
        .as_array()
        .unwrap()
        .iter()
        .zip(again["items"].as_array().unwrap())
    {
        assert_eq!(b["status"], 200, "replayed");
        let mut a = a.clone();
        a["status"] = json!(200);
        assert_eq!(&a, b, "the same evidence, answered as it was");
    }
    assert_eq!(app.count("evidence").await, 50);

    // Each key kept its own item's whole answer: the item sent alone with its key gets it again.
    let single: Value = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{id}/evidence")))
        .header("idempotency-key", "run-7-item-7")
        .json(&items[7])
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(single["id"], first["items"][7]["id"], "{single}");
    assert_eq!(single["metrics"]["serving.ttft_p95_ms"], 307.0, "{single}");
    assert_eq!(app.count("evidence").await, 50);

    // A key reused with other content, and a key twice in one batch, are refused per item.
    let mixed = json!({ "items": [
        { "kind": "metrics", "stage": 3, "idempotency_key": "run-7-item-0", "data": { "metrics": { "x": 1 } } },
        { "kind": "metrics", "stage": 3, "idempotency_key": "fresh", "data": { "metrics": { "x": 2 } } },
        { "kind": "metrics", "stage": 3, "idempotency_key": "fresh", "data": { "metrics": { "x": 3 } } },
        { "kind": "metrics", "stage": 3, "idempotency_key": "", "data": { "metrics": { "x": 4 } } },
    ]});
    let answer: Value = app.post_json(&path, &mixed).await.json().await.unwrap();
    let statuses: Vec<i64> = answer["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["status"].as_i64().unwrap())
        .collect();
    assert_eq!(statuses, vec![409, 201, 422, 422]);
    assert!(answer["items"][2]["problem"]["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("item 1"));
    assert_eq!(app.count("evidence").await, 51);
}

#[tokio::test]
async fn a_batch_that_is_not_one_is_refused_whole_and_stores_nothing() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/evidence/batch");
    let too_many: Vec<Value> = (0..501)
        .map(|_| json!({ "kind": "metrics", "stage": 3, "data": {} }))
        .collect();
    let res = app.post_json(&path, &json!({ "items": too_many })).await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "items");
    assert!(problem["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("at most 500"));

    let empty = app.post_json(&path, &json!({ "items": [] })).await;
    assert_eq!(empty.status(), 422);
    let text = app
        .client
        .post(app.url(&path))
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(text.status(), 415);
    let broken = app
        .client
        .post(app.url(&path))
        .header("content-type", "application/json")
        .body("{\"items\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(broken.status(), 400);
    assert_eq!(app.count("evidence").await, 0);
}

#[tokio::test]
async fn a_batch_needs_a_caller_who_may_send_to_the_brief() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let other = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/evidence/batch");
    let body = json!({ "items": [ { "kind": "metrics", "stage": 3, "data": { "metrics": { "x": 1 } } } ] });

    let anonymous = reqwest::Client::new()
        .post(app.url(&path))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let elsewhere = bearer_client(&app.token(Role::Agent, Some(other.parse().unwrap())).await);
    let res = elsewhere.post(app.url(&path)).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 403, "an agent token of another brief");
    let agent = bearer_client(&app.token(Role::Agent, Some(id.parse().unwrap())).await);
    let res = agent.post(app.url(&path)).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 207);
    assert_eq!(app.count("evidence").await, 1);
}

#[tokio::test]
async fn a_window_sent_whole_in_one_batch_pairs_its_after_with_its_before() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let text = |f: &str| String::from_utf8(fixture(f)).unwrap();
    let body = json!({ "items": [
        { "kind": "vllm-metrics", "stage": 3, "labels": { "window": "w1", "phase": "before" },
          "content": text("vllm-metrics/window-before.txt") },
        { "kind": "vllm-metrics", "stage": 3, "labels": { "window": "w1", "phase": "after" },
          "content": text("vllm-metrics/window-after.txt") },
    ]});
    let answer: Value = app
        .post_json(&format!("/api/v1/briefs/{id}/evidence/batch"), &body)
        .await
        .json()
        .await
        .unwrap();
    let after: Value = app
        .get(answer["items"][1]["links"]["self"].as_str().unwrap())
        .await
        .json()
        .await
        .unwrap();
    // The same figures as when the two scrapes are sent one by one (evidence_api.rs): the window's
    // own requests, not the server's totals since it started.
    assert_eq!(after["metrics"]["serving.window"], true, "{after}");
    assert_eq!(after["metrics"]["serving.requests_total"], 20.0);
    assert_eq!(after["metrics"]["serving.ttft_p50_ms"], 750.0);
}

/// Batches claim their keys in one statement each: four copies of one batch of 40 keyed items sent
/// at once store each item once, and every copy answers every item with the same evidence.
#[tokio::test]
async fn copies_of_a_keyed_batch_sent_at_once_store_each_item_once() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let path = format!("/api/v1/briefs/{id}/evidence/batch");
    let items: Vec<Value> = (0..40)
        .map(|i| {
            json!({ "kind": "metrics", "stage": 3, "idempotency_key": format!("burst-{i}"),
                    "data": { "metrics": { "serving.ttft_p95_ms": 100 + i } } })
        })
        .collect();
    let body = json!({ "items": items });
    let send = || async { app.post_json(&path, &body).await.json::<Value>().await.unwrap() };
    let (a, b, c, d) = tokio::join!(send(), send(), send(), send());
    let answers = [a, b, c, d];
    assert_eq!(app.count("evidence").await, 40);
    assert_eq!(app.count("idempotency_keys").await, 40);
    for answer in &answers[1..] {
        for (a, b) in answers[0]["items"]
            .as_array()
            .unwrap()
            .iter()
            .zip(answer["items"].as_array().unwrap())
        {
            assert!(matches!(b["status"].as_u64(), Some(200 | 201)), "{b}");
            assert_eq!(a["id"], b["id"], "the same evidence");
        }
    }
}
