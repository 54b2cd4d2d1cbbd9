//! The sign-in lockout. Each attempt is admitted (or refused) and written down as `pending` under
//! an advisory lock on its email and client *before* the password is checked, then settled as
//! `failed` or `ok`. Counting pending attempts as failures is what stops parallel guesses: forty
//! at once used to all read "4 failures so far" and all be checked.
//!
//! Limits are per (email, client) and per client, not per email alone: a per-email lock lets
//! anyone keep any account locked by guessing from afar, while the person signs in from their own
//! address. A client is the peer address (or the forwarded one behind a trusted proxy).

use sqlx::PgPool;
use uuid::Uuid;

/// Failed (or unsettled) sign-ins for one email from one client within the window.
pub const PAIR_LIMIT: i64 = 5;
/// Failed (or unsettled) sign-ins from one client, any email, within the window: password spraying.
pub const CLIENT_LIMIT: i64 = 20;
pub const WINDOW_MINUTES: i32 = 15;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admission {
    /// Go on and check the password; settle this attempt afterwards.
    Go(Uuid),
    /// Too many failures: refuse without checking the password.
    Locked,
}

pub async fn admit(pool: &PgPool, email: &str, client: &str) -> Result<Admission, sqlx::Error> {
    let mut tx = pool.begin().await?;
    // Always email first, then client: one order, so two attempts never wait on each other in a circle.
    sqlx::query!(
        "SELECT pg_advisory_xact_lock(hashtext('rentcheck.login.email:' || $1::text)), \
                pg_advisory_xact_lock(hashtext('rentcheck.login.client:' || $2::text))",
        email,
        client,
    )
    .execute(&mut *tx)
    .await?;
    let counts = sqlx::query!(
        r#"SELECT count(*) FILTER (WHERE email = $1) AS "pair!", count(*) AS "client!"
           FROM login_attempts
           WHERE client = $2 AND outcome <> 'ok' AND at > now() - make_interval(mins => $3)"#,
        email,
        client,
        WINDOW_MINUTES,
    )
    .fetch_one(&mut *tx)
    .await?;
    if counts.pair >= PAIR_LIMIT || counts.client >= CLIENT_LIMIT {
        tx.commit().await?;
        return Ok(Admission::Locked);
    }
    let id = Uuid::now_v7();
    sqlx::query!(
        "INSERT INTO login_attempts (id, email, client) VALUES ($1, $2, $3)",
        id,
        email,
        client,
    )
    .execute(&mut *tx)
    .await?;
    // Old attempts matter to no window; the index on `at` keeps this cheap.
    sqlx::query!("DELETE FROM login_attempts WHERE at < now() - interval '1 day'")
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(Admission::Go(id))
}

/// Marks an admitted attempt as failed or successful.
pub async fn settle(pool: &PgPool, attempt: Uuid, ok: bool) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE login_attempts SET outcome = $2 WHERE id = $1",
        attempt,
        if ok { "ok" } else { "failed" },
    )
    .execute(pool)
    .await?;
    Ok(())
}
