//! Database connection: an external PostgreSQL (`DATABASE_URL`) or a private cluster that rentcheck
//! initialises and runs from the machine's PostgreSQL binaries inside the data dir.

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
    ConnectOptions, PgPool,
};

use crate::{
    config::DbConfig,
    secrets::{random_token, write_private_file, Secret},
};

/// Runs the migrations. sqlx takes a PostgreSQL advisory lock around them, so two instances that
/// start at the same moment apply each migration once.
pub async fn migrate(pool: &PgPool) -> anyhow::Result<()> {
    sqlx::migrate!("./migrations")
        .run(pool)
        .await
        .context("applying database migrations")
}

/// A connected pool, plus the private cluster behind it when rentcheck started one.
pub struct Database {
    pub pool: PgPool,
    pub cluster: Option<PrivateCluster>,
}

impl Database {
    /// Connects to `DATABASE_URL`, or starts (or reuses) the private cluster in the data dir.
    pub async fn open(cfg: &DbConfig) -> anyhow::Result<Self> {
        let (options, cluster) = match &cfg.database_url {
            Some(url) => (
                PgConnectOptions::from_str(url.expose()).context("DATABASE_URL is not a valid PostgreSQL URL")?,
                None,
            ),
            None => {
                let cluster = PrivateCluster::start(&cfg.data_dir, cfg.pg_bin_dir.as_deref())?;
                (cluster.connect_options(), Some(cluster))
            }
        };
        let options = options.log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_millis(500));
        let pool = PgPoolOptions::new()
            .max_connections(cfg.db_pool_size)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await
            .context("connecting to PostgreSQL")?;
        Ok(Self { pool, cluster })
    }

    /// Closes the pool, and stops the private cluster if this process started it: a command
    /// such as `rentcheck user add` leaves a running server's cluster alone.
    pub async fn close(self) {
        self.pool.close().await;
        if let Some(cluster) = self.cluster.filter(|c| c.started_here) {
            cluster.stop();
        }
    }

    /// Closes the pool and stops the private cluster whoever started it: the server owns the
    /// cluster it runs on, also one left running by an earlier crash.
    pub async fn close_and_stop_cluster(self) {
        self.pool.close().await;
        if let Some(cluster) = self.cluster {
            cluster.stop();
        }
    }
}

const PRIVATE_DB_NAME: &str = "rentcheck";
const PRIVATE_DB_USER: &str = "rentcheck";

/// A PostgreSQL cluster owned by rentcheck, living in `<data dir>/pg`.
#[derive(Debug)]
pub struct PrivateCluster {
    bin_dir: PathBuf,
    pg_dir: PathBuf,
    port: u16,
    password: Secret,
    /// Set when the process runs as root: PostgreSQL refuses root, so it runs as this user.
    run_as: Option<String>,
    /// Whether this process started it (a CLI command must not stop the server's cluster).
    started_here: bool,
}

impl PrivateCluster {
    /// Initialises the cluster on first use, starts it unless it is already running, and makes
    /// sure the application database exists.
    pub fn start(data_dir: &Path, bin_dir: Option<&Path>) -> anyhow::Result<Self> {
        let found = match bin_dir {
            Some(dir) => has_postgres_tools(dir).then(|| dir.to_path_buf()),
            None => find_postgres_binaries(),
        };
        let bin_dir = found.ok_or_else(|| {
            anyhow!(
                "no database: DATABASE_URL is not set and no PostgreSQL binaries were found \
                 (looked for initdb and pg_ctl in RENTCHECK_PG_BIN_DIR, or on PATH and in /usr/lib/postgresql/*/bin).\n\
                 Either set DATABASE_URL=postgres://user:password@host/db, \
                 or install PostgreSQL (e.g. `apt-get install postgresql`), \
                 or run `docker compose up` to get both PostgreSQL and the app."
            )
        })?;
        fs::create_dir_all(data_dir).with_context(|| format!("creating data dir {}", data_dir.display()))?;
        let data_dir = data_dir.canonicalize()?;
        let pg_dir = data_dir.join("pg");
        let run_as = if is_root() { Some("postgres".to_owned()) } else { None };
        if run_as.is_some() {
            // The postgres user must be able to traverse the data dir to reach its own cluster.
            set_mode(&data_dir, 0o711)?;
        }
        let password_file = data_dir.join("pg-password");
        let fresh = !pg_dir.join("PG_VERSION").exists();
        let password = if fresh {
            let password = Secret::new(random_token());
            write_private_file(&password_file, password.expose())?;
            password
        } else {
            let text =
                fs::read_to_string(&password_file).with_context(|| format!("reading {}", password_file.display()))?;
            Secret::new(text.trim().to_owned())
        };
        let mut cluster = Self {
            bin_dir,
            pg_dir,
            port: 0,
            password,
            run_as,
            started_here: false,
        };
        if fresh {
            cluster.initdb(&data_dir)?;
        }
        match cluster.running_port() {
            Some(port) => {
                cluster.port = port;
                tracing::info!(dir = %cluster.pg_dir.display(), port, "using the running private PostgreSQL cluster");
            }
            None => {
                cluster.port = free_loopback_port()?;
                cluster.pg_ctl_start()?;
                cluster.started_here = true;
                tracing::info!(dir = %cluster.pg_dir.display(), port = cluster.port, fresh, "started the private PostgreSQL cluster");
            }
        }
        cluster.create_database()?;
        Ok(cluster)
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn connect_options(&self) -> PgConnectOptions {
        PgConnectOptions::new()
            .host("127.0.0.1")
            .port(self.port)
            .username(PRIVATE_DB_USER)
            .password(self.password.expose())
            .database(PRIVATE_DB_NAME)
    }

    /// Stops the cluster (fast shutdown: open sessions are ended, committed data is safe).
    pub fn stop(&self) {
        match self.run(
            self.bin("pg_ctl")
                .args(["stop", "-m", "fast", "-w", "-D"])
                .arg(&self.pg_dir),
        ) {
            Ok(_) => tracing::info!("stopped the private PostgreSQL cluster"),
            Err(e) => tracing::warn!(error = %e, "could not stop the private PostgreSQL cluster"),
        }
    }

    fn initdb(&self, data_dir: &Path) -> anyhow::Result<()> {
        fs::create_dir_all(&self.pg_dir)?;
        // initdb reads the superuser password from a file; it is removed right after.
        let pwfile = data_dir.join("pg-initdb-pw");
        write_private_file(&pwfile, self.password.expose())?;
        if let Some(user) = &self.run_as {
            chown(&self.pg_dir, user)?;
            chown(&pwfile, user)?;
        }
        let result = self.run(
            self.bin("initdb")
                .arg("-D")
                .arg(&self.pg_dir)
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
        result.map(|_| ()).context("initdb failed")
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
                .arg(self.pg_dir.join("server.log"))
                .args(["-o", &options]),
        )
        .map(|_| ())
        .with_context(|| {
            format!(
                "starting PostgreSQL (log: {})",
                self.pg_dir.join("server.log").display()
            )
        })
    }

    /// The port of a cluster already running from this directory (`postmaster.pid` line 4).
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

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self is owned by the process's effective user.
    fs::metadata("/proc/self").map(|m| m.uid() == 0).unwrap_or(false)
}
