//! Review summaries (each brief's signal snapshot, `review_summaries`): kept current by every write
//! that can change a review, equal to the full review the API computes, remade by the watcher in
//! the background and, for what a reader is about to show, before it reads.

use std::time::Duration;

use crate::common;
use crate::common::builders::{CardBuilder, EvidenceBuilder, LedgerBuilder, PriceRow, PriceSheet, TrialBuilder};

use common::{bearer_client, spawn_app, TestApp};
use rentcheck::ids::BriefId;
use rentcheck::{
    auth::Role,
    config::AppConfig,
    db::StoredText,
    review::{
        decision::Verdict,
        summaries::{self as summaries, SummaryRow},
    },
    state::AppState,
};
use serde_json::{json, Value};
use uuid::Uuid;

fn state(app: &TestApp) -> AppState {
    AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone())
}

/// The summary of `id` as a reader gets it, beside the full review of the API.
async fn summary_and_review(app: &TestApp, id: &str) -> (SummaryRow, Value) {
    let uuid: Uuid = id.parse().unwrap();
    let rows = summaries::current(&state(app), &[BriefId::from(uuid)]).await.unwrap();
    let review: Value = app
        .get(&format!("/api/v1/briefs/{id}/review"))
        .await
        .json()
        .await
        .unwrap();
    (rows.into_iter().next().expect("a summary"), review)
}

/// The summary says what the full review says.
fn assert_same(s: &SummaryRow, r: &Value) {
    assert_eq!(s.decision, r["decision"].as_str().unwrap(), "{r}");
    assert_eq!(s.accepted, r["accepted"].as_bool().unwrap());
    let chosen = r["trials"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["decision"] == r["decision"] && t["accepted"] == r["accepted"])
        .unwrap();
    assert_eq!(
        s.summary.criteria_passed as u64,
        chosen["criteria_passed"].as_u64().unwrap()
    );
    assert_eq!(
        s.summary.criteria_required as u64,
        chosen["criteria_required"].as_u64().unwrap()
    );
    assert_eq!(
        s.summary.cost_per_job.map(|c| c.normalize().to_string()),
        chosen["cost_per_job"]
            .as_str()
            .map(|c| c.parse::<rust_decimal::Decimal>().unwrap().normalize().to_string()),
    );
    match (&r["approval"], s.summary.state.as_str()) {
        (Value::Null, "awaiting-evidence" | "needs-approval") => {}
        (a, "stale") => assert_eq!(a["stale"], true),
        (a, "approved") => assert_eq!(a["verdict"], "approve"),
        (a, "rejected") => assert_eq!(a["verdict"], "reject"),
        (a, state) => panic!("state {state} with approval {a}"),
    }
}

#[tokio::test]
async fn the_summary_follows_evidence_ledger_approvals_and_prices_and_equals_the_full_review() {
    let app = spawn_app().await;
    let id = app.brief_id().await;

    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert_eq!(s.summary.state, "awaiting-evidence");
    assert_eq!(s.summary.evidence_count, 0);

    // A failing GPU health check: a required criterion fails.
    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert_eq!(
        (s.summary.state.as_str(), s.summary.evidence_count),
        ("needs-approval", 1)
    );
    assert!(s.summary.failing, "the diagnostic failed");
    assert!(s.summary.last_evidence_at.is_some());

    // Ledger lines and outputs: a cost per completed job.
    let csv = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n\
               accelerator,r1,run,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,8,2.50,,USD\n";
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{id}/ledger")))
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let res = LedgerBuilder::new().accepted(1000).post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert!(s.summary.cost_per_job.is_some(), "200 USD over 1,000 jobs");

    // A manager's verdict, then new evidence that makes it stale.
    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let digest = r["inputs_digest"].as_str().unwrap();
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{id}/approvals")))
        .json(&json!({ "verdict": "reject", "comment": "Fix the node first.", "inputs_digest": digest }))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert_eq!(s.summary.state, "rejected");
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 300 }))
        .stage(3)
        .post(&app, &id)
        .await;
    assert_eq!(res.status(), 201);
    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert_eq!((s.summary.state.as_str(), s.summary.evidence_count), ("stale", 2));

    // A price import can change every brief's money: every brief is marked.
    let other = app.brief_id().await;
    // The watcher's round takes every queued mark first.
    summaries::refresh_changed(&state(&app), 100, Duration::ZERO)
        .await
        .unwrap();
    let res = PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H100 SXM", 8, "2.99").source("https://a.example/pricing"))
        .post_with(&manager, &app)
        .await;
    assert_eq!(res.status(), 201);
    let marked: i64 = sqlx::query_scalar("SELECT count(*) FROM review_changes WHERE brief_id = ANY($1)")
        .bind(vec![id.parse::<Uuid>().unwrap(), other.parse::<Uuid>().unwrap()])
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(marked, 2, "the price import queued a mark for each brief");
    for b in [&id, &other] {
        let (s, r) = summary_and_review(&app, b).await;
        assert_same(&s, &r);
    }
}

