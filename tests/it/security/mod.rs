//! What a security review found, one test (or more) per finding: account lifecycle,
//! brief-scoped tokens, the sign-in redirect and lockout, CSV export, /metrics, the ledger import's
//! memory, first-run setup, headers and sessions, NUL bytes, idempotency keys and decision.md.

mod hostile_input;
mod review3;
mod review4;

use std::io::Write;

use crate::common::builders::BriefBuilder;
use crate::common::{self, bearer_client, cookie_client, input_value, spawn_app, spawn_app_with, TestApp, PASSWORD};
use rentcheck::{
    auth::{
        token::{self, NewToken},
        users, Role,
    },
    config::AppConfig,
};
use serde_json::{json, Value};

/// A new person of `role` and a bearer token of theirs (as `rentcheck token mint` makes one).
async fn person_token(
    app: &TestApp,
    role: Role,
    token_role: Role,
    brief: Option<uuid::Uuid>,
) -> (rentcheck::ids::UserId, String) {
    let email = app.user(role).await;
    let user = users::by_email(&app.pool, &email).await.unwrap().unwrap();
    let (signed, _) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "test".into(),
            subject: email,
            role: token_role,
            brief: brief.map(Into::into),
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(user.id),
        },
    )
    .await
    .unwrap();
    (user.id, signed)
}

async fn status(client: &reqwest::Client, url: String) -> u16 {
    client.get(url).send().await.unwrap().status().as_u16()
}

// --- Finding 2: account lifecycle ------------------------------------------------------------

