//! Text forms of serving-benchmark results: the vLLM / SGLang console `Serving Benchmark Result` block and
//! GenAI-Perf CSV exports (`analyze`: one row per config, columns `<stat> <Metric> (<unit>)`;
//! `profile`, and AIPerf's `profile_export_aiperf.csv`: `Metric,avg,min,max,p99,…` rows plus a
//! `Metric,Value` table of run totals with the error count and duration). Keys as in
//! `bench_serving`.

use super::bench_run::{label_latency, latency_key, Run};
use super::{text, ParseError, Parsed};

pub(crate) fn console(s: &str, p: &mut Parsed) -> Result<Run, ParseError> {
    let mut r = Run::default();
    let mut inside = false;
    let mut closed = false;
    for (i, l) in s.lines().enumerate() {
        let t = l.trim();
        if t.contains("Serving Benchmark Result") {
            inside = true;
            continue;
        }
        if !inside {
            continue;
        }
        if t.starts_with("====") {
            closed = true;
            break;
        }
        if t.starts_with("---") || t.is_empty() {
            continue;
        }
        let Some((label, val)) = t.rsplit_once(':') else {
            p.warn(format!("line {}: unrecognised line in the result block", i + 1));
            continue;
        };
        let Some(x) = text::lenient_number(val) else {
            continue;
        };
        let label = label.trim();
        if let Some(k) = label_latency(label) {
            r.set(k, x);
            continue;
        }
        let key = match label {
            "Successful requests" => "completed",
            "Failed requests" => "failed",
            "Benchmark duration (s)" => "duration_s",
            "Request throughput (req/s)" => "request_throughput_rps",
            "Request goodput (req/s)" => "tool_goodput_rps",
            "Output token throughput (tok/s)" => "output_tokens_per_s",
            "Total Token throughput (tok/s)" | "Total throughput (tok/s)" | "Total token throughput (tok/s)" => {
                "total_tokens_per_s"
            }
            "Maximum request concurrency" => "max_concurrency",
            _ => continue,
        };
        r.set(key, x);
    }
    if !closed {
        p.warn("result block not closed by a `====` line (paste cut short?)");
    }
    if r.vals.is_empty() {
        return Err(ParseError::at(
            text::last_line(s),
            "`Serving Benchmark Result` block without values",
        ));
    }
    Ok(r)
}

/// The runs of a GenAI-Perf / AIPerf CSV: a profile export's metric table is one run, a sweep's
/// table one run per row.
pub(crate) fn genai_perf(s: &str, p: &mut Parsed) -> Result<Vec<Run>, ParseError> {
    let mut runs: Vec<Run> = Vec::new();
    let mut single = Run::default();
    let tables = csv_tables(s);
    for t in &tables {
        let Some(header) = t.first() else { continue };
        if header.first().map(String::as_str) == Some("Metric") {
            read_profile_export(t, header, &mut single);
        } else if header.iter().any(|h| {
            h.contains("Time To First Token") || h.contains("Time to First Token") || h.contains("Request Throughput")
        }) {
            runs.extend(sweep_runs(t, header));
        }
    }
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

/// A profile export: rows are metrics, columns are stats (or `Value`), all of one run.
fn read_profile_export(t: &[Vec<String>], header: &[String], single: &mut Run) {
    for row in t.iter().skip(1) {
        let Some(name) = row.first() else { continue };
        let metric = name.split(" (").next().unwrap_or_default();
        for (stat, cell) in header.iter().zip(row.iter()).skip(1) {
            let Some(x) = text::lenient_number(cell) else {
                continue;
            };
            if let Some(k) = latency_key(metric, stat) {
                if name.contains("(ms)") {
                    single.set(k, x);
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
            } else if let Some((stat, rest)) = h.split_once(' ') {
                if h.ends_with("(ms)") {
                    if let Some(k) = latency_key(rest.split(" (").next().unwrap_or_default(), stat) {
                        r.set(k, x);
                    }
                }
            }
        }
        runs.push(r);
    }
    runs
}
