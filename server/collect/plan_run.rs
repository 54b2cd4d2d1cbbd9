//! `rentcheck collect --plan`: fetches the trial's test plan from the server and runs it, step by
//! step in stage order — the first command of each step whose tool is on PATH, the probe and
//! checkpoint files the harness wrote, the load sweep (with `vllm bench serve`, else `guidellm`,
//! else the built-in generator, vLLM and dcgm-exporter scraped before and after each point) —
//! and sends each step's output as soon as it has it, in one batch request per step.
//!
//! Every upload carries the labels `host` and `plan_step` (the step's key) and an idempotency key
//! made of the trial, the step and the item, so a retried batch never doubles. A re-run skips the
//! steps the server already holds (the plan says which: uploads labelled with their key), so it
//! sends nothing twice and picks up where an earlier run stopped. To test the same allocation again
//! from the start, add a re-run trial. `--rerun` is a re-validation of the same trial (a commitment's
//! schedule): every step runs again and is sent as new evidence, its keys and a `revalidation`
//! label made of the UTC day; a step the server received that UTC day is held, so a retried
//! re-run picks up where it stopped and never doubles.

use std::{path::Path, time::Duration};

use sha2::{Digest, Sha256};

use super::{
    agent_client, allow, check_server,
    client::{Accepted, Client, Item, Refused},
    host_name,
    loadgen::{self, LoadSpec},
    plan::{
        shell_line_with, substitute, LoadPoint, PlanCommand, PlanStep, Runner, TestPlan, BUILT_IN_TOOL, PLAN_FORMAT,
        STEP_LABEL,
    },
    steps::{self, Gathered},
    summary::{Outcome, Summary},
    usage, CollectArgs, Exit, Stop,
};
use crate::ids::TrialId;
use crate::secrets::Secret;

/// The label a re-validation run (`--rerun`) puts on every upload: its UTC day.
pub const REVALIDATION_LABEL: &str = "revalidation";

/// One thing a step sends.
struct Output {
    /// Unique in the step: what it is (`output`, `result`, `vllm-metrics before`).
    name: String,
    kind: String,
    labels: Vec<(String, String)>,
    content_type: &'static str,
    body: Vec<u8>,
}

/// What running a step gave.
enum StepResult {
    Send(Vec<Output>, Vec<String>),
    Skipped(String),
    Failed(String),
}

