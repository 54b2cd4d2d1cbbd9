//! What the third security review found, one test (or more) per finding, and the walk
//! of every route with a brief-scoped token of each role.

use std::{collections::BTreeSet, process::Command, time::Duration};

use crate::common::builders::{first_trial_id, BriefBuilder, CardBuilder};
use crate::{
    common::{self, bearer_client, cookie_client, input_value, spawn_app, spawn_app_with, TestApp, PASSWORD},
    openapi::registered_routes_under,
};
use rentcheck::{
    auth::{
        teams,
        token::{self, NewToken},
        users, Role,
    },
    config::{AppConfig, WebhookSettings},
    ids::UserId,
    secrets::Secret,
};
use serde_json::{json, Value};
use uuid::Uuid;

/// A new person of `role` and a bearer token of theirs (as `rentcheck token mint` makes one).
async fn person_token(app: &TestApp, role: Role, brief: Option<Uuid>) -> (UserId, String, String) {
    let email = app.user(role).await;
    let user = users::by_email(&app.pool, &email).await.unwrap().unwrap();
    let (signed, _) = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: format!("{} token", role.as_str()),
            subject: email.clone(),
            role,
            brief: brief.map(Into::into),
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(user.id),
        },
    )
    .await
    .unwrap();
    (user.id, email, signed)
}

async fn status(client: &reqwest::Client, url: String) -> u16 {
    client.get(url).send().await.unwrap().status().as_u16()
}

async fn audit_count(app: &TestApp, action: &str) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = $1")
        .bind(action)
        .fetch_one(&app.pool)
        .await
        .unwrap()
}

async fn upload_evidence(app: &TestApp, brief: &str) -> String {
    let res = app
        .post_raw_evidence(
            brief,
            "kind=nvidia-smi-list&stage=1",
            "text/plain",
            b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n".to_vec(),
        )
        .await;
    assert_eq!(res.status(), 201);
    res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned()
}

// --- Scoped tokens: prices, and the walk of every route ------------------------------------------

const SHEET: &str = "provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source\n\
                     Cloud A,H100 SXM,8,on-demand,2.49,USD,us-east,2026-11-01,quote 17\n";

#[tokio::test]
async fn a_manager_token_scoped_to_one_brief_imports_no_price_sheet() {
    let app = spawn_app().await;
    let brief: Uuid = app.brief_id().await.parse().unwrap();
    let (_, _, scoped) = person_token(&app, Role::Manager, Some(brief)).await;
    let scoped = bearer_client(&scoped);
    let res = scoped
        .post(app.url("/api/v1/prices"))
        .header("content-type", "text/csv")
        .body(SHEET)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let problem: Value = res.json().await.unwrap();
    assert!(
        problem["detail"].as_str().unwrap().contains("limited to one brief"),
        "{problem}"
    );
    assert_eq!(app.count("prices").await, 0, "no row that can never be deleted");
    assert_eq!(status(&scoped, app.url("/api/v1/prices")).await, 403, "nor reads them");
    // The same manager without the scope imports it.
    let (_, _, manager) = person_token(&app, Role::Manager, None).await;
    let res = bearer_client(&manager)
        .post(app.url("/api/v1/prices"))
        .header("content-type", "text/csv")
        .body(SHEET)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

/// Who may reach a route at all, as the walk expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Open to anyone: health, metrics, the OpenAPI document, static files, sign-in, first run.
    Public,
    /// A page: sessions only; a bearer token is sent to the sign-in page.
    Page,
    /// `/metrics/briefs`: its own scrape token, never an API token.
    MetricsToken,
    /// The brief list: a person's scoped token lists its brief only.
    BriefList,
    /// The commitments' reads (api.md: a scoped token "is limited to that brief for reading"): a
    /// person's scoped token lists its brief's commitments only; agents are refused.
    CommitmentRead,
    /// Outside any brief: a scoped token is refused whatever its role.
    Global,
    /// Reads one brief (by a brief, trial or evidence id): people, their own brief only.
    Read,
    /// Changes one brief: people who may edit it, their own brief only.
    Write,
    /// Sends evidence or ledger lines: agents and people, their own brief only.
    Send,
    /// Reads what an agent of the brief needs to work (a trial's test plan): agents and people,
    /// their own brief only.
    AgentRead,
    /// Approves: managers and admins, their own brief only.
    Approve,
}

/// Every route, classified. A route missing here fails the walk: whoever adds one says who may
/// reach it, and the walk checks the server agrees.
fn reach(method: &str, path: &str) -> Option<Reach> {
    use Reach::*;
    Some(match (method, path) {
        (_, "/healthz" | "/readyz" | "/metrics" | "/api/openapi.json" | "/static/app.css" | "/static/review.js" | "/static/copy.js") => {
            Public
        }
        (_, "/login" | "/setup" | "/docs/problems") => Public,
        ("GET", "/metrics/briefs") => MetricsToken,
        ("GET", "/api/v1/briefs") => BriefList,
        ("POST", "/api/v1/briefs") => Global,
        ("GET" | "POST", "/api/v1/prices") => Global,
        ("GET" | "POST", "/api/v1/webhooks") | ("DELETE", "/api/v1/webhooks/{wid}") => Global,
        // Commitments span briefs: a scoped token reads its brief's and changes none.
        ("GET", "/api/v1/commitments" | "/api/v1/commitments/{cid}") => CommitmentRead,
        ("PATCH", "/api/v1/commitments/{cid}") => Global,
        ("GET", "/api/v1/users")
        | ("GET" | "PUT", "/api/v1/users/{uid}")
        | ("POST", "/api/v1/users/{uid}/password")
        | ("GET", "/api/v1/users/{uid}/tokens")
        | ("DELETE", "/api/v1/users/{uid}/tokens/{jti}") => Global,
        (
            "GET",
            "/api/v1/briefs/{id}"
            | "/api/v1/briefs/{id}/sizing"
            | "/api/v1/briefs/{id}/card"
            | "/api/v1/briefs/{id}/card/revisions"
            | "/api/v1/briefs/{id}/card/revisions/{n}"
            | "/api/v1/briefs/{id}/evidence"
            | "/api/v1/briefs/{id}/ledger"
            | "/api/v1/briefs/{id}/ledger/summary"
            | "/api/v1/briefs/{id}/ledger.csv"
            | "/api/v1/briefs/{id}/review"
            | "/api/v1/briefs/{id}/trials"
            | "/api/v1/trials/{tid}"
            | "/api/v1/evidence/{id}"
            | "/api/v1/evidence/{id}/raw"
            // The decision record, for people and their scripts alike.
            | "/briefs/{id}/decision.md"
            | "/briefs/{id}/decision.json",
        ) => Read,
        ("PUT", "/api/v1/briefs/{id}" | "/api/v1/briefs/{id}/card" | "/api/v1/trials/{tid}")
        | ("POST", "/api/v1/briefs/{id}/trials") => Write,
        ("POST", "/api/v1/briefs/{id}/evidence" | "/api/v1/briefs/{id}/evidence/batch" | "/api/v1/briefs/{id}/ledger") => {
            Send
        }
        ("POST", "/api/v1/briefs/{id}/approvals") => Approve,
        (
            "GET",
            "/api/v1/briefs/{id}/trials/{tid}/plan"
            | "/api/v1/briefs/{id}/trials/{tid}/plan/job.yaml"
            | "/api/v1/briefs/{id}/trials/{tid}/plan/sky.yaml"
            | "/api/v1/briefs/{id}/trials/{tid}/plan/cronjob.yaml",
        ) => AgentRead,
        // The decision record rendered as a page (its .md and .json are Read, above): sessions only.
        ("GET", "/briefs/{id}/decision") => Page,
        (_, p) if !p.starts_with("/api/") && !p.starts_with("/metrics") => Page,
        _ => return None,
    })
}

