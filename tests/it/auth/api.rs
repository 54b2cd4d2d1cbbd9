//! Bearer tokens and roles on the JSON API.

use crate::common;
use crate::common::builders::BriefBuilder;

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use chrono::Utc;
use common::{bearer_client, spawn_app, TestApp};
use rentcheck::auth::{
    token::{self, Claims},
    Role,
};
use serde_json::{json, Value};

async fn status_with(app: &TestApp, token: &str, path: &str) -> (u16, Value) {
    let res = bearer_client(token).get(app.url(path)).send().await.unwrap();
    let status = res.status().as_u16();
    (status, res.json().await.unwrap_or(Value::Null))
}

/// The jti inside a token, read without verifying it.
fn jti_of(token: &str) -> rentcheck::ids::TokenId {
    let payload = token.split('.').nth(1).unwrap();
    let claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["jti"].as_str().unwrap().parse().unwrap()
}

#[tokio::test]
async fn no_or_garbage_credentials_are_401_problems() {
    let app = spawn_app().await;
    let res = app.anon.get(app.url("/api/v1/briefs")).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    for bad in ["Bearer", "Bearer not.a.jwt", "Basic dXNlcjpwYXNz"] {
        let res = app
            .anon
            .get(app.url("/api/v1/briefs"))
            .header("authorization", bad)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{bad}");
    }
}

#[tokio::test]
async fn tampered_none_switched_expired_early_and_revoked_tokens_are_refused() {
    let app = spawn_app().await;
    let good = app.token(Role::Engineer, None).await;
    assert_eq!(status_with(&app, &good, "/api/v1/briefs").await.0, 200);
    let jti = jti_of(&good);

    // Tampered signature.
    let mut tampered = good.clone();
    let last = tampered.pop().unwrap();
    tampered.push(if last == 'A' { 'B' } else { 'A' });
    let (status, body) = status_with(&app, &tampered, "/api/v1/briefs").await;
    assert_eq!(status, 401);
    assert!(body["detail"].as_str().unwrap().contains("invalid bearer token"));

    // Tampered claims (role raised to admin) with the old signature.
    let parts: Vec<&str> = good.split('.').collect();
    let mut claims: Value = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    claims["role"] = json!("admin");
    let forged = format!(
        "{}.{}.{}",
        parts[0],
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        parts[2]
    );
    assert_eq!(status_with(&app, &forged, "/api/v1/briefs").await.0, 401);

    // alg: none, no signature.
    let none_header = URL_SAFE_NO_PAD.encode(r#"{"alg":"none","typ":"JWT"}"#);
    let unsigned = format!("{none_header}.{}.", parts[1]);
    assert_eq!(status_with(&app, &unsigned, "/api/v1/briefs").await.0, 401);

    // Algorithm switching: HS512 with the same secret is still refused.
    let now = Utc::now().timestamp();
    let claims = Claims {
        sub: "x".into(),
        role: Role::Engineer,
        brief: None,
        trial: None,
        jti,
        iat: now,
        nbf: now,
        exp: now + 600,
    };
    let hs512 = jsonwebtoken::encode(
        &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS512),
        &claims,
        &jsonwebtoken::EncodingKey::from_secret(b"whatever"),
    )
    .unwrap();
    assert_eq!(status_with(&app, &hs512, "/api/v1/briefs").await.0, 401);

    // Expired, and not yet valid, though correctly signed for a live jti.
    let expired = token::sign(
        &app.keys,
        &Claims {
            exp: now - 3600,
            nbf: now - 7200,
            iat: now - 7200,
            ..claims_for(jti)
        },
    )
    .unwrap();
    let (status, body) = status_with(&app, &expired, "/api/v1/briefs").await;
    assert_eq!(status, 401);
    assert!(body["detail"].as_str().unwrap().contains("expired"));
    let early = token::sign(
        &app.keys,
        &Claims {
            nbf: now + 3600,
            ..claims_for(jti)
        },
    )
    .unwrap();
    let (status, body) = status_with(&app, &early, "/api/v1/briefs").await;
    assert_eq!(status, 401);
    assert!(body["detail"].as_str().unwrap().contains("not valid yet"));

    // A well-signed token whose jti has no row.
    let unknown = token::sign(&app.keys, &claims_for(uuid::Uuid::now_v7().into())).unwrap();
    assert_eq!(status_with(&app, &unknown, "/api/v1/briefs").await.0, 401);

    // Revoked through this server: refused at once, notification or not.
    let entry = rentcheck::audit::Entry::new("test", "token.revoke", "test", serde_json::json!({}));
    assert!(token::revoke_audited(&app.pool, &app.kept_tokens, jti, entry)
        .await
        .unwrap());
    let (status, body) = status_with(&app, &good, "/api/v1/briefs").await;
    assert_eq!(status, 401);
    assert!(body["detail"].as_str().unwrap().contains("revoked"));
}