/// `rcp1-` and the SHA-256 of the trial, the step and the item: the same on every run, so a batch
/// sent twice creates nothing new, and a second run's different bytes for a step already sent are
/// refused (409) rather than stored twice.
///
/// `attempt` is how many uploads of the step the server could not parse when the plan was read:
/// 0 gives the first attempt's keys; after a failed upload the step runs again under new keys, so
/// its new output is stored instead of refused as a changed repeat.
pub fn step_item_key(trial: TrialId, step: &str, item: &str, attempt: u32) -> String {
    let mut h = Sha256::new();
    let attempt = attempt.to_string();
    let parts: &[&str] = if attempt == "0" {
        &["rentcheck-plan/1", &trial.to_string(), step, item]
    } else {
        &["rentcheck-plan/1", &trial.to_string(), step, item, &attempt]
    };
    for part in parts {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    format!("rcp1-{}", hex::encode(h.finalize()))
}

/// The trial a token is scoped to, read from its claims without checking the signature: only to
/// name the plan to fetch; the server checks the token on every request.
fn trial_of_token(token: &str) -> Option<TrialId> {
    use base64::Engine;
    let payload = token.split('.').nth(1)?;
    let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(payload.trim_end_matches('='))
        .ok()?;
    let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
    claims.get("trial")?.as_str()?.parse().ok()
}

fn token(args: &CollectArgs) -> Result<Secret, Stop> {
    match (&args.token, &args.token_file) {
        (Some(token), _) => Ok(token.clone()),
        (None, Some(file)) => Ok(Secret::new(
            crate::secrets::read_private_file(file)
                .map_err(|e| usage(format!("--token-file {}: {e}", file.display())))?
                .trim(),
        )),
        (None, None) => Err(usage(
            "give the agent token in RENTCHECK_TOKEN or --token-file (mint one on the brief's Agent tokens page)",
        )),
    }
}

/// The `${NAME}` values: the flags, else the plan's defaults.
fn variables(plan: &TestPlan, args: &CollectArgs) -> Vec<(String, String)> {
    let flag = |name: &str| -> Option<String> {
        match name {
            "VLLM_URL" => args.vllm_url.clone(),
            "DCGM_EXPORTER_URL" => args.dcgm_exporter_url.clone(),
            "OUT" => args.out.as_ref().map(|p| p.display().to_string()),
            "PROBES" => args.probes_dir.as_ref().map(|p| p.display().to_string()),
            "VLLM_LOG" => args.vllm_log.as_ref().map(|p| p.display().to_string()),
            "HOSTFILE" => args.hostfile.as_ref().map(|p| p.display().to_string()),
            _ => None,
        }
    };
    plan.variables
        .iter()
        .map(|v| {
            let value = flag(&v.name).unwrap_or_else(|| v.default.clone());
            let value = if v.name.ends_with("_URL") {
                value.trim_end_matches('/').to_owned()
            } else {
                value
            };
            (v.name.clone(), value)
        })
        .collect()
}

/// The line a command runs as, with this machine's values, quoted for a shell: made from its
/// arguments, never the plan's own `shell` text, so what is printed is what runs.
fn printed_line(cmd: &PlanCommand, vars: &[(String, String)]) -> String {
    let argv: Vec<String> = cmd.argv.iter().map(|a| substitute(a, vars)).collect();
    let env: Vec<(String, String)> = cmd.env.iter().map(|(k, v)| (k.clone(), substitute(v, vars))).collect();
    shell_line_with(&env, &argv, |_| true)
}

/// The first of `commands` whose tool is present, with its path (`None` for the built-in).
fn pick(commands: &[PlanCommand]) -> Option<(&PlanCommand, Option<std::path::PathBuf>)> {
    present(commands).next()
}

/// The commands whose tool is present, in the plan's order of preference, each with its path
/// (`None` for the built-in).
fn present(commands: &[PlanCommand]) -> impl Iterator<Item = (&PlanCommand, Option<std::path::PathBuf>)> {
    commands.iter().filter_map(|c| {
        if c.tool == BUILT_IN_TOOL {
            Some((c, None))
        } else {
            steps::find_on_path(&c.tool).map(|p| (c, Some(p)))
        }
    })
}

/// "dcgmi not found on PATH (install …)", for each command of a step.
fn missing(commands: &[PlanCommand]) -> String {
    commands
        .iter()
        .map(|c| format!("{} not found on PATH ({})", c.tool, c.install_hint))
        .collect::<Vec<_>>()
        .join("; ")
}

/// `argv` with the value after `flag` replaced.
fn set_flag(argv: &mut [String], flag: &str, value: &str) {
    if let Some(i) = argv.iter().position(|a| a == flag) {
        if let Some(v) = argv.get_mut(i + 1) {
            *v = value.to_owned();
        }
    }
}

fn gathered(g: Gathered, name: &str, kind: &str) -> StepResult {
    match g {
        Gathered::Content {
            body,
            content_type,
            notes,
        } => StepResult::Send(
            vec![Output {
                name: name.to_owned(),
                kind: kind.to_owned(),
                labels: Vec::new(),
                content_type,
                body,
            }],
            notes,
        ),
        Gathered::Skipped(why) => StepResult::Skipped(why),
        Gathered::Failed(why) => StepResult::Failed(why),
    }
}

async fn command_step(step: &PlanStep, vars: &[(String, String)]) -> StepResult {
    let Some((cmd, Some(path))) = pick(&step.commands) else {
        return StepResult::Skipped(missing(&step.commands));
    };
    let argv: Vec<String> = cmd.argv.iter().skip(1).map(|a| substitute(a, vars)).collect();
    let env: Vec<(String, String)> = cmd.env.iter().map(|(k, v)| (k.clone(), substitute(v, vars))).collect();
    eprintln!("      $ {}", printed_line(cmd, vars));
    let g = steps::run_command_with_env(&path, &argv, &env, &step.kind, Duration::from_secs(step.timeout_s)).await;
    gathered(g, "output", &step.kind)
}

async fn file_step(step: &PlanStep, vars: &[(String, String)]) -> StepResult {
    let Some(file) = &step.file else {
        return StepResult::Failed("the plan names no file for this step".into());
    };
    let path = substitute(file, vars);
    if !Path::new(&path).is_file() {
        let template = step
            .template
            .as_ref()
            .map(|t| format!(", shaped like {t}"))
            .unwrap_or_default();
        return StepResult::Skipped(format!("no file at {path}: your harness writes it{template}"));
    }
    eprintln!("      reading {path}");
    gathered(steps::read_file(Path::new(&path), &step.kind).await, "file", &step.kind)
}

/// One load step from start to upload, in the order it runs: scrapes before, the run, scrapes
/// after, the batch.
async fn load_step(
    step: &PlanStep,
    plan: &TestPlan,
    vars: &[(String, String)],
    args: &CollectArgs,
    client: &Client,
) -> StepResult {
    let Some(point) = &step.load else {
        return StepResult::Failed("the plan gives no load point for this step".into());
    };
    let window = step.window.clone().unwrap_or_else(|| step.key.clone());
    let mut outputs = Vec::new();
    let mut notes = Vec::new();
    let scrapes: Vec<(String, &str, bool)> = step
        .scrapes
        .iter()
        .map(|s| (substitute(&s.url, vars), s.kind.as_str(), s.required))
        .collect();
    let mut reachable = Vec::new();
    let mut tried = Vec::new();
    let mut body = None;
    // A tool present but of another version (GuideLLM 0.7 dropped `guidellm benchmark`) refuses its
    // line at once and writes no result: the next tool runs, and the built-in generator is always
    // there. The window starts again before it, so no load of the first counts in the point; a
    // tool that ran a while (and may have loaded the server) ends the step instead.
    for (cmd, path) in present(&step.commands) {
        outputs.clear();
        notes.clear();
        reachable = match scrape_before(client, plan, &scrapes, &window, &mut outputs, &mut notes).await {
            Ok(reachable) => reachable,
            Err(stop) => return stop,
        };
        let started = std::time::Instant::now();
        match load_with(step, plan, vars, args, point, cmd, path, &mut notes).await {
            Ok(b) => {
                body = Some(b);
                break;
            }
            Err(StepResult::Failed(why)) if started.elapsed() < HAND_OVER_WITHIN => tried.push(why),
            Err(stop) => return stop,
        }
    }
    let Some(body) = body else {
        return if tried.is_empty() {
            StepResult::Skipped(missing(&step.commands))
        } else {
            StepResult::Failed(tried.join("; then "))
        };
    };
    if !tried.is_empty() {
        notes.push(format!("{} first", tried.join("; then ")));
    }
    outputs.push(Output {
        name: "result".into(),
        kind: step.kind.clone(),
        labels: vec![("window".into(), window.clone())],
        content_type: steps::content_type_for(&step.kind, &body),
        body,
    });
    scrape_after(client, &reachable, &window, &mut outputs, &mut notes).await;
    StepResult::Send(outputs, notes)
}

/// What a load run is given: the step, the plan's variables, the model, how many requests, and the
/// file its result goes to.
struct LoadRun<'a> {
    step: &'a PlanStep,
    vars: &'a [(String, String)],
    model: String,
    prompts: u32,
    output_file: &'a str,
}

