//! What `rentcheck collect --plan` agrees to run. The plan comes from a server over the network
//! and runs as whoever started the agent (often root on a rented machine), so the agent does not
//! trust it: every command, environment variable, file and URL a plan names must have a shape the
//! plan builder (`plan::build`) emits. The list lives in the binary; a plan with anything else is
//! refused before any step runs, naming the step and what was refused.
//!
//! The shapes are written out here by hand rather than derived from the builder: the point is a
//! second, independent statement of what may run, so a builder bug or a hostile server cannot
//! widen it.

use super::plan::{PlanCommand, PlanStep, Runner, TestPlan, Variable, BUILT_IN_TOOL};

/// Why a plan was refused: the step (or `variables`) and what in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub step: String,
    pub what: String,
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "step {}: {}", self.step, self.what)
    }
}

/// What a plan variable's default may be. Paths are the builder's own, to the letter: a plan
/// choosing its own folders would choose what `file` steps read and `--result-file` overwrites
/// (`.ssh`, `.aws/credentials`); a person who wants another folder passes the flag.
#[derive(Clone, Copy)]
enum VariableDefault {
    LoopbackUrl,
    /// `./rentcheck-plan-` and the trial id's first eight hex digits.
    PlanFolder,
    Path(&'static str),
}

/// The variables a plan may name, and what each one's default may be.
const VARIABLES: [(&str, VariableDefault); 6] = [
    ("VLLM_URL", VariableDefault::LoopbackUrl),
    ("DCGM_EXPORTER_URL", VariableDefault::LoopbackUrl),
    ("OUT", VariableDefault::PlanFolder),
    ("PROBES", VariableDefault::Path("./rentcheck-probes")),
    ("VLLM_LOG", VariableDefault::Path("./vllm-server.log")),
    ("HOSTFILE", VariableDefault::Path("./hostfile")),
];

/// The nccl-tests binaries (github.com/NVIDIA/nccl-tests, `build/`).
const NCCL_TESTS: [&str; 10] = [
    "all_reduce_perf",
    "all_gather_perf",
    "alltoall_perf",
    "broadcast_perf",
    "gather_perf",
    "hypercube_perf",
    "reduce_perf",
    "reduce_scatter_perf",
    "scatter_perf",
    "sendrecv_perf",
];

/// Pages a plan may scrape, and the evidence kind each is.
const SCRAPES: [(&str, &str); 2] = [
    ("${VLLM_URL}/metrics", "vllm-metrics"),
    ("${DCGM_EXPORTER_URL}/metrics", "dcgm-exporter"),
];

/// Checks the whole plan; `Ok` means every step may run as written.
pub fn check_plan(plan: &TestPlan) -> Result<(), Refusal> {
    // The load steps put the brief's model on their command lines (`--model`).
    if !is_model(&plan.brief.model) {
        return Err(Refusal {
            step: "brief".into(),
            what: format!("the brief's model {:?} is not a model id", plan.brief.model),
        });
    }
    for v in &plan.variables {
        check_variable(v).map_err(|what| Refusal {
            step: "variables".into(),
            what,
        })?;
    }
    for step in plan.steps() {
        check_step(step).map_err(|what| Refusal {
            step: if is_step_key(&step.key) {
                step.key.clone()
            } else {
                "(a step with an unreadable key)".into()
            },
            what,
        })?;
    }
    Ok(())
}

fn check_variable(v: &Variable) -> Result<(), String> {
    let Some((_, allowed)) = VARIABLES.iter().find(|(name, _)| *name == v.name) else {
        return Err(format!("the variable {:?} is not one collect knows", v.name));
    };
    let refused = |shape: &str| {
        Err(format!(
            "the default of {} ({:?}) is not {shape}; pass the flag instead",
            v.name, v.default
        ))
    };
    match allowed {
        VariableDefault::LoopbackUrl if !is_loopback_url(&v.default) => refused("a loopback http:// URL"),
        VariableDefault::PlanFolder if !is_plan_folder(&v.default) => refused("./rentcheck-plan-<trial>"),
        VariableDefault::Path(path) if v.default != *path => refused(path),
        _ => Ok(()),
    }
}

/// `./rentcheck-plan-` and eight lowercase hex digits (`plan::build::short`).
fn is_plan_folder(p: &str) -> bool {
    p.strip_prefix("./rentcheck-plan-")
        .is_some_and(|id| id.len() == 8 && id.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)))
}

