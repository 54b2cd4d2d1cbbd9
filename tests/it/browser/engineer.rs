//! The engineer's journeys in headless Chromium: a new brief's card on the first
//! screen, a ledger typo that keeps what was typed, the card editor's units and "did you mean",
//! and the dashboard's search, filters and pages. Screenshots (RENTCHECK_SCREENSHOT_DIR) at 1366
//! and 390 px wide.

use crate::common;
use crate::common::builders::{BriefBuilder, EvidenceBuilder};

use common::{browser, browser::Browser, spawn_app};
use fantoccini::Locator;
use rentcheck::auth::Role;
use serde_json::json;

async fn js_number(b: &Browser, script: &str) -> f64 {
    b.client.execute(script, vec![]).await.unwrap().as_f64().unwrap()
}

async fn attr(b: &Browser, css: &str, name: &str) -> Option<String> {
    b.client
        .find(Locator::Css(css))
        .await
        .unwrap()
        .attr(name)
        .await
        .unwrap()
}

/// Screenshots of the page at a laptop's and a phone's width, back to the laptop after.
async fn shots(b: &Browser, name: &str) {
    b.client.set_window_size(1366, 768).await.unwrap();
    b.shot(&format!("{name}-1366")).await;
    b.client.set_window_size(390, 844).await.unwrap();
    b.shot(&format!("{name}-390")).await;
    b.client.set_window_size(1366, 768).await.unwrap();
}

#[tokio::test]
async fn an_engineer_writes_a_brief_reads_its_card_on_the_first_screen_and_fixes_a_ledger_typo() {
    let app = spawn_app().await;
    let (b, email) = browser::signed_in(&app, Role::Engineer).await;
    b.client.set_window_size(1366, 768).await.unwrap();

    // A 70B brief with no GPU under test (the issue saw an AMD MI325X tested for it silently).
    b.client.goto(&app.url("/briefs/new")).await.unwrap();
    b.fill("name", "Support chat 70B").await;
    b.fill("owner", &email).await;
    b.select("catalog_model", "meta-llama/Llama-3.1-70B-Instruct").await;
    b.fill("context_length", "8192").await;
    b.fill("concurrency", "16").await;
    b.click("button[value='save']").await;
    let brief_path = b.path().await;
    assert!(brief_path.starts_with("/briefs/"), "{brief_path}");

    // The card's heading is on the first screen of a 1366 × 768 laptop.
    let card_bottom = js_number(
        &b,
        "return document.querySelector('#card h2').getBoundingClientRect().bottom",
    )
    .await;
    let screen = js_number(&b, "return window.innerHeight").await;
    assert!(
        card_bottom <= screen,
        "the card's heading ends at {card_bottom} px of {screen}"
    );

    // The allocation under test is marked, said to be a suggestion, and an NVIDIA GPU.
    let allocation = b.text("#allocation-under-test").await;
    let gpu = allocation.split(" × ").nth(1).unwrap_or_default();
    let spec = rentcheck::sizing::gpu_by_name(gpu).unwrap_or_else(|| panic!("a catalogue GPU: {allocation}"));
    assert_eq!(
        spec.vendor, "NVIDIA",
        "the card's checks need nvidia-smi and DCGM: {allocation}"
    );
    assert!(b.text("#no-allocation-chosen").await.contains("No GPU is chosen"));
    assert!(b.text("#smallest-fits li.under-test").await.contains(gpu));
    assert!(
        b.text("#card").await.contains(&allocation),
        "the card is evaluated for it"
    );
    assert!(b.text("#stage-dates").await.contains("no evidence yet"));
    assert!(b
        .client
        .find(Locator::Css("#no-evidence a[href$='/tokens']"))
        .await
        .is_ok());
    shots(&b, "brief").await;

    // A ledger line with a typo in its end time: the page comes back with everything typed and
    // the message at that field. `$2.99` and `2026-11-20 09:00` are read as people mean them.
    b.select("category", "host").await;
    b.fill("resource", "vm-1").await;
    b.fill("amount", "$2.99").await;
    b.fill("starts_at", "2026-11-20 09:00").await;
    b.fill("ends_at", "2026-11-2O 17:00").await;
    b.click("#add-line button[type='submit']").await;
    assert_eq!(b.value("ends_at").await, "2026-11-2O 17:00");
    assert_eq!(b.value("starts_at").await, "2026-11-20 09:00");
    assert_eq!(b.value("amount").await, "$2.99");
    assert_eq!(b.value("resource").await, "vm-1");
    assert_eq!(b.value("category").await, "host");
    let message = b.text("#line-ends_at-error").await;
    assert!(message.contains("2026-11-2O 17:00"), "{message}");
    assert_eq!(attr(&b, "#line-ends_at", "aria-invalid").await.as_deref(), Some("true"));
    assert_eq!(
        attr(&b, "#line-ends_at", "aria-describedby").await.as_deref(),
        Some("line-ends_at-error")
    );
    assert!(
        b.text("header.top").await.contains(&email),
        "signed in, not offered a login"
    );
    let field_top = js_number(
        &b,
        "return document.getElementById('line-ends_at').getBoundingClientRect().top",
    )
    .await;
    assert!(
        (0.0..screen).contains(&field_top),
        "the bad field is in view: {field_top}"
    );
    assert_eq!(app.count("ledger_lines").await, 0, "nothing was stored");
    shots(&b, "ledger-typo").await;

    b.fill("ends_at", "2026-11-20 17:00").await;
    b.click("#add-line button[type='submit']").await;
    assert_eq!(b.path().await, brief_path);
    let (amount, starts): (rust_decimal::Decimal, chrono::DateTime<chrono::Utc>) =
        sqlx::query_as("SELECT amount, starts_at FROM ledger_lines")
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert_eq!(amount.to_string(), "2.99");
    assert_eq!(starts.to_rfc3339(), "2026-11-20T09:00:00+00:00");
    b.close().await;
}

