//! An engineer adds a second trial to a brief on its page in headless Chromium, sends evidence to
//! it with a token for that trial, and the review compares the two trials side by side.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::{bearer_client, browser, spawn_app};
use serde_json::Value;
use uuid::Uuid;

#[tokio::test]
async fn an_engineer_adds_a_second_trial_sends_evidence_to_it_and_the_review_compares_them() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .name("Chat 70B")
        .trial_gpu("H200 SXM", 8)
        .create_id(&app)
        .await;
    // The brief's owner: the engineer behind the API token that created it.
    let b = browser::launch().await;
    b.sign_in_as(&app, common::OWNER_EMAIL).await;

    // The brief page lists its one trial and offers another.
    b.client.goto(&app.url(&format!("/briefs/{brief}"))).await.unwrap();
    assert!(b.text("#trials").await.contains("8 × H200 SXM"));
    b.click("#trials a.button").await;
    assert!(b.path().await.ends_with("/trials/new"));
    b.fill("name", "Cloud B 4 × H100").await;
    b.fill("provider", "Cloud B").await;
    b.select("gpu", "H100 SXM").await;
    b.fill("gpu_count", "4").await;
    // A typo is answered at the field, the input kept.
    b.fill("rate_per_gpu_hour", "$2.99").await;
    b.click("form.brief-form button[type='submit']").await;
    assert!(b
        .text("#field-rate_per_gpu_hour .error")
        .await
        .contains("no currency sign"));
    assert_eq!(b.value("name").await, "Cloud B 4 × H100");
    b.fill("rate_per_gpu_hour", "2.99").await;
    b.click("form.brief-form button[type='submit']").await;
    let trials_text = b.text("#trials").await;
    assert!(trials_text.contains("Cloud B 4 × H100"), "{trials_text}");
    assert!(trials_text.contains("4 × H100 SXM"), "{trials_text}");
    b.shot("brief-two-trials").await;

    // A token for the new trial sends its evidence there, no trial named.
    let listed: Value = app
        .get(&format!("/api/v1/briefs/{brief}/trials"))
        .await
        .json()
        .await
        .unwrap();
    let second = listed["items"][1]["id"].as_str().unwrap().to_owned();
    let agent = bearer_client(
        &app.trial_token(Uuid::parse_str(&brief).unwrap(), Uuid::parse_str(&second).unwrap())
            .await,
    );
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1")))
        .body(std::fs::read("data/demo/trial2/nvidia-smi-L.txt").unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);

    // The review compares the two trials: each with its own evidence.
    b.client
        .goto(&app.url(&format!("/briefs/{brief}/review")))
        .await
        .unwrap();
    let comparison = b.text("#trials-comparison").await.to_lowercase();
    assert!(
        comparison.contains("trial 1") && comparison.contains("cloud b 4 × h100"),
        "{comparison}"
    );
    assert!(comparison.contains("gpu.count"), "{comparison}");
    let row = b.text("#trials-comparison tr[data-key='gpu.count@1']").await;
    assert!(
        row.contains('4'),
        "the second trial's gpu.count is its own evidence: {row}"
    );
    assert!(
        comparison.contains("so none is recommended"),
        "neither trial is accepted yet: {comparison}"
    );
    b.shot("review-two-trials").await;

    // With a sweep on each trial, the money section says what a million tokens cost at the SLO
    // and draws both sweeps against the target line.
    let first = listed["items"][0]["id"].as_str().unwrap().to_owned();
    for (trial, runs) in [
        (&first, [(6.0, 900.0, 0), (12.0, 1800.0, 0), (24.0, 3400.0, 9)]),
        (&second, [(3.0, 450.0, 0), (6.0, 880.0, 1), (9.0, 1250.0, 6)]),
    ] {
        let sweep: Vec<String> = runs
            .iter()
            .map(|(rate, tokens, misses)| {
                crate::review::money_at_slo::run(&format!("rate{rate}"), *rate, *tokens, *misses).to_string()
            })
            .collect();
        let res = app
            .post_raw_evidence(
                &brief,
                &format!("kind=bench-serving&stage=3&trial={trial}"),
                "application/json",
                sweep.join("\n").into_bytes(),
            )
            .await;
        assert_eq!(res.status(), 201);
    }
    b.client.refresh().await.unwrap();
    let money = b.text("#money").await;
    assert!(
        money.contains("At 12 requests/s the 8 × H200 SXM trial (Trial 1) keeps 100 % of requests inside every target"),
        "{money}"
    );
    assert!(money.contains("Cloud B 4 × H100"), "{money}");
    assert!(b
        .text("#attainment-chart")
        .await
        .contains("keeps the target up to 6 requests/s"));
    b.client
        .execute("document.getElementById('money').scrollIntoView()", vec![])
        .await
        .unwrap();
    b.shot("review-money-1366").await;
    b.client.set_window_size(390, 1600).await.unwrap();
    b.client
        .execute("document.getElementById('money').scrollIntoView()", vec![])
        .await
        .unwrap();
    b.shot("review-money-390").await;
    // At phone width the page does not scroll sideways (wide tables scroll inside their frame).
    let overflow = b
        .client
        .execute(
            "const d = document.documentElement; return d.scrollWidth - d.clientWidth",
            vec![],
        )
        .await
        .unwrap();
    assert!(
        overflow.as_i64().unwrap() <= 0,
        "the review is {overflow} px wider than a 390 px phone"
    );
    b.close().await;
}