/// The ids a route's path is filled with: the token's own brief (A) or another (B).
struct Ids {
    brief: String,
    trial: String,
    evidence: String,
}

fn fill(path: &str, ids: &Ids, uid: &str) -> String {
    let with_id = if path.starts_with("/api/v1/evidence/") || path.starts_with("/evidence/") {
        path.replace("{id}", &ids.evidence)
    } else {
        path.replace("{id}", &ids.brief)
    };
    with_id
        .replace("{tid}", &ids.trial)
        .replace("{n}", "1")
        .replace("{uid}", uid)
        .replace("{jti}", &Uuid::now_v7().to_string())
        .replace("{wid}", &Uuid::now_v7().to_string())
        .replace("{cid}", &Uuid::now_v7().to_string())
}

#[tokio::test]
async fn the_route_walk_every_route_with_a_scoped_token_of_each_role() {
    let app = spawn_app().await;
    let a = app.brief_id().await;
    let b = app.brief_id().await;
    let own = Ids {
        trial: first_trial_id(&app, &a).await,
        evidence: upload_evidence(&app, &a).await,
        brief: a.clone(),
    };
    let other = Ids {
        trial: first_trial_id(&app, &b).await,
        evidence: upload_evidence(&app, &b).await,
        brief: b.clone(),
    };
    let routes = registered_routes_under("/");
    assert!(routes.len() > 80, "{} routes read from the source", routes.len());
    let unclassified: Vec<_> = routes.iter().filter(|(m, p)| reach(m, p).is_none()).collect();
    assert!(
        unclassified.is_empty(),
        "classify these routes in tests/it/security/review3.rs `reach`: {unclassified:?}"
    );
    let brief_a: Uuid = a.parse().unwrap();
    let mut allowed = std::collections::BTreeMap::new();
    for role in [Role::Agent, Role::Engineer, Role::Manager, Role::Admin] {
        let token = app.token(role, Some(brief_a)).await;
        if role != Role::Agent {
            // The token's person may edit A (a team it is shared with), so what a write route
            // answers on A is what the role may do there, not a question of ownership.
            let person = users::by_email(&app.pool, &format!("{}@example.com", role.as_str()))
                .await
                .unwrap()
                .unwrap();
            let team = teams::create_team(&app.pool, &format!("walkers {}", role.as_str()))
                .await
                .unwrap();
            teams::add_member(&app.pool, team.id, person.id).await.unwrap();
            teams::share(&app.pool, brief_a.into(), team.id).await.unwrap();
        }
        let uid = users::by_email(&app.pool, &format!("{}@example.com", role.as_str()))
            .await
            .unwrap()
            .map(|u| u.id.to_string())
            .unwrap_or_else(|| Uuid::nil().to_string());
        let client = bearer_client(&token);
        for (method, path) in &routes {
            let r = reach(method, path).unwrap();
            let targets: Vec<(bool, &Ids)> = match r {
                Reach::Read | Reach::Write | Reach::Send | Reach::AgentRead | Reach::Approve => {
                    vec![(true, &own), (false, &other)]
                }
                _ => vec![(true, &own)],
            };
            for (is_own, ids) in targets {
                let url = app.url(&fill(path, ids, &uid));
                let body = match r {
                    Reach::Approve => json!({ "verdict": "reject", "comment": "walk", "inputs_digest": "x" }),
                    _ => json!({}),
                };
                let res = client
                    .request(method.parse().unwrap(), &url)
                    .header("content-type", "application/json")
                    .body(body.to_string())
                    .send()
                    .await
                    .unwrap();
                let code = res.status().as_u16();
                let location = res
                    .headers()
                    .get("location")
                    .map(|l| l.to_str().unwrap().to_owned())
                    .unwrap_or_default();
                let text = res.text().await.unwrap();
                let what = format!(
                    "{} token, {method} {path} ({}): {code} {text:.300}",
                    role.as_str(),
                    if is_own { "its brief" } else { "another brief" }
                );
                assert!(code < 500, "{what}");
                let refused = code == 403;
                if refused {
                    assert!(text.starts_with('{') || text.contains("<html"), "{what}");
                }
                match r {
                    Reach::Public => {}
                    Reach::Page => {
                        assert_eq!(code, 303, "a token is no session: {what}");
                        assert!(location.starts_with("/login"), "{what} → {location}");
                    }
                    Reach::MetricsToken => assert!(code == 404 || code == 401, "{what}"),
                    Reach::BriefList => {
                        if role == Role::Agent {
                            assert!(refused, "{what}");
                        } else {
                            assert_eq!(code, 200, "{what}");
                            let list: Value = serde_json::from_str(&text).unwrap();
                            let ids: Vec<&str> = list["items"]
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|i| i["id"].as_str().unwrap())
                                .collect();
                            assert_eq!(ids, [a.as_str()], "only its brief: {what}");
                        }
                    }
                    Reach::CommitmentRead => {
                        if role == Role::Agent {
                            assert!(refused, "{what}");
                        } else if path.ends_with("{cid}") {
                            assert_eq!(code, 404, "no such commitment, and not refused: {what}");
                        } else {
                            assert_eq!(code, 200, "{what}");
                            let list: Value = serde_json::from_str(&text).unwrap();
                            assert_eq!(list["items"], json!([]), "none of its brief's: {what}");
                        }
                    }
                    Reach::Global => assert!(refused, "{what}"),
                    Reach::Read | Reach::Write => {
                        let may = is_own && role != Role::Agent;
                        assert_eq!(!refused && code != 401, may, "{what}");
                    }
                    Reach::Send | Reach::AgentRead => assert_eq!(!refused && code != 401, is_own, "{what}"),
                    Reach::Approve => {
                        let may = is_own && role >= Role::Manager;
                        assert_eq!(!refused && code != 401, may, "{what}");
                    }
                }
                if !refused
                    && matches!(
                        r,
                        Reach::Read | Reach::Write | Reach::Send | Reach::AgentRead | Reach::Approve | Reach::BriefList
                    )
                {
                    *allowed.entry(role.as_str()).or_insert(0) += 1;
                }
            }
        }
    }
    // What each role may do with a token scoped to its brief (its brief only, every time).
    // An agent sends evidence (one and a batch) and ledger lines, and reads its trial's test plan
    // (JSON, the Kubernetes Jobs, the re-validation CronJobs and the SkyPilot task).
    assert_eq!(allowed["agent"], 7, "{allowed:?}");
    assert!(
        allowed["engineer"] > 15 && allowed["manager"] == allowed["engineer"] + 1,
        "{allowed:?}"
    );
    assert_eq!(allowed["admin"], allowed["manager"], "{allowed:?}");
}