/// The load run by rentcheck's built-in generator at the step's load point; its result, kept in
/// the output file too.
/// Each request's own time within its step's: the last one is sent when the arrivals end
/// (prompts ÷ rate), and it must end, answered or timed out, a minute before the step does, so that
/// a stuck request fails on its own and the others' figures are kept (with the step's time alone,
/// one stuck request lost the whole load point).
fn request_timeout_within(step_timeout_s: u64, prompts: u32, rate_rps: f64) -> Duration {
    let arrivals = if rate_rps.is_finite() && rate_rps > 0.0 {
        f64::from(prompts) / rate_rps
    } else {
        0.0
    };
    let left = step_timeout_s as f64 - arrivals - 60.0;
    Duration::from_secs_f64(left.max(30.0))
}

async fn built_in_load(
    load: &LoadRun<'_>,
    point: &LoadPoint,
    plan: &TestPlan,
    notes: &mut Vec<String>,
) -> Result<Vec<u8>, StepResult> {
    eprintln!(
        "      built-in load generator: {} req/s, {} requests of {} + {} tokens",
        point.rate_rps, load.prompts, point.input_tokens, point.output_tokens
    );
    let spec = LoadSpec {
        base_url: substitute("${VLLM_URL}", load.vars),
        endpoint: "/v1/completions".into(),
        model: load.model.clone(),
        input_len: point.input_tokens,
        output_len: point.output_tokens,
        request_rate: point.rate_rps,
        num_prompts: load.prompts,
        goodput: plan
            .load
            .as_ref()
            .map(|l| l.goodput.iter().map(|g| (g.metric.clone(), g.ms)).collect())
            .unwrap_or_default(),
        percentiles: vec![50.0, 95.0, 99.0],
        seed: 0,
        request_timeout: request_timeout_within(load.step.timeout_s, load.prompts, point.rate_rps),
    };
    let finished = tokio::time::timeout(Duration::from_secs(load.step.timeout_s), loadgen::run(&spec)).await;
    let result = match finished {
        Ok(Ok(r)) => r,
        Ok(Err(e)) => return Err(StepResult::Failed(format!("the built-in load generator: {e:#}"))),
        Err(_) => {
            return Err(StepResult::Failed(format!(
                "the load did not finish in {} s",
                load.step.timeout_s
            )))
        }
    };
    let text = result.to_string().into_bytes();
    if let Err(e) = tokio::fs::write(load.output_file, &text).await {
        notes.push(format!("the result was not kept at {}: {e}", load.output_file));
    }
    if let Some(why) = loadgen::bound_exceeded(&result) {
        return Err(StepResult::Failed(format!(
            "the server under test went over a bound: {why}"
        )));
    }
    notes.push("measured by rentcheck's built-in load generator".into());
    Ok(text)
}

