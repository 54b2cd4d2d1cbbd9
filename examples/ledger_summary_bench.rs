//! Times the ledger summary for a brief with 100,000 lines (docs/benchmarks.md).
//!
//! `cargo run --release --example ledger_summary_bench` with PostgreSQL at TEST_DATABASE_URL
//! (default postgres://postgres@127.0.0.1:5432/postgres). It creates a scratch database, imports
//! (as CSV, through the API) two briefs of 100,000 lines each — 90,000 accelerator lines over 100 resources (a billing export:
//! touching hourly lines with duplicates; and a worst case where every line overlaps the next) and
//! 10,000 other lines — then times `GET /api/v1/briefs/{id}/ledger/summary` over HTTP and the pure
//! `summarize` over the same lines, and prints the median of 25 runs of each (after 3 warm-ups).

#[path = "support/scratch_database.rs"]
mod scratch_database;

use std::time::Instant;

use rentcheck::{
    auth::{
        token::{self, NewToken},
        Role,
    },
    config::AppConfig,
    http,
    ids::BriefId,
    ledger::{self, repo},
    secrets::TokenKeys,
    state::AppState,
};
use serde_json::json;
use sqlx::PgPool;

const RUNS: usize = 25;

/// A CSV of 100,000 lines: 90,000 accelerator lines on 100 resources (900 each) from `start_of(slot)`
/// for one hour at 8 GPUs and 2.50 per GPU-hour, and 10,000 lines of the other categories.
fn csv(start_of: impl Fn(i64) -> i64) -> String {
    use std::fmt::Write;
    let base = chrono::DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let mut out =
        String::from("category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n");
    for i in 0..90_000_i64 {
        let start = base + chrono::Duration::minutes(start_of(i % 900));
        let end = start + chrono::Duration::hours(1);
        let _ = writeln!(
            out,
            "accelerator,node-{},,{},{},8,2.50,,USD",
            i / 900,
            start.to_rfc3339(),
            end.to_rfc3339()
        );
    }
    for i in 0..10_000 {
        let c = ["host", "storage", "network", "support", "license"][i % 5];
        let _ = writeln!(out, "{c},,,,,,,1.25,USD");
    }
    out
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scratch_database::with_scratch_database(4, run).await
}

async fn run(pool: PgPool) -> anyhow::Result<()> {
    let keys = TokenKeys::from_secret(b"bench-secret-bench-secret-bench-secret");
    // A person token acts as its person: the bench makes one.
    let (person, _) = rentcheck::auth::users::add(&pool, "bench@example.com", Role::Engineer, None, |u| {
        rentcheck::audit::Entry::new("bench", "user.add", &u.email, serde_json::json!({}))
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let (signed, _) = token::mint(
        &pool,
        &keys,
        NewToken {
            name: "bench".into(),
            subject: "bench@example.com".into(),
            role: Role::Engineer,
            brief: None,
            trial: None,
            ttl: chrono::Duration::days(1),
            created_by: Some(person.id),
        },
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = http::app(AppState::new(pool.clone(), AppConfig::default(), keys));
    tokio::spawn(http::serve(listener, router, std::future::pending()));
    let client = reqwest::Client::new();
    let billing = |slot: i64| 60 * (slot - i64::from(slot % 20 == 19));
    let overlapping = |slot: i64| 30 * slot;
    for (name, body) in [
        (
            "billing export: hourly lines touching, every 20th line a duplicate",
            csv(billing),
        ),
        ("worst case: every line overlaps the next by half", csv(overlapping)),
    ] {
        let brief: serde_json::Value = client
            .post(format!("{base}/api/v1/briefs"))
            .bearer_auth(&signed)
            .json(&json!({
                "name": "bench", "owner": "bench@example.com", "workload_kind": "batch-inference",
                "model_name": "m", "params_b": 8, "precision": "bf16", "context_length": 8192, "concurrency": 8,
                "num_layers": 32, "num_kv_heads": 8, "head_dim": 128, "data_boundary": "shared-ok",
                "currency": "USD", "cost_unit": "job", "allocation_boundary": "vm"
            }))
            .send()
            .await?
            .json()
            .await?;
        let id: BriefId = brief["id"].as_str().expect("brief id").parse()?;
        // The in-process reads are of the brief's trial (its first and only one).
        let trial = rentcheck::trials::service::list_in(&pool, id).await?[0].id;
        let bytes = body.len();
        let seeded = Instant::now();
        let res = client
            .post(format!("{base}/api/v1/briefs/{id}/ledger"))
            .bearer_auth(&signed)
            .header("content-type", "text/csv")
            .body(body)
            .send()
            .await?;
        assert_eq!(res.status(), 201, "{}", res.text().await?);
        let imported = seeded.elapsed();
        // Outputs are a trial's since trials came in.
        sqlx::query(
            "INSERT INTO ledger_outputs (brief_id, trial_id, accepted, idle_hours) VALUES ($1, $2, 50000, 1000)",
        )
        .bind(id)
        .bind(trial)
        .execute(&pool)
        .await?;
        sqlx::query("VACUUM ANALYZE ledger_lines").execute(&pool).await?;
        println!(
            "\n{name}\nimported 100,000 lines ({:.1} MB of CSV) through POST …/ledger in {:.0} ms",
            bytes as f64 / 1e6,
            imported.as_secs_f64() * 1e3
        );

        let url = format!("{base}/api/v1/briefs/{id}/ledger/summary");
        let mut http_ms = Vec::new();
        let mut body = String::new();
        for i in 0..RUNS + 3 {
            let t = Instant::now();
            let res = client.get(&url).bearer_auth(&signed).send().await?;
            assert_eq!(res.status(), 200);
            body = res.text().await?;
            if i >= 3 {
                http_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
        println!("summary: {body}");
        {
            let mut ms = Vec::new();
            for _ in 0..9 {
                let mut conn = pool.acquire().await?;
                let t = Instant::now();
                repo::summary(&mut conn, trial, "USD").await?;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            println!("repo::summary in process (no HTTP): median {:.1} ms", median(ms));
        }

        let lines: Vec<ledger::LedgerLine> = repo::all_lines(&pool, id, &[]).await?;
        let outputs = repo::outputs(&pool, trial).await?;
        let mut pure_ms = Vec::new();
        for i in 0..RUNS + 3 {
            let t = Instant::now();
            let s = ledger::summarize(&lines, &outputs, "USD");
            if i >= 3 {
                pure_ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            assert_eq!(
                serde_json::to_string(&s)?,
                body,
                "the pure summary and the server's agree"
            );
        }
        println!(
            "GET /api/v1/briefs/{{id}}/ledger/summary: median {:.1} ms (min {:.1}, max {:.1}) over {RUNS} runs",
            median(http_ms.clone()),
            http_ms.iter().cloned().fold(f64::INFINITY, f64::min),
            http_ms.iter().cloned().fold(0.0, f64::max)
        );
        println!(
            "ledger::summarize (pure, lines in memory, unsorted): median {:.1} ms",
            median(pure_ms)
        );
    }
    Ok(())
}