#[tokio::test]
async fn a_scoped_token_is_refused_before_any_route_outside_its_brief_runs() {
    // The gate in front of the handlers: a route outside any brief refuses a scoped token even if
    // its handler forgot to, so a new one cannot leak.
    assert!(rentcheck::web::auth::brief_scoped_route(
        &axum::http::Method::GET,
        "/api/v1/briefs/{id}/review"
    ));
    assert!(rentcheck::web::auth::brief_scoped_route(
        &axum::http::Method::GET,
        "/api/v1/trials/{tid}"
    ));
    assert!(rentcheck::web::auth::brief_scoped_route(
        &axum::http::Method::GET,
        "/api/v1/briefs"
    ));
    assert!(rentcheck::web::auth::brief_scoped_route(
        &axum::http::Method::GET,
        "/briefs/{id}/decision.json"
    ));
    for (method, route) in [
        (axum::http::Method::POST, "/api/v1/briefs"),
        (axum::http::Method::POST, "/api/v1/prices"),
        (axum::http::Method::GET, "/api/v1/prices"),
        (axum::http::Method::GET, "/api/v1/users/{uid}/tokens"),
        (axum::http::Method::GET, "/api/v1/briefsx"),
        (axum::http::Method::GET, "/api/v1/some-new-route"),
    ] {
        assert!(
            !rentcheck::web::auth::brief_scoped_route(&method, route),
            "{method} {route}"
        );
    }
}

// --- Sign-in throttling ---------------------------------------------------------------------------

/// A sign-in form post from `from` (through the trusted proxy on 127.0.0.1), with the browser's
/// cookies; answers the status, the `Location`, the body and a known-browser cookie if one was set.
async fn sign_in(
    app: &TestApp,
    email: &str,
    password: &str,
    from: &str,
    device: Option<&str>,
) -> (u16, String, String, Option<String>) {
    let res = app.anon.get(app.url("/login")).send().await.unwrap();
    let login_cookie = res.headers()["set-cookie"]
        .to_str()
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned();
    let csrf = input_value(&res.text().await.unwrap(), "csrf_token").unwrap();
    let cookie = match device {
        Some(d) => format!("{login_cookie}; {d}"),
        None => login_cookie,
    };
    let res = app
        .anon
        .post(app.url("/login"))
        .header("x-forwarded-for", from)
        .header("cookie", cookie)
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("email", email),
            ("password", password),
            ("next", "/briefs/new"),
        ])
        .send()
        .await
        .unwrap();
    let status = res.status().as_u16();
    let location = res
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let device = res
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("rentcheck_device="))
        .map(|v| v.split(';').next().unwrap().to_owned());
    (status, location, res.text().await.unwrap(), device)
}

/// As if the account's last failure were long ago: the test does not sit out the delays.
async fn let_time_pass(app: &TestApp) {
    sqlx::query("UPDATE sign_in_accounts SET last_failure_at = now() - interval '1 hour'")
        .execute(&app.pool)
        .await
        .unwrap();
}

fn behind_a_proxy() -> AppConfig {
    AppConfig {
        trusted_proxies: vec!["127.0.0.1".parse().unwrap()],
        ..AppConfig::default()
    }
}

