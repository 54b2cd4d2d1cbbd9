//! Text forms of serving-benchmark results: the vLLM / SGLang console `Serving Benchmark Result` block and
//! GenAI-Perf CSV exports (`analyze`: one row per config, columns `<stat> <Metric> (<unit>)`;
//! `profile`, and AIPerf's `profile_export_aiperf.csv`: `Metric,avg,min,max,p99,…` rows plus a
//! `Metric,Value` table of run totals with the error count and duration). Keys as in
//! `bench_serving`.

use super::bench_run::{label_latency, latency_key, ms_per, run_label, Run};
use super::{text, ParseError, Parsed};

/// The console's result blocks, one run each. `vllm bench serve` prints the load it was asked
/// for (`Traffic request rate: 4.0`, `Maximum request concurrency: 64`) before its block, newer
/// versions and SGLang inside it (`Request rate configured (RPS)`, `Max request concurrency`); a
/// log of a sweep holds one block per load point, each named by that load as the JSON's runs are.
pub(crate) fn console(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    let mut runs: Vec<Run> = Vec::new();
    let mut asked = Asked::default();
    let mut inside = false;
    let mut closed = true;
    for (i, l) in s.lines().enumerate() {
        let t = l.trim();
        if t.contains("Serving Benchmark Result") {
            if inside && !closed {
                p.warn(format!(
                    "line {}: a result block starts before the last one closed",
                    i + 1
                ));
            }
            inside = true;
            closed = false;
            runs.push(Run::default());
            continue;
        }
        let Some((label, val)) = t.rsplit_once(':') else {
            if inside && !closed && !t.is_empty() && !t.starts_with("---") && !t.starts_with("====") {
                p.warn(format!("line {}: unrecognised line in the result block", i + 1));
            }
            if inside && t.starts_with("====") && !closed {
                closed = true;
                if let Some(r) = runs.last_mut() {
                    std::mem::take(&mut asked).apply(r);
                }
            }
            continue;
        };
        let label = label.trim();
        if asked.read(label, val.trim()) {
            continue;
        }
        if !inside || closed {
            continue;
        }
        let Some(x) = text::lenient_number(val) else {
            continue;
        };
        let Some(r) = runs.last_mut() else { continue };
        if let Some(k) = label_latency(label) {
            r.set(k, x);
        } else if let Some(key) = result_key(label) {
            r.set(key, x);
        }
    }
    if !closed {
        p.warn("result block not closed by a `====` line (paste cut short?)");
        if let Some(r) = runs.last_mut() {
            asked.apply(r);
        }
    }
    runs.retain(|r| !r.vals.is_empty());
    if runs.is_empty() {
        return Err(ParseError::at(
            text::last_line(s),
            "`Serving Benchmark Result` block without values",
        ));
    }
    name_runs(&mut runs);
    Ok(runs)
}

/// The key of a console block's line that is not a latency.
fn result_key(label: &str) -> Option<&'static str> {
    Some(match label {
        "Successful requests" => "completed",
        "Failed requests" => "failed",
        "Benchmark duration (s)" => "duration_s",
        "Request throughput (req/s)" => "request_throughput_rps",
        "Request goodput (req/s)" => "tool_goodput_rps",
        "Output token throughput (tok/s)" => "output_tokens_per_s",
        "Total Token throughput (tok/s)" | "Total throughput (tok/s)" | "Total token throughput (tok/s)" => {
            "total_tokens_per_s"
        }
        _ => return None,
    })
}

/// One block is the run (no name); several are a sweep, each named by its load, else its place.
fn name_runs(runs: &mut [Run]) {
    if let [only] = runs {
        only.name.clear();
        return;
    }
    let mut seen: Vec<String> = Vec::new();
    for (i, r) in runs.iter_mut().enumerate() {
        let mut name = std::mem::take(&mut r.name);
        if name.is_empty() || seen.contains(&name) {
            name = format!("run{}", i + 1);
        }
        seen.push(name.clone());
        r.name = name;
    }
}

/// The load a console block was asked for, read from the lines before it or inside it.
#[derive(Default)]
struct Asked {
    /// `inf`, or a finite rate in requests per second.
    rate: Option<Option<f64>>,
    concurrency: Option<f64>,
}

impl Asked {
    /// Whether `label` was one of the load's lines (read, whatever its value).
    fn read(&mut self, label: &str, value: &str) -> bool {
        match label {
            "Traffic request rate" | "Request rate configured (RPS)" => {
                self.rate = Some(if value.eq_ignore_ascii_case("inf") {
                    None
                } else {
                    text::lenient_number(value).filter(|r| r.is_finite() && *r > 0.0)
                });
                true
            }
            "Maximum request concurrency" | "Max request concurrency" => {
                // "not set" (SGLang) or "None": no limit.
                self.concurrency = text::lenient_number(value).filter(|c| *c > 0.0);
                true
            }
            _ => false,
        }
    }

    /// Sets the run's offered rate, concurrency and name (`rate_4`, `rate_inf_conc_64`).
    fn apply(self, r: &mut Run) {
        if let Some(Some(rate)) = self.rate {
            r.set("offered_rps", rate);
        }
        if let Some(c) = self.concurrency {
            r.set("load_concurrency", c);
        }
        let rate = self.rate.map(|rate| match rate {
            Some(x) => run_label("rate", Some(x), ""),
            None => "rate_inf".to_owned(),
        });
        let conc = self.concurrency.map(|c| run_label("conc", Some(c), ""));
        r.name = match (rate, conc) {
            (Some(r), Some(c)) => format!("{r}_{c}"),
            (r, c) => r.or(c).unwrap_or_default(),
        };
    }
}

