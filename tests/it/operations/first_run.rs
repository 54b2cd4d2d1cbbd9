//! The first five minutes as the README tells them: steps 1 and 2 started together on an empty
//! machine, the data-dir lock (a second server refused, a crash recovered, a command that waits for
//! a first start), database errors that say what was tried, the public URL in what is printed and
//! shown, and the Docker files checked as far as this machine can without a Docker engine.

use std::{
    fs,
    net::TcpListener,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use serde_json::{json, Value};

use crate::common::{self, cookie_client, input_value, spawn_app_with};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// The binary with none of the settings a developer's shell might carry: what a fresh user has.
fn rentcheck(args: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_rentcheck"));
    cmd.args(args);
    for name in [
        "DATABASE_URL",
        "RENTCHECK_DATA_DIR",
        "RENTCHECK_JWT_SECRET",
        "RENTCHECK_PUBLIC_URL",
        "RENTCHECK_ADDR",
        "RENTCHECK_PG_BIN_DIR",
        "XDG_DATA_HOME",
        "RUST_LOG",
    ] {
        cmd.env_remove(name);
    }
    cmd
}

/// A server whose stderr goes to a file, so it can be read while the server runs.
struct Server {
    child: Child,
    log: PathBuf,
    base: String,
}

impl Server {
    fn spawn(mut cmd: Command, port: u16, log: PathBuf) -> Self {
        let child = cmd
            .env("RENTCHECK_ADDR", format!("127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Self {
            child,
            log,
            base: format!("http://127.0.0.1:{port}"),
        }
    }

    fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    async fn wait_ready(&mut self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(res) = client.get(format!("{}/readyz", self.base)).send().await {
                if res.status() == 200 {
                    return;
                }
            }
            if let Some(status) = self.child.try_wait().unwrap() {
                panic!("rentcheck serve exited early with {status}: {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "rentcheck serve did not become ready: {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// SIGTERM, as Ctrl-C or `docker stop` sends: a clean stop exits 0.
    fn stop(mut self) -> String {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .unwrap();
        assert!(status.success());
        let exit = self.child.wait().unwrap();
        assert!(exit.success(), "a clean stop exits 0, got {exit}: {}", self.log());
        self.log()
    }
}

/// Runs a command without blocking the runtime that the test's own HTTP calls use.
async fn output(mut cmd: Command) -> Output {
    tokio::task::spawn_blocking(move || cmd.output().unwrap())
        .await
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The text of a page as a reader sees it (askama escapes quotes and ampersands).
fn unescape(html: &str) -> String {
    html.replace("&#34;", "\"")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#38;", "&")
        .replace("&amp;", "&")
}

/// Signs in through /login like a browser; the client keeps the session cookie.
async fn sign_in(base: &str, email: &str, password: &str) -> reqwest::Client {
    let client = cookie_client();
    let page = client
        .get(format!("{base}/login"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    let csrf = input_value(&page, "csrf_token").expect("the login form has a CSRF token");
    let res = client
        .post(format!("{base}/login"))
        .form(&[
            ("csrf_token", csrf.as_str()),
            ("email", email),
            ("password", password),
            ("next", "/"),
        ])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "the printed login signs in");
    client
}

/// The first inline command of a numbered step in the README's "The first five minutes".
fn readme_step(number: u32) -> String {
    let readme = fs::read_to_string(Path::new(REPO).join("README.md")).unwrap();
    let section = readme
        .split("## The first five minutes")
        .nth(1)
        .expect("the README has a section \"The first five minutes\"");
    let line = section
        .lines()
        .find(|l| l.starts_with(&format!("{number}. ")))
        .unwrap_or_else(|| panic!("the README has a step {number}"));
    line.split('`').nth(1).expect("the step names its command").to_owned()
}

/// `cargo run --release [-- ARGS]` becomes the binary cargo built for the tests, with ARGS.
fn cargo_run_args(step: &str) -> Vec<String> {
    let rest = step
        .strip_prefix("cargo run --release")
        .unwrap_or_else(|| panic!("a step this test knows how to run: {step}"));
    rest.trim()
        .strip_prefix("--")
        .unwrap_or(rest)
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// What `rentcheck demo` printed: the review URL, and the manager's email and password.
fn demo_printout(stdout: &str) -> (String, String, String) {
    let url = stdout
        .lines()
        .find_map(|l| l.strip_prefix("open   "))
        .unwrap_or_else(|| panic!("demo prints a URL: {stdout}"))
        .trim()
        .to_owned();
    let login = stdout
        .lines()
        .find_map(|l| l.strip_prefix("login  "))
        .unwrap_or_else(|| panic!("demo prints a login: {stdout}"));
    let mut words = login.split_whitespace();
    let email = words.next().unwrap().to_owned();
    assert_eq!(words.next(), Some("/"));
    (url, email, words.next().unwrap().to_owned())
}

#[tokio::test]
async fn readme_steps_one_and_two_started_together_on_an_empty_machine_both_work() {
    // The README is what is tested: its step 1 and step 2, as written.
    let (step1, step2) = (readme_step(1), readme_step(2));
    assert_eq!(step1, "cargo run --release");
    assert_eq!(step2, "cargo run --release -- demo");

    let machine = tempfile::tempdir().unwrap();
    // Run as root, the cluster runs as `postgres`, which must reach the data dir.
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(machine.path(), fs::Permissions::from_mode(0o755)).unwrap();
    let home = machine.path().join("home");
    let work = machine.path().join("clone");
    fs::create_dir_all(&home).unwrap();
    fs::create_dir_all(&work).unwrap();
    let port = free_port();
    // A fresh user's shell, in a clone. XDG_DATA_HOME is set to what it means for that user
    // because root's default is /var/lib/rentcheck, which a test must not share.
    let in_a_fresh_shell = |args: Vec<String>| {
        let mut cmd = rentcheck(&[]);
        cmd.args(args)
            .env("HOME", &home)
            .env("XDG_DATA_HOME", home.join(".local/share"))
            .env("RENTCHECK_ADDR", format!("127.0.0.1:{port}"))
            .current_dir(&work);
        cmd
    };

    // Step 1 and, at the same moment, step 2 in another terminal: whichever takes the data dir
    // first, the other waits for it.
    let mut server = Server::spawn(
        in_a_fresh_shell(cargo_run_args(&step1)),
        port,
        machine.path().join("serve.log"),
    );
    let demo = output(in_a_fresh_shell(cargo_run_args(&step2))).await;
    assert!(
        demo.status.success(),
        "demo: {}\nserve: {}",
        text(&demo.stderr),
        server.log()
    );
    let (url, email, password) = demo_printout(&text(&demo.stdout));
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/briefs/")) && url.ends_with("/review"),
        "{url}"
    );
    server.wait_ready().await;

    // Step 3: open the URL and log in; the review shows the computed decision.
    let base = server.base.clone();
    let person = sign_in(&base, &email, &password).await;
    let review = person.get(&url).send().await.unwrap();
    assert_eq!(review.status(), 200);
    assert!(review.text().await.unwrap().contains("data-decision=\"expand\""));

    // Step 5: mint a token on the brief's token page and send evidence the way its curl line says.
    let brief = url.trim_end_matches("/review").rsplit('/').next().unwrap().to_owned();
    let tokens_page = format!("{base}/briefs/{brief}/tokens");
    let page = person.get(&tokens_page).send().await.unwrap().text().await.unwrap();
    let csrf = input_value(&page, "csrf_token").unwrap();
    // The mint answers a redirect (post/redirect/get); the page it leads to shows the token once.
    let res = person
        .post(&tokens_page)
        .form(&[("csrf_token", csrf.as_str()), ("name", "gpu-node-1"), ("ttl", "1d")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303);
    let minted = unescape(&person.get(&tokens_page).send().await.unwrap().text().await.unwrap());
    let start = minted.find("id=\"token-value\">").unwrap() + "id=\"token-value\">".len();
    let token = &minted[start..start + minted[start..].find('<').unwrap()];
    let curl_url = minted
        .split('"')
        .find(|part| part.contains("/evidence?kind="))
        .unwrap_or_else(|| panic!("a curl line with the evidence URL: {minted}"));
    // The demo compares two trials; a token for any of them names the first in its curl line.
    assert!(
        curl_url.starts_with(&format!(
            "{base}/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1&trial="
        )),
        "the curl line names this server and a trial: {curl_url}"
    );
    assert!(minted.contains(&format!("rentcheck collect --server {base} --brief {brief}")));
    let sent = common::bearer_client(token)
        .post(curl_url)
        .body(fs::read(Path::new(REPO).join("data/demo/nvidia-smi-L.txt")).unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(sent.status(), 201, "{}", sent.text().await.unwrap());

    // Everything went to the per-user data dir, nothing into the clone.
    let data_dir = home.join(".local/share/rentcheck");
    assert!(data_dir.join("pg/PG_VERSION").exists());
    assert_eq!(
        fs::read_dir(&work).unwrap().count(),
        0,
        "the working directory stays clean"
    );
    let log = server.stop();
    assert!(
        !data_dir.join("rentcheck.lock").exists(),
        "a clean stop removes the lock: {log}"
    );
    assert!(
        !data_dir.join("pg/postmaster.pid").exists(),
        "the cluster is stopped with the server"
    );
}

/// A directory of PostgreSQL tools whose `initdb` takes `seconds` longer, so that a first start
/// stays in its initialisation long enough for a command to arrive during it.
fn slow_initdb_tools(seconds: u32) -> tempfile::TempDir {
    let real = fs::read_dir("/usr/lib/postgresql")
        .expect("PostgreSQL's binaries in /usr/lib/postgresql")
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|bin| bin.join("initdb").is_file())
        .max()
        .expect("an initdb under /usr/lib/postgresql/*/bin");
    let dir = tempfile::tempdir().unwrap();
    use std::os::unix::fs::{symlink, PermissionsExt};
    let initdb = dir.path().join("initdb");
    fs::write(
        &initdb,
        format!(
            "#!/bin/sh\nsleep {seconds}\nexec {} \"$@\"\n",
            real.join("initdb").display()
        ),
    )
    .unwrap();
    fs::set_permissions(&initdb, fs::Permissions::from_mode(0o755)).unwrap();
    for tool in ["pg_ctl", "psql", "createdb"] {
        symlink(real.join(tool), dir.path().join(tool)).unwrap();
    }
    // As root the tools run as `postgres`, which must reach them.
    fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// Waits until the lock file says `line` (e.g. `state starting`).
async fn lock_says(data_dir: &Path, line: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let text = fs::read_to_string(data_dir.join("rentcheck.lock")).unwrap_or_default();
        if text.lines().any(|l| l == line) {
            return text;
        }
        assert!(Instant::now() < deadline, "the lock never said {line:?}: {text:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_command_started_during_a_first_start_waits_for_it_then_uses_the_servers_cluster() {
    let data = tempfile::tempdir().unwrap();
    let tools = slow_initdb_tools(3);
    let with_data = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("RENTCHECK_DATA_DIR", data.path())
            .env("RENTCHECK_PG_BIN_DIR", tools.path());
        cmd
    };
    let mut server = Server::spawn(with_data(&["serve"]), free_port(), data.path().join("serve.log"));
    let held = lock_says(data.path(), "state starting").await;
    assert!(held.contains(&format!("pid {}\n", server.child.id())), "{held}");

    let added = output(with_data(&[
        "user",
        "add",
        "--email",
        "first@example.com",
        "--role",
        "admin",
    ]))
    .await;
    let said = text(&added.stderr);
    assert!(added.status.success(), "{said}");
    assert!(
        said.contains(&format!(
            "waiting for rentcheck serve (pid {}, since",
            server.child.id()
        )) && said.contains("to finish starting the private PostgreSQL cluster"),
        "it says what it waits for: {said}"
    );
    assert!(
        said.contains("using the private PostgreSQL cluster of rentcheck serve"),
        "{said}"
    );
    let password = text(&added.stdout)
        .rsplit("password (shown once): ")
        .next()
        .unwrap()
        .trim()
        .to_owned();

    // The command left the server's cluster running: the new account signs in at once.
    server.wait_ready().await;
    sign_in(&server.base, "first@example.com", &password).await;
    server.stop();
}

#[tokio::test]
async fn a_server_started_while_a_command_runs_the_cluster_waits_for_it_then_serves() {
    let data = tempfile::tempdir().unwrap();
    let tools = slow_initdb_tools(3);
    let with_data = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("RENTCHECK_DATA_DIR", data.path())
            .env("RENTCHECK_PG_BIN_DIR", tools.path());
        cmd
    };
    // The command gets there first and initialises the cluster itself.
    let mut demo = with_data(&["demo"]);
    let demo = tokio::task::spawn_blocking(move || demo.output().unwrap());
    lock_says(data.path(), "command demo").await;
    let mut server = Server::spawn(with_data(&["serve"]), free_port(), data.path().join("serve.log"));
    let demo = demo.await.unwrap();
    assert!(demo.status.success(), "{}", text(&demo.stderr));
    server.wait_ready().await;
    let log = server.log();
    assert!(
        log.contains("waiting for rentcheck demo (pid") && log.contains("to finish with"),
        "the server says what it waits for: {log}"
    );
    // The demo's data is in the cluster the server now runs.
    let (url, email, password) = demo_printout(&text(&demo.stdout));
    let path = url
        .strip_prefix("http://127.0.0.1:8080")
        .expect("the default public URL");
    let person = sign_in(&server.base, &email, &password).await;
    let review = person.get(format!("{}{path}", server.base)).send().await.unwrap();
    assert_eq!(review.status(), 200);
    server.stop();
}

#[tokio::test]
async fn a_second_serve_on_a_held_data_dir_refuses_naming_the_holder_and_the_first_keeps_serving() {
    let data = tempfile::tempdir().unwrap();
    let with_data = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("RENTCHECK_DATA_DIR", data.path());
        cmd
    };
    let mut first = Server::spawn(with_data(&["serve"]), free_port(), data.path().join("first.log"));
    first.wait_ready().await;
    let secret_before = fs::read_to_string(data.path().join("jwt-secret")).unwrap();

    let mut second = with_data(&["serve"]);
    second.env("RENTCHECK_ADDR", format!("127.0.0.1:{}", free_port()));
    let refused = output(second).await;
    let said = text(&refused.stderr);
    assert!(!refused.status.success());
    assert!(
        said.contains(&format!(
            "is in use by rentcheck serve (pid {}, since",
            first.child.id()
        )),
        "{said}"
    );
    assert!(said.contains("RENTCHECK_DATA_DIR"), "it says what to do: {said}");

    // The first one is untouched: still ready, same cluster, same signing secret, same lock.
    let client = reqwest::Client::new();
    let ready = client.get(format!("{}/readyz", first.base)).send().await.unwrap();
    assert_eq!(ready.status(), 200);
    assert_eq!(
        fs::read_to_string(data.path().join("jwt-secret")).unwrap(),
        secret_before
    );
    lock_says(data.path(), &format!("pid {}", first.child.id())).await;
    first.stop();
}

#[tokio::test]
async fn a_crash_leaves_a_lock_that_the_next_start_recovers() {
    let data = tempfile::tempdir().unwrap();
    let with_data = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("RENTCHECK_DATA_DIR", data.path());
        cmd
    };
    let port = free_port();
    let mut crashed = Server::spawn(with_data(&["serve"]), port, data.path().join("crashed.log"));
    crashed.wait_ready().await;
    let added = output(with_data(&[
        "user",
        "add",
        "--email",
        "kept@example.com",
        "--role",
        "engineer",
    ]))
    .await;
    assert!(added.status.success(), "{}", text(&added.stderr));
    let crashed_pid = crashed.child.id();
    crashed.child.kill().unwrap(); // SIGKILL: no clean-up at all
    crashed.child.wait().unwrap();
    let left = fs::read_to_string(data.path().join("rentcheck.lock")).unwrap();
    assert!(
        left.contains(&format!("pid {crashed_pid}\n")),
        "the crash leaves the lock file: {left}"
    );

    let mut next = Server::spawn(with_data(&["serve"]), port, data.path().join("next.log"));
    next.wait_ready().await;
    assert!(
        next.log().contains(&format!(
            "recovered the data-dir lock left by rentcheck serve (pid {crashed_pid}"
        )),
        "{}",
        next.log()
    );
    lock_says(data.path(), &format!("pid {}", next.child.id())).await;
    // Same cluster, same data: the account made before the crash is there.
    let minted = output(with_data(&["token", "mint", "--email", "kept@example.com"])).await;
    assert!(minted.status.success(), "{}", text(&minted.stderr));
    let token = text(&minted.stdout).trim().to_owned();
    let res = common::bearer_client(&token)
        .get(format!("{}/api/v1/briefs", next.base))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    next.stop();
    assert!(!data.path().join("rentcheck.lock").exists());
    assert!(
        !data.path().join("pg/postmaster.pid").exists(),
        "the cluster the crashed server left running is stopped by the one that took over"
    );
}

#[tokio::test]
async fn a_wrong_database_url_says_in_one_line_where_it_tried_why_it_failed_and_what_to_do() {
    // Nothing listens on a port just released: connection refused, at once.
    let port = free_port();
    let mut cmd = rentcheck(&["migrate"]);
    cmd.env(
        "DATABASE_URL",
        format!("postgres://alice:hunter2-secret@127.0.0.1:{port}/shop"),
    );
    let started = Instant::now();
    let out = output(cmd).await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "a refused connection fails fast, not after the pool's timeout"
    );
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert_eq!(said.trim_end().lines().count(), 1, "one line: {said}");
    for part in [
        format!("127.0.0.1:{port}"),
        "database shop".into(),
        "user alice".into(),
        "Connection refused".into(),
        "DATABASE_URL".into(),
    ] {
        assert!(said.contains(&part), "{part:?} in {said}");
    }
    assert!(!said.contains("hunter2"), "never the password: {said}");
    assert!(!said.contains("pool timed out"), "{said}");

    // A server that answers but has no such database: its reason, once, and what to do.
    let admin: reqwest::Url = common::admin_url().parse().unwrap();
    let missing = format!("rentcheck_missing_{}", uuid::Uuid::new_v4().simple());
    let mut url = admin.clone();
    url.set_path(&missing);
    let mut cmd = rentcheck(&["migrate"]);
    cmd.env("DATABASE_URL", url.as_str());
    let out = output(cmd).await;
    let said = text(&out.stderr);
    assert!(!out.status.success());
    assert_eq!(said.trim_end().lines().count(), 1, "one line: {said}");
    let host_port = format!("{}:{}", admin.host_str().unwrap(), admin.port().unwrap_or(5432));
    assert!(said.contains(&host_port), "{said}");
    assert_eq!(said.matches("does not exist").count(), 1, "the cause once: {said}");
    assert!(
        said.contains(&format!("createdb -U {} {missing}", admin.username())),
        "{said}"
    );
}

#[tokio::test]
async fn demo_prints_the_url_of_the_server_it_found_on_another_port_and_setup_then_points_to_the_login() {
    let data = tempfile::tempdir().unwrap();
    let with_data = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("RENTCHECK_DATA_DIR", data.path());
        cmd
    };
    // The server listens on a port of its own; the terminal the demo runs in knows nothing of it.
    let port = free_port();
    let mut server = Server::spawn(with_data(&["serve"]), port, data.path().join("serve.log"));
    server.wait_ready().await;
    let demo = output(with_data(&["demo"])).await;
    assert!(demo.status.success(), "{}", text(&demo.stderr));
    let (url, email, password) = demo_printout(&text(&demo.stdout));
    assert!(
        url.starts_with(&format!("http://127.0.0.1:{port}/briefs/")),
        "the URL of the server found, on its port {port}: {url}"
    );
    let person = sign_in(&server.base, &email, &password).await;
    assert_eq!(
        person.get(&url).send().await.unwrap().status(),
        200,
        "the printed URL opens"
    );

    // The README's /setup, opened after the demo made an account: it says so and links the login.
    let setup = reqwest::get(format!("{}/setup", server.base)).await.unwrap();
    assert_eq!(setup.status(), 410);
    let page = setup.text().await.unwrap();
    assert!(page.contains("rentcheck is already set up"), "{page}");
    assert!(page.contains("href=\"/login\""), "{page}");
    server.stop();

    // With no server running the demo runs the cluster itself and says that nothing serves it.
    let alone = output(with_data(&["demo"])).await;
    assert!(alone.status.success(), "{}", text(&alone.stderr));
    assert!(
        text(&alone.stderr).contains("no server runs on this data dir"),
        "{}",
        text(&alone.stderr)
    );
    let (url, ..) = demo_printout(&text(&alone.stdout));
    assert!(url.starts_with("http://127.0.0.1:8080/briefs/"), "the default: {url}");
}

/// Asserts that `out` failed with one line on stderr holding every part, and returns it.
fn one_line_failure(out: &Output, parts: &[&str]) -> String {
    let said = text(&out.stderr);
    assert!(!out.status.success(), "it failed: {said}");
    assert_eq!(said.trim_end().lines().count(), 1, "one line: {said}");
    for part in parts {
        assert!(said.contains(part), "{part:?} in {said}");
    }
    said
}

#[tokio::test]
async fn the_messages_a_newcomer_meets_are_one_line_and_say_what_to_do() {
    // Another kind of database.
    let mut cmd = rentcheck(&["migrate"]);
    cmd.env("DATABASE_URL", "mysql://root:hunter2@127.0.0.1:3306/shop");
    let said = one_line_failure(
        &output(cmd).await,
        &["DATABASE_URL is a mysql:// URL", "only with PostgreSQL", "postgres://"],
    );
    assert!(!said.contains("hunter2"), "never the password: {said}");

    // A port where a web server answers (this test's own rentcheck).
    let app = common::spawn_app().await;
    let web = app.base.trim_start_matches("http://").to_owned();
    let mut cmd = rentcheck(&["migrate"]);
    cmd.env("DATABASE_URL", format!("postgres://alice:pw@{web}/shop"));
    let said = one_line_failure(
        &output(cmd).await,
        &[&web, "an HTTP server answers there, not PostgreSQL", "5432"],
    );
    assert!(!said.contains("expected to read"), "{said}");

    // The listen port is taken: the address, and how to choose another.
    let taken: std::net::SocketAddr = web.parse().unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut cmd = rentcheck(&["serve"]);
    cmd.env("RENTCHECK_ADDR", taken.to_string())
        .env("RENTCHECK_DATA_DIR", data.path());
    one_line_failure(
        &output(cmd).await,
        &[
            &format!("cannot listen on {taken}: another program already listens there"),
            &format!("RENTCHECK_ADDR=127.0.0.1:{}", taken.port() + 1),
        ],
    );

    // An agent without its token: the variable to set, not a flag that `ps` would show.
    let mut cmd = rentcheck(&[
        "collect",
        "--server",
        &app.base,
        "--brief",
        &uuid::Uuid::new_v4().to_string(),
    ]);
    cmd.env_remove("RENTCHECK_TOKEN").env_remove("RENTCHECK_TOKEN_FILE");
    let out = output(cmd).await;
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let said = one_line_failure(&out, &["no agent token", "RENTCHECK_TOKEN", "Agent tokens page"]);
    assert!(!said.contains("--token <"), "{said}");
}

#[tokio::test]
async fn migrate_refuses_a_database_holding_other_tables_unless_told_yes() {
    let (database, options) = common::create_database().await;
    let url = format!("{}/{}", common::admin_url().rsplit_once('/').unwrap().0, database.0);
    let shop = common::connect(&options, 1).await;
    // Another application's tables, in the default schema and one of its own, and an extension's
    // view, which is nobody's application.
    sqlx::raw_sql(
        "CREATE TABLE orders (id int); CREATE SCHEMA billing; CREATE TABLE billing.invoices (id int); \
         INSERT INTO orders VALUES (1); CREATE EXTENSION pg_stat_statements;",
    )
    .execute(&shop)
    .await
    .unwrap();
    let installed = |pool: sqlx::PgPool| async move {
        sqlx::query_scalar::<_, bool>("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap()
    };
    let with_url = |args: &[&str]| {
        let mut cmd = rentcheck(args);
        cmd.env("DATABASE_URL", &url);
        cmd
    };

    let said = one_line_failure(
        &output(with_url(&["migrate"])).await,
        &[
            &format!("the database {} at", database.0),
            "already holds 2 tables rentcheck did not make: billing.invoices, orders.",
            "rentcheck migrate --yes",
        ],
    );
    assert!(
        !said.contains("pg_stat_statements"),
        "an extension's view is not a table of another application: {said}"
    );
    assert!(!installed(shop.clone()).await, "nothing was installed");
    // Every command that would install refuses the same way.
    one_line_failure(
        &output(with_url(&[
            "user",
            "add",
            "--email",
            "a@example.com",
            "--role",
            "admin",
        ]))
        .await,
        &["already holds 2 tables", "rentcheck migrate --yes"],
    );

    let yes = output(with_url(&["migrate", "--yes"])).await;
    assert!(yes.status.success(), "{}", text(&yes.stderr));
    assert!(installed(shop.clone()).await);
    let kept: i64 = sqlx::query_scalar("SELECT count(*) FROM orders")
        .fetch_one(&shop)
        .await
        .unwrap();
    assert_eq!(kept, 1, "the other application's data is untouched");
    // Installed once, it is rentcheck's database too: later runs need no --yes.
    let again = output(with_url(&["migrate"])).await;
    assert!(again.status.success(), "{}", text(&again.stderr));
    shop.close().await;
}

#[tokio::test]
async fn printed_and_displayed_urls_use_rentcheck_public_url_and_never_an_unspecified_address() {
    let public = "https://rentcheck.example.com";
    let app = spawn_app_with(rentcheck::config::AppConfig {
        public_url: public.to_owned(),
        ..Default::default()
    })
    .await;
    let demo = |extra: &[(&str, &str)]| {
        let mut cmd = rentcheck(&["demo"]);
        let data = tempfile::tempdir().unwrap();
        cmd.env("DATABASE_URL", &app.database_url)
            .env("RENTCHECK_JWT_SECRET", &app.jwt_secret)
            .env("RENTCHECK_DATA_DIR", data.path());
        for (k, v) in extra {
            cmd.env(k, v);
        }
        async move {
            let out = output(cmd).await;
            drop(data);
            assert!(out.status.success(), "{}", text(&out.stderr));
            demo_printout(&text(&out.stdout))
        }
    };
    // Listening on every address: the URL names loopback, which a person on this machine can open.
    let (url, ..) = demo(&[("RENTCHECK_ADDR", "0.0.0.0:8080")]).await;
    assert!(url.starts_with("http://127.0.0.1:8080/briefs/"), "{url}");
    let (url, email, password) = demo(&[
        ("RENTCHECK_ADDR", "0.0.0.0:8080"),
        ("RENTCHECK_PUBLIC_URL", "https://rentcheck.example.com/"),
    ])
    .await;
    assert!(url.starts_with(&format!("{public}/briefs/")), "{url}");

    // The token page shows agents the public address, whatever Host this browser used.
    let person = app.login_as(&email, &password).await.unwrap();
    let brief = url.trim_end_matches("/review").rsplit('/').next().unwrap().to_owned();
    let res = person
        .client
        .post(app.url(&format!("/briefs/{brief}/tokens")))
        .form(&[("csrf_token", person.csrf.as_str()), ("name", "node"), ("ttl", "1d")])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 303, "post/redirect/get");
    let minted = unescape(
        &person
            .get(app.url(&format!("/briefs/{brief}/tokens")))
            .await
            .text()
            .await
            .unwrap(),
    );
    // The demo brief has two trials and this token may send to either: the line names the first.
    assert!(minted.contains(&format!(
        "\"{public}/api/v1/briefs/{brief}/evidence?kind=nvidia-smi-list&stage=1&trial="
    )));
    assert!(minted.contains(&format!("rentcheck collect --server {public} --brief {brief}")));
    assert!(
        !minted.contains(app.base.trim_start_matches("http://")),
        "not the Host header"
    );

    let mut bad = rentcheck(&["demo"]);
    bad.env("DATABASE_URL", &app.database_url)
        .env("RENTCHECK_PUBLIC_URL", "http://0.0.0.0:8080");
    let out = output(bad).await;
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("RENTCHECK_PUBLIC_URL must name an address others can reach"));
}

// --- Docker ---------------------------------------------------------------------------------------
// No Docker engine runs where these tests run. The compose file is read by `docker compose config`
// when that works here, else parsed as YAML; the Dockerfile is read line by line. Neither builds an
// image or starts a container.

/// `${NAME:-default}` as compose substitutes it, for the YAML path (`docker compose config` does
/// its own).
fn interpolate(value: &str) -> String {
    let mut out = String::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let end = start + rest[start..].find('}').expect("a closed ${…}");
        let inner = &rest[start + 2..end];
        let (name, default) = inner.split_once(":-").unwrap_or((inner, ""));
        out.push_str(&std::env::var(name).unwrap_or_else(|_| default.to_owned()));
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

fn yaml_to_json(yaml: &yaml_rust2::Yaml) -> Value {
    use yaml_rust2::Yaml;
    match yaml {
        Yaml::Hash(map) => Value::Object(
            map.iter()
                .map(|(k, v)| {
                    let key = match k {
                        Yaml::String(s) => s.clone(),
                        Yaml::Integer(i) => i.to_string(),
                        other => panic!("an unexpected key {other:?}"),
                    };
                    (key, yaml_to_json(v))
                })
                .collect(),
        ),
        Yaml::Array(items) => Value::Array(items.iter().map(yaml_to_json).collect()),
        Yaml::String(s) => Value::String(interpolate(s)),
        Yaml::Integer(i) => json!(i),
        Yaml::Real(r) => Value::String(r.clone()),
        Yaml::Boolean(b) => json!(b),
        Yaml::Null => Value::Null,
        other => panic!("unexpected YAML {other:?}"),
    }
}

/// The compose file as compose reads it: `docker compose config` when available, else the YAML.
fn compose_file() -> (Value, &'static str) {
    let available = Command::new("docker")
        .args(["compose", "version"])
        .output()
        .is_ok_and(|o| o.status.success());
    if available {
        let out = Command::new("docker")
            .args(["compose", "-f", "docker-compose.yml", "config", "--format", "json"])
            .current_dir(REPO)
            .env_remove("RENTCHECK_PUBLIC_URL")
            .env_remove("RENTCHECK_PUBLISH")
            .output()
            .unwrap();
        assert!(out.status.success(), "docker compose config: {}", text(&out.stderr));
        return (serde_json::from_slice(&out.stdout).unwrap(), "docker compose config");
    }
    let source = fs::read_to_string(Path::new(REPO).join("docker-compose.yml")).unwrap();
    let docs = yaml_rust2::YamlLoader::load_from_str(&source).expect("docker-compose.yml is valid YAML");
    assert_eq!(docs.len(), 1, "one YAML document");
    (yaml_to_json(&docs[0]), "a YAML parse")
}

/// A service's environment as a map, from either compose form (map or `KEY=value` list).
fn environment(service: &Value) -> serde_json::Map<String, Value> {
    match &service["environment"] {
        Value::Object(map) => map.clone(),
        Value::Array(items) => items
            .iter()
            .filter_map(|i| i.as_str()?.split_once('='))
            .map(|(k, v)| (k.to_owned(), json!(v)))
            .collect(),
        other => panic!("environment: {other}"),
    }
}

fn str_of<'a>(env: &'a serde_json::Map<String, Value>, key: &str) -> &'a str {
    env.get(key)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("{key} is set"))
}

/// Mount targets of a service's volumes, from the short (`name:/path`) or long form.
fn mount_targets(service: &Value) -> Vec<(String, String)> {
    service["volumes"]
        .as_array()
        .map(|vs| {
            vs.iter()
                .map(|v| match v {
                    Value::String(s) => {
                        let (source, target) = s.split_once(':').unwrap();
                        (source.to_owned(), target.split(':').next().unwrap().to_owned())
                    }
                    long => (
                        long["source"].as_str().unwrap().to_owned(),
                        long["target"].as_str().unwrap().to_owned(),
                    ),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Container ports a service publishes, with the host address they are published on.
fn published(service: &Value) -> Vec<(String, u16)> {
    service["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| match p {
            Value::String(s) => {
                let parts: Vec<&str> = s.rsplitn(3, ':').collect();
                (
                    parts.get(2).copied().unwrap_or("").to_owned(),
                    parts[0].parse().unwrap(),
                )
            }
            long => (
                long["host_ip"].as_str().unwrap_or("").to_owned(),
                long["target"].as_u64().unwrap() as u16,
            ),
        })
        .collect()
}

/// The runtime stage of the Dockerfile: its `USER`, `ENV` settings, `RUN` commands and
/// `HEALTHCHECK`, continuation lines joined.
struct RuntimeStage {
    user: String,
    env: Vec<(String, String)>,
    runs: Vec<String>,
    healthcheck: String,
}

fn dockerfile_runtime_stage() -> RuntimeStage {
    let source = fs::read_to_string(Path::new(REPO).join("Dockerfile")).unwrap();
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with('#')) {
        current.push_str(line.trim_end().trim_end_matches('\\'));
        current.push(' ');
        if !line.trim_end().ends_with('\\') {
            if !current.trim().is_empty() {
                instructions.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            current.clear();
        }
    }
    let last_from = instructions.iter().rposition(|i| i.starts_with("FROM ")).unwrap();
    let stage = &instructions[last_from..];
    let mut env = Vec::new();
    for i in stage.iter().filter_map(|i| i.strip_prefix("ENV ")) {
        env.extend(i.split_whitespace().filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_owned(), v.to_owned()))
        }));
    }
    RuntimeStage {
        user: stage
            .iter()
            .filter_map(|i| i.strip_prefix("USER "))
            .next_back()
            .expect("the image names a USER")
            .to_owned(),
        env,
        runs: stage
            .iter()
            .filter_map(|i| i.strip_prefix("RUN "))
            .map(str::to_owned)
            .collect(),
        healthcheck: stage
            .iter()
            .find_map(|i| i.strip_prefix("HEALTHCHECK "))
            .unwrap_or_default()
            .to_owned(),
    }
}

#[test]
fn the_dockerfile_runs_as_a_non_root_user_that_owns_its_data_dir_and_checks_readiness() {
    let stage = dockerfile_runtime_stage();
    let uid = stage.user.split(':').next().unwrap();
    assert!(
        !uid.is_empty() && uid != "0" && uid != "root",
        "not root: {}",
        stage.user
    );
    let data_dir = &stage
        .env
        .iter()
        .find(|(k, _)| k == "RENTCHECK_DATA_DIR")
        .expect("the image sets RENTCHECK_DATA_DIR")
        .1;
    // The runtime user owns the data dir: it is made and chowned to exactly that user.
    let owning = stage
        .runs
        .iter()
        .find(|r| r.contains(&format!("chown {} {data_dir}", stage.user)))
        .unwrap_or_else(|| panic!("a RUN chowns {data_dir} to {}: {:?}", stage.user, stage.runs));
    assert!(owning.contains(&format!("mkdir -p {data_dir}")), "{owning}");
    assert!(
        uid.chars().all(|c| c.is_ascii_digit()),
        "a numeric USER, which Kubernetes' runAsNonRoot can check: {}",
        stage.user
    );
    assert!(
        owning.contains(&format!("--uid {uid}")),
        "that uid is a user of the image: {owning}"
    );
    // The health check asks for readiness with a tool the image installs.
    assert!(stage.healthcheck.contains("/readyz"), "{}", stage.healthcheck);
    let tool = stage
        .healthcheck
        .split("CMD ")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap();
    assert!(
        stage
            .runs
            .iter()
            .any(|r| r.contains("apt-get install") && r.contains(tool)),
        "the image installs {tool}"
    );
}

#[test]
fn the_compose_file_validates_and_runs_the_app_healthy_writable_and_reachable() {
    let (compose, read_by) = compose_file();
    let services = &compose["services"];
    let (db, app) = (&services["db"], &services["app"]);
    assert!(
        db["healthcheck"]["test"].is_array(),
        "{read_by}: the database has a health check"
    );
    assert_eq!(
        app["depends_on"]["db"]["condition"], "service_healthy",
        "{read_by}: the app starts once PostgreSQL is healthy"
    );

    let env = environment(app);
    let db_env = environment(db);
    let url: reqwest::Url = str_of(&env, "DATABASE_URL").parse().unwrap();
    assert_eq!(url.host_str(), Some("db"), "the app reaches the db service");
    assert_eq!(url.username(), str_of(&db_env, "POSTGRES_USER"));
    assert_eq!(url.password(), Some(str_of(&db_env, "POSTGRES_PASSWORD")));
    assert_eq!(url.path().trim_start_matches('/'), str_of(&db_env, "POSTGRES_DB"));

    // The data dir is the one the image's user owns, and a named volume is mounted there, which
    // Docker fills from the image (owner included) when it is new.
    let data_dir = str_of(&env, "RENTCHECK_DATA_DIR");
    let stage = dockerfile_runtime_stage();
    assert!(stage
        .env
        .iter()
        .any(|(k, v)| k == "RENTCHECK_DATA_DIR" && v == data_dir));
    let mounts = mount_targets(app);
    let (volume, _) = mounts
        .iter()
        .find(|(_, target)| target == data_dir)
        .unwrap_or_else(|| panic!("a volume on {data_dir}: {mounts:?}"));
    assert!(
        !volume.starts_with('/') && !volume.starts_with('.'),
        "a named volume, not a host directory owned by someone else: {volume}"
    );

    // It listens where it is published, and says a URL people can open.
    let listen: std::net::SocketAddr = str_of(&env, "RENTCHECK_ADDR").parse().unwrap();
    assert!(
        listen.ip().is_unspecified(),
        "inside a container, listen on every address"
    );
    assert!(
        published(app).contains(&("127.0.0.1".to_owned(), listen.port())),
        "published on this machine's loopback by default: {:?}",
        published(app)
    );
    let public = rentcheck::config::public_url(Some(str_of(&env, "RENTCHECK_PUBLIC_URL")), listen).unwrap();
    assert_eq!(public, format!("http://127.0.0.1:{}", listen.port()));
}

/// The Dockerfile's build stage, instructions joined as `dockerfile_runtime_stage` joins them.
fn dockerfile_build_stage() -> Vec<String> {
    let source = fs::read_to_string(Path::new(REPO).join("Dockerfile")).unwrap();
    let mut instructions = Vec::new();
    let mut current = String::new();
    for line in source.lines().filter(|l| !l.trim_start().starts_with('#')) {
        current.push_str(line.trim_end().trim_end_matches('\\'));
        current.push(' ');
        if !line.trim_end().ends_with('\\') {
            if !current.trim().is_empty() {
                instructions.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            current.clear();
        }
    }
    let second_from = instructions
        .iter()
        .skip(1)
        .position(|i| i.starts_with("FROM "))
        .unwrap()
        + 1;
    instructions[..second_from].to_vec()
}

#[test]
fn the_image_builds_its_dependencies_in_a_layer_that_only_the_manifest_and_lock_decide() {
    let stage = dockerfile_build_stage();
    let builds: Vec<usize> = (0..stage.len())
        .filter(|&i| stage[i].starts_with("RUN ") && stage[i].contains("cargo build --release --locked"))
        .collect();
    assert_eq!(
        builds.len(),
        2,
        "a build of the dependencies, then of rentcheck: {stage:#?}"
    );
    let whole_tree = stage.iter().position(|i| i == "COPY . .").expect("the tree is copied");
    assert!(builds[0] < whole_tree && whole_tree < builds[1], "{stage:#?}");
    // Before the first build only the manifests (the workspace's and its members'), the lock and
    // cargo's settings come in.
    for copy in stage[..builds[0]].iter().filter(|i| i.starts_with("COPY ")) {
        let sources: Vec<&str> = copy.split_whitespace().skip(1).collect();
        let sources = &sources[..sources.len() - 1];
        assert!(
            sources
                .iter()
                .all(|s| ["Cargo.toml", "Cargo.lock", ".cargo", "engine/Cargo.toml"].contains(s)),
            "only what decides the dependencies: {copy}"
        );
    }
    // The stubs stand in for every target the manifest names, and what they built is removed so
    // the real sources are compiled.
    let manifest = fs::read_to_string(Path::new(REPO).join("Cargo.toml")).unwrap();
    let deps = &stage[builds[0]];
    for path in manifest.lines().filter_map(|l| l.trim().strip_prefix("path = \"")) {
        let path = path.trim_end_matches('"');
        assert!(deps.contains(path), "a stub for {path}: {deps}");
    }
    assert!(deps.contains("target/release/.fingerprint/rentcheck-*"), "{deps}");
    assert!(deps.contains("engine/src/lib.rs"), "a stub for the engine: {deps}");
    assert!(deps.contains("target/release/.fingerprint/engine-*"), "{deps}");
}

#[test]
fn no_dependency_compiles_aws_lc_on_a_first_build() {
    // aws-lc-sys compiles a C library for minutes; rustls runs on ring here (Cargo.toml says how).
    let lock = fs::read_to_string(Path::new(REPO).join("Cargo.lock")).unwrap();
    for heavy in ["aws-lc-sys", "aws-lc-rs"] {
        assert!(
            !lock.contains(&format!("name = \"{heavy}\"")),
            "{heavy} is back in Cargo.lock: `cargo tree -i {heavy} -e features` says who asks for it"
        );
    }
}