fn check_step(step: &PlanStep) -> Result<(), String> {
    if !is_step_key(&step.key) {
        return Err("its key is not a short word of letters, digits, `.` and `-`".into());
    }
    if !is_word(&step.kind, 64) {
        return Err(format!("its evidence kind {:?} is not a plain word", step.kind));
    }
    match step.runner {
        // Listed for a person, never run.
        Runner::Manual => Ok(()),
        Runner::File => match step.file.as_deref() {
            Some("${VLLM_LOG}") => Ok(()),
            Some(f) if file_under(f, "${PROBES}/") => Ok(()),
            Some(f) => Err(format!(
                "it reads {f:?}: a plan reads only ${{PROBES}}/NAME or ${{VLLM_LOG}}"
            )),
            None => Err("it names no file".into()),
        },
        Runner::Command | Runner::Load => {
            if step.commands.is_empty() {
                return Err("it has no command".into());
            }
            for c in &step.commands {
                check_command(c)?;
            }
            for s in &step.scrapes {
                if !SCRAPES.contains(&(s.url.as_str(), s.kind.as_str())) {
                    return Err(format!(
                        "it scrapes {:?} as {:?}: a plan scrapes only ${{VLLM_URL}}/metrics and ${{DCGM_EXPORTER_URL}}/metrics",
                        s.url, s.kind
                    ));
                }
            }
            if let Some(p) = &step.load {
                let bounded = p.rate_rps.is_finite()
                    && p.rate_rps > 0.0
                    && p.rate_rps <= 100_000.0
                    && p.num_prompts <= 100_000
                    && p.input_tokens <= 1_000_000
                    && p.output_tokens <= 1_000_000;
                if !bounded {
                    return Err("its load point is out of bounds (rate, requests or token counts)".into());
                }
            }
            Ok(())
        }
    }
}

fn check_command(c: &PlanCommand) -> Result<(), String> {
    let tool = c.tool.as_str();
    if c.argv.first().map(String::as_str) != Some(tool) {
        return Err(format!("its command does not start with its tool {tool:?}"));
    }
    let args = &c.argv[1..];
    let shape = match tool {
        "nvidia-smi" => nvidia_smi(args),
        "dcgmi" => dcgmi(args),
        "curl" => curl(args),
        "mpirun" => mpirun(args),
        "srun" => srun(args),
        "vllm" => vllm(args),
        "guidellm" => guidellm(args),
        BUILT_IN_TOOL => loadgen(args),
        t if NCCL_TESTS.contains(&t) => nccl_flags(args),
        _ => return Err(format!("it runs {tool:?}, which is not a tool collect runs")),
    };
    shape.map_err(|e| format!("{tool}: {e}"))?;
    for (name, value) in &c.env {
        if !env_allowed(name) || !is_env_value(value) {
            return Err(format!(
                "it sets the environment variable {name:?}, which collect does not set"
            ));
        }
    }
    match c.output_file.as_deref() {
        None => Ok(()),
        Some(f) if file_under(f, "${OUT}/") => Ok(()),
        Some(f) => Err(format!("it writes {f:?}: a plan writes only under ${{OUT}}")),
    }
}

// --- The tools' argument shapes -------------------------------------------------------------------

fn nvidia_smi(args: &[String]) -> Result<(), String> {
    let allowed: [&[&str]; 3] = [&["-L"], &["topo", "-m"], &["-q", "-x"]];
    if allowed
        .iter()
        .any(|a| args.iter().map(String::as_str).eq(a.iter().copied()))
    {
        Ok(())
    } else {
        Err(format!("the arguments {args:?} are not a query collect runs"))
    }
}

fn dcgmi(args: &[String]) -> Result<(), String> {
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    match a.as_slice() {
        ["discovery", "--list"] => Ok(()),
        ["diag", "-r", level, "-j"] if matches!(*level, "1" | "2" | "3" | "4") => Ok(()),
        _ => Err(format!("the arguments {args:?} are not a dcgmi run collect makes")),
    }
}