#[tokio::test]
async fn the_watcher_summarises_every_brief_without_a_reader_asking() {
    let app = spawn_app().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(app.brief_id().await);
    }
    rentcheck::signals::worker::spawn(state(&app));
    let stored = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM review_summaries")
            .fetch_one(&app.pool)
            .await
            .unwrap()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while stored().await < 5 {
        assert!(
            std::time::Instant::now() < deadline,
            "the watcher did not summarise every brief"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for id in &ids {
        let (s, r) = summary_and_review(&app, id).await;
        assert_same(&s, &r);
    }
}

/// The review JSON as the API answers it, and as computed afresh (a state with an empty cache).
/// Both without `as_of` (when each was computed); a served answer is never `refreshing` here (one
/// reader at a time).
async fn served_and_fresh(app: &TestApp, id: &str) -> (Value, Value) {
    let res = app.get(&format!("/api/v1/briefs/{id}/review")).await;
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "application/json");
    let mut served: Value = res.json().await.unwrap();
    let fresh = rentcheck::review::service::review(&state(app), id.parse().unwrap())
        .await
        .unwrap();
    let mut fresh = rentcheck::review::answer::review_json(&fresh);
    for answer in [&mut served, &mut fresh] {
        let as_of = answer.as_object_mut().unwrap().remove("as_of");
        assert!(as_of.is_some_and(|t| t.is_string()));
    }
    (served, fresh)
}

