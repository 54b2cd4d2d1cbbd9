//! Times the two imports of files from elsewhere at their size limits, while another client polls
//! `/healthz` (docs/benchmarks.md): a 32 MiB SkyPilot catalogue in Google Cloud's shape (host VM
//! and accelerator rows to pair, thousands of distinct accelerator names to list, mostly CPU rows)
//! through `POST /api/v1/prices?format=skypilot`, and a 16 MiB FOCUS export in AWS's per-second
//! shape through `POST /api/v1/briefs/{id}/ledger?format=focus`.
//!
//! `cargo run --example imports_bench` with PostgreSQL at TEST_DATABASE_URL (default
//! postgres://postgres@127.0.0.1:5432/postgres). It prints, per import: the wall time of the request,
//! the process's CPU time during it (server and client are one process), its peak resident memory
//! (VmHWM, which includes the generated body), and the median and largest `/healthz` latency seen
//! during the import.

#[path = "support/scratch_database.rs"]
mod scratch_database;

use std::{
    fmt::Write,
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use rentcheck::{
    auth::{
        token::{self, NewToken},
        Role,
    },
    config::AppConfig,
    http,
    secrets::TokenKeys,
    state::AppState,
};
use serde_json::json;
use sqlx::PgPool;

const CATALOGUE_BYTES: usize = 32 * 1024 * 1024 - 64 * 1024;
const FOCUS_BYTES: usize = 16 * 1024 * 1024;

/// A Google Cloud `vms.csv` of about `bytes`: per region and zone, the a3-highgpu-8g and
/// a2-ultragpu-8g hosts with their H100 × 8 and A100-80GB × 8 rows, a TPU row of a name of its own
/// (skipped and listed: thousands of groups), and CPU rows for the rest.
fn catalogue(bytes: usize) -> String {
    let mut out =
        String::from("InstanceType,vCPUs,MemoryGiB,AcceleratorName,AcceleratorCount,GpuInfo,Region,AvailabilityZone,Price,SpotPrice\n");
    let gpu = "{'Gpus': [{'MemoryInfo': {'SizeInMiB': 81920}}]}";
    let mut region = 0;
    'fill: loop {
        for zone in ["a", "b", "c"] {
            let (r, z) = (format!("region{region}"), format!("region{region}-{zone}"));
            let _ = writeln!(out, "a3-highgpu-8g,208.0,1872.0,,,,{r},{z},9.46006,2.17547");
            let _ = writeln!(out, "a2-ultragpu-8g,96.0,1360.0,,,,{r},{z},8.79698,3.51864");
            let _ = writeln!(out, ",,,H100,8,{gpu},{r},{z},36.56073,18.024");
            let _ = writeln!(out, ",,,A100-80GB,8,{gpu},{r},{z},14.76958,12.5696");
            let _ = writeln!(out, ",,,tpu-v5p-{region}{zone},1,tpu,{r},{z},24192.0,9459.072");
            for n in 0..300 {
                let _ = writeln!(out, "n2-standard-{n},{n}.0,64.0,,,,{r},{z},0.83523,0.1865");
                if out.len() >= bytes {
                    break 'fill;
                }
            }
        }
        region += 1;
        // Offers stay under the import's 10,000: 4 per region.
        if region >= 2400 {
            break;
        }
    }
    out
}

/// A FOCUS 1.2 export in AWS's per-second shape of about `bytes`: hourly rows of 200 instances,
/// the trial's 20 tagged, a GB-priced row per instance-hour, and account taxes.
fn focus(bytes: usize, trial: &str) -> String {
    let mut out = String::from(
        "AvailabilityZone,BilledCost,BillingAccountId,BillingCurrency,ChargeCategory,ChargeDescription,ChargePeriodEnd,\
ChargePeriodStart,CommitmentDiscountId,ConsumedQuantity,ConsumedUnit,EffectiveCost,PricingQuantity,PricingUnit,\
ProviderName,RegionId,ResourceId,ResourceType,ServiceCategory,ServiceName,SkuPriceDetails,SubAccountId,Tags\n",
    );
    let base = chrono::DateTime::parse_from_rfc3339("2025-02-01T00:00:00Z")
        .unwrap()
        .to_utc();
    let mut hour = 0;
    while out.len() < bytes {
        let start = base + chrono::Duration::hours(hour);
        let end = start + chrono::Duration::hours(1);
        let (s, e) = (start.to_rfc3339(), end.to_rfc3339());
        for i in 0..200 {
            let tags = if i < 20 {
                format!("\"{{\"\"user:rentcheck-trial\"\": \"\"{trial}\"\"}}\"")
            } else {
                "{}".to_owned()
            };
            let _ = writeln!(
                out,
                "us-east-1a,43.69777777,123456789012,USD,Usage,$98.32 per On Demand Linux p5.48xlarge Instance Hour,{e},{s},,\
0.4444444444,Hrs,43.69777777,0.4444444444,Hrs,AWS,us-east-1,arn:aws:ec2:us-east-1:210987654321:instance/i-{i:017x},\
Instance,Compute,Amazon Elastic Compute Cloud,\"{{\"\"x_InstanceType\"\": \"\"p5.48xlarge\"\"}}\",210987654321,{tags}"
            );
            let _ = writeln!(
                out,
                "us-east-1a,0.09,123456789012,USD,Usage,$0.09 per GB - US East (N. Virginia) data transfer out,{e},{s},,\
1,GB,0.09,1,GB,AWS,us-east-1,arn:aws:ec2:us-east-1:210987654321:instance/i-{i:017x},Instance,Compute,\
Amazon Elastic Compute Cloud,,210987654321,{tags}"
            );
        }
        let _ = writeln!(
            out,
            ",1.00,123456789012,USD,Tax,Tax for the account,{e},{s},,,,1.00,,,AWS,,,,,,,210987654321,{{}}"
        );
        hour += 1;
    }
    out
}

