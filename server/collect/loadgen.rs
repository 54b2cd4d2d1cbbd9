//! The built-in load generator (`rentcheck loadgen`, and `collect --plan`'s load points when
//! neither `vllm bench serve` nor `guidellm` is installed).
//!
//! It does what `vllm bench serve` does with its OpenAI backends, and measures as it measures
//! (vLLM's `vllm/benchmarks/serve.py` and `lib/endpoint_request_func.py`):
//! * open-loop arrivals: exponential gaps at the offered rate (a Poisson process, burstiness 1),
//!   rescaled so the last arrival falls at `num_prompts ÷ rate`; each request is sent when it
//!   arrives, whatever the earlier ones are doing;
//! * each request streams (`stream: true`, `stream_options.include_usage`, `ignore_eos`);
//!   **E2E** (`latency`) = the last content chunk − the send; output tokens = the usage chunk's
//!   `completion_tokens` (without one, the content chunks counted — vLLM counts with a tokenizer);
//! * where this differs from vLLM's client, it counts what a user means: **TTFT** = the first
//!   chunk that carries generated content (completion text; in chat, content, reasoning text or a
//!   tool call) − the send, so a role-only or empty first chunk, which servers send before prefill
//!   ends, starts nothing; **ITL** = the gap between successive content chunks; a stream that
//!   carries an error object (`data: {"error": …}`, or llama.cpp's older `error:` field), ends
//!   with a `finish_reason` of `error` or `abort` (or TensorRT-LLM's `timeout`, `cancelled`), or
//!   ends without `[DONE]` or a finish reason (an empty `""` one, as TGI sends on every chunk, is
//!   none) is a **failed** request (an error text, TTFT 0, no gaps, no tokens), where vLLM's
//!   client counts the chunks before it as a success; a whole answer with no content chunk but a
//!   finish reason completes, its TTFT and E2E at the finish (a bare `[DONE]` is no answer);
//! * a hostile or broken server costs bounded memory and time: one SSE line or event ≤ 1 MiB,
//!   at most [`max_events`] events per request (so the gap list is bounded too; keep-alive
//!   comments, which a healthy server sends while a request is queued, have their own bound), read by
//!   [`super::sse`]; a request over a bound fails with an error naming it ([`bound_exceeded`]);
//! * per completed request **TPOT** = (E2E − TTFT) ÷ (output tokens − 1) when it has more than one
//!   token; `request_throughput` = completed ÷ duration (from the first arrival's schedule to the
//!   last answer); `request_goodput` = requests that met every `--goodput` target (TTFT, TPOT — 0
//!   for one-token answers — and E2E ≤ the target) ÷ duration; percentiles as numpy's linear ones,
//!   std the population one.
//!
//! The result is the JSON `vllm bench serve --save-result --save-detailed` writes (the same keys,
//! with the per-request arrays `input_lens`, `output_lens`, `ttfts`, `itls`, `latencies`,
//! `start_times`, `errors`; `generated_texts` is left out to keep uploads small), so the same
//! parser reads it. Prompts are words drawn at random (most tokenizers make one token of each);
//! `input_lens` records what the server counted (`prompt_tokens`), as vLLM does.

use std::{
    ops::ControlFlow,
    path::PathBuf,
    time::{Duration, Instant},
};

use chrono::Utc;
use clap::Args;
use futures_util::StreamExt;
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Map, Value};

use super::sse;

/// The flags of `rentcheck loadgen`, named as `vllm bench serve` names them.
#[derive(Clone, Debug, Args)]
pub struct LoadgenArgs {
    /// The OpenAI-compatible server.
    #[arg(long, default_value = "http://127.0.0.1:8000")]
    pub base_url: String,
    /// `/v1/completions`, or `/v1/chat/completions` for chat.
    #[arg(long, default_value = "/v1/completions")]
    pub endpoint: String,
    /// The model name the server serves.
    #[arg(long)]
    pub model: String,
    /// Prompt tokens per request (about: words drawn at random).
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
    pub input_len: u32,
    /// Output tokens per request (`max_tokens`, with `ignore_eos`).
    #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
    pub output_len: u32,
    /// Offered requests per second (Poisson arrivals); `inf` sends them all at once.
    #[arg(long, default_value_t = f64::INFINITY)]
    pub request_rate: f64,
    /// Requests in all.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub num_prompts: u32,
    /// SLO targets for goodput as KEY:MS pairs (ttft, tpot, e2el), e.g. `--goodput ttft:300 tpot:40`.
    #[arg(long, num_args = 1..)]
    pub goodput: Vec<String>,
    /// Percentiles to report, comma-separated.
    #[arg(long, default_value = "50,95,99")]
    pub metric_percentiles: String,
    /// Seed of the arrival times and prompts.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write the result JSON here (default: stdout).
    #[arg(long)]
    pub result_file: Option<PathBuf>,
    /// Seconds one request may take.
    #[arg(long, default_value_t = 600, value_parser = clap::value_parser!(u64).range(1..))]
    pub request_timeout: u64,
}

/// One load run.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    pub base_url: String,
    pub endpoint: String,
    pub model: String,
    pub input_len: u32,
    pub output_len: u32,
    pub request_rate: f64,
    pub num_prompts: u32,
    /// (`ttft` | `tpot` | `e2el`, milliseconds)
    pub goodput: Vec<(String, f64)>,
    pub percentiles: Vec<f64>,
    pub seed: u64,
    pub request_timeout: Duration,
}

