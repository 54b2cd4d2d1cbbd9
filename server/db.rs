//! Database connection: an external PostgreSQL (`DATABASE_URL`) or a private cluster that rentcheck
//! initialises and runs from the machine's PostgreSQL binaries inside the data dir. The data dir is
//! guarded by a lock (`lock`): `serve` holds it for its life, a command holds it while it runs the
//! cluster itself, and a command started while a server runs uses that server's cluster.

mod lock;
mod stored_text;

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::Command,
    str::FromStr,
    time::Duration,
};

use anyhow::{anyhow, bail, Context};
use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, Connection, PgPool,
};

use lock::{Acquired, DataDirLock, State};
pub use stored_text::StoredText;

use crate::{
    config::{default_data_dir, running_as_root, DbConfig},
    secrets::{random_token, write_private_file, Secret},
};

/// The command name `rentcheck serve` takes the data-dir lock under.
pub const SERVE: &str = lock::SERVE;

/// How long a process waits for another one's use of the data dir: a first start's `initdb` on a
/// slow disk, or a command such as `demo` loading its evidence.
const LOCK_PATIENCE: Duration = Duration::from_secs(300);

/// How long one connection attempt may take before the start gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// Every migration, embedded in the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations");

/// Runs the migrations. sqlx takes a PostgreSQL advisory lock around them, so two instances that
/// start at the same moment apply each migration once. They run on a connection of their own that
/// logs no slow statements: waiting for that lock while another process migrates (`demo` beside
/// a first start) and a long migration are expected, not something to warn about.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    let options = (*pool.connect_options())
        .clone()
        .log_slow_statements(tracing::log::LevelFilter::Off, Duration::from_secs(3600));
    let mut conn = options
        .connect()
        .await
        .context("connecting to apply database migrations")?;
    let applied = MIGRATOR.run(&mut conn).await.context("applying database migrations");
    let _ = conn.close().await;
    applied
}

/// Whether rentcheck may install its schema beside tables that are not its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ForeignTables {
    /// Refuse, naming them (every command but `migrate --yes`).
    Refuse,
    /// Install anyway (`rentcheck migrate --yes`).
    Accept,
}

/// [`migrate`], but a first install into a database that is not rentcheck's alone is refused
/// unless `foreign` accepts it: one that already holds other tables (another application's), or
/// PostgreSQL's shared `postgres` database even while empty. Once rentcheck's schema is there,
/// later migrations run whatever else the database holds.
pub async fn migrate_checked(pool: &PgPool, foreign: ForeignTables) -> anyhow::Result<()> {
    if foreign == ForeignTables::Refuse {
        // The tables first, then whether rentcheck's schema is there: each migration commits its
        // tables together with its row in `_sqlx_migrations`, so tables that another rentcheck
        // is installing right now (a first start beside this command) are always seen with their
        // row by the check that follows; in the other order they could be seen without it.
        let others = foreign_tables(pool).await?;
        if !installed(pool).await? {
            if let Some(refusal) = refuse_to_install(&Target::of(&pool.connect_options()), &others) {
                bail!(refusal);
            }
        }
    }
    migrate(pool).await
}

/// Why rentcheck will not install into `target`, given the tables it already holds; `None` when
/// it is rentcheck's to take.
fn refuse_to_install(target: &Target, others: &[String]) -> Option<String> {
    let what = match others.len() {
        0 if target.database == "postgres" => {
            "is PostgreSQL's shared maintenance database, which other tools use too".to_owned()
        }
        0 => return None,
        1 => format!("already holds a table rentcheck did not make: {}", others[0]),
        n => format!(
            "already holds {n} tables rentcheck did not make: {}",
            name_some(others, 10)
        ),
    };
    Some(format!(
        "the database {} at {} {what}. Give rentcheck a database of its own \
         (createdb -h {} -U {} rentcheck, then DATABASE_URL=postgres://…/rentcheck), \
         or install it there anyway with `rentcheck migrate --yes`",
        target.database, target.address, target.host, target.user,
    ))
}

