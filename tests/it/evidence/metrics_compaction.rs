//! The newest value of a metric, as cards and the review read it, is the same whether or not the
//! background compactor has moved an upload out of the pending queue yet (migration 8).

use crate::common;
use crate::common::builders::EvidenceBuilder;

use chrono::{DateTime, Duration, Utc};
use rentcheck::ids::TrialId;
use rentcheck::{evidence::compactor, evidence::repo};
use serde_json::{json, Value};
use sqlx::PgPool;
use uuid::Uuid;

async fn database() -> (common::DatabaseGuard, PgPool) {
    common::migrated_database(6).await
}

async fn brief(pool: &PgPool) -> Uuid {
    let id = Uuid::now_v7();
    sqlx::query(
        "INSERT INTO briefs (id, name, owner, workload_kind, model_name, params_b, precision, context_length, \
         concurrency, data_boundary, allocation_boundary) VALUES ($1, 'compaction', 'eng@example.com', \
         'realtime-inference', 'meta-llama/Llama-3.1-8B-Instruct', 8, 'bf16', 8192, 16, 'shared-ok', 'vm')",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    // Its one trial, given the brief's own id so that these helpers pass one id for both.
    sqlx::query(
        "INSERT INTO trials (id, brief_id, position, name, allocation_boundary) VALUES ($1, $1, 1, 'Trial 1', 'vm')",
    )
    .bind(id)
    .execute(pool)
    .await
    .unwrap();
    id
}

async fn upload(pool: &PgPool, brief_id: Uuid, stage: i16, metrics: Value, collected_at: DateTime<Utc>) -> Uuid {
    // The brief's one trial has the brief's id (above).
    let mut item = common::TestEvidence::metrics(brief_id, brief_id, stage, metrics);
    item.collected_at = Some(collected_at);
    repo::insert(pool, &item.row()).await.unwrap();
    item.id
}

/// (key, stage) → (value, evidence id), as card evaluation sees it.
async fn newest(pool: &PgPool, brief_id: Uuid, keys: &[&str]) -> Vec<(String, u8, Value, Uuid)> {
    let keys: Vec<String> = keys.iter().map(|k| k.to_string()).collect();
    let mut rows: Vec<_> = repo::newest_metrics(pool, TrialId::from(brief_id), &keys)
        .await
        .unwrap()
        .into_iter()
        .map(|o| (o.key, o.stage, o.value, o.evidence_id))
        .collect();
    rows.sort_by(|a, b| (&a.0, a.1).cmp(&(&b.0, b.1)));
    rows
}

async fn pending(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM evidence_metrics_pending")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn newest_values_agree_before_and_after_compaction() {
    let (_database, pool) = database().await;
    let brief_id = brief(&pool).await;
    let other_brief = brief(&pool).await;
    let t0 = Utc::now() - Duration::hours(1);

    let newer = upload(
        &pool,
        brief_id,
        3,
        json!({"serving.ttft_p95_ms": 180, "gpu.count": 8}),
        t0,
    )
    .await;
    // Uploaded later but collected earlier: it must not win.
    let older = upload(
        &pool,
        brief_id,
        3,
        json!({"serving.ttft_p95_ms": 950}),
        t0 - Duration::minutes(5),
    )
    .await;
    let stage2 = upload(&pool, brief_id, 2, json!({"serving.ttft_p95_ms": 400}), t0).await;
    upload(
        &pool,
        other_brief,
        3,
        json!({"serving.ttft_p95_ms": 1}),
        t0 + Duration::minutes(1),
    )
    .await;
    // An upload with no metrics does not queue anything.
    upload(&pool, brief_id, 1, json!({}), t0).await;
    assert_eq!(pending(&pool).await, 4);

    let keys = ["serving.ttft_p95_ms", "gpu.count", "not.reported"];
    let expected = vec![
        ("gpu.count".to_owned(), 3, json!(8), newer),
        ("serving.ttft_p95_ms".to_owned(), 2, json!(400), stage2),
        ("serving.ttft_p95_ms".to_owned(), 3, json!(180), newer),
    ];
    assert_eq!(
        newest(&pool, brief_id, &keys).await,
        expected,
        "read from the pending queue"
    );

    assert_eq!(compactor::compact_all(&pool).await.unwrap(), 4);
    assert_eq!(pending(&pool).await, 0);
    assert_eq!(
        newest(&pool, brief_id, &keys).await,
        expected,
        "read from the compacted values"
    );

    // A late upload of an even older figure, pending and then compacted, changes nothing...
    upload(
        &pool,
        brief_id,
        3,
        json!({"serving.ttft_p95_ms": 700}),
        t0 - Duration::hours(2),
    )
    .await;
    assert_eq!(newest(&pool, brief_id, &keys).await, expected);
    compactor::compact_all(&pool).await.unwrap();
    assert_eq!(newest(&pool, brief_id, &keys).await, expected);

    // ...while a newer one wins, pending or compacted.
    let newest_id = upload(
        &pool,
        brief_id,
        3,
        json!({"serving.ttft_p95_ms": 120}),
        t0 + Duration::minutes(1),
    )
    .await;
    let mut now_expected = expected.clone();
    now_expected[2] = ("serving.ttft_p95_ms".to_owned(), 3, json!(120), newest_id);
    assert_eq!(newest(&pool, brief_id, &keys).await, now_expected);
    compactor::compact_all(&pool).await.unwrap();
    assert_eq!(newest(&pool, brief_id, &keys).await, now_expected);
    let _ = older;
}

/// Items of one trial and stage with the same keys (the same digest) are read for their keys only
/// through the newest of them; an older item with other keys, an item of another stage with the
/// same keys, and an item without a digest (stored before digests, or by other means) still count.
#[tokio::test]
async fn items_with_the_same_keys_give_the_newest_values_and_others_still_count() {
    let (_database, pool) = database().await;
    let brief_id = brief(&pool).await;
    let t0 = Utc::now() - Duration::hours(1);
    upload(&pool, brief_id, 3, json!({"x": 1, "y": 1}), t0).await;
    let newest_xy = upload(&pool, brief_id, 3, json!({"x": 2, "y": 2}), t0 + Duration::minutes(1)).await;
    let with_z = upload(
        &pool,
        brief_id,
        3,
        json!({"x": 3, "y": 3, "z": 3}),
        t0 - Duration::minutes(1),
    )
    .await;
    let mut no_digest = common::TestEvidence::metrics(brief_id, brief_id, 3, json!({"x": 4}));
    no_digest.metric_keys_digest = None;
    no_digest.collected_at = Some(t0 + Duration::minutes(2));
    repo::insert(&pool, &no_digest.row()).await.unwrap();
    let stage2 = upload(&pool, brief_id, 2, json!({"x": 5, "y": 5}), t0 - Duration::minutes(10)).await;

    let expected = vec![
        ("x".to_owned(), 2, json!(5), stage2),
        ("x".to_owned(), 3, json!(4), no_digest.id),
        ("y".to_owned(), 2, json!(5), stage2),
        ("y".to_owned(), 3, json!(2), newest_xy),
        ("z".to_owned(), 3, json!(3), with_z),
    ];
    assert_eq!(
        newest(&pool, brief_id, &["x", "y", "z"]).await,
        expected,
        "read from the queue"
    );
    assert_eq!(compactor::compact_all(&pool).await.unwrap(), 5);
    assert_eq!(
        newest(&pool, brief_id, &["x", "y", "z"]).await,
        expected,
        "read from the compacted values"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_compactors_move_every_item_once_and_keep_the_newest() {
    let (_database, pool) = database().await;
    let brief_id = brief(&pool).await;
    let t0 = Utc::now() - Duration::hours(1);
    // 600 uploads of the same keys with distinct collection times; the newest is item 599.
    let mut last = Uuid::nil();
    for i in 0..600i64 {
        let metrics = json!({"bench.value": i, format!("bench.only_{}", i % 7): i});
        last = upload(&pool, brief_id, 3, metrics, t0 + Duration::seconds(i)).await;
    }
    // Four compactors in small batches, racing over one queue.
    let racers: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move {
                let mut total = 0;
                loop {
                    let n = compactor::compact_once(&pool, 37).await.unwrap();
                    total += n;
                    if n == 0 {
                        return total;
                    }
                }
            })
        })
        .collect();
    let mut moved = Vec::new();
    for racer in racers {
        moved.push(racer.await.unwrap());
    }
    assert_eq!(
        moved.iter().sum::<i32>(),
        600,
        "each item taken exactly once: {moved:?}"
    );
    assert_eq!(pending(&pool).await, 0);
    let rows = newest(&pool, brief_id, &["bench.value", "bench.only_0", "bench.only_6"]).await;
    assert_eq!(rows[0], ("bench.only_0".to_owned(), 3, json!(595), rows[0].3));
    assert_eq!(rows[1], ("bench.only_6".to_owned(), 3, json!(594), rows[1].3));
    assert_eq!(rows[2], ("bench.value".to_owned(), 3, json!(599), last));
}

