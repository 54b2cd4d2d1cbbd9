//! The `rentcheck user` and `rentcheck token` commands against a real database.

use crate::common;
use crate::common::builders::BriefBuilder;

use std::{
    io::Write,
    process::{Command, Output, Stdio},
};

use common::{bearer_client, spawn_app, TestApp};

/// Runs `rentcheck args` against `app`'s database and returns once `app` has heard of what it
/// changed (the change notification: a token row kept for a second is forgotten then, so the next
/// request is refused at once).
async fn heard(app: &TestApp, args: &[&str]) -> Output {
    app.heard_of(async { rentcheck(app, args, None) }).await
}

fn rentcheck(app: &TestApp, args: &[&str], stdin: Option<&str>) -> Output {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .args(args)
        .env("DATABASE_URL", &app.database_url)
        .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
        .env("RENTCHECK_DATA_DIR", data.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if let Some(text) = stdin {
        child.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    }
    drop(child.stdin.take());
    child.wait_with_output().unwrap()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).trim().to_owned()
}

#[tokio::test]
async fn user_add_then_sign_in() {
    let app = spawn_app().await;
    let out = rentcheck(
        &app,
        &[
            "user",
            "add",
            "--email",
            "Lead@Example.com",
            "--role",
            "manager",
            "--password-stdin",
        ],
        Some("a long enough password\n"),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(app
        .login_as("lead@example.com", "a long enough password")
        .await
        .is_some());

    // Without --password-stdin a password is generated and printed once.
    let out = rentcheck(
        &app,
        &["user", "add", "--email", "eng@example.com", "--role", "engineer"],
        None,
    );
    assert!(out.status.success());
    let printed = stdout(&out);
    let password = printed.rsplit("password (shown once): ").next().unwrap().trim();
    assert!(app.login_as("eng@example.com", password).await.is_some(), "{printed}");

    let dup = rentcheck(
        &app,
        &["user", "add", "--email", "eng@example.com", "--role", "engineer"],
        None,
    );
    assert!(!dup.status.success());
    assert!(String::from_utf8_lossy(&dup.stderr).contains("already exists"));
    let bad_role = rentcheck(
        &app,
        &["user", "add", "--email", "x@example.com", "--role", "agent"],
        None,
    );
    assert!(!bad_role.status.success());
}

#[tokio::test]
async fn token_mint_and_revoke() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().create_id(&app).await;
    let out = rentcheck(
        &app,
        &[
            "user",
            "add",
            "--email",
            "eng@example.com",
            "--role",
            "engineer",
            "--password-stdin",
        ],
        Some("another long password"),
    );
    assert!(out.status.success());

    let out = rentcheck(
        &app,
        &[
            "token",
            "mint",
            "--email",
            "eng@example.com",
            "--brief",
            &id,
            "--role",
            "agent",
            "--ttl",
            "7d",
        ],
        None,
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let agent = stdout(&out);
    let res = bearer_client(&agent)
        .get(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(
        res.status(),
        403,
        "a valid agent token: recognised, but agents only send"
    );

    let out = rentcheck(&app, &["token", "mint", "--email", "eng@example.com"], None);
    assert!(out.status.success());
    let engineer = stdout(&out);
    let res = bearer_client(&engineer)
        .get(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the user's own role by default");

    let jti: String = sqlx::query_scalar("SELECT jti::text FROM api_tokens WHERE role = 'agent'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    // Revoked in another process: refused as soon as the server hears of it.
    let out = heard(&app, &["token", "revoke", &jti]).await;
    assert!(out.status.success());
    let res = bearer_client(&agent)
        .get(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);

    for (args, why) in [
        (
            vec!["token", "mint", "--email", "eng@example.com", "--role", "admin"],
            "cannot mint",
        ),
        (
            vec!["token", "mint", "--email", "eng@example.com", "--role", "agent"],
            "needs --brief",
        ),
        (vec!["token", "mint", "--email", "nobody@example.com"], "no user"),
    ] {
        let out = rentcheck(&app, &args, None);
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains(why), "{args:?}");
    }
}

#[tokio::test]
async fn secrets_in_headers_never_reach_the_logs() {
    let app = spawn_app().await;
    let token = app.token(rentcheck::auth::Role::Engineer, None).await;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let data = tempfile::tempdir().unwrap();
    let log_path = data.path().join("server.log");
    let mut server = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .arg("serve")
        .env("DATABASE_URL", &app.database_url)
        .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
        .env("RENTCHECK_DATA_DIR", data.path())
        .env("RENTCHECK_ADDR", format!("127.0.0.1:{port}"))
        .env("RUST_LOG", "trace")
        .stderr(std::fs::File::create(&log_path).unwrap())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let client = bearer_client(&token);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Ok(r) = client
            .get(format!("{base}/api/v1/briefs"))
            .header("cookie", "rentcheck_session=cookie-secret-value")
            .send()
            .await
        {
            if r.status() == 200 {
                break;
            }
        }
        assert!(std::time::Instant::now() < deadline, "server did not answer");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    Command::new("kill")
        .arg("-TERM")
        .arg(server.id().to_string())
        .status()
        .unwrap();
    server.wait().unwrap();
    let log = std::fs::read_to_string(&log_path).unwrap();
    assert!(log.contains("/api/v1/briefs"), "the request was logged: {log}");
    assert!(!log.contains(&token), "the bearer token must not be logged");
    assert!(!log.contains("cookie-secret-value"), "cookies must not be logged");
    assert!(!log.contains(&app.jwt_secret), "the signing secret must not be logged");
}

#[tokio::test]
async fn serve_keeps_raw_evidence_where_rentcheck_evidence_store_says() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let data = tempfile::tempdir().unwrap();
    let serve = |store: &str, port: u16| {
        Command::new(env!("CARGO_BIN_EXE_rentcheck"))
            .arg("serve")
            .env("DATABASE_URL", &app.database_url)
            .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
            .env("RENTCHECK_DATA_DIR", data.path())
            .env("RENTCHECK_ADDR", format!("127.0.0.1:{port}"))
            .env("RENTCHECK_EVIDENCE_STORE", store)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };

    // A setting it cannot use stops the start, saying why.
    let refused = serve("ftp://evidence", 0).wait_with_output().unwrap();
    assert!(!refused.status.success());
    assert!(String::from_utf8_lossy(&refused.stderr).contains("RENTCHECK_EVIDENCE_STORE must be"));

    // A directory store: an upload's bytes land in it under their sha256.
    let store = data.path().join("objects");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = serve(&format!("file://{}", store.display()), port);
    let url = format!("http://127.0.0.1:{port}/api/v1/briefs/{brief}/evidence?kind=log&stage=1");
    let bytes = b"harness log line\n".to_vec();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        match app.client.post(&url).body(bytes.clone()).send().await {
            Ok(r) => break r.status(),
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await
            }
            Err(e) => panic!("server did not answer: {e}"),
        }
    };
    server.kill().unwrap();
    server.wait().unwrap();
    assert_eq!(status, 201);
    let object = store
        .join("sha256")
        .join(rentcheck::evidence::model::sha256_hex(&bytes));
    assert_eq!(std::fs::read(object).unwrap(), bytes);
}

