//! The ledger over HTTP: JSON and CSV posts, the summary, roles, bad imports, the size cap, export.

use crate::common;
use crate::common::builders::{BriefBuilder, LedgerCsv};

use std::time::{Duration, Instant};

use common::{bearer_client, spawn_app, TestApp};
use rentcheck::auth::Role;
use serde_json::{json, Value};

const HEADER: &str = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n";

async fn brief(app: &TestApp) -> String {
    BriefBuilder::new().create_id(app).await
}

/// The worked example of tests/it/ledger/mod.rs, as CSV.
fn worked_example_csv() -> String {
    format!(
        "{HEADER}\
accelerator,r1,first run,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,8,2.50,,USD\n\
accelerator,r1,billed again,2026-03-01T08:00:00Z,2026-03-01T12:00:00Z,8,2.50,,USD\n\
accelerator,r2,side node,2026-03-01T00:00:00Z,2026-03-01T04:00:00Z,1,,6.00,USD\n\
host,vm-1,\"host, with a comma\",,,,,120.00,USD\n\
storage,,,,,,,15.50,\n\
network,,egress,,,,,4.25,USD\n\
support,,,,,,,30,USD\n\
license,,,,,,,9.75,usd\n"
    )
}

#[tokio::test]
async fn worked_example_over_csv_and_json() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let res = LedgerCsv::new(worked_example_csv())
        .post_with(&app.client, &app, &id)
        .await;
    assert_eq!(res.status(), 201);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["lines_added"], 8);
    assert_eq!(body["cost_per_job"], Value::Null, "nothing accepted yet");

    let res = app
        .post_json(
            &format!("/api/v1/briefs/{id}/ledger"),
            &json!({ "outputs": { "accepted": 1000, "rejected": 50, "retries": 20, "failed_jobs": 7, "idle_hours": "25" } }),
        )
        .await;
    assert_eq!(res.status(), 201);

    let view: Value = app
        .get(&format!("/api/v1/briefs/{id}/ledger"))
        .await
        .json()
        .await
        .unwrap();
    let s = &view["summary"];
    assert_eq!(
        s,
        &json!({
            "currency": "USD",
            "accelerator_hours": "100",
            "totals": { "accelerator": "246", "host": "120", "storage": "15.5", "network": "4.25", "support": "30", "license": "9.75" },
            "total": "425.5",
            "accepted_outputs": 1000,
            "cost_per_job": "0.4255",
            "diagnostics": { "idle_hours": "25", "failed_jobs": 7, "rejected_outputs": 50, "retries": 20 }
        })
    );
    assert_eq!(view["lines_total"], 8);
    assert_eq!(view["lines"][0]["category"], "license", "newest first");
    assert_eq!(view["lines"][7]["amount"], "200", "computed from 10 h × 8 × 2.50");
    assert_eq!(view["outputs"]["accepted"], 1000);

    // Outputs replace the figures they name and keep the others: re-sending never doubles them.
    app.post_json(
        &format!("/api/v1/briefs/{id}/ledger"),
        &json!({ "outputs": { "accepted": 1000 } }),
    )
    .await;
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{id}/ledger"),
            &json!({ "outputs": { "accepted": 850 } }),
        )
        .await;
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["accepted_outputs"], 850);
    assert_eq!(s["cost_per_job"], "0.5005882352941176470588235294");
    assert_eq!(s["diagnostics"]["failed_jobs"], 7);

    // The import is in the audit log.
    let audits: i64 = sqlx::query_scalar("SELECT count(*) FROM audit_log WHERE action = 'ledger.import'")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(audits, 4);
}

