//! Acceptance cards through the API: the default card, validation, revisions with diffs and the
//! audit log, and evaluation over real evidence uploads (newest wins, wrong types, missing, and a
//! revision changing a status).

use crate::common;
use crate::common::builders::{BriefBuilder, CardBuilder, EvidenceBuilder};

use common::{spawn_app, TestApp};
use rentcheck::auth::Role;
use serde_json::{json, Value};

async fn card(app: &TestApp, brief: &str) -> Value {
    let res = app.get(&format!("/api/v1/briefs/{brief}/card")).await;
    assert_eq!(res.status(), 200);
    res.json().await.unwrap()
}

fn criterion<'a>(card: &'a Value, key: &str, stage: u64) -> &'a Value {
    card["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == key && c["stage"] == stage)
        .unwrap_or_else(|| panic!("{key} at stage {stage} in {card}"))
}

fn stage(card: &Value, n: u64) -> &str {
    card["stages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stage"] == n)
        .unwrap()["status"]
        .as_str()
        .unwrap()
}

#[tokio::test]
async fn a_brief_without_a_saved_card_answers_its_default_card() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let c = card(&app, &brief).await;
    assert_eq!(c["revision"], 0);
    assert_eq!(c["default"], true);
    let ttft = criterion(&c, "serving.ttft_p95_ms", 3);
    assert_eq!(
        (&ttft["op"], &ttft["threshold"], &ttft["unit"]),
        (&json!("le"), &json!(500.0), &json!("ms"))
    );
    assert_eq!(ttft["status"], "missing");
    assert!(ttft["why"].as_str().unwrap().contains("target"));
    assert_eq!(criterion(&c, "dcgm.diag.passed", 1)["threshold"], true);
    assert_eq!(criterion(&c, "ledger.cost_per_job", 5)["threshold"], 0.004);
    assert_eq!(stage(&c, 1), "missing");
    assert_eq!(c["accepted"], false);
    assert_eq!(c["warnings"], json!([]));
}

#[tokio::test]
async fn evaluation_takes_the_newest_evidence_and_fails_wrong_types() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    // Collected later but uploaded first: it still wins.
    let newest = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 420.0 }))
        .stage(3)
        .collected_at("2026-11-29T10:30:00Z")
        .upload_id(&app, &brief)
        .await;
    EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 900.0 }))
        .stage(3)
        .collected_at("2026-11-29T10:00:00Z")
        .upload_id(&app, &brief)
        .await;
    // The same key at another stage does not count for the stage-3 criterion.
    EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 9999.0 }))
        .stage(1)
        .collected_at("2026-11-29T11:00:00Z")
        .upload_id(&app, &brief)
        .await;
    // Same collected_at: the later upload wins.
    EvidenceBuilder::metrics(json!({ "dcgm.diag.passed": true }))
        .stage(1)
        .collected_at("2026-11-29T09:00:00Z")
        .upload_id(&app, &brief)
        .await;
    let later = EvidenceBuilder::metrics(json!({ "dcgm.diag.passed": false }))
        .stage(1)
        .collected_at("2026-11-29T09:00:00Z")
        .upload_id(&app, &brief)
        .await;
    // Present but of the wrong type.
    let wrong = EvidenceBuilder::metrics(json!({ "serving.tpot_p95_ms": "fast" }))
        .stage(3)
        .collected_at("2026-11-29T10:00:00Z")
        .upload_id(&app, &brief)
        .await;

    let c = card(&app, &brief).await;
    let ttft = criterion(&c, "serving.ttft_p95_ms", 3);
    assert_eq!((&ttft["status"], &ttft["value"]), (&json!("pass"), &json!(420.0)));
    assert_eq!(ttft["evidence_id"], newest.as_str());
    let dcgm = criterion(&c, "dcgm.diag.passed", 1);
    assert_eq!((&dcgm["status"], &dcgm["evidence_id"]), (&json!("fail"), &json!(later)));
    let itl = criterion(&c, "serving.tpot_p95_ms", 3);
    assert_eq!(itl["status"], "fail", "a wrong type fails, it is not missing");
    assert_eq!(itl["evidence_id"], wrong.as_str());
    assert!(itl["reason"].as_str().unwrap().contains("a string"), "{itl}");
    let missing = criterion(&c, "serving.preemptions_total", 3);
    assert_eq!(missing["status"], "missing");
    assert!(missing.get("value").is_none() && missing.get("evidence_id").is_none());
    assert_eq!(stage(&c, 1), "fail");
    assert_eq!(stage(&c, 3), "fail");
    assert_eq!(stage(&c, 2), "missing");
}