/// The load run by the harness the plan names (`path`), with the model and request count set on
/// its command line; the result it wrote.
async fn harness_load(
    load: &LoadRun<'_>,
    cmd: &PlanCommand,
    path: &Path,
    notes: &mut Vec<String>,
) -> Result<Vec<u8>, StepResult> {
    let mut argv: Vec<String> = cmd.argv.iter().map(|a| substitute(a, load.vars)).collect();
    set_flag(&mut argv, "--model", &load.model);
    set_flag(&mut argv, "--num-prompts", &load.prompts.to_string());
    set_flag(&mut argv, "--max-requests", &load.prompts.to_string());
    eprintln!("      $ {}", shell_line_with(&[], &argv, |_| true));
    let env: Vec<(String, String)> = cmd
        .env
        .iter()
        .map(|(k, v)| (k.clone(), substitute(v, load.vars)))
        .collect();
    let g = steps::run_command_with_env(path, &argv[1..], &env, "log", Duration::from_secs(load.step.timeout_s)).await;
    let (printed, run_notes) = match g {
        Gathered::Content { body, notes, .. } => (body, notes),
        Gathered::Failed(why) | Gathered::Skipped(why) => (Vec::new(), vec![why]),
    };
    match tokio::fs::read(load.output_file).await {
        Ok(b) if !b.is_empty() => {
            notes.extend(run_notes);
            Ok(b)
        }
        _ => {
            let tail: String = String::from_utf8_lossy(&printed)
                .chars()
                .rev()
                .take(300)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            Err(StepResult::Failed(format!(
                "{} wrote no result at {}{}{}",
                cmd.tool,
                load.output_file,
                if run_notes.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", run_notes.join("; "))
                },
                if tail.trim().is_empty() {
                    String::new()
                } else {
                    format!("; it printed: …{}", tail.trim())
                }
            )))
        }
    }
}

/// A load tool that fails sooner than this refused its line (another version, a missing model):
/// the point goes to the next tool. One that ran longer may have loaded the server.
const HAND_OVER_WITHIN: Duration = Duration::from_secs(60);

/// One tool's run of a load point: its result file's bytes, or why there are none.
#[allow(clippy::too_many_arguments)] // one load point's run: each is a different part of it
async fn load_with(
    step: &PlanStep,
    plan: &TestPlan,
    vars: &[(String, String)],
    args: &CollectArgs,
    point: &LoadPoint,
    cmd: &PlanCommand,
    path: Option<std::path::PathBuf>,
    notes: &mut Vec<String>,
) -> Result<Vec<u8>, StepResult> {
    let output_file = substitute(cmd.output_file.as_deref().unwrap_or("${OUT}/result.json"), vars);
    if let Some(dir) = Path::new(&output_file).parent() {
        if let Err(e) = tokio::fs::create_dir_all(dir).await {
            return Err(StepResult::Failed(format!("cannot create {}: {e}", dir.display())));
        }
    }
    // A result left by an earlier run must not be taken for this one's.
    let _ = tokio::fs::remove_file(&output_file).await;
    let model = args.model.clone().unwrap_or_else(|| plan.brief.model.clone());
    let prompts = args.max_prompts.map_or(point.num_prompts, |m| m.min(point.num_prompts));
    let run = LoadRun {
        step,
        vars,
        model,
        prompts,
        output_file: &output_file,
    };
    match path {
        None => built_in_load(&run, point, plan, notes).await,
        Some(path) => harness_load(&run, cmd, &path, notes).await,
    }
}

