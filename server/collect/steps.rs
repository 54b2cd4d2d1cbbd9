//! What `collect` gathers: the GPU tools it runs when present, the vLLM scrape, `--scrape` windows
//! over any Prometheus endpoint, and files given on the command line. Each step yields bytes to
//! post, or a reason it has none.

use std::{
    path::{Path, PathBuf},
    process::Stdio,
    time::Duration,
};

use tokio::io::AsyncReadExt;

/// The tool commands, in the order they run, with the evidence kind each output is; the DCGM
/// diagnostic follows them ([`diag_command`]).
pub const TOOL_COMMANDS: [(&str, &[&str], &str); 4] = [
    ("nvidia-smi", &["-L"], "nvidia-smi-list"),
    ("nvidia-smi", &["topo", "-m"], "nvidia-smi-topo"),
    ("nvidia-smi", &["-q", "-x"], "nvidia-smi-query"),
    ("dcgmi", &["discovery", "--list"], "dcgm-discovery"),
];

/// `dcgmi diag` at the level the plan runs for `stage`: level 1 is the software checks alone, and
/// a pass of it would satisfy the card's health check without testing any hardware.
pub fn diag_command(stage: u8) -> Vec<String> {
    super::plan::diag_args(super::plan::diag_level(stage))
}

/// The tool steps of `collect` without a plan, for `stage`: the listings, then the diagnostic.
pub fn tool_steps(stage: u8) -> Vec<Step> {
    let command = |program: &str, args: Vec<String>, kind: &str| Step {
        source: Source::Command {
            program: program.to_owned(),
            args,
        },
        kind: kind.to_owned(),
        labels: Vec::new(),
    };
    TOOL_COMMANDS
        .iter()
        .map(|(program, argv, kind)| command(program, argv.iter().map(|a| (*a).to_owned()).collect(), kind))
        .chain([command("dcgmi", diag_command(stage), "dcgm-diag")])
        .collect()
}

/// The DCGM diagnostic step at level 1 when a GPU listing gathered before it names a GeForce (or
/// TITAN) card, where DCGM runs no other level (its tests would be skipped, and a skip is not a
/// pass); `None` to run `step` as it is. Workstation cards are in DCGM's list for every level.
pub fn diag_for_the_cards<'a>(step: &Step, listings: impl Iterator<Item = &'a [u8]>) -> Option<Step> {
    let Source::Command { program, args } = &step.source else {
        return None;
    };
    if program != "dcgmi" || args.first().is_none_or(|a| a != "diag") {
        return None;
    }
    let consumer = listings.map(String::from_utf8_lossy).any(|l| {
        l.lines()
            .any(|gpu| ["GeForce", "TITAN"].iter().any(|class| gpu.contains(class)))
    });
    consumer.then(|| Step {
        source: Source::Command {
            program: program.clone(),
            args: super::plan::diag_args(super::plan::diag_level_on(1, true)),
        },
        ..step.clone()
    })
}

/// How long a command may run: the general timeout, or longer for a DCGM diagnostic of a level
/// that takes longer (level 2 runs for minutes).
pub fn command_timeout(program: &str, args: &[String], general: Duration) -> Duration {
    let level = (program == "dcgmi" && args.first().is_some_and(|a| a == "diag"))
        .then(|| args.iter().skip_while(|a| *a != "-r").nth(1)?.parse::<u8>().ok())
        .flatten();
    level.map_or(general, |l| {
        general.max(Duration::from_secs(super::plan::diag_seconds(l)))
    })
}

/// Where a step's bytes come from.
#[derive(Debug, Clone)]
pub enum Source {
    Command {
        program: String,
        args: Vec<String>,
    },
    /// A Prometheus page; `phase` is `before` / `after` for a `--scrape` window.
    Scrape {
        url: String,
        phase: Option<&'static str>,
    },
    File {
        path: PathBuf,
    },
    /// `--scrape`'s load window: nothing is gathered, the run waits.
    Wait {
        seconds: u64,
    },
}

impl Source {
    /// What the summary calls the step, and what goes into the idempotency key as "the command".
    pub fn describe(&self) -> String {
        match self {
            Source::Command { program, args } => std::iter::once(program.as_str())
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" "),
            Source::Scrape { url, phase: None } => format!("GET {url}"),
            Source::Scrape {
                url,
                phase: Some(phase),
            } => format!("GET {url} ({phase})"),
            Source::File { path } => path.display().to_string(),
            Source::Wait { seconds } => format!("wait {seconds} s"),
        }
    }
}

