//! Signals out: webhooks told of approvals, decisions and failed evidence, delivered
//! signed, retried and kept; and the per-brief gauges for Prometheus.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{body::Bytes, extract::State, http::HeaderMap, http::StatusCode, routing::post, Router};
use hmac::{Hmac, Mac};
use rentcheck::{
    auth::Role,
    config::{AppConfig, WebhookSettings},
    secrets::Secret,
    signals,
    state::AppState,
};
use serde_json::{json, Value};
use sha2::Sha256;
use sqlx::{postgres::PgPoolOptions, PgPool};

use crate::common::builders::{BriefBuilder, EvidenceBuilder};
use crate::{
    common::{self, bearer_client, fixture, spawn_app_with, TestApp, METRICS_TOKEN},
    operations::resilience::FlakyLink,
};

const SECRET: &str = "a shared secret of some length";

/// Retries in a fraction of a second instead of minutes, and http:// receivers on loopback (a
/// private address: allowed here as `RENTCHECK_WEBHOOK_ALLOW_PRIVATE=true` allows it).
fn fast() -> AppConfig {
    AppConfig {
        webhooks: WebhookSettings {
            allow_http: true,
            allow_private: true,
            timeout: Duration::from_secs(5),
            retry_base: Duration::from_millis(200),
            retry_max: Duration::from_secs(1),
            give_up_after: Duration::from_secs(120),
            poll: Duration::from_millis(50),
            settle: Duration::from_millis(50),
        },
        metrics_token: Some(Secret::new(METRICS_TOKEN)),
        ..AppConfig::default()
    }
}

/// The worker `rentcheck serve` starts, over `pool`.
fn start_worker(pool: PgPool, app: &TestApp, config: AppConfig) {
    signals::worker::spawn(AppState::new(pool, config, app.keys.clone()));
}

