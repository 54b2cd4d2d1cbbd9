//! The application state every handler receives.

use std::sync::Arc;

use sqlx::PgPool;

use crate::{auth::token::TokenKeys, config::AppConfig, http::metrics::Metrics};

#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub config: Arc<AppConfig>,
    pub keys: TokenKeys,
    /// The service's own Prometheus metrics (`GET /metrics`), one registry per app.
    pub metrics: Arc<Metrics>,
}

impl AppState {
    pub fn new(pool: PgPool, config: AppConfig, keys: TokenKeys) -> Self {
        Self {
            pool,
            config: Arc::new(config),
            keys,
            metrics: Arc::new(Metrics::new()),
        }
    }
}
