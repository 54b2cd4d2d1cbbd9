//! Token rows kept for a second, so a busy agent's uploads do not each read `api_tokens`.
//!
//! A row read for a request is reused by the requests that follow for at most [`FRESH_FOR`]; the
//! checks on it (revoked, expired, claims, the person's role and disabled mark) run on every
//! request as before. A change that can refuse a token (a revoke, a role lowered, an account
//! disabled or deleted, a brief or trial deleted with its tokens) fires a statement trigger that
//! notifies [`CHANNEL`]; each server listens on it and forgets every row it keeps when told, so such
//! a change made anywhere (another server, the CLI) is refused within milliseconds. A change made
//! through this server also forgets them itself before it answers (`token::revoke_audited`,
//! `users::change` and `users::replace_password` take the kept rows), so the next request of
//! whoever made it is refused, whatever the notification's delay.
//! The second bounds what a notification that never arrives could leave (a connection that died
//! without saying so); a connection seen to drop stops all keeping until a new one listens, and
//! meanwhile every request reads its row.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicBool, AtomicU64, Ordering},
        Arc, Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use sqlx::{
    postgres::{PgListener, PgPoolOptions},
    PgPool,
};

use crate::ids::TokenId;

/// The channel the `auth_changed` triggers notify (migration `…_auth_changed_notify.sql`).
pub const CHANNEL: &str = "rentcheck_auth_changed";
/// How long a row read from the database is reused.
pub const FRESH_FOR: Duration = Duration::from_secs(1);
/// Rows kept at most; past it every row is forgotten (each is one read away).
const MAX_ROWS: usize = 10_000;

/// The rows kept, by `jti`, and whether they can be trusted (the listener is connected).
pub struct TokenCache<T> {
    rows: Mutex<HashMap<TokenId, (Instant, T)>>,
    /// Bumped by every forget: a row read before a change is not kept after it.
    generation: AtomicU64,
    listening: AtomicBool,
}

impl<T> Default for TokenCache<T> {
    fn default() -> Self {
        Self {
            rows: Mutex::new(HashMap::new()),
            generation: AtomicU64::new(0),
            listening: AtomicBool::new(false),
        }
    }
}

impl<T: Clone> TokenCache<T> {
    fn rows(&self) -> std::sync::MutexGuard<'_, HashMap<TokenId, (Instant, T)>> {
        self.rows.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The row of `jti` read within [`FRESH_FOR`], while changes are being listened for.
    pub fn get(&self, jti: TokenId) -> Option<T> {
        if !self.listening.load(Ordering::Acquire) {
            return None;
        }
        let rows = self.rows();
        let (read_at, row) = rows.get(&jti)?;
        (read_at.elapsed() < FRESH_FOR).then(|| row.clone())
    }

    /// The generation to pass to [`TokenCache::keep`]: taken before the row is read.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Keeps `row`, read at `read_at` after [`TokenCache::generation`] said `generation`, unless
    /// something was forgotten since (the row may predate that change) or nobody is listening.
    pub fn keep(&self, jti: TokenId, row: T, read_at: Instant, generation: u64) {
        if !self.listening.load(Ordering::Acquire) {
            return;
        }
        let mut rows = self.rows();
        // Checked under the lock that `forget_all` takes too: a forget either came before (and
        // this row is dropped) or comes after (and drops it).
        if self.generation.load(Ordering::Acquire) != generation {
            return;
        }
        if rows.len() >= MAX_ROWS {
            rows.clear();
        }
        rows.insert(jti, (read_at, row));
    }

    /// Forgets every row (a token, a person or a brief changed somewhere).
    pub fn forget_all(&self) {
        let mut rows = self.rows();
        self.generation.fetch_add(1, Ordering::AcqRel);
        rows.clear();
    }

    /// Changes are listened for from now on: rows may be kept.
    fn start_trusting(&self) {
        self.forget_all();
        self.listening.store(true, Ordering::Release);
    }

    /// The listener is gone: a change could go unheard, so nothing is kept until it is back.
    fn stop_trusting(&self) {
        self.listening.store(false, Ordering::Release);
        self.forget_all();
    }
}

/// Listens on [`CHANNEL`] over a connection of its own (not one of the pool's, which requests
/// need) and forgets `cache`'s rows on every notification; reconnects after a second when the
/// connection is lost, keeping nothing meanwhile.
pub fn spawn_listener<T: Clone + Send + 'static>(
    pool: &PgPool,
    cache: Arc<TokenCache<T>>,
) -> tokio::task::JoinHandle<()> {
    let options = pool.connect_options().as_ref().clone();
    tokio::spawn(async move {
        loop {
            if let Err(e) = listen(&options, &cache).await {
                tracing::debug!(error = %e, "token change listener reconnects");
            }
            cache.stop_trusting();
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    })
}

async fn listen<T: Clone>(
    options: &sqlx::postgres::PgConnectOptions,
    cache: &TokenCache<T>,
) -> Result<(), sqlx::Error> {
    let own = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(options.clone())
        .await?;
    let mut listener = PgListener::connect_with(&own).await?;
    listener.ignore_pool_close_event(true);
    // A lost connection ends this listener (then a new one is made), rather than reconnecting
    // inside `try_recv`, so the cache is distrusted for the whole gap.
    listener.eager_reconnect(false);
    listener.listen(CHANNEL).await?;
    cache.start_trusting();
    while listener.try_recv().await?.is_some() {
        cache.forget_all();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn listening() -> TokenCache<u32> {
        let cache = TokenCache::default();
        cache.start_trusting();
        cache
    }

    #[test]
    fn a_row_is_reused_within_the_second_and_not_after() {
        let cache = listening();
        let jti = TokenId::from(Uuid::now_v7());
        cache.keep(jti, 7, Instant::now(), cache.generation());
        assert_eq!(cache.get(jti), Some(7));
        let other = TokenId::from(Uuid::now_v7());
        cache.keep(other, 8, Instant::now() - FRESH_FOR, cache.generation());
        assert_eq!(cache.get(other), None, "a row older than a second is read again");
    }

    #[test]
    fn a_row_read_before_a_change_is_not_kept_after_it() {
        let cache = listening();
        let jti = TokenId::from(Uuid::now_v7());
        let generation = cache.generation();
        // The change is heard while the row is being read.
        cache.forget_all();
        cache.keep(jti, 7, Instant::now(), generation);
        assert_eq!(cache.get(jti), None);
    }

    #[test]
    fn nothing_is_kept_or_reused_while_nobody_listens() {
        let cache: TokenCache<u32> = TokenCache::default();
        let jti = TokenId::from(Uuid::now_v7());
        cache.keep(jti, 7, Instant::now(), cache.generation());
        assert_eq!(cache.get(jti), None);
        let cache = listening();
        cache.keep(jti, 7, Instant::now(), cache.generation());
        cache.stop_trusting();
        assert_eq!(cache.get(jti), None, "a lost listener distrusts what was kept");
    }

    #[test]
    fn a_change_forgets_every_row() {
        let cache = listening();
        let (a, b) = (TokenId::from(Uuid::now_v7()), TokenId::from(Uuid::now_v7()));
        cache.keep(a, 1, Instant::now(), cache.generation());
        cache.keep(b, 2, Instant::now(), cache.generation());
        cache.forget_all();
        assert_eq!((cache.get(a), cache.get(b)), (None, None));
    }
}