/// Whether rentcheck's first migration is recorded in this database (sqlx's `_sqlx_migrations` in
/// the current schema).
async fn installed(pool: &PgPool) -> anyhow::Result<bool> {
    let has_table = sqlx::query_scalar!(
        r#"SELECT EXISTS (
             SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
             WHERE c.relname = '_sqlx_migrations' AND n.nspname = current_schema()
           ) AS "present!""#
    )
    .fetch_one(pool)
    .await
    .context("looking for rentcheck's migrations")?;
    let Some(first) = MIGRATOR.iter().next() else {
        return Ok(true);
    };
    if !has_table {
        return Ok(false);
    }
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM _sqlx_migrations WHERE version = $1) AS "present!""#,
        first.version
    )
    .fetch_one(pool)
    .await
    .context("reading _sqlx_migrations")
}

/// Tables, views and foreign tables in the database's own schemas (not the system's, not an
/// extension's), but sqlx's bookkeeping table: what a first install would land beside.
async fn foreign_tables(pool: &PgPool) -> anyhow::Result<Vec<String>> {
    sqlx::query_scalar!(
        r#"SELECT CASE WHEN n.nspname = current_schema() THEN c.relname::text
                       ELSE n.nspname || '.' || c.relname END AS "name!"
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
           WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f')
             AND n.nspname NOT LIKE 'pg\_%' AND n.nspname <> 'information_schema'
             AND NOT (c.relname = '_sqlx_migrations' AND n.nspname = current_schema())
             AND NOT EXISTS (SELECT 1 FROM pg_depend d
                             WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid AND d.deptype = 'e')
           ORDER BY 1"#
    )
    .fetch_all(pool)
    .await
    .context("listing the database's tables")
}

/// `a, b, c and 4 more`: at most `shown` names.
fn name_some(names: &[String], shown: usize) -> String {
    if names.len() <= shown {
        return names.join(", ");
    }
    format!("{} and {} more", names[..shown].join(", "), names.len() - shown)
}

/// How a serving rentcheck's connections begin their `application_name`, followed by its URL.
const SERVING_PREFIX: &str = "rentcheck serve ";
/// PostgreSQL keeps 63 bytes of an `application_name`: a longer one is cut, and its URL with it.
const APPLICATION_NAME_MAX: usize = 63;

/// The URLs of the `rentcheck serve` processes connected to this database now, read from the
/// names their connections carry (`pg_stat_activity` shows every session's name to every user);
/// a name PostgreSQL cut short is left out rather than printed wrong.
pub async fn serving_urls(pool: &PgPool) -> Result<Vec<String>, sqlx::Error> {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT DISTINCT application_name FROM pg_stat_activity \
         WHERE datname = current_database() AND starts_with(application_name, $1) ORDER BY 1",
    )
    .bind(SERVING_PREFIX)
    .fetch_all(pool)
    .await?;
    Ok(names
        .into_iter()
        .filter(|n| n.len() < APPLICATION_NAME_MAX)
        .filter_map(|n| n.strip_prefix(SERVING_PREFIX).map(str::to_owned))
        .collect())
}

/// A connected pool; with the private cluster, also the data-dir lock and the cluster when this
/// process runs it.
pub struct Database {
    pub pool: PgPool,
    /// The URL of the running `rentcheck serve` whose private cluster this uses, as it wrote it
    /// in the data-dir lock; `None` with `DATABASE_URL` (see [`serving_urls`]), or when no server
    /// runs.
    pub server_url: Option<String>,
    /// Set when this process holds the data-dir lock and so runs the cluster.
    owned: Option<(PrivateCluster, DataDirLock)>,
}

impl Database {
    /// Connects to `DATABASE_URL`, or takes the data-dir lock as `command` and starts (or reuses)
    /// the private cluster, or uses the cluster of the `rentcheck serve` that holds the lock.
    pub async fn open(cfg: &DbConfig, command: &str) -> anyhow::Result<Self> {
        Self::open_as(cfg, command, None).await
    }

