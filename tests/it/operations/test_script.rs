//! `scripts/test.sh`, the README's test command, on a pretend machine: a `PATH` of its own whose
//! `apt-get`, `python3`, `id` and `cargo` are stand-ins that write down what they were asked and "install"
//! by creating files. So the set-up runs as root and as another user, with parts missing and
//! present, without root, network or changing this machine. (`.ci/run` runs the real thing.)
//! The throwaway PostgreSQL it starts is tried for real, with this machine's PostgreSQL: it answers
//! the command, it is gone afterwards, and a cluster left by a killed run is removed by the next.

use std::{
    fs,
    os::unix::fs::{symlink, PermissionsExt},
    path::{Path, PathBuf},
    process::{Command, Output},
};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// A pretend machine: stand-ins first on an otherwise bare `PATH`, a log of what they did.
struct Machine {
    dir: tempfile::TempDir,
}

fn write_program(path: &Path, text: &str) {
    fs::write(path, text).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

impl Machine {
    fn bin(&self) -> PathBuf {
        self.dir.path().join("bin")
    }
    fn pg_bin(&self) -> PathBuf {
        self.dir.path().join("pg")
    }
    fn venv(&self) -> PathBuf {
        self.dir.path().join("venv")
    }
    fn log(&self) -> String {
        fs::read_to_string(self.dir.path().join("calls.log")).unwrap_or_default()
    }

    /// Rust is there (the script never installs it); PostgreSQL, Chromium, curl and Python are not.
    fn new() -> Self {
        let machine = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        let (bin, pg, log) = (machine.bin(), machine.pg_bin(), machine.dir.path().join("calls.log"));
        fs::create_dir_all(&bin).unwrap();
        fs::create_dir_all(&pg).unwrap();
        // The few ordinary tools the script uses, from this machine.
        for tool in ["sed", "ls", "sort", "seq", "mktemp", "mkdir", "cp", "chmod", "nproc"] {
            let real = ["/usr/bin", "/bin"]
                .iter()
                .map(|d| Path::new(d).join(tool))
                .find(|p| p.exists())
                .unwrap_or_else(|| panic!("{tool} on this machine"));
            symlink(real, bin.join(tool)).unwrap();
        }
        let log = log.display();
        write_program(
            &bin.join("id"),
            "#!/bin/bash\n[ \"$1\" = -u ] && echo \"$PRETEND_UID\"\n",
        );
        // cargo writes down each run and its test threads, and fails one whose arguments hold
        // PRETEND_CARGO_FAILS.
        write_program(
            &bin.join("cargo"),
            &format!(
                "#!/bin/bash\necho \"cargo $* (threads ${{RUST_TEST_THREADS:-unset}})\" >> {log}\n\
                 [ -z \"$PRETEND_CARGO_FAILS\" ] || [[ \"$*\" != *\"$PRETEND_CARGO_FAILS\"* ]]\n"
            ),
        );
        write_program(&bin.join("rustc"), "#!/bin/bash\necho 'rustc 1.95.0 (pretend)'\n");
        // A virtual environment's python: pip "installs" moto by leaving a mark beside it.
        let venv_python = machine.dir.path().join("venv-python");
        write_program(
            &venv_python,
            &format!(
                "#!/bin/bash\necho \"venv-python $*\" >> {log}\nroot=${{0%/bin/python3}}\n\
                 case \"$1\" in\n  -c) [ -e \"$root/moto-installed\" ] ;;\n  \
                 -m) [ \"$2\" = pip ] && : > \"$root/moto-installed\" ;;\n  *) exit 1 ;;\nesac\n"
            ),
        );
        // What `apt-get install` puts where, for each package.
        let installs = [
            (
                "postgresql",
                ["initdb", "pg_ctl", "psql", "createdb"]
                    .map(|t| format!("{}/{t}", pg.display()))
                    .to_vec(),
            ),
            ("chromium", vec![format!("{}/chromium", bin.display())]),
            ("chromium-driver", vec![format!("{}/chromedriver", bin.display())]),
            ("curl", vec![format!("{}/curl", bin.display())]),
            (
                "python3-venv",
                vec![format!("{}/venv-module", machine.dir.path().display())],
            ),
        ];
        let mut apt = format!(
            "#!/bin/bash\necho \"apt-get $*\" >> {log}\n[ \"$1\" = install ] || exit 0\nfor p in \"$@\"; do case \"$p\" in\n"
        );
        for (package, files) in installs {
            apt.push_str(&format!("  {package})"));
            for f in files {
                apt.push_str(&format!(" printf '#!/bin/sh\\n' > {f}; chmod 755 {f};"));
            }
            apt.push_str(" ;;\n");
        }
        apt.push_str(&format!(
            "  python3) printf '#!/bin/bash\\nexec {}/python3-stand-in \"$@\"\\n' > {}/python3; chmod 755 {}/python3 ;;\n",
            machine.dir.path().display(),
            bin.display(),
            bin.display()
        ));
        apt.push_str("esac; done\n");
        write_program(&bin.join("apt-get"), &apt);
        // The system python3, once installed: makes a virtual environment when python3-venv is.
        write_program(
            &machine.dir.path().join("python3-stand-in"),
            &format!(
                "#!/bin/bash\necho \"python3 $*\" >> {log}\nmodule={dir}/venv-module\n\
                 case \"$1\" in\n  -c) [[ \"$2\" == *moto* ]] && exit 1; [ -e \"$module\" ] ;;\n  \
                 -m) [ \"$2\" = venv ] && [ -e \"$module\" ] && mkdir -p \"$3/bin\" && cp {venv_python} \"$3/bin/python3\" ;;\n  \
                 *) exit 1 ;;\nesac\n",
                dir = machine.dir.path().display(),
                venv_python = venv_python.display(),
            ),
        );
        machine
    }

    /// `scripts/test.sh ARGS` on this machine as the user `uid`.
    fn run(&self, uid: u32, args: &[&str]) -> Output {
        self.run_with(uid, args, &[])
    }

    /// The same, with these variables set as well.
    fn run_with(&self, uid: u32, args: &[&str], vars: &[(&str, &str)]) -> Output {
        Command::new("/bin/bash")
            .arg(Path::new(REPO).join("scripts/test.sh"))
            .args(args)
            .env_clear()
            .env("PATH", self.bin())
            .env("HOME", self.dir.path())
            .env("PRETEND_UID", uid.to_string())
            .env("RENTCHECK_PG_BIN_DIR", self.pg_bin())
            .env("RENTCHECK_TEST_VENV", self.venv())
            .envs(vars.iter().copied())
            .output()
            .unwrap()
    }
}

fn said(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn as_another_user_it_says_exactly_what_to_install_and_stops_having_changed_nothing() {
    let machine = Machine::new();
    let out = machine.run(1000, &["--setup-only"]);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("rust: present (rustc 1.95)"), "{text}");
    assert!(
        text.contains("chromium: missing (Debian: chromium chromium-driver)"),
        "{text}"
    );
    assert!(
        text.contains("as root (e.g. with sudo), install what is missing"),
        "{text}"
    );
    assert!(
        text.contains("\n  apt-get install -y postgresql chromium chromium-driver curl python3 python3-venv\n"),
        "one line to copy: {text}"
    );
    assert_eq!(machine.log(), "", "nothing was run, nothing installed");
    assert!(!machine.venv().exists());
}

#[test]
fn as_root_it_installs_what_is_missing_once_and_a_second_run_installs_nothing() {
    let machine = Machine::new();
    // --check says what would happen and does none of it.
    let out = machine.run(0, &["--check"]);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "something is missing: {text}");
    assert!(text.contains("postgresql: missing (Debian: postgresql)"), "{text}");
    assert!(text.contains("curl: missing (Debian: curl)"), "{text}");
    assert!(
        text.contains(
            "moto: missing; needs python3 and python3-venv (Debian), then moto[server]==5.2.1 would be installed"
        ),
        "{text}"
    );
    assert_eq!(machine.log(), "", "--check installs nothing");

    let first = machine.run(0, &["--setup-only"]);
    let text = said(&first);
    assert!(first.status.success(), "{text}");
    let log = machine.log();
    let installs: Vec<&str> = log.lines().filter(|l| l.starts_with("apt-get install")).collect();
    assert_eq!(
        installs,
        ["apt-get install -y -qq postgresql chromium chromium-driver curl python3 python3-venv"],
        "one apt-get for everything missing: {log}"
    );
    assert!(
        log.contains(&format!("python3 -m venv {}", machine.venv().display())),
        "{log}"
    );
    assert_eq!(
        log.matches("-m pip install --quiet --disable-pip-version-check moto[server]==5.2.1")
            .count(),
        1,
        "{log}"
    );
    for part in ["postgresql", "chromium", "curl", "moto"] {
        assert!(text.contains(&format!("{part}: installed (")), "{part}: {text}");
    }

    // The second run finds everything and installs nothing.
    let before = machine.log();
    let second = machine.run(0, &["--setup-only"]);
    let text = said(&second);
    assert!(second.status.success(), "{text}");
    for part in ["rust", "postgresql", "chromium", "curl", "moto"] {
        assert!(text.contains(&format!("{part}: present (")), "{part}: {text}");
    }
    assert!(text.contains("nothing to install"), "{text}");
    let since = machine.log()[before.len()..].to_owned();
    assert!(!since.contains("apt-get"), "no apt-get: {since}");
    assert!(!since.contains("pip install"), "no pip: {since}");
    assert!(!since.contains("-m venv"), "no new virtual environment: {since}");
    let check = machine.run(0, &["--check"]);
    assert!(check.status.success(), "{}", said(&check));
}

