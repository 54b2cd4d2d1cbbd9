//! Launcher line prefixes: output captured through a job launcher carries one prefix per line.
//!
//! * `mpirun --tag-output` (Open MPI): `[1,0]<stdout>:` — job, rank and stream;
//! * `srun -l` (Slurm): `  0: ` — the task id, right-aligned;
//! * Ray (and SkyPilot on Ray): `(pid=1234) `, `(RayWorker pid=1234, ip=10.0.0.1) `,
//!   `(head, rank=0, pid=3808) `;
//! * `kubectl logs --prefix`: `[pod/name/container] `, with `--timestamps` followed by an RFC 3339
//!   time (`2025-01-01T00:00:00.123456789Z `), which `kubectl logs --timestamps` and `docker logs -t`
//!   also print alone;
//! * MPICH and Intel MPI's `-prepend-rank` / `-l` (Hydra): `[0] `, which also stands glued inside a
//!   line that was printed in parts (`…  -1[0]    1626.5 …`).
//!
//! Open MPI's other tag forms are one prefix too: `--timestamp-output`
//! (`Mon Nov 11 12:34:56 2024[1,0]<stdout>:`), and PMIx's `--output tag,timestamp`
//! (`[Mon Nov 11 12:34:56 2024][1,0]<stdout>: `), `tag-detailed` (`[1,0][gpu01:4242]<stdout>: `)
//! and `tag-fullname` (`[prterun-host-100629@1,0]<stdout>: `).
//!
//! Prefixes stack (SkyPilot runs `mpirun` under Ray), so layers are peeled until none is left. A
//! layer of a shape nothing else prints (mpirun's, kubectl's, Ray's) is recognised on a fifth of the
//! lines — Open MPI prints its warnings untagged, ahead of a short run — one that a log line may
//! start with by chance (`0: `, `[0] `, a time) only when most lines carry it. When several sources printed (every rank of an `srun -l nvidia-smi`), only the source
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
    Hydra,
    Timestamps,
}

/// Every launcher, in the order of its `as usize`.
const LAUNCHERS: [Launcher; 6] = [
    Launcher::Mpirun,
    Launcher::Srun,
    Launcher::Ray,
    Launcher::Kubectl,
    Launcher::Hydra,
    Launcher::Timestamps,
];

impl Launcher {
    pub fn describe(self) -> &'static str {
        match self {
            Launcher::Mpirun => "mpirun --tag-output",
            Launcher::Srun => "srun -l",
            Launcher::Ray => "Ray",
            Launcher::Kubectl => "kubectl logs --prefix",
            Launcher::Hydra => "mpiexec -prepend-rank (MPICH, Intel MPI)",
            Launcher::Timestamps => "kubectl logs --timestamps / docker logs -t",
        }
    }

    /// Whether nothing but this launcher starts a line so: found on a fifth of the lines.
    fn unmistakable(self) -> bool {
        matches!(self, Launcher::Mpirun | Launcher::Ray | Launcher::Kubectl)
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
        .or_else(|| hydra(line))
        .or_else(|| timestamp(line))
}

/// vLLM V1 prefixes each line with the process that printed it (`(APIServer pid=1)`,
/// `(EngineCore_DP0 pid=164)`, `(Worker_TP1 pid=2080)`) in Ray's shape. They are processes of one
/// server, not machines: one source, so the engine's KV-cache lines are not dropped as another
/// machine's output.
const VLLM_PROCESSES: &str = "vLLM server processes";

fn source_of(launcher: Launcher, src: &str) -> &str {
    let role = src.split([' ', ',']).next().unwrap_or_default();
    let vllm = [
        "APIServer",
        "ApiServer",
        "EngineCore",
        "DPEngineCoreActor",
        "Worker",
        "VllmWorker",
        "RayWorkerWrapper",
    ]
    .iter()
    .any(|p| role.starts_with(p));
    if launcher == Launcher::Ray && vllm {
        VLLM_PROCESSES
    } else {
        src
    }
}

