//! `rentcheck collect`: the agent side. Runs the GPU tools that are present, scrapes vLLM, reads
//! the files it is given, and POSTs each as evidence to one brief, with an `Idempotency-Key` so a
//! second run in the same window creates nothing new. Progress goes to stderr, one line per step;
//! the summary table goes to stdout. The exit status says how the run ended ([`Exit`]).
//!
//! The token comes from `--token` or `RENTCHECK_TOKEN` and is never printed or logged.

pub mod allow;
pub mod client;
pub mod loadgen;
pub mod plan;
pub mod plan_run;
pub mod sse;
pub mod steps;
pub mod summary;

use std::{path::PathBuf, process::ExitCode, str::FromStr, time::Duration};

use chrono::Utc;
use clap::Args;
use sha2::{Digest, Sha256};
use uuid::Uuid;

use self::{
    client::{Accepted, Client, Item, Refused, RetryPolicy},
    steps::{Gathered, Source, Step},
    summary::{Outcome, Summary},
};
use crate::{
    evidence::parsers::{detect_kind, EvidenceKind},
    ids::{BriefId, TrialId},
    secrets::Secret,
};

/// The flags of `rentcheck collect`.
#[derive(Clone, Args)]
pub struct CollectArgs {
    /// The rentcheck server, e.g. http://rentcheck.internal:8080
    #[arg(long, env = "RENTCHECK_SERVER")]
    pub server: String,
    /// An agent token for the brief (prefer the RENTCHECK_TOKEN environment variable or
    /// --token-file: a flag shows in `ps`).
    #[arg(long, env = "RENTCHECK_TOKEN", hide_env_values = true, conflicts_with = "token_file")]
    pub token: Option<Secret>,
    /// A file holding the agent token (mode 0600 or stricter), instead of --token.
    #[arg(long, env = "RENTCHECK_TOKEN_FILE")]
    pub token_file: Option<PathBuf>,
    /// The brief the evidence belongs to.
    #[arg(long)]
    pub brief: BriefId,
    /// The trial of the brief (needed when the brief has several and the token is not scoped to one).
    #[arg(long)]
    pub trial: Option<TrialId>,
    /// The stage (1–5) the evidence is for (default 1). With --plan: run only this stage's steps.
    #[arg(long, value_parser = clap::value_parser!(u8).range(1..=5))]
    pub stage: Option<u8>,
    /// A vLLM server to scrape (GET; `/metrics` is appended when the URL has no path).
    #[arg(long)]
    pub vllm_url: Option<String>,
    /// Any Prometheus endpoint (vLLM, dcgm-exporter, …) to scrape before and after a load window
    /// of --window SECONDS (default 60); both scrapes are posted as a pair. Repeatable: every URL
    /// is scraped at the same two moments.
    #[arg(long = "scrape", value_name = "URL", conflicts_with_all = ["vllm_url", "before", "after"])]
    pub scrapes: Vec<String>,
    /// This scrape is the start of a load-test window (label phase=before).
    #[arg(long, requires = "vllm_url", conflicts_with = "after")]
    pub before: bool,
    /// This scrape is the end of a load-test window (label phase=after; needs --window).
    #[arg(long, requires = "vllm_url", requires = "window")]
    pub after: bool,
    /// With --vllm-url: the window id that pairs a --before and an --after scrape, and scopes the
    /// idempotency keys (without it, the scrape gets a new id, printed, and keys are scoped to the
    /// current UTC hour). With --scrape: the length of the load window in seconds (default 60).
    #[arg(long)]
    pub window: Option<String>,
    /// A `vllm bench serve --save-result` JSON (or JSON Lines) file, posted as bench-serving.
    #[arg(long)]
    pub bench_json: Option<PathBuf>,
    /// Post any file as evidence: KIND=PATH, where KIND is an evidence kind or `auto`. Repeatable.
    #[arg(long = "file", value_name = "KIND=PATH", value_parser = parse_file_arg)]
    pub files: Vec<(String, PathBuf)>,
    /// Do not run nvidia-smi or dcgmi (only scrape and post files).
    #[arg(long)]
    pub no_tools: bool,
    /// Seconds each tool command may run before it is killed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: u64,
    /// Seconds each HTTP request (a scrape, one upload attempt) may take.
    #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
    pub http_timeout: u64,
    /// Attempts per upload, the first included, on connection errors, 429 and 503.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=20))]
    pub attempts: u32,
    /// The host name that goes into each upload's `host` label and idempotency key (default: this
    /// machine's; in Kubernetes set it to the node name so a re-run pod still replays).
    #[arg(long, env = "RENTCHECK_HOST")]
    pub host: Option<String>,
    /// Run the trial's test plan: fetch it from the server and run each step whose tool is present,
    /// in stage order, sending each output as it finishes (docs/agents.md). Needs --trial, unless
    /// the token was minted for one trial.
    #[arg(
        long,
        conflicts_with_all = ["scrapes", "before", "after", "bench_json", "files", "no_tools", "window"]
    )]
    pub plan: bool,
    /// With --plan: print what would run (the commands, with the tools found or missing) and send nothing.
    #[arg(long, requires = "plan")]
    pub dry_run: bool,
    /// With --plan: a re-validation run (the schedule a commitment's plan page gives): run every
    /// step again, those the server already holds too, and send the outputs as new evidence
    /// labelled `revalidation=<UTC day>`. A step the server received that UTC day is held, so a
    /// retried re-run picks up where it stopped.
    #[arg(long, requires = "plan")]
    pub rerun: bool,
    /// With --plan: accept a plan from a plain http:// server that is not this machine (the token
    /// and the plan then cross the network in the clear).
    #[arg(long, requires = "plan")]
    pub allow_http: bool,
    /// With --plan: NVIDIA dcgm-exporter, scraped around each load point (default http://127.0.0.1:9400).
    #[arg(long, requires = "plan")]
    pub dcgm_exporter_url: Option<String>,
    /// With --plan: where load results are written (default ./rentcheck-plan-<trial>).
    #[arg(long, requires = "plan")]
    pub out: Option<PathBuf>,
    /// With --plan: where the harness writes the probe and checkpoint files (default ./rentcheck-probes).
    #[arg(long, requires = "plan")]
    pub probes_dir: Option<PathBuf>,
    /// With --plan: the vLLM server's start-up log (default ./vllm-server.log).
    #[arg(long, requires = "plan")]
    pub vllm_log: Option<PathBuf>,
    /// With --plan: the nodes of a multi-node trial, for mpirun (default ./hostfile).
    #[arg(long, requires = "plan")]
    pub hostfile: Option<PathBuf>,
    /// With --plan: the model name the server under test serves, when not the plan's.
    #[arg(long, requires = "plan")]
    pub model: Option<String>,
    /// With --plan: at most this many requests per load point (a quick pass over the sweep; the
    /// result records how many were sent).
    #[arg(long, requires = "plan", value_parser = clap::value_parser!(u32).range(1..))]
    pub max_prompts: Option<u32>,
}