impl LoadSpec {
    pub fn from_args(a: &LoadgenArgs) -> Result<Self, String> {
        let percentiles = a
            .metric_percentiles
            .split(',')
            .map(|p| p.trim().parse::<f64>().ok().filter(|p| (0.0..=100.0).contains(p)))
            .collect::<Option<Vec<f64>>>()
            .ok_or_else(|| {
                format!(
                    "--metric-percentiles {:?}: comma-separated numbers from 0 to 100",
                    a.metric_percentiles
                )
            })?;
        Ok(Self {
            base_url: a.base_url.clone(),
            endpoint: a.endpoint.clone(),
            model: a.model.clone(),
            input_len: a.input_len,
            output_len: a.output_len,
            request_rate: a.request_rate,
            num_prompts: a.num_prompts,
            goodput: parse_goodput(&a.goodput)?,
            percentiles,
            seed: a.seed,
            request_timeout: Duration::from_secs(a.request_timeout),
        })
    }
}

/// `KEY:MS` pairs as `vllm bench serve --goodput` takes them.
pub fn parse_goodput(pairs: &[String]) -> Result<Vec<(String, f64)>, String> {
    pairs
        .iter()
        .map(|p| {
            let (k, v) = p
                .split_once(':')
                .ok_or_else(|| format!("--goodput {p:?}: expected KEY:MILLISECONDS"))?;
            if !["ttft", "tpot", "e2el"].contains(&k) {
                return Err(format!("--goodput {p:?}: the key is ttft, tpot or e2el"));
            }
            let ms: f64 = v
                .parse()
                .ok()
                .filter(|x: &f64| x.is_finite() && *x >= 0.0)
                .ok_or_else(|| format!("--goodput {p:?}: the value is milliseconds, 0 or more"))?;
            Ok((k.to_owned(), ms))
        })
        .collect()
}

/// What one request gave, as vLLM's `RequestFuncOutput` holds it (seconds).
#[derive(Debug, Clone, Default)]
pub struct RequestOutput {
    pub success: bool,
    pub ttft: f64,
    pub itl: Vec<f64>,
    pub latency: f64,
    /// The usage chunk's `completion_tokens`.
    pub output_tokens: Option<u64>,
    /// Chunks that carried `choices`.
    pub chunks: u64,
    pub prompt_len: u64,
    pub error: String,
    /// Seconds from the run's start to the send.
    pub start_time: f64,
}

