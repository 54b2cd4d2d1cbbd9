//! The data-dir lock: `<data dir>/rentcheck.lock`, locked with the operating system's advisory file
//! lock (std's `File::try_lock`, `flock` on Linux). The kernel lets go of it when its holder exits,
//! however it exits, so a crash leaves at most a stale file that the next start takes over; a clean
//! stop removes the file. The file's text names the holder (pid, command, state, the cluster's port)
//! so that whoever finds it held can say what holds it, and a command can use a running server's
//! cluster instead of starting its own (and print the URL that server is opened at).
//!
//! Who holds it: `rentcheck serve` for its whole life, or a command (`demo`, `user add`, …) while it
//! runs the private cluster itself because no server does. Never two at once, so the cluster is
//! initialised, started and stopped by one process at a time.

use std::{
    fmt,
    fs::{self, File, OpenOptions, TryLockError},
    io::{Read, Seek, SeekFrom, Write},
    os::unix::fs::MetadataExt,
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use anyhow::{anyhow, bail, Context};

pub const LOCK_FILE: &str = "rentcheck.lock";

/// The command name `rentcheck serve` writes: the one holder that others never wait out.
pub const SERVE: &str = "serve";

/// How often a waiting process looks at the lock again.
const POLL: Duration = Duration::from_millis(100);

/// Where the holder is with the private cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum State {
    /// Initialising or starting the cluster (or waiting to).
    Starting,
    /// The cluster answers on the port written next to it.
    Ready,
    /// Stopping the cluster; the lock is about to be free.
    Stopping,
}

impl State {
    fn as_str(self) -> &'static str {
        match self {
            State::Starting => "starting",
            State::Ready => "ready",
            State::Stopping => "stopping",
        }
    }
}

/// What the lock file says about its holder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    pub pid: u32,
    pub command: String,
    pub state: State,
    pub port: Option<u16>,
    pub since: String,
    /// For `serve`: the URL people open it at, so a command can print that rather than a default.
    pub url: Option<String>,
}

impl Holder {
    /// One `name value` line each; `since` comes last, so a file cut short while it is rewritten
    /// lacks it (or its newline) and reads as nobody rather than with half a port or URL.
    fn to_text(&self) -> String {
        let mut text = format!(
            "pid {}\ncommand {}\nstate {}\n",
            self.pid,
            self.command,
            self.state.as_str()
        );
        if let Some(port) = self.port {
            text.push_str(&format!("port {port}\n"));
        }
        if let Some(url) = &self.url {
            text.push_str(&format!("url {url}\n"));
        }
        text.push_str(&format!("since {}\n", self.since));
        text
    }

    /// `None` for a file being rewritten (empty or cut short) or not ours.
    fn parse(text: &str) -> Option<Self> {
        if !text.ends_with('\n') {
            return None;
        }
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .map(str::trim)
        };
        Some(Self {
            pid: field("pid")?.parse().ok()?,
            command: field("command")?.to_owned(),
            state: match field("state")? {
                "starting" => State::Starting,
                "ready" => State::Ready,
                "stopping" => State::Stopping,
                _ => return None,
            },
            port: field("port").and_then(|p| p.parse().ok()),
            since: field("since")?.to_owned(),
            url: field("url").map(str::to_owned),
        })
    }
}

impl fmt::Display for Holder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "rentcheck {} (pid {}, since {})", self.command, self.pid, self.since)
    }
}

/// The held lock. Dropping it removes the file, then lets go of the lock.
#[derive(Debug)]
pub struct DataDirLock {
    file: File,
    path: PathBuf,
    holder: Holder,
}

impl DataDirLock {
    /// Records the URL this server is opened at (written with the next state).
    pub fn set_url(&mut self, url: &str) {
        self.holder.url = Some(url.to_owned());
    }

    /// Records the cluster's state (and port once it answers) for whoever waits.
    pub fn set_state(&mut self, state: State, port: Option<u16>) -> anyhow::Result<()> {
        self.holder.state = state;
        self.holder.port = port.or(self.holder.port);
        self.write()
    }

