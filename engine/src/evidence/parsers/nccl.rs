//! nccl-tests `*_perf` stdout (all_reduce_perf, all_gather_perf, alltoall_perf, …).
//!
//! * Columns are found from the header tokens (current `… root time algbw busbw #wrong` ×2, or the
//!   old layout without `root` and with a float `error` column), never by position.
//! * `nccl.busbw_peak_gbps`: the largest OUT-OF-PLACE busbw over all sizes (headline);
//!   `nccl.busbw_at_max_size_gbps`: out-of-place busbw at the largest size; `nccl.busbw_avg_gbps`:
//!   the tool's `Avg bus bandwidth` line (average over all sizes).
//! * `nccl.wrong`: rows whose data check failed. nccl-tests ≥ 2.10 prints a `#wrong` count of wrong
//!   elements: any is corruption (`N/A` = not checked). Older builds print the largest absolute
//!   error as a float instead, and count a check as failed only above their own tolerance for the
//!   data type (`DeltaMaxValue`: half and bfloat16 1e-2, float 1e-5, double 1e-12, integers 0)
//!   times (ranks − 1), since each rank adds its rounding; the same rule is applied here, so
//!   `7e-07` on a 32-rank float sum is what a healthy run prints. The `Out of bounds values : N
//!   OK|FAILED` line is the tool's own verdict: OK overrules rows judged by the float tolerance (a
//!   warning names them), never a `#wrong` count above 0 in either column (out-of-place or in-place);
//!   FAILED with no row over it is counted as one row.
//! * `nccl.world_size`: the number of `Rank n …` lines (the a3mega paste lost some `#`s: accepted);
//!   `nccl.nodes`: their distinct hosts; `nccl.gpu_model`: the GPU they name.
//! * `nccl.expected_busbw_gbps` / `nccl.busbw_pct_of_expected`: the expected figure for that GPU,
//!   rank count and node count from `nccl_expected` (NIC count from `NCCL INFO NET/…` lines when
//!   NCCL_DEBUG=INFO printed them, else the platform's usual NICs, with a warning).
//! * A run that failed before the table (`Test CUDA failure …`, `Test NCCL failure …`) is NOT a parse
//!   error: it is valid evidence of a failed test. It yields `nccl.run_failed = true`, the failure
//!   lines as warnings and no busbw keys (so busbw criteria are `missing`, and a card can also require
//!   `nccl.run_failed == false`). A file with neither a table nor a failure line is an error.

use super::nccl_expected::{self, Nics};
use super::{ParseError, Parsed};

/// One `#  Rank  3 Group  0 Pid 1234 on host device  3 [0000:1f:00] NVIDIA H100 80GB HBM3` line.
struct RankLine {
    rank: usize,
    host: String,
    pid: String,
    gpu: String,
}

fn rank_line(rest: &str) -> Option<RankLine> {
    // No run has a million ranks: a larger number is no rank line (and its rank + 1 stays small).
    let rank = rest
        .split_whitespace()
        .next()?
        .parse()
        .ok()
        .filter(|r: &usize| *r < 1 << 20)?;
    let host = rest
        .split_once(" on ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    let gpu = rest
        .split_once("] ")
        .map(|(_, g)| g.trim().to_owned())
        .unwrap_or_default();
    let pid = rest
        .split_once(" Pid ")
        .and_then(|(_, r)| r.split_whitespace().next())
        .unwrap_or_default()
        .to_owned();
    Some(RankLine { rank, host, pid, gpu })
}

/// NICs NCCL says it uses, from `NCCL_DEBUG=INFO` lines: `NET/IB : Using [0]mlx5_0:1/IB [1]…` or
/// AWS's `NET/OFI Selected Provider is efa (found 4 nics)`.
fn nic_count(line: &str) -> Option<(u32, Option<f64>)> {
    if let Some(rest) = line.split("NET/IB : Using ").nth(1) {
        // `[0]mlx5_0:1/IB [1]mlx5_1:1/IB [RO]; OOB …`: devices are numbered; `[RO]` is NCCL's
        // relaxed-ordering mark, not a NIC.
        let numbered = |t: &&str| {
            t.strip_prefix('[')
                .and_then(|r| r.split_once(']'))
                .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        };
        let n = rest.split_whitespace().filter(numbered).count();
        return u32::try_from(n).ok().filter(|n| *n > 0).map(|n| (n, None));
    }
    if let Some(rest) = line.split("(found ").nth(1) {
        let n: u32 = rest.split_whitespace().next()?.parse().ok()?;
        if !line.contains("efa") {
            return Some((n, None));
        }
        // AWS's EFA instances of 8 adapters or more carry 3,200 Gb/s a node, several adapters to
        // each of the 8 GPUs (p5 and p5e: 32 × 100 Gb/s; p5en: 16 × 200; p6: 8 × 400): as NCCL
        // drives them, 8 rails of 400 Gb/s. The smaller ones (p4d: 4) run 100 Gb/s an adapter.
        return Some(if n >= 8 { (8, Some(400.0)) } else { (n, Some(100.0)) });
    }
    None
}

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    if let Some(table) = json_as_table(s)? {
        let mut p = parse(&table.text)?;
        p.warnings.insert(
            0,
            "read from nccl-tests' JSON output (`-J`, nccl-tests ≥ 2.17): a `line N` below is the Nth line of the \
             table it would have printed"
                .into(),
        );
        if table.environment {
            p.warn(
                "the JSON's `env` list holds the test process's environment as it was (any token or key in it \
                 too), and the upload is kept as sent: empty the list before uploading such a file",
            );
        }
        return Ok(p);
    }
    let mut p = Parsed {
        tool: Some("nccl-tests".into()),
        ..Default::default()
    };
    let mut scan = Scan::default();
    for (i, raw) in s.lines().enumerate() {
        let t = raw.trim();
        // A second test after the first one's table (a script running every collective, or
        // separate runs printed one after another): the figures are the first run's alone.
        if scan.rows > 0 && starts_a_run(t) {
            p.warn(format!(
                "line {}: another run starts after the first one's table: the figures are the first run's{}",
                i + 1,
                scan.collective
                    .as_deref()
                    .map(|c| format!(" ({c})"))
                    .unwrap_or_default()
            ));
            break;
        }
        scan.line(&mut p, i + 1, t);
    }
    let world = scan.world(&mut p);
    let wrong = scan.wrong_rows_judged(&mut p, world);
    if let Some(w) = world {
        p.count("nccl.world_size", w as f64);
    }
    if !scan.failures.is_empty() {
        p.boolean("nccl.run_failed", true);
        for f in &scan.failures {
            p.warn(format!("test failed: {f}"));
        }
    }
    if scan.rows == 0 {
        if scan.failures.is_empty() {
            if scan.cols.is_some() || scan.banner {
                return Err(ParseError::at(
                    super::text::last_line(s),
                    "nccl-tests output has no result rows (cut short?)",
                ));
            }
            return Err(ParseError::at(
                1,
                "no nccl-tests table (`# size count type … busbw`) found",
            ));
        }
        return Ok(p);
    }
    if scan.failures.is_empty() {
        p.boolean("nccl.run_failed", false);
    }
    scan.figures(&mut p, wrong);
    Ok(p)
}

