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
    assert!(
        b.path().await.ends_with("/tokens"),
        "the mint answered with a redirect to the page"
    );

    // Refreshing the page that shows the token mints nothing and shows the token no more.
    b.client.refresh().await.unwrap();
    assert!(b.text(".tokens").await.contains("node-1"));
    let html = b.client.source().await.unwrap();
    assert!(!html.contains(&token), "the token is shown once");
    let minted: i64 = sqlx::query_scalar("SELECT count(*) FROM api_tokens WHERE name = 'node-1'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(minted, 1, "a refresh does not mint another token");

    // An error page knows who is signed in: their name and "Log out", not "Log in".
    b.client
        .goto(&app.url("/briefs/00000000-0000-7000-8000-000000000000"))
        .await
        .unwrap();
    let header = b.text("header.top").await;
    assert!(header.contains(&email), "{header}");
    assert!(header.contains("Log out") && !header.contains("Log in"), "{header}");
    assert!(b.text("main").await.contains("404"));

    b.click("header.top button.link").await;
    assert_eq!(b.path().await, "/login");
    b.client.goto(&app.url(&brief_path)).await.unwrap();
    assert_eq!(b.path().await, "/login", "brief pages ask for login again");
    b.client.goto(&app.url(&format!("{brief_path}/tokens"))).await.unwrap();
    assert_eq!(b.path().await, "/login");
    b.close().await;
}

/// Found by a security review: Chromium drops the tab from `/<TAB>/evil.example/phish`, which made the
/// redirect after sign-in `//evil.example/phish`. The browser must stay on rentcheck.
#[tokio::test]
async fn a_tab_in_next_does_not_send_chromium_off_site_after_sign_in() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    let b = browser::launch().await;
    b.client
        .goto(&app.url("/login?next=%2F%09%2Fevil.example%2Fphish"))
        .await
        .unwrap();
    b.fill("email", &email).await;
    b.fill("password", PASSWORD).await;
    b.click("form.stack button[type='submit']").await;
    let url = b.client.current_url().await.unwrap();
    assert_eq!(url.host_str(), Some("127.0.0.1"), "the browser left rentcheck: {url}");
    assert_eq!(url.path(), "/");
    b.close().await;
}

/// An admin disables a person from the users page, and a person signs out everywhere from their
/// account page, in a real browser.
#[tokio::test]
async fn an_admin_disables_a_person_and_a_person_signs_out_everywhere() {
    let app = spawn_app().await;
    let admin = app.user(Role::Admin).await;
    let person = app.user(Role::Engineer).await;
    let other_session = app.login_as(&person, PASSWORD).await.unwrap();
    let b = browser::launch().await;
    b.login(&app.base, &admin, PASSWORD).await;
    b.client.goto(&app.url("/admin/users")).await.unwrap();
    b.shot("admin-users").await;
    let id = rentcheck::auth::users::by_email(&app.pool, &person)
        .await
        .unwrap()
        .unwrap()
        .id;
    b.click(&format!("form[action='/admin/users/{id}/disable'] button"))
        .await;
    assert_eq!(b.path().await, "/admin/users");
    assert!(b
        .text(&format!("form[action='/admin/users/{id}/enable'] button"))
        .await
        .contains("Enable"));
    assert_eq!(
        other_session.get(app.url("/")).await.status(),
        303,
        "their session ended"
    );

    b.client.goto(&app.url("/account")).await.unwrap();
    b.shot("account").await;
    b.click("form[action='/account/sign-out-everywhere'] button").await;
    assert_eq!(b.path().await, "/login");
    b.client.goto(&app.url("/")).await.unwrap();
    assert_eq!(b.path().await, "/login", "signed out");
    b.close().await;
}

/// Browsers are kept for the run and lent to one test after another: what one test leaves in a
/// browser (a sign-in, a second tab, a phone-sized window) must not reach the next.
#[tokio::test]
async fn a_browser_handed_back_keeps_no_sign_in_no_tab_and_no_window_size_for_the_next_test() {
    let app = spawn_app().await;
    let (b, _) = browser::signed_in(&app, Role::Engineer).await;
    b.client.goto(&app.url("/")).await.unwrap();
    assert_eq!(b.path().await, "/", "signed in");
    b.client.set_window_size(390, 844).await.unwrap();
    b.client.new_window(true).await.unwrap();
    assert_eq!(b.client.windows().await.unwrap().len(), 2);

    b.empty().await.unwrap();

    assert_eq!(b.client.windows().await.unwrap().len(), 1, "one tab is left");
    let (_, _, width, height) = b.client.get_window_rect().await.unwrap();
    let first = (u64::from(browser::WINDOW.0), u64::from(browser::WINDOW.1));
    assert_eq!((width, height), first, "the window is back at its first size");
    assert_eq!(b.client.current_url().await.unwrap().as_str(), "about:blank");
    b.client.goto(&app.url("/")).await.unwrap();
    assert_eq!(b.path().await, "/login", "the sign-in did not survive");
    b.close().await;
}
