//! Launcher line prefixes: output captured through a job launcher carries one prefix per line.
//!
//! * `mpirun --tag-output` (Open MPI): `[1,0]<stdout>:` — job, rank and stream;
//! * `srun -l` (Slurm): `  0: ` — the task id, right-aligned;
//! * Ray (and SkyPilot on Ray): `(pid=1234) `, `(RayWorker pid=1234, ip=10.0.0.1) `,
//!   `(head, rank=0, pid=3808) `;
//! * `kubectl logs --prefix`: `[pod/name/container] `.
//!
//! Prefixes stack (SkyPilot runs `mpirun` under Ray), so layers are peeled until none is left. A
//! layer is recognised only when most of the lines carry it, so a stray `0: ` in a log is not taken
//! for Slurm. When several sources printed (every rank of an `srun -l nvidia-smi`), only the source
//! that printed the most lines is kept — one file must be one machine's output — and a warning says
//! what was dropped. Lines without a prefix (an `ssh` warning before the job starts) are kept.
//!
//! Hand-written rather than regex: four fixed shapes, and the crate stays free of a regex engine.

use std::borrow::Cow;

/// A launcher whose prefixes were removed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Launcher {
    Mpirun,
    Srun,
    Ray,
    Kubectl,
}

impl Launcher {
    pub fn describe(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpirun --tag-output",
            Launcher::Srun => "srun -l",
            Launcher::Ray => "Ray",
            Launcher::Kubectl => "kubectl logs --prefix",
        }
    }
}

/// The input without its launcher prefixes.
#[derive(Debug, Clone, PartialEq)]
pub struct Stripped<'a> {
    pub text: Cow<'a, str>,
    /// The launchers found, outermost first.
    pub launchers: Vec<Launcher>,
    /// One warning per layer removed, and one when other sources' lines were dropped.
    pub warnings: Vec<String>,
    /// For each line of `text`, its 1-based line number in the input (empty when no line was
    /// dropped: numbers are unchanged).
    pub line_map: Vec<usize>,
}

impl Stripped<'_> {
    /// The input line that `line` (1-based, of `text`) came from.
    pub fn original_line(&self, line: usize) -> usize {
        if self.line_map.is_empty() {
            return line;
        }
        line.checked_sub(1)
            .and_then(|i| self.line_map.get(i))
            .copied()
            .unwrap_or(line)
    }
}

/// Lines sampled to decide whether a layer is present.
const SAMPLE_LINES: usize = 400;
/// Prefixes peeled at most (Ray over mpirun over srun is already unusual).
const MAX_LAYERS: usize = 3;

/// The prefix at the start of `line`: (launcher, source id, byte length of the prefix). Every form
/// may carry a few leading spaces (docs/evidence.md). as `srun -l`'s right-aligned labels do.
fn prefix_of(line: &str) -> Option<(Launcher, &str, usize)> {
    let lead = line.len() - line.trim_start_matches(' ').len();
    if (1..=6).contains(&lead) {
        let rest = line.get(lead..)?;
        if let Some((l, src, len)) = mpirun(rest).or_else(|| kubectl(rest)).or_else(|| ray(rest)) {
            return Some((l, src, lead + len));
        }
    }
    mpirun(line)
        .or_else(|| kubectl(line))
        .or_else(|| ray(line))
        .or_else(|| srun(line))
}

/// vLLM V1 prefixes each line with the process that printed it (`(APIServer pid=1)`,
/// `(EngineCore_DP0 pid=164)`, `(Worker_TP1 pid=2080)`) in Ray's shape. They are processes of one
/// server, not machines: one source, so the engine's KV-cache lines are not dropped as another
/// machine's output.
const VLLM_PROCESSES: &str = "vLLM server processes";

fn source_of(launcher: Launcher, src: &str) -> &str {
    let role = src.split([' ', ',']).next().unwrap_or_default();
    let vllm = ["APIServer", "ApiServer", "EngineCore", "Worker", "VllmWorker"]
        .iter()
        .any(|p| role.starts_with(p));
    if launcher == Launcher::Ray && vllm {
        VLLM_PROCESSES
    } else {
        src
    }
}