#[tokio::test]
async fn disabling_a_person_refuses_their_tokens_and_ends_their_sessions_at_once() {
    let app = spawn_app().await;
    let (manager_id, manager_token) = person_token(&app, Role::Manager, Role::Manager, None).await;
    let manager = bearer_client(&manager_token);
    let manager_email = users::by_id(&app.pool, manager_id).await.unwrap().unwrap().email;
    let session = app.login_as(&manager_email, PASSWORD).await.unwrap();
    assert_eq!(status(&manager, app.url("/api/v1/briefs")).await, 200);
    assert_eq!(session.get(app.url("/")).await.status(), 200);

    let (_, admin_token) = person_token(&app, Role::Admin, Role::Admin, None).await;
    let admin = bearer_client(&admin_token);
    let res = admin
        .put(app.url(&format!("/api/v1/users/{manager_id}")))
        .json(&json!({ "disabled": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["disabled"], true);
    assert!(body.get("password_hash").is_none());

    let res = manager.get(app.url("/api/v1/briefs")).send().await.unwrap();
    assert_eq!(res.status(), 401, "the token is refused at once");
    let problem: Value = res.json().await.unwrap();
    assert!(problem["detail"].as_str().unwrap().contains("disabled"), "{problem}");
    let res = session.get(app.url("/")).await;
    assert_eq!(res.status(), 303, "the session ended");
    assert!(res.headers()["location"].to_str().unwrap().starts_with("/login"));
    assert!(app.login_as(&manager_email, PASSWORD).await.is_none(), "cannot sign in");

    let res = admin
        .put(app.url(&format!("/api/v1/users/{manager_id}")))
        .json(&json!({ "disabled": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // Disabling revoked the tokens, and enabling again revives none.
    assert_eq!(
        status(&manager, app.url("/api/v1/briefs")).await,
        401,
        "enabled again, the old token stays revoked"
    );
    assert!(
        app.login_as(&manager_email, PASSWORD).await.is_some(),
        "the person signs in again"
    );
    // Only admins change people (a new token of theirs, the old one being revoked).
    let (_, other_manager) = person_token(&app, Role::Manager, Role::Manager, None).await;
    let res = bearer_client(&other_manager)
        .put(app.url(&format!("/api/v1/users/{manager_id}")))
        .json(&json!({ "role": "admin" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn a_lowered_role_refuses_the_persons_tokens_of_a_higher_role() {
    let app = spawn_app().await;
    let (id, manager_token) = person_token(&app, Role::Manager, Role::Manager, None).await;
    let email = users::by_id(&app.pool, id).await.unwrap().unwrap().email;
    let engineer_token = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "low".into(),
            subject: email,
            role: Role::Engineer,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(id),
        },
    )
    .await
    .unwrap()
    .0;
    users::change(
        &app.pool,
        &app.kept_tokens,
        id,
        users::Change {
            role: Some(Role::Engineer),
            disabled: None,
        },
        |u| rentcheck::audit::Entry::new("test", "user.change", &u.email, serde_json::json!({})),
    )
    .await
    .unwrap();
    assert_eq!(
        status(&bearer_client(&manager_token), app.url("/api/v1/briefs")).await,
        401
    );
    assert_eq!(
        status(&bearer_client(&engineer_token), app.url("/api/v1/briefs")).await,
        200
    );
}

#[tokio::test]
async fn a_deleted_managers_token_no_longer_approves() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let (id, manager_token) = person_token(&app, Role::Manager, Role::Manager, None).await;
    sqlx::query("DELETE FROM users WHERE id = $1")
        .bind(id)
        .execute(&app.pool)
        .await
        .unwrap();
    let res = bearer_client(&manager_token)
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "approve", "comment": "", "inputs_digest": "x" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
}

#[tokio::test]
async fn passwords_change_with_the_current_one_and_admins_set_anyones() {
    let app = spawn_app().await;
    let (id, own_token) = person_token(&app, Role::Engineer, Role::Engineer, None).await;
    let email = users::by_id(&app.pool, id).await.unwrap().unwrap().email;
    let other_session = app.login_as(&email, PASSWORD).await.unwrap();
    let me = bearer_client(&own_token);
    let url = app.url(&format!("/api/v1/users/{id}/password"));
    let res = me
        .post(&url)
        .json(&json!({ "password": "a brand new passphrase", "current_password": "wrong wrong wrong" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "current_password");
    let res = me
        .post(&url)
        .json(&json!({ "password": "short", "current_password": PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let res = me
        .post(&url)
        .json(&json!({ "password": "a brand new passphrase", "current_password": PASSWORD }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert!(app.login_as(&email, PASSWORD).await.is_none());
    assert!(app.login_as(&email, "a brand new passphrase").await.is_some());
    assert_eq!(other_session.get(app.url("/")).await.status(), 303, "sessions ended");
    // And their tokens are revoked, the one that changed it included.
    assert_eq!(status(&me, app.url("/api/v1/briefs")).await, 401, "tokens revoked");
    let me = bearer_client(
        &token::mint(
            &app.pool,
            &app.keys,
            NewToken {
                name: "after the change".into(),
                subject: email.clone(),
                role: Role::Engineer,
                brief: None,
                trial: None,
                ttl: chrono::Duration::hours(1),
                created_by: Some(id),
            },
        )
        .await
        .unwrap()
        .0,
    );

    // Someone else's: admins only, no current password needed.
    let (other, _) = person_token(&app, Role::Engineer, Role::Engineer, None).await;
    let res = me
        .post(app.url(&format!("/api/v1/users/{other}/password")))
        .json(&json!({ "password": "taken over, surely" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let (_, admin) = person_token(&app, Role::Admin, Role::Admin, None).await;
    let res = bearer_client(&admin)
        .post(app.url(&format!("/api/v1/users/{other}/password")))
        .json(&json!({ "password": "set by the admin today" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
}

#[tokio::test]
async fn the_last_enabled_admin_can_be_neither_disabled_nor_demoted() {
    let app = spawn_app().await;
    let (admin_id, admin) = person_token(&app, Role::Admin, Role::Admin, None).await;
    let admin = bearer_client(&admin);
    for change in [json!({ "disabled": true }), json!({ "role": "engineer" })] {
        let res = admin
            .put(app.url(&format!("/api/v1/users/{admin_id}")))
            .json(&change)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 409, "{change}");
    }
    let res = admin
        .put(app.url(&format!("/api/v1/users/{admin_id}")))
        .json(&json!({ "role": "agent" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn admins_disable_enable_and_change_roles_from_the_users_page() {
    let app = spawn_app().await;
    let admin = app.login(Role::Admin).await;
    let person = app.login(Role::Engineer).await;
    let id = users::by_email(&app.pool, &person.email).await.unwrap().unwrap().id;
    let post = |path: String, fields: Vec<(&str, &str)>| {
        let mut form = vec![("csrf_token", admin.csrf.as_str())];
        form.extend(fields);
        admin.client.post(app.url(&path)).form(&form).send()
    };
    assert_eq!(
        post(format!("/admin/users/{id}/disable"), vec![])
            .await
            .unwrap()
            .status(),
        303
    );
    assert_eq!(person.get(app.url("/")).await.status(), 303, "signed out at once");
    let page = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(page.contains("disabled"));
    assert_eq!(
        post(format!("/admin/users/{id}/enable"), vec![])
            .await
            .unwrap()
            .status(),
        303
    );
    let res = post(format!("/admin/users/{id}/role"), vec![("role", "manager")])
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(users::by_id(&app.pool, id).await.unwrap().unwrap().role, Role::Manager);
    let res = post(format!("/admin/users/{id}/password"), vec![]).await.unwrap();
    // Post/redirect/get: the new password is shown once, on the page the redirect leads to.
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], "/admin/users");
    let res = admin.get(app.url("/admin/users")).await;
    assert_eq!(res.headers()["cache-control"], "no-store");
    assert!(res.text().await.unwrap().contains("New password for"));
    let again = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(
        !again.contains("New password for"),
        "shown once; a refresh resets nothing"
    );
    assert!(
        app.login_as(&person.email, PASSWORD).await.is_none(),
        "the old password is gone"
    );
}

// --- Finding 3: a brief-scoped person token --------------------------------------------------

#[tokio::test]
async fn a_brief_scoped_person_token_reads_only_its_brief_and_creates_none() {
    let app = spawn_app().await;
    let a = app.brief_id().await;
    let b = app.brief_id().await;
    let (_, scoped) = person_token(&app, Role::Engineer, Role::Engineer, Some(a.parse().unwrap())).await;
    let scoped = bearer_client(&scoped);
    let list: Value = scoped
        .get(app.url("/api/v1/briefs"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [a.as_str()], "only its brief");
    assert_eq!(status(&scoped, app.url(&format!("/api/v1/briefs/{b}"))).await, 403);
    let res = scoped
        .post(app.url("/api/v1/briefs"))
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "creates no brief");
    assert_eq!(app.count("briefs").await, 2);
}

// --- Finding 4: the redirect after sign-in ---------------------------------------------------

#[tokio::test]
async fn sign_in_never_sends_the_browser_off_site_nor_fails_on_a_control_character() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    for next in [
        "/\t/evil.example/phish",
        "/\n/evil.example",
        "/\\evil.example",
        "//evil.example",
        "https://evil.example/",
        "/ /evil.example",
        "/briefs\u{1}x",
        "/%09/evil.example",
    ] {
        let client = cookie_client();
        let res = app.submit_login(&client, &email, PASSWORD, next).await;
        assert_eq!(res.status(), 303, "{next:?}");
        let location = res.headers()["location"].to_str().unwrap().to_owned();
        let local = location.starts_with('/') && !location.starts_with("//") && !location.contains('\\');
        let kept_encoded = next == "/%09/evil.example" && location == next;
        assert!(location == "/" || kept_encoded, "{next:?} → {location:?}");
        assert!(local);
    }
    let client = cookie_client();
    let res = app.submit_login(&client, &email, PASSWORD, "/briefs/new?x=1").await;
    assert_eq!(res.headers()["location"], "/briefs/new?x=1", "a local path is kept");
}

// --- Finding 5: the lockout ------------------------------------------------------------------

#[tokio::test]
async fn parallel_guesses_are_all_counted_and_a_locked_out_guesser_does_not_lock_the_person_out() {
    // The delay and the lock are per account whatever the address, so the
    // person is let in by the browser they signed in with before (its known-browser cookie), not
    // by their address.
    let config = AppConfig {
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..AppConfig::default()
    };
    let app = spawn_app_with(config).await;
    let email = app.user(Role::Engineer).await;
    let (csrf, cookie) = login_form(&app).await;
    let guess = |password: String, from: &'static str, device: Option<String>| {
        let (csrf, email, url) = (csrf.clone(), email.clone(), app.url("/login"));
        let cookie = match device {
            Some(d) => format!("{cookie}; {d}"),
            None => cookie.clone(),
        };
        async move {
            let res = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap()
                .post(url)
                .header("x-forwarded-for", from)
                .header("cookie", cookie)
                .form(&[
                    ("csrf_token", csrf.as_str()),
                    ("email", &email),
                    ("password", &password),
                    ("next", "/"),
                ])
                .send()
                .await
                .unwrap();
            let device = res
                .headers()
                .get_all("set-cookie")
                .iter()
                .filter_map(|v| v.to_str().ok())
                .find(|v| v.starts_with("rentcheck_device="))
                .map(|v| v.split(';').next().unwrap().to_owned());
            (res.status().as_u16(), device)
        }
    };
    // The person signs in once at their desk: that browser is known from now on.
    let (status, device) = guess(PASSWORD.to_owned(), "198.51.100.20", None).await;
    assert_eq!(status, 303);
    let device = device.expect("a known-browser cookie");
    // One attacker (one client address): 40 wrong guesses at once, each with the same login form.
    let guesses: Vec<_> = (0..40)
        .map(|i| tokio::spawn(guess(format!("guess number {i}"), "203.0.113.7", None)))
        .collect();
    let mut statuses = Vec::new();
    for g in guesses {
        statuses.push(g.await.unwrap().0);
    }
    assert!(statuses.iter().all(|s| *s == 401 || *s == 429), "{statuses:?}");
    let checked = statuses.iter().filter(|s| **s == 401).count();
    // Three are free; each next one waits (1 s, then 2 s …): even a slow machine that lets the
    // first waits pass checks no more than five.
    assert!(
        checked <= rentcheck::auth::lockout::FREE_FAILURES as usize + 2,
        "{checked} of 40 parallel guesses had their password checked: {statuses:?}"
    );
    // The person's own browser still signs in, at once (the delay is for unknown browsers;
    // tests/it/security/review3.rs follows an account to its lock).
    assert_eq!(guess(PASSWORD.to_owned(), "198.51.100.20", Some(device)).await.0, 303);
}

/// The login form's CSRF value and the cookie it is paired with.
async fn login_form(app: &TestApp) -> (String, String) {
    let res = app.anon.get(app.url("/login")).send().await.unwrap();
    let cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let page = res.text().await.unwrap();
    (input_value(&page, "csrf_token").unwrap(), cookie)
}

#[tokio::test]
async fn one_client_guessing_many_accounts_is_stopped_too() {
    let app = spawn_app().await;
    let client = cookie_client();
    let mut locked = 0;
    for i in 0..25 {
        let res = app
            .submit_login(&client, &format!("nobody{i}@example.com"), "wrong password!", "/")
            .await;
        if res.status() == 429 {
            locked += 1;
        }
    }
    assert_eq!(locked, 25 - rentcheck::auth::lockout::CLIENT_LIMIT as usize);
}

// --- Finding 6: formulas in the ledger export -------------------------------------------------

#[tokio::test]
async fn the_ledger_export_never_starts_a_cell_with_a_formula() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/ledger"),
            &json!({ "lines": [
                { "category": "host", "resource": "@SUM(1+1)*cmd|' /C calc'!A0", "description": "=HYPERLINK(\"http://evil.example\",\"invoice\")", "amount": "10.00" },
                { "category": "support", "resource": "+1", "description": "-2+3", "amount": "1.00" }
            ] }),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let csv = app
        .get(&format!("/api/v1/briefs/{brief}/ledger.csv"))
        .await
        .text()
        .await
        .unwrap();
    let mut reader = csv::Reader::from_reader(csv.as_bytes());
    let mut cells = 0;
    for record in reader.records() {
        for cell in record.unwrap().iter() {
            cells += 1;
            assert!(!cell.starts_with(['=', '+', '-', '@']), "{cell:?} in\n{csv}");
        }
    }
    assert!(cells >= 20);
    assert!(csv.contains("'=HYPERLINK"), "{csv}");
}

// --- Finding 7: /metrics cardinality ---------------------------------------------------------

#[tokio::test]
async fn invented_http_methods_add_no_metric_series() {
    let app = spawn_app().await;
    let before = app
        .anon
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for i in 0..50 {
        let method = reqwest::Method::from_bytes(format!("INVENTED{i}").as_bytes()).unwrap();
        app.anon.request(method, app.url("/healthz")).send().await.unwrap();
    }
    let after = app
        .anon
        .get(app.url("/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!after.contains("INVENTED"), "a series per invented method");
    assert!(after.contains("method=\"other\""), "counted as other");
    let series = |body: &str| body.lines().filter(|l| !l.starts_with('#')).count();
    assert!(
        series(&after) < series(&before) + 60,
        "{} series before, {} after",
        series(&before),
        series(&after)
    );
}

// --- Finding 8: the ledger import's memory ---------------------------------------------------

#[tokio::test]
async fn a_small_gzip_of_nul_bytes_to_the_ledger_import_is_refused_early_and_briefly() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![0u8; 1024 * 1024];
    for _ in 0..60 {
        gz.write_all(&zeros).unwrap();
    }
    let body = gz.finish().unwrap();
    assert!(body.len() < 100 * 1024, "{} bytes of gzip", body.len());
    let started = std::time::Instant::now();
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/ledger")))
        .header("content-type", "text/csv")
        .header("content-encoding", "gzip")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let text = res.text().await.unwrap();
    assert!(text.len() < 2048, "a short answer, not the cell: {} bytes", text.len());
    assert!(text.contains("NUL"), "{text}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // Text with no line break is stopped at 64 KiB too.
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/ledger")))
        .header("content-type", "text/csv")
        .body("x".repeat(4 * 1024 * 1024))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    assert!(res.text().await.unwrap().contains("longer than"));
}

// --- Finding 9: first-run setup --------------------------------------------------------------

#[tokio::test]
async fn setup_is_refused_through_a_proxy_or_under_a_foreign_host_name() {
    let app = spawn_app().await;
    sqlx::query("DELETE FROM users").execute(&app.pool).await.unwrap();
    let setup = app.url(&format!("/setup?code={}", app.setup_code));
    let res = app
        .anon
        .get(&setup)
        .header("host", "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a rebinding Host");
    let res = app
        .anon
        .get(&setup)
        .header("x-forwarded-for", "203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "through a proxy on this machine");
    let res = app
        .anon
        .get(&setup)
        .header("forwarded", "for=203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = app.anon.get(&setup).header("host", "localhost").send().await.unwrap();
    assert_eq!(res.status(), 200, "a browser on this machine");
    assert_eq!(app.anon.get(&setup).send().await.unwrap().status(), 200);
}

// --- Finding 10: headers, session limits, sign out everywhere --------------------------------

#[tokio::test]
async fn every_answer_carries_the_security_headers_and_hsts_only_over_https() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let brief = app.brief_id().await;
    let answers = [
        app.anon.get(app.url("/login")).send().await.unwrap(),
        app.anon.get(app.url("/api/v1/briefs")).send().await.unwrap(),
        app.anon.get(app.url("/nowhere")).send().await.unwrap(),
        app.anon.get(app.url("/static/app.css")).send().await.unwrap(),
        person.get(app.url(&format!("/briefs/{brief}/review"))).await,
        app.get(&format!("/api/v1/briefs/{brief}")).await,
    ];
    for res in answers {
        let h = res.headers();
        let csp = h["content-security-policy"].to_str().unwrap();
        assert!(csp.contains("frame-ancestors 'none'"), "{}: {csp}", res.url());
        assert!(
            csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
            "{csp}"
        );
        assert_eq!(h["x-frame-options"], "DENY");
        assert_eq!(h["x-content-type-options"], "nosniff");
        assert_eq!(h["referrer-policy"], "same-origin");
        assert!(h.get("strict-transport-security").is_none(), "no HSTS over plain HTTP");
    }
    let https = spawn_app_with(AppConfig {
        secure_cookies: true,
        ..AppConfig::default()
    })
    .await;
    let res = https.anon.get(https.url("/login")).send().await.unwrap();
    assert!(res.headers()["strict-transport-security"]
        .to_str()
        .unwrap()
        .starts_with("max-age="));
}

#[test]
fn no_template_has_inline_script_or_style_so_the_policy_needs_no_exception() {
    fn walk(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else {
                out.push((path.display().to_string(), std::fs::read_to_string(&path).unwrap()));
            }
        }
    }
    let mut files = Vec::new();
    walk(std::path::Path::new("templates"), &mut files);
    walk(std::path::Path::new("server"), &mut files);
    assert!(files.len() > 20);
    for (path, text) in files {
        // Unit tests may hold hostile markup as data; what ships is the code above them.
        let shipped = text.split("#[cfg(test)]").next().unwrap_or("").to_lowercase();
        // A script file of our own (`<script src="/static/…" defer></script>`) is 'self'; every
        // other `<script` would be inline.
        for (at, _) in shipped.match_indices("<script") {
            let tag = &shipped[at..shipped[at..].find("</script>").map_or(shipped.len(), |end| at + end)];
            assert!(
                tag.starts_with("<script src=\"/static/") && tag.ends_with('>'),
                "{path} has an inline <script: the Content-Security-Policy would block it"
            );
        }
        for forbidden in [
            "<style",
            " style=\"",
            " onclick=",
            " onload=",
            " onerror=\"",
            "javascript:void",
        ] {
            assert!(
                !shipped.contains(forbidden),
                "{path} has {forbidden}: the Content-Security-Policy would block it"
            );
        }
    }
}

#[tokio::test]
async fn sessions_end_when_idle_or_too_old_and_sign_out_everywhere_ends_them_all() {
    assert_eq!(AppConfig::default().sessions.idle, chrono::Duration::minutes(30));
    assert_eq!(AppConfig::default().sessions.absolute, chrono::Duration::hours(12));
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;

    let idle = app.login_as(&email, PASSWORD).await.unwrap();
    sqlx::query("UPDATE sessions SET last_seen_at = now() - interval '31 minutes'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(idle.get(app.url("/")).await.status(), 303, "idle for 31 minutes");

    let old = app.login_as(&email, PASSWORD).await.unwrap();
    sqlx::query("UPDATE sessions SET expires_at = now() - interval '1 second'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(old.get(app.url("/")).await.status(), 303, "past the absolute limit");

    let laptop = app.login_as(&email, PASSWORD).await.unwrap();
    let phone = app.login_as(&email, PASSWORD).await.unwrap();
    assert_eq!(phone.get(app.url("/")).await.status(), 200);
    let res = laptop
        .client
        .post(app.url("/account/sign-out-everywhere"))
        .form(&[("csrf_token", laptop.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(phone.get(app.url("/")).await.status(), 303);
    assert_eq!(laptop.get(app.url("/")).await.status(), 303);
    assert_eq!(app.count("sessions").await, 0);
}

#[tokio::test]
async fn a_person_changes_their_own_password_on_the_account_page() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let other = app.login_as(&person.email, PASSWORD).await.unwrap();
    let change = |current: &'static str, new: &'static str| {
        person
            .client
            .post(app.url("/account/password"))
            .form(&[
                ("csrf_token", person.csrf.as_str()),
                ("current_password", current),
                ("new_password", new),
            ])
            .send()
    };
    assert_eq!(
        change("not my password", "another long passphrase")
            .await
            .unwrap()
            .status(),
        422
    );
    assert_eq!(change(PASSWORD, "short").await.unwrap().status(), 422);
    let res = change(PASSWORD, "another long passphrase").await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(
        person.get(app.url("/account")).await.status(),
        200,
        "this session goes on"
    );
    assert_eq!(other.get(app.url("/")).await.status(), 303, "the other one ended");
    assert!(app.login_as(&person.email, "another long passphrase").await.is_some());
}

// --- Finding 11: NUL bytes -------------------------------------------------------------------

#[tokio::test]
async fn nul_bytes_are_a_field_error_or_kept_as_replacement_never_a_500() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/ledger"),
            &json!({ "lines": [{ "category": "host", "description": "a\u{0}b", "amount": "1.00" }] }),
        )
        .await;
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "lines[0].description", "{problem}");

    let res = app
        .post_json(
            &format!("/api/v1/briefs/{brief}/evidence"),
            &json!({ "kind": "probe", "stage": 2, "labels": { "host": "node\u{0}1" }, "data": { "probes": [] } }),
        )
        .await;
    assert_eq!(res.status(), 422, "{}", res.text().await.unwrap());

    // A metric key with a NUL, from a tool's output: stored, the NUL replaced.
    let res = app
        .post_raw_evidence(
            &brief,
            "kind=vllm-metrics&stage=3",
            "text/plain",
            b"# TYPE weird\x00name gauge\nweird\x00name 1\nok_metric 2\n".to_vec(),
        )
        .await;
    assert!(res.status().is_success() || res.status() == 422, "{}", res.status());
    assert_ne!(res.status(), 500);

    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=metrics&stage=3")))
        .header("content-type", "application/json")
        .body("{\"metrics\": {\"a\\u0000b\": 1}, \"tool\": \"t\\u0000\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let stored: Value = res.json().await.unwrap();
    assert_eq!(stored["metrics"]["a\u{FFFD}b"].as_f64(), Some(1.0), "{stored}");
}

// --- Finding 12: idempotency keys ------------------------------------------------------------

#[tokio::test]
async fn a_retried_ledger_post_with_its_idempotency_key_stores_once() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let body = json!({ "lines": [{ "category": "host", "description": "node", "amount": "5.00" }] });
    let post = |key: &'static str, body: Value| {
        app.client
            .post(app.url(&format!("/api/v1/briefs/{brief}/ledger")))
            .header("idempotency-key", key)
            .json(&body)
            .send()
    };
    let first = post("retry-1", body.clone()).await.unwrap();
    assert_eq!(first.status(), 201);
    let again = post("retry-1", body.clone()).await.unwrap();
    assert_eq!(again.status(), 200);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    let again: Value = again.json().await.unwrap();
    assert_eq!(again["lines_added"], 1);
    assert_eq!(app.count("ledger_lines").await, 1, "one line for one retried request");
    let other = json!({ "lines": [{ "category": "host", "description": "node", "amount": "6.00" }] });
    assert_eq!(post("retry-1", other).await.unwrap().status(), 409);

    // Keys belong to their caller: the same key from another engineer's token is another key.
    let (_, admin) = person_token(&app, Role::Admin, Role::Admin, None).await;
    let res = bearer_client(&admin)
        .post(app.url(&format!("/api/v1/briefs/{brief}/ledger")))
        .header("idempotency-key", "retry-1")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    // And they expire after a day.
    sqlx::query("UPDATE ledger_idempotency_keys SET created_at = now() - interval '25 hours'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(post("retry-1", body).await.unwrap().status(), 201);
    assert_eq!(app.count("ledger_lines").await, 3);
}

#[tokio::test]
async fn evidence_idempotency_keys_belong_to_one_caller_and_expire() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let send = |client: reqwest::Client, body: &'static str| {
        client
            .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1")))
            .header("content-type", "text/plain")
            .header("idempotency-key", "k-1")
            .body(body)
            .send()
    };
    let one = app.token(Role::Agent, Some(brief.parse().unwrap())).await;
    let two = app.token(Role::Agent, Some(brief.parse().unwrap())).await;
    let gpu = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n";
    assert_eq!(send(bearer_client(&one), gpu).await.unwrap().status(), 201);
    assert_eq!(send(bearer_client(&one), gpu).await.unwrap().status(), 200);
    // Another agent's "k-1" neither replays the first's answer nor conflicts with it.
    let other = "GPU 0: NVIDIA L4 (UUID: GPU-2)\n";
    assert_eq!(send(bearer_client(&two), other).await.unwrap().status(), 201);
    sqlx::query("UPDATE idempotency_keys SET created_at = now() - interval '25 hours'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(send(bearer_client(&one), gpu).await.unwrap().status(), 201, "expired");
    assert_eq!(app.count("evidence").await, 3);
}

// --- Finding 13: decision.md -----------------------------------------------------------------

#[tokio::test]
async fn decision_md_keeps_what_people_typed_as_text() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new()
        .name("<script>alert(1)</script> | [click](javascript:alert(2))")
        .owner("<img src=x onerror=alert(3)>")
        .create(&app)
        .await;
    let id = brief["id"].as_str().unwrap();
    let review: Value = app
        .get(&format!("/api/v1/briefs/{id}/review"))
        .await
        .json()
        .await
        .unwrap();
    let digest = review["inputs_digest"].as_str().unwrap().to_owned();
    let (_, manager) = person_token(&app, Role::Manager, Role::Manager, None).await;
    let res = bearer_client(&manager)
        .post(app.url(&format!("/api/v1/briefs/{id}/approvals")))
        .json(&json!({
            "verdict": "reject",
            "comment": "fine\n\n# Approved by the CEO\n<iframe src=https://evil.example></iframe>",
            "inputs_digest": digest
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let md = app
        .get(&format!("/briefs/{id}/decision.md"))
        .await
        .text()
        .await
        .unwrap();
    // Every `<` and `[` people typed is escaped, so no tag or link survives.
    for raw in ["<script>", "<img", "<iframe", "[click]"] {
        for (at, _) in md.match_indices(raw) {
            assert!(md[..at].ends_with('\\'), "an unescaped {raw} in decision.md:\n{md}");
        }
    }
    assert!(!md.contains("](javascript:"), "{md}");
    assert!(
        !md.lines().any(|l| l.starts_with("# Approved")),
        "a comment made a heading:\n{md}"
    );
    assert!(md.contains("\\<script\\>alert\\(1\\)\\</script\\>"), "{md}");
    // The brief table keeps its shape: the name's `|` does not open a column.
    let title = md.lines().next().unwrap();
    assert!(title.contains("\\|"), "{title}");
}