fn claims_for(jti: rentcheck::ids::TokenId) -> Claims {
    let now = Utc::now().timestamp();
    Claims {
        sub: "engineer@example.com".into(),
        role: Role::Engineer,
        brief: None,
        trial: None,
        jti,
        iat: now,
        nbf: now,
        exp: now + 600,
    }
}

#[tokio::test]
async fn agent_tokens_cannot_use_engineer_routes() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().create(&app).await;
    let id: uuid::Uuid = brief["id"].as_str().unwrap().parse().unwrap();
    let agent = app.token(Role::Agent, Some(id)).await;
    let client = bearer_client(&agent);
    let res = client
        .post(app.url("/api/v1/briefs"))
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    assert_eq!(status_with(&app, &agent, "/api/v1/briefs").await.0, 403);
    assert_eq!(status_with(&app, &agent, &format!("/api/v1/briefs/{id}")).await.0, 403);
    let res = client
        .put(app.url(&format!("/api/v1/briefs/{id}")))
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    assert_eq!(app.count("briefs").await, 1);
}

#[tokio::test]
async fn a_token_scoped_to_brief_a_cannot_touch_brief_b() {
    let app = spawn_app().await;
    let a: uuid::Uuid = BriefBuilder::new().name("A").create(&app).await["id"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let b = BriefBuilder::new().name("B").create_id(&app).await;
    let scoped = app.token(Role::Engineer, Some(a)).await;
    assert_eq!(status_with(&app, &scoped, &format!("/api/v1/briefs/{a}")).await.0, 200);
    let (status, body) = status_with(&app, &scoped, &format!("/api/v1/briefs/{b}")).await;
    assert_eq!(status, 403);
    assert!(body["detail"].as_str().unwrap().contains("another brief"));
}

#[tokio::test]
async fn a_session_cookie_reads_the_api_but_cannot_change_it() {
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let res = person.client.get(app.url("/api/v1/briefs")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    let res = person
        .client
        .post(app.url("/api/v1/briefs"))
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a cookie alone must not write through the API");
    assert_eq!(app.count("briefs").await, 0);
}

#[tokio::test]
async fn cross_origin_unsafe_requests_are_refused() {
    let app = spawn_app().await;
    let res = app
        .client
        .post(app.url("/api/v1/briefs"))
        .header("origin", "http://evil.example")
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let same_origin = app.base.clone();
    let res = app
        .client
        .post(app.url("/api/v1/briefs"))
        .header("origin", same_origin)
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

#[tokio::test]
async fn token_use_is_recorded_as_last_used() {
    let app = spawn_app().await;
    let t = app.token(Role::Manager, None).await;
    let jti = jti_of(&t);
    assert!(token::get(&app.pool, jti)
        .await
        .unwrap()
        .unwrap()
        .last_used_at
        .is_none());
    assert_eq!(status_with(&app, &t, "/api/v1/briefs").await.0, 200);
    assert!(token::get(&app.pool, jti)
        .await
        .unwrap()
        .unwrap()
        .last_used_at
        .is_some());
}

#[tokio::test]
async fn an_agent_token_sends_evidence_to_its_own_brief_only() {
    let app = spawn_app().await;
    let a = BriefBuilder::new().name("A").create_id(&app).await;
    let b = BriefBuilder::new().name("B").create_id(&app).await;
    let agent = bearer_client(&app.token(Role::Agent, Some(a.parse().unwrap())).await);
    let body = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n";
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{a}/evidence?kind=nvidia-smi-list&stage=1")))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{b}/evidence?kind=nvidia-smi-list&stage=1")))
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "a token for brief A cannot send to brief B");
    let res = agent
        .get(app.url(&format!("/api/v1/briefs/{a}/evidence")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "agents send, they do not read");
    let stored: Vec<(String, Option<String>)> = sqlx::query_as("SELECT brief_id::text, uploaded_by FROM evidence")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored.len(), 1);
    assert_eq!(stored[0].0, a);
    assert!(
        stored[0].1.as_deref().unwrap().starts_with("token:"),
        "who sent it is recorded"
    );
    let anon = app
        .anon
        .post(app.url(&format!("/api/v1/briefs/{a}/evidence?kind=log&stage=1")))
        .body("x")
        .send()
        .await
        .unwrap();
    assert_eq!(anon.status(), 401);
}

