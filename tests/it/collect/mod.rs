//! `rentcheck collect` against a real server, with fake `nvidia-smi` and `dcgmi` scripts on PATH
//! that print the project's fixtures, a fake vLLM `/metrics`, and a counting proxy that can answer
//! 503 before it lets requests through.

mod loadgen_streams;
mod plan;
mod plan_hostile;

use crate::common;

use std::{
    path::{Path, PathBuf},
    process::Output,
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, Method, StatusCode, Uri},
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use common::{spawn_app, TestApp};
use rentcheck::auth::Role;
use serde_json::Value;

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn write_script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(
        &path,
        format!("#!/bin/sh\nPATH=/usr/bin:/bin\nF='{}'\n{body}", fixtures().display()),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A directory to use as PATH, holding a fake `nvidia-smi` and, when asked, a fake `dcgmi`.
fn fake_tools(with_dcgmi: bool) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_script(
        dir.path(),
        "nvidia-smi",
        r#"case "$*" in
  "-L") cat "$F/nvidia-smi-list/h200-x8.txt" ;;
  "topo -m") cat "$F/nvidia-smi-topo/h100-x8-degraded-nv17-ansi-header.txt" ;;
  "-q -x") cat "$F/nvidia-smi-query/h100-x2-ecc-errors-v12.xml" ;;
  *) echo "fake nvidia-smi: unexpected arguments: $*" >&2; exit 2 ;;
esac
"#,
    );
    if with_dcgmi {
        write_script(
            dir.path(),
            "dcgmi",
            r#"case "$*" in
  "discovery --list") cat "$F/dcgm-discovery/l40s-x2-dcgm4-status-last-known.txt" ;;
  "diag -r 2 -j") cat "$F/dcgm-diag/dcgm4-json-r2-all-pass.json" ;;
  *) echo "fake dcgmi: unexpected arguments: $*" >&2; exit 2 ;;
esac
"#,
        );
    }
    dir
}

/// Runs the binary without blocking the test's runtime, which also serves the app.
async fn collect(path: &Path, token: &str, args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .arg("collect")
        .args(args)
        .env("PATH", path)
        .env("RENTCHECK_TOKEN", token)
        .env("RENTCHECK_HOST", "gpu-node-7")
        .env_remove("RENTCHECK_SERVER")
        .env_remove("RUST_LOG")
        .output()
        .await
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The summary row of a step: its columns after the step name.
fn row<'a>(stdout: &'a str, step: &str) -> &'a str {
    stdout
        .lines()
        .find(|l| l.starts_with(&format!("{step}  ")))
        .unwrap_or_else(|| panic!("no row for {step} in\n{stdout}"))
}

async fn agent(app: &TestApp) -> (String, String) {
    let brief = app.brief_id().await;
    let token = app.token(Role::Agent, Some(brief.parse().unwrap())).await;
    (brief, token)
}

/// The brief's evidence, newest first, each with its parsed view.
async fn evidence(app: &TestApp, brief: &str) -> Vec<Value> {
    let list: Value = app
        .get(&format!("/api/v1/briefs/{brief}/evidence"))
        .await
        .json()
        .await
        .unwrap();
    let mut out = Vec::new();
    for item in list["items"].as_array().unwrap() {
        let id = item["id"].as_str().unwrap();
        out.push(app.get(&format!("/api/v1/evidence/{id}")).await.json().await.unwrap());
    }
    out
}

fn of_kind<'a>(items: &'a [Value], kind: &str) -> &'a Value {
    items
        .iter()
        .find(|e| e["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} evidence"))
}

/// Serves `text` at GET /metrics, like a vLLM server.
async fn fake_vllm(text: Vec<u8>) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let body = Bytes::from(text);
    let app = Router::new().route("/metrics", get(move || async move { body.clone() }));
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

#[derive(Clone)]
struct Proxy {
    upstream: String,
    posts: Arc<AtomicUsize>,
    unavailable_first: usize,
    /// Answers the batch route 404, as a rentcheck from before it existed would.
    without_batch: bool,
    http: reqwest::Client,
}