/// The scrapes before the load, each kept as an output; those that answered (to scrape again
/// after), or the step's end when a required one does not answer.
async fn scrape_before<'s>(
    client: &Client,
    plan: &TestPlan,
    scrapes: &'s [(String, &'s str, bool)],
    window: &str,
    outputs: &mut Vec<Output>,
    notes: &mut Vec<String>,
) -> Result<Vec<(String, &'s str)>, StepResult> {
    let mut reachable = Vec::new();
    for (url, kind, required) in scrapes {
        match steps::scrape(client.http(), url).await {
            Gathered::Content { body, content_type, .. } => {
                reachable.push((url.clone(), *kind));
                outputs.push(Output {
                    name: format!("{kind} before"),
                    kind: (*kind).to_owned(),
                    labels: vec![("window".into(), window.to_owned()), ("phase".into(), "before".into())],
                    content_type,
                    body,
                });
            }
            Gathered::Failed(why) | Gathered::Skipped(why) if *required => {
                return Err(StepResult::Skipped(format!(
                    "the server under test does not answer ({why}): start it{} or pass --vllm-url",
                    plan.serve
                        .as_ref()
                        .map(|s| format!(" ({})", s.command))
                        .unwrap_or_default()
                )));
            }
            Gathered::Failed(why) | Gathered::Skipped(why) => {
                notes.push(format!("{kind} not scraped ({why}); its window figures are missing"));
            }
        }
    }
    Ok(reachable)
}

/// The scrapes after the load, of the endpoints that answered before it.
async fn scrape_after(
    client: &Client,
    reachable: &[(String, &str)],
    window: &str,
    outputs: &mut Vec<Output>,
    notes: &mut Vec<String>,
) {
    for (url, kind) in reachable {
        match steps::scrape(client.http(), url).await {
            Gathered::Content { body, content_type, .. } => outputs.push(Output {
                name: format!("{kind} after"),
                kind: (*kind).to_owned(),
                labels: vec![("window".into(), window.to_owned()), ("phase".into(), "after".into())],
                content_type,
                body,
            }),
            Gathered::Failed(why) | Gathered::Skipped(why) => {
                notes.push(format!("{kind} not scraped after the load ({why})"))
            }
        }
    }
}

/// Sends a step's outputs ([`Client::post_all`]).
async fn send(
    client: &Client,
    step: &PlanStep,
    trial: TrialId,
    host: &str,
    rerun: Option<&str>,
    outputs: &[Output],
) -> Vec<Result<Accepted, Refused>> {
    let keys: Vec<String> = outputs
        .iter()
        .map(|o| match rerun {
            Some(day) => step_item_key(trial, &step.key, &format!("{} (re-validation {day})", o.name), 0),
            None => step_item_key(trial, &step.key, &o.name, step.failed_uploads),
        })
        .collect();
    let labels: Vec<Vec<(String, String)>> = outputs
        .iter()
        .map(|o| {
            let mut l = vec![
                ("host".to_owned(), host.to_owned()),
                (STEP_LABEL.to_owned(), step.key.clone()),
            ];
            if let Some(day) = rerun {
                l.push((REVALIDATION_LABEL.to_owned(), day.to_owned()));
            }
            l.extend(o.labels.iter().cloned());
            l
        })
        .collect();
    let items: Vec<Item<'_>> = outputs
        .iter()
        .enumerate()
        .map(|(i, o)| Item {
            kind: &o.kind,
            stage: step.stage,
            labels: &labels[i],
            content_type: o.content_type,
            body: o.body.clone(),
            idempotency_key: &keys[i],
        })
        .collect();
    client.post_all(&items).await
}