#[test]
fn the_whole_suite_runs_in_two_passes_and_a_failing_first_pass_still_runs_the_timed_one() {
    let machine = Machine::new();
    assert!(machine.run(0, &["--setup-only"]).status.success());
    let cores: usize = String::from_utf8(Command::new("nproc").output().unwrap().stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let threads = (2 * cores).min(16);
    // A server named, so that no cluster is started (its psql, installed above, lets it in).
    let server = ("TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:1/postgres");
    let cargo_runs = |since: usize| -> Vec<String> {
        machine.log()[since..]
            .lines()
            .filter(|l| l.starts_with("cargo "))
            .map(String::from)
            .collect()
    };

    let before = machine.log().len();
    let out = machine.run_with(0, &[], &[server]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        cargo_runs(before),
        [
            format!("cargo test --workspace --locked -- --skip ::timed:: (threads {threads})"),
            format!("cargo test --workspace --locked -- ::timed:: (threads {cores})"),
        ]
    );

    // The first pass fails: the timed pass runs all the same, and the script fails.
    let before = machine.log().len();
    let out = machine.run_with(
        0,
        &[],
        &[server, ("PRETEND_CARGO_FAILS", "--skip"), ("RUST_TEST_THREADS", "3")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", said(&out));
    assert_eq!(
        cargo_runs(before),
        [
            "cargo test --workspace --locked -- --skip ::timed:: (threads 3)".to_owned(),
            format!("cargo test --workspace --locked -- ::timed:: (threads {cores})"),
        ],
        "RUST_TEST_THREADS says how many at a time in the first pass"
    );

    // With arguments: one pass, as cargo test runs it.
    let before = machine.log().len();
    let out = machine.run_with(0, &["--test", "it", "demo"], &[server]);
    assert!(out.status.success(), "{}", said(&out));
    assert_eq!(
        cargo_runs(before),
        ["cargo test --workspace --locked --test it demo (threads unset)"]
    );
}

#[test]
fn without_rust_it_says_how_to_get_it_and_installs_nothing() {
    let machine = Machine::new();
    write_program(
        &machine.bin().join("rustc"),
        "#!/bin/bash\necho 'rustc 1.63.0 (Debian)'\n",
    );
    let out = machine.run(0, &["--setup-only"]);
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(text.contains("rust: missing or too old (rustc 1.63)"), "{text}");
    assert!(text.contains("https://rustup.rs"), "{text}");
    assert_eq!(machine.log(), "", "{text}");
}

#[test]
fn on_this_machine_every_part_is_present_so_the_suite_runs_without_installing() {
    // What the suite itself needs, looked at here: the same check `scripts/test.sh` made before
    // it started this test (or that `cargo test` relies on when run alone).
    let out = Command::new(Path::new(REPO).join("scripts/test.sh"))
        .arg("--check")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", said(&out));
    assert!(said(&out).contains("nothing to install"), "{}", said(&out));
}

/// `scripts/test.sh --run CMD` on this machine for real, with its PostgreSQL; the other parts are
/// named as present (`/bin/true` for the browser, an S3 address) so that nothing is installed.
fn run_for_real(tmpdir: &Path, database_url: Option<&str>, command: &str) -> Output {
    let mut cmd = Command::new("/bin/bash");
    cmd.arg(Path::new(REPO).join("scripts/test.sh"))
        .args(["--run", "sh", "-c", command])
        .env("CHROME", "/bin/true")
        .env("CHROMEDRIVER", "/bin/true")
        .env("RENTCHECK_TEST_S3_ENDPOINT", "http://127.0.0.1:9")
        .env("TMPDIR", tmpdir)
        .env_remove("TEST_DATABASE_URL");
    if let Some(url) = database_url {
        cmd.env("TEST_DATABASE_URL", url);
    }
    cmd.output().unwrap()
}

/// Directories this test made, removed when it ends, passing or not.
struct Planted(Vec<PathBuf>);

impl Drop for Planted {
    fn drop(&mut self) {
        for dir in &self.0 {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// A cluster directory as `scripts/test.sh` makes them, its `owner` file naming `pid`.
fn cluster_dir(parent: &Path, name: &str, pid: u32) -> PathBuf {
    let dir = parent.join(format!("rentcheck-test-pg.{name}-{}", std::process::id()));
    fs::create_dir_all(dir.join("data")).unwrap();
    fs::write(dir.join("owner"), format!("{pid}\n")).unwrap();
    dir
}

#[test]
fn the_throwaway_postgresql_answers_the_command_then_is_gone_and_a_killed_runs_cluster_is_removed() {
    // Both places the script may choose (memory when /dev/shm has room, else TMPDIR) get a
    // cluster left by a killed run (its owner has ended) and one of a run still going (this one).
    let tmp = tempfile::tempdir().unwrap();
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o755)).unwrap(); // for postgres, as root
    let ended = {
        let mut child = Command::new("/bin/true").spawn().unwrap();
        child.wait().unwrap();
        child.id()
    };
    let shm = Path::new("/dev/shm");
    let mut parents = vec![tmp.path().to_path_buf()];
    if shm.is_dir() && fs::metadata(shm).is_ok_and(|m| !m.permissions().readonly()) {
        parents.push(shm.to_path_buf());
    }
    let planted: Vec<(PathBuf, PathBuf)> = parents
        .iter()
        .map(|p| {
            (
                cluster_dir(p, "killed", ended),
                cluster_dir(p, "running", std::process::id()),
            )
        })
        .collect();
    let _removed_at_the_end = Planted(planted.iter().flat_map(|(k, r)| [k.clone(), r.clone()]).collect());
    // The first port the script would try holds a socket that is bound but not listening, as a
    // client's outgoing connection holds one: nothing answers there, yet PostgreSQL cannot bind it.
    let held = (55432..=55532)
        .find_map(|port| {
            let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            if std::net::TcpStream::connect(address).is_ok() {
                return None;
            }
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind(address).ok().map(|()| (port, socket))
        })
        .expect("a port of 55432-55532 to hold");

    let out = run_for_real(
        tmp.path(),
        None,
        r#"echo "url=$TEST_DATABASE_URL"; psql -Atqc "SELECT 'answered'" "$TEST_DATABASE_URL""#,
    );
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    let started = text
        .lines()
        .find_map(|l| l.strip_prefix("test.sh: started a throwaway PostgreSQL on port "))
        .unwrap_or_else(|| panic!("no cluster started: {text}"));
    let (port, dir) = started.split_once(" (").unwrap();
    assert_ne!(
        port,
        held.0.to_string(),
        "a port PostgreSQL could not bind is passed over: {text}"
    );
    drop(held);
    let dir = PathBuf::from(dir.trim_end_matches(')'));
    assert!(
        text.contains(&format!("url=postgres://postgres@127.0.0.1:{port}/postgres\n")),
        "{text}"
    );
    assert!(text.contains("\nanswered\n"), "the command reached it: {text}");
    assert!(
        !dir.exists(),
        "its own cluster is removed at the end: {}",
        dir.display()
    );

    let chosen = dir.parent().unwrap();
    for (killed, running) in &planted {
        assert!(running.exists(), "a live run's cluster is kept: {}", running.display());
        if killed.parent() == Some(chosen) {
            assert!(
                !killed.exists(),
                "a killed run's cluster is removed: {}",
                killed.display()
            );
        }
    }
}

#[test]
fn a_test_database_url_is_used_as_given_and_one_that_refuses_its_user_stops_the_script() {
    let tmp = tempfile::tempdir().unwrap();
    let server =
        std::env::var("TEST_DATABASE_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let out = run_for_real(tmp.path(), Some(&server), r#"echo "url=$TEST_DATABASE_URL""#);
    let text = said(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(&format!("test.sh: PostgreSQL: {server}\n")), "{text}");
    assert!(text.contains(&format!("url={server}\n")), "{text}");
    assert!(!text.contains("a throwaway PostgreSQL"), "{text}");

    let stranger = server.replacen("postgres@", "no_such_role_here@", 1);
    let out = run_for_real(tmp.path(), Some(&stranger), "echo ran");
    let text = said(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains(&format!(
            "TEST_DATABASE_URL={stranger} does not let its user in without a password"
        )),
        "{text}"
    );
    assert!(!text.contains("ran\n"), "the command never ran: {text}");
}