/// `[1,0]<stdout>:` → source `1,0` (the stream is not part of the source: a rank's stdout and
/// stderr are one source).
fn mpirun(line: &str) -> Option<(Launcher, &str, usize)> {
    let rest = line.strip_prefix('[')?;
    let close = rest.find(']')?;
    let ids = rest.get(..close)?;
    let (job, rank) = ids.split_once(',')?;
    if job.is_empty() || rank.is_empty() || !job.bytes().chain(rank.bytes()).all(|b| b.is_ascii_digit()) {
        return None;
    }
    let after = rest.get(close + 1..)?;
    let stream_end = after.strip_prefix('<')?.find(">:")?;
    let stream = after.get(1..1 + stream_end)?;
    if !matches!(stream, "stdout" | "stderr" | "stddiag") {
        return None;
    }
    Some((Launcher::Mpirun, ids, 1 + close + 1 + 1 + stream_end + 2))
}

/// `[pod/NAME/CONTAINER] ` → source `pod/NAME/CONTAINER`.
fn kubectl(line: &str) -> Option<(Launcher, &str, usize)> {
    let rest = line.strip_prefix("[pod/")?;
    let close = rest.find("] ")?;
    let inner = rest.get(..close)?;
    if inner.matches('/').count() != 1 || inner.contains(char::is_whitespace) {
        return None;
    }
    let source = line.get(1..5 + close)?;
    Some((Launcher::Kubectl, source, 5 + close + 2))
}

/// `(… pid=N …) ` → source: the text inside the parentheses up to `pid=N`. Ray colours the prefix
/// on a terminal (`\x1b[36m(pid=N)\x1b[0m `): the colour codes around it are part of it.
fn ray(line: &str) -> Option<(Launcher, &str, usize)> {
    let colour = ansi_code_len(line);
    let rest = line.get(colour..)?.strip_prefix('(')?;
    let close = rest.find(')')?;
    let after = rest.get(close + 1..)?;
    let reset = ansi_code_len(after);
    after.get(reset..)?.strip_prefix(' ')?;
    let inner = rest.get(..close)?;
    if inner.len() > 120 || inner.contains('(') {
        return None;
    }
    let pid_at = inner.find("pid=")?;
    if pid_at > 0 && !inner.get(..pid_at)?.ends_with([' ', ',']) {
        return None;
    }
    let digits = inner.get(pid_at + 4..)?;
    let n = digits.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 {
        return None;
    }
    let source = inner.get(..pid_at + 4 + n)?;
    Some((Launcher::Ray, source, colour + 1 + close + 1 + reset + 1))
}

/// The length of the ANSI colour codes (`ESC [ digits ; … m`, one after another: Ray's older
/// prefixes are dim, then cyan) that `s` starts with, else 0.
fn ansi_code_len(s: &str) -> usize {
    let mut len = 0;
    while let Some(rest) = s.get(len..).and_then(|r| r.strip_prefix("\x1b[")) {
        let n = rest.bytes().take_while(|b| b.is_ascii_digit() || *b == b';').count();
        if rest.as_bytes().get(n) != Some(&b'm') {
            break;
        }
        len += 2 + n + 1;
    }
    len
}

/// `  12: ` → source `12`.
fn srun(line: &str) -> Option<(Launcher, &str, usize)> {
    let start = line.len() - line.trim_start_matches(' ').len();
    if start > 6 {
        return None;
    }
    let rest = line.get(start..)?;
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 6 {
        return None;
    }
    let after = rest.get(n..)?;
    // `0:` alone (an empty line the task printed) or `0: text`.
    if after == ":" {
        return Some((Launcher::Srun, rest.get(..n)?, line.len()));
    }
    after.strip_prefix(": ")?;
    Some((Launcher::Srun, rest.get(..n)?, start + n + 2))
}