/// Arrival offsets (seconds from the start) of `n` requests at `rate`: exponential gaps, the
/// cumulative sum rescaled so the last is `n ÷ rate` (vLLM does this to steady the throughput across
/// seeds); all zero for an infinite rate.
pub fn arrivals(n: u32, rate: f64, seed: u64) -> Vec<f64> {
    if !rate.is_finite() {
        return vec![0.0; n as usize];
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    let mut out: Vec<f64> = (0..n)
        .map(|_| {
            let u: f64 = rng.gen::<f64>();
            t += -(1.0 - u).ln() / rate;
            t
        })
        .collect();
    if let Some(&last) = out.last() {
        if last > 0.0 {
            let factor = f64::from(n) / rate / last;
            for x in &mut out {
                *x *= factor;
            }
        }
    }
    out
}

/// Common short words: most tokenizers make one token of each (with its leading space).
const WORDS: [&str; 64] = [
    "the", "of", "and", "to", "in", "is", "it", "you", "that", "he", "was", "for", "on", "are", "as", "with", "his",
    "they", "at", "be", "this", "have", "from", "or", "one", "had", "by", "word", "but", "not", "what", "all", "were",
    "we", "when", "your", "can", "said", "there", "use", "an", "each", "which", "she", "do", "how", "their", "if",
    "will", "up", "other", "about", "out", "many", "then", "them", "these", "so", "some", "her", "would", "make",
    "like", "him",
];

fn prompt(rng: &mut StdRng, tokens: u32) -> String {
    let mut s = String::with_capacity(tokens as usize * 5);
    for i in 0..tokens {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(WORDS[rng.gen_range(0..WORDS.len())]);
    }
    s
}

fn is_chat(endpoint: &str) -> bool {
    endpoint.trim_end_matches('/').ends_with("chat/completions")
}

fn request_body(spec: &LoadSpec, prompt: String) -> Value {
    if is_chat(&spec.endpoint) {
        json!({
            "model": spec.model,
            "messages": [{ "role": "user", "content": prompt }],
            // `max_tokens` alone: every server reads it (Ollama only it), and TGI (an alias of
            // one field) and TensorRT-LLM (extra fields forbidden) refuse a body with both names.
            "max_tokens": spec.output_len,
            "stream": true,
            "stream_options": { "include_usage": true },
            "ignore_eos": true,
        })
    } else {
        json!({
            "model": spec.model,
            "prompt": prompt,
            "repetition_penalty": 1.0,
            "max_tokens": spec.output_len,
            "stream": true,
            "stream_options": { "include_usage": true },
            "ignore_eos": true,
        })
    }
}

/// The most SSE events one request may send for `tokens` tokens asked. Servers send about one per
/// token, and a role chunk, a finish chunk, the usage chunk and `[DONE]` besides; four per token and
/// sixteen more leave room for servers that split a token's text, and stop one that never ends.
pub fn max_events(tokens: u32) -> usize {
    4 * tokens as usize + 16
}

/// How the error of a request that went over a bound begins ([`bound_exceeded`] looks for it).
const OVER_A_BOUND: &str = "stopped reading: ";

/// The first request error of a result that says the server went over one of the reader's bounds
/// (a line or an event over 1 MiB, more events than the tokens asked allow): such a server is
/// broken or hostile, and the step that measured it fails saying so.
pub fn bound_exceeded(result: &Value) -> Option<String> {
    let errors = result["errors"].as_array()?;
    let over: Vec<&str> = errors
        .iter()
        .filter_map(Value::as_str)
        .filter(|e| e.starts_with(OVER_A_BOUND))
        .collect();
    let first = over.first()?;
    Some(format!("{} of {} requests: {first}", over.len(), errors.len()))
}

/// How a stream ended.
enum End {
    /// `[DONE]`.
    Done,
    /// The body ended (after a finish reason, a whole answer).
    Closed,
    Failed(String),
}

/// The clock of one request while its stream is read.
struct Progress {
    sent: Instant,
    /// When the chunk being read arrived.
    now: Instant,
    /// When the last content chunk arrived.
    last: Instant,
    first: bool,
    /// When a choice first gave a finish reason (other than a failing one, [`FAILED_FINISH`]).
    finished: Option<Instant>,
}

/// Finish reasons that mean the server gave up on the request: `error` and `abort` (vLLM,
/// SGLang), `timeout` and `cancelled` (TensorRT-LLM).
const FAILED_FINISH: [&str; 5] = ["error", "abort", "timeout", "cancelled", "canceled"];

/// Whether a choice of a chunk carries generated content: completion text, or in a chat delta
/// content, reasoning text or a tool call. A role-only or empty delta carries none.
fn carries_content(choice: &Value) -> bool {
    let text = |v: &Value| v.as_str().is_some_and(|s| !s.is_empty());
    if text(&choice["text"]) {
        return true;
    }
    let delta = &choice["delta"];
    ["content", "reasoning_content", "reasoning", "refusal"]
        .iter()
        .any(|k| text(&delta[*k]))
        || delta["tool_calls"].as_array().is_some_and(|c| !c.is_empty())
        || delta["function_call"].is_object()
}

/// The message of an error object sent inside the stream (`{"error": …}`, or vLLM's older
/// `{"object": "error", "message": …}`), cut to a readable length.
fn stream_error(v: &Value) -> Option<String> {
    let e = match v.get("error") {
        Some(e) if !e.is_null() => e,
        _ if v["object"] == "error" => v,
        _ => return None,
    };
    let message = match e {
        Value::String(s) => s.clone(),
        _ => e["message"].as_str().map_or_else(|| e.to_string(), str::to_owned),
    };
    Some(message.chars().take(300).collect())
}

/// Reads one event of a stream into `out`.
fn read_event(out: &mut RequestOutput, p: &mut Progress, event: &sse::Event<'_>) -> ControlFlow<End> {
    let data = event.data.trim();
    if data == "[DONE]" {
        return ControlFlow::Break(End::Done);
    }
    if event.name == "error" {
        let shown: String = data.chars().take(300).collect();
        return ControlFlow::Break(End::Failed(format!("the server sent an error event: {shown}")));
    }
    if data.is_empty() {
        return ControlFlow::Continue(());
    }
    let v: Value = match serde_json::from_str(data) {
        Ok(v) => v,
        Err(e) => return ControlFlow::Break(End::Failed(format!("a chunk is not JSON: {e}"))),
    };
    if let Some(why) = stream_error(&v) {
        return ControlFlow::Break(End::Failed(format!("the server sent an error mid-stream: {why}")));
    }
    let choices = v["choices"].as_array().map(Vec::as_slice).unwrap_or_default();
    if choices.iter().any(carries_content) {
        if p.first {
            out.itl.push((p.now - p.last).as_secs_f64());
        } else {
            p.first = true;
            out.ttft = (p.now - p.sent).as_secs_f64();
        }
        p.last = p.now;
        out.chunks += 1;
    }
    // TGI's completions route sends `"finish_reason": ""` on every chunk but the last.
    for reason in choices
        .iter()
        .filter_map(|c| c["finish_reason"].as_str())
        .filter(|r| !r.is_empty())
    {
        if FAILED_FINISH.contains(&reason) {
            return ControlFlow::Break(End::Failed(format!("the stream ended with finish_reason {reason:?}")));
        }
        p.finished.get_or_insert(p.now);
    }
    if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
        out.output_tokens = usage["completion_tokens"].as_u64();
        if let Some(n) = usage["prompt_tokens"].as_u64() {
            out.prompt_len = n;
        }
    }
    ControlFlow::Continue(())
}

/// The most of a refusal's body read for its message: servers put it in a short JSON object.
const REFUSAL_BYTES: usize = 4096;

