//! Runtime configuration, read from environment variables (and the matching CLI flags).
//! Every setting has a default that works on a developer's laptop. Data only: what is built from a
//! setting (the pool, the evidence store, the signing keys) lives in `AppState`.

use std::{
    net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr},
    path::PathBuf,
};

use clap::Args;

use crate::{auth::session::SessionLimits, secrets::Secret};

/// Settings shared by every subcommand that touches the database.
#[derive(Debug, Clone, Args)]
pub struct DbConfig {
    /// PostgreSQL connection URL. When unset, rentcheck runs its own private cluster in the data dir.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<Secret>,

    /// Where the private PostgreSQL cluster and generated secrets live. The default does not
    /// depend on the working directory, so a command run from anywhere finds the server's cluster.
    #[arg(long, env = "RENTCHECK_DATA_DIR", default_value_os_t = default_data_dir())]
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

    /// Seconds a request may take before it is answered 503 (`timed-out`, with `Retry-After`).
    #[arg(long, env = "RENTCHECK_REQUEST_TIMEOUT", default_value_t = 30)]
    pub request_timeout_secs: u64,

    /// The address people and agents reach this server at, for printed and displayed URLs (the
    /// token page's curl line). Default: http:// and the listen address, with loopback for 0.0.0.0.
    #[arg(long, env = "RENTCHECK_PUBLIC_URL")]
    pub public_url: Option<String>,

    /// Where raw evidence bytes go: unset keeps them in PostgreSQL; `s3://bucket/prefix` (AWS_*
    /// variables for credentials, region and endpoint) or `file:///dir` keeps them in an object
    /// store and the row keeps the object's name (docs/operations.md).
    #[arg(long, env = "RENTCHECK_EVIDENCE_STORE")]
    pub evidence_store: Option<String>,

    /// Minutes without a request after which a browser session ends (ASVS level 2: 30).
    #[arg(long, env = "RENTCHECK_SESSION_IDLE_MINUTES", default_value_t = 30,
          value_parser = clap::value_parser!(i64).range(1..=24 * 60))]
    pub session_idle_minutes: i64,

    /// Hours after sign-in at which a browser session ends whatever happens (ASVS level 2: 12).
    #[arg(long, env = "RENTCHECK_SESSION_MAX_HOURS", default_value_t = 12,
          value_parser = clap::value_parser!(i64).range(1..=24 * 30))]
    pub session_max_hours: i64,

    /// Reverse proxies whose `X-Forwarded-For` names the client (comma-separated addresses), for
    /// the sign-in limits and the first-run page. Unset: the peer address is the client, and a
    /// forwarded request is never taken as coming from this machine.
    #[arg(long, env = "RENTCHECK_TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<IpAddr>,

    /// Allow `http://` webhook URLs (tests, private networks); otherwise only `https://`.
    #[arg(long, env = "RENTCHECK_WEBHOOK_ALLOW_HTTP", default_value_t = false)]
    pub webhook_allow_http: bool,

    /// Allow webhooks to loopback, link-local, private and unique-local addresses (a receiver
    /// inside your network); otherwise a URL whose host is or resolves to one is refused.
    #[arg(long, env = "RENTCHECK_WEBHOOK_ALLOW_PRIVATE", default_value_t = false)]
    pub webhook_allow_private: bool,

    /// The bearer token a Prometheus scrape of `/metrics/briefs` must send. Unset: that endpoint
    /// answers 404, so per-brief figures are never served to anyone by default.
    #[arg(long, env = "RENTCHECK_METRICS_TOKEN", hide_env_values = true)]
    pub metrics_token: Option<Secret>,
}

/// The token signing secret, shared by `serve` and `token mint`.
#[derive(Debug, Clone, Args)]
pub struct TokenConfig {
    /// HS256 secret for bearer tokens (32+ characters). When unset, one is generated on first
    /// start and kept in `<data dir>/jwt-secret` with mode 0600. Prefer the variable or
    /// --jwt-secret-file: a command line is visible to every user of the machine (`ps`).
    #[arg(long, env = "RENTCHECK_JWT_SECRET", hide_env_values = true)]
    pub jwt_secret: Option<Secret>,

    /// A file holding the HS256 secret (mode 0600 or stricter), instead of --jwt-secret.
    #[arg(long, env = "RENTCHECK_JWT_SECRET_FILE", conflicts_with = "jwt_secret")]
    pub jwt_secret_file: Option<PathBuf>,
}

/// The shortest `RENTCHECK_METRICS_TOKEN` accepted: 32 characters, as the signing secret.
pub const MIN_METRICS_TOKEN_CHARS: usize = 32;

