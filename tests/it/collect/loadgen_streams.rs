//! The built-in load generator against streaming servers on 127.0.0.1 whose timing and stream
//! shapes are known: what it counts as a user would (the first content chunk starts TTFT; error
//! chunks, aborts and streams cut short are failures), for completions and for chat; and what it
//! costs against hostile endpoints (one endless line, endless events, endless data, a huge scrape
//! page, an endless answer to the plan's GET): bounded time and memory, and an error naming the
//! bound.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use axum::{
    body::{Body, Bytes},
    response::Response,
    routing::{get, post},
    Router,
};
use rentcheck::collect::{
    loadgen::{self, LoadSpec, RequestOutput},
    steps::{self, Gathered},
};
use serde_json::{json, Value};

/// The server's first content token comes this long after the request, the next ones this far
/// apart, as the issue's reference server did.
const TTFT: Duration = Duration::from_millis(200);
const GAP: Duration = Duration::from_millis(20);
const TOKENS: u32 = 64;

/// How the server answers its `i`-th request (from 0): every tenth refused, and of the rest one in
/// ten each aborted by an error chunk, ended with `finish_reason: "abort"`, or cut without an end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    Whole,
    Refused,
    ErrorChunk,
    Abort,
    Cut,
}

fn shape_of(i: usize) -> Shape {
    match i % 10 {
        9 => Shape::Refused,
        3 => Shape::ErrorChunk,
        5 => Shape::Abort,
        7 => Shape::Cut,
        _ => Shape::Whole,
    }
}

type Chunks = tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>;

fn event_stream(rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|x| (x, rx)) });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

async fn send(tx: &Chunks, v: &Value) -> bool {
    tx.send(Ok(Bytes::from(format!("data: {v}\n\n")))).await.is_ok()
}

/// A chunk of `text` (empty: a role-only chunk) as a completions or a chat server streams it.
fn chunk(chat: bool, text: &str, first: bool, finish: Option<&str>) -> Value {
    if chat {
        let delta = if first {
            json!({"role": "assistant", "content": text})
        } else {
            json!({"content": text})
        };
        json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    } else {
        json!({"id": "cmpl-1", "object": "text_completion", "model": "m",
               "choices": [{"index": 0, "text": text, "finish_reason": finish}]})
    }
}

/// Streams one answer of `shape`: at once a role-only chunk (as servers send before prefill
/// ends), then `n` tokens on a fixed schedule from `start` (TTFT, then GAP apart), the last with
/// `finish_reason: "length"`, the usage chunk and `[DONE]` — or, for a failing shape, half the
/// tokens and then its ending.
async fn stream_answer(tx: Chunks, chat: bool, n: u32, shape: Shape, start: tokio::time::Instant) {
    if !send(&tx, &chunk(chat, "", true, None)).await {
        return;
    }
    let sent = if shape == Shape::Whole { n } else { n / 2 };
    for k in 0..sent {
        tokio::time::sleep_until(start + TTFT + GAP * k).await;
        let finish = (k + 1 == n).then_some("length");
        if !send(&tx, &chunk(chat, " tok", false, finish)).await {
            return;
        }
    }
    let usage = json!({"id": "cmpl-1", "choices": [], "usage": {"prompt_tokens": 8, "completion_tokens": sent}});
    match shape {
        Shape::Whole => {
            send(&tx, &usage).await;
        }
        Shape::ErrorChunk => {
            let error = json!({"error": {"object": "error", "message": "the engine died", "type": "InternalServerError", "code": 500}});
            send(&tx, &error).await;
        }
        Shape::Abort => {
            send(&tx, &chunk(chat, "", false, Some("abort"))).await;
            send(&tx, &usage).await;
        }
        // The body ends here: no finish reason, no `[DONE]`.
        Shape::Cut | Shape::Refused => return,
    }
    let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
}

