//! Without DATABASE_URL the binary runs its own PostgreSQL cluster in the data dir, stops it on
//! shutdown and finds the same data on the next start.

use std::{
    net::TcpListener,
    path::Path,
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use serde_json::Value;

use crate::common;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn start(data_dir: &Path, port: u16) -> Child {
    Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .arg("serve")
        .env_remove("DATABASE_URL")
        .env_remove("RENTCHECK_JWT_SECRET")
        .env("RENTCHECK_DATA_DIR", data_dir)
        .env("RENTCHECK_ADDR", format!("127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap()
}

/// An external process cannot hand us a bound socket, so poll its readiness endpoint.
async fn wait_ready(client: &reqwest::Client, base: &str, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        if let Ok(res) = client.get(format!("{base}/readyz")).send().await {
            if res.status() == 200 {
                return;
            }
        }
        if let Some(status) = child.try_wait().unwrap() {
            panic!("rentcheck exited early with {status}");
        }
        assert!(Instant::now() < deadline, "rentcheck did not become ready");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn cli(data_dir: &Path, args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .args(args)
        .env_remove("DATABASE_URL")
        .env_remove("RENTCHECK_JWT_SECRET")
        .env("RENTCHECK_DATA_DIR", data_dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

fn stop(child: &mut Child) {
    let status = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status()
        .unwrap();
    assert!(status.success());
    let exit = child.wait().unwrap();
    assert!(exit.success(), "graceful shutdown exits 0, got {exit}");
}

#[tokio::test]
async fn private_cluster_keeps_briefs_across_restarts() {
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();

    let mut server = start(data.path(), port);
    wait_ready(&client, &base, &mut server).await;
    // The CLI shares the running server's cluster (and leaves it running).
    let token = cli(
        data.path(),
        &["user", "add", "--email", "eng@example.com", "--role", "engineer"],
    );
    assert!(token.contains("password (shown once)"));
    let token = cli(data.path(), &["token", "mint", "--email", "eng@example.com"]);
    let client = common::bearer_client(&token);
    let res = client
        .post(format!("{base}/api/v1/briefs"))
        .json(&common::valid_brief())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 201);
    let id = res.json::<Value>().await.unwrap()["id"].as_str().unwrap().to_owned();
    stop(&mut server);
    assert!(
        !data.path().join("pg/postmaster.pid").exists(),
        "the private cluster is stopped with the server"
    );
    let password = std::fs::metadata(data.path().join("pg-password")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        password.permissions().mode() & 0o777,
        0o600,
        "the cluster password is private"
    );

    let mut server = start(data.path(), port);
    wait_ready(&client, &base, &mut server).await;
    let res = client.get(format!("{base}/api/v1/briefs/{id}")).send().await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.json::<Value>().await.unwrap()["name"], "Chat assistant 70B");
    stop(&mut server);
}

#[test]
fn without_a_database_or_postgres_binaries_it_says_both_ways() {
    let data = tempfile::tempdir().unwrap();
    let empty = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .arg("migrate")
        .env_remove("DATABASE_URL")
        .env("RENTCHECK_DATA_DIR", data.path())
        .env("RENTCHECK_PG_BIN_DIR", empty.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("DATABASE_URL"), "{stderr}");
    assert!(stderr.contains("install PostgreSQL"), "{stderr}");
    assert!(stderr.contains("docker compose up"), "{stderr}");
}

/// Ctrl-C at any moment of a first start — while the cluster is initialised, just after it
/// started, while the migrations run — stops that cluster and releases the data dir: no
/// PostgreSQL left running, no lock file left behind (before, a signal between "started the
/// private PostgreSQL cluster" and "serving" killed the process and left both).
#[tokio::test]
async fn a_first_start_stopped_at_any_moment_leaves_no_cluster_and_no_lock() {
    use std::io::{BufRead, BufReader};
    // Each run waits for this line of the log, then sends SIGINT.
    for moment in [
        "initialising the private PostgreSQL cluster",
        "started the private PostgreSQL cluster",
    ] {
        let data_dir = tempfile::tempdir().unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_rentcheck"))
            .arg("serve")
            .env_remove("DATABASE_URL")
            .env_remove("RENTCHECK_JWT_SECRET")
            .env("RENTCHECK_DATA_DIR", data_dir.path())
            .env("RENTCHECK_ADDR", format!("127.0.0.1:{}", free_port()))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut log = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains(moment) {
                    let _ = tx.send(());
                }
                log.push_str(&line);
                log.push('\n');
            }
            log
        });
        rx.recv_timeout(Duration::from_secs(90))
            .unwrap_or_else(|_| panic!("no {moment:?} line"));
        let sent = Command::new("kill")
            .arg("-INT")
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
        let exit = child.wait().unwrap();
        let log = reader.join().unwrap();
        assert!(exit.success(), "{moment}: a stop is a clean exit, got {exit}\n{log}");
        assert!(
            !data_dir.path().join("rentcheck.lock").exists(),
            "{moment}: the lock file is removed\n{log}"
        );
        assert!(
            !data_dir.path().join("pg/postmaster.pid").exists(),
            "{moment}: the cluster is stopped\n{log}"
        );
        assert!(
            !log.contains("rentcheck is serving"),
            "{moment}: it stopped before serving\n{log}"
        );
    }
}