/// The summary row of a sent step, and whether its refusal stops the run.
fn sent_row(
    outputs: &[Output],
    answers: &[Result<Accepted, Refused>],
    notes: &[String],
) -> (Outcome, String, Option<String>) {
    let mut parts = Vec::new();
    let (mut sent, mut replayed, mut held, mut failed) = (0, 0, 0, 0);
    let mut stop = None;
    for (o, a) in outputs.iter().zip(answers) {
        match a {
            Ok(a) => {
                if a.replayed {
                    replayed += 1;
                } else {
                    sent += 1;
                }
                let id = a.id.map(|u| u.to_string()).unwrap_or_else(|| "(no id)".into());
                parts.push(format!("{} {id} (parse {})", o.name, a.parse_status));
            }
            Err(r) if r.status == Some(reqwest::StatusCode::CONFLICT) => {
                held += 1;
                parts.push(format!("{}: already sent by an earlier run", o.name));
            }
            Err(r) => {
                failed += 1;
                if r.stops_the_run() {
                    stop = Some(r.stop_reason());
                }
                parts.push(format!("{}: {}", o.name, r.reason));
            }
        }
    }
    let outcome = if failed > 0 {
        Outcome::Failed
    } else if sent > 0 {
        Outcome::Sent
    } else if replayed > 0 {
        Outcome::Replayed
    } else if held > 0 {
        Outcome::Held
    } else {
        Outcome::Failed
    };
    let mut detail = parts.join("; ");
    if !notes.is_empty() {
        detail.push_str(&format!("; {}", notes.join("; ")));
    }
    (outcome, detail, stop)
}

fn dry_run(steps: &[&PlanStep], vars: &[(String, String)], rerun: bool) {
    for s in steps {
        println!("[stage {}] {} — {}", s.stage, s.key, s.title);
        println!("    feeds: {}", s.feeds.join(", "));
        if let Some(h) = &s.held {
            println!(
                "    held: the server has it ({} upload{}, newest {}): {}",
                h.evidence.len(),
                if h.evidence.len() == 1 { "" } else { "s" },
                h.received_at.format("%Y-%m-%d %H:%M UTC"),
                if rerun {
                    "a re-validation runs it again unless it arrived today (UTC)"
                } else {
                    "a run skips it"
                }
            );
        }
        match s.runner {
            Runner::Manual => println!("    by hand: {}", s.why),
            Runner::File => println!("    reads {}", substitute(s.file.as_deref().unwrap_or_default(), vars)),
            Runner::Command | Runner::Load => {
                let chosen = pick(&s.commands).map(|(c, _)| c.tool.clone());
                for c in &s.commands {
                    let state = if Some(&c.tool) == chosen.as_ref() {
                        "would run"
                    } else if c.tool == BUILT_IN_TOOL || steps::find_on_path(&c.tool).is_some() {
                        "present"
                    } else {
                        "missing"
                    };
                    println!("    {state:>9}: {}", printed_line(c, vars));
                }
                if chosen.is_none() {
                    println!("    skipped: {}", missing(&s.commands));
                }
                for sc in &s.scrapes {
                    println!(
                        "    scrapes {} before and after ({})",
                        substitute(&sc.url, vars),
                        sc.kind
                    );
                }
            }
        }
    }
}

/// Runs `rentcheck collect --plan`: the plan's steps in the order the agent runs them.
pub async fn run(args: &CollectArgs) -> Result<Exit, Stop> {
    let server = plan_server(args)?;
    let token = token(args)?;
    // The plan is the trial's: the one named, else the one the token is scoped to.
    let trial = args.trial.or_else(|| trial_of_token(token.expose())).ok_or_else(|| {
        usage("--plan needs --trial (the plan is the trial's), or a token minted for one trial (--trial on the tokens page)")
    })?;
    let host = args.host.clone().unwrap_or_else(host_name);
    if host.is_empty() || host.len() > 200 || host.chars().any(|c| c.is_control()) {
        return Err(usage("--host must be 1 to 200 printable characters"));
    }
    let client = agent_client(args, &server, token)?;
    let plan = fetch_plan(&client, &server, args, trial).await?;
    let vars = variables(&plan, args);
    let steps = steps_to_run(&plan, args)?;
    if args.dry_run {
        dry_run(&steps, &vars, args.rerun);
        return Ok(Exit::Sent);
    }
    // A re-validation runs every step again, and names its uploads by the day.
    let rerun = args.rerun.then(|| chrono::Utc::now().format("%Y-%m-%d").to_string());
    if let Some(day) = &rerun {
        eprintln!("re-validation run of {day}: every step runs again, held or not");
    }
    let mut summary = Summary::default();
    let mut stopped: Option<String> = None;
    let n = steps.len();
    for (i, step) in steps.iter().enumerate() {
        eprintln!("[{}/{n}] {} — {}", i + 1, step.key, step.title);
        if let Some(why) = &stopped {
            summary.push(&step.key, &step.kind, Outcome::Failed, format!("not sent: {why}"));
            continue;
        }
        if held_already(&mut summary, step, rerun.as_deref()) {
            continue;
        }
        let result = match step.runner {
            Runner::Manual => StepResult::Skipped(format!("not run by collect: {}", step.why)),
            Runner::Command => command_step(step, &vars).await,
            Runner::File => file_step(step, &vars).await,
            Runner::Load => load_step(step, &plan, &vars, args, &client).await,
        };
        match result {
            StepResult::Skipped(why) => {
                eprintln!("      skipped: {why}");
                summary.push(&step.key, &step.kind, Outcome::Skipped, why);
            }
            StepResult::Failed(why) => {
                eprintln!("      failed: {why}");
                summary.push(&step.key, &step.kind, Outcome::Failed, why);
            }
            StepResult::Send(outputs, notes) => {
                eprintln!(
                    "      sending {} item{} ...",
                    outputs.len(),
                    if outputs.len() == 1 { "" } else { "s" }
                );
                let answers = send(&client, step, trial, &host, rerun.as_deref(), &outputs).await;
                let (outcome, detail, stop) = sent_row(&outputs, &answers, &notes);
                eprintln!("      {}: {detail}", outcome.as_str());
                summary.push(&step.key, &step.kind, outcome, detail);
                stopped = stop;
            }
        }
    }
    Ok(report(&summary))
}