#[tokio::test]
async fn the_review_api_answers_from_its_cache_only_until_a_write_commits() {
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh);

    // The answer is kept: a row written behind the change queue's back (its trigger off) is not
    // seen, because nothing said the brief changed.
    // (A first upload also marks the trial running: its trigger goes off too.)
    for off in [
        "ALTER TABLE evidence DISABLE TRIGGER evidence_review_changed",
        "ALTER TABLE trials DISABLE TRIGGER trials_review_changed",
    ] {
        sqlx::query(off).execute(&app.pool).await.unwrap();
    }
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 300 }))
        .stage(3)
        .post(&app, &id)
        .await;
    assert_eq!(res.status(), 201);
    for on in [
        "ALTER TABLE evidence ENABLE TRIGGER evidence_review_changed",
        "ALTER TABLE trials ENABLE TRIGGER trials_review_changed",
    ] {
        sqlx::query(on).execute(&app.pool).await.unwrap();
    }
    let (served, fresh) = served_and_fresh(&app, &id).await;
    let passing = |r: &Value| r["trials"][0]["criteria_passed"].as_u64().unwrap();
    assert_eq!(
        (passing(&served), passing(&fresh)),
        (0, 1),
        "the kept answer was served; a fresh one counts the new TTFT"
    );

    // Every write that can change a review is seen at once: evidence, ledger lines and outputs,
    // the card, the trial, a verdict, a price sheet, a readiness confirmation.
    let res = EvidenceBuilder::failed_diag().post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after evidence");

    let csv = "category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency\n\
               accelerator,r1,run,2026-03-01T00:00:00Z,2026-03-01T10:00:00Z,8,2.50,,USD\n";
    let res = app
        .client
        .post(app.url(&format!("/api/v1/briefs/{id}/ledger")))
        .header("content-type", "text/csv")
        .body(csv)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after ledger lines");
    let res = LedgerBuilder::new().accepted(1000).post(&app, &id).await;
    assert_eq!(res.status(), 201);
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after outputs");
    let before_card = served.clone();

    let res = CardBuilder::new()
        .criterion(json!({ "key": "serving.ttft_p95_ms", "op": "le", "threshold": 100, "unit": "ms", "stage": 3, "required": true }))
        .put(&app, &id)
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after a card revision");
    assert_ne!(served, before_card);

    TrialBuilder::first_of(&app, &id)
        .await
        .rate_per_gpu_hour("9.99")
        .save(&app)
        .await;
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after a trial edit");

    let manager = bearer_client(&app.token(Role::Manager, None).await);
    let res = manager
        .post(app.url(&format!("/api/v1/briefs/{id}/approvals")))
        .json(
            &json!({ "verdict": "reject", "comment": "Fix the node first.", "inputs_digest": served["inputs_digest"] }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after a verdict");
    assert_eq!(served["approval"]["verdict"], "reject");

    let res = PriceSheet::new()
        .row(PriceRow::new("Cloud A", "H100 SXM", 8, "2.99").source("https://a.example/pricing"))
        .post_with(&manager, &app)
        .await;
    assert_eq!(res.status(), 201);
    let (served, fresh) = served_and_fresh(&app, &id).await;
    assert_eq!(served, fresh, "after a price sheet");
}

/// A start-up queues only the summaries made by older rules than the server's (a deploy that
/// changed no rules remakes nothing), and the watcher remakes a brief at most once per interval
/// however many changes keep arriving; a reader still sees every committed change meanwhile.
#[tokio::test]
async fn start_up_remakes_only_older_rules_and_a_busy_brief_is_remade_once_per_interval() {
    use rentcheck::review::summaries_repo;
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let brief: Uuid = id.parse().unwrap();
    let dirty = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM review_changes WHERE brief_id = $1")
            .bind(brief)
            .fetch_one(&app.pool)
            .await
            .unwrap()
    };
    summaries::refresh_changed(&state(&app), 100, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(dirty().await, 0);
    let version: i32 = sqlx::query_scalar("SELECT rules_version FROM review_summaries WHERE brief_id = $1")
        .bind(brief)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(version, summaries::RULES_VERSION);
    assert_eq!(
        summaries::mark_outdated(&state(&app)).await.unwrap(),
        0,
        "made by these rules: kept"
    );
    sqlx::query("UPDATE review_summaries SET rules_version = $2 WHERE brief_id = $1")
        .bind(brief)
        .bind(summaries::RULES_VERSION - 1)
        .execute(&app.pool)
        .await
        .unwrap();
    assert_eq!(
        summaries::mark_outdated(&state(&app)).await.unwrap(),
        1,
        "older rules: remade"
    );
    summaries::refresh_changed(&state(&app), 100, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(dirty().await, 0);

    // Just remade: within the interval the brief's new marks wait; past it they are taken at once.
    let res = EvidenceBuilder::metrics(json!({ "serving.ttft_p95_ms": 300 }))
        .stage(3)
        .post(&app, &id)
        .await;
    assert_eq!(res.status(), 201);
    let held = summaries_repo::claim_dirty(&app.pool, 100, Duration::ZERO, Duration::from_secs(3600))
        .await
        .unwrap();
    assert!(held.is_empty(), "remade less than an interval ago");
    assert!(dirty().await >= 1, "its marks wait");
    let (s, r) = summary_and_review(&app, &id).await;
    assert_same(&s, &r);
    assert_eq!(s.summary.evidence_count, 1, "a reader sees the change meanwhile");
    let taken = summaries_repo::claim_dirty(&app.pool, 100, Duration::ZERO, Duration::ZERO)
        .await
        .unwrap();
    assert_eq!(taken.len(), 1);
    assert_eq!(taken[0].0, BriefId::from(brief));
    assert!(taken[0].1 >= 1, "with the marks it took");
}

/// A trial snapshot keeps its decision as text (`Verdict::as_str`) and reads it back through
/// `StoredText<Verdict>` (the engine's `Verdict` has no database mapping of its own): every decision
/// round-trips through its stored text, which is the text the webhooks' JSON and messages show;
/// other text is refused.
#[tokio::test]
async fn a_signal_decision_round_trips_through_its_stored_text() {
    let (_db, pool) = common::migrated_database(1).await;
    let pool = &pool;
    let read = |text: &'static str| async move {
        sqlx::query_scalar::<_, StoredText<Verdict>>("SELECT $1::text")
            .bind(text)
            .fetch_one(pool)
            .await
            .map(StoredText::into_inner)
    };
    for v in [
        Verdict::Expand,
        Verdict::Reserve,
        Verdict::Dedicate,
        Verdict::Scale,
        Verdict::Stop,
    ] {
        let stored = v.as_str();
        assert_eq!(read(stored).await.unwrap(), v);
        assert_eq!(json!({ "decision": v }), json!({ "decision": stored }));
        assert_eq!(v.to_string(), stored);
    }
    assert!(read("Stop").await.is_err());
    assert!(read("").await.is_err());
}

/// The evidence counts a summary and the brief page's timeline show are kept totals plus the marks
/// still queued, not a count of every item: they equal counting every item before the watcher
/// takes the marks, after, and with new marks waiting beside the totals.
#[tokio::test]
async fn evidence_counts_kept_as_totals_equal_counting_every_item() {
    use chrono::{DateTime, Utc};
    use rentcheck::{ids::TrialId, review::summaries_repo};
    type Stage = (i16, i64, DateTime<Utc>, DateTime<Utc>);
    let app = spawn_app().await;
    let id = app.brief_id().await;
    let brief = BriefId::from(id.parse::<Uuid>().unwrap());
    let trial: Uuid = sqlx::query_scalar("SELECT id FROM trials WHERE brief_id = $1")
        .bind(brief.as_uuid())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    // What counting every item says: per stage, and the trial's count and newest receipt.
    let counted = || async {
        let stages: Vec<Stage> = sqlx::query_as(
            "SELECT stage, count(*), min(collected_at), max(collected_at) FROM evidence
             WHERE trial_id = $1 GROUP BY stage ORDER BY stage",
        )
        .bind(trial)
        .fetch_all(&app.pool)
        .await
        .unwrap();
        let whole: Option<(i64, DateTime<Utc>)> =
            sqlx::query_as("SELECT count(*), max(received_at) FROM evidence WHERE trial_id = $1 HAVING count(*) > 0")
                .bind(trial)
                .fetch_optional(&app.pool)
                .await
                .unwrap();
        (stages, whole)
    };
    let kept = || async {
        let stages: Vec<Stage> = summaries_repo::stage_times(&app.pool, brief, TrialId::from(trial))
            .await
            .unwrap()
            .into_iter()
            .map(|s| (s.stage, s.uploads, s.first, s.last))
            .collect();
        let whole = summaries_repo::trial_evidence(&app.pool, brief, &[TrialId::from(trial)])
            .await
            .unwrap()
            .into_iter()
            .map(|(_, at, n)| (n, at))
            .next();
        (stages, whole)
    };
    assert_eq!(kept().await, counted().await, "nothing yet");
    assert_eq!(counted().await.0, vec![]);

    let upload = |stage: u8, collected: &str| {
        json!({ "kind": "metrics", "stage": stage, "collected_at": collected,
                "data": { "metrics": { "serving.ttft_p95_ms": 300 } } })
    };
    let evidence = format!("/api/v1/briefs/{id}/evidence");
    let res = app.post_json(&evidence, &upload(3, "2026-11-30T10:00:00Z")).await;
    assert_eq!(res.status(), 201);
    let batch = json!({ "items": [
        upload(1, "2026-11-29T08:00:00Z"), upload(3, "2026-12-01T09:00:00Z"), upload(3, "2026-11-28T07:00:00Z"),
        { "kind": "metrics", "stage": 9, "data": { "metrics": {} } },
    ]});
    let res = app.post_json(&format!("{evidence}/batch"), &batch).await;
    assert_eq!(res.status(), 207);
    let (stages, whole) = counted().await;
    assert_eq!(
        stages.iter().map(|s| (s.0, s.1)).collect::<Vec<_>>(),
        vec![(1, 1), (3, 3)]
    );
    assert_eq!(whole.map(|w| w.0), Some(4), "the refused item is not evidence");
    assert_eq!(kept().await, (stages.clone(), whole), "from the queued marks alone");

    summaries::refresh_changed(&state(&app), 100, Duration::ZERO)
        .await
        .unwrap();
    let marks: i64 = sqlx::query_scalar("SELECT count(*) FROM review_changes WHERE brief_id = $1")
        .bind(brief.as_uuid())
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(marks, 0, "the watcher took them");
    assert_eq!(kept().await, (stages, whole), "from the totals alone");

    let res = app.post_json(&evidence, &upload(1, "2026-11-27T06:00:00Z")).await;
    assert_eq!(res.status(), 201);
    let now = counted().await;
    assert_eq!(now.0[0].1, 2);
    assert_eq!(
        now.0[0].2.to_rfc3339(),
        "2026-11-27T06:00:00+00:00",
        "the earliest moved"
    );
    assert_eq!(kept().await, now, "the totals and a new mark together");
    let (s, _) = summary_and_review(&app, &id).await;
    assert_eq!(s.summary.evidence_count, 5, "what the summary shows");
}