#[tokio::test]
async fn user_lifecycle_and_team_commands() {
    let app = spawn_app().await;
    let email = app.user(rentcheck::auth::Role::Manager).await;
    let out = rentcheck(&app, &["token", "mint", "--email", &email], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let token = stdout(&out);
    let client = bearer_client(&token);
    let briefs = app.url("/api/v1/briefs");
    assert_eq!(client.get(&briefs).send().await.unwrap().status(), 200);

    let out = heard(&app, &["user", "disable", "--email", &email]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(stdout(&out).contains("disabled"));
    assert_eq!(client.get(&briefs).send().await.unwrap().status(), 401);
    assert!(rentcheck(&app, &["user", "enable", "--email", &email], None)
        .status
        .success());
    // Disabling revoked the token, and enabling again revives nothing.
    assert_eq!(client.get(&briefs).send().await.unwrap().status(), 401);
    let out = rentcheck(&app, &["token", "mint", "--email", &email], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let client = bearer_client(&stdout(&out));
    assert_eq!(client.get(&briefs).send().await.unwrap().status(), 200);
    let out = heard(&app, &["user", "set-role", "--email", &email, "--role", "engineer"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // A manager token of a person who is now an engineer.
    assert_eq!(client.get(&briefs).send().await.unwrap().status(), 401);
    let out = rentcheck(&app, &["user", "set-role", "--email", &email, "--role", "agent"], None);
    assert!(!out.status.success());

    let out = rentcheck(
        &app,
        &["user", "set-password", "--email", &email, "--password-stdin"],
        Some("a new long password\n"),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(app.login_as(&email, "a new long password").await.is_some());
    let out = rentcheck(&app, &["user", "set-password", "--email", &email], None);
    assert!(stdout(&out).contains("password (shown once)"));
    assert!(
        !rentcheck(&app, &["user", "disable", "--email", "nobody@example.com"], None)
            .status
            .success()
    );

    // Teams: a member of a team a brief is shared with may edit it.
    let brief = app.brief_id().await;
    assert!(rentcheck(&app, &["team", "add", "serving"], None).status.success());
    let out = rentcheck(&app, &["team", "add-member", "serving", "--email", &email], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let engineer_token = stdout(&rentcheck(&app, &["token", "mint", "--email", &email], None));
    let put = || {
        bearer_client(&engineer_token)
            .put(app.url(&format!("/api/v1/briefs/{brief}")))
            .json(&common::valid_brief())
            .send()
    };
    assert_eq!(put().await.unwrap().status(), 403);
    assert!(rentcheck(&app, &["team", "share", "serving", "--brief", &brief], None)
        .status
        .success());
    assert_eq!(put().await.unwrap().status(), 200);
    let listed = stdout(&rentcheck(&app, &["team", "list"], None));
    assert!(listed.contains("serving") && listed.contains(&email), "{listed}");
    assert!(
        rentcheck(&app, &["team", "unshare", "serving", "--brief", &brief], None)
            .status
            .success()
    );
    assert_eq!(put().await.unwrap().status(), 403);
    let out = rentcheck(&app, &["brief-owner", &brief, "--email", &email], None);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(put().await.unwrap().status(), 200, "now its owner");
}

#[tokio::test]
async fn collect_reads_its_token_from_a_private_file_only() {
    let app = spawn_app().await;
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "not-a-real-token\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let path = file.display().to_string();
    let brief = uuid::Uuid::now_v7().to_string();
    let out = rentcheck(
        &app,
        &[
            "collect",
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--token-file",
            &path,
        ],
        None,
    );
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("chmod 600"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A change to people, teams or tokens is stored with its audit row or not at all: with the
/// audit log refusing rows (a trigger standing in for a failed insert), nothing is changed.
#[tokio::test]
async fn a_change_whose_audit_row_cannot_be_written_is_not_made() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    // The people the changes name, made before the log refuses anything.
    let admin = bearer_client(&app.token(rentcheck::auth::Role::Admin, None).await);
    app.token(rentcheck::auth::Role::Engineer, None).await;
    let mint_agent_token = || {
        let args = [
            "token",
            "mint",
            "--email",
            "engineer@example.com",
            "--brief",
            &brief,
            "--role",
            "agent",
        ];
        rentcheck(&app, &args, None)
    };
    let out = mint_agent_token();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    sqlx::query(
        "CREATE FUNCTION refuse_audit() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN RAISE EXCEPTION 'audit log refused %', NEW.action; END $$",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    sqlx::query("CREATE TRIGGER refuse_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION refuse_audit()")
        .execute(&app.pool)
        .await
        .unwrap();
    let count = |table: &'static str| app.count(table);
    let (teams, users, tokens) = (count("teams").await, count("users").await, count("api_tokens").await);

    assert!(!rentcheck(&app, &["team", "add", "serving"], None).status.success());
    assert_eq!(count("teams").await, teams, "no team without its row");
    let out = rentcheck(
        &app,
        &["user", "add", "--email", "new@example.com", "--role", "engineer"],
        None,
    );
    assert!(!out.status.success());
    assert_eq!(count("users").await, users, "no person without its row");
    let out = mint_agent_token();
    assert!(!out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(count("api_tokens").await, tokens, "no token without its row");

    // Through the API: a role change is refused whole.
    let uid: uuid::Uuid = sqlx::query_scalar("SELECT id FROM users WHERE email = 'engineer@example.com'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let res = admin
        .put(app.url(&format!("/api/v1/users/{uid}")))
        .json(&serde_json::json!({ "role": "manager" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 500);
    let role: String = sqlx::query_scalar("SELECT role FROM users WHERE id = $1")
        .bind(uid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(role, "engineer");
}