/// api.md: 400 is for a body that is not JSON; JSON of the wrong shape is 422 at the field.
#[tokio::test]
async fn json_of_the_wrong_shape_is_422_at_the_field_and_broken_json_400() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let path = format!("/api/v1/briefs/{id}/ledger");
    let res = app
        .post_json(
            &path,
            &json!({ "lines": [{ "category": "host", "amount": "1", "colour": "red" }] }),
        )
        .await;
    assert_eq!(res.status(), 422);
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["errors"][0]["field"], "lines[0].colour", "{p}");
    assert!(p["errors"][0]["message"].as_str().unwrap().contains("colour"), "{p}");
    let res = app.post_json(&path, &json!({ "lines": "all of them" })).await;
    assert_eq!(res.status(), 422);
    let p: Value = res.json().await.unwrap();
    assert_eq!(p["errors"][0]["field"], "lines", "{p}");
    let res = app
        .client
        .post(app.url(&path))
        .header("content-type", "application/json")
        .body("{\"lines\": [")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    assert_eq!(app.count("ledger_lines").await, 0);
}

#[tokio::test]
async fn json_lines_are_validated_per_field() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{id}/ledger"),
            &json!({ "lines": [
                { "category": "accelerator", "resource": "r", "starts_at": "2026-11-01T00:30:00-04:00",
                  "ends_at": "2026-11-01T01:30:00-05:00", "gpus": 2, "rate_per_gpu_hour": "3.25" },
                { "category": "host", "amount": "10", "currency": "EUR" },
                { "category": "storage", "amount": "-1" }
            ] }),
        )
        .await;
    assert_eq!(res.status(), 422);
    let p: Value = res.json().await.unwrap();
    let errors = p["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e["field"] == "lines[1].currency" && e["message"].as_str().unwrap().contains("EUR")),
        "{p}"
    );
    assert!(errors.iter().any(|e| e["field"] == "lines[2].amount"), "{p}");
    assert_eq!(app.count("ledger_lines").await, 0, "nothing stored");

    // The first line alone: 2 real hours across the DST change × 2 GPUs × 3.25 = 13.
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{id}/ledger"),
            &json!({ "lines": [
                { "category": "accelerator", "resource": "r", "starts_at": "2026-11-01T00:30:00-04:00",
                  "ends_at": "2026-11-01T01:30:00-05:00", "gpus": 2, "rate_per_gpu_hour": "3.25" }
            ] }),
        )
        .await;
    assert_eq!(res.status(), 201);
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["accelerator_hours"], "4");
    assert_eq!(s["totals"]["accelerator"], "13");

    let res = app.post_json(&format!("/api/v1/briefs/{id}/ledger"), &json!({})).await;
    assert_eq!(res.status(), 422);
}

#[tokio::test]
async fn agents_post_only_to_their_own_brief() {
    let app = spawn_app().await;
    let a = brief(&app).await;
    let b = brief(&app).await;
    let agent = bearer_client(&app.token(Role::Agent, Some(a.parse().unwrap())).await);
    let line = json!({ "lines": [{ "category": "host", "amount": "1.50" }] });
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{a}/ledger")))
        .json(&line)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let res = LedgerCsv::new(format!("{HEADER}support,,,,,,,2,\n"))
        .post_with(&agent, &app, &a)
        .await;
    assert_eq!(res.status(), 201);
    let res = agent
        .post(app.url(&format!("/api/v1/briefs/{b}/ledger")))
        .json(&line)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403);
    let res = agent
        .get(app.url(&format!("/api/v1/briefs/{a}/ledger")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 403, "agents only send");
    let res = app
        .anon
        .get(app.url(&format!("/api/v1/briefs/{a}/ledger")))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 401);
    let res = app
        .get("/api/v1/briefs/00000000-0000-0000-0000-000000000000/ledger")
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(app.count("ledger_lines").await, 2);
}

async fn assert_bad_csv(app: &TestApp, id: &str, csv: String, field: &str, needle: &str) {
    let res = LedgerCsv::new(csv).post_with(&app.client, app, id).await;
    assert_eq!(res.status(), 422, "{field}");
    let p: Value = res.json().await.unwrap();
    let errors = p["errors"].as_array().unwrap();
    assert!(
        errors
            .iter()
            .any(|e| e["field"] == field && e["message"].as_str().unwrap().contains(needle)),
        "expected {field} / {needle:?} in {p}"
    );
    assert_eq!(
        app.count("ledger_lines").await,
        0,
        "nothing stored from a failed import"
    );
}