/// What handlers need from the configuration at run time.
#[derive(Debug, Clone)]
pub struct AppConfig {
    pub max_upload: usize,
    pub request_timeout_secs: u64,
    pub secure_cookies: bool,
    /// The server's address as people and agents use it, without a trailing slash
    /// (`RENTCHECK_PUBLIC_URL`).
    pub public_url: String,
    /// Session idle and absolute limits.
    pub sessions: SessionLimits,
    /// Proxies whose `X-Forwarded-For` is believed (`RENTCHECK_TRUSTED_PROXIES`).
    pub trusted_proxies: Vec<IpAddr>,
    /// Webhook delivery: which URLs, how long, how often retried.
    pub webhooks: WebhookSettings,
    /// The bearer token of `/metrics/briefs` (`RENTCHECK_METRICS_TOKEN`); none: the route is off.
    pub metrics_token: Option<Secret>,
    /// The code the first-run page asks for (`/setup?code=…`): new at every start, printed by
    /// `rentcheck serve` while there is no account, so only whoever started the server has it.
    pub setup_code: Secret,
}

/// A new first-run setup code: 96 random bits as hex.
pub fn new_setup_code() -> Secret {
    Secret::new(&crate::secrets::random_token()[..24])
}

/// How webhooks are delivered. The timings are settings so tests can run a day of retries in
/// seconds; the defaults are the documented ones (docs/operations.md).
#[derive(Debug, Clone)]
pub struct WebhookSettings {
    /// Accept `http://` URLs (`RENTCHECK_WEBHOOK_ALLOW_HTTP`).
    pub allow_http: bool,
    /// Send to loopback, link-local, private and unique-local addresses
    /// (`RENTCHECK_WEBHOOK_ALLOW_PRIVATE`); otherwise only public ones.
    pub allow_private: bool,
    /// How long one POST may take.
    pub timeout: std::time::Duration,
    /// The wait before the first retry; each later one waits twice as long as the one before.
    pub retry_base: std::time::Duration,
    /// The longest wait between two attempts.
    pub retry_max: std::time::Duration,
    /// After this long since the event, a delivery that still fails is given up and marked failed.
    pub give_up_after: std::time::Duration,
    /// How often an idle worker looks for due deliveries and changed briefs.
    pub poll: std::time::Duration,
    /// How long a brief's oldest queued change waits before the worker remakes its summary, so a
    /// burst of uploads to one brief costs one remake rather than one per upload. Readers never
    /// wait for it: a page or API call remakes a brief with queued changes itself.
    pub settle: std::time::Duration,
}

impl Default for WebhookSettings {
    fn default() -> Self {
        use std::time::Duration;
        Self {
            allow_http: false,
            allow_private: false,
            timeout: Duration::from_secs(10),
            retry_base: Duration::from_secs(30),
            retry_max: Duration::from_secs(60 * 60),
            give_up_after: Duration::from_secs(24 * 60 * 60),
            poll: Duration::from_secs(2),
            settle: Duration::from_millis(500),
        }
    }
}

impl Default for AppConfig {
    fn default() -> Self {
        Self {
            max_upload: 16 * 1024 * 1024,
            request_timeout_secs: 30,
            secure_cookies: false,
            public_url: "http://127.0.0.1:8080".to_owned(),
            sessions: SessionLimits::default(),
            trusted_proxies: Vec::new(),
            webhooks: WebhookSettings::default(),
            metrics_token: None,
            setup_code: new_setup_code(),
        }
    }
}

impl TryFrom<&ServeConfig> for AppConfig {
    type Error = anyhow::Error;

    /// Fails on a `RENTCHECK_PUBLIC_URL` nobody could use, and on a metrics token anyone could guess.
    fn try_from(c: &ServeConfig) -> anyhow::Result<Self> {
        if let Some(token) = &c.metrics_token {
            // An empty value used to match an empty `Authorization: Bearer ` and open the route.
            anyhow::ensure!(
                token.expose().trim().chars().count() >= MIN_METRICS_TOKEN_CHARS,
                "RENTCHECK_METRICS_TOKEN must be at least {MIN_METRICS_TOKEN_CHARS} characters \
                 (e.g. `openssl rand -hex 32`), or unset to keep /metrics/briefs off"
            );
        }
        Ok(Self {
            max_upload: c.max_upload,
            request_timeout_secs: c.request_timeout_secs,
            secure_cookies: c.secure_cookies,
            public_url: public_url(c.public_url.as_deref(), c.addr)?,
            sessions: SessionLimits {
                idle: chrono::Duration::minutes(c.session_idle_minutes),
                absolute: chrono::Duration::hours(c.session_max_hours),
            },
            trusted_proxies: c.trusted_proxies.clone(),
            webhooks: WebhookSettings {
                allow_http: c.webhook_allow_http,
                allow_private: c.webhook_allow_private,
                ..WebhookSettings::default()
            },
            metrics_token: c.metrics_token.clone(),
            setup_code: new_setup_code(),
        })
    }
}