/// One thing to gather and post.
#[derive(Debug, Clone)]
pub struct Step {
    pub source: Source,
    /// An evidence kind, or `auto`.
    pub kind: String,
    /// Labels beyond the ones every upload carries.
    pub labels: Vec<(String, String)>,
}

/// What gathering gave.
#[derive(Debug)]
pub enum Gathered {
    /// Bytes to post, their content type, and notes for the summary (a non-zero exit, a timeout).
    Content {
        body: Vec<u8>,
        content_type: &'static str,
        notes: Vec<String>,
    },
    /// Nothing to do here, and nothing wrong (a tool that is not installed).
    Skipped(String),
    /// Something that should have given bytes did not.
    Failed(String),
}

/// The full path of `program` on `PATH`, when it is there and executable.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .filter(|dir| !dir.as_os_str().is_empty())
        .map(|dir| dir.join(program))
        .find(|p| is_executable(p))
}

#[cfg(unix)]
fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(p: &Path) -> bool {
    p.is_file()
}

/// The content type each kind is posted with (the server stores it and hands it back on /raw).
pub fn content_type_for(kind: &str, body: &[u8]) -> &'static str {
    match kind {
        "nvidia-smi-query" if body.trim_ascii_start().starts_with(b"<") => "application/xml",
        "dcgm-diag" | "bench-serving" | "checkpoint-restore" | "probe" | "metrics"
            if body.trim_ascii_start().starts_with(b"{") =>
        {
            "application/json"
        }
        "bench-serving" => "application/x-ndjson",
        "vllm-metrics" => "text/plain; version=0.0.4",
        "log" | "auto" if std::str::from_utf8(body).is_err() => "application/octet-stream",
        _ => "text/plain; charset=utf-8",
    }
}

/// Runs `program args` with a time limit. Its stdout is the evidence; when stdout is empty, stderr
/// is (nvidia-smi and dcgmi explain a failure on one or the other). A non-zero exit or a timeout
/// is noted, and whatever was printed is still posted: the server's parser decides what it is.
pub async fn run_command(program: &Path, args: &[String], kind: &str, timeout: Duration) -> Gathered {
    run_command_with_env(program, args, &[], kind, timeout).await
}

/// The most a tool's stdout may hold: every report the plan asks for is far smaller (a long
/// nccl-tests sweep is some tens of KiB), and the server takes uploads of 16 MiB by default.
pub const TOOL_OUTPUT_LIMIT: u64 = 64 << 20;
/// The most of a tool's stderr kept (posted only when stdout is empty).
const TOOL_STDERR_LIMIT: u64 = 1 << 20;

/// [`run_command`] with environment variables added (a test plan's `NCCL_DEBUG=INFO`).
pub async fn run_command_with_env(
    program: &Path,
    args: &[String],
    env: &[(String, String)],
    kind: &str,
    timeout: Duration,
) -> Gathered {
    let mut child = match tokio::process::Command::new(program)
        .args(args)
        // The tools need no token of the agent's, and a report that copies its environment
        // (nccl-tests' `-J`) would upload it.
        .env_remove("RENTCHECK_TOKEN")
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
    {
        Ok(c) => c,
        Err(e) => return Gathered::Failed(format!("could not start {}: {e}", program.display())),
    };
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let mut out = Vec::new();
    let mut err = Vec::new();
    let work = async {
        // Each pipe is read up to its limit and one byte more, then closed: a tool that prints on
        // gets a broken pipe and ends, rather than filling the agent's memory or waiting for a
        // reader until the timeout.
        let read_out = async {
            if let Some(mut s) = stdout.take() {
                let _ = (&mut s).take(TOOL_OUTPUT_LIMIT + 1).read_to_end(&mut out).await;
            }
        };
        let read_err = async {
            if let Some(mut s) = stderr.take() {
                let _ = (&mut s).take(TOOL_STDERR_LIMIT + 1).read_to_end(&mut err).await;
            }
        };
        tokio::join!(read_out, read_err);
        child.wait().await
    };
    let mut notes = Vec::new();
    match tokio::time::timeout(timeout, work).await {
        Ok(Ok(status)) if status.success() => {}
        Ok(Ok(status)) => notes.push(match status.code() {
            Some(code) => format!("exited with status {code}"),
            None => "was killed by a signal".to_owned(),
        }),
        Ok(Err(e)) => return Gathered::Failed(format!("waiting for it failed: {e}")),
        Err(_) => {
            // What it printed so far stays and is posted; the parser will call it truncated.
            let _ = child.start_kill();
            notes.push(format!("timed out after {} s and was killed", timeout.as_secs()));
        }
    }
    if out.len() as u64 > TOOL_OUTPUT_LIMIT {
        let _ = child.start_kill();
        return Gathered::Failed(format!(
            "printed more than {} MiB on stdout: stopped reading (no GPU tool's report is that long)",
            TOOL_OUTPUT_LIMIT >> 20
        ));
    }
    err.truncate(TOOL_STDERR_LIMIT as usize);
    printed(out, err, notes, kind)
}