#[tokio::test]
async fn guesses_from_many_addresses_wait_longer_each_time_then_lock_the_account_until_an_admin_unlocks_it() {
    let app = spawn_app_with(behind_a_proxy()).await;
    let email = app.user(Role::Engineer).await;
    // The person signs in at their desk once: that browser is known to the account.
    let (code, _, _, device) = sign_in(&app, &email, PASSWORD, "198.51.100.20", None).await;
    assert_eq!(code, 303);
    let device = device.expect("a known-browser cookie");

    // Forty addresses, each a new one (an IPv6 /64 has plenty).
    let mut checked = 0;
    let mut refused_waiting = 0;
    for i in 0..40 {
        let from = format!("2001:db8:{i:x}::1");
        let (code, _, page, _) = sign_in(&app, &email, &format!("guess {i}"), &from, None).await;
        match code {
            401 => checked += 1,
            429 if page.contains("Wait") => {
                refused_waiting += 1;
                // The attacker is patient: the wait passes.
                let_time_pass(&app).await;
            }
            429 => {
                assert!(page.contains("locked"), "{page}");
                break;
            }
            other => panic!("guess {i}: {other}"),
        }
    }
    assert_eq!(checked, 10, "ten passwords checked in all, not two hundred");
    assert!(
        refused_waiting >= 6,
        "each try after the third waited: {refused_waiting}"
    );
    // Locked: the right password from an unknown browser is refused, from any address...
    let (code, _, page, _) = sign_in(&app, &email, PASSWORD, "203.0.113.50", None).await;
    assert_eq!(code, 429);
    assert!(
        page.contains("This account is locked after too many failed sign-ins"),
        "{page}"
    );
    assert!(page.contains("ask an admin to unlock it"), "{page}");
    // ...and an unknown email answers the same, so the lock tells nobody who has an account.
    let ghost = "ghost@example.com";
    for i in 0..10 {
        let_time_pass(&app).await;
        sign_in(&app, ghost, &format!("guess {i}"), "203.0.113.51", None).await;
    }
    let (code, _, ghost_page, _) = sign_in(&app, ghost, PASSWORD, "203.0.113.50", None).await;
    assert_eq!(code, 429);
    let strip = |p: &str| {
        p.replace(&input_value(p, "csrf_token").unwrap(), "")
            .replace(ghost, "E")
            .replace(&email, "E")
    };
    assert_eq!(strip(&ghost_page), strip(&page), "no enumeration");
    assert_eq!(audit_count(&app, "login.lock").await, 2);

    // The person's own browser still signs in, and is told first.
    let (code, location, _, _) = sign_in(&app, &email, PASSWORD, "198.51.100.20", Some(&device)).await;
    assert_eq!(code, 303);
    assert_eq!(location, "/account?next=%2Fbriefs%2Fnew#sign-in-activity");
    let person = app.login_as(&email, PASSWORD).await;
    assert!(person.is_none(), "a fresh browser is still refused");

    // An admin sees the lock and lifts it; then any browser signs in again.
    let admin = app.login(Role::Admin).await;
    let users_page = admin.get(app.url("/admin/users")).await.text().await.unwrap();
    assert!(
        users_page.contains("<span class=\"badge\">locked</span>"),
        "the users page shows the lock"
    );
    let uid = users::by_email(&app.pool, &email).await.unwrap().unwrap().id;
    let res = admin
        .client
        .post(app.url(&format!("/admin/users/{uid}/unlock")))
        .form(&[("csrf_token", admin.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(audit_count(&app, "login.unlock").await, 1);
    let person = app.login_as(&email, PASSWORD).await.expect("unlocked");
    let account = person.get(app.url("/account")).await.text().await.unwrap();
    assert!(account.contains("Sign-in activity"), "{account}");
    assert!(
        account.contains("the account was locked after too many failed sign-ins"),
        "{account}"
    );
    assert!(account.contains("2001:db8:"), "the addresses they came from: {account}");
}

#[tokio::test]
async fn an_admin_unlocks_through_the_api_too_and_the_person_is_shown_locked() {
    let app = spawn_app().await;
    let (uid, email, _) = person_token(&app, Role::Engineer, None).await;
    sqlx::query(
        "INSERT INTO sign_in_accounts (email, failures, last_failure_at, locked_at) VALUES ($1, 10, now(), now())",
    )
    .bind(&email)
    .execute(&app.pool)
    .await
    .unwrap();
    let (_, _, admin) = person_token(&app, Role::Admin, None).await;
    let admin = bearer_client(&admin);
    let shown: Value = admin
        .get(app.url(&format!("/api/v1/users/{uid}")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(shown["locked"], true);
    // The list shows the same person, locked, as the one-person answer does.
    let list: Value = admin
        .get(app.url("/api/v1/users"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let listed = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["id"] == shown["id"])
        .expect("the person is listed");
    assert_eq!(*listed, shown);
    let res = admin
        .put(app.url(&format!("/api/v1/users/{uid}")))
        .json(&json!({ "locked": true }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "locks come from failed sign-ins only");
    let res = admin
        .put(app.url(&format!("/api/v1/users/{uid}")))
        .json(&json!({ "disabled": "yes" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "well-formed JSON with a wrong field is 422, not 400");
    assert_eq!(res.json::<Value>().await.unwrap()["errors"][0]["field"], "disabled");
    let res = admin
        .put(app.url(&format!("/api/v1/users/{uid}")))
        .json(&json!({ "locked": false }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["locked"], false);
    assert!(app.login_as(&email, PASSWORD).await.is_some());
}

#[tokio::test]
async fn an_address_over_its_limit_locks_out_nobody_who_signed_in_there_before() {
    let app = spawn_app_with(behind_a_proxy()).await;
    let office = "198.51.100.7";
    let colleague = app.user(Role::Engineer).await;
    let (code, _, _, device) = sign_in(&app, &colleague, PASSWORD, office, None).await;
    assert_eq!(code, 303);
    // Someone in the same office sprays one guess at many accounts.
    let mut refused = 0;
    for i in 0..25 {
        let (code, _, page, _) = sign_in(&app, &format!("person{i}@example.com"), "Winter2026!!", office, None).await;
        if code == 429 {
            assert!(page.contains("from your network"), "{page}");
            refused += 1;
        }
    }
    assert_eq!(refused, 5, "stopped after 20 failures from one address");
    // A colleague who signed in from this browser before is not locked out...
    let (code, _, _, _) = sign_in(&app, &colleague, PASSWORD, office, device.as_deref()).await;
    assert_eq!(code, 303);
    // ...nor is their account: from elsewhere it signs in at once.
    let newcomer = app.user(Role::Engineer).await;
    assert_eq!(sign_in(&app, &newcomer, PASSWORD, "203.0.113.80", None).await.0, 303);
    // Only a browser that never signed in, from that address, waits out the window.
    assert_eq!(sign_in(&app, &newcomer, PASSWORD, office, None).await.0, 429);
}

#[tokio::test]
async fn the_current_password_check_is_throttled_and_audited_like_a_sign_in() {
    let app = spawn_app().await;
    let (uid, email, own) = person_token(&app, Role::Engineer, None).await;
    let own = bearer_client(&own);
    let url = app.url(&format!("/api/v1/users/{uid}/password"));
    let change = |current: &'static str| {
        own.post(&url)
            .json(&json!({ "password": "a brand new passphrase", "current_password": current }))
            .send()
    };
    for _ in 0..3 {
        assert_eq!(change("a wrong guess").await.unwrap().status(), 422);
    }
    let res = change(PASSWORD).await.unwrap();
    assert_eq!(
        res.status(),
        429,
        "a fourth try at once waits, even with the right password"
    );
    assert_eq!(
        audit_count(&app, "user.password.refused").await,
        4,
        "three wrong, one throttled"
    );
    // The same count as the sign-in form's: the account waits there too (made a longer wait here,
    // so a slow machine does not outlast it between two requests).
    sqlx::query("UPDATE sign_in_accounts SET failures = failures + 3, last_failure_at = now() WHERE email = $1")
        .bind(&email)
        .execute(&app.pool)
        .await
        .unwrap();
    let (code, _, _, _) = sign_in(&app, &email, PASSWORD, "127.0.0.1", None).await;
    assert_eq!(code, 429);

    // The account page takes the same throttle and writes the same audit rows.
    let app = spawn_app().await;
    let person = app.login(Role::Engineer).await;
    let post = |current: &'static str| {
        person
            .client
            .post(app.url("/account/password"))
            .form(&[
                ("csrf_token", person.csrf.as_str()),
                ("current_password", current),
                ("new_password", "another long passphrase"),
            ])
            .send()
    };
    for _ in 0..3 {
        assert_eq!(post("a wrong guess").await.unwrap().status(), 422);
    }
    let res = post(PASSWORD).await.unwrap();
    assert_eq!(res.status(), 429);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("Too many failed sign-ins for this account"));
    assert_eq!(audit_count(&app, "user.password.refused").await, 4);
}

// --- Offboarding --------------------------------------------------------------------------------

#[tokio::test]
async fn a_persons_tokens_are_listed_and_revoked_and_a_new_password_or_disabling_revokes_them_all() {
    let app = spawn_app().await;
    let brief: Uuid = app.brief_id().await.parse().unwrap();
    let (uid, email, first) = person_token(&app, Role::Manager, None).await;
    let second = token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "ci agent".into(),
            subject: email.clone(),
            role: Role::Agent,
            brief: Some(brief.into()),
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(uid),
        },
    )
    .await
    .unwrap();
    let me = bearer_client(&first);
    let listed: Value = me
        .get(app.url(&format!("/api/v1/users/{uid}/tokens")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let names: Vec<&str> = listed["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["ci agent", "manager token"],
        "their tokens, the agent one they minted included"
    );
    assert_eq!(listed["items"][0]["state"], "active");
    // Someone else's list: admins only.
    let (other, _, other_token) = person_token(&app, Role::Engineer, None).await;
    assert_eq!(
        status(&me, app.url(&format!("/api/v1/users/{other}/tokens"))).await,
        403
    );
    let (_, _, admin) = person_token(&app, Role::Admin, None).await;
    let admin = bearer_client(&admin);
    assert_eq!(
        status(&admin, app.url(&format!("/api/v1/users/{uid}/tokens"))).await,
        200
    );

    // Revoking one: refused at once; another person's token is not theirs to revoke.
    let agent = bearer_client(&second.0);
    let send = || {
        agent
            .post(app.url(&format!("/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1")))
            .header("content-type", "text/plain")
            .body("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n")
            .send()
    };
    assert_eq!(send().await.unwrap().status(), 201);
    let res = me
        .delete(app.url(&format!("/api/v1/users/{uid}/tokens/{}", second.1.jti)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(send().await.unwrap().status(), 401);
    let other_jti = token::list_for_user(&app.pool, other).await.unwrap()[0].jti;
    let res = me
        .delete(app.url(&format!("/api/v1/users/{uid}/tokens/{other_jti}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
    assert_eq!(
        status(&bearer_client(&other_token), app.url("/api/v1/briefs")).await,
        200
    );

    // The admin's page lists them and revokes them.
    let admin_person = app.login(Role::Admin).await;
    let page = admin_person
        .get(app.url(&format!("/admin/users/{uid}/tokens")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        page.contains("ci agent") && page.contains("revoked") && page.contains("manager token"),
        "{page}"
    );
    let (third_uid, _, third) = person_token(&app, Role::Engineer, None).await;
    let third_jti = token::list_for_user(&app.pool, third_uid).await.unwrap()[0].jti;
    let res = admin_person
        .client
        .post(app.url(&format!("/admin/users/{third_uid}/tokens/{third_jti}/revoke")))
        .form(&[("csrf_token", admin_person.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(status(&bearer_client(&third), app.url("/api/v1/briefs")).await, 401);

    // A person's own page lists theirs, with revoke.
    let session = app.login_as(&email, PASSWORD).await.unwrap();
    let account = session.get(app.url("/account")).await.text().await.unwrap();
    assert!(
        account.contains("Your tokens") && account.contains("manager token"),
        "{account}"
    );

    // An admin's new password for them revokes every token they have, and ends their sessions.
    let extra = mint_for(&app, uid, &email, Role::Engineer).await;
    let res = admin
        .post(app.url(&format!("/api/v1/users/{uid}/password")))
        .json(&json!({ "password": "set by the admin today" }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 204);
    assert_eq!(status(&me, app.url("/api/v1/briefs")).await, 401);
    assert_eq!(status(&bearer_client(&extra), app.url("/api/v1/briefs")).await, 401);
    assert_eq!(session.get(app.url("/")).await.status(), 303);

    // Disabling revokes them too, and enabling again revives none.
    let later = mint_for(&app, uid, &email, Role::Manager).await;
    assert_eq!(status(&bearer_client(&later), app.url("/api/v1/briefs")).await, 200);
    for disabled in [true, false] {
        let res = admin
            .put(app.url(&format!("/api/v1/users/{uid}")))
            .json(&json!({ "disabled": disabled }))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 200);
    }
    assert_eq!(status(&bearer_client(&later), app.url("/api/v1/briefs")).await, 401);
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM api_tokens WHERE created_by = $1 AND revoked_at IS NULL")
        .bind(uid)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(live, 0);
}

async fn mint_for(app: &TestApp, uid: UserId, email: &str, role: Role) -> String {
    token::mint(
        &app.pool,
        &app.keys,
        NewToken {
            name: "another".into(),
            subject: email.to_owned(),
            role,
            brief: None,
            trial: None,
            ttl: chrono::Duration::hours(1),
            created_by: Some(uid),
        },
    )
    .await
    .unwrap()
    .0
}

// --- Low findings ---------------------------------------------------------------------------------

#[tokio::test]
async fn the_evidence_lists_trial_filter_stays_inside_the_brief() {
    let app = spawn_app().await;
    let a = app.brief_id().await;
    let b = app.brief_id().await;
    upload_evidence(&app, &a).await;
    let b_evidence = upload_evidence(&app, &b).await;
    let b_trial = first_trial_id(&app, &b).await;
    let scoped = bearer_client(&app.token(Role::Engineer, Some(a.parse().unwrap())).await);
    let url = app.url(&format!("/api/v1/briefs/{a}/evidence?trial={b_trial}"));
    let res = scoped.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 404, "B's trial is no trial of A");
    assert!(!res.text().await.unwrap().contains(&b_evidence));
    let res = app.client.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 404, "for an unscoped token too");
    // A's own trial still filters.
    let a_trial = first_trial_id(&app, &a).await;
    let res = scoped
        .get(app.url(&format!("/api/v1/briefs/{a}/evidence?trial={a_trial}")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["items"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn twelve_first_run_forms_at_once_make_one_admin() {
    let app = spawn_app().await;
    sqlx::query("DELETE FROM users").execute(&app.pool).await.unwrap();
    let setup = app.url(&format!("/setup?code={}", app.setup_code));
    // Twelve browsers open the form, then all send it at once.
    let mut opened = Vec::new();
    for _ in 0..12 {
        let client = cookie_client();
        let page = client.get(&setup).send().await.unwrap().text().await.unwrap();
        opened.push((client, input_value(&page, "csrf_token").unwrap()));
    }
    let forms: Vec<_> = opened
        .into_iter()
        .enumerate()
        .map(|(i, (client, csrf))| {
            let (post, code) = (app.url("/setup"), app.setup_code.clone());
            tokio::spawn(async move {
                client
                    .post(post)
                    .form(&[
                        ("csrf_token", csrf.as_str()),
                        ("code", code.as_str()),
                        ("email", &format!("admin{i}@example.com")),
                        ("password", PASSWORD),
                    ])
                    .send()
                    .await
                    .unwrap()
                    .status()
                    .as_u16()
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for f in forms {
        statuses.push(f.await.unwrap());
    }
    assert_eq!(app.count("users").await, 1, "{statuses:?}");
    assert_eq!(statuses.iter().filter(|s| **s == 303).count(), 1, "{statuses:?}");
    // 409: sent while the first was being created; 410: arrived after it was (the page is closed then).
    assert!(
        statuses.iter().all(|s| [303, 404, 409, 410].contains(s)),
        "{statuses:?}"
    );
}

#[tokio::test]
async fn setup_through_a_same_machine_proxy_that_rewrites_host_is_refused_without_the_printed_code() {
    let app = spawn_app().await;
    sqlx::query("DELETE FROM users").execute(&app.pool).await.unwrap();
    // nginx's default `proxy_pass http://127.0.0.1:PORT`: a loopback peer, `Host: 127.0.0.1:PORT`,
    // no forwarding header. Nothing in the request tells it from a browser on this machine.
    let host = app.base.trim_start_matches("http://").to_owned();
    for url in [app.url("/setup"), app.url("/setup?code=0123456789abcdef01234567")] {
        let res = app.anon.get(&url).header("host", &host).send().await.unwrap();
        assert_eq!(res.status(), 403, "{url}");
        assert!(
            res.text().await.unwrap().contains("rentcheck serve"),
            "it says where the link is"
        );
    }
    let res = app
        .anon
        .post(app.url("/setup"))
        .form(&[("email", "x@example.com")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    // Whoever started the server has the code.
    let res = app
        .anon
        .get(app.url(&format!("/setup?code={}", app.setup_code)))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // The login page points at the printed link, not at a bare /setup.
    let login = app
        .anon
        .get(app.url("/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(login.contains("setup?code="), "{login}");
}

#[tokio::test]
async fn only_an_admin_shares_a_brief_from_before_ownership() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    // Before ownership existed: no owner, no team.
    sqlx::query("DELETE FROM brief_owners")
        .execute(&app.pool)
        .await
        .unwrap();
    let team = teams::create_team(&app.pool, "their team").await.unwrap();
    let engineer = app.login(Role::Engineer).await;
    let share = |who: &common::Person| {
        who.client
            .post(app.url(&format!("/briefs/{brief}/sharing/teams")))
            .form(&[("csrf_token", who.csrf.as_str()), ("team", &team.id.to_string())])
            .send()
    };
    let res = share(&engineer).await.unwrap();
    assert_eq!(res.status(), 403);
    assert!(res.text().await.unwrap().contains("only an admin may share it"));
    assert_eq!(app.count("brief_teams").await, 0, "nobody was locked out");
    let page = engineer
        .get(app.url(&format!("/briefs/{brief}/sharing")))
        .await
        .text()
        .await
        .unwrap();
    assert!(
        !page.contains(&format!("action=\"/briefs/{brief}/sharing/teams\"")),
        "no share form for them"
    );
    assert!(page.contains("only an admin may share it"), "and the page says why");
    let admin = app.login(Role::Admin).await;
    assert_eq!(share(&admin).await.unwrap().status(), 303);
    assert_eq!(app.count("brief_teams").await, 1);
}

#[tokio::test]
async fn an_empty_or_short_metrics_token_stops_the_start() {
    let app = spawn_app().await;
    for token in ["", "x", "31-characters-is-one-too-short!"] {
        let data = tempfile::tempdir().unwrap();
        let log = data.path().join("serve.log");
        let mut server = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
            .arg("serve")
            .env("DATABASE_URL", &app.database_url)
            .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
            .env("RENTCHECK_DATA_DIR", data.path())
            .env("RENTCHECK_ADDR", "127.0.0.1:0")
            .env("RENTCHECK_METRICS_TOKEN", token)
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        // A server that started would run until stopped: give it a while, then stop it.
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let exit = loop {
            if let Some(exit) = server.try_wait().unwrap() {
                break Some(exit);
            }
            if std::time::Instant::now() > deadline {
                server.kill().unwrap();
                server.wait().unwrap();
                break None;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(exit.is_some_and(|e| !e.success()), "{token:?} started the server");
        let said = std::fs::read_to_string(&log).unwrap();
        assert!(
            said.contains("RENTCHECK_METRICS_TOKEN must be at least 32 characters"),
            "{said}"
        );
    }
    // And a server given one in code anyway keeps the route off rather than open.
    let app = spawn_app_with(AppConfig {
        metrics_token: Some(Secret::new("")),
        ..AppConfig::default()
    })
    .await;
    let res = app
        .anon
        .get(app.url("/metrics/briefs"))
        .header("authorization", "Bearer ")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

#[tokio::test]
async fn nul_is_refused_with_422_at_every_text_field() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let nul = "a\u{0}b";
    let expect_422 = |what: &'static str, field: &'static str| {
        move |res: reqwest::Response| async move {
            let code = res.status();
            let text = res.text().await.unwrap();
            assert_eq!(code, 422, "{what}: {text}");
            assert!(text.contains(field), "{what} names {field}: {text}");
            assert!(text.contains("NUL"), "{what}: {text}");
        }
    };
    // The brief: its model config (a config.json upload) and what it persists.
    let body = BriefBuilder::new().model_config(json!({ "architectures": [nul], "num_hidden_layers": 80 }));
    expect_422("model_config", "model_config.architectures[0]")(body.post(&app).await).await;
    let body = BriefBuilder::new().set("persist", json!(["weights", nul]));
    expect_422("persist", "persist[1]")(body.put(&app, &brief).await).await;
    // A card criterion's why.
    let mut card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    card["criteria"][0]["why"] = json!(nul);
    expect_422("card why", "criteria[0].why")(CardBuilder::of(card["criteria"].clone()).put(&app, &brief).await).await;
    // An approval's comment.
    let (_, _, manager) = person_token(&app, Role::Manager, None).await;
    let res = bearer_client(&manager)
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": nul, "inputs_digest": "x" }))
        .send()
        .await
        .unwrap();
    expect_422("approval comment", "comment")(res).await;
    // A webhook's secret.
    let (_, _, admin) = person_token(&app, Role::Admin, None).await;
    let res = bearer_client(&admin)
        .post(app.url("/api/v1/webhooks"))
        .json(&json!({ "url": "https://hooks.example/x", "events": ["approval.recorded"], "secret": format!("{nul}-long-enough-secret") }))
        .send()
        .await
        .unwrap();
    expect_422("webhook secret", "secret")(res).await;
    // The brief list's filters, in the API and on the dashboard.
    for filter in ["q", "team"] {
        let res = app.get(&format!("/api/v1/briefs?{filter}=a%00b")).await;
        expect_422("list filter", filter)(res).await;
    }
    let person = app.login(Role::Engineer).await;
    expect_422("the dashboard filter", "q")(person.get(app.url("/?q=a%00b")).await).await;
    // A form field (the account page), and a file part of a form (the card editor's config.json
    // is one; the price sheet another).
    let res = person
        .client
        .post(app.url("/account/password"))
        .form(&[
            ("csrf_token", person.csrf.as_str()),
            ("current_password", nul),
            ("new_password", nul),
        ])
        .send()
        .await
        .unwrap();
    expect_422("a form field", "current_password")(res).await;
    let manager_person = app.login(Role::Manager).await;
    let form = reqwest::multipart::Form::new()
        .text("csrf_token", manager_person.csrf.clone())
        .part(
            "csv",
            reqwest::multipart::Part::bytes(
                format!("{SHEET}Cloud\u{0},H100 SXM,8,on-demand,2.49,USD,,2026-11-01,q\n").into_bytes(),
            )
            .file_name("prices.csv"),
        );
    let res = manager_person
        .client
        .post(app.url("/prices/preview"))
        .multipart(form)
        .send()
        .await
        .unwrap();
    expect_422("a file part", "csv")(res).await;
    // The sign-in form.
    let res = app.submit_login(&cookie_client(), nul, nul, "/").await;
    expect_422("the sign-in form", "email")(res).await;
}

// --- Approvals ----------------------------------------------------------------------------------

async fn digest(app: &TestApp, client: &reqwest::Client, brief: &str) -> String {
    let r: Value = client
        .get(app.url(&format!("/api/v1/briefs/{brief}/review")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    r["inputs_digest"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_manager_who_changed_the_card_needs_a_second_manager_to_approve() {
    let app = spawn_app().await;
    let (_, _, mine) = person_token(&app, Role::Manager, None).await;
    let mine = bearer_client(&mine);
    // Their own brief, and its card loosened by them.
    let body = BriefBuilder::new().shared_hardware_ok().json();
    let res = mine.post(app.url("/api/v1/briefs")).json(&body).send().await.unwrap();
    assert_eq!(res.status(), 201);
    let brief = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    let card: Value = mine
        .get(app.url(&format!("/api/v1/briefs/{brief}/card")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut criteria = card["criteria"].clone();
    criteria
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .skip(1)
        .for_each(|c| c["required"] = json!(false));
    let res = mine
        .put(app.url(&format!("/api/v1/briefs/{brief}/card")))
        .json(&json!({ "criteria": criteria }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let approve = |client: reqwest::Client, digest: String, verdict: &'static str| {
        let url = app.url(&format!("/api/v1/briefs/{brief}/approvals"));
        async move {
            client
                .post(url)
                .json(&json!({ "verdict": verdict, "comment": "ok with it", "inputs_digest": digest }))
                .send()
                .await
                .unwrap()
        }
    };
    let d = digest(&app, &mine, &brief).await;
    let res = approve(mine.clone(), d.clone(), "approve").await;
    assert_eq!(res.status(), 403, "their own change");
    assert!(res.text().await.unwrap().contains("another manager must approve it"));
    // Rejecting their own change is still theirs to do; approving is a second manager's.
    let (_, _, second) = person_token(&app, Role::Manager, None).await;
    let res = approve(bearer_client(&second), d.clone(), "approve").await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    // After that approval, the first manager may approve again (they changed nothing since).
    let d = digest(&app, &mine, &brief).await;
    assert_eq!(approve(mine.clone(), d, "approve").await.status(), 201);
}

#[tokio::test]
async fn a_card_with_no_required_criterion_is_not_approved_as_accepted() {
    let app = spawn_app().await;
    let brief = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let card: Value = app
        .get(&format!("/api/v1/briefs/{brief}/card"))
        .await
        .json()
        .await
        .unwrap();
    let mut criteria = card["criteria"].clone();
    criteria
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .for_each(|c| c["required"] = json!(false));
    assert_eq!(CardBuilder::of(criteria).put(&app, &brief).await.status(), 200);
    let (_, _, manager) = person_token(&app, Role::Manager, None).await;
    let manager = bearer_client(&manager);
    let review: Value = manager
        .get(app.url(&format!("/api/v1/briefs/{brief}/review")))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        review["trials"][0]["accepted"], true,
        "accepted with nothing required: {review:.500}"
    );
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "approve", "comment": "", "inputs_digest": review["inputs_digest"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "verdict");
    assert!(problem["errors"][0]["message"]
        .as_str()
        .unwrap()
        .contains("no required criterion"));
    assert_eq!(app.count("approvals").await, 0);
}

// --- Webhooks -----------------------------------------------------------------------------------

#[tokio::test]
async fn webhooks_to_loopback_link_local_and_private_addresses_are_refused_in_every_notation() {
    let app = spawn_app().await;
    let (_, _, admin) = person_token(&app, Role::Admin, None).await;
    let admin = bearer_client(&admin);
    let create = |url: &str| {
        admin
            .post(app.url("/api/v1/webhooks"))
            .json(&json!({ "url": url, "events": ["approval.recorded"] }))
            .send()
    };
    for url in [
        "https://127.0.0.1/hook",
        "https://2130706433/hook",
        "https://0x7f000001/hook",
        "https://0177.0.0.1/hook",
        "https://127.1/hook",
        "https://[::1]/hook",
        "https://[::ffff:127.0.0.1]/hook",
        "https://169.254.169.254/latest/meta-data/",
        "https://10.0.0.8/hook",
        "https://192.168.1.10/hook",
        "https://[fd12::1]/hook",
        "https://[fe80::1]/hook",
        "https://localhost/hook",
    ] {
        let res = create(url).await.unwrap();
        assert_eq!(res.status(), 422, "{url}");
        let problem: Value = res.json().await.unwrap();
        assert_eq!(problem["errors"][0]["field"], "url");
        assert!(
            problem["errors"][0]["message"]
                .as_str()
                .unwrap()
                .contains("public address"),
            "{problem}"
        );
    }
    assert_eq!(app.count("webhooks").await, 0);
    assert_eq!(create("https://hooks.example/rentcheck").await.unwrap().status(), 201);

    // With RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true a receiver inside the network is fine.
    let inside = spawn_app_with(AppConfig {
        webhooks: WebhookSettings {
            allow_private: true,
            ..WebhookSettings::default()
        },
        ..AppConfig::default()
    })
    .await;
    let (_, _, admin) = person_token(&inside, Role::Admin, None).await;
    let res = bearer_client(&admin)
        .post(inside.url("/api/v1/webhooks"))
        .json(&json!({ "url": "https://10.0.0.8/hook", "events": ["approval.recorded"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

/// A webhook row as one added before these checks (or while private addresses were allowed).
async fn stored_webhook(app: &TestApp, url: &str) {
    sqlx::query(
        "INSERT INTO webhooks (id, url, events, secret, created_by) VALUES ($1, $2, ARRAY['approval.recorded'], 'a secret of some length', 'test')",
    )
    .bind(Uuid::now_v7())
    .bind(url)
    .execute(&app.pool)
    .await
    .unwrap();
}

async fn reject_once(app: &TestApp) {
    let brief = BriefBuilder::new().shared_hardware_ok().create_id(app).await;
    let (_, _, manager) = person_token(app, Role::Manager, None).await;
    let manager = bearer_client(&manager);
    let d = digest(app, &manager, &brief).await;
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": "no", "inputs_digest": d }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
}

/// The errors of the attempts made so far, waiting until there are `n`.
async fn attempt_errors(app: &TestApp, n: usize) -> Vec<(Option<String>, i32)> {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let rows: Vec<(Option<String>, i32)> =
            sqlx::query_as("SELECT error, duration_ms FROM webhook_attempts ORDER BY attempted_at")
                .fetch_all(&app.pool)
                .await
                .unwrap();
        if rows.len() >= n {
            return rows;
        }
        assert!(std::time::Instant::now() < deadline, "{} attempts of {n}", rows.len());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn worker_settings(allow_private: bool) -> AppConfig {
    AppConfig {
        webhooks: WebhookSettings {
            allow_http: true,
            allow_private,
            timeout: Duration::from_secs(2),
            retry_base: Duration::from_secs(60),
            retry_max: Duration::from_secs(60),
            poll: Duration::from_millis(50),
            settle: Duration::from_millis(50),
            ..WebhookSettings::default()
        },
        ..AppConfig::default()
    }
}

#[tokio::test]
async fn a_delivery_never_reaches_a_private_address_and_failures_do_not_tell_which_ports_answer() {
    // A receiver on this machine, and a webhook pointing at it stored before the rules.
    let received = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let counter = received.clone();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            drop(socket);
        }
    });
    let app = spawn_app_with(worker_settings(false)).await;
    stored_webhook(&app, &format!("http://127.0.0.1:{port}/hook")).await;
    stored_webhook(&app, &format!("http://localhost:{port}/hook")).await;
    rentcheck::signals::worker::spawn(rentcheck::state::AppState::new(
        app.pool.clone(),
        worker_settings(false),
        app.keys.clone(),
    ));
    reject_once(&app).await;
    let attempts = attempt_errors(&app, 2).await;
    for (error, _) in &attempts {
        let error = error.as_deref().unwrap_or_default();
        assert!(error.starts_with("not sent") && error.contains("loopback"), "{error}");
    }
    assert_eq!(
        received.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "nothing reached this machine"
    );

    // Allowed to send inside the network: a port that answers and closes, and a port nobody
    // listens on, read the same (no error text, no time, that tells them apart).
    let inside = spawn_app_with(worker_settings(true)).await;
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    stored_webhook(&inside, &format!("http://127.0.0.1:{port}/hook")).await;
    stored_webhook(&inside, &format!("http://127.0.0.1:{closed}/hook")).await;
    rentcheck::signals::worker::spawn(rentcheck::state::AppState::new(
        inside.pool.clone(),
        worker_settings(true),
        inside.keys.clone(),
    ));
    reject_once(&inside).await;
    let attempts = attempt_errors(&inside, 2).await;
    assert_eq!(attempts[0], attempts[1], "{attempts:?}");
    assert_eq!(attempts[0].0.as_deref(), Some(rentcheck::signals::worker::UNREACHABLE));
    assert_eq!(attempts[0].1, 0);
    assert!(
        received.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "the open port was reached"
    );
}

#[tokio::test]
async fn a_refresh_after_adding_a_webhook_adds_no_second_one() {
    let app = spawn_app().await;
    let admin = app.login(Role::Admin).await;
    let res = admin
        .client
        .post(app.url("/admin/webhooks"))
        .form(&[
            ("csrf_token", admin.csrf.as_str()),
            ("url", "https://hooks.example/a"),
            ("event.approval.recorded", "on"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "post/redirect/get");
    let shown = admin.get(app.url("/admin/webhooks")).await.text().await.unwrap();
    assert!(shown.contains("shown this once"));
    // The refresh: a GET that shows no secret and adds nothing.
    let again = admin.get(app.url("/admin/webhooks")).await.text().await.unwrap();
    assert!(!again.contains("shown this once"));
    assert_eq!(app.count("webhooks").await, 1);
}

// --- Info findings --------------------------------------------------------------------------------

#[tokio::test]
async fn signed_in_pages_and_api_answers_are_never_stored() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let person = app.login(Role::Engineer).await;
    for path in [
        "/".to_owned(),
        format!("/briefs/{brief}"),
        format!("/briefs/{brief}/review"),
        "/account".to_owned(),
        "/glossary".to_owned(),
    ] {
        let res = person.get(app.url(&path)).await;
        assert_eq!(res.status(), 200, "{path}");
        assert_eq!(res.headers()["cache-control"], "no-store", "{path}");
    }
    let res = app.get(&format!("/api/v1/briefs/{brief}")).await;
    assert_eq!(res.headers()["cache-control"], "no-store");
    let css = app.anon.get(app.url("/static/app.css")).send().await.unwrap();
    assert!(
        css.headers()["cache-control"].to_str().unwrap().starts_with("public"),
        "static files may be kept"
    );
}

#[tokio::test]
async fn price_sheets_refuse_a_zero_rate_an_exponent_and_an_unknown_currency() {
    let app = spawn_app().await;
    let (_, _, manager) = person_token(&app, Role::Manager, None).await;
    let manager = bearer_client(&manager);
    for (rate, currency, column) in [
        ("0", "USD", "rate_per_gpu_hour"),
        ("0.00", "USD", "rate_per_gpu_hour"),
        ("1e3", "USD", "rate_per_gpu_hour"),
        ("1_000", "USD", "rate_per_gpu_hour"),
        ("2.49", "QQQ", "currency"),
    ] {
        let sheet = format!(
            "provider,gpu,gpu_count,billing,rate_per_gpu_hour,currency,region,valid_from,source\n\
             Cloud A,H100 SXM,8,on-demand,{rate},{currency},us-east,2026-11-01,quote\n"
        );
        let res = manager
            .post(app.url("/api/v1/prices"))
            .header("content-type", "text/csv")
            .body(sheet)
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 422, "{rate} {currency}");
        let problem: Value = res.json().await.unwrap();
        assert!(
            problem["errors"][0]["field"].as_str().unwrap().contains(column),
            "{problem}"
        );
    }
    assert_eq!(app.count("prices").await, 0);
}

#[tokio::test]
async fn the_data_dir_and_the_generated_secret_are_private_whatever_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    let app = spawn_app().await;
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("fresh").join("rentcheck");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "umask 000 && exec '{}' token mint --email {} --role agent --brief {} --ttl 1d",
            env!("CARGO_BIN_EXE_rentcheck"),
            common::OWNER_EMAIL,
            app.brief_id().await
        ))
        .env("DATABASE_URL", &app.database_url)
        .env_remove("RENTCHECK_JWT_SECRET")
        .env("RENTCHECK_DATA_DIR", &data)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let root_user = rentcheck::secrets::current_uid() == Some(0);
    // Run as root it stays passable (0711) for the private cluster's `postgres` user; never readable.
    assert_eq!(mode(&data), if root_user { 0o711 } else { 0o700 }, "the data dir");
    assert_eq!(mode(&data.join("jwt-secret")), 0o600, "the signing secret");
}

#[tokio::test]
async fn refused_tokens_are_audited_and_a_flood_of_refusals_writes_a_row_now_and_then() {
    let app = spawn_app_with(behind_a_proxy()).await;
    // A forged token, fifty times.
    let forged = bearer_client("eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2lnbmF0dXJl");
    for _ in 0..50 {
        assert_eq!(status(&forged, app.url("/api/v1/briefs")).await, 401);
    }
    assert_eq!(audit_count(&app, "auth.token.refused").await, 1);
    let row: Value = sqlx::query_scalar("SELECT details FROM audit_log WHERE action = 'auth.token.refused'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(
        row["reason"].as_str().unwrap().contains("invalid bearer token"),
        "{row}"
    );
    assert_eq!(row["client"], "127.0.0.1");
    // A revoked one is a refusal too.
    let (uid, _, revoked) = person_token(&app, Role::Engineer, None).await;
    token::revoke_all_for_user(&app.pool, uid).await.unwrap();
    let res = app
        .anon
        .get(app.url("/api/v1/briefs"))
        .bearer_auth(&revoked)
        .header("x-forwarded-for", "203.0.113.9")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(audit_count(&app, "auth.token.refused").await, 2);

    // A locked account hammered: one row for the lot.
    let email = app.user(Role::Engineer).await;
    sqlx::query("INSERT INTO sign_in_accounts (email, failures, locked_at) VALUES ($1, 10, now())")
        .bind(&email)
        .execute(&app.pool)
        .await
        .unwrap();
    for _ in 0..30 {
        assert_eq!(sign_in(&app, &email, "guess", "203.0.113.9", None).await.0, 429);
    }
    assert_eq!(audit_count(&app, "login.refused").await, 1);
}

#[tokio::test]
async fn the_audit_log_cannot_be_truncated() {
    let app = spawn_app().await;
    app.brief_id().await;
    let before = app.count("audit_log").await;
    assert!(before > 0);
    let err = sqlx::query("TRUNCATE audit_log").execute(&app.pool).await.unwrap_err();
    assert!(err.to_string().contains("append-only"), "{err}");
    assert_eq!(app.count("audit_log").await, before);
}

#[test]
fn every_route_classified_here_is_still_registered() {
    // A route renamed or removed leaves a stale line in `reach`; the walk would not notice, this does.
    let routes: BTreeSet<(String, String)> = registered_routes_under("/");
    for (method, path) in [
        ("POST", "/api/v1/prices"),
        ("GET", "/api/v1/users/{uid}/tokens"),
        ("DELETE", "/api/v1/users/{uid}/tokens/{jti}"),
        ("POST", "/api/v1/briefs/{id}/approvals"),
        ("GET", "/metrics/briefs"),
        ("POST", "/admin/users/{uid}/unlock"),
        ("GET", "/admin/users/{uid}/tokens"),
        ("POST", "/account/tokens/{jti}/revoke"),
    ] {
        assert!(
            routes.contains(&(method.to_owned(), path.to_owned())),
            "{method} {path}"
        );
    }
}
