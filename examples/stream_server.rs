//! An OpenAI-compatible streaming server with known timing, for scripts/bench-loadgen.sh: each
//! answer to `POST /v1/completions` (or `/v1/chat/completions`) sends a role-only chunk at once,
//! then `max_tokens` (or `max_completion_tokens`) tokens on a fixed schedule from the request's
//! arrival — the first after TTFT_MS, the next GAP_MS apart — the last with
//! `finish_reason: "length"`, then the usage chunk and `[DONE]`.
//!
//! It keeps its own log: per request, the milliseconds from the arrival to the moment it handed
//! the first token to the connection. `GET /log` answers them as a JSON array and forgets them.
//!
//! `cargo run --release --example stream_server -- PORT TTFT_MS GAP_MS` (loopback only).

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use axum::{
    body::{Body, Bytes},
    extract::State,
    response::Response,
    routing::{get, post},
    Json, Router,
};
use serde_json::{json, Value};
use tokio::time::Instant;

#[derive(Clone)]
struct Timing {
    ttft: Duration,
    gap: Duration,
    /// Server-side TTFT of each request since the last `GET /log`, in milliseconds.
    log: Arc<Mutex<Vec<f64>>>,
}

struct Answer {
    timing: Timing,
    arrived: Instant,
    tokens: u32,
    chat: bool,
    /// Chunks sent so far (the role-only one is 0).
    next: u32,
}

fn data(v: &Value) -> Bytes {
    Bytes::from(format!("data: {v}\n\n"))
}

fn token_chunk(chat: bool, text: &str, role: bool, finish: Option<&str>) -> Bytes {
    data(&if chat {
        let delta = if role {
            json!({"role": "assistant", "content": text})
        } else {
            json!({"content": text})
        };
        json!({"id": "chatcmpl-b", "object": "chat.completion.chunk", "model": "m",
               "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    } else {
        json!({"id": "cmpl-b", "object": "text_completion", "model": "m",
               "choices": [{"index": 0, "text": text, "finish_reason": finish}]})
    })
}

/// The next piece of an answer, when its time has come.
async fn next_piece(mut a: Answer) -> Option<(Result<Bytes, std::io::Error>, Answer)> {
    let k = a.next;
    a.next += 1;
    let piece = match k {
        0 => token_chunk(a.chat, "", true, None),
        k if k <= a.tokens => {
            tokio::time::sleep_until(a.arrived + a.timing.ttft + a.timing.gap * (k - 1)).await;
            if k == 1 {
                let ms = a.arrived.elapsed().as_secs_f64() * 1000.0;
                a.timing.log.lock().unwrap().push(ms);
            }
            let finish = (k == a.tokens).then_some("length");
            token_chunk(a.chat, " tok", false, finish)
        }
        k if k == a.tokens + 1 => {
            let usage = json!({"id": "cmpl-b", "choices": [],
                               "usage": {"prompt_tokens": 8, "completion_tokens": a.tokens}});
            let mut end = data(&usage).to_vec();
            end.extend_from_slice(b"data: [DONE]\n\n");
            Bytes::from(end)
        }
        _ => return None,
    };
    Some((Ok(piece), a))
}

async fn answer(State(timing): State<Timing>, Json(body): Json<Value>) -> Response {
    let arrived = Instant::now();
    let tokens = body["max_tokens"]
        .as_u64()
        .or(body["max_completion_tokens"].as_u64())
        .unwrap_or(16)
        .clamp(1, 100_000) as u32;
    let a = Answer {
        timing,
        arrived,
        tokens,
        chat: body.get("messages").is_some(),
        next: 0,
    };
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(futures_util::stream::unfold(a, next_piece)))
        .unwrap()
}

async fn log(State(timing): State<Timing>) -> Json<Vec<f64>> {
    Json(std::mem::take(&mut *timing.log.lock().unwrap()))
}

#[tokio::main]
async fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("PORT TTFT_MS GAP_MS, numbers"))
        .collect();
    let [port, ttft_ms, gap_ms] = args[..] else {
        eprintln!("usage: stream_server PORT TTFT_MS GAP_MS");
        std::process::exit(2);
    };
    let timing = Timing {
        ttft: Duration::from_millis(ttft_ms),
        gap: Duration::from_millis(gap_ms),
        log: Arc::default(),
    };
    let app = Router::new()
        .route("/v1/completions", post(answer))
        .route("/v1/chat/completions", post(answer))
        .route("/log", get(log))
        .with_state(timing);
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port as u16)).await.unwrap();
    // TCP_NODELAY as vLLM's server sets it: no Nagle delay on the first token.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    axum::serve(listener, app).await.unwrap();
}