/// What a finished tool gave: its stdout, else its stderr (said so), else a failure saying what
/// happened to it.
fn printed(out: Vec<u8>, err: Vec<u8>, mut notes: Vec<String>, kind: &str) -> Gathered {
    let body = if out.iter().all(u8::is_ascii_whitespace) {
        if !err.iter().all(u8::is_ascii_whitespace) {
            notes.push("printed nothing on stdout; its stderr is posted".to_owned());
        }
        err
    } else {
        out
    };
    if body.iter().all(u8::is_ascii_whitespace) {
        let why = if notes.is_empty() {
            "printed nothing".to_owned()
        } else {
            format!("{} and printed nothing", notes.join("; "))
        };
        return Gathered::Failed(why);
    }
    let content_type = content_type_for(kind, &body);
    Gathered::Content {
        body,
        content_type,
        notes,
    }
}

/// The scrape URL: `/metrics` is appended when the URL has no path.
pub fn metrics_url(given: &str) -> anyhow::Result<String> {
    metrics_url_for("--vllm-url", given)
}

/// [`metrics_url`] for the flag named `flag` (in its error).
pub fn metrics_url_for(flag: &str, given: &str) -> anyhow::Result<String> {
    let url = reqwest::Url::parse(given).map_err(|e| anyhow::anyhow!("{flag} {given:?}: {e}"))?;
    anyhow::ensure!(
        matches!(url.scheme(), "http" | "https"),
        "{flag} must be an http:// URL, got {given:?}"
    );
    let mut url = url;
    if url.path().is_empty() || url.path() == "/" {
        url.set_path("/metrics");
    }
    Ok(url.to_string())
}

/// The largest scrape page read: vLLM's and dcgm-exporter's pages are hundreds of KB; more than this
/// is a broken or hostile endpoint, and reading on would cost the agent memory without bound.
pub const SCRAPE_BODY_LIMIT: usize = 64 << 20;

/// GETs a Prometheus text page of at most [`SCRAPE_BODY_LIMIT`] bytes.
pub async fn scrape(http: &reqwest::Client, url: &str) -> Gathered {
    scrape_within(http, url, SCRAPE_BODY_LIMIT).await
}

/// [`scrape`] with another bound (tests use a small one).
pub async fn scrape_within(http: &reqwest::Client, url: &str, limit: usize) -> Gathered {
    let res = match http.get(url).send().await {
        Ok(r) => r,
        Err(e) => return Gathered::Failed(format!("could not scrape {url}: {e}")),
    };
    let status = res.status();
    if !status.is_success() {
        return Gathered::Failed(format!("{url} answered {status}"));
    }
    match read_within(res, limit).await {
        Ok(b) if b.is_empty() => Gathered::Failed(format!("{url} answered an empty page")),
        Ok(b) => Gathered::Content {
            content_type: content_type_for("vllm-metrics", &b),
            body: b,
            notes: Vec::new(),
        },
        Err(BodyError::TooLarge) => Gathered::Failed(format!(
            "{url} answered a page larger than {}, the most a scrape reads; stopped reading",
            crate::figures::bytes(limit)
        )),
        Err(BodyError::Read(e)) => Gathered::Failed(format!("reading {url} failed: {e}")),
    }
}

/// Why a body was not read whole.
#[derive(Debug)]
pub enum BodyError {
    /// Over the bound (declared in `Content-Length`, or counted while reading).
    TooLarge,
    Read(reqwest::Error),
}