/// What the server said when it refused a request (`{"error": {"message": …}}`, `{"message": …}`,
/// `{"detail": …}`, else the start of its text), from at most [`REFUSAL_BYTES`] of the body: the
/// status alone ("400 Bad Request") does not say the prompt was too long or a field unknown.
async fn refusal_message(mut res: reqwest::Response) -> Option<String> {
    let mut body = Vec::new();
    while body.len() < REFUSAL_BYTES {
        match res.chunk().await {
            Ok(Some(chunk)) => body.extend_from_slice(&chunk),
            _ => break,
        }
    }
    body.truncate(REFUSAL_BYTES);
    let text = String::from_utf8_lossy(&body);
    let said = serde_json::from_str::<Value>(&text).ok().and_then(|v| {
        let e = v.get("error").unwrap_or(&v);
        [
            e.get("message"),
            v.get("message"),
            v.get("detail"),
            e.as_str().map(|_| e),
        ]
        .into_iter()
        .flatten()
        .find_map(|m| {
            m.as_str()
                .map(str::to_owned)
                .or_else(|| (!m.is_null()).then(|| m.to_string()))
        })
    });
    let said = said.unwrap_or_else(|| text.trim().to_owned());
    let said: String = said.chars().take(300).collect();
    (!said.is_empty()).then_some(said)
}

/// The server's answer to a request when it accepted it; else why not, in words: no answer in
/// time, a broken connection, or the status with what the server said.
async fn answered(req: reqwest::RequestBuilder) -> Result<reqwest::Response, String> {
    let res = match req.send().await {
        Ok(r) => r,
        Err(e) if e.is_timeout() => return Err("request failed: no answer within the request timeout".to_owned()),
        Err(e) => return Err(format!("request failed: {e}")),
    };
    if res.status().is_success() {
        return Ok(res);
    }
    let status = res.status().to_string();
    Err(match refusal_message(res).await {
        Some(why) => format!("{status}: {why}"),
        None => status,
    })
}

/// Reads a streaming answer to its end, a failure, or a bound.
async fn read_stream(res: reqwest::Response, out: &mut RequestOutput, p: &mut Progress, tokens: u32) -> End {
    let mut reader = sse::SseReader::new(max_events(tokens));
    let mut body = res.bytes_stream();
    let stopped = |stop: sse::Stop<End>| match stop {
        sse::Stop::Handler(end) => end,
        sse::Stop::Exceeded(sse::Exceeded::Events(n)) => End::Failed(format!(
            "{OVER_A_BOUND}more than {n} SSE events for {tokens} tokens asked"
        )),
        sse::Stop::Exceeded(e) => End::Failed(format!("{OVER_A_BOUND}{e}")),
    };
    loop {
        let chunk = match body.next().await {
            Some(Ok(chunk)) => chunk,
            Some(Err(e)) if e.is_timeout() => {
                return End::Failed("the stream broke: no end within the request timeout".to_owned())
            }
            Some(Err(e)) => return End::Failed(format!("the stream broke: {e}")),
            None => {
                return match reader.finish(&mut |ev| read_event(out, p, &ev)) {
                    Ok(()) => End::Closed,
                    Err(stop) => stopped(stop),
                };
            }
        };
        p.now = Instant::now();
        if let Err(stop) = reader.feed(&chunk, &mut |ev| read_event(out, p, &ev)) {
            return stopped(stop);
        }
    }
}

async fn one_request(
    client: reqwest::Client,
    url: String,
    body: Value,
    api_key: Option<String>,
    lens: (u64, u32),
    run_start: Instant,
) -> RequestOutput {
    let (prompt_len, tokens) = lens;
    let mut out = RequestOutput {
        prompt_len,
        itl: Vec::with_capacity((tokens as usize).saturating_sub(1).min(4096)),
        ..RequestOutput::default()
    };
    let st = Instant::now();
    out.start_time = (st - run_start).as_secs_f64();
    let mut req = client.post(&url).json(&body);
    if let Some(k) = &api_key {
        req = req.bearer_auth(k);
    }
    let res = match answered(req).await {
        Ok(r) => r,
        Err(why) => {
            out.error = why;
            return out;
        }
    };
    let mut p = Progress {
        sent: st,
        now: st,
        last: st,
        first: false,
        finished: None,
    };
    let error = match read_stream(res, &mut out, &mut p, tokens).await {
        End::Failed(why) => Some(why),
        // Asked with ignore_eos, a server generates what was asked: more is a count no request
        // made, which would raise the throughput and lower the time per token it is divided by.
        _ if out.output_tokens.is_some_and(|n| n > u64::from(tokens)) => Some(format!(
            "the server reported {} output tokens for {tokens} asked",
            out.output_tokens.unwrap_or_default()
        )),
        End::Closed if p.finished.is_none() => Some("the stream ended without [DONE] or a finish reason".to_owned()),
        // Nothing generated and no reason given: a bare `[DONE]` is no answer.
        End::Done if !p.first && p.finished.is_none() => {
            Some("no chunk carried generated content (text, reasoning or a tool call) or a finish reason".to_owned())
        }
        End::Done | End::Closed => None,
    };
    if let (None, false, Some(at)) = (&error, p.first, p.finished) {
        // A whole answer without content, its end given (a reasoning server that hides a short
        // answer's thinking tokens, an end-of-sequence at once): completed, its first and last
        // token at the finish.
        out.ttft = (at - st).as_secs_f64();
        p.last = at;
    }
    match error {
        // A failed request's tokens count nowhere.
        Some(why) => {
            out.error = why;
            out.itl = Vec::new();
            out.ttft = 0.0;
            out.chunks = 0;
            out.output_tokens = None;
        }
        None => {
            out.success = true;
            out.latency = (p.last - st).as_secs_f64();
        }
    }
    out
}

