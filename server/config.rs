//! Runtime configuration, read from environment variables (and the matching CLI flags).
//! Every setting has a default that works on a developer's laptop. Data only: what is built from a
//! setting (the pool, the evidence store, the signing keys) lives in `AppState`.

use std::{net::SocketAddr, path::PathBuf};

use clap::Args;

use crate::secrets::Secret;

/// Settings shared by every subcommand that touches the database.
#[derive(Debug, Clone, Args)]
pub struct DbConfig {
    /// PostgreSQL connection URL. When unset, rentcheck runs its own private cluster in the data dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<Secret>,

    /// Where the private PostgreSQL cluster and generated secrets live.
    #[arg(long, env = "RENTCHECK_DATA_DIR", default_value = "./var")]
    pub data_dir: PathBuf,

    /// Directory holding initdb and pg_ctl for the private cluster. When unset, PATH and
    /// /usr/lib/postgresql/*/bin are searched.
    #[arg(long, env = "RENTCHECK_PG_BIN_DIR")]
    pub pg_bin_dir: Option<PathBuf>,

    /// Maximum connections in the database pool.
    #[arg(long, env = "RENTCHECK_DB_POOL", default_value_t = 10)]
    pub db_pool_size: u32,
}

/// Settings for `rentcheck serve`.
#[derive(Debug, Clone, Args)]
pub struct ServeConfig {
    /// Address to listen on.
    #[arg(long, env = "RENTCHECK_ADDR", default_value = "127.0.0.1:8080")]
    pub addr: SocketAddr,

    /// Largest accepted evidence upload, in bytes.
    #[arg(long, env = "RENTCHECK_MAX_UPLOAD", default_value_t = 16 * 1024 * 1024)]
    pub max_upload: usize,

    /// Mark cookies `Secure` (set when rentcheck is served over HTTPS, e.g. behind a proxy).
    #[arg(long, env = "RENTCHECK_SECURE_COOKIES", default_value_t = false)]
    pub secure_cookies: bool,

    /// Seconds a request may take before it is answered 408/503.
    #[arg(long, env = "RENTCHECK_REQUEST_TIMEOUT", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// Where raw evidence bytes go: unset keeps them in PostgreSQL; `s3://bucket/prefix` (AWS_*
    /// variables for credentials, region and endpoint) or `file:///dir` keeps them in an object
    /// store and the row keeps the object's name (docs/operations.md).
    #[arg(long, env = "RENTCHECK_EVIDENCE_STORE")]
    pub evidence_store: Option<String>,
}

/// The token signing secret, shared by `serve` and `token mint`.
#[derive(Debug, Clone, Args)]
pub struct TokenConfig {
    /// HS256 secret for bearer tokens (32+ characters). When unset, one is generated on first
    /// start and kept in `<data dir>/jwt-secret` with mode 0600.
    #[arg(long, env = "RENTCHECK_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<Secret>,
}

/// What handlers need from the configuration at run time.
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub max_upload: usize,
    pub request_timeout_secs: u64,
    pub secure_cookies: bool,
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            max_upload: 16 * 1024 * 1024,
            request_timeout_secs: 30,
            secure_cookies: false,
        }
    }
}

impl From<&ServeConfig> for AppConfig {
    fn from(c: &ServeConfig) -> Self {
        Self {
            max_upload: c.max_upload,
            request_timeout_secs: c.request_timeout_secs,
            secure_cookies: c.secure_cookies,
        }
    }
}