/// Counts POSTs; answers the first `unavailable_first` with 503 and `Retry-After: 0`, forwards the rest.
async fn forward(State(p): State<Proxy>, method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    if p.without_batch && uri.path().ends_with("/evidence/batch") {
        p.posts.fetch_add(1, Ordering::SeqCst);
        return (StatusCode::NOT_FOUND, [("content-type", "text/plain")], "Not Found").into_response();
    }
    if method == Method::POST && p.posts.fetch_add(1, Ordering::SeqCst) < p.unavailable_first {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            [("retry-after", "0"), ("content-type", "application/problem+json")],
            r#"{"type":"about:blank","title":"Service Unavailable","status":503}"#,
        )
            .into_response();
    }
    let mut req = p
        .http
        .request(method, format!("{}{}", p.upstream, uri))
        .body(body.to_vec());
    for name in ["authorization", "content-type", "idempotency-key"] {
        if let Some(v) = headers.get(name) {
            req = req.header(name, v.clone());
        }
    }
    let res = req.send().await.unwrap();
    let mut out = Response::builder().status(res.status().as_u16());
    for name in ["content-type", "idempotent-replayed", "location"] {
        if let Some(v) = res.headers().get(name) {
            out = out.header(name, v.as_bytes());
        }
    }
    out.body(axum::body::Body::from(res.bytes().await.unwrap())).unwrap()
}

async fn proxy(app: &TestApp, unavailable_first: usize) -> (String, Arc<AtomicUsize>) {
    proxy_with(app, unavailable_first, false).await
}