/// `KIND=PATH`, KIND checked against the evidence kinds.
fn parse_file_arg(s: &str) -> Result<(String, PathBuf), String> {
    let (kind, path) = s
        .split_once('=')
        .ok_or_else(|| format!("expected KIND=PATH, got {s:?}"))?;
    let kind = kind.trim();
    if kind != "auto" && EvidenceKind::from_str(kind).is_err() {
        let known: Vec<&str> = EvidenceKind::ALL.iter().map(EvidenceKind::as_str).collect();
        return Err(format!(
            "unknown kind {kind:?}; use auto or one of {}",
            known.join(", ")
        ));
    }
    if path.is_empty() {
        return Err(format!("no path after {kind}="));
    }
    Ok((kind.to_owned(), PathBuf::from(path)))
}

/// How a run ended: the process exit status (docs/agents.md lists them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Every step that had something to send was sent (or replayed); tools that are not installed
    /// were skipped.
    Sent = 0,
    /// At least one step failed: a tool that printed nothing, a scrape or file that could not be
    /// read, an upload the server refused or never answered. The rest was still sent.
    SomeFailed = 1,
    /// The command line is wrong (clap's own errors exit 2 too): nothing was attempted.
    Usage = 2,
    /// Nothing was sent and nothing failed: no step to run, or every step was skipped (no GPU tools
    /// on PATH and nothing else asked for).
    NothingToSend = 3,
}

impl Exit {
    pub fn code(self) -> ExitCode {
        ExitCode::from(self as u8)
    }
}

