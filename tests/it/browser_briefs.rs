//! A person writes a brief in headless Chromium and sees its sizing.

use crate::common;

use common::{browser, spawn_app, PASSWORD};
use rentcheck::auth::Role;

#[tokio::test]
async fn fill_the_brief_form_and_see_the_sizing_then_fix_a_bad_value() {
    let app = spawn_app().await;
    let b = browser::launch().await;
    let email = app.user(Role::Engineer).await;
    b.login(&app.base, &email, PASSWORD).await;

    b.client.goto(&app.url("/briefs/new")).await.unwrap();
    b.fill("name", "Support bot").await;
    b.fill("owner", "infra@example.com").await;
    b.select("catalog_model", "meta-llama/Llama-3.1-70B-Instruct").await;
    b.fill("context_length", "8192").await;
    b.fill("concurrency", "16").await;
    b.select("data_boundary", "private-network").await;
    b.click("button[value='save']").await;

    let path = b.path().await;
    assert!(path.starts_with("/briefs/"), "saved and shown: {path}");
    assert_eq!(b.text("h1").await, "Support bot");
    let sizing = b.text("#sizing").await;
    assert!(sizing.contains("Weights") && sizing.contains("KV cache"), "{sizing}");
    let first_row = b.text(".sizing-table tbody tr").await;
    assert!(
        first_row.contains("fits"),
        "the smallest fitting option comes first: {first_row}"
    );

    // A bad value: the form comes back with the message at that field and the other values kept.
    b.client.goto(&app.url("/briefs/new")).await.unwrap();
    b.fill("name", "Batch summariser").await;
    b.fill("owner", "data@example.com").await;
    b.select("catalog_model", "meta-llama/Llama-3.1-8B-Instruct").await;
    b.fill("context_length", "4096").await;
    b.fill("concurrency", "-4").await;
    b.click("button[value='save']").await;

    assert_eq!(
        b.text(".error[data-field='concurrency']").await,
        "must be greater than 0"
    );
    assert_eq!(b.value("name").await, "Batch summariser");
    assert_eq!(b.value("owner").await, "data@example.com");
    assert_eq!(b.value("context_length").await, "4096");
    assert_eq!(b.value("concurrency").await, "-4");
    assert_eq!(b.value("catalog_model").await, "meta-llama/Llama-3.1-8B-Instruct");
    assert_eq!(app.count("briefs").await, 1, "the bad brief was not stored");

    // Preview shows the sizing without saving.
    b.fill("concurrency", "4").await;
    b.click("button[value='preview']").await;
    assert!(b.text("#sizing").await.contains("Total"));
    assert_eq!(app.count("briefs").await, 1);
    b.close().await;
}
