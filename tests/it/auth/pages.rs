//! People in the browser: sign-in, sessions, CSRF, lockout, escaping, tokens and users pages.

use crate::common;
use crate::common::builders::BriefBuilder;

use common::{cookie_client, input_value, spawn_app, PASSWORD};
use rentcheck::auth::Role;

fn location(res: &reqwest::Response) -> String {
    res.headers()["location"].to_str().unwrap().to_owned()
}

#[tokio::test]
async fn pages_send_anonymous_visitors_to_login_and_back() {
    let app = spawn_app().await;
    for path in ["/", "/briefs/new", "/admin/users"] {
        let res = app.anon.get(app.url(path)).send().await.unwrap();
        assert_eq!(res.status(), 303, "{path}");
        assert!(
            location(&res).starts_with("/login?next="),
            "{path} → {}",
            location(&res)
        );
    }
    let brief = BriefBuilder::new().create(&app).await;
    let path = format!("/briefs/{}", brief["id"].as_str().unwrap());
    let res = app.anon.get(app.url(&path)).send().await.unwrap();
    assert_eq!(
        location(&res),
        format!("/login?next=%2Fbriefs%2F{}", brief["id"].as_str().unwrap())
    );
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_email_get_the_same_answer() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    assert!(app.login_as(&email, "wrong password here").await.is_none());
    assert!(app
        .login_as("nobody@example.com", "wrong password here")
        .await
        .is_none());

    // Look at the two answers themselves.
    let answer = |email: String| {
        let app = &app;
        async move {
            let res = app.submit_login(&cookie_client(), &email, "nope-nope-nope", "/").await;
            let status = res.status();
            let body = res.text().await.unwrap();
            (
                status,
                body.replace(&input_value(&body, "csrf_token").unwrap(), ""),
                email,
            )
        }
    };
    let (s1, b1, e1) = answer(email.clone()).await;
    let (s2, b2, e2) = answer("ghost@example.com".into()).await;
    assert_eq!(s1, 401);
    assert_eq!(s2, 401);
    assert!(b1.contains("Email or password is incorrect."));
    assert_eq!(b1.replace(&e1, "E"), b2.replace(&e2, "E"), "no user enumeration");
    let failures: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'login.failed'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(failures, 4, "every failed sign-in is in the audit log");
}

#[tokio::test]
async fn repeated_failures_make_the_account_wait_before_its_next_try() {
    // The account waits longer after each failure (1 s, 2 s, 4 s …) from any
    // address, instead of one address being locked out for 15 minutes.
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    for _ in 0..rentcheck::auth::lockout::FREE_FAILURES {
        assert!(app.login_as(&email, "not the password").await.is_none());
    }
    // As if three more had failed just now: the next try waits 8 seconds.
    sqlx::query("UPDATE sign_in_accounts SET failures = failures + 3, last_failure_at = now() WHERE email = $1")
        .bind(&email)
        .execute(&app.pool)
        .await
        .unwrap();
    let res = app.submit_login(&cookie_client(), &email, PASSWORD, "/").await;
    assert_eq!(res.status(), 429, "waits even with the right password");
    let wait: u64 = res.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((7..=9).contains(&wait), "Retry-After: {wait}");
    let page = res.text().await.unwrap();
    assert!(
        page.contains("Too many failed sign-ins for this account. Wait"),
        "{page}"
    );
    let refused: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'login.refused'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(refused, 1);
    // Once the wait is over, the right password signs in and the count starts again.
    sqlx::query("UPDATE sign_in_accounts SET last_failure_at = now() - interval '1 minute'")
        .execute(&app.pool)
        .await
        .unwrap();
    assert!(app.login_as(&email, PASSWORD).await.is_some());
    let failures: Option<i32> = sqlx::query_scalar("SELECT failures FROM sign_in_accounts WHERE email = $1")
        .bind(&email)
        .fetch_optional(&app.pool)
        .await
        .unwrap();
    assert_eq!(failures, None, "nothing is kept of an account that signed in");
}