/// What the output says, gathered line by line.
#[derive(Default)]
struct Scan {
    ranks: Vec<RankLine>,
    /// Where each rank number is in `ranks`, so that a long list stays linear to read.
    rank_at: std::collections::HashMap<usize, usize>,
    /// `Rank n` lines whose number another process's line already had, and their hosts.
    repeated_ranks: usize,
    other_hosts: Vec<String>,
    /// From `Collective test starting: all_reduce_perf`.
    collective: Option<String>,
    /// A row's first part whose figures NCCL's log lines pushed to a later line.
    pending_preamble: Option<String>,
    /// nThread × nGpus from the banner, when no `Rank` lines name the ranks.
    banner_ranks: Option<usize>,
    banner: bool,
    nics: Option<(u32, Option<f64>)>,
    /// The table's header tokens.
    cols: Option<Vec<String>>,
    rows: usize,
    peak: Option<f64>,
    peak_alg: Option<f64>,
    /// (size, busbw) at the largest size.
    at_max: Option<(f64, f64)>,
    /// (line, size, float error, data type) of old-layout checks, judged once the rank count is
    /// known.
    float_errors: Vec<(usize, f64, f64, String)>,
    wrong_rows: Vec<(usize, f64)>,
    /// Rows whose `#wrong` count (either column) is above 0: a count of wrong elements is never
    /// overruled, unlike a float error judged against a tolerance.
    counted_rows: usize,
    avg: Option<f64>,
    failures: Vec<String>,
    /// The `Out of bounds values` line: (count, failed).
    oob: Option<(f64, bool)>,
}

impl Scan {
    /// The world size: the highest rank + 1 of the `Rank n` lines (a paste may keep only some),
    /// else the banner's; with warnings for separate runs and for missing rank lines.
    fn world(&self, p: &mut Parsed) -> Option<usize> {
        if self.repeated_ranks > 0 {
            let mut hosts: Vec<&str> = self
                .ranks
                .iter()
                .map(|r| r.host.as_str())
                .chain(self.other_hosts.iter().map(String::as_str))
                .collect();
            hosts.sort_unstable();
            hosts.dedup();
            p.warn(format!(
                "{} rank line(s) repeat a rank number of another process{}: separate runs, each numbering its ranks from 0 \
                 (nccl-tests built without MPI, or started without its launcher), so nothing crossed between them; the \
                 world size is one run's",
                self.repeated_ranks,
                if hosts.len() > 1 { format!(" (hosts {})", hosts.join(", ")) } else { String::new() }
            ));
        }
        let highest = self.ranks.iter().map(|r| r.rank + 1).max().unwrap_or(0);
        if highest > self.ranks.len() {
            p.warn(format!(
                "only {} of the {highest} ranks' `Rank n` lines are in the output: the world size is the highest rank's, \
                 and the nodes are not known (no expected figure)",
                self.ranks.len()
            ));
        }
        (highest > 0).then_some(highest).or(self.banner_ranks)
    }

    /// One trimmed line `t` (line number `ln`): something said around the table, its header, or
    /// one of its rows.
    fn line(&mut self, p: &mut Parsed, ln: usize, t: &str) {
        let body = t.trim_start_matches('#').trim();
        if self.around_the_table(p, ln, t, body) {
            return;
        }
        if t.starts_with('#') {
            let toks: Vec<&str> = body.split_whitespace().collect();
            if toks.first() == Some(&"size") && toks.contains(&"busbw") {
                self.cols = Some(toks.iter().map(|x| x.to_string()).collect());
            }
            return;
        }
        self.row(p, ln, t);
    }