fn curl(args: &[String]) -> Result<(), String> {
    let mut urls = 0;
    for a in args {
        match a.as_str() {
            "-s" | "-S" | "-sS" | "--fail" | "--fail-with-body" | "--silent" | "--show-error" => {}
            u if SCRAPES.iter().any(|(url, _)| *url == u) => urls += 1,
            other => return Err(format!("{other:?} is not a scrape collect makes")),
        }
    }
    if urls == 1 {
        Ok(())
    } else {
        Err("a scrape names exactly one of the plan's /metrics pages".into())
    }
}

/// The value each flag of a tool takes.
#[derive(Clone, Copy)]
enum Value {
    /// A flag alone.
    None,
    Number,
    /// A byte count with an optional K, M, G or T (nccl-tests' `-b 8 -e 8G`).
    Size,
    Model,
    /// One of these words.
    OneOf(&'static [&'static str]),
    /// Comma-separated words or numbers (`ttft,tpot`, `50,95,99`).
    List,
    /// Exactly this text (a placeholder).
    Exactly(&'static str),
    /// A file name directly under `${OUT}`.
    OutFile,
    /// A bare file name (vLLM's `--result-filename`).
    FileName,
    /// `prompt_tokens=N,output_tokens=N`.
    TokenCounts,
    /// One or more `metric:ms` pairs (vLLM's `--goodput`), up to the next flag.
    GoodputPairs,
}

/// Checks `--flag value` pairs against `table`.
fn flags(args: &[String], table: &[(&str, Value)]) -> Result<(), String> {
    let mut i = 0;
    while i < args.len() {
        let flag = args[i].as_str();
        let Some((_, shape)) = table.iter().find(|(f, _)| *f == flag) else {
            return Err(format!("the flag {flag:?} is not one collect passes"));
        };
        i += 1;
        if let Value::GoodputPairs = shape {
            let start = i;
            while i < args.len() && !args[i].starts_with('-') {
                if !is_goodput_pair(&args[i]) {
                    return Err(format!("{flag} {:?} is not a metric:milliseconds pair", args[i]));
                }
                i += 1;
            }
            if i == start {
                return Err(format!("{flag} needs at least one metric:milliseconds pair"));
            }
            continue;
        }
        if let Value::None = shape {
            continue;
        }
        let Some(value) = args.get(i) else {
            return Err(format!("{flag} has no value"));
        };
        if !value_fits(*shape, value) {
            return Err(format!("{flag} {value:?} is not a value collect passes there"));
        }
        i += 1;
    }
    Ok(())
}

fn value_fits(shape: Value, v: &str) -> bool {
    match shape {
        Value::None | Value::GoodputPairs => false,
        Value::Number => is_number(v),
        Value::Size => {
            let digits = v.strip_suffix(['K', 'M', 'G', 'T']).unwrap_or(v);
            !digits.is_empty() && digits.len() <= 15 && digits.bytes().all(|b| b.is_ascii_digit())
        }
        Value::Model => is_model(v),
        Value::OneOf(words) => words.contains(&v),
        Value::List => {
            !v.is_empty()
                && v.len() <= 100
                && v.split(',')
                    .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.'))
        }
        Value::Exactly(text) => v == text,
        Value::OutFile => file_under(v, "${OUT}/"),
        Value::FileName => is_file_name(v),
        Value::TokenCounts => v
            .strip_prefix("prompt_tokens=")
            .and_then(|r| r.split_once(",output_tokens="))
            .is_some_and(|(a, b)| is_integer(a) && is_integer(b)),
    }
}

const NCCL_FLAGS: &[(&str, Value)] = &[
    ("-b", Value::Size),
    ("-e", Value::Size),
    ("-i", Value::Size),
    ("-f", Value::Number),
    ("-g", Value::Number),
    ("-t", Value::Number),
    ("-n", Value::Number),
    ("-w", Value::Number),
    ("-c", Value::Number),
    ("-m", Value::Number),
    ("-a", Value::Number),
    ("-p", Value::Number),
    ("-z", Value::Number),
    ("-G", Value::Number),
    ("-o", Value::OneOf(&["sum", "prod", "min", "max", "avg", "all"])),
    (
        "-d",
        Value::OneOf(&[
            "int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double", "bfloat16", "all",
        ]),
    ),
];

fn nccl_flags(args: &[String]) -> Result<(), String> {
    flags(args, NCCL_FLAGS)
}