#[tokio::test]
async fn the_servers_compactor_folds_an_upload_and_counts_it_in_metrics() {
    let app = common::spawn_app().await;
    let brief_id = app.brief_id().await;
    let response = EvidenceBuilder::metrics(json!({"serving.ttft_p95_ms": 140}))
        .stage(3)
        .post(&app, &brief_id)
        .await;
    assert_eq!(response.status(), 201);
    // The idle compactor polls every 250 ms; give it a few seconds on a busy machine.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let text = loop {
        let text = app.get("/metrics").await.text().await.unwrap();
        if text.contains("rentcheck_evidence_metrics_compacted_total 1") || std::time::Instant::now() > deadline {
            break text;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert!(text.contains("rentcheck_evidence_metrics_compacted_total 1"), "{text}");
    assert!(text.contains("rentcheck_evidence_metrics_compaction_failures_total 0"));
    assert_eq!(pending(&app.pool).await, 0);
    let latest: i64 = sqlx::query_scalar("SELECT count(*) FROM evidence_metrics_latest WHERE brief_id = $1")
        .bind(Uuid::parse_str(&brief_id).unwrap())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(latest, 1);
}

/// Synthetic: a metrics object of `n` keys, each value a string of `len` bytes.
fn wide_metrics(n: usize, len: usize) -> Value {
    let text = "x".repeat(len);
    Value::Object((0..n).map(|i| (format!("k{i}"), json!(text))).collect())
}

/// Timed tests (a bound in milliseconds or seconds on work that a busy machine slows):
/// `scripts/test.sh` runs the `timed` modules in a pass of their own, after the rest of the suite.
mod timed {
    use super::*;

    #[tokio::test]
    async fn a_round_over_a_poisoned_item_ends_within_its_bound_and_sets_the_item_aside_for_good() {
        let (_db, pool) = database().await;
        let brief_id = brief(&pool).await;
        let t0 = Utc::now() - Duration::hours(1);
        let bound = std::time::Duration::from_secs(1);
        // An older value of one of the poisoned item's keys, already compacted.
        let older = upload(&pool, brief_id, 2, json!({"k0": 1}), t0 - Duration::hours(1)).await;
        compactor::compact_round(&pool, compactor::BATCH, bound).await.unwrap();
        // Stored directly, as an item uploaded before the key limit existed: far more keys than an
        // upload may now have.
        let poisoned = upload(&pool, brief_id, 2, wide_metrics(300_000, 1), t0).await;
        let fine = upload(&pool, brief_id, 2, json!({"gpu.count": 8}), t0).await;
        // How long 300,000 keys take depends on the machine, so the test does not rely on it: another
        // session holds the row of one of the item's keys, and compacting the item must wait for it, so
        // it outlasts the bound on any machine, as it would on a slow one. The fine item does not touch
        // that row.
        let mut holder = pool.begin().await.unwrap();
        sqlx::query("SELECT 1 FROM evidence_metrics_latest WHERE brief_id = $1 AND key = 'k0' FOR UPDATE")
            .bind(brief_id)
            .fetch_one(&mut *holder)
            .await
            .unwrap();

        let started = std::time::Instant::now();
        let round = compactor::compact_round(&pool, compactor::BATCH, bound).await.unwrap();
        let took = started.elapsed();
        holder.rollback().await.unwrap();
        // The batch's timeout, the fine item, the poisoned item's own timeout, and the bookkeeping.
        assert!(took < bound * 3 + std::time::Duration::from_secs(2), "took {took:?}");
        assert_eq!(round.set_aside, vec![poisoned]);
        // One poisoned item per round; the fine item is moved in this round or the next.
        let next = compactor::compact_round(&pool, compactor::BATCH, bound).await.unwrap();
        assert_eq!(round.moved + next.moved, 1);
        assert!(next.set_aside.is_empty());
        assert_eq!(pending(&pool).await, 0);
        // The set-aside item's values never reached the card: k0 is still the older item's.
        let rows = newest(&pool, brief_id, &["gpu.count", "k0"]).await;
        assert_eq!(
            rows,
            vec![
                ("gpu.count".into(), 2, json!(8), fine),
                ("k0".into(), 2, json!(1), older)
            ]
        );

        let reason: String = sqlx::query_scalar("SELECT reason FROM evidence_metrics_set_aside WHERE evidence_id = $1")
            .bind(poisoned)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert!(reason.contains("set aside"), "{reason}");
        let warnings: Value = sqlx::query_scalar("SELECT warnings FROM evidence WHERE id = $1")
            .bind(poisoned)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(warnings, json!([reason]));

        // Never taken again: the next round has nothing to do.
        let again = compactor::compact_round(&pool, compactor::BATCH, bound).await.unwrap();
        assert_eq!(again, compactor::Round::default());
    }

    #[tokio::test]
    async fn an_item_at_every_limit_compacts_well_within_the_rounds_bound() {
        let (_db, pool) = database().await;
        let brief_id = brief(&pool).await;
        // Synthetic: the most an accepted item can hold, 1,000 keys with 4 KiB strings.
        let item = upload(&pool, brief_id, 3, wide_metrics(1_000, 4 * 1024), Utc::now()).await;
        let started = std::time::Instant::now();
        let round = compactor::compact_round(&pool, compactor::BATCH, compactor::ROUND_TIMEOUT)
            .await
            .unwrap();
        let took = started.elapsed();
        assert_eq!(
            round,
            compactor::Round {
                moved: 1,
                set_aside: vec![]
            }
        );
        assert!(took < compactor::ROUND_TIMEOUT / 2, "took {took:?}");
        let rows = newest(&pool, brief_id, &["k999"]).await;
        assert_eq!(rows[0].3, item);
        eprintln!("an item at every limit compacted in {took:?}");
    }
}