    /// The banner, versions, NCCL INFO, rank, failure and summary lines; false for anything else.
    fn around_the_table(&mut self, p: &mut Parsed, ln: usize, t: &str, body: &str) -> bool {
        if body.starts_with("nThread ") {
            self.banner = true;
            // Ranks in one process: nThread × nGpus (MPI multiplies it by the process count).
            let field = |name: &str| {
                body.split_whitespace()
                    .skip_while(|w| *w != name)
                    .nth(1)
                    .and_then(|v| v.parse::<usize>().ok())
            };
            if let (Some(th), Some(g)) = (field("nThread"), field("nGpus")) {
                self.banner_ranks = Some(th * g);
            }
        } else if let Some(v) = body.strip_prefix("nccl-tests version ") {
            p.tool_version = v.split_whitespace().next().map(str::to_owned);
        } else if let Some(v) = body.strip_prefix("NCCL version ") {
            // The library's version (`2.21.5+cuda12.4`), not the tool's: nccl-tests before 2.17
            // prints only this one.
            if let Some(v) = v.split_whitespace().next() {
                p.text("nccl.library_version", v);
            }
        } else if let Some(c) = body.strip_prefix("Collective test starting: ") {
            let c = c.trim().trim_end_matches("_perf_mpi").trim_end_matches("_perf");
            p.text("nccl.collective", c);
            self.collective = Some(c.to_owned());
        } else if t.contains("NCCL INFO") || t.contains("NCCL WARN") {
            if let Some(n) = nic_count(t) {
                self.nics.get_or_insert(n);
            }
            // nccl-tests prints a row in parts; NCCL's lazy connection set-up may log between
            // them (`   1048576   262144   float   sum   -1host:1:2 [0] NCCL INFO …`).
            if self.cols.is_some() {
                if let Some(pre) = preamble_of(t) {
                    self.pending_preamble = Some(pre);
                }
            }
        } else if let Some(rest) = body.strip_prefix("Rank ") {
            if rest.contains(" Pid ") || rest.contains(" device ") {
                if let Some(r) = rank_line(rest) {
                    match self.rank_at.get(&r.rank).map(|&i| &self.ranks[i]) {
                        None => {
                            self.rank_at.insert(r.rank, self.ranks.len());
                            self.ranks.push(r);
                        }
                        Some(x) if x.host != r.host || x.pid != r.pid => {
                            self.repeated_ranks += 1;
                            if self.other_hosts.len() < 64 && !self.other_hosts.contains(&r.host) {
                                self.other_hosts.push(r.host);
                            }
                        }
                        Some(_) => {}
                    }
                }
            }
        } else if t.contains("Test CUDA failure") || t.contains("Test NCCL failure") || t.contains("Test failure") {
            self.failures.push(format!("line {ln}: {t}"));
        } else if let Some(rest) = body.strip_prefix("Avg bus bandwidth") {
            // `: 300.5`, or with NCCL_TESTS_MIN_BW set `: 300.5 OK` / `: 300.5 FAILED`.
            let mut words = rest.trim_start().trim_start_matches(':').split_whitespace();
            self.avg = words.next().and_then(|x| x.parse::<f64>().ok());
            if words.next().is_some_and(|w| w.eq_ignore_ascii_case("FAILED")) {
                p.warn(format!(
                    "line {ln}: the tool's own check failed: the average bus bandwidth is below NCCL_TESTS_MIN_BW"
                ));
            }
        } else if let Some(rest) = body.strip_prefix("Out of bounds values") {
            let mut words = rest.trim_start_matches([' ', ':']).split_whitespace();
            if let Some(n) = words.next().and_then(|x| x.parse::<f64>().ok()) {
                let failed = words.next().is_some_and(|w| w.eq_ignore_ascii_case("FAILED"));
                self.oob = Some((n, failed || n > 0.0));
            }
        } else {
            return false;
        }
        true
    }

    /// The whole row when `t` is the rest of one whose first part stood before NCCL's log lines.
    fn rest_of_a_cut_row(&mut self, p: &mut Parsed, ln: usize, t: &str) -> Option<String> {
        let pending = self.pending_preamble.take()?;
        let columns = self.cols.as_ref()?.len();
        let toks: Vec<&str> = t.split_whitespace().collect();
        let body_only =
            toks.len() + PREAMBLE_FIELDS == columns && toks.iter().all(|x| *x == "N/A" || x.parse::<f64>().is_ok());
        if !body_only {
            p.warn(format!(
                "line {ln}: a row's first part ({pending}) had no figures after it; row skipped (cut short?)"
            ));
        }
        body_only.then(|| {
            p.warn(format!(
                "line {ln}: the rest of a row that NCCL's own log lines cut in two, joined to its first part ({pending})"
            ));
            format!("{pending} {t}")
        })
    }

