//! The fourth outside security review's findings, each reproduced first: role changes that only
//! suspended tokens, no way to unlock an account from the command line, and problem `type` links
//! that led nowhere.

use crate::common::builders::{BriefBuilder, CardBuilder};
use crate::common::{bearer_client, spawn_app, TestApp, PASSWORD};

use std::process::{Command, Output, Stdio};

use rentcheck::auth::{
    token::{self, NewToken},
    users, Role,
};
use serde_json::{json, Value};
use uuid::Uuid;

async fn mint(app: &TestApp, uid: rentcheck::ids::UserId, email: &str, role: Role, brief: Option<Uuid>) -> String {
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
    let out = app
        .heard_of(async { cli(&app, &["user", "set-role", "--email", &email, "--role", "engineer"]) })
        .await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(status(&second, &briefs).await, 401);
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

async fn review(app: &TestApp, client: &reqwest::Client, brief: &str) -> Value {
    client
        .get(app.url(&format!("/api/v1/briefs/{brief}/review")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn approve(app: &TestApp, client: &reqwest::Client, brief: &str, trial: &str) -> reqwest::Response {
    let digest = review(app, client, brief).await["inputs_digest"].clone();
    client
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "approve", "trial": trial, "comment": "ok with it", "inputs_digest": digest }))
        .send()
        .await
        .unwrap()
}

/// The card's criteria, all optional but those `keep` says, through the API as `client`.
async fn loosen_card(app: &TestApp, client: &reqwest::Client, brief: &str, mut keep: impl FnMut(&Value) -> bool) {
    let card: Value = client
        .get(app.url(&format!("/api/v1/briefs/{brief}/card")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut criteria = card["criteria"].clone();
    for c in criteria.as_array_mut().unwrap() {
        let required = keep(c);
        c["required"] = json!(required);
    }
    let res = client
        .put(app.url(&format!("/api/v1/briefs/{brief}/card")))
        .json(&json!({ "criteria": criteria }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
}

/// "Since the last approval" is per trial: another manager's approval of trial 1 does not let the
/// manager who loosened the card approve trial 2 alone (it did before).
#[tokio::test]
async fn separation_of_duties_holds_for_each_trial() {
    let app = spawn_app().await;
    let mine_email = app.user(Role::Manager).await;
    let mine_id = users::by_email(&app.pool, &mine_email).await.unwrap().unwrap().id;
    let mine = bearer_client(&mint(&app, mine_id, &mine_email, Role::Manager, None).await);
    let body = BriefBuilder::new().shared_hardware_ok().json();
    let res = mine.post(app.url("/api/v1/briefs")).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 201);
    let brief = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let res = mine
        .post(app.url(&format!("/api/v1/briefs/{brief}/trials")))
        .json(&json!({ "name": "Trial 2" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    let trials: Value = mine
        .get(app.url(&format!("/api/v1/briefs/{brief}/trials")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<String> = trials["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids.len(), 2);
    let mut first = true;
    loosen_card(&app, &mine, &brief, |_| std::mem::take(&mut first)).await;

    let other_email = app.user(Role::Manager).await;
    let other_id = users::by_email(&app.pool, &other_email).await.unwrap().unwrap().id;
    let other = bearer_client(&mint(&app, other_id, &other_email, Role::Manager, None).await);
    let res = approve(&app, &other, &brief, &ids[0]).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());

    let res = approve(&app, &mine, &brief, &ids[1]).await;
    assert_eq!(
        res.status(),
        403,
        "trial 2 was never approved by anyone since the change"
    );
    assert!(res.text().await.unwrap().contains("another manager must approve it"));
    // Trial 1, which the other manager approved after the change, is theirs to approve again.
    let res = approve(&app, &mine, &brief, &ids[0]).await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
}

/// A required criterion every value meets (`gpu.count ≥ 0`, met with 0 GPUs posted) tests
/// nothing: the trial is not approved as accepted on it.
#[tokio::test]
async fn a_card_whose_only_required_criterion_cannot_fail_is_not_approved_as_accepted() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let mut criteria: Vec<Value> = card["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .cloned()
        .map(|mut c| {
            c["required"] = json!(false);
            c
        })
        .collect();
    criteria.retain(|c| c["key"] != "gpu.count");
    criteria
        .push(json!({ "key": "gpu.count", "op": "ge", "threshold": 0, "unit": "count", "stage": 1, "required": true }));
    let res = CardBuilder::of(json!(criteria)).put(&app, &brief).await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let res = app
        .post_raw_evidence(
            &brief,
            "kind=metrics&stage=1",
            "application/json",
            br#"{"metrics": {"gpu.count": 0}}"#.to_vec(),
        )
        .await;
    assert!(res.status().is_success(), "{}", res.text().await.unwrap());
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let r = review(&app, &manager, &brief).await;
    assert_eq!(r["trials"][0]["accepted"], true, "accepted on gpu.count = 0: {r:.400}");
    // The brief's one trial is the one approved.
    let body = json!({ "verdict": "approve", "comment": "", "inputs_digest": r["inputs_digest"] });
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "verdict");
    assert!(
        problem["errors"][0]["message"].as_str().unwrap().contains("could fail"),
        "{problem}"
    );
    assert_eq!(app.count("approvals").await, 0);
}

/// A role is decoded from its stored text, and a stored value that is no role is an error: before,
/// a session of such a person was read as an engineer's.
#[tokio::test]
async fn a_stored_role_that_is_no_role_is_refused_never_read_as_an_engineer() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    assert_eq!(person.get(app.url("/")).await.status(), 200);
    // Only a hand-edited database holds such a value: the table's check refuses it otherwise.
    sqlx::query("ALTER TABLE users DROP CONSTRAINT users_role_check")
        .execute(&app.pool)
        .await
        .unwrap();
    sqlx::query("UPDATE users SET role = 'root' WHERE email = $1")
        .bind(&person.email)
        .execute(&app.pool)
        .await
        .unwrap();
    let res = person.get(app.url("/")).await;
    assert!(res.status().is_server_error(), "{}", res.status());
    let page = res.text().await.unwrap();
    assert!(!page.contains("engineer"), "nobody is shown as an engineer: {page}");
}