/// A run that ended before its summary, with its exit status.
#[derive(Debug)]
pub struct Stop {
    pub exit: Exit,
    pub message: String,
}

fn usage(e: impl std::fmt::Display) -> Stop {
    Stop {
        exit: Exit::Usage,
        message: e.to_string(),
    }
}

/// `rentcheck collect` from `main`: runs, prints why it stopped early, and returns the exit status.
pub async fn main(args: CollectArgs) -> ExitCode {
    match run(args).await {
        Ok(exit) => exit.code(),
        Err(stop) => {
            eprintln!("rentcheck collect: {}", stop.message);
            stop.exit.code()
        }
    }
}

/// The load window of `--scrape`, in seconds: `--window`, else 60.
fn scrape_window_seconds(window: Option<&str>) -> Result<u64, Stop> {
    match window {
        None => Ok(DEFAULT_SCRAPE_WINDOW_S),
        Some(w) => w
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|s| (1..=MAX_SCRAPE_WINDOW_S).contains(s))
            .ok_or_else(|| {
                usage(format!(
                    "with --scrape, --window is the load window in seconds (1 to {MAX_SCRAPE_WINDOW_S}), got {w:?}"
                ))
            }),
    }
}

/// `--scrape` without `--window`: one minute, enough for a short load test.
pub const DEFAULT_SCRAPE_WINDOW_S: u64 = 60;
/// A day: a longer window is a typo, not a load test.
pub const MAX_SCRAPE_WINDOW_S: u64 = 86_400;

/// This machine's name: the kernel's, else `$HOSTNAME`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// What scopes the idempotency keys in time: `--window` when given, else the current UTC hour.
fn key_window(window: Option<&str>) -> String {
    match window {
        Some(w) => format!("window:{w}"),
        None => format!("hour:{}", Utc::now().format("%Y-%m-%dT%H")),
    }
}

/// Everything that makes one upload what it is. The server compares the fields and bytes of a
/// replay, so the key covers all of them: a new key for new content, never a 409.
pub struct KeyParts<'a> {
    pub host: &'a str,
    pub brief: BriefId,
    pub trial: Option<TrialId>,
    pub stage: u8,
    pub kind: &'a str,
    /// The command and its arguments, the URL scraped, or the file read.
    pub command: &'a str,
    pub labels: &'a [(String, String)],
    pub content_type: &'a str,
    pub content: &'a [u8],
    /// `window:<id>` or `hour:<YYYY-MM-DDTHH>`.
    pub window: &'a str,
}

/// `rc1-` and the hex SHA-256 of the parts (each length-prefixed, so no two inputs run together).
pub fn idempotency_key(p: &KeyParts<'_>) -> String {
    let content_sha = hex::encode(Sha256::digest(p.content));
    let mut labels: Vec<String> = p.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    labels.sort();
    let stage = p.stage.to_string();
    // A trial named since rentcheck has trials; absent, the key is what it always was.
    let brief = match p.trial {
        Some(t) => format!("{} trial {t}", p.brief),
        None => p.brief.to_string(),
    };
    let labels = labels.join("\n");
    let mut h = Sha256::new();
    for part in [
        "rentcheck-collect/1",
        p.host,
        &brief,
        &stage,
        p.kind,
        p.command,
        &labels,
        p.content_type,
        &content_sha,
        p.window,
    ] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("rc1-{}", hex::encode(h.finalize()))
}

/// A new window id for a vLLM scrape: readable, sortable, unique enough.
fn new_window_id() -> String {
    let short = Uuid::new_v4().simple().to_string();
    format!("w-{}-{}", Utc::now().format("%Y%m%dT%H%M%S"), &short[..6])
}

fn check_server(server: &str) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(server).map_err(|e| anyhow::anyhow!("--server {server:?}: {e}"))?;
    anyhow::ensure!(
        matches!(url.scheme(), "http" | "https"),
        "--server must be an http:// or https:// URL, got {server:?}"
    );
    Ok(server.trim_end_matches('/').to_owned())
}

fn check_window(w: &str) -> anyhow::Result<()> {
    anyhow::ensure!(
        !w.is_empty() && w.len() <= 200 && w.chars().all(|c| !c.is_control()),
        "--window must be 1 to 200 printable characters"
    );
    Ok(())
}