    /// One row of the table: its busbw and algbw, its size, and its data check.
    fn row(&mut self, p: &mut Parsed, ln: usize, t: &str) {
        if let Some(joined) = self.rest_of_a_cut_row(p, ln, t) {
            return self.row(p, ln, &joined);
        }
        let toks: Vec<&str> = t.split_whitespace().collect();
        let Some(c) = self.cols.as_ref() else { return };
        if toks.len() == PREAMBLE_FIELDS && toks.len() < c.len() {
            // The first part alone, the rest to come after NCCL's lines.
            self.pending_preamble = preamble_of(t);
            if self.pending_preamble.is_some() {
                return;
            }
        }
        if toks.first().is_none_or(|x| x.parse::<u64>().is_err()) {
            return;
        }
        // nccl-tests ≥ 2.17.6 with `-S 1` ends each row with a timestamp of two words
        // (`2025-11-03 10:15:42`) under one `timestamp` header.
        let stamped = c.last().is_some_and(|h| h == "timestamp") && toks.len() == c.len() + 1;
        if toks.len() != c.len() && !stamped {
            p.warn(format!(
                "line {ln}: {} fields but the header has {}; row skipped (cut short?)",
                toks.len(),
                c.len()
            ));
            return;
        }
        let idx = |name: &str, nth: usize| {
            c.iter()
                .enumerate()
                .filter(|(_, x)| *x == name)
                .nth(nth)
                .map(|(i, _)| i)
        };
        let get = |i: Option<usize>| i.and_then(|i| toks.get(i)).copied();
        let size = get(idx("size", 0)).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
        let dtype = get(idx("type", 0)).unwrap_or("float");
        let busbw = get(idx("busbw", 0)).and_then(|x| x.parse::<f64>().ok());
        let algbw = get(idx("algbw", 0)).and_then(|x| x.parse::<f64>().ok());
        let Some(bw) = busbw.filter(|b| b.is_finite() && *b >= 0.0) else {
            p.warn(format!("line {ln}: unreadable busbw; row skipped"));
            return;
        };
        self.rows += 1;
        self.peak = Some(self.peak.map_or(bw, |x: f64| x.max(bw)));
        if let Some(a) = algbw.filter(|a| a.is_finite()) {
            self.peak_alg = Some(self.peak_alg.map_or(a, |x: f64| x.max(a)));
        }
        if self.at_max.is_none_or(|(sz, _)| size >= sz) {
            self.at_max = Some((size, bw));
        }
        let mut bad = false;
        let mut worst_error: Option<f64> = None;
        for nth in 0..2 {
            if let Some(w) = get(idx("#wrong", nth)) {
                if w != "N/A" && w.parse::<f64>() != Ok(0.0) {
                    bad = true;
                }
            }
            if let Some(e) = get(idx("error", nth)) {
                if e != "N/A" {
                    match e.parse::<f64>() {
                        Ok(x) if !x.is_nan() => worst_error = Some(worst_error.map_or(x, |w: f64| w.max(x))),
                        _ => bad = true,
                    }
                }
            }
        }
        if bad {
            self.counted_rows += 1;
            self.wrong_rows.push((ln, size));
        } else if let Some(e) = worst_error {
            self.float_errors.push((ln, size, e, dtype.to_owned()));
        }
    }

    /// The rows whose data check failed: old-layout float errors judged against the tool's own
    /// tolerance × (ranks − 1), then the tool's `Out of bounds values` verdict applied; each
    /// counted row said in a warning.
    fn wrong_rows_judged(&mut self, p: &mut Parsed, world: Option<usize>) -> usize {
        let factor = world.map_or(1.0, |w| w.saturating_sub(1).max(1) as f64);
        let mut judged_without_ranks = false;
        for (ln, size, e, dtype) in &self.float_errors {
            if *e > tolerance(dtype) * factor {
                self.wrong_rows.push((*ln, *size));
                judged_without_ranks |= world.is_none();
            }
        }
        self.wrong_rows.sort_by_key(|(ln, _)| *ln);
        if judged_without_ranks {
            p.warn("the rank count is not in the output: error values were judged against the tolerance of two ranks");
        }
        let wrong = self.wrong_rows.len();
        match self.oob {
            Some((_, false)) if wrong > self.counted_rows => {
                p.warn(format!(
                    "{} row(s) over the data-check threshold, but the tool's own `Out of bounds values` verdict is OK: not counted",
                    wrong - self.counted_rows
                ));
                self.counted_rows
            }
            Some((n, true)) if wrong == 0 => {
                p.warn(format!(
                    "the tool reports {n} out-of-bounds value(s) but no row shows them: counted as one wrong row"
                ));
                1
            }
            _ => {
                for (ln, size) in &self.wrong_rows {
                    p.warn(format!("line {ln}: data check failed (#wrong / error) at size {size}"));
                }
                wrong
            }
        }
    }

    /// The bandwidth figures of a table with rows, and what is expected of the allocation.
    fn figures(&self, p: &mut Parsed, wrong: usize) {
        if let Some(x) = self.peak {
            p.nonneg("nccl.busbw_peak_gbps", x);
        }
        if let Some(x) = self.peak_alg {
            p.nonneg("nccl.algbw_peak_gbps", x);
        }
        if let Some((sz, bw)) = self.at_max {
            p.nonneg("nccl.busbw_at_max_size_gbps", bw);
            p.count("nccl.max_size_bytes", sz);
        }
        match self.avg {
            Some(a) => {
                p.nonneg("nccl.busbw_avg_gbps", a);
            }
            None => p.warn("no `Avg bus bandwidth` line (output cut short?)"),
        }
        if let Some((o, _)) = self.oob {
            p.count("nccl.out_of_bounds", o);
        }
        p.count("nccl.wrong", wrong as f64);
        p.count("nccl.sizes", self.rows as f64);
        if self.ranks.is_empty() {
            p.warn("no `Rank n … device …` lines: world size unknown");
        }
        let ring = self
            .collective
            .as_deref()
            .is_none_or(|c| matches!(c, "all_reduce" | "all_gather" | "reduce_scatter"));
        let complete = self.ranks.iter().map(|r| r.rank + 1).max() == Some(self.ranks.len());
        match self.peak {
            Some(x) if ring && complete => expected(p, &self.ranks, self.nics, x),
            Some(_) if !ring => p.warn(format!(
                "the expected figures are an all-reduce's (a ring's bus bandwidth); {} moves data otherwise: no \
                 percentage",
                self.collective.as_deref().unwrap_or_default()
            )),
            _ => {}
        }
    }
}