/// Ends the requests still running when a run is dropped (a plan step whose time ran out): a
/// dropped `JoinHandle` detaches its task, which would stream on into the next load point's window.
struct AbortOnDrop(Vec<tokio::task::AbortHandle>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Runs the load and returns the outputs (in request order) and the duration in seconds.
pub async fn drive(spec: &LoadSpec) -> anyhow::Result<(Vec<RequestOutput>, f64)> {
    let base =
        reqwest::Url::parse(&spec.base_url).map_err(|e| anyhow::anyhow!("--base-url {:?}: {e}", spec.base_url))?;
    anyhow::ensure!(
        matches!(base.scheme(), "http" | "https"),
        "--base-url must be http:// or https://"
    );
    anyhow::ensure!(
        spec.request_rate > 0.0 && !spec.request_rate.is_nan(),
        "--request-rate must be above 0 (or inf)"
    );
    let url = format!("{}{}", spec.base_url.trim_end_matches('/'), spec.endpoint);
    let client = reqwest::Client::builder()
        .timeout(spec.request_timeout)
        .connect_timeout(Duration::from_secs(10))
        // Each token is a small write: no Nagle delay on the request side either.
        .tcp_nodelay(true)
        .user_agent(concat!("rentcheck-loadgen/", env!("CARGO_PKG_VERSION")))
        .build()?;
    // As vLLM's request functions do: a key for servers that want one, never printed.
    let api_key = std::env::var("OPENAI_API_KEY").ok().filter(|k| !k.is_empty());
    let times = arrivals(spec.num_prompts, spec.request_rate, spec.seed);
    let mut rng = StdRng::seed_from_u64(spec.seed.wrapping_add(1));
    let bodies: Vec<Value> = (0..spec.num_prompts)
        .map(|_| request_body(spec, prompt(&mut rng, spec.input_len)))
        .collect();
    let start = Instant::now();
    let mut tasks = Vec::with_capacity(bodies.len());
    let mut running = AbortOnDrop(Vec::with_capacity(bodies.len()));
    for (body, at) in bodies.into_iter().zip(times) {
        tokio::time::sleep_until((start + Duration::from_secs_f64(at)).into()).await;
        let task = tokio::spawn(one_request(
            client.clone(),
            url.clone(),
            body,
            api_key.clone(),
            (u64::from(spec.input_len), spec.output_len),
            start,
        ));
        running.0.push(task.abort_handle());
        tasks.push(task);
    }
    let mut outputs = Vec::with_capacity(tasks.len());
    for t in tasks {
        outputs.push(t.await.unwrap_or_else(|e| RequestOutput {
            error: format!("the request's task failed: {e}"),
            ..RequestOutput::default()
        }));
    }
    Ok((outputs, start.elapsed().as_secs_f64()))
}

/// numpy's `percentile` (linear interpolation between closest ranks); 0 for no values, as vLLM's
/// `np.percentile(xs or 0, p)` gives.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    match sorted.len() {
        0 => 0.0,
        1 => sorted[0],
        n => {
            let rank = p / 100.0 * (n - 1) as f64;
            let lo = rank.floor() as usize;
            let hi = rank.ceil() as usize;
            sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
        }
    }
}

fn stats(values: &[f64], percentiles: &[f64]) -> (f64, f64, f64, Vec<(f64, f64)>) {
    let mut sorted: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    sorted.sort_by(f64::total_cmp);
    if sorted.is_empty() {
        return (0.0, 0.0, 0.0, percentiles.iter().map(|p| (*p, 0.0)).collect());
    }
    let n = sorted.len() as f64;
    let mean = sorted.iter().sum::<f64>() / n;
    let std = (sorted.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n).sqrt();
    (
        mean,
        percentile(&sorted, 50.0),
        std,
        percentiles.iter().map(|p| (*p, percentile(&sorted, *p))).collect(),
    )
}