/// The server of known timing and shapes, on both `/v1/completions` and `/v1/chat/completions`.
async fn shaped_server() -> (String, Arc<AtomicUsize>) {
    let served = Arc::new(AtomicUsize::new(0));
    let count = served.clone();
    let answer = move |request: axum::extract::Request| {
        let count = count.clone();
        async move {
            let start = tokio::time::Instant::now();
            let i = count.fetch_add(1, Ordering::SeqCst);
            let bytes = axum::body::to_bytes(request.into_body(), 1 << 20).await.unwrap();
            let body: Value = serde_json::from_slice(&bytes).unwrap();
            let chat = body.get("messages").is_some();
            let n = body["max_tokens"]
                .as_u64()
                .or(body["max_completion_tokens"].as_u64())
                .unwrap() as u32;
            let shape = shape_of(i);
            if shape == Shape::Refused {
                return Response::builder().status(503).body(Body::from("overloaded")).unwrap();
            }
            let (tx, rx) = tokio::sync::mpsc::channel(8);
            tokio::spawn(stream_answer(tx, chat, n, shape, start));
            event_stream(rx)
        }
    };
    let app = Router::new()
        .route("/v1/completions", post(answer.clone()))
        .route("/v1/chat/completions", post(answer));
    (serve(app).await, served)
}

async fn serve(app: Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    // TCP_NODELAY as vLLM's server sets it (else Nagle delays the first token by some 40 ms).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    base
}

fn spec(base: &str, endpoint: &str, output_len: u32, rate: f64, n: u32) -> LoadSpec {
    LoadSpec {
        base_url: base.to_owned(),
        endpoint: endpoint.to_owned(),
        model: "m".into(),
        input_len: 8,
        output_len,
        request_rate: rate,
        num_prompts: n,
        goodput: vec![("ttft".into(), 1000.0), ("tpot".into(), 22.0)],
        percentiles: vec![50.0, 99.0],
        seed: 3,
        request_timeout: Duration::from_secs(30),
    }
}

fn within(measured: f64, truth: f64, tolerance: f64, what: &str) {
    assert!(
        (measured - truth).abs() <= tolerance,
        "{what}: measured {measured:.2} ms, the server's timing {truth:.2} ms (± {tolerance} ms)"
    );
}

/// 40 requests of 64 tokens at 20 req/s against the shaped server: 4 refused, 4 ended by an error
/// chunk, 4 aborted, 4 cut short; every answer starts with a role-only chunk.
async fn run_shapes(endpoint: &str) {
    let (base, served) = shaped_server().await;
    let spec = spec(&base, endpoint, TOKENS, 20.0, 40);
    let (outputs, duration) = loadgen::drive(&spec).await.unwrap();
    assert_eq!(served.load(Ordering::SeqCst), 40);
    let r = loadgen::result_json(&spec, &outputs, duration);
    assert_eq!(
        (r["completed"].as_u64(), r["failed"].as_u64()),
        (Some(24), Some(16)),
        "{:?}",
        r["errors"]
    );
    let errors: Vec<&str> = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    let count = |needle: &str| errors.iter().filter(|e| e.contains(needle)).count();
    assert_eq!(count("503"), 4, "{errors:?}");
    assert_eq!(count("error mid-stream: the engine died"), 4, "{errors:?}");
    assert_eq!(count("finish_reason \"abort\""), 4, "{errors:?}");
    assert_eq!(count("ended without [DONE] or a finish reason"), 4, "{errors:?}");
    // A failed request's tokens count nowhere.
    assert_eq!(r["total_output_tokens"], 24 * TOKENS);
    for (o, len) in outputs.iter().zip(r["output_lens"].as_array().unwrap()) {
        if !o.success {
            assert_eq!(len, 0);
            assert!(o.itl.is_empty() && o.ttft == 0.0, "{o:?}");
        }
    }
    // TTFT from the first content chunk, not the role-only one sent at once; TPOT and ITL from
    // the gaps between content chunks.
    let ttft = TTFT.as_secs_f64() * 1000.0;
    let gap = GAP.as_secs_f64() * 1000.0;
    let n = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("no {k} in {r}"));
    // Tolerances for a busy two-core CI machine; reading the role-only chunk as the first token
    // gave a TTFT of about 1 ms and a TPOT of about 23.2 ms here.
    within(n("median_ttft_ms"), ttft + 10.0, 10.0, "TTFT median");
    let earliest = outputs
        .iter()
        .filter(|o| o.success)
        .map(|o| o.ttft * 1000.0)
        .fold(f64::INFINITY, f64::min);
    assert!(
        earliest >= ttft,
        "no first token can come before the server's {ttft} ms: {earliest:.2} ms"
    );
    within(n("median_tpot_ms"), gap, 1.0, "TPOT median");
    within(n("mean_tpot_ms"), gap, 2.0, "TPOT mean");
    within(n("median_itl_ms"), gap, 2.0, "ITL median");
    assert_eq!(r["itls"][0].as_array().unwrap().len(), TOKENS as usize - 1);
    // Goodput at TPOT ≤ 22 ms (and TTFT ≤ 1 s): the completed requests, bar the odd one a busy
    // machine delays (reading the role-only chunk as the first token made it 0); never a failed one.
    let good = (n("request_goodput") * n("duration")).round();
    assert!((20.0..=24.0).contains(&good), "{good} good requests of 24 completed");
}