/// A launcher's own options, then one nccl-tests binary and its flags.
fn launcher(args: &[String], options: impl Fn(&[String]) -> Result<usize, String>) -> Result<(), String> {
    let at = options(args)?;
    match args.get(at) {
        Some(bin) if NCCL_TESTS.contains(&bin.as_str()) => nccl_flags(&args[at + 1..]),
        Some(other) => Err(format!("it launches {other:?}, which is not an nccl-tests binary")),
        None => Err("it launches nothing".into()),
    }
}

fn mpirun(args: &[String]) -> Result<(), String> {
    launcher(args, |a| {
        let mut i = 0;
        while let Some(opt) = a.get(i) {
            let value = a.get(i + 1).map(String::as_str);
            match (opt.as_str(), value) {
                ("-np" | "-n" | "-N" | "--npernode", Some(v)) if is_integer(v) => i += 2,
                ("--hostfile" | "-hostfile", Some("${HOSTFILE}")) => i += 2,
                ("-x", Some(v)) => match v.split_once('=') {
                    Some((name, value)) if env_allowed(name) && is_env_value(value) => i += 2,
                    // This shell's own search paths, passed on as they are (no value of the plan's).
                    None if ["PATH", "LD_LIBRARY_PATH"].contains(&v) => i += 2,
                    _ => return Err(format!("-x {v:?} is not an environment setting collect passes")),
                },
                ("--bind-to", Some("none" | "core" | "socket" | "numa")) => i += 2,
                ("--tag-output" | "--allow-run-as-root", _) => i += 1,
                (o, _) if o.starts_with('-') => return Err(format!("the option {o:?} is not one collect passes")),
                _ => return Ok(i),
            }
        }
        Ok(i)
    })
}

fn srun(args: &[String]) -> Result<(), String> {
    launcher(args, |a| {
        let mut i = 0;
        while let Some(opt) = a.get(i) {
            let o = opt.as_str();
            let numeric = |prefix: &str| o.strip_prefix(prefix).is_some_and(is_integer);
            if o == "-l" || o == "--label" {
                i += 1;
            } else if (o == "-N" || o == "-n") && a.get(i + 1).is_some_and(|v| is_integer(v)) {
                i += 2;
            } else if [
                "--ntasks-per-node=",
                "--gpus-per-task=",
                "--ntasks=",
                "--nodes=",
                "--gpus-per-node=",
            ]
            .iter()
            .any(|p| numeric(p))
            {
                i += 1;
            } else if o.starts_with('-') {
                return Err(format!("the option {o:?} is not one collect passes"));
            } else {
                return Ok(i);
            }
        }
        Ok(i)
    })
}

fn vllm(args: &[String]) -> Result<(), String> {
    if args.len() < 2 || args[0] != "bench" || args[1] != "serve" {
        return Err("collect runs vllm only as `vllm bench serve`".into());
    }
    flags(
        &args[2..],
        &[
            ("--backend", Value::OneOf(&["openai", "openai-chat", "vllm"])),
            ("--base-url", Value::Exactly("${VLLM_URL}")),
            ("--endpoint", Value::OneOf(&["/v1/completions", "/v1/chat/completions"])),
            ("--model", Value::Model),
            ("--dataset-name", Value::OneOf(&["random"])),
            ("--random-input-len", Value::Number),
            ("--random-output-len", Value::Number),
            ("--ignore-eos", Value::None),
            ("--request-rate", Value::Number),
            ("--burstiness", Value::Number),
            ("--num-prompts", Value::Number),
            ("--max-concurrency", Value::Number),
            ("--seed", Value::Number),
            ("--percentile-metrics", Value::List),
            ("--metric-percentiles", Value::List),
            ("--goodput", Value::GoodputPairs),
            ("--save-result", Value::None),
            ("--save-detailed", Value::None),
            ("--result-dir", Value::Exactly("${OUT}")),
            ("--result-filename", Value::FileName),
        ],
    )
}

fn guidellm(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) != Some("benchmark") {
        return Err("collect runs guidellm only as `guidellm benchmark`".into());
    }
    flags(
        &args[1..],
        &[
            ("--target", Value::Exactly("${VLLM_URL}")),
            ("--model", Value::Model),
            (
                "--request-type",
                Value::OneOf(&["text_completions", "chat_completions"]),
            ),
            (
                "--rate-type",
                Value::OneOf(&[
                    "poisson",
                    "constant",
                    "sweep",
                    "synchronous",
                    "throughput",
                    "concurrent",
                ]),
            ),
            ("--rate", Value::Number),
            ("--max-requests", Value::Number),
            ("--max-seconds", Value::Number),
            ("--data", Value::TokenCounts),
            ("--output-path", Value::OutFile),
        ],
    )
}