#[tokio::test]
async fn bad_csv_is_reported_by_line_and_column_and_stores_nothing() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let good = "host,vm,,,,,,10,USD\n";
    assert_bad_csv(
        &app,
        &id,
        format!("category,resource,desc,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n{good}"),
        "line 1",
        "column 3 is \"desc\"",
    )
    .await;
    assert_bad_csv(
        &app,
        &id,
        format!("{HEADER}{good}accelerator,r,,2026-03-01 00:00,2026-03-01T01:00:00Z,1,2,,USD\n"),
        "line 3, column 4 (starts_at)",
        "RFC 3339",
    )
    .await;
    assert_bad_csv(
        &app,
        &id,
        format!("{HEADER}{good}{good}accelerator,r,,2026-03-01T02:00:00Z,2026-03-01T01:00:00Z,1,2,,USD\n"),
        "line 4, column 5 (ends_at)",
        "must be after starts_at",
    )
    .await;
    assert_bad_csv(
        &app,
        &id,
        format!("{HEADER}{good}storage,,,,,,,-0.01,USD\n"),
        "line 3, column 8 (amount)",
        "negative",
    )
    .await;
    assert_bad_csv(
        &app,
        &id,
        format!("{HEADER}{good}network,,,,,,,5,EUR\n"),
        "line 3, column 9 (currency)",
        "EUR",
    )
    .await;
    assert_bad_csv(
        &app,
        &id,
        format!("{HEADER}{good}host,vm,,,\n"),
        "line 3",
        "expected 9 fields",
    )
    .await;
}

/// A ledger sent as JSON is read whole under its own 16 MiB cap, and a 413 names that cap (it
/// named the 1 MiB default of other routes).
#[tokio::test]
async fn a_json_ledger_over_its_cap_is_refused_naming_16_mib() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let body = format!("{{\"lines\": [\"{}\"]}}", "x".repeat(17 << 20));
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{id}/ledger")))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let p: Value = res.json().await.unwrap();
    assert!(p["detail"].as_str().unwrap().contains("the limit of 16 MiB"), "{p}");
}

#[tokio::test]
async fn a_huge_csv_is_refused_with_413_without_reading_it_all() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    // 1 GiB of valid lines, generated as it is sent; rows long enough that the byte cap (64 MiB)
    // comes before the line cap (250,000 lines).
    let row = format!("host,vm-1,{},,,,,1.00,USD\n", "padding ".repeat(36)).repeat(256);
    let chunk = bytes::Bytes::from(row);
    let chunks = (1024 * 1024 * 1024) / chunk.len();
    let stream = futures_stream(bytes::Bytes::from_static(HEADER.as_bytes()), chunk, chunks);
    let started = Instant::now();
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{id}/ledger")))
        .header("content-type", "text/csv")
        .body(reqwest::Body::wrap_stream(stream))
        .send()
        .await;
    let elapsed = started.elapsed();
    match res {
        Ok(res) => {
            assert_eq!(res.status(), 413);
            let p: Value = res.json().await.unwrap();
            assert!(p["detail"].as_str().unwrap().contains("bytes"), "{p}");
        }
        // The server may answer and close before the client has finished sending; reqwest then
        // reports the broken upload. Either way it stopped long before 1 GiB.
        Err(e) => assert!(e.is_request() || e.is_body(), "{e}"),
    }
    assert!(elapsed < Duration::from_secs(30), "took {elapsed:?}");
    assert_eq!(app.count("ledger_lines").await, 0);

    // A declared Content-Length over the cap is refused before any of the body is read: a raw
    // request that sends only its head gets its answer.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let token = app.token(Role::Engineer, None).await;
    let mut tcp = tokio::net::TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .unwrap();
    let head = format!(
        "POST /api/v1/briefs/{id}/ledger HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer {token}\r\n\
         Content-Type: text/csv\r\nContent-Length: {}\r\n\r\n",
        1u64 << 30
    );
    tcp.write_all(head.as_bytes()).await.unwrap();
    let mut answer = vec![0u8; 12];
    tokio::time::timeout(Duration::from_secs(10), tcp.read_exact(&mut answer))
        .await
        .expect("answered without the body")
        .unwrap();
    assert_eq!(&answer, b"HTTP/1.1 413");
}

