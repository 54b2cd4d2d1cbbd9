//! For the benchmark examples: a throwaway, migrated database on the PostgreSQL at
//! `TEST_DATABASE_URL` (default `postgres://postgres@127.0.0.1:5432/postgres`), dropped afterwards
//! whether the benchmark succeeded or not.

use std::{future::Future, str::FromStr};

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    Connection, Executor, PgConnection, PgPool,
};

/// Runs `bench` over a pool of `max_connections` to a fresh migrated database, then drops it.
pub async fn with_scratch_database<F, Fut>(max_connections: u32, bench: F) -> anyhow::Result<()>
where
    F: FnOnce(PgPool) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let admin_url =
        std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let admin = PgConnectOptions::from_str(&admin_url)?;
    let db_name = format!("rentcheck_bench_{}", uuid::Uuid::new_v4().simple());
    let mut conn = PgConnection::connect_with(&admin).await?;
    conn.execute(format!("CREATE DATABASE {db_name}").as_str()).await?;
    let result = async {
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .connect_with(admin.clone().database(&db_name))
            .await?;
        rentcheck::db::migrate(&pool).await?;
        bench(pool).await
    }
    .await;
    conn.execute(format!("DROP DATABASE IF EXISTS {db_name} WITH (FORCE)").as_str())
        .await?;
    result
}