#[tokio::test]
async fn state_changing_forms_need_the_session_csrf_token() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let fields = |csrf: &str| {
        vec![
            ("csrf_token".to_owned(), csrf.to_owned()),
            ("name".to_owned(), "CSRF probe".to_owned()),
            ("owner".to_owned(), "me@example.com".to_owned()),
            ("workload_kind".to_owned(), "realtime-inference".to_owned()),
            (
                "catalog_model".to_owned(),
                "meta-llama/Llama-3.1-8B-Instruct".to_owned(),
            ),
            ("precision".to_owned(), "bf16".to_owned()),
            ("context_length".to_owned(), "4096".to_owned()),
            ("concurrency".to_owned(), "4".to_owned()),
            ("data_boundary".to_owned(), "shared-ok".to_owned()),
            ("allocation_boundary".to_owned(), "vm".to_owned()),
            ("intent".to_owned(), "save".to_owned()),
        ]
    };
    let missing: Vec<_> = fields("").into_iter().skip(1).collect();
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .form(&missing)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .form(&fields("forged"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(app.count("briefs").await, 0);
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .form(&fields(&person.csrf))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(app.count("briefs").await, 1);

    // A form posted from another site is refused even with the token.
    let res = person
        .client
        .post(app.url("/briefs/new"))
        .header("origin", "https://evil.example")
        .form(&fields(&person.csrf))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(app.count("briefs").await, 1);
}

#[tokio::test]
async fn the_login_form_has_its_own_csrf_check() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    let res = app
        .anon
        .post(app.url("/login"))
        .form(&[("email", email.as_str()), ("password", PASSWORD)])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
}