/// Timed tests (a bound in milliseconds or seconds on work that a busy machine slows):
/// `scripts/test.sh` runs the `timed` modules in a pass of their own, after the rest of the suite.
mod timed {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn completions_count_what_a_user_means_through_role_chunks_errors_aborts_and_cuts() {
        run_shapes("/v1/completions").await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn chat_counts_what_a_user_means_through_role_chunks_errors_aborts_and_cuts() {
        run_shapes("/v1/chat/completions").await;
    }
}

/// Answers every request with `stream()`'s bytes, as fast as the client reads them.
fn hostile<S>(stream: fn() -> S) -> axum::routing::MethodRouter
where
    S: futures_util::Stream<Item = Result<Bytes, std::io::Error>> + Send + 'static,
{
    post(move || async move {
        Response::builder()
            .header("content-type", "text/event-stream")
            .body(Body::from_stream(stream()))
            .unwrap()
    })
}

/// `first`, then `repeated` `times` times (without end for `usize::MAX`).
fn repeat(
    first: &'static [u8],
    repeated: &'static [u8],
    times: usize,
) -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
    let parts = std::iter::once(Bytes::from_static(first))
        .chain(std::iter::repeat_n(Bytes::from_static(repeated), times))
        .map(Ok);
    futures_util::stream::iter(parts)
}

static KIB_64_OF_A: [u8; 64 << 10] = [b'a'; 64 << 10];

/// One line of 16 MB, endless tiny content events, endless comments, and one event of endless
/// data lines.
async fn hostile_server() -> String {
    let app = Router::new()
        .route(
            "/long-line/v1/completions",
            hostile(|| repeat(b"data: ", &KIB_64_OF_A, 256)),
        )
        .route(
            "/many-events/v1/completions",
            hostile(|| {
                repeat(
                    b"",
                    b"data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n",
                    usize::MAX,
                )
            }),
        )
        .route(
            "/comments/v1/completions",
            hostile(|| repeat(b"", b": ping\n", usize::MAX)),
        )
        .route(
            "/endless-data/v1/completions",
            hostile(|| repeat(b"", b"data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n", usize::MAX)),
        );
    serve(app).await
}