/// `first`, then `n` copies of `chunk`, generated as they are sent: a tokio channel fed by a task.
fn futures_stream(
    first: bytes::Bytes,
    chunk: bytes::Bytes,
    n: usize,
) -> impl futures_core_stream::Stream<Item = Result<bytes::Bytes, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel(4);
    tokio::spawn(async move {
        if tx.send(Ok(first)).await.is_err() {
            return;
        }
        for _ in 0..n {
            if tx.send(Ok(chunk.clone())).await.is_err() {
                break;
            }
        }
    });
    futures_core_stream::ReceiverStream(rx)
}

/// Just enough of a `Stream` over a tokio receiver for `reqwest::Body::wrap_stream`.
mod futures_core_stream {
    pub use futures_core::Stream;
    use std::{
        pin::Pin,
        task::{Context, Poll},
    };

    pub struct ReceiverStream<T>(pub tokio::sync::mpsc::Receiver<T>);

    impl<T> Stream for ReceiverStream<T> {
        type Item = T;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
}

#[tokio::test]
async fn csv_export_round_trips() {
    let app = spawn_app().await;
    let a = brief(&app).await;
    let b = brief(&app).await;
    assert_eq!(
        LedgerCsv::new(worked_example_csv())
            .post_with(&app.client, &app, &a)
            .await
            .status(),
        201
    );
    let first = app.get(&format!("/api/v1/briefs/{a}/ledger.csv")).await;
    assert_eq!(first.status(), 200);
    assert!(first.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/csv"));
    let first = first.text().await.unwrap();
    // The export names each line's trial in a last column; the import reads it back.
    assert!(first.starts_with(&format!("{},trial\n", HEADER.trim_end())), "{first}");
    assert!(first.contains(",USD,Trial 1\n"), "{first}");
    assert!(first.contains("\"host, with a comma\""));
    assert_eq!(
        LedgerCsv::new(first.clone())
            .post_with(&app.client, &app, &b)
            .await
            .status(),
        201
    );
    let second = app
        .get(&format!("/api/v1/briefs/{b}/ledger.csv"))
        .await
        .text()
        .await
        .unwrap();
    assert_eq!(first, second);
    let sa: Value = app
        .get(&format!("/api/v1/briefs/{a}/ledger"))
        .await
        .json()
        .await
        .unwrap();
    let sb: Value = app
        .get(&format!("/api/v1/briefs/{b}/ledger"))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(sa["summary"], sb["summary"]);
    assert_eq!(sa["summary"]["total"], "425.5");
}

#[tokio::test]
async fn a_re_sent_billing_export_does_not_double_the_accelerator_cost() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    assert_eq!(
        LedgerCsv::new(worked_example_csv())
            .post_with(&app.client, &app, &id)
            .await
            .status(),
        201
    );
    // The same export again: every accelerator line now has an identical twin from another import.
    let res = LedgerCsv::new(worked_example_csv())
        .post_with(&app.client, &app, &id)
        .await;
    assert_eq!(res.status(), 201);
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["accelerator_hours"], "100");
    assert_eq!(s["totals"]["accelerator"], "246");
    // The three accelerator lines have intervals the trial already holds: not added again. The
    // others have no interval, so nothing tells a repeat from a second charge: they add up.
    assert_eq!(s["lines_added"], 5);
    assert_eq!(s["lines_already_in_ledger"], 3);
    assert_eq!(s["totals"]["host"], "240", "lines without an interval are plain sums");
    // A later line for r2 that extends it by 2 hours at 1 GPU: hours 102, cost 6 + 3 = 9 more than 6.
    let res = app
        .post_json(
            &format!("/api/v1/briefs/{id}/ledger"),
            &json!({ "lines": [{ "category": "accelerator", "resource": "r2", "starts_at": "2026-03-01T02:00:00Z",
                                 "ends_at": "2026-03-01T06:00:00Z", "gpus": 1, "amount": "6" }] }),
        )
        .await;
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["accelerator_hours"], "102");
    // r2: the first line (6.00 over 4 h) bills 00–04; the new one (6.00 over 4 h) bills 04–06: 3.00.
    assert_eq!(s["totals"]["accelerator"], "249");
}

