//! Sign-in throttling: per account across addresses, per address across accounts, and browsers the
//! person signed in with before ("device cookies", OWASP's answer to lockouts that an attacker can
//! aim at anyone).
//!
//! - **Per account.** Failed sign-ins of an account from browsers it has not signed in with are
//!   counted whatever their address, until a sign-in succeeds. After [`FREE_FAILURES`] each next
//!   try waits twice as long as the one before (1 s, 2 s, 4 s … 64 s) and at [`LOCK_AFTER`] the
//!   account is locked for such browsers until an admin unlocks it (users page, API or CLI). The
//!   sign-in form says so, and the person is told at their next sign-in. Forty addresses times five
//!   guesses are now ten guesses, not two hundred.
//! - **Per address.** [`CLIENT_LIMIT`] failures from one address (any account) in
//!   [`WINDOW_MINUTES`] refuse further tries from that address by browsers that never signed in:
//!   password spraying stops, and nobody behind the same office NAT who signed in before is locked
//!   out.
//! - **Known browsers.** A successful sign-in leaves an HttpOnly cookie ([`DEVICE_COOKIE`], path
//!   `/login`) naming that browser for that account. With it, the account's lock, its delays and
//!   the address limit do not apply; [`DEVICE_LIMIT`] failures in a row with it, and it is
//!   forgotten. The cookie is random; only its SHA-256 is stored.
//!
//! Each attempt is admitted (or refused) *before* its password is checked, under an advisory lock
//! on its email and address, and counted as a failure until it is settled: parallel guesses cannot
//! pass a limit. The same counts apply to unknown emails, so the answers never tell whether an
//! account exists. The current-password check on the account page and the API takes the same
//! throttle (as a browser that never signed in).

use chrono::{DateTime, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use crate::secrets::{random_token, sha256};

/// Failures of an account (from unknown browsers) before each next try has to wait.
pub const FREE_FAILURES: i32 = 3;
/// Failures of an account (from unknown browsers) that lock it until an admin unlocks it.
pub const LOCK_AFTER: i32 = 10;
/// Failed (or unsettled) sign-ins from one address, any account, within the window.
pub const CLIENT_LIMIT: i64 = 20;
pub const WINDOW_MINUTES: i32 = 15;
/// Failures in a row through one known browser before it is forgotten.
pub const DEVICE_LIMIT: i32 = 5;
/// Days without a failure after which an account's failures are forgotten (not its lock).
pub const FORGET_DAYS: i32 = 30;
/// The cookie naming a browser that signed in to an account.
pub const DEVICE_COOKIE: &str = "rentcheck_device";
/// How long a known browser is remembered after it last signed in.
pub const DEVICE_DAYS: i64 = 365;

/// How long the next try of an account with `failures` waits after the last failure: nothing
/// before [`FREE_FAILURES`], then 1 s, doubling each time.
pub fn delay_after(failures: i32) -> std::time::Duration {
    if failures < FREE_FAILURES {
        return std::time::Duration::ZERO;
    }
    let doublings = u32::try_from(failures - FREE_FAILURES).unwrap_or(0).min(16);
    std::time::Duration::from_secs(1u64 << doublings)
}

/// An admitted attempt, to settle once its password has been checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Attempt {
    /// From a browser that never signed in to this account: counted on the account and address.
    Unknown { id: Uuid, email: String },
    /// Through a browser that signed in to this account before (its cookie's hash).
    Known { hash: Vec<u8>, email: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Go on and check the password; settle this attempt afterwards.
    Go(Attempt),
    /// The account failed too often lately: the next try may come after this wait.
    Wait(std::time::Duration),
    /// The account is locked for browsers that never signed in to it, until an admin unlocks it.
    Locked,
    /// This address failed too often lately (any account).
    AddressLimited,
}

impl Admission {
    /// A name for the audit log.
    pub fn reason(&self) -> &'static str {
        match self {
            Admission::Go(_) => "admitted",
            Admission::Wait(_) => "account-delay",
            Admission::Locked => "account-locked",
            Admission::AddressLimited => "address-limit",
        }
    }

    /// What the person at the form reads. The same for every email, known or not.
    pub fn message(&self) -> String {
        match self {
            Admission::Go(_) => String::new(),
            Admission::Wait(wait) => format!(
                "Too many failed sign-ins for this account. Wait {} seconds, then try again.",
                wait.as_secs().max(1)
            ),
            Admission::Locked => "This account is locked after too many failed sign-ins. Sign in from a browser you \
                                  have signed in with before, or ask an admin to unlock it."
                .into(),
            Admission::AddressLimited => format!(
                "Too many failed sign-ins from your network. Try again in {WINDOW_MINUTES} minutes, or sign in from a \
                 browser you have signed in with before."
            ),
        }
    }
}