async fn drive_hostile(base: &str, path: &str) -> (Vec<RequestOutput>, Value, Duration) {
    let spec = spec(&format!("{base}{path}"), "/v1/completions", 16, f64::INFINITY, 4);
    let started = Instant::now();
    let (outputs, duration) = loadgen::drive(&spec).await.unwrap();
    let took = started.elapsed();
    (outputs.clone(), loadgen::result_json(&spec, &outputs, duration), took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_streams_fail_at_a_named_bound_in_bounded_time() {
    let base = hostile_server().await;
    for (path, bound) in [
        ("/long-line", "an SSE line longer than 1 MiB"),
        ("/many-events", "more than 80 SSE events for 16 tokens asked"),
        ("/comments", "more than 4096 SSE keep-alive lines"),
        ("/endless-data", "an SSE event with more than 1 MiB of data"),
    ] {
        let (outputs, r, took) = drive_hostile(&base, path).await;
        assert_eq!(r["completed"], 0, "{path}: {r}");
        for o in &outputs {
            assert_eq!(o.error, format!("stopped reading: {bound}"), "{path}");
            assert!(o.itl.is_empty(), "{path}: no gap list kept for a failed request");
        }
        // The step that ran it fails, saying what was exceeded.
        assert_eq!(
            loadgen::bound_exceeded(&r).as_deref(),
            Some(format!("4 of 4 requests: stopped reading: {bound}").as_str()),
            "{path}"
        );
        assert!(took < Duration::from_secs(10), "{path} took {took:?}");
    }
}

/// Streams real servers send, each as its bytes: how the generator counts it.
#[tokio::test]
async fn stream_shapes_of_real_servers_are_counted_as_they_mean() {
    const TOKEN: &str = "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":null}]}\n\n";
    // Ten keep-alives while the request waits in the queue (TGI and axum send `:` every 15 s,
    // llama.cpp every 30 s), then a one-token answer: a whole answer, not a hostile server.
    fn queued() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        let keep_alives = ":\n\n".repeat(10);
        let body = format!(
            "{keep_alives}data: {{\"choices\":[{{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}}]}}\n\n\
             data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":8,\"completion_tokens\":1}}}}\n\ndata: [DONE]\n\n"
        );
        futures_util::stream::iter([Ok(Bytes::from(body))])
    }
    // llama.cpp's server before b6530: an error after tokens were sent, as an `error:` field.
    fn llama_cpp_error() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        let body = format!(
            "{TOKEN}error: {{\"code\":500,\"message\":\"Compute error.\",\"type\":\"server_error\"}}\n\ndata: [DONE]\n\n"
        );
        futures_util::stream::iter([Ok(Bytes::from(body))])
    }
    // TGI's completions route: `"finish_reason": ""` on every chunk; here the body is cut before
    // the last chunk.
    fn tgi_cut() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        let chunk = "data: {\"object\":\"text_completion\",\"id\":\"\",\"choices\":[{\"index\":0,\"text\":\" a\",\"logprobs\":null,\"finish_reason\":\"\"}]}\n\n";
        futures_util::stream::iter([Ok(Bytes::from(chunk.repeat(3)))])
    }
    // TensorRT-LLM: a request the server timed out.
    fn trtllm_timeout() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        let body = format!(
            "{TOKEN}data: {{\"choices\":[{{\"index\":0,\"text\":\"\",\"finish_reason\":\"timeout\"}}]}}\n\ndata: [DONE]\n\n"
        );
        futures_util::stream::iter([Ok(Bytes::from(body))])
    }
    // A chat answer whose two tokens were thinking a reasoning parser hid: no content chunk, a
    // finish reason and the usage.
    fn hidden_thinking() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n\
                    data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"length\"}]}\n\n\
                    data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":2}}\n\ndata: [DONE]\n\n";
        futures_util::stream::iter([Ok(Bytes::from_static(body.as_bytes()))])
    }
    // A server that answers at once with nothing: no answer, however fast.
    fn bare_done() -> impl futures_util::Stream<Item = Result<Bytes, std::io::Error>> {
        futures_util::stream::iter([Ok(Bytes::from_static(b"data: [DONE]\n\n"))])
    }
    let base = serve(
        Router::new()
            .route("/queued/v1/completions", hostile(queued))
            .route("/llama-cpp-error/v1/completions", hostile(llama_cpp_error))
            .route("/tgi-cut/v1/completions", hostile(tgi_cut))
            .route("/trtllm-timeout/v1/completions", hostile(trtllm_timeout))
            .route("/hidden-thinking/v1/chat/completions", hostile(hidden_thinking))
            .route("/bare-done/v1/completions", hostile(bare_done)),
    )
    .await;
    let run = |path: &'static str, endpoint: &'static str, output_len: u32| {
        let spec = spec(&format!("{base}{path}"), endpoint, output_len, f64::INFINITY, 1);
        async move { loadgen::drive(&spec).await.unwrap().0.remove(0) }
    };

    let o = run("/queued", "/v1/completions", 1).await;
    assert!(o.success, "{}", o.error);
    assert_eq!(o.output_tokens, Some(1));

    let o = run("/llama-cpp-error", "/v1/completions", 16).await;
    assert!(!o.success);
    assert!(o.error.contains("Compute error."), "{}", o.error);
    assert_eq!(o.output_tokens, None, "a failed request's tokens count nowhere");

    let o = run("/tgi-cut", "/v1/completions", 16).await;
    assert!(!o.success);
    assert_eq!(o.error, "the stream ended without [DONE] or a finish reason");

    let o = run("/trtllm-timeout", "/v1/completions", 16).await;
    assert!(!o.success);
    assert_eq!(o.error, "the stream ended with finish_reason \"timeout\"");

    let o = run("/hidden-thinking", "/v1/chat/completions", 2).await;
    assert!(o.success, "{}", o.error);
    assert_eq!(o.output_tokens, Some(2));
    assert!(
        o.ttft > 0.0 && o.ttft <= o.latency,
        "TTFT {} and E2E {} at the finish",
        o.ttft,
        o.latency
    );

    let o = run("/bare-done", "/v1/completions", 16).await;
    assert!(!o.success);
    assert!(o.error.starts_with("no chunk carried generated content"), "{}", o.error);
}