/// A line over 366 days, or in a mistyped year, is refused at its field and nothing is stored: each
/// day of an accelerator line is a row of the daily GPU-time, and 0001–9999 made millions of them.
#[tokio::test]
async fn a_line_over_a_year_or_of_a_mistyped_year_is_refused_at_its_field() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let started = Instant::now();
    for (starts_at, ends_at, needle) in [
        ("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z", "more than 366 days"),
        ("0206-11-20T09:00:00Z", "0206-11-20T10:00:00Z", "years 2000–2099"),
    ] {
        let res = app
            .post_json(
                &format!("/api/v1/briefs/{id}/ledger"),
                &json!({ "lines": [
                    { "category": "accelerator", "resource": "r", "starts_at": starts_at,
                      "ends_at": ends_at, "gpus": 8, "rate_per_gpu_hour": "2.50" }
                ] }),
            )
            .await;
        assert_eq!(res.status(), 422);
        let p: Value = res.json().await.unwrap();
        assert!(
            p["errors"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["field"].as_str().unwrap().starts_with("lines[0].")
                    && e["message"].as_str().unwrap().contains(needle)),
            "{p}"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(app.count("ledger_lines").await, 0);
    assert_eq!(app.count("ledger_accelerator_daily").await, 0);
}

/// A month's export with an interval on every line, sent again (a month-to-date file imported each
/// week, a retry without an Idempotency-Key): the lines the trial holds field for field are not
/// added again, so host and storage costs are not doubled; a new day's line is.
#[tokio::test]
async fn a_ledger_sent_again_adds_only_its_new_lines() {
    let app = spawn_app().await;
    let id = brief(&app).await;
    let week_one = format!(
        "{HEADER}\
accelerator,node-1,,2026-03-01T00:00:00Z,2026-03-08T00:00:00Z,8,2.50,,USD\n\
host,node-1,VM,2026-03-01T00:00:00Z,2026-03-08T00:00:00Z,,,300.00,USD\n\
storage,disk-1,SSD,2026-03-01T00:00:00Z,2026-03-08T00:00:00Z,,,50.00,USD\n"
    );
    let res = LedgerCsv::new(week_one.clone()).post_with(&app.client, &app, &id).await;
    assert_eq!(res.status(), 201);
    let first: Value = res.json().await.unwrap();
    assert_eq!(first["lines_added"], 3);
    assert_eq!(first["lines_already_in_ledger"], 0);

    let week_two = format!("{week_one}host,node-1,VM,2026-03-08T00:00:00Z,2026-03-15T00:00:00Z,,,300.00,USD\n");
    let res = LedgerCsv::new(week_two).post_with(&app.client, &app, &id).await;
    assert_eq!(res.status(), 201);
    let s: Value = res.json().await.unwrap();
    assert_eq!(s["lines_added"], 1);
    assert_eq!(s["lines_already_in_ledger"], 3);
    assert_eq!(s["totals"]["host"], "600", "two weeks of the VM, not three");
    assert_eq!(s["totals"]["storage"], "50");
    assert_eq!(app.count("ledger_lines").await, 4);
}