/// Admits or refuses an attempt for `email` from `client`, with the browser's known-browser
/// cookie if it sent one.
// Long, and reads better whole: every count and the decision run in one transaction under the
// email's and the address's locks.
pub async fn admit(pool: &PgPool, email: &str, client: &str, device: Option<&str>) -> Result<Admission, sqlx::Error> {
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
    if let Some(cookie) = device.filter(|c| !c.is_empty()) {
        let hash = sha256(cookie.as_bytes());
        let known = sqlx::query!(
            "UPDATE sign_in_devices SET failures = failures + 1, last_used_at = now() \
             WHERE id_hash = $1 AND email = $2 AND failures < $3 \
               AND last_used_at > now() - make_interval(days => $4) RETURNING id_hash",
            &hash,
            email,
            DEVICE_LIMIT,
            i32::try_from(DEVICE_DAYS).unwrap_or(i32::MAX),
        )
        .fetch_optional(&mut *tx)
        .await?;
        if known.is_some() {
            tx.commit().await?;
            return Ok(Admission::Go(Attempt::Known {
                hash,
                email: email.to_owned(),
            }));
        }
    }
    let account = sqlx::query!(
        "SELECT failures, last_failure_at, locked_at FROM sign_in_accounts WHERE email = $1",
        email,
    )
    .fetch_optional(&mut *tx)
    .await?;
    if let Some(a) = &account {
        if a.locked_at.is_some() {
            tx.commit().await?;
            return Ok(Admission::Locked);
        }
        let wait = delay_after(a.failures);
        if let Some(last) = a.last_failure_at {
            let ready = last + chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::zero());
            let now = Utc::now();
            if ready > now {
                tx.commit().await?;
                return Ok(Admission::Wait((ready - now).to_std().unwrap_or(wait)));
            }
        }
    }
    let address_failures = sqlx::query_scalar!(
        r#"SELECT count(*) AS "n!" FROM login_attempts
           WHERE client = $1 AND outcome <> 'ok' AND at > now() - make_interval(mins => $2)"#,
        client,
        WINDOW_MINUTES,
    )
    .fetch_one(&mut *tx)
    .await?;
    if address_failures >= CLIENT_LIMIT {
        tx.commit().await?;
        return Ok(Admission::AddressLimited);
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
    // Counted as a failure until settled, so attempts in flight count against the delay.
    sqlx::query!(
        "INSERT INTO sign_in_accounts (email, failures, last_failure_at, last_failure_client) \
         VALUES ($1, 1, now(), $2) \
         ON CONFLICT (email) DO UPDATE SET failures = sign_in_accounts.failures + 1, \
             last_failure_at = now(), last_failure_client = EXCLUDED.last_failure_client",
        email,
        client,
    )
    .execute(&mut *tx)
    .await?;
    // Old attempts matter to no window; the index on `at` keeps this cheap. An account's failures
    // are forgotten after FORGET_DAYS without one (a lock is kept until an admin lifts it), so
    // guessed unknown emails do not pile up.
    sqlx::query!("DELETE FROM login_attempts WHERE at < now() - interval '1 day'")
        .execute(&mut *tx)
        .await?;
    sqlx::query!(
        "DELETE FROM sign_in_accounts WHERE locked_at IS NULL AND last_failure_at < now() - make_interval(days => $1)",
        FORGET_DAYS,
    )
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(Admission::Go(Attempt::Unknown {
        id,
        email: email.to_owned(),
    }))
}

/// What settling an attempt did.
#[derive(Debug, Clone, Default)]
pub struct Settled {
    /// This failure locked the account.
    pub locked_now: bool,
    /// After a success, when asked: a new known-browser cookie value to hand the browser.
    pub device_cookie: Option<String>,
    /// After a success: failed sign-ins of the account since its last successful one.
    pub failures_before: i32,
    /// After a success: when the account was locked, if it is (it stays so until an admin unlocks it).
    pub locked_at: Option<DateTime<Utc>>,
}

