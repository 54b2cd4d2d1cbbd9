//! docs/operations.md's backup and restore: a dump restored into a fresh database reviews the same
//! brief to the same decision and inputs digest.

use crate::common;

use std::process::Command;

use common::{admin_url, spawn_app};
use rentcheck::{config::AppConfig, demo, review::service, state::AppState};
use sqlx::{postgres::PgPoolOptions, Connection, Executor, PgConnection};

#[tokio::test]
async fn a_restored_dump_reviews_to_the_same_decision_and_digest() {
    let app = spawn_app().await;
    let state = AppState::new(app.pool.clone(), AppConfig::default(), app.keys.clone());
    let loaded = demo::load(&state).await.unwrap();
    let before = service::review(&state, loaded.brief_id).await.unwrap();

    let dir = tempfile::tempdir().unwrap();
    let dump = dir.path().join("rentcheck.dump");
    let out = Command::new("pg_dump")
        .args(["--format=custom", "--file"])
        .arg(&dump)
        .arg(&app.database_url)
        .output()
        .expect("pg_dump is installed with PostgreSQL");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let restored = format!("rentcheck_restore_{}", uuid::Uuid::new_v4().simple());
    let mut admin = PgConnection::connect(&admin_url()).await.unwrap();
    admin
        .execute(format!("CREATE DATABASE {restored}").as_str())
        .await
        .unwrap();
    let restored_url = format!("{}/{restored}", admin_url().rsplit_once('/').unwrap().0);
    let out = Command::new("pg_restore")
        .args(["--no-owner", "--exit-on-error", "--dbname"])
        .arg(&restored_url)
        .arg(&dump)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));

    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(&restored_url)
        .await
        .unwrap();
    let restored_state = AppState::new(pool.clone(), AppConfig::default(), app.keys.clone());
    let after = service::review(&restored_state, loaded.brief_id).await.unwrap();
    assert_eq!(after.decision.decision, before.decision.decision);
    assert_eq!(after.decision.inputs_digest, before.decision.inputs_digest);
    let raw: Vec<u8> = sqlx::query_scalar("SELECT raw FROM evidence ORDER BY id LIMIT 1")
        .fetch_one(&pool)
        .await
        .unwrap();
    let original: Vec<u8> = sqlx::query_scalar("SELECT raw FROM evidence ORDER BY id LIMIT 1")
        .fetch_one(&app.pool)
        .await
        .unwrap();
    assert_eq!(raw, original, "raw evidence bytes survive exactly");
    pool.close().await;
    admin
        .execute(format!("DROP DATABASE {restored} WITH (FORCE)").as_str())
        .await
        .unwrap();
}