    /// [`open`](Self::open) for `rentcheck serve`, which writes `url` (where people open it) into
    /// the data-dir lock for the commands that find it.
    pub async fn open_serving(cfg: &DbConfig, url: &str) -> anyhow::Result<Self> {
        Self::open_as(cfg, SERVE, Some(url)).await
    }

    /// `served_at`: the URL a server is opened at, for the lock (the private cluster only).
    async fn open_as(cfg: &DbConfig, command: &str, served_at: Option<&str>) -> anyhow::Result<Self> {
        let Some(url) = &cfg.database_url else {
            return Self::open_private(cfg, command, served_at).await;
        };
        check_scheme(url.expose())?;
        let options = PgConnectOptions::from_str(url.expose()).map_err(|e| {
            anyhow!(
                "DATABASE_URL is not a valid PostgreSQL URL ({}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                cause_of(&e)
            )
        })?;
        // A server names itself and its URL on its connections, so `rentcheck demo` with the same
        // DATABASE_URL can print the URL of the server it reached (`serving_urls`).
        let options = match served_at {
            Some(url) => options.application_name(&format!("{SERVING_PREFIX}{url}")),
            None => options,
        };
        let pool = connect(options, cfg.db_pool_size, &Advice::DatabaseUrl).await?;
        Ok(Self {
            pool,
            server_url: None,
            owned: None,
        })
    }

    async fn open_private(cfg: &DbConfig, command: &str, served_at: Option<&str>) -> anyhow::Result<Self> {
        let bin_dir = postgres_binaries(cfg.pg_bin_dir.as_deref())?;
        let data_dir = &cfg.data_dir;
        crate::secrets::private_dir(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        warn_about_a_working_directory_cluster(&data_dir);
        match lock::acquire(&data_dir, command, LOCK_PATIENCE)? {
            Acquired::Owner(mut lock) => {
                if let Some(url) = served_at {
                    lock.set_url(url);
                }
                let cluster = PrivateCluster::start(&data_dir, bin_dir)?;
                lock.set_state(State::Ready, Some(cluster.port))?;
                let advice = Advice::PrivateCluster(cluster.log_file());
                match connect(cluster.connect_options(), cfg.db_pool_size, &advice).await {
                    Ok(pool) => Ok(Self {
                        pool,
                        server_url: None,
                        owned: Some((cluster, lock)),
                    }),
                    Err(e) => {
                        // Best effort: the connection error is what the user needs to read.
                        let _ = lock.set_state(State::Stopping, None);
                        cluster.stop();
                        Err(e)
                    }
                }
            }
            Acquired::Server(server) => {
                let port = server
                    .port
                    .ok_or_else(|| anyhow!("{server} has not written its cluster's port"))?;
                tracing::info!(port, "using the private PostgreSQL cluster of {server}");
                let password = read_password(&data_dir)?;
                let advice = Advice::PrivateCluster(data_dir.join("pg").join(SERVER_LOG));
                let pool = connect(private_connect_options(port, &password), cfg.db_pool_size, &advice).await?;
                Ok(Self {
                    pool,
                    server_url: server.url,
                    owned: None,
                })
            }
        }
    }

    /// Closes the pool; when this process runs the private cluster, stops it and releases the
    /// data-dir lock (removing the lock file). A command that used a running server's cluster
    /// leaves it alone.
    pub async fn close(self) {
        let Self { pool, owned, .. } = self;
        match owned {
            Some((cluster, mut lock)) => {
                // Tell waiting commands not to use a cluster that is going away.
                if let Err(e) = lock.set_state(State::Stopping, None) {
                    tracing::warn!(error = %e, "could not mark the data-dir lock as stopping");
                }
                pool.close().await;
                cluster.stop();
                drop(lock);
            }
            None => pool.close().await,
        }
    }
}

/// With the default data dir, a cluster in `./var` is most likely one an earlier rentcheck made
/// there (its default was the working directory): say how to keep using it.
fn warn_about_a_working_directory_cluster(data_dir: &Path) {
    let old = Path::new("var/pg/PG_VERSION");
    if default_data_dir().canonicalize().ok().as_deref() == Some(data_dir)
        && old.exists()
        && !data_dir.join("pg/PG_VERSION").exists()
    {
        tracing::warn!(
            "./var holds a private cluster from an earlier rentcheck, which kept its data in the working \
             directory; this one uses {}. To keep the old data, stop and start with RENTCHECK_DATA_DIR=./var",
            data_dir.display()
        );
    }
}

/// `DATABASE_URL` must name PostgreSQL: sqlx would read `mysql://…` as a PostgreSQL URL and fail
/// later with a message about something else. Only the scheme is quoted, never the rest.
fn check_scheme(url: &str) -> anyhow::Result<()> {
    let scheme = url.split_once("://").map_or("", |(s, _)| s);
    if matches!(scheme.to_ascii_lowercase().as_str(), "postgres" | "postgresql") {
        return Ok(());
    }
    let given = if scheme.is_empty() || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c)) {
        "a URL without a scheme".to_owned()
    } else {
        format!("a {scheme}:// URL")
    };
    bail!(
        "DATABASE_URL is {given}, but rentcheck works only with PostgreSQL: give \
         postgres://USER:PASSWORD@HOST:PORT/DATABASE, or unset DATABASE_URL and rentcheck runs its own PostgreSQL"
    )
}