async fn proxy_with(app: &TestApp, unavailable_first: usize, without_batch: bool) -> (String, Arc<AtomicUsize>) {
    let posts = Arc::new(AtomicUsize::new(0));
    let state = Proxy {
        upstream: app.base.clone(),
        posts: posts.clone(),
        unavailable_first,
        without_batch,
        http: reqwest::Client::new(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let router = Router::new()
        .fallback(forward)
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state);
    tokio::spawn(async move { axum::serve(listener, router).await.unwrap() });
    (base, posts)
}

#[tokio::test]
async fn tool_output_and_scrape_arrive_parsed() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let tools = fake_tools(true);
    let vllm = fake_vllm(common::fixture("vllm-metrics/window-before.txt")).await;
    let out = collect(
        tools.path(),
        &token,
        &[
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--stage",
            "2",
            "--vllm-url",
            &vllm,
            "--before",
            "--window",
            "load-1",
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("6 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    assert!(
        stderr.contains("[1/6] nvidia-smi -L"),
        "a progress line per step: {stderr}"
    );
    assert!(
        !stdout.contains(&token) && !stderr.contains(&token),
        "the token is never printed"
    );

    let items = evidence(&app, &brief).await;
    let mut kinds: Vec<&str> = items.iter().map(|e| e["kind"].as_str().unwrap()).collect();
    kinds.sort();
    assert_eq!(
        kinds,
        [
            "dcgm-diag",
            "dcgm-discovery",
            "nvidia-smi-list",
            "nvidia-smi-query",
            "nvidia-smi-topo",
            "vllm-metrics"
        ]
    );
    for e in &items {
        assert_eq!(e["stage"], 2);
        assert_eq!(e["labels"]["host"], "gpu-node-7");
        assert!(e["uploaded_by"].is_string(), "uploaded_by is recorded");
    }
    let list = of_kind(&items, "nvidia-smi-list");
    assert_eq!(list["parse_status"], "ok");
    assert_eq!(list["metrics"]["gpu.count"], 8.0);
    assert_eq!(of_kind(&items, "dcgm-diag")["metrics"]["dcgm.diag.passed"], true);
    assert!(of_kind(&items, "nvidia-smi-topo")["metrics"]["topo.gpu_count"].is_number());
    let scrape = of_kind(&items, "vllm-metrics");
    assert_eq!(scrape["labels"]["window"], "load-1");
    assert_eq!(scrape["labels"]["phase"], "before");
    assert!(row(&stdout, "nvidia-smi -L").contains(list["id"].as_str().unwrap()));
}

#[tokio::test]
async fn a_second_run_in_the_same_window_replays_and_creates_nothing() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let tools = fake_tools(true);
    // A fixed --window scopes the keys; without it they are scoped to the UTC hour, which a run
    // could straddle.
    let args = [
        "--server",
        app.base.as_str(),
        "--brief",
        brief.as_str(),
        "--window",
        "trial-1",
    ];
    let first = collect(tools.path(), &token, &args).await;
    assert!(first.status.success(), "{:?}", text(&first));
    assert_eq!(app.count("evidence").await, 5);
    let ids_before: Vec<Value> = evidence(&app, &brief)
        .await
        .into_iter()
        .map(|e| e["id"].clone())
        .collect();

    let second = collect(tools.path(), &token, &args).await;
    let (stdout, stderr) = text(&second);
    assert!(second.status.success(), "{stdout}\n{stderr}");
    assert_eq!(app.count("evidence").await, 5, "no duplicates");
    assert!(stdout.contains("0 sent, 5 replayed, 0 skipped, 0 failed"), "{stdout}");
    // The replay names the evidence the first run created.
    for id in ids_before {
        assert!(stdout.contains(id.as_str().unwrap()), "{id} in\n{stdout}");
    }
    assert!(row(&stdout, "dcgmi diag -r 2 -j").contains("replayed"));
}

#[tokio::test]
async fn a_server_that_answers_503_twice_gets_the_upload_once() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let (server, posts) = proxy(&app, 2).await;
    let bench = fixtures().join("bench-serving/vllm-bench-serve-p95-failed-requests.json");
    let empty = tempfile::tempdir().unwrap();
    let out = collect(
        empty.path(),
        &token,
        &[
            "--server",
            &server,
            "--brief",
            &brief,
            "--stage",
            "3",
            "--no-tools",
            "--bench-json",
            bench.to_str().unwrap(),
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(posts.load(Ordering::SeqCst), 3, "two 503s, then the upload");
    assert_eq!(stderr.matches("retrying").count(), 2, "{stderr}");
    assert_eq!(app.count("evidence").await, 1);
    assert!(stdout.contains("1 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    let items = evidence(&app, &brief).await;
    assert_eq!(items[0]["kind"], "bench-serving");
    assert_eq!(items[0]["stage"], 3);
}

#[tokio::test]
async fn every_step_goes_in_one_request_or_one_by_one_to_a_server_without_the_batch_route() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let tools = fake_tools(true);
    let (batching, posts) = proxy(&app, 0).await;
    let out = collect(tools.path(), &token, &["--server", &batching, "--brief", &brief]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("5 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    assert_eq!(posts.load(Ordering::SeqCst), 1, "five steps, one request");
    assert_eq!(app.count("evidence").await, 5);

    let (other, other_token) = agent(&app).await;
    let (older, posts) = proxy_with(&app, 0, true).await;
    let out = collect(tools.path(), &other_token, &["--server", &older, "--brief", &other]).await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stderr.contains("no batch route"), "{stderr}");
    assert!(stdout.contains("5 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    assert_eq!(
        posts.load(Ordering::SeqCst),
        6,
        "the refused batch, then one post per step"
    );
    assert_eq!(evidence(&app, &other).await.len(), 5);
}

#[tokio::test]
async fn an_item_larger_than_a_batch_carries_is_sent_on_its_own() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let tools = fake_tools(true);
    // 13 MiB of load-test JSON (a detailed per-request export is this large): under the 16 MiB
    // a raw upload takes, over what fits a 16 MiB batch once base64 has added its third.
    let mut bench = std::fs::read(fixtures().join("bench-serving/vllm-bench-serve-p95-failed-requests.json")).unwrap();
    bench.resize(13 * 1024 * 1024, b' ');
    let work = tempfile::tempdir().unwrap();
    let bench_path = work.path().join("detailed.json");
    std::fs::write(&bench_path, &bench).unwrap();
    let (server, posts) = proxy(&app, 0).await;
    let out = collect(
        tools.path(),
        &token,
        &[
            "--server",
            &server,
            "--brief",
            &brief,
            "--bench-json",
            bench_path.to_str().unwrap(),
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("6 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    assert_eq!(
        posts.load(Ordering::SeqCst),
        2,
        "the five tool outputs in one batch, the JSON on its own"
    );
    let items = evidence(&app, &brief).await;
    let bench = of_kind(&items, "bench-serving");
    assert_eq!(bench["size_bytes"], 13 * 1024 * 1024);
    assert_eq!(bench["parse_status"], "ok", "{}", bench["parse_error"]);
}

#[tokio::test]
async fn a_forbidden_upload_stops_the_run_without_retrying() {
    let app = spawn_app().await;
    let (_own_brief, token) = agent(&app).await;
    let other_brief = app.brief_id().await;
    let (server, posts) = proxy(&app, 0).await;
    let tools = fake_tools(true);
    let out = collect(tools.path(), &token, &["--server", &server, "--brief", &other_brief]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert_eq!(
        posts.load(Ordering::SeqCst),
        1,
        "one request, no retry, nothing after it"
    );
    assert_eq!(app.count("evidence").await, 0);
    // Every item went in that one batch request, and every row says why it was refused.
    assert!(row(&stdout, "nvidia-smi -L").contains("403"), "{stdout}");
    assert!(row(&stdout, "dcgmi diag -r 2 -j").contains("403"), "{stdout}");
    assert!(stdout.contains("0 sent, 0 replayed, 0 skipped, 5 failed"), "{stdout}");
    assert!(!stderr.contains("retrying"), "{stderr}");
}

#[tokio::test]
async fn a_missing_dcgmi_is_skipped_with_a_note_and_does_not_fail_the_run() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let tools = fake_tools(false);
    let out = collect(tools.path(), &token, &["--server", &app.base, "--brief", &brief]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for step in ["dcgmi discovery --list", "dcgmi diag -r 2 -j"] {
        let r = row(&stdout, step);
        assert!(r.contains("skipped") && r.contains("dcgmi not found on PATH"), "{r}");
    }
    assert!(stdout.contains("3 sent, 0 replayed, 2 skipped, 0 failed"), "{stdout}");
    assert_eq!(app.count("evidence").await, 3);
}

#[tokio::test]
async fn a_tool_that_fails_still_has_its_output_posted_and_noted() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let dir = tempfile::tempdir().unwrap();
    write_script(
        dir.path(),
        "nvidia-smi",
        "cat \"$F/nvidia-smi-list/driver-failure.txt\"\nexit 9\n",
    );
    let out = collect(
        dir.path(),
        &token,
        &[
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--file",
            "metrics=/nonexistent/x.json",
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    // The unreadable --file fails the run (exit 1); the failing tool does not.
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    let r = row(&stdout, "nvidia-smi -L");
    assert!(r.contains("sent") && r.contains("exited with status 9"), "{r}");
    assert!(row(&stdout, "/nonexistent/x.json").contains("failed"), "{stdout}");
    assert!(stdout.contains("3 sent, 0 replayed, 2 skipped, 1 failed"), "{stdout}");
    let items = evidence(&app, &brief).await;
    assert_eq!(of_kind(&items, "nvidia-smi-list")["parse_status"], "failed");
}

/// The tools collect runs do not see the agent's token.
#[tokio::test]
async fn the_tools_run_without_the_agents_token() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let dir = tempfile::tempdir().unwrap();
    write_script(
        dir.path(),
        "nvidia-smi",
        "echo \"${RENTCHECK_TOKEN:-unset}\" > \"$(dirname \"$0\")/seen\"\ncat \"$F/nvidia-smi-list/h200-x8.txt\"\n",
    );
    collect(dir.path(), &token, &["--server", &app.base, "--brief", &brief]).await;
    let seen = std::fs::read_to_string(dir.path().join("seen")).unwrap();
    assert_eq!(seen.trim(), "unset");
}

#[tokio::test]
async fn a_tool_that_hangs_is_killed_at_the_timeout_and_what_it_printed_is_posted() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let dir = tempfile::tempdir().unwrap();
    write_script(
        dir.path(),
        "nvidia-smi",
        "[ \"$*\" = \"-L\" ] || exit 0\ncat \"$F/nvidia-smi-list/h200-x8.txt\"\nexec sleep 30\n",
    );
    let started = std::time::Instant::now();
    let out = collect(
        dir.path(),
        &token,
        &["--server", &app.base, "--brief", &brief, "--timeout", "1"],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the hung tool was not waited for"
    );
    let r = row(&stdout, "nvidia-smi -L");
    assert!(r.contains("sent") && r.contains("timed out after 1 s"), "{r}\n{stderr}");
    // The other two nvidia-smi calls print nothing: failures, so the run fails.
    assert!(
        row(&stdout, "nvidia-smi topo -m").contains("printed nothing"),
        "{stdout}"
    );
    assert_eq!(out.status.code(), Some(1));
    let items = evidence(&app, &brief).await;
    assert_eq!(of_kind(&items, "nvidia-smi-list")["metrics"]["gpu.count"], 8.0);
}

/// Exit statuses (docs/agents.md): 3 when nothing was sent and nothing failed, whether no step was
/// asked for or every step was skipped; 2 for a wrong command line, before anything is attempted.
#[tokio::test]
async fn nothing_to_send_exits_3_and_a_wrong_command_line_exits_2() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let empty = tempfile::tempdir().unwrap();

    // no GPU tools on PATH: five steps, all skipped
    let out = collect(empty.path(), &token, &["--server", &app.base, "--brief", &brief]).await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stdout.contains("0 sent, 0 replayed, 5 skipped, 0 failed"), "{stdout}");
    assert!(stderr.contains("nothing was sent"), "{stderr}");

    // --no-tools and nothing else: no step at all, the same status
    let out = collect(
        empty.path(),
        &token,
        &["--server", &app.base, "--brief", &brief, "--no-tools"],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{stderr}");
    assert!(stderr.contains("nothing to collect"), "{stderr}");
    assert_eq!(app.count("evidence").await, 0);

    for (args, says) in [
        (vec!["--server", "ftp://x", "--brief", &brief], "--server"),
        (
            vec![
                "--server",
                &app.base,
                "--brief",
                &brief,
                "--scrape",
                "http://127.0.0.1:9/metrics",
                "--window",
                "five",
            ],
            "seconds",
        ),
        (
            vec!["--server", &app.base, "--brief", &brief, "--scrape", "not a url"],
            "--scrape",
        ),
        // clap's own usage errors exit 2 as well
        (
            vec![
                "--server",
                &app.base,
                "--brief",
                &brief,
                "--scrape",
                "http://x",
                "--vllm-url",
                "http://y",
            ],
            "cannot be used with",
        ),
        (vec!["--server", &app.base, "--brief", "not-a-uuid"], "--brief"),
    ] {
        let out = collect(empty.path(), &token, &args).await;
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}\n{stdout}\n{stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
    }
    assert_eq!(app.count("evidence").await, 0);
}

/// Serves `before` at the first GET /metrics and `after` from then on, like an exporter whose
/// counters moved during the window.
async fn fake_exporter(before: Vec<u8>, after: Vec<u8>) -> String {
    let hits = Arc::new(AtomicUsize::new(0));
    let (before, after) = (Bytes::from(before), Bytes::from(after));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let app = Router::new().route(
        "/metrics",
        get(move || async move {
            if hits.fetch_add(1, Ordering::SeqCst) == 0 {
                before.clone()
            } else {
                after.clone()
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

/// `--scrape` twice: dcgm-exporter and vLLM are each scraped before and after a one-second window,
/// and the server reads each `after` as the window's difference.
#[tokio::test]
async fn scrape_posts_a_before_after_pair_per_endpoint() {
    let app = spawn_app().await;
    let (brief, token) = agent(&app).await;
    let dcgm = fake_exporter(
        common::fixture("dcgm-exporter/l4-window-before.txt"),
        common::fixture("dcgm-exporter/l4-window-after.txt"),
    )
    .await;
    let vllm = fake_exporter(
        common::fixture("vllm-metrics/window-before.txt"),
        common::fixture("vllm-metrics/window-after.txt"),
    )
    .await;
    let empty = tempfile::tempdir().unwrap();
    let started = std::time::Instant::now();
    let out = collect(
        empty.path(),
        &token,
        &[
            "--server",
            &app.base,
            "--brief",
            &brief,
            "--stage",
            "3",
            "--no-tools",
            "--scrape",
            &dcgm,
            "--scrape",
            &vllm,
            "--window",
            "1",
        ],
    )
    .await;
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "the window was waited for"
    );
    assert!(stdout.contains("4 sent, 0 replayed, 0 skipped, 0 failed"), "{stdout}");
    assert!(stderr.contains("waiting 1 s"), "{stderr}");
    assert!(
        row(&stdout, &format!("GET {dcgm}/metrics (after)")).contains("dcgm-exporter"),
        "{stdout}"
    );

    let items = evidence(&app, &brief).await;
    assert_eq!(items.len(), 4);
    let window = items[0]["labels"]["window"].as_str().unwrap().to_owned();
    assert!(stdout.contains(&format!("scrape window: {window}")), "{stdout}");
    let find = |kind: &str, phase: &str| {
        items
            .iter()
            .find(|e| e["kind"] == kind && e["labels"]["phase"] == phase)
            .unwrap_or_else(|| panic!("no {kind} {phase}"))
    };
    for kind in ["dcgm-exporter", "vllm-metrics"] {
        for phase in ["before", "after"] {
            let e = find(kind, phase);
            assert_eq!(e["labels"]["window"], window.as_str(), "one window id for the pair");
            assert_eq!(e["stage"], 3);
        }
    }
    // energy counter 4 742 776 → 8 942 776 mJ: 4 200 J in the window
    let after = find("dcgm-exporter", "after");
    assert_eq!(after["metrics"]["gpu.energy_joules"], 4200.0, "{after}");
    assert_eq!(after["metrics"]["dcgm_exporter.window"], true);
    assert_eq!(
        find("dcgm-exporter", "before")["metrics"].get("gpu.energy_joules"),
        None
    );
}