/// `[1,0]<stdout>:` → source `1,0` (the stream is not part of the source: a rank's stdout and
/// stderr are one source), also behind a time (`Mon Nov 11 12:34:56 2024[1,0]<stdout>:`,
/// `[Mon Nov 11 12:34:56 2024][1,0]<stdout>:`), beside the host (`[1,0][gpu01:4242]<stdout>:`) or
/// with the job's name (`[prterun-host-100629@1,0]<stdout>:`).
fn mpirun(line: &str) -> Option<(Launcher, &str, usize)> {
    // The stream tag ends the prefix, within its first 100 bytes.
    let head = line.get(..line.len().min(100)).unwrap_or(line);
    // Most lines have no `<` near their start: one byte scan says so before the three searches.
    if !head.as_bytes().contains(&b'<') {
        return None;
    }
    let (end, tag) = ["]<stdout>:", "]<stderr>:", "]<stddiag>:"]
        .iter()
        .filter_map(|t| head.find(t).map(|i| (i, *t)))
        .min()?;
    let before = &line[..end + 1];
    // A time may stand before the first bracket (`Mon Nov 11 12:34:56 2024`); nothing else.
    let first = before.find('[')?;
    let time = &before[..first];
    let timelike = time.chars().all(|c| c.is_ascii_alphanumeric() || c == ' ' || c == ':')
        && time.contains(':')
        && time.bytes().filter(u8::is_ascii_digit).count() >= 4;
    if !(time.is_empty() || timelike) {
        return None;
    }
    // The bracketed groups: one holds the job and rank (`1,0`, `name@1,0`).
    let ids = before[first..]
        .split_inclusive(']')
        .filter_map(|g| g.strip_prefix('[')?.strip_suffix(']'))
        .find_map(|g| {
            let ids = g.rsplit_once('@').map_or(g, |(_, ids)| ids);
            let (job, rank) = ids.split_once(',')?;
            let digits = |x: &str| !x.is_empty() && x.bytes().all(|b| b.is_ascii_digit());
            (digits(job) && digits(rank)).then_some(ids)
        })?;
    Some((Launcher::Mpirun, ids, end + tag.len()))
}

/// `[pod/NAME/CONTAINER] ` → source `pod/NAME/CONTAINER`; with `--timestamps` the time after it
/// is part of the prefix.
fn kubectl(line: &str) -> Option<(Launcher, &str, usize)> {
    let rest = line.strip_prefix("[pod/")?;
    let close = rest.find("] ")?;
    let inner = rest.get(..close)?;
    if inner.matches('/').count() != 1 || inner.contains(char::is_whitespace) {
        return None;
    }
    let source = line.get(1..5 + close)?;
    let len = 5 + close + 2;
    let time = line.get(len..).map_or(0, rfc3339_len);
    Some((Launcher::Kubectl, source, len + time))
}

/// The length of an RFC 3339 time and the space after it at the start of `s`
/// (`2025-01-01T00:00:00.123456789Z `, `2025-01-01T00:00:00+00:00 `), else 0: the time's own
/// syntax to its zone, then a space, so a CSV row that starts with a time keeps its figures.
fn rfc3339_len(s: &str) -> usize {
    let b = s.as_bytes();
    let digits_at = |i: usize, n: usize| b.get(i..i + n).is_some_and(|d| d.iter().all(u8::is_ascii_digit));
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    // 2025-01-01T00:00:00
    let clock = digits_at(0, 4)
        && at(4, b'-')
        && digits_at(5, 2)
        && at(7, b'-')
        && digits_at(8, 2)
        && at(10, b'T')
        && digits_at(11, 2)
        && at(13, b':')
        && digits_at(14, 2)
        && at(16, b':')
        && digits_at(17, 2);
    if !clock {
        return 0;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1 + b[i + 1..].iter().take_while(|d| d.is_ascii_digit()).count();
    }
    if at(i, b'Z') {
        i += 1;
    } else if (at(i, b'+') || at(i, b'-')) && digits_at(i + 1, 2) && at(i + 3, b':') && digits_at(i + 4, 2) {
        i += 6;
    } else {
        return 0;
    }
    if at(i, b' ') {
        i + 1
    } else {
        0
    }
}

/// A line that starts with an RFC 3339 time (`kubectl logs --timestamps`, `docker logs -t`): one
/// source.
fn timestamp(line: &str) -> Option<(Launcher, &str, usize)> {
    let len = rfc3339_len(line);
    (len > 0).then_some((Launcher::Timestamps, "", len))
}