/// The steps in the order they run: tools, the vLLM scrape or the `--scrape` window (scrapes
/// before, the wait, scrapes after), the bench result, the files — so a file the load test writes
/// during the window is read after it.
fn plan(
    args: &CollectArgs,
    vllm_window: Option<&str>,
    scrape_window: Option<(&str, u64)>,
) -> anyhow::Result<Vec<Step>> {
    let mut steps = Vec::new();
    if !args.no_tools {
        steps.extend(steps::tool_steps(args.stage.unwrap_or(1)));
    }
    if let Some(url) = &args.vllm_url {
        let mut labels = vec![("window".to_owned(), vllm_window.unwrap_or_default().to_owned())];
        if args.before {
            labels.push(("phase".into(), "before".into()));
        } else if args.after {
            labels.push(("phase".into(), "after".into()));
        }
        steps.push(Step {
            source: Source::Scrape {
                url: steps::metrics_url(url)?,
                phase: None,
            },
            kind: "vllm-metrics".into(),
            labels,
        });
    }
    if let Some((id, seconds)) = scrape_window {
        let urls = args
            .scrapes
            .iter()
            .map(|u| steps::metrics_url_for("--scrape", u))
            .collect::<anyhow::Result<Vec<_>>>()?;
        for phase in ["before", "after"] {
            if phase == "after" {
                steps.push(Step {
                    source: Source::Wait { seconds },
                    kind: String::new(),
                    labels: Vec::new(),
                });
            }
            for url in &urls {
                steps.push(Step {
                    source: Source::Scrape {
                        url: url.clone(),
                        phase: Some(phase),
                    },
                    // Decided from the first scrape's bytes (vllm-metrics, dcgm-exporter, …).
                    kind: "auto".into(),
                    labels: vec![("window".into(), id.to_owned()), ("phase".into(), phase.into())],
                });
            }
        }
    }
    if let Some(path) = &args.bench_json {
        steps.push(Step {
            source: Source::File { path: path.clone() },
            kind: "bench-serving".into(),
            labels: Vec::new(),
        });
    }
    for (kind, path) in &args.files {
        steps.push(Step {
            source: Source::File { path: path.clone() },
            kind: kind.clone(),
            labels: Vec::new(),
        });
    }
    Ok(steps)
}

async fn gather(step: &Step, client: &Client, timeout: Duration) -> Gathered {
    match &step.source {
        Source::Command { program, args } => match steps::find_on_path(program) {
            None => Gathered::Skipped(format!("{program} not found on PATH")),
            Some(path) => {
                let timeout = steps::command_timeout(program, args, timeout);
                steps::run_command(&path, args, &step.kind, timeout).await
            }
        },
        Source::Scrape { url, .. } => steps::scrape(client.http(), url).await,
        Source::File { path } => steps::read_file(path, &step.kind).await,
        Source::Wait { seconds } => {
            tokio::time::sleep(Duration::from_secs(*seconds)).await;
            Gathered::Skipped(String::new())
        }
    }
}