/// The runs of a GenAI-Perf / AIPerf CSV: a profile export's metric table is one run, a sweep's
/// table one run per row.
pub(crate) fn genai_perf(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    let mut runs: Vec<Run> = Vec::new();
    let mut single = Run::default();
    let tables = csv_tables(s);
    for t in &tables {
        let Some(header) = t.first() else { continue };
        if header.first().map(String::as_str) == Some("Run Info") {
            // GuideLLM 0.4+'s `benchmarks.csv`: three header rows (group, status and unit, statistic),
            // no GenAI-Perf table; its JSON report holds the same runs whole.
            return Err(ParseError::at(
                1,
                "GuideLLM's benchmarks.csv (three header rows under \"Run Info\") is not read: upload its \
                 benchmarks.json, which holds the same load points and their requests",
            ));
        }
        if header.first().map(String::as_str) == Some("Metric") {
            read_profile_export(t, header, &mut single, p);
        } else if header.iter().any(|h| {
            h.contains("Time To First Token") || h.contains("Time to First Token") || h.contains("Request Throughput")
        }) {
            runs.extend(sweep_runs(t, header));
        }
    }
    // A table whose rows gave no figure (its header named a metric, its cells held none) is no run.
    runs.retain(|r| !r.vals.is_empty());
    if !single.vals.is_empty() {
        runs.insert(0, single);
    }
    if runs.is_empty() {
        p.warn("GenAI-Perf CSV without recognised metric columns");
        return Err(ParseError::at(
            1,
            "unrecognised GenAI-Perf CSV (no Time To First Token / Request Throughput columns)",
        ));
    }
    Ok(runs)
}

/// The CSV's tables: runs of non-blank lines, each line a row of trimmed cells.
fn csv_tables(s: &str) -> Vec<Vec<Vec<String>>> {
    let mut table: Vec<Vec<String>> = Vec::new();
    let mut tables: Vec<Vec<Vec<String>>> = Vec::new();
    for l in s.lines() {
        if l.trim().is_empty() {
            if !table.is_empty() {
                tables.push(std::mem::take(&mut table));
            }
            continue;
        }
        let mut rdr = csv::ReaderBuilder::new()
            .has_headers(false)
            .flexible(true)
            .from_reader(l.as_bytes());
        if let Some(Ok(rec)) = rdr.records().next() {
            table.push(rec.iter().map(|c| c.trim().to_string()).collect());
        }
    }
    if !table.is_empty() {
        tables.push(table);
    }
    tables
}

/// Milliseconds per unit of a name's `(unit)`: `Time To First Token (ms)`, and `(ns)` in the
/// GenAI-Perf of early 2024.
fn ms_per_unit_of(name: &str) -> Option<f64> {
    let unit = name.rsplit_once(" (")?.1.strip_suffix(')')?;
    ms_per(unit)
}

/// A profile export: rows are metrics, columns are stats (or `Value`), all of one run.
fn read_profile_export(t: &[Vec<String>], header: &[String], single: &mut Run, p: &mut Parsed) {
    for row in t.iter().skip(1) {
        let Some(name) = row.first() else { continue };
        let metric = name.split(" (").next().unwrap_or_default();
        let scale = ms_per_unit_of(name);
        if scale.is_none() && header.iter().skip(1).any(|stat| latency_key(metric, stat).is_some()) {
            p.warn(format!(
                "{name}: not a unit of time rentcheck knows; the row is not read"
            ));
        }
        for (stat, cell) in header.iter().zip(row.iter()).skip(1) {
            let Some(x) = text::lenient_number(cell) else {
                continue;
            };
            if let Some(k) = latency_key(metric, stat) {
                if let Some(scale) = scale {
                    single.set(k, x * scale);
                }
            } else if stat == "Value" {
                match metric {
                    "Output Token Throughput" => single.set("output_tokens_per_s", x),
                    "Request Throughput" => single.set("request_throughput_rps", x),
                    "Request Count" => single.set("completed", x),
                    // AIPerf writes this row only when requests failed or were cancelled.
                    "Error Request Count" => single.set("failed", x),
                    "Benchmark Duration" if name.contains("(sec)") || name.contains("(s)") => {
                        single.set("duration_s", x)
                    }
                    _ => {}
                }
            }
        }
    }
}

/// A sweep's table: one run per row, named by its first cell.
fn sweep_runs(t: &[Vec<String>], header: &[String]) -> Vec<Run> {
    let mut runs = Vec::new();
    for row in t.iter().skip(1) {
        let mut r = Run {
            name: row.first().cloned().unwrap_or_default(),
            ..Default::default()
        };
        for (h, cell) in header.iter().zip(row.iter()) {
            let Some(x) = text::lenient_number(cell) else {
                continue;
            };
            if h.starts_with("Request Throughput") {
                r.set("request_throughput_rps", x);
            } else if h.contains("Output Token Throughput") {
                r.set("output_tokens_per_s", x);
            } else if let (Some((stat, rest)), Some(scale)) = (h.split_once(' '), ms_per_unit_of(h)) {
                if let Some(k) = latency_key(rest.split(" (").next().unwrap_or_default(), stat) {
                    r.set(k, x * scale);
                }
            }
        }
        runs.push(r);
    }
    runs
}
