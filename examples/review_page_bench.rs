//! Times the review page for a brief with 10,000 evidence items and 50,000 ledger lines
//! (docs/benchmarks.md; target: p95 < 50 ms at 4 connections).
//!
//! `cargo run --release --example review_page_bench` with PostgreSQL at TEST_DATABASE_URL
//! (default postgres://postgres@127.0.0.1:5432/postgres). It makes a scratch database (dropped at
//! the end), loads the demo brief (`rentcheck demo`'s card, evidence and ledger), adds 9,990
//! evidence items of mixed kinds with realistic metrics objects (older than the demo's, so the
//! decision stays as the demo computes it) and 49,994 ledger lines through the CSV import, signs a
//! manager in, then requests `GET /briefs/{id}/review` from 4 concurrent clients (200 requests
//! after 20 warm-ups) and prints p50, p95 and max, and the same for the JSON review.

#[path = "support/scratch_database.rs"]
mod scratch_database;

use std::{sync::Arc, time::Instant};

use rentcheck::{
    auth::{session, users, Role},
    config::AppConfig,
    demo, http,
    secrets::TokenKeys,
    state::AppState,
};
use sqlx::PgPool;

const CLIENTS: usize = 4;
const REQUESTS: usize = 200;

fn ledger_csv(lines: usize) -> String {
    use std::fmt::Write;
    let base = chrono::DateTime::parse_from_rfc3339("2026-01-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let mut out =
        String::from("category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n");
    for i in 0..lines {
        if i % 10 == 9 {
            let c = ["host", "storage", "network", "support", "license"][i % 5];
            let _ = writeln!(out, "{c},,,,,,,0.05,USD");
        } else {
            let start = base + chrono::Duration::minutes(i as i64 * 10);
            let end = start + chrono::Duration::minutes(10);
            let _ = writeln!(
                out,
                "accelerator,spot-{},,{},{},1,0.10,,USD",
                i % 50,
                start.to_rfc3339(),
                end.to_rfc3339()
            );
        }
    }
    out
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scratch_database::with_scratch_database(8, run).await
}

async fn run(pool: PgPool) -> anyhow::Result<()> {
    let keys = TokenKeys::from_secret(b"bench-secret-bench-secret-bench-secret");
    let state = AppState::new(pool.clone(), AppConfig::default(), keys);
    let loaded = demo::load(&state).await.map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let id = loaded.brief_id;

    // 9,990 more evidence items, a day or more older than the demo's.
    let seeded = Instant::now();
    sqlx::query(
        "INSERT INTO evidence (id, brief_id, trial_id, kind, stage, content_type, raw, sha256, size_bytes, metrics, \
         warnings, parse_status, parser_version, labels, collected_at) \
         SELECT gen_random_uuid(), $1, (SELECT t.id FROM trials t WHERE t.brief_id = $1 AND t.position = 1), 'metrics', 1 + i % 5, 'application/json', convert_to(repeat('x', 2048), 'UTF8'), \
                repeat('a', 64), 2048, \
                jsonb_build_object('serving.ttft_p95_ms', 200 + i % 50, 'serving.itl_p95_ms', 20 + i % 7, \
                  'serving.e2e_p95_ms', 5000 + i % 500, 'serving.kv_cache_usage_max_pct', 50 + i % 30, \
                  'serving.preemptions_total', 0, 'gpu.count', 8, 'dcgm.diag.passed', true, \
                  'nccl.busbw_peak_gbps', 400 + i % 50, 'probe.output_format', true, 'custom.key_' || (i % 40), i), \
                '[]'::jsonb, 'ok', '1', '{}'::jsonb, now() - interval '1 day' - make_interval(secs => i) \
         FROM generate_series(1, 9990) AS i",
    )
    .bind(id)
    .execute(&pool)
    .await?;
    let evidence_seconds = seeded.elapsed().as_secs_f64();

    let seeded = Instant::now();
    let lines =
        rentcheck::ledger::csv::parse(ledger_csv(49_994).as_bytes(), "USD").map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let first = rentcheck::trials::service::pick(&state, id, None)
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let target = rentcheck::ledger::service::Target {
        named: Some(first.id),
        token_trial: None,
    };
    rentcheck::ledger::service::import_lines(&state, id, target, "bench", &lines)
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let ledger_seconds = seeded.elapsed().as_secs_f64();
    // As a running server would have: fold the queued uploads into the newest-value table.
    rentcheck::evidence::compactor::compact_all(&pool).await?;
    for table in [
        "evidence",
        "evidence_metrics_latest",
        "evidence_metrics_pending",
        "ledger_lines",
    ] {
        sqlx::query(&format!("VACUUM ANALYZE {table}")).execute(&pool).await?;
    }
    let counts: (i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM evidence WHERE brief_id = $1), (SELECT count(*) FROM ledger_lines WHERE brief_id = $1)",
    )
    .bind(id)
    .fetch_one(&pool)
    .await?;
    println!(
        "seeded: {} evidence items ({evidence_seconds:.1} s), {} ledger lines ({ledger_seconds:.1} s)",
        counts.0, counts.1
    );

    // Where the time goes, one part at a time (median of 20).
    let brief = rentcheck::trials::service::load_brief(&pool, id)
        .await
        .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    macro_rules! time_part {
        ($label:expr, $e:expr) => {{
            let mut times = Vec::new();
            for _ in 0..20 {
                let t = Instant::now();
                let _ = $e;
                times.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            times.sort_by(|a, b| a.total_cmp(b));
            println!("  part {:<40} {:.2} ms", $label, times[10]);
        }};
    }
    time_part!(
        "card evaluation",
        rentcheck::acceptance::service::evaluate_trial(&pool, &brief, first.id, None).await?
    );
    time_part!(
        "derived figures",
        rentcheck::acceptance::service::derived_figures(&pool, &brief, first.id).await?
    );
    time_part!("ledger summary", {
        let mut c = pool.acquire().await?;
        rentcheck::ledger::repo::summary(&mut c, first.id, "USD").await?
    });
    time_part!(
        "whole review",
        rentcheck::review::service::review(&state, id)
            .await
            .map_err(|e| anyhow::anyhow!("{e:?}"))?
    );

    let (manager, _) = users::add(&pool, "bench-manager@example.com", Role::Manager, None, |u| {
        rentcheck::audit::Entry::new("bench", "user.add", &u.email, serde_json::json!({}))
    })
    .await
    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let cookie = session::create(&pool, manager.id, Default::default()).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    rentcheck::evidence::compactor::spawn(pool.clone(), state.metrics.clone());
    tokio::spawn(http::serve(listener, http::app(state.clone()), std::future::pending()));
    let client = reqwest::Client::builder()
        .default_headers({
            let mut h = reqwest::header::HeaderMap::new();
            h.insert(
                reqwest::header::COOKIE,
                format!("{}={cookie}", session::COOKIE).parse()?,
            );
            h
        })
        .build()?;

    for (label, path) in [
        ("GET /briefs/{id}/review (HTML)", format!("/briefs/{id}/review")),
        (
            "GET /api/v1/briefs/{id}/review (JSON)",
            format!("/api/v1/briefs/{id}/review"),
        ),
    ] {
        let url = Arc::new(format!("{base}{path}"));
        for _ in 0..20 {
            let res = client.get(url.as_str()).send().await?;
            assert_eq!(res.status(), 200);
            let body = res.text().await?;
            assert!(body.contains("reserve"), "the demo still reviews to reserve");
        }
        let started = Instant::now();
        let mut tasks = Vec::new();
        for _ in 0..CLIENTS {
            let (client, url) = (client.clone(), url.clone());
            tasks.push(tokio::spawn(async move {
                let mut times = Vec::new();
                for _ in 0..REQUESTS / CLIENTS {
                    let t = Instant::now();
                    let res = client.get(url.as_str()).send().await.unwrap();
                    assert_eq!(res.status(), 200);
                    res.bytes().await.unwrap();
                    times.push(t.elapsed().as_secs_f64() * 1000.0);
                }
                times
            }));
        }
        let mut all = Vec::new();
        for t in tasks {
            all.extend(t.await?);
        }
        let wall = started.elapsed().as_secs_f64();
        all.sort_by(|a, b| a.total_cmp(b));
        println!(
            "{label}: {} requests at {CLIENTS} connections in {wall:.2} s ({:.0}/s): p50 {:.1} ms, p95 {:.1} ms, max {:.1} ms",
            all.len(),
            all.len() as f64 / wall,
            percentile(&all, 0.5),
            percentile(&all, 0.95),
            all[all.len() - 1]
        );
    }
    Ok(())
}