/// `p95`, `p99.9`: as vLLM names a percentile in its keys.
fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// The `--save-result --save-detailed` JSON of a run, computed as vLLM's `calculate_metrics`, in
/// its order, so the two can be compared.
pub fn result_json(spec: &LoadSpec, outputs: &[RequestOutput], duration: f64) -> Value {
    let Measured {
        output_lens,
        ttfts,
        tpots,
        all_tpots,
        itls,
        e2els,
        completed,
        total_input,
    } = measure(outputs);
    let good = good_requests(spec, &ttfts, &all_tpots, &e2els);
    let total_output: u64 = output_lens.iter().fold(0, |sum, n| sum.saturating_add(*n));
    let failed = outputs.len() as u64 - completed;
    let dur = duration.max(f64::MIN_POSITIVE);
    let (max_tps, max_conc) = peaks(outputs);
    let mut r = Map::new();
    r.insert("date".into(), json!(Utc::now().format("%Y%m%d-%H%M%S").to_string()));
    r.insert("endpoint_type".into(), json!("openai"));
    r.insert(
        "backend".into(),
        json!(if is_chat(&spec.endpoint) {
            "openai-chat"
        } else {
            "openai"
        }),
    );
    r.insert("label".into(), Value::Null);
    r.insert("model_id".into(), json!(spec.model));
    r.insert("tokenizer_id".into(), Value::Null);
    r.insert("num_prompts".into(), json!(spec.num_prompts));
    r.insert(
        "request_rate".into(),
        if spec.request_rate.is_finite() {
            json!(spec.request_rate)
        } else {
            json!("inf")
        },
    );
    r.insert("burstiness".into(), json!(1.0));
    r.insert("max_concurrency".into(), Value::Null);
    r.insert(
        "generator".into(),
        json!(concat!("rentcheck loadgen ", env!("CARGO_PKG_VERSION"))),
    );
    r.insert("duration".into(), json!(duration));
    r.insert("completed".into(), json!(completed));
    r.insert("failed".into(), json!(failed));
    r.insert("total_input_tokens".into(), json!(total_input));
    r.insert("total_output_tokens".into(), json!(total_output));
    r.insert("request_throughput".into(), json!(completed as f64 / dur));
    r.insert(
        "request_goodput".into(),
        good.map_or(Value::Null, |g| json!(g as f64 / dur)),
    );
    r.insert("output_throughput".into(), json!(total_output as f64 / dur));
    r.insert(
        "total_token_throughput".into(),
        json!(total_input.saturating_add(total_output) as f64 / dur),
    );
    insert_per_request(&mut r, outputs, &output_lens);
    r.insert("max_output_tokens_per_s".into(), json!(max_tps));
    r.insert("max_concurrent_requests".into(), json!(max_conc));
    for (name, values) in [("ttft", &ttfts), ("tpot", &tpots), ("itl", &itls), ("e2el", &e2els)] {
        let (mean, median, std, pcts) = stats(values, &spec.percentiles);
        r.insert(format!("mean_{name}_ms"), json!(mean * 1000.0));
        r.insert(format!("median_{name}_ms"), json!(median * 1000.0));
        r.insert(format!("std_{name}_ms"), json!(std * 1000.0));
        for (p, v) in pcts {
            r.insert(format!("p{}_{name}_ms", p_word(p)), json!(v * 1000.0));
        }
    }
    Value::Object(r)
}

/// What the successful requests measured (vLLM's `calculate_metrics` loop): output lengths (0 for
/// a failed request), first-token, per-output-token, inter-token and end-to-end times.
struct Measured {
    output_lens: Vec<u64>,
    ttfts: Vec<f64>,
    /// Of requests with more than one output token; `all_tpots` has a 0 for the others.
    tpots: Vec<f64>,
    all_tpots: Vec<f64>,
    itls: Vec<f64>,
    e2els: Vec<f64>,
    completed: u64,
    total_input: u64,
}

fn measure(outputs: &[RequestOutput]) -> Measured {
    let mut output_lens = Vec::with_capacity(outputs.len());
    let (mut ttfts, mut tpots, mut all_tpots, mut itls, mut e2els) = (vec![], vec![], vec![], vec![], vec![]);
    let (mut completed, mut total_input) = (0u64, 0u64);
    for o in outputs {
        if !o.success {
            output_lens.push(0);
            continue;
        }
        let out_len = o.output_tokens.filter(|n| *n > 0).unwrap_or(o.chunks);
        output_lens.push(out_len);
        total_input = total_input.saturating_add(o.prompt_len);
        let mut tpot = 0.0;
        if out_len > 1 {
            tpot = (o.latency - o.ttft) / (out_len - 1) as f64;
            tpots.push(tpot);
        }
        all_tpots.push(tpot);
        itls.extend(o.itl.iter().copied());
        ttfts.push(o.ttft);
        e2els.push(o.latency);
        completed += 1;
    }
    Measured {
        output_lens,
        ttfts,
        tpots,
        all_tpots,
        itls,
        e2els,
        completed,
        total_input,
    }
}

/// The requests inside every goodput target, when the run has targets.
fn good_requests(spec: &LoadSpec, ttfts: &[f64], all_tpots: &[f64], e2els: &[f64]) -> Option<u64> {
    if spec.goodput.is_empty() {
        None
    } else {
        let mut good = 0u64;
        for i in 0..ttfts.len() {
            let ok = spec.goodput.iter().all(|(k, ms)| {
                let v = match k.as_str() {
                    "ttft" => ttfts[i],
                    "tpot" => all_tpots[i],
                    _ => e2els[i],
                };
                ms / 1000.0 >= v
            });
            good += u64::from(ok);
        }
        Some(good)
    }
}

/// Each request's input and output length, first-token time, inter-token times, latency, start
/// and error, in request order.
fn insert_per_request(r: &mut Map<String, Value>, outputs: &[RequestOutput], output_lens: &[u64]) {
    r.insert(
        "input_lens".into(),
        json!(outputs.iter().map(|o| o.prompt_len).collect::<Vec<_>>()),
    );
    r.insert("output_lens".into(), json!(output_lens));
    r.insert(
        "ttfts".into(),
        json!(outputs.iter().map(|o| o.ttft).collect::<Vec<_>>()),
    );
    r.insert("itls".into(), json!(outputs.iter().map(|o| &o.itl).collect::<Vec<_>>()));
    r.insert(
        "latencies".into(),
        json!(outputs.iter().map(|o| o.latency).collect::<Vec<_>>()),
    );
    r.insert(
        "start_times".into(),
        json!(outputs.iter().map(|o| o.start_time).collect::<Vec<_>>()),
    );
    r.insert(
        "errors".into(),
        json!(outputs.iter().map(|o| o.error.as_str()).collect::<Vec<_>>()),
    );
}