/// A server whose first eight answers are a 16 MB line each when `hostile` (else one token), and
/// whose ninth is one token after 1.5 s, which keeps the load generator alive to be watched.
async fn sixteen_mb_lines(hostile: bool) -> String {
    let count = Arc::new(AtomicUsize::new(0));
    let app = Router::new().route(
        "/v1/completions",
        post(move || {
            let i = count.fetch_add(1, Ordering::SeqCst);
            async move {
                if i < 8 && hostile {
                    return Response::builder()
                        .header("content-type", "text/event-stream")
                        .body(Body::from_stream(repeat(b"data: ", &KIB_64_OF_A, 256)))
                        .unwrap();
                }
                let (tx, rx) = tokio::sync::mpsc::channel(8);
                tokio::spawn(async move {
                    if i >= 8 {
                        tokio::time::sleep(Duration::from_millis(1500)).await;
                    }
                    send(&tx, &chunk(false, " tok", false, Some("length"))).await;
                    let _ = tx.send(Ok(Bytes::from_static(b"data: [DONE]\n\n"))).await;
                });
                event_stream(rx)
            }
        }),
    );
    serve(app).await
}

/// Runs `rentcheck loadgen` (9 requests of one token) against `base`, watching its peak resident
/// memory (VmHWM) from outside: its result and the peak in KiB.
async fn loadgen_peak_rss(base: &str) -> (Value, u64) {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_rentcheck"))
        .args(["loadgen", "--base-url", base, "--model", "m", "--input-len", "8"])
        .args(["--output-len", "1", "--num-prompts", "9"])
        .env_remove("OPENAI_API_KEY")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id().unwrap();
    let mut peak_kib = 0u64;
    while child.try_wait().unwrap().is_none() {
        if let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            peak_kib = peak_kib.max(hwm.unwrap_or(0));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let out = child.wait_with_output().await.unwrap();
    assert!(peak_kib > 0, "VmHWM was read");
    (serde_json::from_slice(&out.stdout).unwrap(), peak_kib)
}

/// Eight requests meeting a 16 MB line each cost the load generator a few MiB each beyond what
/// calm answers cost (the line's first MiB, the buffers around it and what the allocator keeps):
/// read whole, the eight lines alone would be 128 MB.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_16_mb_line_costs_the_load_generator_bounded_memory() {
    let (calm, calm_kib) = loadgen_peak_rss(&sixteen_mb_lines(false).await).await;
    assert_eq!(
        (calm["completed"].as_u64(), calm["failed"].as_u64()),
        (Some(9), Some(0)),
        "{calm}"
    );
    let (r, peak_kib) = loadgen_peak_rss(&sixteen_mb_lines(true).await).await;
    assert_eq!(
        (r["completed"].as_u64(), r["failed"].as_u64()),
        (Some(1), Some(8)),
        "{r}"
    );
    let over = r["errors"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| *e == "stopped reading: an SSE line longer than 1 MiB")
        .count();
    assert_eq!(over, 8, "{r}");
    let grew_mib = peak_kib.saturating_sub(calm_kib) >> 10;
    assert!(
        grew_mib < 64,
        "peak RSS {} MiB against {} MiB for calm answers",
        peak_kib >> 10,
        calm_kib >> 10
    );
}

