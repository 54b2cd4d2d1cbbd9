//! A person edits a card threshold in headless Chromium, saves, and sees the new revision and the
//! criterion's status change.

use crate::common;
use crate::common::builders::EvidenceBuilder;

use common::{browser, spawn_app};
use fantoccini::Locator;
use serde_json::json;

#[tokio::test]
async fn edit_a_threshold_save_and_see_the_new_revision_and_status() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    // Measured TTFT 620 ms against the default 500 ms target: failing.
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 620 }))
        .stage(3)
        .post(&app, &brief)
        .await;
    assert_eq!(res.status(), 201);

    let b = browser::launch().await;
    // The brief's owner: the engineer behind the API token that created it.
    b.sign_in_as(&app, common::OWNER_EMAIL).await;
    b.client.goto(&app.url(&format!("/briefs/{brief}"))).await.unwrap();
    let ttft_row = "#card tr[data-key='serving.ttft_p95_ms']";
    assert_eq!(
        b.client
            .find(Locator::Css(ttft_row))
            .await
            .unwrap()
            .attr("data-status")
            .await
            .unwrap()
            .as_deref(),
        Some("fail")
    );
    assert_eq!(b.text("#stage-3 .stage-status").await, "fail");

    b.click("#edit-card").await;
    assert_eq!(b.path().await, format!("/briefs/{brief}/card"));
    assert!(b.text("#card-revision").await.contains("Default card"));
    let input = b
        .client
        .find(Locator::Css(
            ".criterion-edit[data-key='serving.ttft_p95_ms'] input[name$='.threshold']",
        ))
        .await
        .unwrap();
    input.clear().await.unwrap();
    input.send_keys("700").await.unwrap();
    b.click("#save-card").await;

    assert_eq!(b.path().await, format!("/briefs/{brief}/card"));
    assert_eq!(b.text("#card-revision").await, "Revision 1.");
    assert!(b.text("#card-saved").await.contains("Saved as revision 1"));
    let status = b.text(".criterion-edit[data-key='serving.ttft_p95_ms'] .badge").await;
    assert_eq!(status, "pass");
    assert!(b.text("#revisions").await.contains("Revision 1"));

    // The brief page agrees, and the revision page shows the change.
    b.client.goto(&app.url(&format!("/briefs/{brief}"))).await.unwrap();
    assert_eq!(
        b.client
            .find(Locator::Css(ttft_row))
            .await
            .unwrap()
            .attr("data-status")
            .await
            .unwrap()
            .as_deref(),
        Some("pass")
    );
    b.client
        .goto(&app.url(&format!("/briefs/{brief}/card/revisions/1")))
        .await
        .unwrap();
    let diff = b.text("#diff").await;
    assert!(diff.contains("serving.ttft_p95_ms") && diff.contains("700"), "{diff}");
    b.close().await;
}