/// The server to fetch the plan from: plain http only to this machine, unless `--allow-http`.
fn plan_server(args: &CollectArgs) -> Result<String, Stop> {
    let server = check_server(&args.server).map_err(usage)?;
    if let Ok(url) = reqwest::Url::parse(&server) {
        if url.scheme() == "http" && !allow::is_loopback_host(&url) && !args.allow_http {
            return Err(usage(format!(
                "--server {server} is plain http:// to another machine: the agent token and the plan would cross the \
                 network in the clear, and anyone on the way could change what runs here. Use https://, a tunnel to \
                 127.0.0.1 (ssh -L), or --allow-http on a network you trust"
            )));
        }
    }
    Ok(server)
}

/// The trial's test plan from the server, refused when it asks to run what rentcheck's plan
/// builder does not write.
async fn fetch_plan(client: &Client, server: &str, args: &CollectArgs, trial: TrialId) -> Result<TestPlan, Stop> {
    let url = format!("{server}/api/v1/briefs/{}/trials/{trial}/plan", args.brief);
    let plan: TestPlan = match client.get_json(&url).await {
        Ok(v) => read_plan(v).map_err(|unreadable| {
            usage(format!(
                "the server's test plan was refused before anything ran: {unreadable}. Is rentcheck on this machine \
                 older than the server?"
            ))
        })?,
        Err(r) => {
            return Err(Stop {
                exit: Exit::SomeFailed,
                message: format!("could not fetch the test plan: {}", r.stop_reason()),
            })
        }
    };
    if plan.format > PLAN_FORMAT {
        eprintln!(
            "note: the plan is format {}, this rentcheck reads format {PLAN_FORMAT}: steps it does not know may be missed",
            plan.format
        );
    }
    if let Err(refused) = allow::check_plan(&plan) {
        return Err(usage(format!(
            "the server's test plan was refused before anything ran: {refused}. collect runs only what rentcheck's \
             plan builder writes (docs/test-plan.md, \"What collect agrees to run\"); is this server rentcheck?"
        )));
    }
    Ok(plan)
}

/// The plan as this binary reads it; what it cannot read is named by its step (an unknown runner,
/// a missing field), like any other refusal.
fn read_plan(plan: serde_json::Value) -> Result<TestPlan, allow::Refusal> {
    serde_path_to_error::deserialize(&plan).map_err(|e| {
        use serde_path_to_error::Segment;
        let at: Vec<&Segment> = e.path().iter().collect();
        // `stages[i].steps[j]…`: the step's key when it has a readable one.
        let key = match at.as_slice() {
            [Segment::Map { key: stages }, Segment::Seq { index: i }, Segment::Map { key: steps }, Segment::Seq { index: j }, ..]
                if stages == "stages" && steps == "steps" =>
            {
                plan["stages"][*i]["steps"][*j]["key"].as_str()
            }
            _ => None,
        };
        allow::Refusal {
            step: match key.filter(|k| allow::is_step_key(k)) {
                Some(key) => key.to_owned(),
                None => format!("at {}", e.path()),
            },
            what: format!("it could not be read ({})", e.inner()),
        }
    })
}

