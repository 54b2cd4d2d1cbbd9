//! An approval of another action than the computed one (decision.md, "Override"): 422 without a
//! reason of 20 characters, reserve only at a known reserved price, and recorded as
//! `{ computed, approved, reason }` in the answer, the audit log, the decision record, the
//! `approval.recorded` webhook event and the review.

use crate::common;
use crate::common::builders::{PriceRow, PriceSheet};

use common::{bearer_client, spawn_app, TestApp};
use rentcheck::{auth::Role, config::AppConfig, demo, state::AppState};
use rust_decimal::Decimal;
use serde_json::{json, Value};

async fn review(app: &TestApp, brief: &str) -> Value {
    app.get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap()
}

#[tokio::test]
async fn a_manager_overrides_expand_to_reserve_with_a_reason_and_it_is_recorded_everywhere() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let brief = loaded.brief_id.to_string();
    let admin = bearer_client(&app.token(Role::Admin, None).await);
    let res = admin
        .post(app.url("/api/v1/webhooks"))
        .json(&json!({ "url": "https://hooks.example/rentcheck", "events": ["approval.recorded"], "secret": "a secret of sixteen+ chars" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let url = app.url(&format!("/api/v1/briefs/{brief}/approvals"));
    let approve = |digest: &str, reason: &str| json!({ "verdict": "approve", "inputs_digest": digest, "decision": "reserve", "override_reason": reason });

    // The demo computes expand (no reserved price of the offer: rule 8b).
    let r = review(&app, &brief).await;
    assert_eq!(r["decision"], "expand");
    let digest = r["inputs_digest"].as_str().unwrap().to_owned();
    let problem = |res: reqwest::Response| async move {
        assert_eq!(res.status(), 422);
        let body: Value = res.json().await.unwrap();
        body["errors"][0]["field"].as_str().unwrap().to_owned()
    };
    // Without a reason, or with a short one: 422 at override_reason; nothing recorded.
    let res = manager.post(&url).json(&approve(&digest, "")).send().await.unwrap();
    assert_eq!(problem(res).await, "override_reason");
    let res = manager
        .post(&url)
        .json(&approve(&digest, "capacity is scarce"))
        .send()
        .await
        .unwrap();
    assert_eq!(problem(res).await, "override_reason", "18 characters are not enough");
    // With a reason but no reserved price of the offer: nothing to reserve at.
    let reason = "Capacity is scarce in this region this quarter.";
    let res = manager.post(&url).json(&approve(&digest, reason)).send().await.unwrap();
    assert_eq!(problem(res).await, "decision");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM approvals")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(n, 0);

    // A quote of 2.60: the rules still say expand (79.3 % busy needed); the manager reserves anyway.
    let res = PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H200 SXM", 8, "3.50").source("quote 7"))
        .row(
            PriceRow::new("Cloud A", "H200 SXM", 8, "2.60")
                .reserved()
                .valid_from("2026-11-02")
                .source("quote 7 (1 year)"),
        )
        .post_with(&manager, &app)
        .await;
    assert_eq!(res.status(), 201);
    let r = review(&app, &brief).await;
    assert_eq!(r["decision"], "expand");
    let digest = r["inputs_digest"].as_str().unwrap().to_owned();
    let res = manager.post(&url).json(&approve(&digest, reason)).send().await.unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let answer: Value = res.json().await.unwrap();
    let recorded = json!({ "computed": "expand", "approved": "reserve", "reason": reason });
    assert_eq!(answer["override"], recorded);
    assert_eq!(answer["decision"], "reserve");
    // At the offer's reserved price, by hand: 8 GPUs × 2.60 × 730 = 15,184.00 a month.
    let reservation = &answer["reservation"];
    assert_eq!(reservation["billing"], "reserved");
    assert_eq!(reservation["gpus"], 8);
    assert_eq!(
        reservation["monthly_cost"]
            .as_str()
            .unwrap()
            .parse::<Decimal>()
            .unwrap(),
        Decimal::from(15_184)
    );

    // The audit log, the webhook event, the review and the decision record say the same.
    let audit: Value = sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'approval.approve'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(audit["override"], recorded);
    let event: Value = sqlx::query_scalar("SELECT payload FROM webhook_events WHERE event = 'approval.recorded'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(event["new"]["override"], recorded);
    assert!(
        event["text"]
            .as_str()
            .unwrap()
            .contains("approved reserve over the computed expand"),
        "{event}"
    );
    let r = review(&app, &brief).await;
    assert_eq!(r["approval"]["override"], recorded);
    assert_eq!(r["approval"]["stale"], false);
    let record = app
        .get(&format!("/briefs/{brief}/decision.md"))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        record.contains(&format!(
            "**Override**: Approved reserve over the computed expand: {reason}"
        )),
        "{record}"
    );
    let person = app.login(Role::Manager).await;
    let page = person
        .get(app.url(&format!("/briefs/{brief}/review")))
        .await
        .text()
        .await
        .unwrap();
    // decision.md's words, the reason right after the colon (it was in quotes).
    assert!(page.contains(&format!("Approved reserve over the computed expand: {reason}")));
    assert!(page.contains("Approved (reserve over the computed expand) — 8 × H200 · Cloud A, by "));
}

#[tokio::test]
async fn on_the_page_the_override_button_approves_the_chosen_action_and_a_missing_reason_is_kept_at_its_field() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review_url = format!("/briefs/{}/review", loaded.brief_id);
    let manager = app.login(Role::Manager).await;
    let html = manager.get(app.url(&review_url)).await.text().await.unwrap();
    assert!(html.contains("id=\"override-button\""));
    // Without JavaScript the button names the action the select shows: its first, reserve.
    assert!(html.contains("Approve reserve instead of the computed expand — trial “8 × H200 · Cloud A”</button>"));
    let digest = html
        .split("name=\"inputs_digest\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap()
        .to_owned();
    let post = |verdict: &'static str, reason: &'static str| {
        manager
            .client
            .post(app.url(&review_url))
            .form(&[
                ("csrf_token", manager.csrf.as_str()),
                ("inputs_digest", digest.as_str()),
                ("verdict", verdict),
                ("decision", "stop"),
                ("override_reason", reason),
                ("comment", ""),
            ])
            .send()
    };
    // Without JavaScript, choosing the action is a step of its own: the form comes back with stop
    // chosen, the button naming it and the reason kept; nothing is recorded.
    let res = post("choose-override", "capacity is scarce this quarter")
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("Approve stop instead of the computed expand — trial “8 × H200 · Cloud A”</button>"),
        "the button names the action chosen"
    );
    assert!(page.contains("<option value=\"stop\" selected>"));
    assert!(page.contains(">capacity is scarce this quarter</textarea>"));
    let recorded: i64 = sqlx::query_scalar("SELECT count(*) FROM approvals WHERE brief_id = $1")
        .bind(loaded.brief_id)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(recorded, 0, "choosing records nothing");
    // The override button without a reason: 422, the reason's field says why, the choice is kept.
    let res = post("approve-override", "too short").await.unwrap();
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(
        page.contains("id=\"override-reason-error\""),
        "the message is at the field"
    );
    assert!(page.contains(">too short</textarea>"), "the reason typed is kept");
    assert!(
        page.contains("<option value=\"stop\" selected>"),
        "the action chosen is kept"
    );
    // The plain approve button approves the computed action, whatever the override select says.
    let res = post("approve", "").await.unwrap();
    assert_eq!(res.status(), 303);
    let (decision, over): (String, Option<Value>) =
        sqlx::query_as("SELECT decision, decision_override FROM approvals WHERE brief_id = $1")
            .bind(loaded.brief_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!((decision.as_str(), over), ("expand", None));
}