/// What to suggest when a connection fails, by where its settings came from.
enum Advice {
    DatabaseUrl,
    PrivateCluster(PathBuf),
}

/// One connection first, so that a failure says what failed (a pool only reports its timeout),
/// then the pool.
async fn connect(options: PgConnectOptions, pool_size: u32, advice: &Advice) -> anyhow::Result<PgPool> {
    let target = Target::of(&options);
    match tokio::time::timeout(CONNECT_TIMEOUT, options.connect()).await {
        Err(_) => bail!(target.failure(
            &format!("no answer within {} s", CONNECT_TIMEOUT.as_secs()),
            "Check the host, the port (PostgreSQL usually listens on 5432; a program that is not \
             PostgreSQL may never answer) and any firewall in between",
            advice
        )),
        Ok(Err(e)) => bail!(describe_connect_error(&target, &e, advice)),
        Ok(Ok(probe)) => {
            let _ = probe.close().await;
        }
    }
    let options = options.log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_millis(500));
    PgPoolOptions::new()
        .max_connections(pool_size)
        .acquire_timeout(CONNECT_TIMEOUT)
        .connect_with(options)
        .await
        .map_err(|e| anyhow!(describe_connect_error(&target, &e, advice)))
}

/// Where a connection went: never the password.
struct Target {
    address: String,
    host: String,
    database: String,
    user: String,
}

impl Target {
    fn of(options: &PgConnectOptions) -> Self {
        let port = options.get_port();
        let address = match options.get_socket() {
            Some(dir) => format!("{}/.s.PGSQL.{port}", dir.display()),
            // sqlx keeps an IPv6 host in its URL brackets, but not one given with `.host()`.
            None if options.get_host().contains(':') && !options.get_host().starts_with('[') => {
                format!("[{}]:{port}", options.get_host())
            }
            None => format!("{}:{port}", options.get_host()),
        };
        let user = options.get_username().to_owned();
        Self {
            address,
            host: options.get_host().to_owned(),
            // PostgreSQL's own default: the database named after the user.
            database: options.get_database().unwrap_or(&user).to_owned(),
            user,
        }
    }

    /// One line: what was tried, why it failed, what to do.
    fn failure(&self, cause: &str, todo: &str, advice: &Advice) -> String {
        let then = match advice {
            Advice::DatabaseUrl => {
                "These settings come from DATABASE_URL; without it rentcheck runs its own PostgreSQL.".to_owned()
            }
            Advice::PrivateCluster(log) => format!("The private cluster's log is {}.", log.display()),
        };
        format!(
            "cannot connect to PostgreSQL at {} (database {}, user {}): {}. {todo}. {then}",
            self.address,
            self.database,
            self.user,
            cause.trim_end_matches('.')
        )
    }
}