/// Runs `rentcheck collect`: prints the summary and says how the run ended. The command's steps
/// in the order it runs them: token, host, window, steps, send.
pub async fn run(args: CollectArgs) -> Result<Exit, Stop> {
    if args.plan {
        return plan_run::run(&args).await;
    }
    let stage = args.stage.unwrap_or(1);
    let server = check_server(&args.server).map_err(usage)?;
    let given = args.token.as_ref().filter(|t| !t.expose().trim().is_empty());
    let token = agent_token(given, args.token_file.as_deref())?;
    let scrape_seconds = scrape_seconds(&args)?;
    let host = args.host.clone().unwrap_or_else(host_name);
    if host.is_empty() || host.len() > 200 || host.chars().any(|c| c.is_control()) {
        return Err(usage("--host must be 1 to 200 printable characters"));
    }
    // The vLLM window: the one given, or a new one the user needs for the matching --after.
    let generated_window = match (&args.vllm_url, &args.window) {
        (Some(_), None) => Some(new_window_id()),
        _ => None,
    };
    let vllm_window = args.window.clone().or_else(|| generated_window.clone());
    // A --scrape window always gets a new id: each run is its own load window.
    let scrape_window = scrape_seconds.map(|s| (new_window_id(), s));
    let steps = plan(
        &args,
        vllm_window.as_deref(),
        scrape_window.as_ref().map(|(id, s)| (id.as_str(), *s)),
    )
    .map_err(usage)?;
    if steps.is_empty() {
        return Err(Stop {
            exit: Exit::NothingToSend,
            message: "nothing to collect: --no-tools without --vllm-url, --scrape, --bench-json or --file".into(),
        });
    }
    // With --scrape, --window is seconds, not an id: keys are scoped to the hour (the scrape pair's
    // labels carry its own new window id, so it never replays an earlier pair).
    let window = key_window(if scrape_window.is_some() {
        None
    } else {
        args.window.as_deref()
    });
    let timeout = Duration::from_secs(args.timeout);
    let client = agent_client(&args, &server, token)?;
    if let Some(w) = &generated_window {
        eprintln!("vLLM window id: {w}  (pass --window {w} to the matching --after run)");
    }
    if let Some((w, seconds)) = &scrape_window {
        eprintln!("scrape window id: {w} ({seconds} s between the two scrapes)");
    }

    // Every step's output is gathered first, then sent in one batch request (one per 500 items
    // or 10 MiB); the rows keep the steps' order.
    let origin = Origin {
        host: &host,
        brief: args.brief,
        trial: args.trial,
        stage,
        window: &window,
    };
    let (rows, pending) = gather_steps(&steps, &client, timeout, &origin).await;

    let answers = send_all(&client, &pending, stage).await;
    let mut summary = Summary::default();
    for row in rows {
        match row {
            Planned::Done(name, kind, outcome, detail) => summary.push(&name, &kind, outcome, detail),
            Planned::Sending(i) => {
                let (p, answer) = (&pending[i], &answers[i]);
                let (outcome, detail) = sent_row(p, answer);
                summary.push(&p.name, &p.kind, outcome, detail);
            }
        }
    }

    Ok(report(
        &summary,
        &args,
        vllm_window.as_deref(),
        scrape_window.as_ref().map(|(w, _)| w.as_str()),
    ))
}

/// The seconds between the two scrapes of `--scrape` (its `--window`), when there are scrapes;
/// else `--window` is a window id, checked.
fn scrape_seconds(args: &CollectArgs) -> Result<Option<u64>, Stop> {
    Ok(if args.scrapes.is_empty() {
        if let Some(w) = &args.window {
            check_window(w).map_err(usage)?;
        }
        None
    } else {
        Some(scrape_window_seconds(args.window.as_deref())?)
    })
}

/// The client that sends the evidence with the agent token, retrying as `--attempts` says.
fn agent_client(args: &CollectArgs, server: &str, token: Secret) -> Result<Client, Stop> {
    let policy = RetryPolicy {
        max_attempts: args.attempts,
        ..RetryPolicy::default()
    };
    Client::new(
        server,
        args.brief,
        args.trial,
        token,
        Duration::from_secs(args.http_timeout),
        policy,
    )
    .map_err(|e| Stop {
        exit: Exit::SomeFailed,
        message: format!("{e:#}"),
    })
}

/// The agent token: the one given, else the one in `--token-file`.
fn agent_token(given: Option<&Secret>, token_file: Option<&std::path::Path>) -> Result<Secret, Stop> {
    Ok(match (given, token_file) {
        (Some(token), _) => token.clone(),
        (None, Some(file)) => Secret::new(
            crate::secrets::read_private_file(file)
                .map_err(|e| usage(format!("--token-file {}: {e}", file.display())))?
                .trim(),
        ),
        // Checked here rather than by clap, whose message would suggest the flag that `ps` shows.
        (None, None) => {
            return Err(usage(
                "no agent token: set RENTCHECK_TOKEN to the token minted on the brief's Agent tokens page \
                 (export RENTCHECK_TOKEN='…'), or give --token-file FILE",
            ))
        }
    })
}

/// Who and where an upload is from: what its idempotency key holds besides the step's own.
struct Origin<'a> {
    host: &'a str,
    brief: BriefId,
    trial: Option<TrialId>,
    stage: u8,
    /// `window:<id>` or `hour:<YYYY-MM-DDTHH>`.
    window: &'a str,
}