/// `[12] ` (MPICH and Intel MPI's `-prepend-rank`) → source `12`.
fn hydra(line: &str) -> Option<(Launcher, &str, usize)> {
    let rest = line.strip_prefix('[')?;
    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
    if n == 0 || n > 6 || rest.as_bytes().get(n) != Some(&b']') {
        return None;
    }
    let after = rest.get(n + 1..)?;
    if !(after.is_empty() || after.starts_with(' ')) {
        return None;
    }
    Some((
        Launcher::Hydra,
        rest.get(..n)?,
        1 + n + 1 + usize::from(!after.is_empty()),
    ))
}

/// A line of a Hydra layer without the rank tags that stand glued inside it: nccl-tests prints a
/// row in parts, and the launcher tags each part (`…  -1[0]    1626.5 …      0[0]    2302.3 …`).
/// Only the line's own tag, right after a figure and before the next one: `Using [0]mlx5_0` keeps
/// NCCL's device index, `0[0] -> 1[1]` its channel's ranks.
fn without_glued_tags(rest: &str, rank: &str) -> String {
    let tag = format!("[{rank}]");
    let mut out = String::with_capacity(rest.len());
    let mut last = 0;
    for (i, _) in rest.match_indices(tag.as_str()) {
        let after = rest[i + tag.len()..].trim_start_matches(' ');
        let glued = rest[..i]
            .chars()
            .next_back()
            .is_some_and(|c| c.is_ascii_digit() || c == '.' || c == 'A')
            && after.len() < rest.len() - i - tag.len()
            && after.starts_with(|c: char| c.is_ascii_digit() || c == 'N');
        if glued {
            out.push_str(&rest[last..i]);
            out.push(' ');
            last = i + tag.len();
        }
    }
    out.push_str(&rest[last..]);
    out
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

/// The launcher the sampled lines start with, if enough of them do: a fifth for a shape nothing
/// else prints, most of them otherwise.
fn detect_layer(text: &str) -> Option<Launcher> {
    let mut counts = [0usize; LAUNCHERS.len()];
    let mut lines = 0usize;
    for line in text.lines().filter(|l| !l.trim().is_empty()).take(SAMPLE_LINES) {
        lines += 1;
        if let Some((l, _, _)) = prefix_of(line) {
            counts[l as usize] += 1;
        }
    }
    let (i, &n) = counts.iter().enumerate().max_by_key(|(_, n)| **n)?;
    let launcher = *LAUNCHERS.get(i)?;
    let enough = if launcher.unmistakable() {
        n >= 2 && n * 5 >= lines
    } else {
        // An `ssh` warning or a launcher banner may come first, a stray match may not.
        n > 0 && n * 5 >= lines * 3
    };
    enough.then_some(launcher)
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
                let rest = line.get(len..).unwrap_or_default();
                if launcher == Launcher::Hydra {
                    layer.text.push_str(&without_glued_tags(rest, src));
                    layer.text.push('\n');
                    layer.kept.push(i + 1);
                    continue;
                }
                rest
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

    fn nccl(s: &str) -> Result<super::super::Parsed, super::super::ParseError> {
        super::super::parse(super::super::EvidenceKind::NcclTests, s.as_bytes())
    }

    const HEADER: &str =
        "#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong";
    const ROW: &str =
        "  1073741824     268435456     float     sum      -1   344981    3.11    3.11      0   344454    3.12    3.12      0";

    /// Open MPI prints its help blocks untagged ahead of the ranks' output (open-mpi/ompi
    /// `help-mpi-btl-openib.txt`); a one-size run is then a minority of tagged lines.
    #[test]
    fn a_short_tagged_run_behind_open_mpis_untagged_warnings_is_stripped() {
        let run = format!(
            "Warning: Permanently added 'w1' (ECDSA) to the list of known hosts.\n\
             --------------------------------------------------------------------------\n\
             WARNING: There was an error initializing an OpenFabrics device.\n\
             \x20 Local host:   guane12\n\
             \x20 Local device: mlx4_0\n\
             --------------------------------------------------------------------------\n\
             [1,0]<stdout>:{HEADER}\n[1,0]<stdout>:{ROW}\n[1,0]<stdout>:# Avg bus bandwidth    : 1.15327\n"
        );
        let p = nccl(&run).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(3.11));
        assert_eq!(
            super::super::detect::detect(run.as_bytes()),
            Some(super::super::EvidenceKind::NcclTests)
        );
        // A stray `0: ` in a log is still no Slurm layer.
        let log = "a\nb\nc\nd\n0: e\n";
        assert!(strip(log).launchers.is_empty());
    }

    /// `kubectl logs --prefix --timestamps`, `--timestamps` alone and `docker logs -t`.
    #[test]
    fn times_after_or_instead_of_the_kubectl_prefix_are_stripped() {
        let both = format!(
            "[pod/nccl-launcher/launcher] 2025-01-01T00:00:00.123456789Z {HEADER}\n\
             [pod/nccl-launcher/launcher] 2025-01-01T00:00:01.000000001Z {ROW}\n"
        );
        assert_eq!(nccl(&both).unwrap().get_num("nccl.busbw_peak_gbps"), Some(3.11));
        let alone = format!("2025-01-01T00:00:00.123456789Z {HEADER}\n2025-01-01T00:00:01.5+00:00 {ROW}\n");
        let p = nccl(&alone).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(3.11), "{:?}", p.warnings);
        assert_eq!(rfc3339_len("2025-01-01T00:00:00Z x"), 21);
        assert_eq!(rfc3339_len("2025-01-01 x"), 0);
        // A CSV row that starts with a time keeps its figures.
        assert_eq!(rfc3339_len("2025-01-01T00:00:00Z, 0, 85"), 0);
        assert_eq!(rfc3339_len("2025-01-01T00:00:00+00:00,85,40960 MiB"), 0);
    }

    /// MPICH's and Intel MPI's `-prepend-rank` tags every part of a row nccl-tests printed in parts
    /// (NVIDIA/nccl#1453); NCCL's device indices (`Using [0]mlx5_0`) are not tags.
    #[test]
    fn hydra_rank_tags_are_stripped_inside_a_row_too() {
        let run = "[0] #  Rank  0 Group  0 Pid 497888 on h100clust-worker-1 device  0 [0xa4] NVIDIA H100 80GB HBM3\n\
                   [0] #  Rank  1 Group  0 Pid 497889 on h100clust-worker-1 device  1 [0xae] NVIDIA H100 80GB HBM3\n\
                   [0] h100clust-worker-1:497888:497888 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0\n\
                   [0] #       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n\
                   [0]      1048576        262144     float     sum      -1[0]    1626.5    0.64    1.24      0[0]    2302.3    0.46    0.87      0\n\
                   [0] # Avg bus bandwidth    : 1.055\n";
        let p = nccl(run).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(1.24), "{:?}", p.warnings);
        assert_eq!(
            p.get_num("nccl.wrong"),
            Some(0.0),
            "a tag glued to #wrong is no wrong row"
        );
        assert_eq!(p.get_num("nccl.world_size"), Some(2.0));
        let s = strip(run);
        assert!(s.text.contains("Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB"), "{}", s.text);
        assert_eq!(
            without_glued_tags("NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P", "0"),
            "NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P"
        );
    }

    /// Open MPI's and PMIx's other tag forms (orte `iof_base_output.c`, openpmix `pmix_iof.c`).
    #[test]
    fn open_mpis_timed_detailed_and_named_tags_are_one_prefix() {
        for (line, ids) in [
            ("Mon Nov 11 12:34:56 2024[1,0]<stdout>:# nThread 1", "1,0"),
            ("[Mon Nov 11 12:34:56 2024][1,3]<stdout>: # nThread 1", "1,3"),
            ("[1,2][gpu01:4242]<stdout>: # nThread 1", "1,2"),
            ("[prterun-f5n18-100629@1,0]<stderr>: # nThread 1", "1,0"),
        ] {
            let (l, src, len) = prefix_of(line).unwrap_or_else(|| panic!("{line}"));
            assert_eq!((l, src), (Launcher::Mpirun, ids), "{line}");
            assert!(line[len..].trim_start().starts_with("# nThread"), "{line}");
        }
        assert_eq!(prefix_of("see [1,0]<stdout>: in the manual"), None);
    }
}
