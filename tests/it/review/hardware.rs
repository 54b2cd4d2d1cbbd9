//! What the hardware measured, in the review: the NCCL run's share of what the allocation's
//! topology should reach beside its bus bandwidth, and dcgm-exporter's GPU utilization standing in
//! for the ledger's idle hours (the review says which it used).

use crate::common;
use crate::common::builders::BriefBuilder;

use common::{fixture, spawn_app};
use rentcheck::auth::Role;
use serde_json::{json, Value};

#[tokio::test]
async fn the_review_shows_the_nccl_share_and_uses_measured_utilization_without_idle_hours() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().trial_gpu("H100 SXM", 8).create_id(&app).await;
    let upload = |rel: &'static str, kind: &'static str, stage: u8| {
        let app = &app;
        let brief = brief.clone();
        async move {
            let res = app
                .post_raw_evidence(
                    &brief,
                    &format!("kind={kind}&stage={stage}"),
                    "text/plain",
                    fixture(rel),
                )
                .await;
            assert_eq!(res.status(), 201);
            res.json::<Value>().await.unwrap()
        }
    };
    // A real 8 × H100 all_reduce run: 473.6 GB/s of the 476 GB/s such a node should reach.
    upload(
        "nccl-tests/h100-x8-all_reduce_perf-nvls-nccl-tests-290.txt",
        "nccl-tests",
        1,
    )
    .await;
    let scrape = upload(
        "dcgm-exporter/kops-l4-idle-scrape-dcgm-exporter-driver580.txt",
        "dcgm-exporter",
        3,
    )
    .await;
    let util_pct = scrape["metrics"]["gpu.util_pct_avg"].as_f64().unwrap();

    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    // No ledger at all, so no idle hours: the GPUs' own busy share is the utilization.
    assert_eq!(review["utilization_source"]["from"], "dcgm_exporter");
    assert_eq!(review["utilization_source"]["evidence_id"], scrape["id"]);
    let utilization: f64 = review["utilization"].as_str().unwrap().parse().unwrap();
    assert!(
        (utilization - util_pct / 100.0).abs() < 1e-4,
        "{utilization} vs {util_pct} %"
    );

    let person = app.login(Role::Engineer).await;
    let html = person
        .get(app.url(&format!("/briefs/{brief}/review")))
        .await
        .text()
        .await
        .unwrap();
    // 473.6 ÷ 476 = 99.5 %.
    assert!(
        html.contains("99.5 % of what this topology should do, expected 476 GB/s"),
        "the review shows the share beside the bus bandwidth"
    );
}

#[tokio::test]
async fn another_gpu_in_the_evidence_is_said_and_approving_asks_to_acknowledge_it() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().trial_gpu("H100 SXM", 4).create_id(&app).await;
    // An 8 × H200 `nvidia-smi -L` sent to a 4 × H100 trial.
    let res = app
        .post_raw_evidence(
            &brief,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            fixture("nvidia-smi-list/h200-x8.txt"),
        )
        .await;
    assert_eq!(res.status(), 201);
    let manager = app.login(Role::Manager).await;
    let brief_page = manager
        .get(app.url(&format!("/briefs/{brief}")))
        .await
        .text()
        .await
        .unwrap();
    assert!(brief_page.contains("id=\"gpu-mismatch\""), "the brief page says it");
    let page = manager
        .get(app.url(&format!("/briefs/{brief}/review")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("id=\"gpu-mismatch\""),
        "the review's first screen says it"
    );
    assert!(page.contains("name=\"acknowledge_mismatch\""), "the approval form asks");

    let review: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    let named = review["trials"][0]["gpu_mismatch"]["named"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(named.contains("H200"), "{named}");
    let api = common::bearer_client(&app.token(Role::Manager, None).await);
    let url = app.url(&format!("/api/v1/briefs/{brief}/approvals"));
    let body = |ack: bool| json!({ "verdict": "approve", "inputs_digest": review["inputs_digest"], "acknowledge_mismatch": ack });
    let res = api.post(&url).json(&body(false)).send().await.unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "acknowledge_mismatch");
    assert!(problem["errors"][0]["message"].as_str().unwrap().contains(&named));
    let res = api.post(&url).json(&body(true)).send().await.unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let approval: Value = res.json().await.unwrap();
    assert_eq!(approval["mismatch_acknowledged"], json!(named));
    let audit: Value = sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'approval.approve'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(audit["mismatch_acknowledged"], json!(named));
}