#[tokio::test]
async fn a_card_revision_changes_a_status() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 620.0 }))
        .stage(3)
        .collected_at("2026-11-29T10:00:00Z")
        .upload_id(&app, &brief)
        .await;
    let mut c = card(&app, &brief).await;
    assert_eq!(criterion(&c, "serving.ttft_p95_ms", 3)["status"], "fail");

    // Send the card back with the threshold raised (read-only fields included, as GET gave them).
    for item in c["criteria"].as_array_mut().unwrap() {
        if item["key"] == "serving.ttft_p95_ms" {
            item["threshold"] = json!(700);
        }
    }
    let res = CardBuilder::of(c["criteria"].clone()).put(&app, &brief).await;
    assert_eq!(res.status(), 200);
    let saved: Value = res.json().await.unwrap();
    assert_eq!((&saved["revision"], &saved["default"]), (&json!(1), &json!(false)));
    assert_eq!(criterion(&saved, "serving.ttft_p95_ms", 3)["status"], "pass");
    assert_eq!(card(&app, &brief).await["revision"], 1);

    // Revision 2 removes a criterion and adds one; its diff against 1 says so.
    let mut criteria: Vec<Value> = saved["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["key"] != "serving.preemptions_total")
        .cloned()
        .collect();
    criteria.push(json!({ "key": "serving.e2e_p95_ms", "op": "le", "threshold": 8000, "stage": 3, "required": false }));
    for item in criteria.iter_mut() {
        if item["key"] == "serving.ttft_p95_ms" {
            item["threshold"] = json!(600);
        }
    }
    let res = CardBuilder::of(json!(criteria)).put(&app, &brief).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        criterion(&res.json().await.unwrap(), "serving.ttft_p95_ms", 3)["status"],
        "fail"
    );

    let r2: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card/revisions/2"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(r2["previous"], 1);
    assert_eq!(r2["diff"]["added"][0]["key"], "serving.e2e_p95_ms");
    assert_eq!(r2["diff"]["removed"][0]["key"], "serving.preemptions_total");
    assert_eq!(r2["diff"]["changed"][0]["key"], "serving.ttft_p95_ms");
    assert_eq!(r2["diff"]["changed"][0]["before"]["threshold"], 700.0);
    let r1: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card/revisions/1"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(
        r1["criteria"].as_array().unwrap().len(),
        saved["criteria"].as_array().unwrap().len()
    );
    assert_eq!(
        r1["diff"]["changed"][0]["key"], "serving.ttft_p95_ms",
        "revision 1 against the default"
    );
    let list: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card/revisions"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(list["items"].as_array().unwrap().len(), 2);
    assert_eq!(
        app.get(&format!("/api/v1/briefs/{brief}/card/revisions/3"))
            .await
            .status(),
        404
    );

    let audited: Vec<(String, serde_json::Value)> = sqlx::query_as(
        "SELECT action, details FROM audit_log WHERE target = $1 AND action <> 'brief.create' ORDER BY at",
    )
    .bind(format!("brief:{brief}"))
    .fetch_all(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited.len(), 2);
    assert!(audited.iter().all(|(a, _)| a == "card.revise"));
    assert_eq!(audited[1].1["revision"], 2);
}