/// A `/metrics` page without end, and one that declares 1 GB: the scrape stops at its bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_scrape_page_fails_at_the_bound_without_reading_on() {
    let app = Router::new()
        .route(
            "/endless/metrics",
            get(|| async { Body::from_stream(repeat(b"# HELP x\n", &KIB_64_OF_A, usize::MAX)) }),
        )
        .route(
            "/declared/metrics",
            get(|| async {
                Response::builder()
                    .header("content-length", (1u64 << 30).to_string())
                    .body(Body::from_stream(repeat(b"# HELP x\n", &KIB_64_OF_A, usize::MAX)))
                    .unwrap()
            }),
        )
        .route(
            "/small/metrics",
            get(|| async { Body::from_stream(repeat(b"# HELP x\n", &KIB_64_OF_A, 4)) }),
        );
    let base = serve(app).await;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let Gathered::Failed(why) = steps::scrape_within(&http, &format!("{base}/endless/metrics"), 4 << 20).await else {
        panic!("an endless page is refused");
    };
    assert!(why.contains("larger than 4 MiB, the most a scrape reads"), "{why}");
    let Gathered::Failed(why) = steps::scrape(&http, &format!("{base}/declared/metrics")).await else {
        panic!("a declared 1 GB page is refused");
    };
    assert!(why.contains("larger than 64 MiB"), "{why}");
    assert!(started.elapsed() < Duration::from_secs(10));
    // A page within the bound is read whole.
    let Gathered::Content { body, .. } = steps::scrape(&http, &format!("{base}/small/metrics")).await else {
        panic!("a page under the bound is read");
    };
    assert_eq!(body.len(), 9 + 4 * (64 << 10));
}

/// A server whose answer to the plan's GET never ends: the agent stops at 16 MiB and says so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_endless_answer_from_the_server_is_refused_at_the_bound() {
    use rentcheck::{
        collect::client::{Client, RetryPolicy},
        ids::BriefId,
        secrets::Secret,
    };
    let app = Router::new().route(
        "/plan",
        get(|| async { Body::from_stream(repeat(b"{\"a\": \"", &KIB_64_OF_A, usize::MAX)) }),
    );
    let base = serve(app).await;
    let brief: BriefId = "0193a1f7-0000-7000-8000-000000000001".parse().unwrap();
    let client = Client::new(
        &base,
        brief,
        None,
        Secret::new("t"),
        Duration::from_secs(30),
        RetryPolicy::default(),
    )
    .unwrap();
    let started = Instant::now();
    let refused = client.get_json(&format!("{base}/plan")).await.unwrap_err();
    assert!(
        refused
            .reason
            .contains("the answer is larger than 16 MiB, the most the agent reads"),
        "{}",
        refused.reason
    );
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// What real servers answer the load generator's request bodies and refusals with, and a run
/// dropped mid-way (a plan step whose time ran out).
mod refusals {
    use super::*;