/// `nccl.gpu_model`, `nccl.nodes`, and the expected figure for that allocation.
fn expected(p: &mut Parsed, ranks: &[RankLine], nics: Option<(u32, Option<f64>)>, peak: f64) {
    let Some(gpu) = most_common(ranks.iter().map(|r| r.gpu.as_str()).filter(|g| !g.is_empty())) else {
        return;
    };
    let mut hosts: Vec<&str> = ranks.iter().map(|r| r.host.as_str()).collect();
    hosts.sort_unstable();
    hosts.dedup();
    let nodes = u32::try_from(hosts.len().max(1)).unwrap_or(1);
    let gpus = u32::try_from(ranks.len()).unwrap_or(u32::MAX);
    p.text("nccl.gpu_model", gpu);
    p.count("nccl.nodes", f64::from(nodes));
    let row_nics = nccl_expected::fabric_for(gpu).and_then(|r| r.default_nics);
    let nics = nics.and_then(|(count, speed)| {
        Some(Nics {
            count,
            gbps: speed.or(row_nics.map(|n| n.gbps))?,
        })
    });
    let Some(e) = nccl_expected::expected_busbw(gpu, gpus, nodes, nics) else {
        if gpus > 1 {
            p.warn(format!(
                "no expected bus bandwidth for {gpu:?} in the table (data/nccl_expected_busbw.csv): no percentage"
            ));
        }
        return;
    };
    if e.nics_assumed {
        if let Some(n) = e.nics {
            p.warn(format!(
                "the NICs are not in the output (run with NCCL_DEBUG=INFO to print them): the expected figure assumes {} × {} Gb/s per node",
                n.count, n.gbps
            ));
        }
    }
    p.nonneg("nccl.expected_busbw_gbps", e.gbps);
    if let Some(pct) = nccl_expected::pct_of_expected(peak, &e) {
        p.nonneg("nccl.busbw_pct_of_expected", pct);
    }
    p.text("nccl.expected_basis", e.basis);
}

fn most_common<'a>(names: impl Iterator<Item = &'a str>) -> Option<&'a str> {
    let mut counts: std::collections::HashMap<&str, (usize, usize)> = std::collections::HashMap::new();
    for (seen, n) in names.enumerate() {
        counts.entry(n).or_insert((0, seen)).0 += 1;
    }
    // The most named; on a tie, the first seen.
    counts
        .into_iter()
        .max_by(|a, b| a.1 .0.cmp(&b.1 .0).then(b.1 .1.cmp(&a.1 .1)))
        .map(|(n, _)| n)
}

/// nccl-tests' JSON report (`-J report.json`, util.cu's `jsonOutputInit` … `writeResultFooter`) as
/// the table it printed beside it, so that every rule of the table holds for it too.
struct JsonTable {
    text: String,
    /// Whether the report carries the process environment (`env`).
    environment: bool,
}

/// `Ok(None)` for anything that is not such a report; an error for one that is not readable.
fn json_as_table(s: &str) -> Result<Option<JsonTable>, ParseError> {
    use std::fmt::Write as _;
    let t = s.trim_start();
    if !t.starts_with('{') || !t.contains("\"results\"") {
        return Ok(None);
    }
    let (v, _) = super::text::json_value(s)?;
    let Some(o) = v.as_object().filter(|o| is_json_report(o)) else {
        return Ok(None);
    };
    let mut text = String::new();
    let program = o
        .get("args")
        .and_then(|a| a.get(0))
        .and_then(|a| a.as_str())
        .map(|a| a.rsplit('/').next().unwrap_or(a));
    if let Some(program) = program {
        let _ = writeln!(text, "# Collective test starting: {program}");
    }
    if let Some(code) = o.get("nccl_version").and_then(|n| n.as_u64()) {
        // NCCL_VERSION_CODE since 2.9: major × 10000 + minor × 100 + patch.
        let _ = writeln!(
            text,
            "# NCCL version {}.{}.{}",
            code / 10000,
            code / 100 % 100,
            code % 100
        );
    }
    let config = o.get("config");
    let int = |v: Option<&serde_json::Value>, key: &str| v.and_then(|c| c.get(key)).and_then(|n| n.as_u64());
    if let (Some(threads), Some(gpus)) = (int(config, "nthreads"), int(config, "ngpus")) {
        let _ = writeln!(text, "# nThread {threads} nGpus {gpus}");
    }
    json_devices_and_rows(o, &mut text);
    if let Some(n) = int(o.get("out_of_bounds"), "count") {
        let _ = writeln!(
            text,
            "# Out of bounds values : {n} {}",
            if n == 0 { "OK" } else { "FAILED" }
        );
    }
    if let Some(bw) = o
        .get("average_bus_bandwidth")
        .and_then(|a| a.get("bandwidth"))
        .and_then(|b| b.as_f64())
    {
        let _ = writeln!(text, "# Avg bus bandwidth    : {bw}");
    }
    let environment = o.get("env").and_then(|e| e.as_array()).is_some_and(|e| !e.is_empty());
    Ok(Some(JsonTable { text, environment }))
}

