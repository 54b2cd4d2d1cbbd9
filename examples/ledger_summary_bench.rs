//! Times the ledger summary for a brief with 100,000 lines (docs/benchmarks.md).
//!
//! `cargo run --release --example ledger_summary_bench` with PostgreSQL at TEST_DATABASE_URL
//! (default postgres://postgres@127.0.0.1:5432/postgres). It creates a scratch database, seeds
//! two briefs of 100,000 lines each — 90,000 accelerator lines over 100 resources (a billing export:
//! touching hourly lines with duplicates; and a worst case where every line overlaps the next) and
//! 10,000 other lines — then times `GET /api/v1/briefs/{id}/ledger/summary` over HTTP and the pure
//! `summarize` over the same lines, and prints the median of 25 runs of each (after 3 warm-ups).

use std::{str::FromStr, time::Instant};

use rentcheck::{
    auth::{
        token::{self, NewToken, TokenKeys},
        Role,
    },
    config::AppConfig,
    db, http,
    ledger::{self, repo},
    state::AppState,
};
use serde_json::json;
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, Executor, PgConnection,
};

const RUNS: usize = 25;

/// 100 resources × 900 one-hour lines that touch; every 20th line repeats the previous hour.
const BILLING: &str =
    "INSERT INTO ledger_lines (id, brief_id, import_id, category, resource, starts_at, ends_at, gpus, \
     rate_per_gpu_hour, amount, currency) \
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 'accelerator', 'node-' || (i / 900), \
       timestamptz '2026-03-01 00:00Z' + ((i % 900 - (i % 20 = 19)::int) * interval '1 hour'), \
       timestamptz '2026-03-01 01:00Z' + ((i % 900 - (i % 20 = 19)::int) * interval '1 hour'), \
       8, 2.50, 20.00, 'USD' FROM generate_series(0, 89999) AS i";

/// 100 resources × 900 one-hour lines, each starting 30 minutes after the previous one.
const OVERLAPPING: &str = "INSERT INTO ledger_lines (id, brief_id, import_id, category, resource, starts_at, ends_at, \
     gpus, rate_per_gpu_hour, amount, currency) \
     SELECT gen_random_uuid(), $1, gen_random_uuid(), 'accelerator', 'node-' || (i / 900), \
       timestamptz '2026-03-01 00:00Z' + ((i % 900) * interval '30 minutes'), \
       timestamptz '2026-03-01 00:00Z' + ((i % 900) * interval '30 minutes') + interval '1 hour', \
       8, 2.50, 20.00, 'USD' FROM generate_series(0, 89999) AS i";

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let admin_url =
        std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let admin = PgConnectOptions::from_str(&admin_url)?;
    let db_name = format!("rentcheck_bench_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect_with(&admin).await?;
    conn.execute(format!("CREATE DATABASE {db_name}").as_str()).await?;
    let result = run(&admin, &db_name).await;
    conn.execute(format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)").as_str())
        .await?;
    result
}

async fn run(admin: &PgConnectOptions, db_name: &str) -> anyhow::Result<()> {
    let pool = PgPoolOptions::new()
        .max_connections(4)
        .connect_with(admin.clone().database(db_name))
        .await?;
    db::migrate(&pool).await?;
    let keys = TokenKeys::from_secret(b"bench-secret-bench-secret-bench-secret");
    let (signed, _) = token::mint(
        &pool,
        &keys,
        NewToken {
            name: "bench".into(),
            subject: "bench@example.com".into(),
            role: Role::Engineer,
            brief: None,
            ttl: chrono::Duration::days(1),
            created_by: None,
        },
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let router = http::app(AppState::new(pool.clone(), AppConfig::default(), keys));
    tokio::spawn(http::serve(listener, router, std::future::pending()));
    let client = reqwest::Client::new();
    for (name, accelerator_sql) in [
        (
            "billing export: hourly lines touching, every 20th line a duplicate",
            BILLING,
        ),
        ("worst case: every line overlaps the next by half", OVERLAPPING),
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
        let id = uuid::Uuid::parse_str(brief["id"].as_str().expect("brief id"))?;
        let seeded = Instant::now();
        sqlx::query(accelerator_sql).bind(id).execute(&pool).await?;
        sqlx::query(
            "INSERT INTO ledger_lines (id, brief_id, import_id, category, amount, currency) \
             SELECT gen_random_uuid(), $1, gen_random_uuid(), \
               (ARRAY['host','storage','network','support','license'])[1 + i % 5], 1.25, 'USD' \
             FROM generate_series(0, 9999) AS i",
        )
        .bind(id)
        .execute(&pool)
        .await?;
        sqlx::query("INSERT INTO ledger_outputs (brief_id, accepted, idle_hours) VALUES ($1, 50000, 1000)")
            .bind(id)
            .execute(&pool)
            .await?;
        sqlx::query("VACUUM ANALYZE ledger_lines").execute(&pool).await?;
        println!(
            "\n{name}\nseeded 100,000 lines in {:.0} ms",
            seeded.elapsed().as_secs_f64() * 1e3
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
        if std::env::var("BENCH_PARTS").is_ok() {
            for q in [
                "SELECT category, sum(amount) FROM ledger_lines WHERE brief_id = $1 AND category IN ('host', 'storage', 'network', 'support', 'license') GROUP BY category",
                "SELECT count(*) FROM (SELECT resource, starts_at, ends_at, gpus, amount FROM ledger_lines WHERE brief_id = $1 AND category = 'accelerator' ORDER BY resource COLLATE \"C\", starts_at, ends_at) AS s",
            ] {
                let mut ms = Vec::new();
                for _ in 0..9 {
                    let t = Instant::now();
                    sqlx::query(q).bind(id).fetch_all(&pool).await?;
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                println!("  {:.1} ms  {}", median(ms), &q[..60]);
            }
            let mut ms = Vec::new();
            for _ in 0..9 {
                let mut conn = pool.acquire().await?;
                let t = Instant::now();
                repo::summary(&mut conn, id, "USD").await?;
                ms.push(t.elapsed().as_secs_f64() * 1e3);
            }
            println!("  {:.1} ms  repo::summary in process", median(ms));
        }

        let lines: Vec<ledger::LedgerLine> = repo::all_lines(&pool, id).await?;
        let outputs = repo::outputs(&pool, id).await?;
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
