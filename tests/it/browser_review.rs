//! A manager approves a `reserve` decision in headless Chromium; an engineer cannot.

use crate::common;

use common::{browser, spawn_app, PASSWORD};
use rentcheck::{auth::Role, config::AppConfig, demo, state::AppState};

#[tokio::test]
async fn a_manager_approves_a_reserve_and_the_dashboard_shows_it() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let review = format!("/briefs/{}/review", loaded.brief_id);

    // An engineer sees the review but no form, and a forged POST is refused.
    let engineer = app.login(Role::Engineer).await;
    let html = engineer.get(app.url(&review)).await.text().await.unwrap();
    assert!(html.contains("data-decision=\"reserve\""));
    assert!(!html.contains("approval-form"));
    let digest = html.split("name=\"inputs_digest\" value=\"").nth(1);
    assert!(digest.is_none(), "no digest is offered to an engineer");
    let res = engineer
        .client
        .post(app.url(&review))
        .form(&[
            ("csrf_token", engineer.csrf.as_str()),
            ("verdict", "approve"),
            ("inputs_digest", "x"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let manager = app.user(Role::Manager).await;
    let b = browser::launch().await;
    b.login(&app.base, &manager, PASSWORD).await;
    b.client.goto(&app.url(&review)).await.unwrap();
    assert_eq!(b.text("#decision .big").await.to_lowercase(), "reserve");
    b.shot("review-reserve").await;
    assert_eq!(b.value("reservation.gpu").await, "H200 SXM", "defaults from the sizing");
    assert_eq!(b.value("reservation.count").await, "8");
    assert_eq!(
        b.value("reservation.rate_per_gpu_hour").await,
        "3.50",
        "defaults from the trial's rate (and the ledger's: 9408 / 2688 GPU-hours)"
    );
    assert!(b.text("#monthly-cost").await.contains("20,440.00"), "8 × 3.50 × 730 h");
    b.fill("comment", "Steady at 78 % utilization; reserve for a year.")
        .await;
    b.click("button[value='approve']").await;

    assert!(b.text(".approval-state").await.contains("approved"));
    assert!(b.text("#approval").await.contains("8 × H200 SXM, reserved, 12 months"));
    b.client.goto(&app.url("/")).await.unwrap();
    b.shot("dashboard").await;
    let row = b.text(".approval-cell").await;
    assert!(row.contains("approved reserve"), "{row}");
    b.close().await;

    let stored: (String, String, Option<i32>) =
        sqlx::query_as("SELECT verdict, decision, reservation_count FROM approvals WHERE brief_id = $1")
            .bind(loaded.brief_id)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(stored, ("approve".into(), "reserve".into(), Some(8)));
}
