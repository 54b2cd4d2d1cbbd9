//! Database connection: an external PostgreSQL (`DATABASE_URL`) or a private cluster that rentcheck
//! initialises and runs from the machine's PostgreSQL binaries inside the data dir. The data dir is
//! guarded by a lock (`lock`): `serve` holds it for its life, a command holds it while it runs the
//! cluster itself, and a command started while a server runs uses that server's cluster.

mod lock;

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

/// Runs the migrations. sqlx takes a PostgreSQL advisory lock around them, so two instances that
/// start at the same moment apply each migration once.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("./migrations")
        .run(pool)
        .await
        .context("applying database migrations")
}

/// A connected pool; with the private cluster, also the data-dir lock and the cluster when this
/// process runs it.
pub struct Database {
    pub pool: PgPool,
    /// Set when this process holds the data-dir lock and so runs the cluster.
    owned: Option<(PrivateCluster, DataDirLock)>,
}

impl Database {
    /// Connects to `DATABASE_URL`, or takes the data-dir lock as `command` and starts (or reuses)
    /// the private cluster, or uses the cluster of the `rentcheck serve` that holds the lock.
    pub async fn open(cfg: &DbConfig, command: &str) -> anyhow::Result<Self> {
        let Some(url) = &cfg.database_url else {
            return Self::open_private(cfg, command).await;
        };
        let options = PgConnectOptions::from_str(url.expose()).map_err(|e| {
            anyhow!(
                "DATABASE_URL is not a valid PostgreSQL URL ({}); expected postgres://USER:PASSWORD@HOST:PORT/DATABASE",
                cause_of(&e)
            )
        })?;
        let pool = connect(options, cfg.db_pool_size, &Advice::DatabaseUrl).await?;
        Ok(Self { pool, owned: None })
    }

    async fn open_private(cfg: &DbConfig, command: &str) -> anyhow::Result<Self> {
        let bin_dir = postgres_binaries(cfg.pg_bin_dir.as_deref())?;
        let data_dir = &cfg.data_dir;
        crate::secrets::private_dir(data_dir)?;
        let data_dir = data_dir.canonicalize()?;
        warn_about_a_working_directory_cluster(&data_dir);
        match lock::acquire(&data_dir, command, LOCK_PATIENCE)? {
            Acquired::Owner(mut lock) => {
                let cluster = PrivateCluster::start(&data_dir, bin_dir)?;
                lock.set_state(State::Ready, Some(cluster.port))?;
                let advice = Advice::PrivateCluster(cluster.log_file());
                match connect(cluster.connect_options(), cfg.db_pool_size, &advice).await {
                    Ok(pool) => Ok(Self {
                        pool,
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
                Ok(Self { pool, owned: None })
            }
        }
    }

    /// Closes the pool; when this process runs the private cluster, stops it and releases the
    /// data-dir lock (removing the lock file). A command that used a running server's cluster
    /// leaves it alone.
    pub async fn close(self) {
        let Self { pool, owned } = self;
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
            "Check the host, the port and any firewall in between",
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
            self.bin("psql")
                .args([
                    "-h",
                    "127.0.0.1",
                    "-p",
                    &self.port.to_string(),
                    "-U",
                    PRIVATE_DB_USER,
                    "-d",
                    "postgres",
                    "-tAc",
                ])
                .arg(format!("SELECT 1 FROM pg_database WHERE datname = '{PRIVATE_DB_NAME}'"))
                .env("PGPASSWORD", self.password.expose()),
        )?;
        if out.trim() != "1" {
            self.run(
                self.bin("createdb")
                    .args([
                        "-h",
                        "127.0.0.1",
                        "-p",
                        &self.port.to_string(),
                        "-U",
                        PRIVATE_DB_USER,
                        PRIVATE_DB_NAME,
                    ])
                    .env("PGPASSWORD", self.password.expose()),
            )?;
        }
        Ok(())
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
