//! Trials through the API: a brief starts with one, more are added, edited and ended; evidence and
//! ledger lines belong to a trial (a brief with several needs the trial named, a trial token goes
//! to its own trial only); each trial is decided on its own evidence and ledger, the cheapest
//! accepted one is recommended, and an approval names the trial it reserves; a saved card set for
//! one allocation is stale on another.

use crate::common;
use crate::common::builders::{
    trials_of, BriefBuilder, CardBuilder, EvidenceBuilder, LedgerBuilder, LedgerLine, TrialBuilder,
};

use common::{bearer_client, spawn_app, TestApp};
use serde_json::{json, Value};
use uuid::Uuid;

fn metrics_upload(stage: u8, trial: Option<&str>, metrics: Value) -> Value {
    let mut body = json!({ "kind": "metrics", "stage": stage, "data": { "metrics": metrics } });
    if let Some(t) = trial {
        body["trial"] = json!(t);
    }
    body
}

#[tokio::test]
async fn a_brief_starts_with_one_trial_and_more_are_added_edited_and_ended() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().trial_gpu("H100 SXM", 4).create_id(&app).await;
    let first = trials_of(&app, &brief).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["name"], "Trial 1");
    assert_eq!(first[0]["gpu"], "H100 SXM", "the brief's trial_gpu is its first trial");
    assert_eq!(first[0]["allocation"]["count"], 4);
    assert_eq!(first[0]["allocation"]["suggested"], false);

    let second = TrialBuilder::new()
        .provider("Cloud B")
        .gpus("H200 SXM", 2)
        .rate_per_gpu_hour("3.10")
        .add(&app, &brief)
        .await;
    assert_eq!(second["name"], "Trial 2", "the next free name");
    assert_eq!(second["position"], 2);
    assert_eq!(second["rate_per_gpu_hour"], "3.1");
    assert_eq!(second["status"], "planned");
    let id = second["id"].as_str().unwrap().to_owned();

    // A trial with no GPU tests the sizing's suggestion, and says so.
    let suggested = TrialBuilder::new().name("whatever fits").add(&app, &brief).await;
    assert_eq!(suggested["allocation"]["suggested"], true);
    assert_eq!(suggested["gpu"], Value::Null);

    // Ending it keeps everything and stamps when.
    let mut ended = second.clone();
    ended["status"] = json!("ended");
    let res = app.put_json(&format!("/api/v1/trials/{id}"), &ended).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let ended: Value = res.json().await.unwrap();
    assert_eq!(ended["status"], "ended");
    assert!(ended["ended_at"].is_string());
    assert_eq!(ended["gpu"], "H200 SXM");

    // A re-run names the trial it re-runs.
    let rerun = TrialBuilder::new()
        .gpus("H200 SXM", 2)
        .rerun_of(&id)
        .add(&app, &brief)
        .await;
    assert_eq!(rerun["rerun_of"], json!(id));

    // Bad input is named field by field, and nothing is stored.
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/trials"),
            &json!({ "name": "Trial 2", "gpu": "H9000", "rate_per_gpu_hour": "$2.99", "billing": "monthly" }),
        )
        .await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    let fields: Vec<&str> = problem["errors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["gpu", "billing", "rate_per_gpu_hour"]);
    let other_brief = app.brief_id().await;
    let other = trials_of(&app, &other_brief).await;
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/trials"),
            &json!({ "rerun_of": other[0]["id"] }),
        )
        .await;
    assert_eq!(res.status(), 422, "a re-run of another brief's trial");
    let res = app
        .post_json(&format!("/api/v1/briefs/{brief}/trials"), &json!({ "name": "Trial 2" }))
        .await;
    assert_eq!(res.status(), 422, "a taken name");
    assert_eq!(trials_of(&app, &brief).await.len(), 4);
}