/// The default data dir: `$XDG_DATA_HOME/rentcheck`; else, for root, `/var/lib/rentcheck` (the
/// private cluster then runs as `postgres`, which cannot reach into `/root`); else
/// `$HOME/.local/share/rentcheck`. Written here rather than taken from a crate: it is these three
/// rules, and every path they give is absolute.
pub fn default_data_dir() -> PathBuf {
    let absolute = |name: &str| std::env::var_os(name).map(PathBuf::from).filter(|p| p.is_absolute());
    if let Some(data_home) = absolute("XDG_DATA_HOME") {
        return data_home.join("rentcheck");
    }
    match absolute("HOME") {
        Some(home) if !running_as_root() => home.join(".local/share/rentcheck"),
        _ => PathBuf::from("/var/lib/rentcheck"),
    }
}

/// Whether this process runs as root (`/proc/self` belongs to the process's effective user).
pub fn running_as_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}

/// The URL people and agents use: `RENTCHECK_PUBLIC_URL` when set (checked, trailing slash removed),
/// else `http://` and the listen address. An unspecified listen address (0.0.0.0, ::) is no place
/// anyone can connect to, so the derived URL names loopback instead.
pub fn public_url(configured: Option<&str>, listen: SocketAddr) -> anyhow::Result<String> {
    let Some(text) = configured.map(str::trim).filter(|t| !t.is_empty()) else {
        let ip = match listen.ip() {
            IpAddr::V4(ip) if ip.is_unspecified() => IpAddr::V4(Ipv4Addr::LOCALHOST),
            IpAddr::V6(ip) if ip.is_unspecified() => IpAddr::V6(Ipv6Addr::LOCALHOST),
            ip => ip,
        };
        return Ok(format!("http://{}", SocketAddr::new(ip, listen.port())));
    };
    let wrong = |why: &str| anyhow::anyhow!("RENTCHECK_PUBLIC_URL {why}, e.g. http://gpu-lab.example.com:8080");
    let url = reqwest::Url::parse(text).map_err(|e| wrong(&format!("is not a URL ({e})")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(wrong("must start with http:// or https://"));
    }
    let host = url.host_str().ok_or_else(|| wrong("needs a host"))?;
    let ip = host.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>();
    if ip.is_ok_and(|ip| ip.is_unspecified()) {
        return Err(wrong("must name an address others can reach, not 0.0.0.0 or ::"));
    }
    if url.query().is_some() || url.fragment().is_some() || !url.username().is_empty() {
        return Err(wrong("must be a plain address without user, query or fragment"));
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_public_url_defaults_to_the_listen_address_and_never_to_an_unspecified_one() {
        assert_eq!(
            public_url(None, addr("127.0.0.1:8080")).unwrap(),
            "http://127.0.0.1:8080"
        );
        assert_eq!(public_url(None, addr("0.0.0.0:9000")).unwrap(), "http://127.0.0.1:9000");
        assert_eq!(public_url(None, addr("[::]:8080")).unwrap(), "http://[::1]:8080");
        assert_eq!(public_url(None, addr("10.1.2.3:8080")).unwrap(), "http://10.1.2.3:8080");
        assert_eq!(
            public_url(Some("  "), addr("10.1.2.3:80")).unwrap(),
            "http://10.1.2.3:80"
        );
    }

    #[test]
    fn a_configured_public_url_is_checked_and_loses_its_trailing_slash() {
        let listen = addr("0.0.0.0:8080");
        assert_eq!(
            public_url(Some("https://rentcheck.example.com/"), listen).unwrap(),
            "https://rentcheck.example.com"
        );
        assert_eq!(
            public_url(Some("http://gpu-lab:8080/rentcheck/"), listen).unwrap(),
            "http://gpu-lab:8080/rentcheck"
        );
        for (bad, says) in [
            ("gpu-lab:8080", "http:// or https://"),
            ("ftp://gpu-lab", "http:// or https://"),
            ("http://0.0.0.0:8080", "not 0.0.0.0"),
            ("http://[::]:8080", "not 0.0.0.0"),
            ("http://gpu-lab:8080/?x=1", "without user, query or fragment"),
            ("not a url", "is not a URL"),
        ] {
            let err = public_url(Some(bad), listen).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
            assert!(err.starts_with("RENTCHECK_PUBLIC_URL"), "{err}");
        }
    }
}