fn describe_connect_error(target: &Target, e: &sqlx::Error, advice: &Advice) -> String {
    use std::io::ErrorKind;
    let (cause, todo) = match e {
        // A program that is not PostgreSQL answers the start-up message with something sqlx reads
        // as a message header, then closes: sqlx says "expected to read 1414811696 bytes".
        sqlx::Error::Io(io) if io.kind() == ErrorKind::UnexpectedEof => (
            not_postgres(&io.to_string()),
            "Check the port: PostgreSQL usually listens on 5432".to_owned(),
        ),
        sqlx::Error::Protocol(_) => (
            not_postgres(""),
            "Check the port: PostgreSQL usually listens on 5432".to_owned(),
        ),
        sqlx::Error::Io(io) => {
            let todo = match io.kind() {
                ErrorKind::ConnectionRefused => "Check that PostgreSQL runs there and listens on that address and port",
                _ if io.to_string().contains("lookup") => "Check the host name",
                _ => "Check the host, the port and any firewall in between",
            };
            (io.to_string(), todo.to_owned())
        }
        sqlx::Error::Database(db) => {
            let todo = match db.code().as_deref() {
                Some("28P01") => "Check the user and password".to_owned(),
                Some("28000") => "Check the user, and that pg_hba.conf lets it connect from this host".to_owned(),
                Some("3D000") => format!(
                    "Create it (createdb -U {} {}) or name an existing database",
                    target.user, target.database
                ),
                Some("53300") => {
                    "The server has no free connections: lower RENTCHECK_DB_POOL or raise its max_connections"
                        .to_owned()
                }
                Some("57P03") => "The server is starting or stopping: try again in a moment".to_owned(),
                _ => "See the database server's log".to_owned(),
            };
            (db.message().to_owned(), todo)
        }
        // This build speaks to PostgreSQL without TLS (sqlx's `tls-none`).
        sqlx::Error::Tls(tls) => (
            format!("TLS: {tls}"),
            "This build connects without TLS: use sslmode=disable or sslmode=prefer".to_owned(),
        ),
        sqlx::Error::PoolTimedOut => (
            format!("no connection within {} s", CONNECT_TIMEOUT.as_secs()),
            "Check the host, the port and any firewall in between".to_owned(),
        ),
        other => (cause_of(other), "Check the connection settings".to_owned()),
    };
    target.failure(&cause, &todo, advice)
}

/// Why a handshake broke off, from sqlx's "expected to read N bytes, got M bytes at EOF". sqlx
/// first reads a 5-byte header (a type byte and a length that counts itself), then N = length + 1
/// more: N - 1 is the four bytes after the first one that answered. `HTTP/1.1 400 …` gives "TTP/".
fn not_postgres(eof: &str) -> String {
    let wanted = eof
        .strip_prefix("expected to read ")
        .and_then(|rest| rest.split(' ').next())
        .and_then(|n| n.parse::<u32>().ok());
    match wanted {
        Some(n) if n <= 5 => "the server closed the connection without answering PostgreSQL's handshake".to_owned(),
        Some(n) if &(n - 1).to_be_bytes() == b"TTP/" => "an HTTP server answers there, not PostgreSQL".to_owned(),
        _ => "what answers there is not PostgreSQL (it broke off PostgreSQL's handshake)".to_owned(),
    }
}

/// An error's own message without the "error returned from database:"-style prefixes that sqlx
/// repeats from its source.
fn cause_of(e: &sqlx::Error) -> String {
    match e {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        sqlx::Error::Database(db) => db.message().to_owned(),
        other => other.to_string(),
    }
}

const PRIVATE_DB_NAME: &str = "rentcheck";
const PRIVATE_DB_USER: &str = "rentcheck";
const SERVER_LOG: &str = "server.log";

fn private_connect_options(port: u16, password: &Secret) -> PgConnectOptions {
    PgConnectOptions::new()
        .host("127.0.0.1")
        .port(port)
        .username(PRIVATE_DB_USER)
        .password(password.expose())
        .database(PRIVATE_DB_NAME)
}