/// Runs each step and keeps what it gathered to send, in the steps' order; a step skipped or
/// failed is a row of the summary already.
async fn gather_steps(
    steps: &[Step],
    client: &Client,
    timeout: Duration,
    origin: &Origin<'_>,
) -> (Vec<Planned>, Vec<Pending>) {
    let mut rows: Vec<Planned> = Vec::new();
    let mut pending: Vec<Pending> = Vec::new();
    let n = steps.len();
    for (i, step) in steps.iter().enumerate() {
        let level_one = steps::diag_for_the_cards(
            step,
            pending
                .iter()
                .filter(|p| p.kind == "nvidia-smi-list")
                .map(|p| p.body.as_slice()),
        );
        let step = level_one.as_ref().unwrap_or(step);
        let name = step.source.describe();
        if let Source::Wait { seconds } = step.source {
            // Not a row of the summary.
            eprintln!(
                "[{}/{n}] waiting {seconds} s: run the load now (the window ends at the next scrape)",
                i + 1
            );
            gather(step, client, timeout).await;
            continue;
        }
        eprintln!("[{}/{n}] {name} ({}) ...", i + 1, step.kind);
        let (body, content_type, notes) = match gather(step, client, timeout).await {
            Gathered::Skipped(why) => {
                eprintln!("      skipped: {why}");
                rows.push(Planned::Done(name, step.kind.clone(), Outcome::Skipped, why));
                continue;
            }
            Gathered::Failed(why) => {
                eprintln!("      failed: {why}");
                rows.push(Planned::Done(name, step.kind.clone(), Outcome::Failed, why));
                continue;
            }
            Gathered::Content {
                body,
                content_type,
                notes,
            } => (body, content_type, notes),
        };
        for note in &notes {
            eprintln!("      note: {} {note}", name);
        }
        eprintln!("      gathered {} bytes", body.len());
        rows.push(Planned::Sending(pending.len()));
        pending.push(pending_upload(step, name, (body, content_type, notes), origin));
    }
    (rows, pending)
}

/// A step's output as an upload: its kind (a `--scrape` page's detected when it is known), its
/// labels and its idempotency key.
fn pending_upload(
    step: &Step,
    name: String,
    (body, content_type, notes): (Vec<u8>, &'static str, Vec<String>),
    origin: &Origin<'_>,
) -> Pending {
    // A `--scrape` page is whatever the endpoint serves: name its kind here when it is known
    // (the summary shows it), else let the server decide.
    let kind = match &step.source {
        Source::Scrape { phase: Some(_), .. } => detect_kind(&body).map_or("auto", |k| k.as_str()),
        _ => step.kind.as_str(),
    };
    let mut labels = vec![("host".to_owned(), origin.host.to_owned())];
    labels.extend(step.labels.iter().cloned());
    let key = idempotency_key(&KeyParts {
        host: origin.host,
        brief: origin.brief,
        trial: origin.trial,
        stage: origin.stage,
        kind,
        command: &name,
        labels: &labels,
        content_type,
        content: &body,
        window: origin.window,
    });
    Pending {
        name,
        kind: kind.to_owned(),
        labels,
        content_type,
        body,
        key,
        notes,
    }
}

/// Prints the summary and the window ids, and says how the run ended.
fn report(summary: &Summary, args: &CollectArgs, vllm_window: Option<&str>, scrape_window: Option<&str>) -> Exit {
    println!("{summary}");
    if let Some(w) = vllm_window {
        if args.vllm_url.is_some() {
            println!("vLLM window: {w}");
        }
    }
    if let Some(w) = scrape_window {
        println!("scrape window: {w}");
    }
    let failed = summary.failed();
    let delivered = summary.count(Outcome::Sent) + summary.count(Outcome::Replayed);
    if failed > 0 {
        eprintln!("rentcheck collect: {failed} of {} steps failed", summary.rows.len());
        Exit::SomeFailed
    } else if delivered == 0 {
        eprintln!("rentcheck collect: nothing was sent: every step was skipped");
        Exit::NothingToSend
    } else {
        Exit::Sent
    }
}

/// A summary row as the run plans it: finished while gathering, or waiting for the server.
enum Planned {
    Done(String, String, Outcome, String),
    Sending(usize),
}

/// A step's output, gathered and waiting to be sent.
struct Pending {
    name: String,
    kind: String,
    labels: Vec<(String, String)>,
    content_type: &'static str,
    body: Vec<u8>,
    key: String,
    notes: Vec<String>,
}

impl Pending {
    fn item(&self, stage: u8) -> Item<'_> {
        Item {
            kind: &self.kind,
            stage,
            labels: &self.labels,
            content_type: self.content_type,
            body: self.body.clone(),
            idempotency_key: &self.key,
        }
    }
}