    /// TGI (`max_tokens` with the alias `max_completion_tokens`: serde refuses both) and
    /// TensorRT-LLM (extra fields forbidden, the two names one field) answer 422 to a chat body
    /// naming both; vLLM's 400 for a prompt over its length says why in a JSON message.
    async fn validating_server() -> String {
        let chat = post(|body: axum::Json<Value>| async move {
            if body.get("max_completion_tokens").is_some() && body.get("max_tokens").is_some() {
                return Response::builder()
                    .status(422)
                    .body(Body::from(
                        r#"{"error":"Failed to deserialize the JSON body: duplicate field `max_tokens`"}"#,
                    ))
                    .unwrap();
            }
            let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":\"length\"}]}\n\n\
                        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1}}\n\ndata: [DONE]\n\n";
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(body))
                .unwrap()
        });
        let too_long = post(|| async {
            Response::builder()
                .status(400)
                .body(Body::from(
                    r#"{"object":"error","message":"This model's maximum context length is 4096 tokens.","type":"BadRequestError","code":400}"#,
                ))
                .unwrap()
        });
        // Claims a billion tokens for one asked.
        let overclaimed = post(|| async {
            let body = "data: {\"choices\":[{\"index\":0,\"text\":\" a\",\"finish_reason\":\"length\"}]}\n\n\
                        data: {\"choices\":[],\"usage\":{\"prompt_tokens\":8,\"completion_tokens\":1000000000}}\n\ndata: [DONE]\n\n";
            Response::builder()
                .header("content-type", "text/event-stream")
                .body(Body::from(body))
                .unwrap()
        });
        serve(
            Router::new()
                .route("/tgi/v1/chat/completions", chat)
                .route("/too-long/v1/completions", too_long)
                .route("/overclaimed/v1/completions", overclaimed),
        )
        .await
    }

    #[tokio::test]
    async fn a_chat_body_servers_accept_and_a_refusal_says_why() {
        let base = validating_server().await;
        let run = |path: &'static str, endpoint: &'static str| {
            let spec = spec(&format!("{base}{path}"), endpoint, 1, f64::INFINITY, 1);
            async move { loadgen::drive(&spec).await.unwrap().0.remove(0) }
        };
        let o = run("/tgi", "/v1/chat/completions").await;
        assert!(o.success, "{}", o.error);
        // Its result reads as its own tool's, whose TTFT rule is not vLLM's client's.
        let spec = spec(&base, "/v1/chat/completions", 1, f64::INFINITY, 1);
        let result = loadgen::result_json(&spec, &[o], 1.0).to_string();
        let parsed = rentcheck::evidence::parsers::parse(
            rentcheck::evidence::parsers::EvidenceKind::BenchServing,
            result.as_bytes(),
        )
        .unwrap();
        assert_eq!(parsed.tool.as_deref(), Some("rentcheck loadgen"));
        assert_eq!(parsed.tool_version.as_deref(), Some(env!("CARGO_PKG_VERSION")));
        let o = run("/too-long", "/v1/completions").await;
        assert!(!o.success);
        assert_eq!(
            o.error,
            "400 Bad Request: This model's maximum context length is 4096 tokens."
        );
        let o = run("/overclaimed", "/v1/completions").await;
        assert!(!o.success, "a billion tokens for one asked is no answer");
        assert_eq!(o.error, "the server reported 1000000000 output tokens for 1 asked");
    }

    /// A server that takes the request and never answers. A run dropped after 300 ms (as a plan
    /// step's timeout drops it) ends its requests: the server sees the connection close at once,
    /// not after the request timeout (30 s here).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_dropped_run_ends_its_requests() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let accepted = tokio::spawn(async move {
            let (mut conn, _) = listener.accept().await.unwrap();
            let mut buf = vec![0u8; 64 << 10];
            // Read the request, then wait for the client to go away.
            loop {
                use tokio::io::AsyncReadExt;
                match conn.read(&mut buf).await {
                    Ok(0) | Err(_) => return Instant::now(),
                    Ok(_) => {}
                }
            }
        });
        let spec = spec(&base, "/v1/completions", 16, f64::INFINITY, 1);
        let dropped_at = Instant::now() + Duration::from_millis(300);
        let run = tokio::time::timeout(Duration::from_millis(300), loadgen::drive(&spec)).await;
        assert!(run.is_err(), "the server never answers");
        let closed_at = tokio::time::timeout(Duration::from_secs(5), accepted)
            .await
            .expect("the request ended with its run, not at its 30 s timeout")
            .unwrap();
        assert!(closed_at >= dropped_at - Duration::from_millis(50));
    }
}
