//! The trials migration on a database that already holds the demo, as the version before trials
//! left it (`tests/db/demo-before-trials.sql`: the demo loaded by that version, plus a
//! manager's approval of its review and an agent token, dumped as SQL). Every brief gets its first
//! trial, everything it owned moves onto that trial, and nothing loses its meaning: the review
//! decides the same, with the same digest, so the approval stays current.

use std::path::Path;

use crate::common;
use rentcheck::{config::AppConfig, db, secrets::TokenKeys};
use serde_json::Value;
use sqlx::{migrate::Migrator, PgPool};
use uuid::Uuid;

/// The last migration before trials.
const BEFORE_TRIALS: &str = "20261129000010";
const DEMO_BRIEF: &str = "01930000-de70-7000-8000-000000000070";
/// The review's `inputs_digest` that the approval in the dump was recorded against.
const APPROVED_DIGEST: &str = "91c567de33cc2ba8a25e58276bd24ec680db0215fd7283835815e16e4b128ae0";

/// Applies the migrations up to `last` (copied into a folder of their own, so sqlx's public
/// `Migrator::new` reads just those).
async fn migrate_up_to(pool: &PgPool, last: &str) {
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir("migrations").unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.as_str() <= format!("{last}_~").as_str() {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    Migrator::new(Path::new(dir.path()))
        .await
        .unwrap()
        .run(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_database_with_the_demo_gets_its_first_trial_and_keeps_its_meaning() {
    let (_database, options) = common::create_database().await;
    let pool = common::connect(&options, 5).await;
    migrate_up_to(&pool, BEFORE_TRIALS).await;
    let dump = std::fs::read_to_string("tests/db/demo-before-trials.sql").expect("the dump fixture");
    sqlx::raw_sql(&format!("BEGIN; SET CONSTRAINTS ALL DEFERRED; {dump} COMMIT;"))
        .execute(&pool)
        .await
        .unwrap();
    let evidence_before: i64 = sqlx::query_scalar("SELECT count(*) FROM evidence")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(evidence_before, 10);

    db::migrate(&pool).await.unwrap();

    let brief = Uuid::parse_str(DEMO_BRIEF).unwrap();
    let (trial, name, gpu, count, status): (Uuid, String, Option<String>, Option<i32>, String) =
        sqlx::query_as("SELECT id, name, gpu, gpu_count, status FROM trials WHERE brief_id = $1 AND position = 1")
            .bind(brief)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(
        (name.as_str(), gpu.as_deref(), count, status.as_str()),
        ("Trial 1", Some("H200 SXM"), Some(8), "running"),
        "the first trial is the brief's trial_gpu × trial_gpu_count, running since it has evidence"
    );
    for table in [
        "evidence",
        "ledger_lines",
        "ledger_outputs",
        "ledger_accelerator_merged",
        "evidence_metrics_latest",
        "approvals",
    ] {
        let (all, on_trial): (i64, i64) = sqlx::query_as(&format!(
            "SELECT count(*), count(*) FILTER (WHERE trial_id = $1) FROM {table}"
        ))
        .bind(trial)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert!(all > 0, "{table} has rows");
        assert_eq!(all, on_trial, "every {table} row moved onto the first trial");
    }
    let scoped: Option<Uuid> = sqlx::query_scalar("SELECT trial_id FROM api_tokens WHERE role = 'agent'")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(
        scoped, None,
        "an old agent token stays scoped to its brief, not to a trial"
    );

    // The app over the migrated database answers as before.
    let keys = TokenKeys::from_secret(b"the migrated database's new signing secret");
    let base = common::serve_app(pool.clone(), AppConfig::default(), keys.clone()).await;
    let client = common::bearer_client(&common::engineer_token(&pool, &keys).await);
    let review: Value = client
        .get(format!("{base}/api/v1/briefs/{DEMO_BRIEF}/review"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    // Rule 8b: the demo imports no reserved price, so it is busy enough to ask for one and expands.
    assert_eq!(review["decision"], "expand");
    assert_eq!(review["ledger"]["cost_per_job"], "0.00859");
    // The approval pinned the inputs of that day. The trials migration changed none of them: the
    // differences are two later changes of the default card, not of the data: the NCCL floor now
    // comes from the table of what each fabric should reach, and the inter-token criterion now
    // judges the per-request time per output token (the figure the SLO uses) instead of the
    // per-gap inter-token latency, read from the same load test.
    assert_eq!(review["approval"]["inputs_digest"], APPROVED_DIGEST);
    let then = review["approval"]["inputs"]["criteria"].as_array().unwrap().clone();
    let now = review["trials"][0]["criteria"].as_array().unwrap().clone();
    assert_eq!(then.len(), now.len());
    let differing: Vec<String> = then
        .iter()
        .zip(&now)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| {
            if a["key"] == b["key"] {
                assert_eq!(a["value"], b["value"], "{a} vs {b}: no value moved");
            } else {
                assert_eq!(
                    (a["key"].as_str(), b["key"].as_str()),
                    (Some("serving.itl_p95_ms"), Some("serving.tpot_p95_ms")),
                    "the only criterion that changed its figure is the inter-token one"
                );
                assert_eq!(a["threshold"], b["threshold"], "the brief's target is kept");
            }
            assert_eq!(a["evidence_id"], b["evidence_id"], "the same evidence behind it");
            a["key"].as_str().unwrap().to_owned()
        })
        .collect();
    assert_eq!(differing, ["nccl.busbw_peak_gbps", "serving.itl_p95_ms"]);
    // The review reads money per unit of work since (the trial's rate and its load tests) and the
    // trial's billing (rules 6c and 8): new inputs, named as such.
    assert_eq!(
        review["approval"]["changed"],
        serde_json::json!(["brief.trial_billing", "criteria", "money"])
    );
    assert_eq!(review["trials"].as_array().unwrap().len(), 1);
    let brief_json: Value = client
        .get(format!("{base}/api/v1/briefs/{DEMO_BRIEF}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        brief_json["trial_gpu"], "H200 SXM",
        "trial_gpu now reads the first trial"
    );
    assert_eq!(brief_json["trial_gpu_count"], 8);
}