/// (user + system CPU seconds, peak resident KiB) of this process.
fn usage() -> (f64, u64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let after = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 and 15 of the whole line are utime and stime, in clock ticks (100 per second).
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok()).unwrap_or(0.0);
    let cpu = (ticks(11) + ticks(12)) / 100.0;
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let hwm = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    (cpu, hwm)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// Sends `requests` at once while another client polls `/healthz` every 20 ms; prints what it cost.
async fn timed(name: &str, base: &str, size: usize, requests: Vec<reqwest::RequestBuilder>) -> anyhow::Result<()> {
    let done = Arc::new(AtomicBool::new(false));
    let poll = {
        let (done, url) = (done.clone(), format!("{base}/healthz"));
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            let mut ms = Vec::new();
            while !done.load(Ordering::Relaxed) {
                let t = Instant::now();
                if client.get(&url).send().await.is_ok_and(|r| r.status().is_success()) {
                    ms.push(t.elapsed().as_secs_f64() * 1e3);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            ms
        })
    };
    let (cpu0, _) = usage();
    let t = Instant::now();
    let answers = futures_util::future::join_all(requests.into_iter().map(|r| async move {
        let res = r.send().await?;
        let status = res.status();
        let body = res.text().await?;
        anyhow::Ok((status, body))
    }))
    .await;
    let wall = t.elapsed();
    done.store(true, Ordering::Relaxed);
    let healthz = poll.await?;
    let (cpu1, hwm) = usage();
    let mut body = String::new();
    for answer in answers {
        let (status, text) = answer?;
        anyhow::ensure!(status.is_success(), "{name}: {status} {}", &text[..text.len().min(500)]);
        body = text;
    }
    println!(
        "{name}: {:.1} MiB in {:.2} s wall, {:.2} s CPU, peak RSS {:.0} MiB; /healthz during it: {} answers, median {:.1} ms, max {:.1} ms",
        size as f64 / 1048576.0,
        wall.as_secs_f64(),
        cpu1 - cpu0,
        hwm as f64 / 1024.0,
        healthz.len(),
        median(healthz.clone()),
        healthz.iter().copied().fold(0.0, f64::max)
    );
    println!("  answer: {}", &body[..body.len().min(300)]);
    Ok(())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    scratch_database::with_scratch_database(8, run).await
}

async fn run(pool: PgPool) -> anyhow::Result<()> {
    let keys = TokenKeys::from_secret(b"bench-secret-bench-secret-bench-secret");
    let (person, _) = rentcheck::auth::users::add(&pool, "bench@example.com", Role::Manager, None, |u| {
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
            role: Role::Manager,
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

    let text = catalogue(CATALOGUE_BYTES);
    let size = text.len();
    let import = |text: String| {
        client
            .post(format!("{base}/api/v1/prices?format=skypilot&provider=GCP"))
            .bearer_auth(&signed)
            .header("content-type", "text/csv")
            .body(text)
    };
    timed(
        "SkyPilot catalogue (GCP shape)",
        &base,
        size,
        vec![import(text.clone())],
    )
    .await?;
    timed(
        "two SkyPilot catalogues at once",
        &base,
        2 * size,
        vec![import(text.clone()), import(text)],
    )
    .await?;

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
    let id = brief["id"].as_str().expect("brief id").to_owned();
    let trials: serde_json::Value = client
        .get(format!("{base}/api/v1/briefs/{id}/trials"))
        .bearer_auth(&signed)
        .send()
        .await?
        .json()
        .await?;
    let trial = trials["items"][0]["id"].as_str().expect("trial id").to_owned();
    let text = focus(FOCUS_BYTES, &trial);
    let size = text.len();
    timed(
        "FOCUS export (AWS per-second shape)",
        &base,
        size,
        vec![client
            .post(format!(
                "{base}/api/v1/briefs/{id}/ledger?format=focus&trial={trial}&gpus_per_resource=8"
            ))
            .bearer_auth(&signed)
            .header("content-type", "text/csv")
            .body(text)],
    )
    .await?;
    Ok(())
}