/// Marks an admitted attempt failed or successful. A success clears the account's failures
/// (not its lock: only an admin lifts that) and, with `remember`, names this browser as known.
// Long, and reads better whole: the attempt's result, the account's failures and the known browser
// are written in one transaction.
pub async fn settle(pool: &PgPool, attempt: Attempt, ok: bool, remember: bool) -> Result<Settled, sqlx::Error> {
    let mut tx = pool.begin().await?;
    let mut settled = Settled::default();
    let email = match &attempt {
        Attempt::Unknown { id, email } => {
            sqlx::query!(
                "UPDATE login_attempts SET outcome = $2 WHERE id = $1",
                id,
                if ok { "ok" } else { "failed" },
            )
            .execute(&mut *tx)
            .await?;
            email.clone()
        }
        Attempt::Known { hash, email } => {
            if ok {
                // A known browser's cookie is replaced at each sign-in, so a copied one ages out.
                sqlx::query!("DELETE FROM sign_in_devices WHERE id_hash = $1", hash)
                    .execute(&mut *tx)
                    .await?;
            } else {
                sqlx::query!(
                    "DELETE FROM sign_in_devices WHERE id_hash = $1 AND failures >= $2",
                    hash,
                    DEVICE_LIMIT,
                )
                .execute(&mut *tx)
                .await?;
            }
            email.clone()
        }
    };
    if ok {
        let before = sqlx::query!(
            "SELECT failures, locked_at FROM sign_in_accounts WHERE email = $1 FOR UPDATE",
            email,
        )
        .fetch_optional(&mut *tx)
        .await?;
        if let Some(b) = before {
            // This attempt's own provisional failure is not one.
            let own = i32::from(matches!(attempt, Attempt::Unknown { .. }));
            settled.failures_before = (b.failures - own).max(0);
            settled.locked_at = b.locked_at;
            // Nothing to remember of an account that signed in and is not locked.
            sqlx::query!(
                "DELETE FROM sign_in_accounts WHERE email = $1 AND locked_at IS NULL",
                email,
            )
            .execute(&mut *tx)
            .await?;
        }
        if remember {
            let cookie = random_token();
            sqlx::query!(
                "INSERT INTO sign_in_devices (id_hash, email) VALUES ($1, $2)",
                sha256(cookie.as_bytes()),
                email,
            )
            .execute(&mut *tx)
            .await?;
            sqlx::query!(
                "DELETE FROM sign_in_devices WHERE last_used_at < now() - make_interval(days => $1)",
                i32::try_from(DEVICE_DAYS).unwrap_or(i32::MAX),
            )
            .execute(&mut *tx)
            .await?;
            settled.device_cookie = Some(cookie);
        }
    } else if matches!(attempt, Attempt::Unknown { .. }) {
        let locked = sqlx::query!(
            "UPDATE sign_in_accounts SET locked_at = now() \
             WHERE email = $1 AND locked_at IS NULL AND failures >= $2 RETURNING email",
            email,
            LOCK_AFTER,
        )
        .fetch_optional(&mut *tx)
        .await?;
        settled.locked_now = locked.is_some();
    }
    tx.commit().await?;
    Ok(settled)
}

/// An account's sign-in state, as its person and admins are shown it.
#[derive(Debug, Clone)]
pub struct AccountState {
    pub failures: i32,
    pub last_failure_at: Option<DateTime<Utc>>,
    pub last_failure_client: Option<String>,
    pub locked_at: Option<DateTime<Utc>>,
}

pub async fn state(pool: &PgPool, email: &str) -> Result<Option<AccountState>, sqlx::Error> {
    sqlx::query_as!(
        AccountState,
        "SELECT failures, last_failure_at, last_failure_client, locked_at FROM sign_in_accounts WHERE email = $1",
        email,
    )
    .fetch_optional(pool)
    .await
}

/// The emails of locked accounts, with when they were locked.
pub async fn locked(pool: &PgPool) -> Result<Vec<(String, DateTime<Utc>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT email, locked_at AS "locked_at!" FROM sign_in_accounts WHERE locked_at IS NOT NULL ORDER BY email"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows.into_iter().map(|r| (r.email, r.locked_at)).collect())
}

/// Lifts an account's lock and forgets its failures; false when it had neither.
pub async fn unlock(pool: &PgPool, email: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query!("DELETE FROM sign_in_accounts WHERE email = $1", email)
        .execute(pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_delay_doubles_after_the_free_failures_and_the_lock_comes_within_two_minutes() {
        assert_eq!(delay_after(0), std::time::Duration::ZERO);
        assert_eq!(delay_after(FREE_FAILURES - 1), std::time::Duration::ZERO);
        assert_eq!(delay_after(FREE_FAILURES).as_secs(), 1);
        assert_eq!(delay_after(FREE_FAILURES + 1).as_secs(), 2);
        assert_eq!(delay_after(FREE_FAILURES + 2).as_secs(), 4);
        let to_lock: u64 = (0..LOCK_AFTER).map(|f| delay_after(f).as_secs()).sum();
        assert_eq!(
            to_lock, 127,
            "an attacker waits about two minutes for ten guesses, then none"
        );
        assert_eq!(delay_after(i32::MAX).as_secs(), 1 << 16, "never overflows");
    }
}