/// The plan's steps to run (those of `--stage` when it is given), said on stderr.
fn steps_to_run<'p>(plan: &'p TestPlan, args: &CollectArgs) -> Result<Vec<&'p PlanStep>, Stop> {
    let steps: Vec<&PlanStep> = plan
        .steps()
        .filter(|s| args.stage.is_none_or(|n| s.stage == n))
        .collect();
    if steps.is_empty() {
        return Err(Stop {
            exit: Exit::NothingToSend,
            message: match args.stage {
                Some(n) => format!("the plan has no step at stage {n}"),
                None => "the plan has no step: the card has no criteria".into(),
            },
        });
    }
    eprintln!(
        "test plan of {} ({}) for the brief {}: {} step{}",
        plan.trial.name,
        plan.trial.gpu.as_ref().map_or("no allocation".to_owned(), |g| format!(
            "{} × {g}",
            plan.trial.gpu_count
        )),
        plan.brief.name,
        steps.len(),
        if steps.len() == 1 { "" } else { "s" }
    );
    Ok(steps)
}

/// Whether the server holds the step already, and then its row of the summary. A re-validation
/// runs a held step again, unless it was sent this UTC day (a retried re-run picks up where it
/// stopped).
fn held_already(summary: &mut Summary, step: &PlanStep, rerun: Option<&str>) -> bool {
    let held = step
        .held
        .as_ref()
        .filter(|h| rerun.is_none_or(|day| h.received_at.format("%Y-%m-%d").to_string() == day));
    if let Some(h) = held {
        eprintln!("      held: the server has it");
        summary.push(
            &step.key,
            &step.kind,
            Outcome::Held,
            format!(
                "the server holds it: {} (newest {})",
                h.evidence.first().map(|u| u.to_string()).unwrap_or_default(),
                h.received_at.format("%Y-%m-%d %H:%M UTC")
            ),
        );
        return true;
    }
    false
}

/// Prints the summary and says how the run ended.
fn report(summary: &Summary) -> Exit {
    println!("{summary}");
    let failed = summary.failed();
    let delivered = summary.count(Outcome::Sent) + summary.count(Outcome::Replayed) + summary.count(Outcome::Held);
    if failed > 0 {
        eprintln!(
            "rentcheck collect --plan: {failed} of {} steps failed",
            summary.rows.len()
        );
        Exit::SomeFailed
    } else if delivered == 0 {
        eprintln!("rentcheck collect --plan: nothing was sent: every step was skipped");
        Exit::NothingToSend
    } else {
        Exit::Sent
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_ends_a_minute_before_its_load_points_step() {
        // 600 requests at 2 a second: the step has 2 × 300 + 600 = 1,200 s; the last request is
        // sent at 300 s and must end by 1,140 s.
        assert_eq!(request_timeout_within(1_200, 600, 2.0), Duration::from_secs(840));
        // All at once: the whole step less the minute.
        assert_eq!(
            request_timeout_within(600, 100, f64::INFINITY),
            Duration::from_secs(540)
        );
        // A step capped below its arrivals still leaves a request some time.
        assert_eq!(request_timeout_within(100, 10_000, 1.0), Duration::from_secs(30));
    }

    #[test]
    fn keys_come_from_the_trial_the_step_and_the_item() {
        let t = TrialId::from(uuid::Uuid::nil());
        let k = step_item_key(t, "1-dcgm-diag", "output", 0);
        assert_eq!(k, step_item_key(t, "1-dcgm-diag", "output", 0), "the same on every run");
        assert!(k.starts_with("rcp1-") && k.len() == 69);
        assert_ne!(k, step_item_key(t, "1-dcgm-diag", "result", 0));
        assert_ne!(k, step_item_key(t, "3-dcgm-diag", "output", 0));
        assert_ne!(
            k,
            step_item_key(TrialId::from(uuid::Uuid::max()), "1-dcgm-diag", "output", 0)
        );
        // After a failed upload the step's items get new keys, the same on every run of that attempt.
        let retry = step_item_key(t, "1-dcgm-diag", "output", 1);
        assert_ne!(k, retry);
        assert_eq!(retry, step_item_key(t, "1-dcgm-diag", "output", 1));
    }

    #[test]
    fn a_flag_value_is_replaced_in_place() {
        let mut argv: Vec<String> = ["vllm", "--num-prompts", "240", "--model", "m"]
            .map(String::from)
            .to_vec();
        set_flag(&mut argv, "--num-prompts", "10");
        set_flag(&mut argv, "--max-requests", "10");
        assert_eq!(argv, ["vllm", "--num-prompts", "10", "--model", "m"]);
    }
}
