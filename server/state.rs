//! The application state every handler receives.

use std::sync::Arc;

use sqlx::PgPool;

use crate::{config::AppConfig, evidence_store::EvidenceStore, secrets::TokenKeys, telemetry::Metrics};

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub config: Arc<AppConfig>,
    pub keys: TokenKeys,
    /// The service's own Prometheus metrics (`GET /metrics`), one registry per app.
    pub metrics: Arc<Metrics>,
    /// Where raw evidence bytes are kept (`RENTCHECK_EVIDENCE_STORE`; the database by default).
    pub evidence_store: EvidenceStore,
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
        }
    }

    pub fn with_evidence_store(mut self, store: EvidenceStore) -> Self {
        self.evidence_store = store;
        self
    }
}