/// The `Rank n` lines of `config.devices` and a row per `results` entry, into `text`.
fn json_devices_and_rows(o: &serde_json::Map<String, serde_json::Value>, text: &mut String) {
    use std::fmt::Write as _;
    let config = o.get("config");
    let field = |d: &serde_json::Value, key: &str| match d.get(key) {
        Some(serde_json::Value::String(x)) => x.trim().to_owned(),
        Some(serde_json::Value::Number(n)) => n.to_string(),
        _ => "N/A".to_owned(),
    };
    for d in config
        .and_then(|c| c.get("devices"))
        .and_then(|d| d.as_array())
        .into_iter()
        .flatten()
    {
        let _ = writeln!(
            *text,
            "#  Rank {} Group {} Pid {} on {} device {} [{}] {}",
            field(d, "rank"),
            field(d, "group"),
            field(d, "pid"),
            field(d, "hostname"),
            field(d, "device"),
            field(d, "device_hex"),
            field(d, "device_info")
        );
    }
    text.push_str("#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong\n");
    for r in o.get("results").and_then(|r| r.as_array()).into_iter().flatten() {
        let side = |name: &str| {
            let b = r.get(name).filter(|b| b.is_object());
            let time = b.and_then(|b| b.get("time").or_else(|| b.get("cpu_time")));
            let num =
                |v: Option<&serde_json::Value>| v.and_then(|n| n.as_f64()).map_or("N/A".to_owned(), |n| n.to_string());
            format!(
                "{} {} {} {}",
                num(time),
                num(b.and_then(|b| b.get("alg_bw"))),
                num(b.and_then(|b| b.get("bus_bw"))),
                num(b.and_then(|b| b.get("nwrong")))
            )
        };
        let _ = writeln!(
            *text,
            "{} {} {} {} {} {} {}",
            field(r, "size"),
            field(r, "count"),
            field(r, "type"),
            field(r, "redop"),
            field(r, "root"),
            side("out_of_place"),
            side("in_place")
        );
    }
}

/// nccl-tests' JSON report: its `results` list beside its `config` or summary objects.
pub(crate) fn is_json_report(o: &serde_json::Map<String, serde_json::Value>) -> bool {
    o.get("results").is_some_and(|r| r.is_array())
        && (o.contains_key("average_bus_bandwidth") || o.get("config").is_some_and(|c| c.get("nthreads").is_some()))
}

/// The first fields of a row, printed before its figures: size, count, type, redop, root.
const PREAMBLE_FIELDS: usize = 5;

