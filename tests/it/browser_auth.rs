//! A person logs in, creates a brief, mints a token and logs out, in headless Chromium.

use crate::common;

use common::{browser, spawn_app, PASSWORD};
use rentcheck::auth::Role;

#[tokio::test]
async fn log_in_create_mint_log_out_and_be_asked_to_log_in_again() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    let b = browser::launch().await;

    b.client.goto(&app.url("/")).await.unwrap();
    assert_eq!(
        b.path().await,
        "/login",
        "anonymous visitors are sent to the login page"
    );
    b.fill("email", &email).await;
    b.fill("password", PASSWORD).await;
    b.click("form.stack button[type='submit']").await;
    assert_eq!(b.path().await, "/");
    assert!(b.text("header.top").await.contains(&email));

    b.client.goto(&app.url("/briefs/new")).await.unwrap();
    b.fill("name", "Token demo").await;
    b.fill("owner", &email).await;
    b.select("catalog_model", "Qwen/Qwen3-8B").await;
    b.fill("context_length", "8192").await;
    b.fill("concurrency", "8").await;
    b.click("button[value='save']").await;
    let brief_path = b.path().await;
    assert!(brief_path.starts_with("/briefs/"));

    b.click("a[href$='/tokens']").await;
    b.fill("name", "node-1").await;
    b.click(".row-form button[type='submit']").await;
    let token = b.text("#token-value").await;
    assert_eq!(token.matches('.').count(), 2, "the token is shown: {token}");
    assert!(b.text(".tokens").await.contains("node-1"));

    b.click("header.top button.link").await;
    assert_eq!(b.path().await, "/login");
    b.client.goto(&app.url(&brief_path)).await.unwrap();
    assert_eq!(b.path().await, "/login", "brief pages ask for login again");
    b.client.goto(&app.url(&format!("{brief_path}/tokens"))).await.unwrap();
    assert_eq!(b.path().await, "/login");
    b.close().await;
}
