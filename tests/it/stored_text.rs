//! Enumerations kept as text (`db::StoredText`): every value of each one is written and read back
//! through PostgreSQL by sqlx, its spellings are exactly those the column's CHECK allows, and a
//! stored value that no variant spells makes the load fail, never turns into a default.

use std::fmt::Debug;

use crate::common::{self, spawn_app};
use rentcheck::{
    briefs::model::{AllocationBoundary, CostUnit, DataBoundary},
    db::StoredText,
    ledger::Category,
    review::decision::Verdict,
    sizing::{Precision, WorkloadKind},
    trials::model::{Billing, TrialStatus},
    validation::TextEnum,
};
use serde_json::Value;
use sqlx::PgPool;

/// Writes every value of `T` as a bind and reads it back; checks its spellings are the ones
/// `constraint` (the column's CHECK) allows, no more and no fewer; and that text no variant spells
/// is a decode error naming it.
async fn round_trip<T>(pool: &PgPool, constraint: &str)
where
    T: TextEnum + PartialEq + Debug + Send + Sync + Unpin,
{
    for &value in T::variants() {
        let (text, back): (String, StoredText<T>) = sqlx::query_as("SELECT $1::text, $1::text")
            .bind(StoredText(value))
            .fetch_one(pool)
            .await
            .unwrap();
        assert_eq!(text, value.text(), "written as its spelling");
        assert_eq!(back.into_inner(), value, "read back as itself");
    }
    let check: String = sqlx::query_scalar("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1")
        .bind(constraint)
        .fetch_one(pool)
        .await
        .unwrap();
    let allowed: Vec<&str> = check.split('\'').skip(1).step_by(2).collect();
    let mut spelled: Vec<&str> = T::variants().iter().map(|v| v.text()).collect();
    let mut allowed_sorted = allowed.clone();
    allowed_sorted.sort_unstable();
    spelled.sort_unstable();
    assert_eq!(allowed_sorted, spelled, "{constraint}: {check}");

    let err = sqlx::query_scalar::<_, StoredText<T>>("SELECT 'no-such-value'::text")
        .fetch_one(pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""no-such-value" is no "#), "{constraint}: {err}");
}

#[tokio::test]
async fn every_stored_enumeration_round_trips_through_postgresql() {
    let (_db, pool) = common::migrated_database(1).await;
    round_trip::<WorkloadKind>(&pool, "briefs_workload_kind_check").await;
    round_trip::<Precision>(&pool, "briefs_precision_check").await;
    round_trip::<DataBoundary>(&pool, "briefs_data_boundary_check").await;
    round_trip::<AllocationBoundary>(&pool, "briefs_allocation_boundary_check").await;
    round_trip::<CostUnit>(&pool, "briefs_cost_unit_check").await;
    round_trip::<Billing>(&pool, "trials_billing_check").await;
    round_trip::<TrialStatus>(&pool, "trials_status_check").await;
    round_trip::<Verdict>(&pool, "approvals_decision_check").await;
    round_trip::<Category>(&pool, "ledger_lines_category_check").await;
}

/// Only a hand-edited database holds such a value: the column's CHECK refuses it otherwise.
async fn store_unknown(pool: &PgPool, table: &str, column: &str, value: &str) {
    sqlx::query(&format!("ALTER TABLE {table} DROP CONSTRAINT {table}_{column}_check"))
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(&format!("UPDATE {table} SET {column} = $1"))
        .bind(value)
        .execute(pool)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_brief_whose_stored_workload_kind_is_unknown_fails_to_load() {
    let app = spawn_app().await;
    let id = &app.brief_id().await;
    assert_eq!(app.get(&format!("/api/v1/briefs/{id}")).await.status(), 200);
    store_unknown(&app.pool, "briefs", "workload_kind", "quantum").await;

    let err = sqlx::query_scalar::<_, StoredText<WorkloadKind>>("SELECT workload_kind FROM briefs")
        .fetch_one(&app.pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""quantum" is no WorkloadKind"#), "{err}");
    let res = app.get(&format!("/api/v1/briefs/{id}")).await;
    assert_eq!(res.status(), 500);
    let body: Value = res.json().await.unwrap();
    assert!(
        !body.to_string().contains("realtime-inference"),
        "no default kind: {body}"
    );
}

#[tokio::test]
async fn a_trial_whose_stored_billing_is_unknown_fails_to_load() {
    let app = spawn_app().await;
    let id = &app.brief_id().await;
    assert_eq!(app.get(&format!("/api/v1/briefs/{id}/trials")).await.status(), 200);
    store_unknown(&app.pool, "trials", "billing", "barter").await;

    let err = sqlx::query_scalar::<_, StoredText<Billing>>("SELECT billing FROM trials")
        .fetch_one(&app.pool)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains(r#""barter" is no Billing"#), "{err}");
    let res = app.get(&format!("/api/v1/briefs/{id}/trials")).await;
    assert_eq!(res.status(), 500);
    let body: Value = res.json().await.unwrap();
    assert!(!body.to_string().contains("on-demand"), "no default billing: {body}");
}