/// The launcher most of the sampled lines start with, if any.
fn detect_layer(text: &str) -> Option<Launcher> {
    let mut counts = [0usize; 4];
    let mut lines = 0usize;
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(SAMPLE_LINES) {
        lines += 1;
        if let Some((l, _, _)) = prefix_of(line) {
            counts[l as usize] += 1;
        }
    }
    let (i, &n) = counts.iter().enumerate().max_by_key(|(_, n)| **n)?;
    // Most lines: an `ssh` warning or a launcher banner may come first, a stray match may not.
    if n == 0 || n * 5 < lines * 3 {
        return None;
    }
    [Launcher::Mpirun, Launcher::Srun, Launcher::Ray, Launcher::Kubectl]
        .get(i)
        .copied()
}

/// Removes every launcher layer from `s`. Input without prefixes is returned borrowed.
pub fn strip(s: &str) -> Stripped<'_> {
    let mut out = Stripped {
        text: Cow::Borrowed(s),
        launchers: Vec::new(),
        warnings: Vec::new(),
        line_map: Vec::new(),
    };
    for _ in 0..MAX_LAYERS {
        let Some(launcher) = detect_layer(&out.text) else { break };
        let layer = strip_layer(&out.text, launcher);
        // Compose the line maps: layer lines → previous text's lines → input lines.
        let map = if layer.kept.len() == out.text.lines().count() && out.line_map.is_empty() {
            Vec::new()
        } else {
            layer.kept.iter().map(|&prev| out.original_line(prev)).collect()
        };
        out.warnings.push(format!(
            "launcher prefix {} (e.g. `{}`) stripped from {} line(s)",
            launcher.describe(),
            layer.example,
            layer.stripped
        ));
        if layer.dropped_lines > 0 {
            out.warnings.push(format!(
                "{} printed by {} source(s) other than `{}` dropped ({}): only one source's output is read",
                plural(layer.dropped_lines, "line"),
                layer.dropped_sources.len(),
                layer.main,
                layer.dropped_sources.join(", ")
            ));
        }
        out.launchers.push(launcher);
        out.line_map = map;
        out.text = Cow::Owned(layer.text);
    }
    out
}