#[tokio::test]
async fn invalid_criteria_are_422_per_field_and_unknown_keys_warn() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let res = CardBuilder::of(json!([
        { "key": "dcgm.diag.passed", "op": "gt", "threshold": true, "stage": 1 },
        { "key": "serving.ttft_p95_ms", "op": "le", "threshold": 500, "unit": "s", "stage": 3 },
        { "key": "serving.itl_p95_ms", "op": "le", "threshold": 50, "stage": 0 }
    ]))
    .put(&app, &brief)
    .await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, vec!["criteria[0].op", "criteria[1].unit", "criteria[2].stage"]);
    assert_eq!(app.count("card_revisions").await, 0);

    let res = CardBuilder::of(json!([{ "key": "team.smoke_score", "op": "ge", "threshold": 0.8, "stage": 2 }]))
        .put(&app, &brief)
        .await;
    assert_eq!(res.status(), 200);
    let c: Value = res.json().await.unwrap();
    assert!(c["warnings"][0].as_str().unwrap().contains("team.smoke_score"));
    EvidenceBuilder::metrics(json!({ "team.smoke_score": 0.9 }))
        .stage(2)
        .collected_at("2026-11-29T10:00:00Z")
        .upload_id(&app, &brief)
        .await;
    assert_eq!(card(&app, &brief).await["criteria"][0]["status"], "pass");

    assert_eq!(CardBuilder::of(json!("nope")).put(&app, &brief).await.status(), 422);
    let res = app.put_json(&format!("/api/v1/briefs/{brief}/card"), &json!({})).await;
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn who_may_read_and_change_a_card() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let body = json!({ "criteria": [] });
    let agent = common::bearer_client(&app.token(Role::Agent, Some(brief.parse().unwrap())).await);
    let url = app.url(&format!("/api/v1/briefs/{brief}/card"));
    assert_eq!(agent.get(&url).send().await.unwrap().status(), 403);
    assert_eq!(agent.put(&url).json(&body).send().await.unwrap().status(), 403);
    assert_eq!(app.anon.get(&url).send().await.unwrap().status(), 401);
    let manager = common::bearer_client(&app.token(Role::Manager, None).await);
    assert_eq!(manager.get(&url).send().await.unwrap().status(), 200);
    let missing = app.url(&format!("/api/v1/briefs/{}/card", uuid::Uuid::now_v7()));
    assert_eq!(app.client.get(&missing).send().await.unwrap().status(), 404);
    assert_eq!(app.client.put(&missing).json(&body).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn the_manifest_lint_feeds_the_card() {
    let app = spawn_app().await;
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: { name: p }\nspec:\n  containers:\n    - name: c\n      image: vllm/vllm-openai:latest\n";
    let brief = BriefBuilder::new().k8s_manifest(manifest).create_id(&app).await;
    let c = card(&app, &brief).await;
    let lint = criterion(&c, "manifest.lint_errors", 5);
    assert_eq!(
        (&lint["status"], &lint["value"], &lint["source"]),
        (&json!("fail"), &json!(2), &json!("derived"))
    );
}

/// After the brief's GPU under test changes, a saved card does not keep the old
/// allocation. A threshold left as generated (gpu.count for 8 × H100) follows the new allocation;
/// one the engineer typed stays and is reported stale.
#[tokio::test]
async fn a_saved_card_follows_the_briefs_new_allocation_unless_a_threshold_was_typed() {
    let app = spawn_app().await;
    let on_h100 = |count| BriefBuilder::new().trial_gpu("H100 SXM", count);
    let brief = on_h100(8).create(&app).await;
    let id = brief["id"].as_str().unwrap().to_owned();
    let gpu_count = |card: &Value| {
        card["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == "gpu.count")
            .map(|c| c["threshold"].clone())
            .unwrap()
    };
    // The card as the API takes it back: the criteria's own fields, without their evaluation.
    let own = |card: &Value| -> Value {
        card["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                let mut out = serde_json::Map::new();
                for f in ["key", "op", "threshold", "unit", "stage", "required", "why"] {
                    if let Some(v) = c.get(f).filter(|v| !v.is_null()) {
                        out.insert(f.to_owned(), v.clone());
                    }
                }
                Value::Object(out)
            })
            .collect()
    };
    // Saves `card` with its GPU count typed as `n`.
    let save_with_gpu_count = |card: &Value, n: u32| {
        let mut criteria = own(card);
        for c in criteria.as_array_mut().unwrap() {
            if c["key"] == "gpu.count" {
                c["threshold"] = json!(n);
            }
        }
        CardBuilder::of(criteria).save(&app, &id)
    };
    let card: Value = app
        .get(&format!("/api/v1/briefs/{id}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gpu_count(&card), json!(8.0));

    // Saved as generated, then the brief moves to 4 × H100: the card asks for 4.
    CardBuilder::of(own(&card)).save(&app, &id).await;
    let res = on_h100(4).put(&app, &id).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let card: Value = app
        .get(&format!("/api/v1/briefs/{id}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(card["revision"], 1);
    assert_eq!(
        gpu_count(&card),
        json!(4.0),
        "the generated threshold follows the allocation"
    );
    assert_eq!(card["stale"], json!([]));

    // A typed threshold stays, and the card says it was set for another allocation.
    save_with_gpu_count(&card, 3).await;
    let res = on_h100(8).put(&app, &id).await;
    assert_eq!(res.status(), 200);
    let card: Value = app
        .get(&format!("/api/v1/briefs/{id}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gpu_count(&card), json!(3.0), "what the engineer typed is kept");
    let stale = card["stale"].as_array().unwrap();
    assert!(stale.iter().any(|s| s["key"] == "gpu.count"), "{stale:?}");

    // Two nodes of eight: each machine shows its own eight. A card saved when the rule asked one
    // listing for all sixteen holds the old default, not a choice: it follows today's rule.
    let res = on_h100(16).put(&app, &id).await;
    assert_eq!(res.status(), 200);
    save_with_gpu_count(&card, 16).await;
    let card: Value = app
        .get(&format!("/api/v1/briefs/{id}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(gpu_count(&card), json!(8.0), "a machine of the two shows eight");
}