    fn write(&mut self) -> anyhow::Result<()> {
        let text = self.holder.to_text();
        // Rewritten in place: the lock belongs to this inode, so the file cannot be replaced by
        // a rename. Readers that catch it half-written parse nothing and look again.
        self.file.set_len(0)?;
        self.file.seek(SeekFrom::Start(0))?;
        self.file
            .write_all(text.as_bytes())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

impl Drop for DataDirLock {
    fn drop(&mut self) {
        // Removed while still held; a waiter that opened the old file notices (see `try_take`).
        let _ = fs::remove_file(&self.path);
    }
}

/// What `acquire` got.
#[derive(Debug)]
pub enum Acquired {
    /// This process holds the lock: it runs the private cluster and stops it when done.
    Owner(DataDirLock),
    /// `rentcheck serve` holds it and its cluster answers on `holder.port`: use that cluster and
    /// leave it running.
    Server(Holder),
}

/// Takes the lock on `data_dir` for `command`, or finds a ready server to use, or waits.
///
/// - free (also after a crash): this process becomes the owner;
/// - held by `serve` with its cluster ready: a command gets `Server`; another `serve` is refused
///   with the holder's pid;
/// - held by a command, or by a `serve` still starting or already stopping: wait, saying once for
///   whom, at most `patience`.
pub fn acquire(data_dir: &Path, command: &str, patience: Duration) -> anyhow::Result<Acquired> {
    let path = data_dir.join(LOCK_FILE);
    let deadline = Instant::now() + patience;
    let mut announced = String::new();
    loop {
        if let Some(mut file) = try_take(&path)? {
            let mut previous = String::new();
            let _ = file.read_to_string(&mut previous);
            if let Some(gone) = Holder::parse(&previous) {
                // The lock was free, so whoever wrote this is no longer running.
                tracing::warn!(
                    lock = %path.display(),
                    "recovered the data-dir lock left by {gone}, which is no longer running"
                );
            }
            let mut lock = DataDirLock {
                file,
                path,
                holder: Holder {
                    pid: std::process::id(),
                    command: command.to_owned(),
                    state: State::Starting,
                    port: None,
                    since: chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC").to_string(),
                    url: None,
                },
            };
            lock.write()?;
            return Ok(Acquired::Owner(lock));
        }
        let holder = fs::read_to_string(&path).ok().and_then(|t| Holder::parse(&t));
        let waiting_for = match &holder {
            Some(h) if h.command == SERVE && command == SERVE => bail!(
                "the data dir {} is in use by {h}: one server per data dir. Stop that one first, \
                 or give this one its own RENTCHECK_DATA_DIR",
                data_dir.display()
            ),
            Some(h) if h.command == SERVE && h.state == State::Ready && h.port.is_some() => {
                return Ok(Acquired::Server(h.clone()));
            }
            Some(h) if h.command == SERVE && h.state == State::Starting => format!(
                "waiting for {h} to finish starting the private PostgreSQL cluster in {}",
                data_dir.display()
            ),
            Some(h) if h.command == SERVE => format!("waiting for {h} to stop"),
            Some(h) => format!("waiting for {h} to finish with {}", data_dir.display()),
            // Being rewritten this instant; the next look names the holder.
            None => String::new(),
        };
        if !waiting_for.is_empty() && waiting_for != announced {
            eprintln!("rentcheck: {waiting_for} …");
            announced = waiting_for;
        }
        if Instant::now() >= deadline {
            let who = holder.map_or_else(|| "another process".to_owned(), |h| h.to_string());
            bail!(
                "gave up after {} s waiting for {who}, which holds {}; when it has stopped, start again",
                patience.as_secs(),
                path.display()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Opens and locks the lock file without waiting: `None` when another process holds it.
fn try_take(path: &Path) -> anyhow::Result<Option<File>> {
    loop {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .with_context(|| format!("opening {}", path.display()))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(anyhow!("locking {}: {e}", path.display())),
        }
        // A holder removes the file just before it lets go, so the file locked here may be that
        // removed one while `path` is already a new file: only a lock on the file at `path` counts.
        let locked = file.metadata()?;
        match fs::metadata(path) {
            Ok(now) if now.dev() == locked.dev() && now.ino() == locked.ino() => return Ok(Some(file)),
            _ => continue,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PATIENCE: Duration = Duration::from_millis(300);

    fn owner(acquired: Acquired) -> DataDirLock {
        match acquired {
            Acquired::Owner(lock) => lock,
            other => panic!("expected to own the lock, got {other:?}"),
        }
    }

    #[test]
    fn holder_text_round_trips_and_a_half_written_file_reads_as_nobody() {
        let holder = Holder {
            pid: 4321,
            command: "user add".into(),
            state: State::Ready,
            port: Some(54321),
            since: "2026-11-30 16:00:00 UTC".into(),
            url: Some("http://127.0.0.1:8123".into()),
        };
        assert_eq!(Holder::parse(&holder.to_text()), Some(holder.clone()));
        let text = holder.to_text();
        for cut in 1..text.len() {
            assert_eq!(Holder::parse(&text[..cut]), None, "cut at {cut}: {:?}", &text[..cut]);
        }
        assert_eq!(Holder::parse(""), None);
    }

    #[test]
    fn a_second_serve_is_refused_with_the_holders_pid_and_a_command_finds_the_ready_server() {
        let dir = tempfile::tempdir().unwrap();
        let mut serve = owner(acquire(dir.path(), SERVE, PATIENCE).unwrap());
        let err = acquire(dir.path(), SERVE, PATIENCE).unwrap_err().to_string();
        assert!(err.contains(&format!("pid {}", std::process::id())), "{err}");
        assert!(err.contains("RENTCHECK_DATA_DIR"), "{err}");

        // Still starting: a command waits, and gives up after its patience naming the server.
        let started = Instant::now();
        let err = acquire(dir.path(), "demo", PATIENCE).unwrap_err().to_string();
        assert!(started.elapsed() >= PATIENCE);
        assert!(err.contains("rentcheck serve (pid"), "{err}");

        serve.set_url("http://127.0.0.1:8123");
        serve.set_state(State::Ready, Some(5999)).unwrap();
        match acquire(dir.path(), "demo", PATIENCE).unwrap() {
            Acquired::Server(h) => assert_eq!(
                (h.command.as_str(), h.port, h.url.as_deref()),
                (SERVE, Some(5999), Some("http://127.0.0.1:8123"))
            ),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_clean_release_removes_the_file_and_the_next_taker_gets_a_fresh_one() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        let lock = owner(acquire(dir.path(), "migrate", PATIENCE).unwrap());
        assert!(fs::read_to_string(&path).unwrap().contains("command migrate"));
        // Another open file description cannot take it while it is held (flock is per open).
        assert!(try_take(&path).unwrap().is_none());
        drop(lock);
        assert!(!path.exists(), "a clean stop removes the lock file");
        let again = owner(acquire(dir.path(), SERVE, PATIENCE).unwrap());
        assert_eq!(again.holder.command, SERVE);
    }

    #[test]
    fn a_file_left_by_a_dead_holder_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join(LOCK_FILE);
        // What a crashed server leaves: the text, and no lock (the kernel dropped it).
        fs::write(
            &path,
            "pid 999999\ncommand serve\nstate ready\nsince 2026-01-01 00:00:00 UTC\nport 5432\n",
        )
        .unwrap();
        let lock = owner(acquire(dir.path(), SERVE, PATIENCE).unwrap());
        let text = fs::read_to_string(&path).unwrap();
        assert!(text.contains(&format!("pid {}\n", std::process::id())), "{text}");
        assert!(
            !text.contains("port 5432"),
            "the dead holder's port is not carried over: {text}"
        );
        drop(lock);
    }
}
