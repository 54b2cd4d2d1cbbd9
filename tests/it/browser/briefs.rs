//! A person writes a brief in headless Chromium and sees its sizing.

use crate::common;

use common::{browser, spawn_app};
use rentcheck::auth::Role;

#[tokio::test]
async fn fill_the_brief_form_and_see_the_sizing_then_fix_a_bad_value() {
    let app = spawn_app().await;
    let (b, _) = browser::signed_in(&app, Role::Engineer).await;

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

/// A model outside the catalogue, sized from its config.json chosen as a file on the form; a bad
/// config pasted instead comes back with the problem named and the text kept.
#[tokio::test]
async fn a_config_json_chosen_on_the_form_sizes_the_brief_and_comes_back_to_edit() {
    let app = spawn_app().await;
    let (b, _) = browser::signed_in(&app, Role::Engineer).await;

    b.client.goto(&app.url("/briefs/new")).await.unwrap();
    b.fill("name", "Gemma 3 chat").await;
    b.fill("owner", "infra@example.com").await;
    b.fill("model_name", "google/gemma-3-27b-it").await;
    b.fill("params_b", "27.43").await;
    b.fill("context_length", "32768").await;
    b.fill("concurrency", "4").await;
    // A bad config first: the message names the problem, the pasted text stays.
    b.fill("model_config", "{\"num_hidden_layers\": \"sixty\"}").await;
    b.click("button[value='save']").await;
    let problems = b.text("#architecture").await;
    assert!(problems.contains("model_config.num_hidden_layers"), "{problems}");
    assert_eq!(b.value("model_config").await, "{\"num_hidden_layers\": \"sixty\"}");
    assert_eq!(app.count("briefs").await, 0, "nothing stored");

    // Now the real file, chosen with the file input: it replaces the pasted text.
    let path =
        std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/model-configs/gemma-3-27b-it.json");
    let file = b
        .client
        .find(fantoccini::Locator::Css("input[type='file'][name='model_config']"))
        .await
        .unwrap();
    file.send_keys(path.to_str().unwrap()).await.unwrap();
    b.click("button[value='save']").await;
    assert_eq!(b.text("h1").await, "Gemma 3 chat");
    let notes = b.text("#architecture-notes").await;
    assert!(notes.contains("1024"), "the sliding window read from the file: {notes}");
    // 10 global layers × 32768 tokens + 52 window layers × 1024, 16 KV heads × 128 × 2 bytes, K and V.
    let per_token = 2 * 16 * 128 * 2 * (10 * 32768 + 52 * 1024) / 32768;
    let sizing = b.text("#sizing").await;
    assert!(
        sizing.contains(&format!("{} bytes", rentcheck::figures::count(per_token))),
        "{sizing}"
    );
    b.shot("brief-from-config-1366").await;

    // The edit form gives the config back, and saving it unchanged keeps the same sizing.
    let brief_path = b.path().await;
    b.client.goto(&app.url(&format!("{brief_path}/edit"))).await.unwrap();
    let kept: serde_json::Value = serde_json::from_str(&b.value("model_config").await).unwrap();
    assert_eq!(kept["text_config"]["num_hidden_layers"], 62);
    b.click("button[value='save']").await;
    assert!(b
        .text("#sizing")
        .await
        .contains(&format!("{} bytes", rentcheck::figures::count(per_token))));
    assert_eq!(app.count("briefs").await, 1);
    b.close().await;
}
