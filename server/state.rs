//! The application state every handler receives.

use std::{
    any::{Any, TypeId},
    collections::HashMap,
    sync::{Arc, Mutex, PoisonError},
};

use sqlx::PgPool;

use crate::{
    audit::RefusalLimiter, config::AppConfig, evidence_store::EvidenceStore, secrets::TokenKeys, telemetry::Metrics,
    versioned_cache::VersionedCache,
};

/// Review answers kept per process: at most this many briefs and bytes (`review::answer::review_body`).
const REVIEW_CACHE_ENTRIES: usize = 4096;
const REVIEW_CACHE_BYTES: usize = 32 << 20;
/// A brief whose review JSON is read by several requests at once while it is written to is
/// computed again at most once per this interval; readers meanwhile get the answer before, marked
/// `refreshing` (`review::answer::review_body`).
const REVIEW_BUSY_INTERVAL: std::time::Duration = std::time::Duration::from_secs(1);

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub config: Arc<AppConfig>,
    pub keys: TokenKeys,
    /// The service's own Prometheus metrics (`GET /metrics`), one registry per app.
    pub metrics: Arc<Metrics>,
    /// Where raw evidence bytes are kept (`RENTCHECK_EVIDENCE_STORE`; the database by default).
    pub evidence_store: EvidenceStore,
    /// Review JSON already computed, by brief and the count of its committed changes.
    pub review_cache: Arc<VersionedCache>,
    /// Keeps a flood of refusals (throttled sign-ins, forged tokens) from flooding the audit log.
    pub refusals: Arc<RefusalLimiter>,
    /// What a domain keeps per app for itself (the evidence writer's queue, the trials uploads go to).
    pub slots: Arc<DomainSlots>,
}

/// One value of each type per app, made on first use: how a domain keeps a per-app value of its
/// own type in the state, which sits below the domains and cannot name their types.
#[derive(Default)]
pub struct DomainSlots(Mutex<HashMap<TypeId, Arc<dyn Any + Send + Sync>>>);

impl DomainSlots {
    pub fn get<T: Default + Send + Sync + 'static>(&self) -> Arc<T> {
        let mut slots = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let slot = slots
            .entry(TypeId::of::<T>())
            .or_insert_with(|| Arc::new(T::default()))
            .clone();
        // Keyed by the type's own id, so the value is always a `T`.
        slot.downcast::<T>()
            .unwrap_or_else(|_| unreachable!("a slot holds the type it is keyed by"))
    }
}

impl AppState {
    /// A state that keeps raw evidence in the database; see [`AppState::with_evidence_store`].
    pub fn new(pool: PgPool, config: AppConfig, keys: TokenKeys) -> Self {
        Self {
            pool,
            config: Arc::new(config),
            keys,
            metrics: Arc::new(Metrics::new()),
            evidence_store: EvidenceStore::Database,
            review_cache: Arc::new(VersionedCache::new(
                REVIEW_CACHE_ENTRIES,
                REVIEW_CACHE_BYTES,
                REVIEW_BUSY_INTERVAL,
            )),
            refusals: Arc::new(RefusalLimiter::default()),
            slots: Arc::new(DomainSlots::default()),
        }
    }

    pub fn with_evidence_store(mut self, store: EvidenceStore) -> Self {
        self.evidence_store = store;
        self
    }
}