/// A second server over the app's database with the worker beside it, sharing its state, as
/// `rentcheck serve` runs them: its `/metrics` counts the worker's attempts. Answers its base URL.
async fn serve_with_worker(app: &TestApp, config: AppConfig) -> String {
    let state = AppState::new(app.pool.clone(), config, app.keys.clone());
    signals::worker::spawn(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(rentcheck::http::serve(
        listener,
        rentcheck::http::app(state),
        std::future::pending(),
    ));
    base
}

/// One POST a receiver got.
#[derive(Debug, Clone)]
struct Received {
    timestamp: String,
    signature: String,
    event: String,
    delivery: String,
    body: Bytes,
}

impl Received {
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

#[derive(Clone)]
struct Receiver {
    got: Arc<Mutex<Vec<Received>>>,
    /// Answer 503 to this many requests first.
    fail_first: usize,
    /// How long each answer takes.
    delay: Duration,
}

/// A webhook receiver on 127.0.0.1:0; answers 503 to the first `fail_first` requests, then 200.
async fn receiver(fail_first: usize, delay: Duration) -> (String, Arc<Mutex<Vec<Received>>>) {
    let got = Arc::new(Mutex::new(Vec::new()));
    let state = Receiver {
        got: got.clone(),
        fail_first,
        delay,
    };
    async fn hook(State(r): State<Receiver>, headers: HeaderMap, body: Bytes) -> StatusCode {
        let h = |name: &str| {
            headers
                .get(name)
                .and_then(|v| v.to_str().ok())
                .unwrap_or_default()
                .to_owned()
        };
        let n = {
            let mut got = r.got.lock().unwrap();
            got.push(Received {
                timestamp: h("x-rentcheck-timestamp"),
                signature: h("x-rentcheck-signature"),
                event: h("x-rentcheck-event"),
                delivery: h("x-rentcheck-delivery"),
                body,
            });
            got.len()
        };
        tokio::time::sleep(r.delay).await;
        if n <= r.fail_first {
            StatusCode::SERVICE_UNAVAILABLE
        } else {
            StatusCode::OK
        }
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let app = Router::new().route("/hook", post(hook)).with_state(state);
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, got)
}

/// What docs/operations.md tells a receiver to do: HMAC-SHA256 over the body with the secret,
/// compared with the header; then the signed `sent_at` within five minutes (and the timestamp
/// header the same instant).
fn verify(r: &Received, secret: &str) -> bool {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(&r.body);
    let Some(given) = r.signature.strip_prefix("sha256=").and_then(|h| hex::decode(h).ok()) else {
        return false;
    };
    if mac.verify_slice(&given).is_err() {
        return false;
    }
    let body: Value = serde_json::from_slice(&r.body).unwrap();
    let Some(sent_at) = body["sent_at"]
        .as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
    else {
        return false;
    };
    r.timestamp.parse::<i64>().ok() == Some(sent_at.timestamp())
        && (chrono::Utc::now().timestamp() - sent_at.timestamp()).abs() <= 300
}

async fn wait_until<F: FnMut() -> bool>(what: &str, mut done: F) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn wait_for_sql(pool: &PgPool, what: &str, sql: &str, want: i64) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let n: i64 = sqlx::query_scalar(sql).fetch_one(pool).await.unwrap_or(-1);
        if n == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what} (last {n}, want {want})"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn subscribe(app: &TestApp, url: &str, events: &[&str]) -> Value {
    let admin = bearer_client(&app.token(Role::Admin, None).await);
    let res = admin
        .post(app.url("/api/v1/webhooks"))
        .json(&json!({ "url": url, "events": events, "secret": SECRET }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    res.json().await.unwrap()
}

async fn digest(app: &TestApp, brief: &str) -> String {
    let r: Value = app
        .get(&format!("/api/v1/briefs/{brief}/review"))
        .await
        .json()
        .await
        .unwrap();
    r["inputs_digest"].as_str().unwrap().to_owned()
}

async fn reject(app: &TestApp, manager: &reqwest::Client, brief: &str) -> reqwest::Response {
    let digest = digest(app, brief).await;
    manager
        .post(app.url(&format!("/api/v1/briefs/{brief}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": "Not on this provider.", "inputs_digest": digest }))
        .send()
        .await
        .unwrap()
}

async fn failed_upload(app: &TestApp, base: &str, brief: &str) {
    let res = app
        .client
        .post(format!(
            "{base}/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1"
        ))
        .header("content-type", "text/plain")
        .body(fixture("nvidia-smi-list/driver-failure.txt"))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["parse_status"], "failed");
}

#[tokio::test]
async fn only_admins_manage_webhooks_and_only_https_urls_unless_allowed() {
    let app = spawn_app_with(AppConfig::default()).await;
    let admin = bearer_client(&app.token(Role::Admin, None).await);
    let url = app.url("/api/v1/webhooks");

    let res = admin
        .post(&url)
        .json(&json!({ "url": "http://hooks.example/rentcheck", "events": ["approval.recorded"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422);
    let problem: Value = res.json().await.unwrap();
    assert_eq!(problem["errors"][0]["field"], "url");
    assert!(problem["errors"][0]["message"].as_str().unwrap().contains("https://"));

    let res = admin
        .post(&url)
        .json(&json!({ "url": "https://hooks.example/x", "events": ["approval.granted"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 422, "an unknown event is refused");

    let res = app
        .client
        .post(&url)
        .json(&json!({ "url": "https://hooks.example/x", "events": ["approval.recorded"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "engineers do not manage webhooks");

    // Without a secret one is generated and answered this once.
    let res = admin
        .post(&url)
        .json(&json!({ "url": "https://hooks.example/x", "events": ["approval.recorded", "decision.changed"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let created: Value = res.json().await.unwrap();
    let secret = created["secret"].as_str().unwrap().to_owned();
    assert_eq!(secret.len(), 64);
    let listed = admin.get(&url).send().await.unwrap().text().await.unwrap();
    assert!(listed.contains("https://hooks.example/x"));
    assert!(!listed.contains(&secret), "a secret is never answered again");
    let stored: String = sqlx::query_scalar("SELECT details::text FROM audit_log WHERE action = 'webhook.created'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert!(!stored.contains(&secret), "nor written to the audit log");
    // Nor the URL's path, which is a Slack or Teams webhook's secret: its host alone.
    assert!(
        stored.contains("https://hooks.example/…") && !stored.contains("/x\""),
        "{stored}"
    );

    let one = format!("{url}/{}", created["id"].as_str().unwrap());
    assert_eq!(admin.delete(&one).send().await.unwrap().status(), 204);
    assert_eq!(admin.delete(&one).send().await.unwrap().status(), 404);
}

#[tokio::test]
async fn admins_add_and_remove_webhooks_on_their_page_with_the_csrf_token() {
    let app = spawn_app_with(AppConfig::default()).await;
    let admin = app.login(Role::Admin).await;
    let page = admin.get(app.url("/admin/webhooks")).await;
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("Add a webhook"));
    let engineer = app.login(Role::Engineer).await;
    assert_eq!(engineer.get(app.url("/admin/webhooks")).await.status(), 403);

    let add = |fields: Vec<(&str, &str)>| admin.client.post(app.url("/admin/webhooks")).form(&fields).send();
    let res = add(vec![
        ("url", "https://hooks.example/a"),
        ("event.approval.recorded", "on"),
    ])
    .await
    .unwrap();
    assert_eq!(res.status(), 403, "no CSRF token, no webhook");
    assert_eq!(app.count("webhooks").await, 0);

    let res = add(vec![
        ("csrf_token", admin.csrf.as_str()),
        ("url", "http://hooks.example/a"),
        ("event.approval.recorded", "on"),
    ])
    .await
    .unwrap();
    assert_eq!(res.status(), 422);
    let page = res.text().await.unwrap();
    assert!(page.contains("url must be an https:// URL"), "{page}");
    assert!(
        page.contains("value=\"http://hooks.example/a\""),
        "the form keeps what was typed"
    );

    let res = add(vec![
        ("csrf_token", admin.csrf.as_str()),
        ("url", "https://hooks.example/a"),
        ("event.approval.recorded", "on"),
        ("event.decision.changed", "on"),
    ])
    .await
    .unwrap();
    // Post/redirect/get: the secret is shown once on the page the redirect leads to.
    assert_eq!(res.status(), 303);
    let res = admin.get(app.url("/admin/webhooks")).await;
    assert_eq!(res.headers()["cache-control"], "no-store");
    let page = res.text().await.unwrap();
    assert!(page.contains("shown this once"), "a generated secret is shown once");
    let events: Vec<String> = sqlx::query_scalar("SELECT unnest(events) FROM webhooks")
        .fetch_all(&app.pool)
        .await
        .unwrap();
    assert_eq!(events, ["decision.changed", "approval.recorded"]);
    let again = admin.get(app.url("/admin/webhooks")).await.text().await.unwrap();
    assert!(again.contains("https://hooks.example/a") && !again.contains("shown this once"));

    let id: uuid::Uuid = sqlx::query_scalar("SELECT id FROM webhooks")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    let res = admin
        .client
        .post(app.url(&format!("/admin/webhooks/{id}/delete")))
        .form(&[("csrf_token", admin.csrf.as_str())])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    assert_eq!(app.count("webhooks").await, 0);
}

#[tokio::test]
async fn an_approval_reaches_a_receiver_signed_and_retried_and_every_attempt_is_kept() {
    let app = spawn_app_with(fast()).await;
    let worker = serve_with_worker(&app, fast()).await;
    let (hook, got) = receiver(1, Duration::ZERO).await;
    subscribe(&app, &hook, &["approval.recorded"]).await;
    let brief = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    assert_eq!(reject(&app, &manager, &brief).await.status(), 201);

    wait_until("a retry after the 503", || got.lock().unwrap().len() >= 2).await;
    // The receiver has the retry before the worker has stored its answer: on a busy machine the
    // delivery is still pending for a moment after the second request arrives.
    wait_for_sql(
        &app.pool,
        "the delivery recorded as delivered",
        "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered' AND attempts = 2",
        1,
    )
    .await;
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 2, "one failed attempt, one delivered, nothing more");
    assert_eq!(got[0].delivery, got[1].delivery, "a retry is the same delivery");
    // The same event; only the attempt's `sent_at`, which the signature dates it by, may differ.
    let event = |body: &Bytes| {
        let mut v: Value = serde_json::from_slice(body).unwrap();
        v.as_object_mut()
            .unwrap()
            .remove("sent_at")
            .expect("every attempt says when it was sent");
        v
    };
    assert_eq!(event(&got[0].body), event(&got[1].body));
    for r in &got {
        assert!(verify(r, SECRET), "the signature verifies: {r:?}");
        assert!(!verify(r, "another secret"));
        assert_eq!(r.event, "approval.recorded");
    }
    let mut tampered = got[1].clone();
    tampered.body = Bytes::from(String::from_utf8_lossy(&tampered.body).replace("reject", "approve"));
    assert!(!verify(&tampered, SECRET), "a changed body does not verify");

    let event = got[1].json();
    assert_eq!(event["event"], "approval.recorded");
    assert_eq!(event["brief"]["id"], brief.as_str());
    assert_eq!(event["brief"]["name"], common::valid_brief()["name"]);
    assert!(event["trial"].is_string());
    assert_eq!(event["old"], Value::Null, "no verdict before this one");
    assert_eq!(event["new"]["verdict"], "reject");
    assert_eq!(event["new"]["decision"], "stop");
    assert_eq!(event["link"], format!("http://127.0.0.1:8080/briefs/{brief}/review"));
    let text = event["text"].as_str().unwrap();
    assert!(text.contains("rejected stop on brief"), "{text}");

    // The API and the admin page show the delivery with both attempts and their answers.
    let admin = bearer_client(&app.token(Role::Admin, None).await);
    let listed: Value = admin
        .get(app.url("/api/v1/webhooks"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let delivery = &listed["items"][0]["deliveries"][0];
    assert_eq!(delivery["state"], "delivered");
    assert_eq!(delivery["attempts"].as_array().unwrap().len(), 2);
    assert_eq!(delivery["attempts"][0]["status_code"], 503);
    assert_eq!(delivery["attempts"][1]["status_code"], 200);
    let person = app.login(Role::Admin).await;
    let page = person.get(app.url("/admin/webhooks")).await.text().await.unwrap();
    assert!(page.contains("answered 503") && page.contains("answered 200"), "{page}");
    assert!(!page.contains(SECRET));

    // The server's own metrics count the worker's attempts, for alerting on deliveries given up.
    let metrics = app
        .anon
        .get(format!("{worker}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("rentcheck_webhook_attempts_total{result=\"retrying\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("rentcheck_webhook_attempts_total{result=\"delivered\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_changed_decision_and_a_stale_approval_are_told() {
    let app = spawn_app_with(fast()).await;
    start_worker(app.pool.clone(), &app, fast());
    let (hook, got) = receiver(0, Duration::ZERO).await;
    subscribe(&app, &hook, &["decision.changed", "approval.stale"]).await;
    let brief = app.brief_id().await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    assert_eq!(reject(&app, &manager, &brief).await.status(), 201);
    // The first snapshot, taken after the approval, is the baseline.
    wait_for_sql(
        &app.pool,
        "the brief's snapshot with its approval",
        &format!("SELECT count(*) FROM review_summaries WHERE brief_id = '{brief}' AND approval_id IS NOT NULL"),
        1,
    )
    .await;
    let before: String = sqlx::query_scalar("SELECT decision FROM review_summary_trials")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_ne!(before, "stop");

    // A failed GPU diagnostic stops the trial: its decision moves and the approval goes stale.
    let res = EvidenceBuilder::failed_diag().post(&app, &brief).await;
    assert_eq!(res.status(), 201);
    wait_until("two events", || got.lock().unwrap().len() >= 2).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let got = got.lock().unwrap().clone();
    let mut events: Vec<Value> = got.iter().map(Received::json).collect();
    events.sort_by_key(|e| e["event"].as_str().unwrap().to_owned());
    assert_eq!(events.len(), 2, "{events:?}");
    assert_eq!(events[0]["event"], "approval.stale");
    assert_eq!(events[0]["old"]["verdict"], "reject");
    assert_eq!(events[0]["new"]["stale"], true);
    assert_eq!(events[1]["event"], "decision.changed");
    assert_eq!(events[1]["old"]["decision"], before.as_str());
    assert_eq!(events[1]["new"]["decision"], "stop");
    assert!(events[1]["text"].as_str().unwrap().contains("the decision is now stop"));
}

#[tokio::test]
async fn the_outbox_is_written_with_the_approval_or_not_at_all() {
    let app = spawn_app_with(fast()).await;
    subscribe(&app, "http://127.0.0.1:9/never", &["approval.recorded"]).await;
    let brief = BriefBuilder::new().shared_hardware_ok().create_id(&app).await;
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    // A check that fails at commit, after every write of the approval (its event included).
    sqlx::raw_sql(
        "CREATE FUNCTION refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS
             $$ BEGIN RAISE EXCEPTION 'refused at commit'; END $$;
         CREATE CONSTRAINT TRIGGER refuse_approvals AFTER INSERT ON approvals
             DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION refuse_at_commit();",
    )
    .execute(&app.pool)
    .await
    .unwrap();
    let res = reject(&app, &manager, &brief).await;
    assert_eq!(res.status(), 500);
    assert_eq!(app.count("approvals").await, 0);
    assert_eq!(
        app.count("webhook_events").await,
        0,
        "no event for an approval that never was"
    );
    assert_eq!(app.count("webhook_deliveries").await, 0);

    sqlx::raw_sql("DROP TRIGGER refuse_approvals ON approvals")
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(reject(&app, &manager, &brief).await.status(), 201);
    assert_eq!(app.count("approvals").await, 1);
    assert_eq!(app.count("webhook_events").await, 1);
    assert_eq!(app.count("webhook_deliveries").await, 1);

    // Nobody listens to evidence.failed here: nothing is written for it.
    failed_upload(&app, &app.base, &brief).await;
    assert_eq!(app.count("webhook_events").await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_database_deliver_each_event_once() {
    let app = spawn_app_with(fast()).await;
    let second_pool = PgPoolOptions::new()
        .max_connections(5)
        .connect(&app.database_url)
        .await
        .unwrap();
    let second = common::serve_app(second_pool.clone(), fast(), app.keys.clone()).await;
    start_worker(app.pool.clone(), &app, fast());
    start_worker(second_pool, &app, fast());
    // A slow receiver widens the window in which both workers look at the same rows.
    let (hook, got) = receiver(0, Duration::from_millis(150)).await;
    subscribe(&app, &hook, &["evidence.failed"]).await;
    let brief = app.brief_id().await;
    for i in 0..12 {
        let base = if i % 2 == 0 { app.base.clone() } else { second.clone() };
        failed_upload(&app, &base, &brief).await;
    }
    wait_until("twelve deliveries", || got.lock().unwrap().len() >= 12).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), 12, "each event once");
    let mut deliveries: Vec<&str> = got.iter().map(|r| r.delivery.as_str()).collect();
    deliveries.sort_unstable();
    deliveries.dedup();
    assert_eq!(deliveries.len(), 12);
    let event = got[0].json();
    assert_eq!(event["event"], "evidence.failed");
    assert_eq!(event["new"]["parse_status"], "failed");
    assert!(event["new"]["parse_error"]
        .as_str()
        .unwrap()
        .contains("NVIDIA-SMI has failed"));
    assert!(got.iter().all(|r| verify(r, SECRET)));
    wait_for_sql(
        &app.pool,
        "every delivery recorded once",
        "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered' AND attempts = 1",
        12,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delivery_in_flight_when_the_database_goes_away_is_not_lost() {
    let app = spawn_app_with(fast()).await;
    let (_, options) = (
        (),
        app.database_url.parse::<sqlx::postgres::PgConnectOptions>().unwrap(),
    );
    let link = FlakyLink::start((options.get_host().to_owned(), options.get_port())).await;
    let through_link = PgPoolOptions::new()
        .max_connections(3)
        .acquire_timeout(Duration::from_secs(1))
        .connect_with(options.host("127.0.0.1").port(link.addr.port()))
        .await
        .unwrap();
    start_worker(through_link, &app, fast());
    // The receiver takes a while to answer: long enough to cut the database away meanwhile.
    let (hook, got) = receiver(0, Duration::from_millis(1500)).await;
    subscribe(&app, &hook, &["evidence.failed"]).await;
    let brief = app.brief_id().await;
    failed_upload(&app, &app.base, &brief).await;

    wait_until("the delivery in flight", || !got.lock().unwrap().is_empty()).await;
    link.cut();
    tokio::time::sleep(Duration::from_secs(3)).await;
    link.restore();
    wait_for_sql(
        &app.pool,
        "the delivery recorded once the database is back",
        "SELECT count(*) FROM webhook_deliveries WHERE state = 'delivered'",
        1,
    )
    .await;
    assert_eq!(app.count("webhook_attempts").await, 1);
    let got = got.lock().unwrap().clone();
    assert!(!got.is_empty() && got.iter().all(|r| r.json()["event"] == "evidence.failed"));
}

/// One sample line of a Prometheus text page: (name, label names).
fn sample(line: &str) -> (String, Vec<String>) {
    let (name, rest) = line.split_once('{').unwrap_or((line.split(' ').next().unwrap(), ""));
    let labels = rest
        .split_once('}')
        .map(|(l, _)| l)
        .unwrap_or("")
        .split(',')
        .filter(|kv| !kv.is_empty())
        .map(|kv| kv.split_once('=').unwrap().0.to_owned())
        .collect();
    (name.to_owned(), labels)
}

#[tokio::test]
async fn per_brief_gauges_need_the_token_keep_their_labels_bounded_and_follow_approvals() {
    let app = spawn_app_with(fast()).await;
    start_worker(app.pool.clone(), &app, fast());
    let brief = app.brief_id().await;
    wait_for_sql(
        &app.pool,
        "the first snapshot",
        "SELECT count(*) FROM review_summaries",
        1,
    )
    .await;

    let url = app.url("/metrics/briefs");
    assert_eq!(app.anon.get(&url).send().await.unwrap().status(), 401);
    assert_eq!(
        app.client.get(&url).send().await.unwrap().status(),
        401,
        "a person's token is not the scrape token"
    );
    let page = app.scrape_briefs().await;
    // A gauge without a value (no ledger yet: no cost per job) has no series at all.
    let unknown_yet = [
        "rentcheck_trial_cost_per_job",
        "rentcheck_trial_utilization_ratio",
        "rentcheck_trial_days_since_evidence",
        // No approved reservation, no commitment (tests/it/commitments.rs scrapes them).
        "rentcheck_commitment_utilization",
        "rentcheck_commitment_monthly_cost",
        "rentcheck_commitment_days_left",
    ];
    for (name, _) in signals::service::GAUGES {
        let listed = page.contains(&format!("# TYPE {name} gauge"));
        assert_eq!(listed, !unknown_yet.contains(&name), "{name} in\n{page}");
    }
    let trial: String = sqlx::query_scalar("SELECT trial_id::text FROM review_summary_trials")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    for line in page.lines().filter(|l| !l.starts_with('#')) {
        let (name, labels) = sample(line);
        let expected: &[&str] = match name.as_str() {
            "rentcheck_brief_decision" => &["brief_id", "decision"],
            "rentcheck_brief_approval_stale" => &["brief_id"],
            "rentcheck_trial_decision" => &["brief_id", "decision", "trial_id"],
            _ => &["brief_id", "trial_id"],
        };
        assert_eq!(labels, expected, "{line}");
        assert!(line.contains(&format!("brief_id=\"{brief}\"")), "{line}");
    }
    assert!(page.contains(&format!(
        "rentcheck_trial_criteria_required{{brief_id=\"{brief}\",trial_id=\"{trial}\"}}"
    )));
    assert!(page.contains(&format!("rentcheck_brief_approval_stale{{brief_id=\"{brief}\"}} 0")));

    // An approval, then evidence that makes it stale: the gauge follows.
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    assert_eq!(reject(&app, &manager, &brief).await.status(), 201);
    let res = EvidenceBuilder::failed_diag().post(&app, &brief).await;
    assert_eq!(res.status(), 201);
    let stale = format!("rentcheck_brief_approval_stale{{brief_id=\"{brief}\"}} 1");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let page = app.scrape_briefs().await;
        if page.contains(&stale) {
            assert!(page.contains(&format!(
                "rentcheck_trial_decision{{brief_id=\"{brief}\",decision=\"stop\",trial_id=\"{trial}\"}} 1"
            )));
            assert!(page.contains("rentcheck_trial_days_since_evidence{"));
            break;
        }
        assert!(Instant::now() < deadline, "the stale approval never showed:\n{page}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Without RENTCHECK_METRICS_TOKEN the route is off.
    let off = spawn_app_with(AppConfig::default()).await;
    let res = off
        .anon
        .get(off.url("/metrics/briefs"))
        .bearer_auth("")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 404);
}

/// Timed tests (a bound in milliseconds or seconds on work that a busy machine slows):
/// `scripts/test.sh` runs the `timed` modules in a pass of their own, after the rest of the suite.
mod timed {
    use super::*;

    #[tokio::test]
    async fn scraping_three_hundred_briefs_reads_the_snapshot_in_milliseconds() {
        use futures_util::StreamExt as _;
        let app = spawn_app_with(fast()).await;
        // Eight at a time: the setup is not what is timed, and the pass waits for it.
        futures_util::stream::iter(0..300)
            .map(|_| app.brief_id())
            .buffer_unordered(8)
            .collect::<Vec<_>>()
            .await;
        let started = Instant::now();
        start_worker(app.pool.clone(), &app, fast());
        wait_for_sql(&app.pool, "300 snapshots", "SELECT count(*) FROM review_summaries", 300).await;
        let refreshed = started.elapsed();
        let mut times = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let page = app.scrape_briefs().await;
            times.push(t.elapsed());
            assert_eq!(page.matches("rentcheck_trial_criteria_required{").count(), 300);
        }
        times.sort();
        println!(
            "300 briefs: first snapshots in {refreshed:?}; scrape median {:?}, max {:?}",
            times[2], times[4]
        );
        assert!(times[2] < Duration::from_millis(500), "{times:?}");
    }
}

#[test]
fn the_grafana_dashboard_reads_only_gauges_that_exist() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/grafana/rentcheck.json");
    let dashboard: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    fn exprs(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::Object(map) => {
                for (k, v) in map {
                    match (k.as_str(), v) {
                        ("expr", Value::String(e)) => out.push(e.clone()),
                        _ => exprs(v, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|i| exprs(i, out)),
            _ => {}
        }
    }
    let mut found = Vec::new();
    exprs(&dashboard, &mut found);
    assert!(found.len() >= 5, "{found:?}");
    let known: Vec<&str> = signals::service::GAUGES.iter().map(|(n, _)| *n).collect();
    let mut used = std::collections::BTreeSet::new();
    for e in &found {
        for (i, _) in e.match_indices("rentcheck_") {
            let name: String = e[i..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            assert!(
                known.contains(&name.as_str()),
                "{name} (in `{e}`) is no gauge of /metrics/briefs"
            );
            used.insert(name);
        }
    }
    assert!(used.len() >= 6, "the dashboard shows most gauges: {used:?}");
    // The commitments row shows each commitment's gauges.
    for g in [
        "rentcheck_commitment_utilization",
        "rentcheck_commitment_monthly_cost",
        "rentcheck_commitment_days_left",
    ] {
        assert!(used.contains(g), "{g} is on no panel: {used:?}");
    }
    let rows: Vec<&str> = dashboard["panels"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["type"] == "row")
        .filter_map(|p| p["title"].as_str())
        .collect();
    assert!(rows.contains(&"Commitments"), "{rows:?}");
}