fn read_password(data_dir: &Path) -> anyhow::Result<Secret> {
    let file = data_dir.join("pg-password");
    let text = crate::secrets::read_private_file(&file).with_context(|| format!("reading {}", file.display()))?;
    Ok(Secret::new(text.trim().to_owned()))
}

/// The directory holding the PostgreSQL tools: `RENTCHECK_PG_BIN_DIR`, else found.
fn postgres_binaries(configured: Option<&Path>) -> anyhow::Result<PathBuf> {
    let found = match configured {
        Some(dir) => has_postgres_tools(dir).then(|| dir.to_path_buf()),
        None => find_postgres_binaries(),
    };
    found.ok_or_else(|| {
        anyhow!(
            "no database: DATABASE_URL is not set and no PostgreSQL binaries were found \
             (looked for initdb and pg_ctl in RENTCHECK_PG_BIN_DIR, or on PATH and in /usr/lib/postgresql/*/bin).\n\
             Either set DATABASE_URL=postgres://user:password@host/db, \
             or install PostgreSQL (e.g. `apt-get install postgresql`), \
             or run `docker compose up` to get both PostgreSQL and the app."
        )
    })
}

/// A PostgreSQL cluster owned by rentcheck, living in `<data dir>/pg`. Only the holder of the
/// data-dir lock starts or stops it.
#[derive(Debug)]
pub struct PrivateCluster {
    bin_dir: PathBuf,
    pg_dir: PathBuf,
    port: u16,
    password: Secret,
    /// Set when the process runs as root: PostgreSQL refuses root, so it runs as this user.
    run_as: Option<String>,
}

impl PrivateCluster {
    /// Initialises the cluster on first use, starts it unless it is already running (left so by a
    /// crashed holder of the lock), and makes sure the application database exists.
    fn start(data_dir: &Path, bin_dir: PathBuf) -> anyhow::Result<Self> {
        let pg_dir = data_dir.join("pg");
        let run_as = if running_as_root() {
            Some("postgres".to_owned())
        } else {
            None
        };
        if run_as.is_some() {
            // The postgres user must be able to traverse the data dir to reach its own cluster.
            set_mode(data_dir, 0o711)?;
        }
        let fresh = !pg_dir.join("PG_VERSION").exists();
        let password = if fresh {
            let password = Secret::new(random_token());
            write_private_file(&data_dir.join("pg-password"), password.expose())?;
            password
        } else {
            read_password(data_dir)?
        };
        let mut cluster = Self {
            bin_dir,
            pg_dir,
            port: 0,
            password,
            run_as,
        };
        if fresh {
            tracing::info!(dir = %cluster.pg_dir.display(), "initialising the private PostgreSQL cluster (once)");
            cluster.initdb(data_dir)?;
        }
        match cluster.running_port() {
            Some(port) => {
                cluster.port = port;
                tracing::info!(dir = %cluster.pg_dir.display(), port, "using the running private PostgreSQL cluster");
            }
            None => {
                cluster.port = free_loopback_port()?;
                cluster.pg_ctl_start()?;
                tracing::info!(dir = %cluster.pg_dir.display(), port = cluster.port, fresh, "started the private PostgreSQL cluster");
            }
        }
        cluster.create_database()?;
        Ok(cluster)
    }

    fn connect_options(&self) -> PgConnectOptions {
        private_connect_options(self.port, &self.password)
    }

    fn log_file(&self) -> PathBuf {
        self.pg_dir.join(SERVER_LOG)
    }

    /// Stops the cluster (fast shutdown: open sessions are ended, committed data is safe).
    fn stop(&self) {
        match self.run(
            self.bin("pg_ctl")
                .args(["stop", "-m", "fast", "-w", "-D"])
                .arg(&self.pg_dir),
        ) {
            Ok(_) => tracing::info!("stopped the private PostgreSQL cluster"),
            Err(e) => tracing::warn!(error = %e, "could not stop the private PostgreSQL cluster"),
        }
    }

