//! Single uploads that arrive together are written in one statement (`evidence/group_insert.rs`):
//! each is still answered with its own row, stored once, and a row that cannot be written fails
//! only its own upload.

use crate::common;

use std::collections::HashSet;

use common::{spawn_app, TestEvidence};
use rentcheck::{
    error::AppError,
    evidence::{
        group_insert::{GroupInsert, QueuedRow},
        repo::NewEvidence,
    },
};
use serde_json::{json, Value};
use std::sync::Arc;
use uuid::Uuid;

#[tokio::test]
async fn single_uploads_sent_at_once_are_each_stored_once_with_their_own_values() {
    let app = spawn_app().await;
    let brief = app.brief_id().await;
    let path = format!("/api/v1/briefs/{brief}/evidence");
    let sends = (0..40u32).map(|i| {
        let body = json!({ "kind": "metrics", "stage": 3, "data": { "metrics": { "serving.sent": i } } });
        let app = &app;
        let path = &path;
        async move { (i, app.post_json(path, &body).await) }
    });
    let mut ids = HashSet::new();
    for (i, res) in futures_util::future::join_all(sends).await {
        assert_eq!(res.status(), 201, "upload {i}");
        let answer: Value = res.json().await.unwrap();
        assert_eq!(
            answer["metrics"]["serving.sent"].as_f64(),
            Some(f64::from(i)),
            "upload {i} answered with another's values"
        );
        let id = answer["id"].as_str().unwrap().to_owned();
        // What was stored under the id is what this upload sent.
        let stored: Value = app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap();
        assert_eq!(stored["metrics"]["serving.sent"].as_f64(), Some(f64::from(i)));
        assert!(ids.insert(id), "two uploads answered with one id");
    }
    assert_eq!(app.count("evidence").await, 40, "every upload stored once");
}

/// A test's own row, written through the same queue as uploads.
impl QueuedRow for TestEvidence {
    fn row(&self) -> NewEvidence<'_> {
        TestEvidence::row(self)
    }
}

fn rows(brief: Uuid, trial: Uuid) -> Vec<TestEvidence> {
    (0..4)
        .map(|n| TestEvidence::metrics(brief, trial, 3, json!({ "n": n })))
        .collect()
}

async fn brief_and_trial(app: &common::TestApp) -> (Uuid, Uuid) {
    let brief: Uuid = app.brief_id().await.parse().unwrap();
    let trial: Uuid = sqlx::query_scalar("SELECT id FROM trials WHERE brief_id = $1")
        .bind(brief)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    (brief, trial)
}

// The test runtime runs one task at a time: the four inserts all queue before the first writer
// runs, so that writer takes them as one group.
#[tokio::test]
async fn rows_waiting_together_are_written_by_one_statement() {
    let app = spawn_app().await;
    let (brief, trial) = brief_and_trial(&app).await;
    let queue = Arc::new(GroupInsert::<TestEvidence>::default());
    let rows = rows(brief, trial);
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let written = futures_util::future::join_all(rows.into_iter().map(|row| queue.insert(&app.pool, row))).await;
    assert!(written.iter().all(Result::is_ok));
    // now() is the statement's transaction time: one statement, one time.
    let times: HashSet<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT received_at FROM evidence WHERE id = ANY($1)")
            .bind(&ids)
            .fetch_all(&app.pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(times.len(), 1, "the four rows were written by separate statements");
}

#[tokio::test]
async fn a_row_that_cannot_be_written_fails_only_its_own_upload() {
    let app = spawn_app().await;
    let (brief, trial) = brief_and_trial(&app).await;
    let queue = Arc::new(GroupInsert::<TestEvidence>::default());
    let mut rows = rows(brief, trial);
    // The third row's brief does not exist (as when a brief is deleted while its upload waits).
    rows[2].brief = Uuid::now_v7().into();
    // The second row's trial does not exist (deleted while its upload waited).
    rows[1].trial = Uuid::now_v7().into();
    let ids: Vec<Uuid> = rows.iter().map(|r| r.id).collect();
    let written = futures_util::future::join_all(rows.into_iter().map(|row| queue.insert(&app.pool, row))).await;
    for (n, result) in written.iter().enumerate() {
        match (n, result) {
            (1, Err(AppError::NotFound("trial"))) => {}
            (1, other) => panic!("the row of a missing trial: {:?}", other.as_ref().map(|r| r.id)),
            (2, Err(AppError::NotFound("brief"))) => {}
            (2, other) => panic!("the row of a missing brief: {:?}", other.as_ref().map(|r| r.id)),
            (_, Ok(row)) => assert_eq!(row.id, ids[n], "answered with another row"),
            (_, Err(e)) => panic!("row {n} failed with its neighbour: {e}"),
        }
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM evidence WHERE id = ANY($1)")
        .bind(&ids)
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(stored, 2);
}