/// Reads a response body of at most `limit` bytes, stopping as soon as it is known to be larger.
pub async fn read_within(mut res: reqwest::Response, limit: usize) -> Result<Vec<u8>, BodyError> {
    let declared = res.content_length();
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(BodyError::TooLarge);
    }
    // A declared length is only a hint: room for at most 8 MiB is made before the bytes come.
    let mut body = Vec::with_capacity(declared.map_or(0, |n| n.min(8 << 20) as usize));
    while let Some(chunk) = res.chunk().await.map_err(BodyError::Read)? {
        if body.len() + chunk.len() > limit {
            return Err(BodyError::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// The length of `head` up to the end of its last whole line: after its last `\n`, in UTF-16 its
/// last `\n` code unit (saved by Windows PowerShell); all of it when it holds no line end.
fn whole_lines(head: &[u8]) -> usize {
    let end = match head.get(..2) {
        Some([0xFF, 0xFE]) => head
            .windows(2)
            .enumerate()
            .rev()
            .find(|(i, w)| i % 2 == 0 && *w == [b'\n', 0]),
        Some([0xFE, 0xFF]) => head
            .windows(2)
            .enumerate()
            .rev()
            .find(|(i, w)| i % 2 == 0 && *w == [0, b'\n']),
        _ => return head.iter().rposition(|b| *b == b'\n').map_or(head.len(), |i| i + 1),
    };
    end.map_or(head.len() & !1, |(i, _)| i + 2)
}

/// The most of a vLLM server's log read: its start-up, which is what the log is read for, comes
/// first; a server that logged every request for hours has written gigabytes after it.
pub const VLLM_LOG_HEAD: u64 = 8 << 20;

/// Reads a file named on the command line, up to 64 MiB (the server takes 16 by default,
/// `RENTCHECK_MAX_UPLOAD`): a larger file fails, naming its size, but a vLLM log is read from its
/// head (its start-up), with a note.
pub async fn read_file(path: &Path, kind: &str) -> Gathered {
    let limit = if kind == "vllm-log" {
        VLLM_LOG_HEAD
    } else {
        TOOL_OUTPUT_LIMIT
    };
    let read = async {
        let file = tokio::fs::File::open(path).await?;
        let size = file.metadata().await?.len();
        let mut body = Vec::new();
        file.take(limit).read_to_end(&mut body).await?;
        if size > limit {
            // Whole lines only: a cut inside a character of a prompt would make the text invalid.
            body.truncate(whole_lines(&body));
        }
        Ok::<_, std::io::Error>((body, size))
    };
    match read.await {
        // The server refuses empty evidence; say so here, naming the file.
        Ok((body, _)) if body.is_empty() => Gathered::Failed(format!("{} is empty", path.display())),
        Ok((_, size)) if size > limit && kind != "vllm-log" => Gathered::Failed(format!(
            "{} holds {size} bytes, more than the {limit} a file may send",
            path.display()
        )),
        Ok((body, size)) => Gathered::Content {
            content_type: content_type_for(kind, &body),
            notes: (size > limit)
                .then(|| format!("the first {limit} bytes of {size} sent: the server's start-up is at the log's head"))
                .into_iter()
                .collect(),
            body,
        },
        Err(e) => Gathered::Failed(format!("cannot read {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DCGM runs only level 1 on GeForce cards: what `nvidia-smi -L` listed
    /// before the diagnostic decides.
    #[test]
    fn a_geforce_listing_runs_the_diagnostic_at_level_one() {
        let diag = tool_steps(1).pop().unwrap();
        let geforce: &[u8] = b"GPU 0: NVIDIA GeForce RTX 4090 (UUID: GPU-1)\n";
        let h100: &[u8] = b"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-2)\n";
        let level_one = diag_for_the_cards(&diag, [geforce].into_iter()).unwrap();
        assert_eq!(level_one.source.describe(), "dcgmi diag -r 1 -j");
        assert!(diag_for_the_cards(&diag, [h100].into_iter()).is_none());
        // DCGM documents its workstation cards for every level.
        let workstation: &[u8] = b"GPU 0: NVIDIA RTX 6000 Ada Generation (UUID: GPU-3)\n";
        assert!(diag_for_the_cards(&diag, [workstation].into_iter()).is_none());
        let listing = tool_steps(1).remove(0);
        assert!(diag_for_the_cards(&listing, [geforce].into_iter()).is_none());
    }

    #[test]
    fn a_head_ends_at_a_whole_line_in_utf8_and_utf16() {
        assert_eq!(whole_lines(b"a\nbc"), 2);
        assert_eq!(whole_lines(b"abc"), 3, "no line end: all of it");
        let utf16: Vec<u8> = [0xFF, 0xFE]
            .into_iter()
            .chain("a\nb".encode_utf16().flat_map(u16::to_le_bytes))
            .collect();
        assert_eq!(whole_lines(&utf16[..utf16.len() - 1]), 6, "BOM, a, \\n");
    }

    /// A vLLM log of hours of request lines is read from its head, where the start-up is.
    #[tokio::test]
    async fn a_long_vllm_log_is_read_from_its_head() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("vllm.log");
        let mut log = b"INFO vLLM API server version 0.9.1\nINFO GPU KV cache size: 100,000 tokens\n".to_vec();
        // Request lines of prompts in another script: the head ends at a whole line, never inside
        // a character.
        while (log.len() as u64) < VLLM_LOG_HEAD + 1000 {
            log.extend_from_slice("INFO Received request: prompt: 'こんにちは、世界'\n".as_bytes());
        }
        std::fs::write(&path, &log).unwrap();
        match read_file(&path, "vllm-log").await {
            Gathered::Content { body, notes, .. } => {
                assert!(body.len() as u64 <= VLLM_LOG_HEAD && body.ends_with(b"\n"));
                assert!(std::str::from_utf8(&body).is_ok());
                assert!(body.starts_with(b"INFO vLLM API server version"));
                assert!(notes[0].contains("the first 8388608 bytes"), "{notes:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_diagnostic_runs_at_the_plans_level_for_the_stage_with_its_time() {
        // Level 1 is the software checks alone: a pass of it tests no hardware.
        assert_eq!(diag_command(1), ["diag", "-r", "2", "-j"]);
        assert_eq!(diag_command(3), ["diag", "-r", "3", "-j"]);
        let general = Duration::from_secs(120);
        assert_eq!(
            command_timeout("dcgmi", &diag_command(1), general),
            Duration::from_secs(1200)
        );
        let listing = ["-L".to_owned()];
        assert_eq!(command_timeout("nvidia-smi", &listing, general), general);
        let long = Duration::from_secs(3600);
        assert_eq!(command_timeout("dcgmi", &diag_command(2), long), long);
    }

    #[tokio::test]
    async fn a_tool_that_prints_without_end_is_stopped_at_the_limit() {
        let started = std::time::Instant::now();
        let g = run_command(
            Path::new("/bin/sh"),
            &["-c".to_owned(), "yes 0123456789abcdef0123456789abcdef".to_owned()],
            "log",
            Duration::from_secs(120),
        )
        .await;
        match g {
            Gathered::Failed(why) => assert!(why.contains("more than 64 MiB"), "{why}"),
            _ => panic!("an endless tool is refused"),
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "stopped at the limit, not the timeout"
        );
    }

    #[test]
    fn metrics_url_appends_the_path_only_when_there_is_none() {
        assert_eq!(
            metrics_url("http://10.0.0.5:8000").unwrap(),
            "http://10.0.0.5:8000/metrics"
        );
        assert_eq!(
            metrics_url("http://10.0.0.5:8000/").unwrap(),
            "http://10.0.0.5:8000/metrics"
        );
        assert_eq!(
            metrics_url("http://h:8000/vllm/metrics").unwrap(),
            "http://h:8000/vllm/metrics"
        );
        assert!(metrics_url("10.0.0.5:8000").is_err());
        assert!(metrics_url("ftp://h/metrics").is_err());
    }

    #[test]
    fn content_types_follow_the_bytes() {
        assert_eq!(content_type_for("nvidia-smi-query", b"<?xml"), "application/xml");
        assert_eq!(
            content_type_for("nvidia-smi-query", b"name, memory"),
            "text/plain; charset=utf-8"
        );
        assert_eq!(content_type_for("dcgm-diag", b"  {\"DCGM"), "application/json");
        assert_eq!(content_type_for("log", &[0xff, 0xfe]), "application/octet-stream");
    }
}