#[tokio::test]
async fn the_card_editor_reads_60ms_and_suggests_the_key_that_was_meant() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let b = browser::launch().await;
    b.sign_in_as(&app, common::OWNER_EMAIL).await;
    b.client.set_window_size(1366, 768).await.unwrap();
    b.client.goto(&app.url(&format!("/briefs/{brief}/card"))).await.unwrap();

    // Every control has a visible label, and the criteria are grouped by stage.
    let unlabelled = js_number(
        &b,
        "return [...document.querySelectorAll('form.card-editor input:not([type=hidden]), form.card-editor select')]\
           .filter(e => e.labels.length === 0 || e.labels[0].innerText.trim() === '').length",
    )
    .await;
    assert_eq!(unlabelled, 0.0, "controls without a visible label");
    assert!(b
        .text("#edit-stage-3 legend")
        .await
        .contains("Representative load test"));

    b.select("new.stage", "3").await;
    b.fill("new.key", "serving.queue_tiem_p95_ms").await;
    b.select("new.op", "le").await;
    b.fill("new.threshold", "60ms").await;
    b.click("#save-card").await;
    assert!(b.text("#did-you-mean").await.contains("serving.queue_time_p95_ms"));
    assert_eq!(attr(&b, "#new-key", "aria-invalid").await.as_deref(), Some("true"));
    assert_eq!(
        attr(&b, "#new-key", "aria-describedby").await.as_deref(),
        Some("new-key-error")
    );
    assert_eq!(b.value("new.key").await, "serving.queue_tiem_p95_ms");
    assert_eq!(b.value("new.threshold").await, "60ms");
    assert_eq!(app.count("card_revisions").await, 0);
    shots(&b, "card-editor-did-you-mean").await;

    b.fill("new.key", "serving.queue_time_p95_ms").await;
    b.click("#save-card").await;
    assert!(b.text("#card-saved").await.contains("Saved as revision 1"));
    let card: serde_json::Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let added = card["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["key"] == "serving.queue_time_p95_ms")
        .expect("the new criterion is saved");
    assert_eq!(added["threshold"], 60.0);
    assert_eq!(added["unit"], "ms");
    assert_eq!(added["op"], "le");
    b.close().await;
}

#[tokio::test]
async fn the_dashboard_finds_filters_and_pages_briefs() {
    let app = spawn_app().await;
    for i in 0..27 {
        BriefBuilder::new().name(format!("Batch job {i:02}")).create(&app).await;
    }
    let needle = BriefBuilder::new().name("Needle search target").create(&app).await;
    let needle = needle["id"].as_str().unwrap().to_owned();
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 620 }))
        .stage(3)
        .post(&app, &needle)
        .await;
    assert_eq!(res.status(), 201);

    let b = browser::launch().await;
    b.sign_in_as(&app, common::OWNER_EMAIL).await;
    b.client.set_window_size(1366, 768).await.unwrap();
    b.client.goto(&app.url("/")).await.unwrap();
    let rows = b
        .client
        .find_all(Locator::Css("table.dashboard tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 25, "one page");
    let first = b.text("table.dashboard tbody tr").await;
    assert!(first.contains("Needle search target"), "newest first: {first}");
    assert!(
        first.contains("needs approval"),
        "it has evidence and no approval: {first}"
    );
    let other = b.text("table.dashboard tbody tr:nth-child(2)").await;
    assert!(
        other.contains("awaiting evidence") && !other.contains("needs approval"),
        "{other}"
    );
    shots(&b, "dashboard").await;

    b.click("#next-page").await;
    let rows = b
        .client
        .find_all(Locator::Css("table.dashboard tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 3, "28 briefs: 25 and 3");
    assert!(b.client.find(Locator::Css("#next-page")).await.is_err());

    b.client.goto(&app.url("/")).await.unwrap();
    b.fill("q", "needle").await;
    b.click(".dashboard-filter button[type='submit']").await;
    let rows = b
        .client
        .find_all(Locator::Css("table.dashboard tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(b.value("q").await, "needle", "the search stays in its box");

    b.client.goto(&app.url("/?show=needs-approval")).await.unwrap();
    let rows = b
        .client
        .find_all(Locator::Css("table.dashboard tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1);
    assert!(b.text("table.dashboard").await.contains("Needle"));
    b.client.goto(&app.url("/?show=failing")).await.unwrap();
    assert!(
        b.text("table.dashboard").await.contains("Needle"),
        "TTFT 620 ms fails the 500 ms target"
    );
    b.client.goto(&app.url("/?show=awaiting-evidence")).await.unwrap();
    let rows = b
        .client
        .find_all(Locator::Css("table.dashboard tbody tr"))
        .await
        .unwrap();
    assert_eq!(rows.len(), 25);
    assert!(!b.text("table.dashboard").await.contains("Needle"));
    b.client.goto(&app.url("/?show=stale")).await.unwrap();
    assert!(b.text("#no-match").await.contains("No brief"));

    b.client.goto(&app.url("/glossary")).await.unwrap();
    assert!(b.text("#trial dd").await.contains("allocation under test"));
    shots(&b, "glossary").await;
    b.close().await;
}