fn plural(n: usize, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

struct Layer {
    text: String,
    /// 1-based numbers (in the text the layer was peeled from) of the lines kept.
    kept: Vec<usize>,
    stripped: usize,
    example: String,
    main: String,
    dropped_sources: Vec<String>,
    dropped_lines: usize,
}

fn strip_layer(text: &str, launcher: Launcher) -> Layer {
    // Lines per source, to pick the main one (most lines; the first seen on a tie).
    let mut sources: Vec<(&str, usize)> = Vec::new();
    let mut source_at: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for line in text.lines() {
        if let Some((l, src, _)) = prefix_of(line) {
            if l != launcher {
                continue;
            }
            let src = source_of(l, src);
            if let Some(&i) = source_at.get(src) {
                sources[i].1 += 1;
            } else if sources.len() < 4096 {
                source_at.insert(src, sources.len());
                sources.push((src, 1));
            }
        }
    }
    let main = sources
        .iter()
        .enumerate()
        .max_by(|a, b| a.1 .1.cmp(&b.1 .1).then(b.0.cmp(&a.0)))
        .map(|(_, (s, _))| *s)
        .unwrap_or_default();
    let mut layer = Layer {
        text: String::with_capacity(text.len()),
        kept: Vec::new(),
        stripped: 0,
        example: String::new(),
        main: main.to_owned(),
        dropped_sources: Vec::new(),
        dropped_lines: 0,
    };
    for (i, line) in text.lines().enumerate() {
        let kept = match prefix_of(line) {
            Some((l, src, len)) if l == launcher => {
                let src = source_of(l, src);
                if src != main {
                    layer.dropped_lines += 1;
                    if !layer.dropped_sources.iter().any(|s| s == src) && layer.dropped_sources.len() < 8 {
                        layer.dropped_sources.push(src.to_owned());
                    }
                    continue;
                }
                if layer.example.is_empty() {
                    layer.example = line.get(..len).unwrap_or_default().trim_end().to_owned();
                }
                layer.stripped += 1;
                line.get(len..).unwrap_or_default()
            }
            _ => line,
        };
        layer.text.push_str(kept);
        layer.text.push('\n');
        layer.kept.push(i + 1);
    }
    layer
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_process_prefixes_are_one_server_and_leading_spaces_are_allowed() {
        // Synthetic, in vLLM V1's shape: the API server and the engine core are one machine.
        let log = "(APIServer pid=1) INFO a\n(APIServer pid=1) INFO b\n(APIServer pid=1) INFO c\n\
                   (EngineCore_DP0 pid=164) INFO GPU KV cache size: 840,160 tokens\n";
        let s = strip(log);
        assert!(s.text.contains("GPU KV cache size: 840,160 tokens"), "{}", s.text);
        assert!(s.warnings.iter().all(|w| !w.contains("dropped")), "{:?}", s.warnings);
        // Two machines under Ray are still two sources.
        let ray = "(head, rank=0, pid=1) a\n(head, rank=0, pid=1) b\n(worker, rank=1, pid=2) c\n";
        assert!(strip(ray).warnings.iter().any(|w| w.contains("dropped")));
        assert_eq!(
            prefix_of("  [1,0]<stdout>:# nThread 1"),
            Some((Launcher::Mpirun, "1,0", 16))
        );
    }

    #[test]
    fn each_launcher_shape_is_recognised() {
        assert_eq!(
            prefix_of("[1,0]<stdout>:# nThread 1"),
            Some((Launcher::Mpirun, "1,0", 14))
        );
        assert_eq!(prefix_of("[1,12]<stderr>:x").map(|p| p.1), Some("1,12"));
        assert_eq!(prefix_of(" 0: # nThread 1"), Some((Launcher::Srun, "0", 4)));
        assert_eq!(prefix_of("12: x").map(|p| p.1), Some("12"));
        assert_eq!(prefix_of(" 0:").map(|p| p.2), Some(3));
        assert_eq!(
            prefix_of("(head, rank=0, pid=3808) [1,0]<stdout>:#"),
            Some((Launcher::Ray, "head, rank=0, pid=3808", 25))
        );
        assert_eq!(
            prefix_of("(RayWorker pid=77, ip=10.0.0.1) hello").map(|p| p.1),
            Some("RayWorker pid=77")
        );
        assert_eq!(
            prefix_of("[pod/nccl-launcher-x7/launcher] # nThread").map(|p| (p.1, p.2)),
            Some(("pod/nccl-launcher-x7/launcher", 32))
        );
        // Look-alikes that are not prefixes.
        for line in [
            "GPU 0: NVIDIA H100 (UUID: GPU-1)",
            "0, NVIDIA H100, 81559",
            "    Bus                               : 0x06",
            "[1,0] no stream",
            "(not a pid) x",
            "       8388608       2097152     float",
            "1234567: x",
        ] {
            assert_eq!(prefix_of(line), None, "{line}");
        }
    }

    #[test]
    fn a_few_prefixed_lines_are_not_a_layer() {
        let s = "GPU 0: A\nGPU 1: B\n0: odd\nGPU 2: C\n";
        let out = strip(s);
        assert!(out.launchers.is_empty());
        assert!(matches!(out.text, Cow::Borrowed(_)));
    }

    #[test]
    fn stacked_layers_are_peeled_and_other_ranks_dropped() {
        let s = "Warning: added host\n\
                 (head, rank=0, pid=1) [1,0]<stdout>:# nThread 1\n\
                 (head, rank=0, pid=1) [1,1]<stdout>:NCCL INFO x\n\
                 (head, rank=0, pid=1) [1,0]<stdout>:  1024 row\n";
        let out = strip(s);
        assert_eq!(out.launchers, [Launcher::Ray, Launcher::Mpirun]);
        assert_eq!(out.text, "Warning: added host\n# nThread 1\n  1024 row\n");
        // The second line of the result is line 2 of the input, the third is line 4.
        assert_eq!(out.original_line(2), 2);
        assert_eq!(out.original_line(3), 4);
        assert!(
            out.warnings.iter().any(|w| w.contains("dropped (1,1)")),
            "{:?}",
            out.warnings
        );
    }
}