/// The busiest second's output tokens and the most requests in flight at once (vLLM's
/// `max_output_tokens_per_s` and `max_concurrent_requests`), over completed requests.
fn peaks(outputs: &[RequestOutput]) -> (f64, u64) {
    let ok: Vec<&RequestOutput> = outputs.iter().filter(|o| o.success).collect();
    let Some(min_start) = ok.iter().map(|o| o.start_time).min_by(f64::total_cmp) else {
        return (0.0, 0);
    };
    let mut per_second: std::collections::BTreeMap<i64, u64> = std::collections::BTreeMap::new();
    let mut events: Vec<(f64, i32)> = Vec::new();
    for o in &ok {
        let mut t = o.start_time + o.ttft;
        *per_second.entry((t - min_start) as i64).or_default() += 1;
        for gap in &o.itl {
            t += gap;
            *per_second.entry((t - min_start) as i64).or_default() += 1;
        }
        events.push((o.start_time, 1));
        events.push((o.start_time + o.latency, -1));
    }
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let (mut now, mut peak) = (0i64, 0i64);
    for (_, d) in events {
        now += i64::from(d);
        peak = peak.max(now);
    }
    (
        per_second.values().copied().max().unwrap_or(0) as f64,
        u64::try_from(peak).unwrap_or(0),
    )
}

/// One run: the result JSON.
pub async fn run(spec: &LoadSpec) -> anyhow::Result<Value> {
    let (outputs, duration) = drive(spec).await?;
    let result = result_json(spec, &outputs, duration);
    eprintln!("{}", console_summary(&result));
    Ok(result)
}

/// The `Serving Benchmark Result` block vLLM prints, for people watching.
pub fn console_summary(r: &Value) -> String {
    let n = |k: &str| r[k].as_f64().unwrap_or(0.0);
    let mut s = format!("{:=^50}\n", " Serving Benchmark Result ");
    s.push_str(&format!("{:<40} {}\n", "Successful requests:", n("completed")));
    s.push_str(&format!("{:<40} {}\n", "Failed requests:", n("failed")));
    s.push_str(&format!("{:<40} {:.2}\n", "Benchmark duration (s):", n("duration")));
    s.push_str(&format!(
        "{:<40} {:.2}\n",
        "Request throughput (req/s):",
        n("request_throughput")
    ));
    if r["request_goodput"].is_number() {
        s.push_str(&format!(
            "{:<40} {:.2}\n",
            "Request goodput (req/s):",
            n("request_goodput")
        ));
    }
    s.push_str(&format!(
        "{:<40} {:.2}\n",
        "Output token throughput (tok/s):",
        n("output_throughput")
    ));
    for (m, label) in [("ttft", "TTFT"), ("tpot", "TPOT"), ("itl", "ITL"), ("e2el", "E2EL")] {
        s.push_str(&format!(
            "{:<40} {:.2}\n",
            format!("Median {label} (ms):"),
            n(&format!("median_{m}_ms"))
        ));
    }
    s.push_str(&"=".repeat(50));
    s
}