/// Sends every pending item (see [`Client::post_all`]).
async fn send_all(client: &Client, pending: &[Pending], stage: u8) -> Vec<Result<Accepted, Refused>> {
    let items: Vec<Item<'_>> = pending.iter().map(|p| p.item(stage)).collect();
    eprintln!(
        "sending {} item{} ...",
        items.len(),
        if items.len() == 1 { "" } else { "s" }
    );
    client.post_all(&items).await
}

/// The summary row of a sent item, and its progress line.
fn sent_row(p: &Pending, answer: &Result<Accepted, Refused>) -> (Outcome, String) {
    let note_text = if p.notes.is_empty() {
        String::new()
    } else {
        format!("; {}", p.notes.join("; "))
    };
    match answer {
        Ok(a) => {
            let outcome = if a.replayed { Outcome::Replayed } else { Outcome::Sent };
            let id = a.id.map(|u| u.to_string()).unwrap_or_else(|| "(no id)".into());
            let mut detail = format!("{id} (parse {}", a.parse_status);
            if let Some(e) = &a.parse_error {
                detail.push_str(&format!(": {e}"));
            }
            if a.warnings > 0 {
                detail.push_str(&format!(", {} warnings", a.warnings));
            }
            detail.push(')');
            detail.push_str(&note_text);
            eprintln!(
                "      {}: {} {} bytes as {id}, parse {}{}",
                p.name,
                outcome.as_str(),
                p.body.len(),
                a.parse_status,
                if a.attempts > 1 {
                    format!(" (after {} attempts)", a.attempts)
                } else {
                    String::new()
                }
            );
            (outcome, detail)
        }
        Err(refused) => {
            eprintln!("      {}: failed: {}", p.name, refused.reason);
            (Outcome::Failed, format!("{}{note_text}", refused.reason))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts<'a>(content: &'a [u8], window: &'a str, labels: &'a [(String, String)]) -> KeyParts<'a> {
        KeyParts {
            host: "gpu-node-1",
            brief: BriefId::from(Uuid::nil()),
            trial: None,
            stage: 1,
            kind: "nvidia-smi-list",
            command: "nvidia-smi -L",
            labels,
            content_type: "text/plain; charset=utf-8",
            content,
            window,
        }
    }

    #[test]
    fn key_is_stable_and_changes_with_content_window_and_labels() {
        let none: Vec<(String, String)> = Vec::new();
        let a = idempotency_key(&parts(b"GPU 0", "hour:2026-01-01T10", &none));
        assert_eq!(a, idempotency_key(&parts(b"GPU 0", "hour:2026-01-01T10", &none)));
        assert!(a.starts_with("rc1-") && a.len() == 68 && a.bytes().all(|b| b.is_ascii_graphic()));
        assert_ne!(a, idempotency_key(&parts(b"GPU 1", "hour:2026-01-01T10", &none)));
        assert_ne!(a, idempotency_key(&parts(b"GPU 0", "hour:2026-01-01T11", &none)));
        let labels = vec![("phase".to_owned(), "after".to_owned())];
        assert_ne!(a, idempotency_key(&parts(b"GPU 0", "hour:2026-01-01T10", &labels)));
    }

    #[test]
    fn file_args_name_a_known_kind() {
        assert_eq!(
            parse_file_arg("nccl-tests=/tmp/out.txt").unwrap(),
            ("nccl-tests".to_owned(), PathBuf::from("/tmp/out.txt"))
        );
        assert_eq!(parse_file_arg("auto=a=b").unwrap().1, PathBuf::from("a=b"));
        assert!(parse_file_arg("nccl=/tmp/x").unwrap_err().contains("nccl-tests"));
        assert!(parse_file_arg("/tmp/x").is_err());
        assert!(parse_file_arg("log=").is_err());
    }
}