    /// Runs initdb into `pg.partial` and renames it to `pg` when done, so an interrupted first
    /// start leaves no half-made cluster behind that a later start would take for a real one.
    fn initdb(&self, data_dir: &Path) -> anyhow::Result<()> {
        let partial = data_dir.join("pg.partial");
        if partial.exists() {
            fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
        }
        if self.pg_dir.exists() {
            // Without PG_VERSION it holds no cluster; an empty one is an older rentcheck's leftover,
            // anything else is not ours to delete.
            fs::remove_dir(&self.pg_dir).map_err(|_| {
                anyhow!(
                    "{} holds no PostgreSQL cluster (no PG_VERSION) but is not empty: move it away, \
                     or set RENTCHECK_DATA_DIR to another directory",
                    self.pg_dir.display()
                )
            })?;
        }
        fs::create_dir_all(&partial)?;
        // initdb reads the superuser password from a file; it is removed right after.
        let pwfile = data_dir.join("pg-initdb-pw");
        write_private_file(&pwfile, self.password.expose())?;
        if let Some(user) = &self.run_as {
            chown(&partial, user)?;
            chown(&pwfile, user)?;
        }
        let result = self.run(
            self.bin("initdb")
                .arg("-D")
                .arg(&partial)
                .args([
                    "-U",
                    PRIVATE_DB_USER,
                    "-A",
                    "scram-sha-256",
                    "-E",
                    "UTF8",
                    "--no-instructions",
                ])
                .arg(format!("--pwfile={}", pwfile.display())),
        );
        let _ = fs::remove_file(&pwfile);
        result.context("initdb failed")?;
        fs::rename(&partial, &self.pg_dir).with_context(|| format!("renaming {} to pg", partial.display()))
    }

    fn pg_ctl_start(&self) -> anyhow::Result<()> {
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={} -c unix_socket_directories='' -c max_connections=100",
            self.port
        );
        self.run(
            self.bin("pg_ctl")
                .args(["start", "-w", "-t", "60", "-D"])
                .arg(&self.pg_dir)
                .arg("-l")
                .arg(self.log_file())
                .args(["-o", &options]),
        )
        .map(|_| ())
        .with_context(|| format!("starting PostgreSQL (log: {})", self.log_file().display()))
    }

    /// The port of a cluster already running from this directory (`postmaster.pid` line 4). Read
    /// only by the lock's holder: while initdb runs, that file names a bootstrap server's port.
    fn running_port(&self) -> Option<u16> {
        self.run(self.bin("pg_ctl").arg("status").arg("-D").arg(&self.pg_dir))
            .ok()?;
        let pid_file = fs::read_to_string(self.pg_dir.join("postmaster.pid")).ok()?;
        pid_file.lines().nth(3)?.trim().parse().ok()
    }

    fn create_database(&self) -> anyhow::Result<()> {
        let out = self.run(
            self.client("psql")
                .args(["-d", "postgres", "-tAc"])
                .arg(format!("SELECT 1 FROM pg_database WHERE datname = '{PRIVATE_DB_NAME}'")),
        )?;
        if out.trim() != "1" {
            self.run(self.client("createdb").arg(PRIVATE_DB_NAME))?;
        }
        Ok(())
    }

    /// A PostgreSQL client program (`psql`, `createdb`) signed in to the private server as its user.
    fn client(&self, name: &str) -> Command {
        let mut cmd = self.bin(name);
        cmd.args(["-h", "127.0.0.1", "-p", &self.port.to_string(), "-U", PRIVATE_DB_USER])
            .env("PGPASSWORD", self.password.expose());
        cmd
    }

    fn bin(&self, name: &str) -> Command {
        let program = self.bin_dir.join(name);
        match &self.run_as {
            Some(user) => {
                let mut cmd = Command::new("runuser");
                cmd.args(["-u", user, "--"]).arg(program);
                cmd
            }
            None => Command::new(program),
        }
    }

    fn run(&self, cmd: &mut Command) -> anyhow::Result<String> {
        let out = cmd.output().with_context(|| format!("running {cmd:?}"))?;
        if !out.status.success() {
            bail!(
                "{} exited with {}: {}",
                cmd.get_program().to_string_lossy(),
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Looks for a directory holding `initdb` and `pg_ctl`: on PATH first, then the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian and Ubuntu keep them off PATH).
fn has_postgres_tools(dir: &Path) -> bool {
    ["initdb", "pg_ctl", "psql", "createdb"]
        .iter()
        .all(|b| dir.join(b).is_file())
}

fn find_postgres_binaries() -> Option<PathBuf> {
    let has_tools = has_postgres_tools;
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            if has_tools(&dir) {
                // Resolve symlinks so pg_ctl finds its own `postgres` next to it.
                let resolved = dir.join("initdb").canonicalize().ok()?;
                return resolved.parent().map(Path::to_path_buf);
            }
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            Some((version, e.path().join("bin")))
        })
        .filter(|(_, dir)| has_tools(dir))
        .collect();
    versions.sort();
    versions.pop().map(|(_, dir)| dir)
}