/// `rentcheck loadgen`: runs, writes the result, and says how it went (0: at least one request
/// completed; 1: none did or the run could not start; 2: bad flags).
pub async fn main(args: LoadgenArgs) -> std::process::ExitCode {
    let spec = match LoadSpec::from_args(&args) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("rentcheck loadgen: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    let result = match run(&spec).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("rentcheck loadgen: {e:#}");
            return std::process::ExitCode::from(1);
        }
    };
    let text = result.to_string();
    let written = match &args.result_file {
        Some(path) => std::fs::write(path, &text).map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => {
            println!("{text}");
            Ok(())
        }
    };
    if let Err(e) = written {
        eprintln!("rentcheck loadgen: {e}");
        return std::process::ExitCode::from(1);
    }
    std::process::ExitCode::from(if result["completed"].as_u64().unwrap_or(0) > 0 {
        0
    } else {
        1
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(goodput: Vec<(String, f64)>) -> LoadSpec {
        LoadSpec {
            base_url: "http://127.0.0.1:1".into(),
            endpoint: "/v1/completions".into(),
            model: "m".into(),
            input_len: 8,
            output_len: 4,
            request_rate: 2.0,
            num_prompts: 3,
            goodput,
            percentiles: vec![50.0, 95.0, 99.0],
            seed: 0,
            request_timeout: Duration::from_secs(1),
        }
    }

    fn ok(ttft: f64, gaps: &[f64], tokens: u64) -> RequestOutput {
        RequestOutput {
            success: true,
            ttft,
            itl: gaps.to_vec(),
            latency: ttft + gaps.iter().sum::<f64>(),
            output_tokens: Some(tokens),
            chunks: gaps.len() as u64 + 1,
            prompt_len: 8,
            ..RequestOutput::default()
        }
    }

    #[test]
    fn arrivals_are_poisson_and_end_at_n_over_rate() {
        let a = arrivals(1000, 50.0, 7);
        assert!(a.windows(2).all(|w| w[0] <= w[1]));
        assert!((a[999] - 20.0).abs() < 1e-9, "rescaled to 1000 ÷ 50 s");
        // Exponential gaps: their standard deviation is about their mean.
        let gaps: Vec<f64> = std::iter::once(a[0]).chain(a.windows(2).map(|w| w[1] - w[0])).collect();
        let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
        let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
        assert!((sd / mean - 1.0).abs() < 0.15, "cv {}", sd / mean);
        assert_eq!(arrivals(3, f64::INFINITY, 0), [0.0; 3]);
    }

    #[test]
    fn percentiles_are_numpys_linear_ones() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        assert_eq!(percentile(&xs, 50.0), 2.5);
        assert!((percentile(&xs, 95.0) - 3.85).abs() < 1e-12);
        assert_eq!(percentile(&xs, 100.0), 4.0);
        assert_eq!(percentile(&[], 99.0), 0.0);
    }

    #[test]
    fn figures_follow_vllms_definitions() {
        let outputs = vec![
            ok(0.1, &[0.02, 0.02, 0.02], 4),
            ok(0.3, &[0.05, 0.05, 0.05], 4),
            RequestOutput {
                error: "500 Internal Server Error".into(),
                prompt_len: 8,
                ..RequestOutput::default()
            },
        ];
        let r = result_json(
            &spec(vec![("ttft".into(), 200.0), ("tpot".into(), 30.0)]),
            &outputs,
            2.0,
        );
        assert_eq!((r["completed"].as_u64(), r["failed"].as_u64()), (Some(2), Some(1)));
        assert_eq!(r["request_throughput"], json!(1.0), "completed ÷ duration");
        assert_eq!(
            r["request_goodput"],
            json!(0.5),
            "only the first meets ttft ≤ 200 ms and tpot ≤ 30 ms"
        );
        assert_eq!(r["output_lens"], json!([4, 4, 0]));
        assert_eq!(r["total_output_tokens"], json!(8));
        // TPOT = (E2E − TTFT) ÷ (tokens − 1): 20 ms and 50 ms.
        assert!((r["mean_tpot_ms"].as_f64().unwrap() - 35.0).abs() < 1e-9);
        assert!(
            (r["median_e2el_ms"].as_f64().unwrap() - 305.0).abs() < 1e-9,
            "(160 + 450) ÷ 2"
        );
        // ITL per gap, over every gap of every completed request.
        assert!((r["p50_itl_ms"].as_f64().unwrap() - 35.0).abs() < 1e-9);
        assert_eq!(r["itls"].as_array().unwrap().len(), 3);
        assert_eq!(r["errors"][2], json!("500 Internal Server Error"));
        assert_eq!(r["errors"][0], json!(""));
        assert_eq!(r["max_concurrent_requests"], json!(2));
        // The parser reads it as a vLLM result, per-request arrays included.
        let text = r.to_string();
        use crate::evidence::parsers::{parse, EvidenceKind, MetricValue};
        let parsed = parse(EvidenceKind::BenchServing, text.as_bytes()).expect("read as a vLLM result");
        let m = &parsed.metrics;
        assert_eq!(m["serving.completed"], MetricValue::Number(2.0));
        assert_eq!(m["serving.failed"], MetricValue::Number(1.0));
        let MetricValue::Number(ttft_p50) = m["serving.ttft_p50_ms"] else {
            panic!("no ttft p50: {m:?}")
        };
        assert!((ttft_p50 - 200.0).abs() < 1e-6, "the median of 100 and 300 ms");
    }

    #[test]
    fn content_is_text_reasoning_or_a_tool_call_never_a_role_alone() {
        let chat = |delta: Value| json!({"index": 0, "delta": delta});
        assert!(!carries_content(&chat(json!({"role": "assistant"}))));
        assert!(!carries_content(&chat(json!({"role": "assistant", "content": ""}))));
        assert!(!carries_content(&chat(json!({"content": null, "tool_calls": []}))));
        assert!(carries_content(&chat(json!({"content": "Hi"}))));
        assert!(carries_content(&chat(json!({"reasoning_content": "Let me"}))));
        assert!(carries_content(&chat(json!({"reasoning": "Let me"}))));
        assert!(carries_content(&chat(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]})
        )));
        assert!(!carries_content(&json!({"index": 0, "text": ""})));
        assert!(carries_content(&json!({"index": 0, "text": " the"})));
    }

    #[test]
    fn error_objects_in_a_stream_are_read_in_both_shapes() {
        assert_eq!(
            stream_error(&json!({"error": {"message": "engine dead", "code": 500}})).as_deref(),
            Some("engine dead")
        );
        assert_eq!(
            stream_error(&json!({"object": "error", "message": "out of memory"})).as_deref(),
            Some("out of memory")
        );
        assert_eq!(stream_error(&json!({"error": "plain"})).as_deref(), Some("plain"));
        assert_eq!(stream_error(&json!({"error": null, "choices": []})), None);
        assert_eq!(stream_error(&json!({"choices": []})), None);
        assert_eq!(max_events(64), 272, "four per token asked, and sixteen");
    }

    #[test]
    fn goodput_pairs_are_checked() {
        assert_eq!(
            parse_goodput(&["ttft:300".into(), "e2el:2000.5".into()]).unwrap(),
            [("ttft".to_owned(), 300.0), ("e2el".to_owned(), 2000.5)]
        );
        assert!(parse_goodput(&["itl:30".into()]).is_err());
        assert!(parse_goodput(&["ttft".into()]).is_err());
        assert!(parse_goodput(&["ttft:-1".into()]).is_err());
    }
}