fn loadgen(args: &[String]) -> Result<(), String> {
    if args.first().map(String::as_str) != Some("loadgen") {
        return Err("collect runs itself only as `rentcheck loadgen`".into());
    }
    flags(
        &args[1..],
        &[
            ("--base-url", Value::Exactly("${VLLM_URL}")),
            ("--endpoint", Value::OneOf(&["/v1/completions", "/v1/chat/completions"])),
            ("--model", Value::Model),
            ("--input-len", Value::Number),
            ("--output-len", Value::Number),
            ("--request-rate", Value::Number),
            ("--num-prompts", Value::Number),
            ("--goodput", Value::GoodputPairs),
            ("--result-file", Value::OutFile),
        ],
    )
}

// --- Small shapes -----------------------------------------------------------------------------

/// Environment variables a plan may set: NCCL's own settings (not the plugin loaders, which name
/// a shared library to load, nor the settings that name a file NCCL reads or writes, such as
/// `NCCL_DEBUG_FILE`, which would write its log over any file in the working folder) and which
/// GPUs a process sees.
fn env_allowed(name: &str) -> bool {
    let nccl = name.strip_prefix("NCCL_").is_some_and(|rest| {
        !rest.is_empty()
            && rest
                .bytes()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
    });
    let loads_code = name.ends_with("_PLUGIN") || name.contains("PLUGIN_");
    let names_a_file = ["FILE", "PATH", "DIR", "CONF"]
        .iter()
        .any(|word| name.split('_').any(|part| part == *word));
    (nccl && !loads_code && !names_a_file) || name == "CUDA_VISIBLE_DEVICES"
}

/// A step key as the builder writes them, safe to print.
pub fn is_step_key(key: &str) -> bool {
    is_word(key, 100)
}

fn is_env_value(v: &str) -> bool {
    v.len() <= 200 && v.bytes().all(|b| b.is_ascii_alphanumeric() || b"_.,:=^+-".contains(&b))
}

fn is_word(s: &str, max: usize) -> bool {
    !s.is_empty()
        && s.len() <= max
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
}

fn is_integer(s: &str) -> bool {
    !s.is_empty() && s.len() <= 15 && s.bytes().all(|b| b.is_ascii_digit())
}

fn is_number(s: &str) -> bool {
    match s.split_once('.') {
        Some((whole, frac)) => is_integer(whole) && is_integer(frac),
        None => is_integer(s),
    }
}

fn is_model(s: &str) -> bool {
    !s.is_empty() && s.len() <= 200 && !s.starts_with('-') && s.chars().all(crate::validation::is_model_id_char)
}

fn is_goodput_pair(s: &str) -> bool {
    s.split_once(':')
        .is_some_and(|(metric, ms)| matches!(metric, "ttft" | "tpot" | "e2el") && is_number(ms))
}

/// A file name of letters, digits, `.`, `_` and `-`, not hidden and not `..`.
fn is_file_name(s: &str) -> bool {
    is_word(s, 200) && !s.starts_with('.') && !s.starts_with('-')
}

/// `${DIR}/NAME` with NAME a plain file name: nothing above the folder, nothing beside it.
fn file_under(path: &str, folder: &str) -> bool {
    path.strip_prefix(folder).is_some_and(is_file_name)
}

/// `http://` or `https://` to 127.0.0.0/8, `localhost` or `[::1]`, with at most a port.
fn is_loopback_url(u: &str) -> bool {
    reqwest::Url::parse(u).is_ok_and(|url| {
        matches!(url.scheme(), "http" | "https")
            && url.username().is_empty()
            && url.password().is_none()
            && matches!(url.path(), "" | "/")
            && url.query().is_none()
            && is_loopback_host(&url)
    })
}

/// Whether a URL's host is this machine.
pub fn is_loopback_host(url: &reqwest::Url) -> bool {
    url.host_str().is_some_and(|h| {
        h.eq_ignore_ascii_case("localhost")
            || h.trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<std::net::IpAddr>()
                .is_ok_and(|ip| ip.is_loopback())
    })
}