#[tokio::test]
async fn evidence_and_ledger_lines_go_to_the_trial_named_and_a_trial_token_to_its_own() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let first = trials_of(&app, &brief).await[0]["id"].as_str().unwrap().to_owned();
    // With one trial, nothing needs naming.
    let res = EvidenceBuilder::metrics(json!({"gpu.count": 8}))
        .stage(1)
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.json::<Value>().await.unwrap()["trial_id"], json!(first));

    let second = TrialBuilder::new()
        .name("Cloud B 2 × H200")
        .gpu("H200 SXM")
        .add(&app, &brief)
        .await;
    let second = second["id"].as_str().unwrap().to_owned();

    // With two, an upload that names none is refused, naming both.
    let res = EvidenceBuilder::metrics(json!({"gpu.count": 2}))
        .stage(1)
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 422);
    let problem = res.text().await.unwrap();
    assert!(
        problem.contains("Trial 1") && problem.contains("Cloud B 2 × H200") && problem.contains(&second),
        "{problem}"
    );
    let res = app
        .post_raw_evidence(
            &brief,
            &format!("kind=metrics&stage=1&trial={second}"),
            "application/json",
            br#"{"metrics":{"gpu.count":2}}"#.to_vec(),
        )
        .await;
    assert_eq!(res.status(), 201);
    let listed: Value = app
        .get(&format!("/api/v1/briefs/{brief}/evidence?trial={second}"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(listed["items"].as_array().unwrap().len(), 1);
    assert_eq!(listed["items"][0]["trial_id"], json!(second));
    let all: Value = app
        .get(&format!("/api/v1/briefs/{brief}/evidence"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(all["items"].as_array().unwrap().len(), 2);

    let line = json!({ "category": "host", "amount": "10", "currency": "USD" });
    let res = app
        .post_json(&format!("/api/v1/briefs/{brief}/ledger"), &json!({ "lines": [line] }))
        .await;
    assert_eq!(res.status(), 422, "ledger lines need a trial too");
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/ledger"),
            &json!({ "trial": second, "lines": [line] }),
        )
        .await;
    assert_eq!(res.status(), 201);
    assert_eq!(res.json::<Value>().await.unwrap()["total"], "10");

    // A token for the second trial needs no name and cannot write to the first.
    let agent = bearer_client(
        &app.trial_token(Uuid::parse_str(&brief).unwrap(), Uuid::parse_str(&second).unwrap())
            .await,
    );
    let url = app.url(&format!("/api/v1/briefs/{brief}/evidence"));
    let res = agent
        .post(&url)
        .json(&metrics_upload(2, None, json!({"probe.ok": true})))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    assert_eq!(res.json::<Value>().await.unwrap()["trial_id"], json!(second));
    let res = agent
        .post(&url)
        .json(&metrics_upload(2, Some(&first), json!({"probe.ok": true})))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a trial token writes to its own trial only");
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{brief}/ledger?trial={first}")))
        .json(&json!({ "lines": [line] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let csv = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency,trial\n\
               host,,,,,,,5,USD,Trial 1\n";
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{brief}/ledger")))
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "not even through a line's trial column");
}

/// Posts `accepted` outputs and one day's accelerator line of `gpus` at `rate` to a trial.
async fn ledger(app: &TestApp, brief: &str, trial: &str, gpus: u32, rate: &str, accepted: u64) {
    LedgerBuilder::new()
        .trial(trial)
        .line(LedgerLine::accelerator_day(&format!("node-{trial}"), gpus, rate))
        .accepted(accepted)
        .idle_hours("1")
        .save(app, brief)
        .await;
}

#[tokio::test]
async fn each_trial_is_decided_on_its_own_and_the_cheapest_accepted_one_is_recommended() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .trial_gpu("H200 SXM", 2)
        .max_cost_per_job("1")
        .create_id(&app)
        .await;
    // One card for every trial: two GPUs and a latency target.
    let criteria = json!([
        { "key": "gpu.count", "op": "ge", "threshold": 2, "unit": "count", "stage": 1, "required": true },
        { "key": "serving.ttft_p95_ms", "op": "le", "threshold": 500, "unit": "ms", "stage": 3, "required": true }
    ]);
    CardBuilder::of(criteria).save(&app, &brief).await;
    let a = trials_of(&app, &brief).await[0]["id"].as_str().unwrap().to_owned();
    let mut ids = vec![a.clone()];
    for (name, gpu, provider, rate) in [
        ("B", "H100 SXM", "Cloud B", "2.00"),
        ("C", "H100 SXM", "Cloud C", "1.00"),
        ("D", "H100 SXM", "Cloud D", "1.50"),
    ] {
        let t = TrialBuilder::new()
            .name(name)
            .gpus(gpu, 2)
            .provider(provider)
            .rate_per_gpu_hour(rate)
            .add(&app, &brief)
            .await;
        ids.push(t["id"].as_str().unwrap().to_owned());
    }
    let (a, b, c, d) = (&ids[0], &ids[1], &ids[2], &ids[3]);
    for (trial, ttft) in [(a, Some(300)), (b, Some(350)), (c, Some(900)), (d, None)] {
        EvidenceBuilder::metrics(json!({ "gpu.count": 2 }))
            .stage(1)
            .trial(trial)
            .upload(&app, &brief)
            .await;
        if let Some(ttft) = ttft {
            EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": ttft }))
                .stage(3)
                .trial(trial)
                .upload(&app, &brief)
                .await;
        }
    }
    // 48 GPU-hours each; by hand: A 48 × 3.00 / 1000 = 0.144, B 48 × 2.00 / 1000 = 0.096,
    // C 48 × 1.00 / 1000 = 0.048 (cheapest, but it fails), D 48 × 1.50 / 1000 = 0.072 (incomplete).
    ledger(&app, &brief, a, 2, "3.00", 1000).await;
    ledger(&app, &brief, b, 2, "2.00", 1000).await;
    ledger(&app, &brief, c, 2, "1.00", 1000).await;
    ledger(&app, &brief, d, 2, "1.50", 1000).await;

    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    let by_id = |id: &str| {
        review["trials"]
            .as_array()
            .unwrap()
            .iter()
            .find(|t| t["trial"] == json!(id))
            .unwrap()
            .clone()
    };
    let (ra, rb, rc, rd) = (by_id(a), by_id(b), by_id(c), by_id(d));
    assert_eq!(
        (ra["accepted"].clone(), ra["cost_per_job"].clone()),
        (json!(true), json!("0.144")),
        "{ra}"
    );
    assert_eq!(
        (rb["accepted"].clone(), rb["cost_per_job"].clone()),
        (json!(true), json!("0.096"))
    );
    assert_eq!(rc["accepted"], false);
    assert_eq!(rc["decision"], "stop", "misses the SLO while not saturated");
    assert_eq!(rd["accepted"], false);
    assert_eq!(rd["decision"], "expand", "still missing its load test");
    assert_eq!(rd["missing"]["3"], json!(["serving.ttft_p95_ms"]));
    assert_eq!(review["recommended_trial"], json!(b), "the cheapest accepted trial");
    assert_eq!(
        review["trial"],
        json!(b),
        "the brief-level decision is the recommended trial's"
    );
    assert_eq!(review["decision"], rb["decision"]);
    assert_eq!(rb["criteria_passed"], 2);
    assert_eq!(rb["criteria_required"], 2);

    // Approving a trial that is not the recommended one needs a comment saying why.
    let manager = bearer_client(&app.token(rentcheck::auth::Role::Manager, None).await);
    let digest = review["inputs_digest"].as_str().unwrap();
    let approve = |trial: &str, comment: &str| json!({ "verdict": "approve", "trial": trial, "comment": comment, "inputs_digest": digest });
    let url = app.url(&format!("/api/v1/briefs/{brief}/approvals"));
    let res = manager.post(&url).json(&approve(a, "")).send().await.unwrap();
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("not the recommended one"));
    let res = manager
        .post(&url)
        .json(&approve(a, "Cloud A is already under contract."))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let approval: Value = res.json().await.unwrap();
    assert_eq!(approval["trial_id"], json!(a));
    assert_eq!(approval["decision"], ra["decision"]);
    // Busy 47 of 48 GPU-hours, but no reserved price of Cloud A's offer is known: rule 8b keeps it
    // pay-as-you-go, and nothing is reserved.
    assert_eq!(approval["decision"], "expand");
    assert_eq!(ra["reasons"][0]["rule"], "8b");
    assert_eq!(approval["reservation_gpu"], Value::Null);
    let res = manager.post(&url).json(&approve(b, "")).send().await.unwrap();
    assert_eq!(res.status(), 201, "the recommended trial needs no comment");
}

#[tokio::test]
async fn a_saved_card_is_stale_on_a_trial_of_another_allocation_and_collectives_are_na_on_one_gpu() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().trial_gpu("H200 SXM", 8).create_id(&app).await;
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(card["default"], true);
    let gpu_count = |card: &Value| {
        card["criteria"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["key"] == "gpu.count")
            .unwrap()["threshold"]
            .clone()
    };
    assert_eq!(gpu_count(&card), json!(8.0));
    // Save the card with the GPU count typed (6, where 8 × H200 generated 8): it is the card's now.
    // Every other threshold is saved as generated for 8 × H200.
    let criteria: Vec<Value> = card["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            let threshold = if c["key"] == "gpu.count" {
                json!(6)
            } else {
                c["threshold"].clone()
            };
            json!({ "key": c["key"], "op": c["op"], "threshold": threshold, "unit": c["unit"],
                    "stage": c["stage"], "required": c["required"] })
        })
        .collect();
    let saved = CardBuilder::of(json!(criteria)).save(&app, &brief).await;
    assert_eq!(saved["stale"], json!([]), "not stale on the allocation it was set for");

    // The first trial moves to 2 × H100. The typed GPU count no longer fits it, and the card says
    // so; thresholds left as generated follow the new allocation and are not stale.
    let first = trials_of(&app, &brief).await[0].clone();
    let mut changed = first.clone();
    changed["gpu"] = json!("H100 SXM");
    changed["gpu_count"] = json!(2);
    let id = first["id"].as_str().unwrap();
    assert_eq!(
        app.put_json(&format!("/api/v1/trials/{id}"), &changed).await.status(),
        200
    );
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let stale = card["stale"].as_array().unwrap();
    let gpu = stale
        .iter()
        .find(|s| s["key"] == "gpu.count")
        .expect("gpu.count is stale");
    assert_eq!(
        (gpu["saved"].clone(), gpu["for_this_trial"].clone()),
        (json!(6.0), json!(2.0))
    );
    assert_eq!(stale.len(), 1, "only the typed threshold is stale: {stale:?}");
    assert_eq!(card["trial"]["allocation"], "2 × H100 SXM");

    // A one-GPU trial: collectives and links do not apply to it.
    let single = TrialBuilder::new().gpus("H200 SXM", 1).add(&app, &brief).await;
    let single = single["id"].as_str().unwrap();
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card?trial={single}"))
        .await
        .json()
        .await
        .unwrap();
    let statuses: Vec<(String, String)> = card["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| {
            let k = c["key"].as_str().unwrap();
            k.starts_with("nccl.") || k.starts_with("topo.")
        })
        .map(|c| {
            (
                c["key"].as_str().unwrap().to_owned(),
                c["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert!(!statuses.is_empty(), "the saved card has collective criteria");
    assert!(statuses.iter().all(|(_, s)| s == "n/a"), "{statuses:?}");
}

/// Uploads reuse a brief's trials for up to a second (`trials::service::UploadPlaces`): a trial added
/// through another server on the same database is seen by this one's uploads within that second.
#[tokio::test]
async fn a_trial_added_through_another_server_is_seen_by_uploads_within_a_second() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let upload = format!("/api/v1/briefs/{brief}/evidence");
    // This server reads the brief's one trial to place an upload.
    let res = app
        .post_json(&upload, &metrics_upload(1, None, json!({"gpu.count": 8})))
        .await;
    assert_eq!(res.status(), 201);

    let other = common::serve_app(
        app.pool.clone(),
        rentcheck::config::AppConfig::default(),
        app.keys.clone(),
    )
    .await;
    let res = app
        .client
        .post(format!("{other}/api/v1/briefs/{brief}/trials"))
        .json(&json!({ "name": "Trial 2" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let res = app
        .post_json(&upload, &metrics_upload(1, None, json!({"gpu.count": 8})))
        .await;
    assert_eq!(
        res.status(),
        422,
        "a second later, the new trial must be seen: name one of the two"
    );
}