/// Whether the token `t`, used just before (so its row is kept), is refused as soon as the server
/// hears of a change made outside it by `sql`, in another connection, as the CLI or another server
/// would make it.
async fn refused_once_heard(app: &TestApp, t: &str, sql: &str) -> bool {
    assert_eq!(status_with(app, t, "/api/v1/briefs").await.0, 200);
    app.heard_of(sqlx::query(sql).bind(jti_of(t)).execute(&app.pool))
        .await
        .unwrap();
    status_with(app, t, "/api/v1/briefs").await.0 == 401
}

/// A server reuses a token's row for up to a second (kept after the use just before the change);
/// a change made elsewhere reaches it through the change notification, and the next request is
/// refused without waiting that second out: a revoke, and a person's role lowered below their
/// token's.
#[tokio::test]
async fn a_token_changed_outside_the_server_is_refused_once_the_server_hears_of_it() {
    let app = spawn_app().await;
    for _ in 0..5 {
        let t = app.token(Role::Engineer, None).await;
        let sql = "UPDATE api_tokens SET revoked_at = now() WHERE jti = $1";
        assert!(refused_once_heard(&app, &t, sql).await, "a revoke");
    }
    let t = app.token(Role::Manager, None).await;
    let sql = "UPDATE users SET role = 'engineer' WHERE id = (SELECT created_by FROM api_tokens WHERE jti = $1)";
    assert!(refused_once_heard(&app, &t, sql).await, "a role lowered");
}

#[tokio::test]
async fn a_method_an_address_does_not_answer_is_a_405_problem_with_allow() {
    let app = spawn_app().await;
    let id = BriefBuilder::new().create_id(&app).await;
    let res = app
        .client
        .delete(app.url(&format!("/api/v1/briefs/{id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["content-type"], "application/problem+json");
    let allow = res.headers()["allow"].to_str().unwrap().to_owned();
    assert!(allow.contains("GET") && allow.contains("PUT"), "{allow}");
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["type"], "/docs/problems#method-not-allowed");
    assert!(
        problem["detail"]
            .as_str()
            .unwrap()
            .starts_with("DELETE is not a method"),
        "{problem}"
    );

    // A page answers a person with a page, not JSON.
    let owner = app.login_owner().await;
    let page = owner.client.put(app.url("/login")).send().await.unwrap();
    assert_eq!(page.status(), 405);
    assert!(page.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/html"));
}