fn free_loopback_port() -> anyhow::Result<u16> {
    let listener = TcpListener::bind("127.0.0.1:0").context("finding a free loopback port")?;
    Ok(listener.local_addr()?.port())
}

fn set_mode(path: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).with_context(|| format!("chmod {}", path.display()))
}

fn chown(path: &Path, user: &str) -> anyhow::Result<()> {
    let status = Command::new("chown").arg(user).arg(path).status()?;
    if !status.success() {
        bail!("chown {user} {} failed", path.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(database: &str) -> Target {
        Target::of(
            &PgConnectOptions::new()
                .host("db.example")
                .port(5433)
                .username("app")
                .database(database),
        )
    }

    #[test]
    fn an_install_is_refused_beside_other_tables_or_into_the_shared_postgres_database() {
        assert_eq!(refuse_to_install(&target("rentcheck"), &[]), None);
        let said = refuse_to_install(&target("postgres"), &[]).unwrap();
        assert!(
            said.starts_with("the database postgres at db.example:5433 is PostgreSQL's shared"),
            "{said}"
        );
        assert!(said.contains("createdb -h db.example -U app rentcheck"), "{said}");
        assert!(said.contains("rentcheck migrate --yes"), "{said}");
        let said = refuse_to_install(&target("shop"), &["orders".into()]).unwrap();
        assert!(said.contains("holds a table rentcheck did not make: orders."), "{said}");
        let many: Vec<String> = (1..=12).map(|i| format!("t{i:02}")).collect();
        let said = refuse_to_install(&target("shop"), &many).unwrap();
        assert!(
            said.contains("holds 12 tables rentcheck did not make: t01, t02"),
            "{said}"
        );
        assert!(said.contains("t10 and 2 more."), "{said}");
    }

    #[test]
    fn only_postgres_urls_are_taken_and_the_rest_of_the_url_is_never_quoted() {
        assert!(check_scheme("postgres://u:p@h/db").is_ok());
        assert!(check_scheme("postgresql://u:p@h/db").is_ok());
        let said = check_scheme("mysql://root:hunter2@h/shop").unwrap_err().to_string();
        assert!(
            said.starts_with("DATABASE_URL is a mysql:// URL, but rentcheck works only with PostgreSQL"),
            "{said}"
        );
        assert!(!said.contains("hunter2"), "{said}");
        let said = check_scheme("h:5432/db").unwrap_err().to_string();
        assert!(said.contains("a URL without a scheme"), "{said}");
    }

    #[test]
    fn a_handshake_broken_off_says_what_answered() {
        // `HTTP/1.1 400`: sqlx reads 'H' as the type and "TTP/" as the length.
        let http = u32::from_be_bytes(*b"TTP/") + 1;
        assert_eq!(
            not_postgres(&format!("expected to read {http} bytes, got 0 bytes at EOF")),
            "an HTTP server answers there, not PostgreSQL"
        );
        assert!(not_postgres("expected to read 5 bytes, got 0 bytes at EOF").contains("without answering"));
        let ssh = u32::from_be_bytes(*b"SH-2") + 1;
        assert!(
            not_postgres(&format!("expected to read {ssh} bytes, got 3 bytes at EOF")).contains("is not PostgreSQL")
        );
    }
}
