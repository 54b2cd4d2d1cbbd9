//! The fourth outside security review's findings, each reproduced first: role changes that only
//! suspended tokens, no way to unlock an account from the command line, and problem `type` links
//! that led nowhere.

use crate::common::{self, bearer_client, spawn_app, TestApp, PASSWORD};

use std::process::{Command, Output, Stdio};

use rentcheck::auth::{
    token::{self, NewToken},
    users, Role,
};
use serde_json::{json, Value};
use uuid::Uuid;

async fn mint(app: &TestApp, uid: Uuid, email: &str, role: Role, brief: Option<Uuid>) -> String {
    token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: format!("{} token", role.as_str()),
            subject: email.to_owned(),
            role,
            brief: brief.map(Into::into),
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(uid),
        },
    )
    .await
    .unwrap()
    .0
}

fn cli(app: &TestApp, args: &[&str]) -> Output {
    let data = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .args(args)
        .env("DATABASE_URL", &app.database_url)
        .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
        .env("RENTCHECK_DATA_DIR", data.path())
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[tokio::test]
async fn a_demotion_revokes_the_tokens_above_the_new_role_and_a_promotion_revives_none() {
    let app = spawn_app().await;
    let brief: Uuid = app.brief_id().await.parse().unwrap();
    let email = app.user(Role::Manager).await;
    let uid = users::by_email(&app.pool, &email).await.unwrap().unwrap().id;
    let manager = bearer_client(&mint(&app, uid, &email, Role::Manager, None).await);
    let engineer = bearer_client(&mint(&app, uid, &email, Role::Engineer, None).await);
    let agent = bearer_client(&mint(&app, uid, &email, Role::Agent, Some(brief)).await);
    let admin = bearer_client(&app.token(Role::Admin, None).await);
    let briefs = app.url("/api/v1/briefs");
    let status = |c: &reqwest::Client, url: &str| {
        let req = c.get(url);
        async move { req.send().await.unwrap().status().as_u16() }
    };
    assert_eq!(status(&manager, &briefs).await, 200);

    let set_role = |role: &str| {
        admin
            .put(app.url(&format!("/api/v1/users/{uid}")))
            .json(&json!({ "role": role }))
            .send()
    };
    assert_eq!(set_role("engineer").await.unwrap().status(), 200);
    assert_eq!(status(&manager, &briefs).await, 401, "the manager token is revoked");
    assert_eq!(
        status(&engineer, &briefs).await,
        200,
        "a token within the new role stays"
    );
    let sent = agent
        .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1")))
        .header("content-type", "text/plain")
        .body("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 201, "the agent tokens they minted stay");
    let revoked: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT revoked_at FROM api_tokens WHERE created_by = $1 AND role = 'manager'")
            .bind(uid)
            .fetch_one(&app.pool)
            .await
            .unwrap();
    assert!(revoked.is_some(), "revoked, not suspended");

    // Promoted again: the revoked token stays revoked (before, it answered 200 again).
    assert_eq!(set_role("manager").await.unwrap().status(), 200);
    assert_eq!(status(&manager, &briefs).await, 401);

    // The command line does the same.
    let second = bearer_client(&mint(&app, uid, &email, Role::Manager, None).await);
    assert_eq!(status(&second, &briefs).await, 200);
    let out = cli(&app, &["user", "set-role", "--email", &email, "--role", "engineer"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let after = common::time_to_refusal(&second, &briefs, 200).await;
    assert!(after < std::time::Duration::from_millis(500), "refused after {after:?}");
}

#[tokio::test]
async fn an_operator_unlocks_an_account_from_the_command_line() {
    let app = spawn_app().await;
    let email = app.user(Role::Engineer).await;
    sqlx::query(
        "INSERT INTO sign_in_accounts (email, failures, last_failure_at, locked_at) VALUES ($1, 10, now(), now())",
    )
    .bind(&email)
    .execute(&app.pool)
    .await
    .unwrap();
    assert!(app.login_as(&email, PASSWORD).await.is_none(), "locked");

    let out = cli(&app, &["user", "unlock", "--email", &email.to_uppercase()]);
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(printed.contains(&format!("unlocked {email}")), "{printed}");
    assert!(app.login_as(&email, PASSWORD).await.is_some(), "signs in again");
    let audited: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM audit_log WHERE action = 'login.unlock' AND actor = 'cli' AND target = $1",
    )
    .bind(&email)
    .fetch_one(&app.pool)
    .await
    .unwrap();
    assert_eq!(audited, 1);

    let again = cli(&app, &["user", "unlock", "--email", &email]);
    assert!(again.status.success());
    assert!(String::from_utf8_lossy(&again.stdout).contains("was not locked"));
    let nobody = cli(&app, &["user", "unlock", "--email", "nobody@example.com"]);
    assert!(!nobody.status.success());
    assert!(String::from_utf8_lossy(&nobody.stderr).contains("no user nobody@example.com"));
}

#[tokio::test]
async fn a_problems_type_leads_to_the_page_that_explains_it() {
    let app = spawn_app().await;
    let missing = Uuid::now_v7();
    let res = app.get(&format!("/api/v1/briefs/{missing}")).await;
    assert_eq!(res.status(), 404);
    let problem: Value = res.json().await.unwrap();
    let kind = problem["type"].as_str().unwrap();
    let (page, anchor) = kind.split_once('#').unwrap();
    // Followed without any session or token, as a client that got the error may have none.
    let res = app.anon.get(app.url(page)).send().await.unwrap();
    assert_eq!(res.status(), 200, "{kind}");
    let html = res.text().await.unwrap();
    assert!(html.contains(&format!("id=\"{anchor}\"")), "{kind} has its entry");
    assert!(html.contains("404 Not Found"), "with its status");
}