#[tokio::test]
async fn login_rotates_the_session_and_logout_ends_it() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let sessions_before: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions_before, 1);

    // Signing in again from the same browser replaces the session rather than adding one.
    let res = app.submit_login(&person.client, &person.email, PASSWORD, "/").await;
    assert_eq!(res.status(), 303);
    let cookie = res.headers()["set-cookie"].to_str().unwrap().to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Lax"),
        "{cookie}"
    );
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 1, "the old session was deleted at login");

    let home = person
        .client
        .get(app.url("/"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = input_value(&home, "csrf_token").unwrap();
    assert_eq!(
        person.client.get(app.url("/logout")).send().await.unwrap().status(),
        405,
        "no GET logout"
    );
    let res = person
        .client
        .post(app.url("/logout"))
        .form(&[("csrf_token", csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let res = person.client.get(app.url("/")).send().await.unwrap();
    assert_eq!(res.status(), 303, "signed out");
    let sessions: i64 = sqlx::query_scalar("SELECT count(*) FROM sessions")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(sessions, 0);
}

#[tokio::test]
async fn login_never_redirects_off_site() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    let client = cookie_client();
    for (next, expected) in [
        ("//evil.example/x", "/"),
        ("https://evil.example", "/"),
        ("/briefs/new", "/briefs/new"),
    ] {
        let res = app.submit_login(&client, &email, PASSWORD, next).await;
        assert_eq!(location(&res), expected, "next={next}");
    }
}

#[tokio::test]
async fn a_script_in_a_brief_name_is_text_on_every_page() {
    let app = spawn_app().await;
    let evil = "<script>alert(1)</script>";
    let brief = BriefBuilder::new()
        .name(evil)
        .owner("\"><img src=x onerror=alert(2)>")
        .create(&app)
        .await;
    let id = brief["id"].as_str().unwrap();
    let person = app.login_owner().await;
    for path in [
        "/".to_owned(),
        format!("/briefs/{id}"),
        format!("/briefs/{id}/edit"),
        format!("/briefs/{id}/tokens"),
    ] {
        let html = person
            .client
            .get(app.url(&path))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(
            html.contains("&#60;script&#62;alert(1)&#60;/script&#62;"),
            "{path} shows the name as text"
        );
        assert!(!html.contains(evil), "{path} must not contain a live script");
        assert!(!html.contains("<img src=x"), "{path} must not contain a live tag");
    }
}

#[tokio::test]
async fn minting_shows_the_token_once_and_revoking_stops_it_at_once() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().create(&app).await;
    let id = brief["id"].as_str().unwrap();
    let person = app.login_owner().await;
    let page = format!("/briefs/{id}/tokens");
    let res = person
        .client
        .post(app.url(&page))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("name", "node-1 harness"),
            ("ttl", "7d"),
        ])
        .send()
        .await
        .unwrap();
    // Post/redirect/get: the mint answers a redirect, and the page it leads to shows the token once.
    assert_eq!(res.status(), 303);
    assert_eq!(res.headers()["location"], format!("{page}#minted-token"));
    let res = person.client.get(app.url(&page)).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["cache-control"], "no-store");
    let html = res.text().await.unwrap();
    let start = html.find("id=\"token-value\">").unwrap() + "id=\"token-value\">".len();
    let token = html[start..start + html[start..].find('<').unwrap()].to_owned();
    assert!(html.contains("curl -X POST"), "a copy-paste example comes with it");
    assert_eq!(token.matches('.').count(), 2, "a JWT: {token}");

    // The token is real: an agent token is recognised (403: agents only send), not unknown (401).
    let agent = common::bearer_client(&token);
    let res = agent
        .get(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);

    let listing = person
        .client
        .get(app.url(&page))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(listing.contains("node-1 harness"));
    assert!(!listing.contains(&token), "the token is never shown again");
    let jti: uuid::Uuid = sqlx::query_scalar("SELECT jti FROM api_tokens WHERE name = 'node-1 harness'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let res = person
        .client
        .post(app.url(&format!("{page}/{jti}/revoke")))
        .form(&[("csrf_token", person.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let res = agent
        .get(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401, "revoked tokens stop at once");

    let actions: Vec<String> =
        sqlx::query_scalar("SELECT action FROM audit_log WHERE target = $1 AND action LIKE 'token.%' ORDER BY at")
            .bind(format!("brief:{id}"))
            .fetch_all(&app.pool)
            .await
            .unwrap();
    assert_eq!(actions, ["token.mint", "token.revoke"]);
    let tamper = sqlx::query("UPDATE audit_log SET actor = 'someone else'")
        .execute(&app.pool)
        .await;
    assert!(tamper.is_err(), "the audit log is append-only");
    assert!(sqlx::query("DELETE FROM audit_log").execute(&app.pool).await.is_err());
}

#[tokio::test]
async fn only_admins_manage_users() {
    let app = spawn_app().await;
    for role in [Role::Engineer, Role::Manager] {
        let person = app.login(role).await;
        let res = person.client.get(app.url("/admin/users")).send().await.unwrap();
        assert_eq!(res.status(), 403, "{role:?}");
        let res = person
            .client
            .post(app.url("/admin/users"))
            .form(&[
                ("csrf_token", person.csrf.as_str()),
                ("email", "new@example.com"),
                ("role", "admin"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 403, "{role:?}");
    }
    let admin = app.login(Role::Admin).await;
    let res = admin
        .client
        .post(app.url("/admin/users"))
        .form(&[
            ("csrf_token", admin.csrf.as_str()),
            ("email", "New@Example.com"),
            ("role", "manager"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "post/redirect/get");
    let html = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(html.contains("new@example.com"));
    let password = html
        .split("<pre class=\"raw\">")
        .nth(1)
        .unwrap()
        .split('<')
        .next()
        .unwrap()
        .to_owned();
    assert!(
        app.login_as("new@example.com", &password).await.is_some(),
        "the shown password works"
    );

    // A taken or malformed email is refused at its field with what was typed kept (the form came
    // back empty, the message in a banner that began with the field's key).
    for (email, status, message) in [("new@example.com", 409, "already exists"), ("bob@", 422, "email")] {
        let res = admin
            .client
            .post(app.url("/admin/users"))
            .form(&[
                ("csrf_token", admin.csrf.as_str()),
                ("email", email),
                ("role", "manager"),
            ])
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), status, "{email}");
        let page = res.text().await.unwrap();
        assert!(page.contains(&format!("id=\"add-email\" value=\"{email}\"")), "{page}");
        assert!(page.contains("<option value=\"manager\" selected>"), "{page}");
        let at_field = page
            .split("id=\"add-email-error\" role=\"alert\">")
            .nth(1)
            .unwrap_or("");
        assert!(at_field.contains(message), "{email}: {page}");
    }
}

#[tokio::test]
async fn first_run_setup_creates_one_admin_then_closes() {
    let app = spawn_app().await;
    // spawn_app's API engineer is a person; a first run is one with nobody.
    sqlx::query("DELETE FROM users").execute(&app.pool).await.unwrap();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .cookie_store(true)
        .build()
        .unwrap();
    let login = client
        .get(app.url("/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        login.contains("rentcheck user add"),
        "the login page explains the first run"
    );
    let setup = app.url(&format!("/setup?code={}", app.setup_code));
    let page = client.get(&setup).send().await.unwrap();
    assert_eq!(page.status(), 200);
    let csrf = input_value(&page.text().await.unwrap(), "csrf_token").unwrap();
    let res = client
        .post(app.url("/setup"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("code", app.setup_code.as_str()),
            ("email", "root@example.com"),
            ("password", "short"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "a short password is refused");
    let page = client.get(&setup).send().await.unwrap().text().await.unwrap();
    let csrf = input_value(&page, "csrf_token").unwrap();
    let res = client
        .post(app.url("/setup"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("code", app.setup_code.as_str()),
            ("email", "root@example.com"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let home = client.get(app.url("/")).send().await.unwrap();
    assert_eq!(home.status(), 200, "signed in as the new admin");
    assert!(home.text().await.unwrap().contains("root@example.com"));
    // Closed once a user exists: it says so and where to log in, to whoever asks, and a POST
    // creates nothing.
    let closed = client.get(app.url("/setup")).send().await.unwrap();
    assert_eq!(closed.status(), 410, "closed once a user exists");
    let page = closed.text().await.unwrap();
    assert!(page.contains("already set up"), "{page}");
    assert!(page.contains("href=\"/login\""), "it links to the login: {page}");
    assert!(
        !page.contains("name=\"password\""),
        "no form to make another admin: {page}"
    );
    let anon = cookie_client();
    let res = anon
        .post(app.url("/setup"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("email", "second@example.com"),
            ("password", PASSWORD),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 410);
    assert_eq!(app.count("users").await, 1, "nothing was created");
}

/// The page's HTML as text: askama escapes quotes and ampersands.
fn unescape(html: &str) -> String {
    html.replace("&#62;", ">")
        .replace("&gt;", ">")
        .replace("&#60;", "<")
        .replace("&lt;", "<")
        .replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

#[tokio::test]
async fn the_token_pages_curl_line_posts_only_when_the_tool_ran_and_a_repeat_is_a_replay() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let person = app.login_owner().await;
    let page = format!("/briefs/{id}/tokens");
    let res = person
        .client
        .post(app.url(&page))
        .form(&[("csrf_token", person.csrf.as_str()), ("name", "node-1"), ("ttl", "1d")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let html = unescape(&person.get(app.url(&page)).await.text().await.unwrap());
    let opening = "<pre class=\"raw\" id=\"curl-example\">";
    let start = html.find(opening).expect("the curl example") + opening.len();
    // The lines as shown, sent to this test's server rather than the default public URL.
    let lines = html[start..start + html[start..].find("</pre>").unwrap()].replace("http://127.0.0.1:8080", &app.base);
    assert!(lines.starts_with("export RENTCHECK_TOKEN='"), "{lines:?}");
    assert!(lines.contains("-H \"Idempotency-Key: $(hostname)-gpus-"), "{lines}");
    assert!(
        html.contains("sends each output with an <code>Idempotency-Key</code>"),
        "the collect line says it sends keys too"
    );
    // The collect line is the whole Test plan (collect --plan), and the page links the plan.
    let trial: String = sqlx::query_scalar("SELECT id::text FROM trials WHERE brief_id = $1::uuid")
        .bind(id.to_string())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(
        html.contains(&format!("--plan --brief {id} --trial {trial}\n</pre>"))
            || html.contains(&format!("--plan --brief {id} --trial {trial}</pre>")),
        "the collect line runs the plan"
    );
    assert!(html.contains(&format!("href=\"/briefs/{id}/trials/{trial}/plan\" id=\"plan-link\"")));

    // A machine without nvidia-smi: only the tools the line needs besides it.
    let machine = tempfile::tempdir().unwrap();
    let bin = machine.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    for tool in ["curl", "hostname", "date"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| std::path::Path::new(d).join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is installed"));
        std::os::unix::fs::symlink(found, bin.join(tool)).unwrap();
    }
    let run = |lines: String| {
        let mut cmd = std::process::Command::new("/bin/bash");
        cmd.args(["-c", &lines])
            .env_clear()
            .env("PATH", &bin)
            .current_dir(machine.path());
        tokio::task::spawn_blocking(move || cmd.output().unwrap())
    };
    let out = run(lines.clone()).await.unwrap();
    assert!(!out.status.success(), "the line fails where nvidia-smi is missing");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("nvidia-smi: command not found"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(app.count("evidence").await, 0, "and posts nothing");

    // With nvidia-smi there, it posts its output once; run again within the hour, a replay.
    let smi = bin.join("nvidia-smi");
    std::fs::write(
        &smi,
        format!(
            "#!/bin/bash\n/bin/cat {}\n",
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/nvidia-smi-list/h200-x8.txt")
                .display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&smi, std::fs::Permissions::from_mode(0o755)).unwrap();
    for _ in 0..2 {
        let out = run(lines.clone()).await.unwrap();
        let answer = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "{lines:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(answer.contains("\"parse_status\":\"ok\""), "{answer}");
    }
    assert_eq!(app.count("evidence").await, 1, "the repeat was a replay");
}