/// A row's first part at the start of `t` (`1048576  262144  float  sum  -1…`), the root's
/// digits kept apart from what NCCL printed right after them.
fn preamble_of(t: &str) -> Option<String> {
    let toks: Vec<&str> = t.split_whitespace().take(PREAMBLE_FIELDS).collect();
    let [size, count, dtype, redop, root] = toks[..] else {
        return None;
    };
    let numbers = size.parse::<u64>().is_ok() && count.parse::<u64>().is_ok();
    let words = [dtype, redop]
        .iter()
        .all(|w| w.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'));
    let sign = usize::from(root.starts_with('-'));
    let digits = root[sign..].bytes().take_while(u8::is_ascii_digit).count();
    (numbers && words && digits > 0).then(|| format!("{size} {count} {dtype} {redop} {}", &root[..sign + digits]))
}

/// The first line of a test: its banner, or (nccl-tests ≥ 2.17) the collective it runs.
fn starts_a_run(t: &str) -> bool {
    let body = t.trim_start_matches('#').trim();
    body.starts_with("nThread ") || body.starts_with("Collective test starting: ")
}

/// nccl-tests' `DeltaMaxValue` in the builds that print the float `error` column.
fn tolerance(dtype: &str) -> f64 {
    match dtype {
        "float" | "float32" => 1e-5,
        "half" | "float16" | "bfloat16" | "bf16" => 1e-2,
        "double" | "float64" => 1e-12,
        _ => 0.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A real 2 × 8 H100 run (tests/fixtures/nccl-tests/PROVENANCE.md), its peak 166.22 GB/s.
    const RUN: &str = include_str!("../../../../tests/fixtures/nccl-tests/h100-x16-2node-srun-l-nccl-tests-290.txt");

    /// `s` read as an upload is: launcher prefixes (`srun -l`'s ` 0: `) stripped first.
    fn read(s: &str) -> Result<Parsed, ParseError> {
        super::super::parse(super::super::EvidenceKind::NcclTests, s.as_bytes())
    }

    fn text(p: &Parsed, key: &str) -> Option<String> {
        match p.metrics.get(key) {
            Some(super::super::MetricValue::Text(t)) => Some(t.clone()),
            _ => None,
        }
    }

    /// nccl-tests ≥ 2.17.6 run with `-S 1`: a `timestamp` column, two words in every row
    /// (NVIDIA/nccl-tests src/util.cu's header and row formats).
    #[test]
    fn rows_stamped_with_the_time_are_read() {
        let stamped: String = RUN
            .lines()
            .map(|l| {
                if l.contains("#       size ") {
                    format!("{l}           timestamp\n")
                } else if l.contains(" float     sum ") {
                    format!("{l}  2025-11-03 10:15:42\n")
                } else {
                    format!("{l}\n")
                }
            })
            .collect();
        let p = read(&stamped).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(166.22));
        assert_eq!(p.get_num("nccl.sizes"), read(RUN).unwrap().get_num("nccl.sizes"));
    }

    /// With `NCCL_TESTS_MIN_BW` set the average line carries the tool's verdict
    /// (`# Avg bus bandwidth    : 300.5 FAILED`).
    #[test]
    fn an_average_with_the_tools_verdict_is_still_the_average() {
        let judged = RUN.replace(
            "# Avg bus bandwidth    : 142.735\n",
            "# Avg bus bandwidth    : 142.735 FAILED\n",
        );
        assert_ne!(judged, RUN, "the fixture has the average line");
        let p = read(&judged).unwrap();
        assert_eq!(p.get_num("nccl.busbw_avg_gbps"), Some(142.735));
        assert!(
            p.warnings.iter().any(|w| w.contains("NCCL_TESTS_MIN_BW")),
            "{:?}",
            p.warnings
        );
    }

    #[test]
    fn nics_are_the_numbered_devices_and_efa_nodes_carry_their_rails() {
        // NVIDIA/nccl-tests#331: `[RO]` marks relaxed ordering, it is no NIC.
        let ib = "lrdn2296:4063850:4063871 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB \
                  [2]mlx5_2:1/IB [3]mlx5_3:1/IB [RO]; OOB ib0:10.128.42.1<0>";
        assert_eq!(nic_count(ib), Some((4, None)));
        // AWS p5: 32 EFA adapters of 100 Gb/s, four to each GPU.
        let p5 = "ip-10-1-1-1:1234:1250 [0] NCCL INFO NET/OFI Selected Provider is efa (found 32 nics)";
        assert_eq!(nic_count(p5), Some((8, Some(400.0))));
        let p4d = "ip-10-1-1-1:1234:1250 [0] NCCL INFO NET/OFI Selected Provider is efa (found 4 nics)";
        assert_eq!(nic_count(p4d), Some((4, Some(100.0))));
    }

    /// Before 2.17 nccl-tests printed only the NCCL library's version: not the tool's.
    #[test]
    fn the_library_version_is_not_the_tools() {
        let p = read(&format!(" 0: NCCL version 2.9.6+cuda11.2\n{RUN}")).unwrap();
        assert_eq!(p.tool_version, None);
        assert_eq!(text(&p, "nccl.library_version").as_deref(), Some("2.9.6+cuda11.2"));
        let p = read(&format!(
            " 0: # nccl-tests version 2.17.6 nccl-headers=22703 nccl-library=22703\n{RUN}"
        ))
        .unwrap();
        assert_eq!(p.tool_version.as_deref(), Some("2.17.6"));
    }

    /// A real 8 × H100 NVLS run (NVIDIA/nccl-tests#290), its peak 473.60 GB/s.
    const NVLS: &str =
        include_str!("../../../../tests/fixtures/nccl-tests/h100-x8-all_reduce_perf-nvls-nccl-tests-290.txt");
    const ALLTOALL: &str =
        include_str!("../../../../tests/fixtures/nccl-tests/rtx2080ti-x2-pcie-alltoall_perf-na-wrong.txt");

    fn warned(p: &Parsed, part: &str) -> bool {
        p.warnings.iter().any(|w| w.contains(part))
    }

    /// nccl-tests built without MPI and started on two hosts (NVIDIA/nccl-tests#213): each process
    /// is its own run of ranks 0–7, so nothing crossed between the hosts.
    #[test]
    fn separate_runs_that_each_number_their_ranks_from_zero_are_one_runs_world() {
        let (head, table) = NVLS.split_at(NVLS.find("#\n#   ").unwrap());
        let second: String = head
            .lines()
            .filter(|l| l.contains("Rank"))
            .map(|l| format!("{}\n", l.replace("node005", "node006").replace("295203", "188001")))
            .collect();
        let p = read(&format!(
            "{head}{}{second}{table}",
            head.lines().next().unwrap().to_owned() + "\n"
        ))
        .unwrap();
        assert_eq!(p.get_num("nccl.world_size"), Some(8.0));
        assert_eq!(p.get_num("nccl.nodes"), Some(1.0));
        assert!(
            warned(
                &p,
                "8 rank line(s) repeat a rank number of another process (hosts node005, node006)"
            ),
            "{:?}",
            p.warnings
        );
    }

    /// A script that runs every collective prints one test after another: the figures are the
    /// first test's, never the peak of one and the average of another.
    #[test]
    fn a_second_test_after_the_first_ones_table_is_not_mixed_in() {
        let both = format!(
            "# Collective test starting: all_reduce_perf\n{NVLS}# Collective test starting: alltoall_perf\n{ALLTOALL}"
        );
        let p = read(&both).unwrap();
        let alone = read(NVLS).unwrap();
        for key in [
            "nccl.busbw_peak_gbps",
            "nccl.busbw_avg_gbps",
            "nccl.sizes",
            "nccl.world_size",
        ] {
            assert_eq!(p.get_num(key), alone.get_num(key), "{key}");
        }
        assert_eq!(text(&p, "nccl.collective").as_deref(), Some("all_reduce"));
        assert!(
            warned(
                &p,
                "another run starts after the first one's table: the figures are the first run's (all_reduce)"
            ),
            "{:?}",
            p.warnings
        );
    }

    /// Pastes of a large run keep only the last `Rank` line (coreweave/nccl-tests README: `Rank 127`).
    #[test]
    fn a_paste_with_the_last_rank_line_only_gives_the_world_and_no_percentage() {
        let last_only: String = NVLS
            .lines()
            .filter(|l| !l.contains("Rank ") || l.contains("Rank  7"))
            .map(|l| format!("{l}\n"))
            .collect();
        let p = read(&last_only).unwrap();
        assert_eq!(p.get_num("nccl.world_size"), Some(8.0));
        assert_eq!(p.get_num("nccl.busbw_pct_of_expected"), None);
        assert!(warned(&p, "only 1 of the 8 ranks"), "{:?}", p.warnings);
    }

    /// The export parts' NVLink is cut to 400 GB/s: an H800 is not judged by the H100's figure.
    #[test]
    fn an_h800_and_a_gb200_are_judged_by_their_own_fabric() {
        let p = read(&NVLS.replace("NVIDIA H100 80GB HBM3", "NVIDIA H800")).unwrap();
        assert_eq!(p.get_num("nccl.expected_busbw_gbps"), Some(160.0));
        // GB200 trays are nodes to the operating system, one NVLink domain to NCCL.
        let two_trays = nccl_expected::expected_busbw("NVIDIA GB200", 8, 2, None).unwrap();
        assert_eq!((two_trays.gbps, two_trays.row.as_str()), (720.0, "blackwell-nvl72"));
        let racks = nccl_expected::expected_busbw("NVIDIA GB200", 144, 36, None).unwrap();
        assert_eq!(racks.gbps, 4.0 * 47.0, "{}", racks.basis);
        assert_eq!(
            nccl_expected::fabric_for("NVIDIA B200").unwrap().id,
            "blackwell-nvswitch"
        );
    }

    /// The expected figures are an all-reduce's: an all-to-all is not a percentage of them.
    #[test]
    fn an_all_to_all_gets_no_percentage_of_an_all_reduce() {
        let p = read(&format!("# Collective test starting: alltoall_perf\n{ALLTOALL}")).unwrap();
        assert_eq!(p.get_num("nccl.busbw_pct_of_expected"), None);
        assert!(p.get_num("nccl.busbw_peak_gbps").is_some());
        assert!(warned(&p, "alltoall moves data otherwise"), "{:?}", p.warnings);
    }

    /// nccl-tests ≥ 2.17 writes the run as JSON with `-J` (util.cu: `config.devices`, `results[]`
    /// with `out_of_place` / `in_place`, `out_of_bounds`, `average_bus_bandwidth`); the figures of
    /// the NVLS run above, written in that shape, read as the table does.
    #[test]
    fn the_json_report_reads_as_its_table() {
        let devices: Vec<String> = (0..8)
            .map(|i| {
                format!(
                    r#"{{"rank":{i},"group":0,"pid":295203,"hostname":"node005","device":{i},"device_hex":"0x18","device_info":"NVIDIA H100 80GB HBM3"}}"#
                )
            })
            .collect();
        let row = |size: u64, busbw: f64, wrong: &str| {
            format!(
                r#"{{"size":{size},"count":{},"type":"float","redop":"sum","root":"    -1","out_of_place":{{"time":15870,"alg_bw":270.63,"bus_bw":{busbw},"nwrong":{wrong}}},"in_place":{{"time":15773,"alg_bw":272.3,"bus_bw":476.53,"nwrong":0}},"actual_iterations":2,"experiment_name":""}}"#,
                size / 4
            )
        };
        let report = format!(
            r#"{{"version":1,"start_time":"2025-11-03 10:15:42","args":["./build/all_reduce_perf","-b","128M"],"env":["HF_TOKEN=hf_secret"],"nccl_version":22703,"config":{{"nthreads":1,"ngpus":8,"minimum_bytes":134217728,"maximum_bytes":4294967296,"step_factor":2,"devices":[{}]}},"results":[{},{}],"out_of_bounds":{{"count":0,"okay":true}},"average_bus_bandwidth":{{"bandwidth":439.369,"okay":"unchecked"}},"end_time":"2025-11-03 10:16:00"}}"#,
            devices.join(","),
            row(2147483648, 468.57, "0"),
            row(4294967296, 473.6, "0")
        );
        assert_eq!(
            super::super::detect::detect(report.as_bytes()),
            Some(super::super::EvidenceKind::NcclTests)
        );
        let p = read(&report).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(473.6));
        assert_eq!(p.get_num("nccl.busbw_avg_gbps"), Some(439.369));
        assert_eq!(p.get_num("nccl.world_size"), Some(8.0));
        assert_eq!(p.get_num("nccl.wrong"), Some(0.0));
        assert_eq!(p.get_num("nccl.expected_busbw_gbps"), Some(476.0));
        assert_eq!(text(&p, "nccl.collective").as_deref(), Some("all_reduce"));
        assert_eq!(text(&p, "nccl.library_version").as_deref(), Some("2.27.3"));
        assert!(p.warnings.iter().any(|w| w.contains("`env` list")), "{:?}", p.warnings);
        // A count of wrong elements in the JSON is a wrong row, as in the table.
        let corrupt = report.replacen(r#""bus_bw":468.57,"nwrong":0"#, r#""bus_bw":468.57,"nwrong":3"#, 1);
        assert_ne!(corrupt, report);
        assert_eq!(read(&corrupt).unwrap().get_num("nccl.wrong"), Some(1.0));
    }

    /// NCCL_DEBUG=INFO output between a row's parts (NVIDIA/nccl#1453: nccl-tests prints a row in
    /// several printf calls, and NCCL's lazy connection set-up logs in between).
    #[test]
    fn a_row_cut_in_two_by_nccls_log_lines_is_joined() {
        let whole = "  4294967296    1073741824     float     sum      -1    15870  270.63  473.60      0    15773  272.30  476.53      0\n";
        assert!(NVLS.contains(whole));
        let cut = NVLS.replace(
            whole,
            "  4294967296    1073741824     float     sum      -1node005:295203:295210 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM\n\
             node005:295203:295211 [1] NCCL INFO Connected all rings\n\
             \x20   15870.5  270.63  473.60      0    15773  272.30  476.53      0\n",
        );
        let p = read(&cut).unwrap();
        assert_eq!(p.get_num("nccl.busbw_peak_gbps"), Some(473.6), "{:?}", p.warnings);
        assert_eq!(p.get_num("nccl.sizes"), read(NVLS).unwrap().get_num("nccl.sizes"));
        assert!(p.warnings.iter().any(|w| w.contains("cut in two")), "{:?}", p.warnings);
        // A wrong count in the rest still counts.
        let wrong = cut.replace("473.60      0    15773", "473.60      5    15773");
        assert_eq!(read(&wrong).unwrap().get_num("nccl.wrong"), Some(1.0));
    }
}
