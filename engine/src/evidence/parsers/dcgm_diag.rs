//! `dcgmi diag -r N`: the text table (legacy, 3.x, 4.x layouts) and `-j` JSON (3.x
//! `"DCGM GPU Diagnostic"`, 4.x `"DCGM Diagnostic"`, NVVS JSON with a preamble and nulls).
//!
//! Verdicts: a test takes the worst of its results (Fail > Warn > Skip > Pass): Fail if its result or
//! any per-GPU result is Fail, Warn if Warn, Skip if any result is Skip (a Pass/Skip mix: not every
//! GPU ran it), else Pass. 4.x's `test_summary.status` is one more result, never an override: DCGM
//! writes Pass there for a Pass/Skip mix. `dcgm.diag.passed` is true only when at least one test ran and EVERY test passed: a Skip or a
//! Warn is not a pass, and a table that was cut short (no closing border) is not a pass either.
//! A result table printed twice is folded: each test once, with its worst result.
//! `dcgm.diag.level` is not printed by dcgmi; it is inferred from the categories that ran
//! (Deployment only → 1, Integration/Hardware → 2, Stress → 3, memtest/pulse tests → 4), and
//! `dcgm.diag.level_inferred` says so.
//! `dcgm.diag.warnings` counts DCGM's distinct warnings: one test, one message (the same message from
//! several GPUs of a test, or repeated in 4.5's `test_summary`, is one warning). `Info` rows are not
//! warnings, and neither are the parser's own notes (a row it could not read): those are the
//! evidence's parse warnings only.

use std::collections::HashSet;

use super::{text, ParseError, Parsed};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Status {
    Pass,
    Skip,
    Warn,
    Fail,
}

fn status_of(s: &str) -> Option<Status> {
    // DCGM 4.5+ prints a GPU that did not run a test (a detached one) as `GPU1: Not Run`.
    if s.trim().get(..7).is_some_and(|w| w.eq_ignore_ascii_case("not run")) {
        return Some(Status::Skip);
    }
    let w = s
        .trim()
        .split([' ', '-', ','])
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match w.as_str() {
        "pass" | "passed" => Some(Status::Pass),
        "fail" | "failed" | "error" => Some(Status::Fail),
        "warn" | "warning" => Some(Status::Warn),
        "skip" | "skipped" | "not_run" | "notrun" => Some(Status::Skip),
        _ => None,
    }
}

struct Test {
    name: String,
    category: String,
    status: Status,
}

/// One of DCGM's own warnings: the test it belongs to and its message.
struct Warning {
    test: String,
    /// The message as dcgmi's `Sanitize` prints it: what makes two warnings the same.
    msg: String,
    error_id: Option<i64>,
}

#[derive(Default)]
struct Diag {
    tests: Vec<Test>,
    /// DCGM's warnings, each (test, message) once: what `dcgm.diag.warnings` counts.
    warnings: Vec<Warning>,
    /// The (test, message) pairs in `warnings` (a hostile file can hold thousands).
    seen: HashSet<(String, String)>,
    /// What the parser could not read: parse warnings of the evidence, never DCGM warnings.
    notes: Vec<String>,
    version: Option<String>,
    driver: Option<String>,
    truncated: bool,
}

impl Diag {
    /// Records DCGM's warning `msg` of `test`, unless that test already has that message.
    fn add_warning(&mut self, test: &str, msg: &str, error_id: Option<i64>) {
        let msg = sanitize(msg);
        if msg.is_empty() || !self.seen.insert((test.to_string(), msg.clone())) {
            return;
        }
        self.warnings.push(Warning {
            test: test.to_string(),
            msg,
            error_id,
        });
    }
}

/// A message as dcgmi prints it (dcgmi/Diag.cpp `Sanitize`): what follows a `***`, trimmed.
fn sanitize(msg: &str) -> String {
    let m = msg.find("***").map_or(msg, |i| &msg[i + 3..]);
    m.trim().to_string()
}

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let trimmed = s.trim_start();
    let looks_json = s.contains("\"DCGM GPU Diagnostic\"")
        || s.contains("\"DCGM Diagnostic\"")
        || (trimmed.starts_with('{') && !s.contains("| Diagnostic"));
    let mut d = if looks_json { parse_json(s)? } else { parse_text(s)? };
    let repeats = dedupe(&mut d);
    let mut p = finish(d);
    if repeats > 0 {
        p.warn(format!(
            "{repeats} test result(s) listed more than once (the table printed twice?): each test is counted once, with its worst result"
        ));
    }
    Ok(p)
}

/// A table printed twice (a wrapper that echoes dcgmi's output, two pastes) lists every test twice:
/// keep each (category, test) once with its worst result (its warnings are already kept once, as
/// every (test, message) is). Returns how many repeated results were folded.
fn dedupe(d: &mut Diag) -> usize {
    let before = d.tests.len();
    d.tests = fold_worst(std::mem::take(&mut d.tests));
    before - d.tests.len()
}

/// Each (category, test) once, in first-seen order, with its worst result; found through a map
/// (a list made tens of thousands of tests quadratic: seconds for a megabyte).
fn fold_worst(tests: Vec<Test>) -> Vec<Test> {
    let mut kept: Vec<Test> = Vec::with_capacity(tests.len());
    let mut at: std::collections::HashMap<(String, String), usize> = std::collections::HashMap::new();
    for t in tests {
        match at.entry((t.name.clone(), t.category.to_ascii_lowercase())) {
            std::collections::hash_map::Entry::Occupied(e) => {
                let k = &mut kept[*e.get()];
                k.status = k.status.max(t.status);
            }
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(kept.len());
                kept.push(t);
            }
        }
    }
    kept
}

fn finish(d: Diag) -> Parsed {
    let mut p = Parsed {
        tool: Some("dcgmi".into()),
        tool_version: d.version.clone(),
        ..Default::default()
    };
    let names = |st: Status| -> Vec<String> {
        d.tests
            .iter()
            .filter(|t| t.status == st)
            .map(|t| t.name.clone())
            .collect()
    };
    let failed = names(Status::Fail);
    let skipped = names(Status::Skip);
    let warned = names(Status::Warn);
    let run: Vec<String> = d
        .tests
        .iter()
        .filter(|t| t.status != Status::Skip)
        .map(|t| t.name.clone())
        .collect();
    let all_pass = !d.tests.is_empty() && d.tests.iter().all(|t| t.status == Status::Pass);
    if d.tests.is_empty() {
        p.warn("no test results found in the diagnostic output");
    }
    if d.truncated {
        p.warn("the result table has no closing border (paste cut short?): not counted as a pass");
    }
    for n in &d.notes {
        p.warn(n.clone());
    }
    for w in &d.warnings {
        let id = w.error_id.map(|id| format!(" (error_id {id})")).unwrap_or_default();
        match w.test.as_str() {
            "" => p.warn(format!("DCGM warning: {}{id}", w.msg)),
            t => p.warn(format!("DCGM warning: {t}: {}{id}", w.msg)),
        }
    }
    p.boolean("dcgm.diag.passed", all_pass && !d.truncated);
    p.list("dcgm.diag.failed_tests", failed);
    p.list("dcgm.diag.skipped_tests", skipped);
    p.list("dcgm.diag.warned_tests", warned);
    p.list("dcgm.diag.tests_run", run);
    p.list(
        "dcgm.diag.tests_run_canonical",
        d.tests
            .iter()
            .filter(|t| t.status != Status::Skip)
            .map(|t| canonical(&t.name))
            .collect(),
    );
    p.count("dcgm.diag.warnings", d.warnings.len() as f64);
    let level = infer_level(&d.tests);
    if level > 0 {
        p.count("dcgm.diag.level", f64::from(level));
        p.boolean("dcgm.diag.level_inferred", true);
    }
    if let Some(v) = d.version {
        p.text("dcgm.version", v);
    }
    if let Some(v) = d.driver {
        p.text("gpu.driver_version", v);
    }
    p
}

/// Version-independent test names (legacy / 3.x display names → 4.x plugin names).
fn canonical(name: &str) -> String {
    let n = name.trim().to_ascii_lowercase();
    let mapped = match n.as_str() {
        "blacklist" | "denylist" => "denylist",
        "page retirement" | "page retirement/row remap" => "page_retirement",
        "gpu memory" => "memory",
        "memory bandwidth" => "memory_bandwidth",
        "sm stress" => "sm_stress",
        "targeted stress" => "targeted_stress",
        "targeted power" => "targeted_power",
        "eud test" | "eud" => "eud",
        "memtest" | "memory test" => "memtest",
        "pulse test" | "pulse" => "pulse_test",
        "environmental variables" | "environment variables" => "environment_variables",
        "permissions and os blocks" | "permissions and os-related blocks" => "permissions",
        "diagnostic" => "diagnostic",
        other => return other.replace([' ', '-', '/'], "_"),
    };
    mapped.to_string()
}

fn infer_level(tests: &[Test]) -> u8 {
    let mut level = 0;
    for t in tests {
        let c = t.category.to_ascii_lowercase();
        let n = canonical(&t.name);
        let l = if n == "memtest" || n == "pulse_test" {
            4
        } else if c.contains("stress")
            || c.contains("performance")
            || [
                "targeted_stress",
                "targeted_power",
                "memory_bandwidth",
                "diagnostic",
                "sm_stress",
                "eud",
            ]
            .contains(&n.as_str())
        {
            3
        } else if c.contains("integration") || c.contains("hardware") || n == "pcie" || n == "memory" {
            2
        } else {
            1
        };
        level = level.max(l);
    }
    level
}

/// One pass over the report's table lines, with the section it is in.
fn parse_text(s: &str) -> Result<Diag, ParseError> {
    let mut d = Diag::default();
    let mut category = String::new();
    let mut saw_table = false;
    let mut closed = false;
    let mut cur: Option<usize> = None; // index into d.tests
    let mut cur_name = String::new(); // the test whose rows these are
    let mut note: Option<Note> = None;
    // DCGM's own refusals outside the table: before it, none is printed; after it, a later round
    // of `--iterations` stopped.
    let mut refusals: Vec<(usize, &str)> = Vec::new();
    for (i, raw) in s.lines().enumerate() {
        let ln = i + 1;
        let l = raw.trim_end();
        let lt = l.trim_start();
        if !(lt.starts_with('|') || lt.starts_with('+')) {
            if refusal(lt) && (!saw_table || closed) {
                refusals.push((ln, lt));
            }
            continue;
        }
        saw_table = true;
        let inner = lt.get(1..).unwrap_or_default();
        if let Some(title) = section_title(inner) {
            flush(&mut note, &mut d);
            category = title;
            closed = false;
            cur = None;
            cur_name.clear();
            continue;
        }
        if lt.starts_with('+') {
            // a plain border; the last one closes the table
            flush(&mut note, &mut d);
            closed = !lt.contains('=');
            continue;
        }
        closed = false;
        let cells: Vec<&str> = lt.split('|').collect();
        let (Some(name_cell), Some(res_cell)) = (cells.get(1), cells.get(2)) else {
            continue;
        };
        let name = name_cell.trim();
        let res = res_cell.trim();
        if name == "Diagnostic" && res == "Result" {
            continue;
        }
        if category.eq_ignore_ascii_case("metadata") {
            match name {
                "DCGM Version" => d.version = Some(res.to_string()),
                "Driver Version Detected" => d.driver = Some(res.to_string()),
                _ => {}
            }
            continue;
        }
        if name.is_empty() {
            continuation(&mut d, &mut note, cur, res_cell, ln);
            continue;
        }
        flush(&mut note, &mut d);
        if let Some(is_warning) = note_label(name) {
            note = Some(Note {
                is_warning,
                test: cur_name.clone(),
                text: res_cell.chars().skip(1).take(45).collect(),
            });
            continue;
        }
        cur_name = name.to_string();
        cur = record_test(&mut d, name, &category, res, ln);
    }
    flush(&mut note, &mut d);
    if !saw_table && refusals.is_empty() {
        return Err(no_table());
    }
    d.truncated = saw_table && !closed;
    refused(&mut d, &refusals);
    Ok(d)
}

fn no_table() -> ParseError {
    ParseError::at(
        1,
        "no dcgmi diag result table (`| Diagnostic | Result |`) or JSON found",
    )
}

/// dcgmi's refusals: with no table, the diagnostic did not run (a GPU in MIG mode, an empty group,
/// no host engine); after one, a later round of `--iterations` stopped. As `-j` writes the same
/// refusal (`runtime_error`): a failing `runtime` test, never a pass, with DCGM's words.
fn refused(d: &mut Diag, refusals: &[(usize, &str)]) {
    if refusals.is_empty() {
        return;
    }
    for (ln, line) in refusals {
        d.notes
            .push(format!("line {ln}: DCGM did not complete the diagnostic: {line}"));
    }
    d.tests.push(Test {
        name: "runtime".into(),
        category: String::new(),
        status: Status::Fail,
    });
}

/// A line in which dcgmi says it did not run or complete the diagnostic (dcgmi/Diag.cpp: a GPU's
/// MIG mode, an empty group, no host engine, a round of `--iterations` that stopped).
fn refusal(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    let about_dcgm = ["diagnostic", "host engine", "specified host", "dcgm", "group"]
        .iter()
        .any(|w| lower.contains(w));
    (lower.starts_with("error:") && about_dcgm)
        || lower.contains("aborting the iterative runs")
        || lower.contains("incompatible with the diagnostic")
}

/// A Warning or Info block of the table: DCGM's message, wrapped over rows of 45 characters.
struct Note {
    is_warning: bool,
    /// The test whose rows it is among.
    test: String,
    text: String,
}

/// A Warning or Info block, kept (as a DCGM warning of its test) only when it is a warning.
fn flush(note: &mut Option<Note>, d: &mut Diag) {
    if let Some(n) = note.take() {
        if n.is_warning {
            d.add_warning(&n.test, &n.text, None);
        }
    }
}

/// Whether a row's name opens a Warning (`Some(true)`) or an Info (`Some(false)`) block of the test
/// above it rather than naming a test, as NVIDIA/DCGM dcgmi/Diag.cpp labels them:
/// * `Warning`, `Info`: 2.x/3.x (`HelperDisplayDetails`), and 4.x for what no entity is tied to
///   (`HelperDisplayGlobalResult`);
/// * `Warning: GPU0`, `Info: GPU0`: 4.x, tied to one entity (`HelperDisplayEntityResults`);
/// * `Error`: a 2.x/3.x Deployment test's error (`HelperDisplayDeploymentResult`), which `-j` lists
///   among the test's `warnings`.
fn note_label(name: &str) -> Option<bool> {
    let kind = match name.split_once(':') {
        Some((kind, entity)) => {
            let entity = entity.trim();
            let group = entity.trim_end_matches(|c: char| c.is_ascii_digit());
            if group.len() == entity.len() || !ENTITY_GROUPS.contains(&group) {
                return None;
            }
            kind
        }
        None => name,
    };
    match kind {
        "Warning" | "Error" => Some(true),
        "Info" => Some(false),
        _ => None,
    }
}

/// The category a section line (`|----- Deployment ---------…`) opens, after a table's `|`.
fn section_title(inner: &str) -> Option<String> {
    let opens = inner.starts_with("-----")
        && inner
            .trim_start_matches('-')
            .trim_start()
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic());
    opens.then(|| {
        inner
            .trim_start_matches('-')
            .split("--")
            .next()
            .unwrap_or_default()
            .trim()
            .to_string()
    })
}

/// A row with an empty name: an entity's verdict on the test above, or wrapped Warning/Info text.
fn continuation(d: &mut Diag, note: &mut Option<Note>, cur: Option<usize>, res_cell: &str, ln: usize) {
    let cell = res_cell.trim();
    match entity_verdict(cell) {
        Some(Some(st)) => {
            flush(note, d);
            if let Some(t) = cur.and_then(|ix| d.tests.get_mut(ix)) {
                merge_entity(t, st);
            }
            if cell.ends_with("...") {
                d.notes
                    .push(format!("line {ln}: dcgmi cut this row's list of GPUs short: {cell}"));
            }
        }
        Some(None) if note.is_none() => d.notes.push(format!("line {ln}: unreadable entity result {cell}")),
        _ => {
            if let Some(n) = note.as_mut() {
                // the raw 45-character cell contents are concatenated (DCGM hard-wraps mid-word)
                n.text.extend(res_cell.chars().skip(1).take(45));
            }
        }
    }
}

/// The entity groups dcgmi names in a 4.x row (`DcgmFieldsGetEntityGroupString`, dcgmlib/src/dcgm_fields.cpp).
const ENTITY_GROUPS: [&str; 8] = ["GPU", "vGPU", "Switch", "GPU_I", "GPU_CI", "LINK", "CPU", "CPU_CORE"];

/// The verdict an empty-named row gives the test above it, as NVIDIA/DCGM dcgmi/Diag.cpp prints it:
/// * 4.x `HelperDisplayEntityResults`: one row per entity, `GPU0: Pass`;
/// * 2.x/3.x `HelperDisplayGpuResults`, when the GPUs disagree: the test's row says
///   `Pass - GPUs: 0, 1, 2` and the rows below it `Fail - GPU: 3`, `Warn - GPUs: …`, `Skip - GPU: …`.
///
/// `None` when the row is neither (wrapped Warning/Info text); `Some(None)` when it is shaped as
/// an entity's verdict but the verdict is not one word the parser knows.
fn entity_verdict(cell: &str) -> Option<Option<Status>> {
    let word = |w: &str| {
        let w = w.trim();
        (!w.contains(char::is_whitespace) || w.eq_ignore_ascii_case("not run"))
            .then(|| status_of(w))
            .flatten()
    };
    if let Some((st, ids)) = cell.split_once(" - GPU") {
        let ids = ids.strip_prefix("s:").or_else(|| ids.strip_prefix(':'))?;
        // dcgmi cuts a cell past 46 characters to 43 and `...`: a long list of GPUs (16 on one
        // box) ends so, and its verdict is no less one.
        let ids = ids.trim_end();
        let ids = ids.strip_suffix("...").unwrap_or(ids);
        let ids_only = ids.chars().all(|c| c.is_ascii_digit() || c == ',' || c == ' ');
        return (ids_only && ids.contains(|c: char| c.is_ascii_digit())).then(|| word(st));
    }
    let (label, res) = cell.split_once(':')?;
    let group = label.trim_end_matches(|c: char| c.is_ascii_digit());
    (group.len() < label.len() && ENTITY_GROUPS.contains(&group)).then(|| word(res))
}

/// A test's row; the index of the test it recorded, if its result was readable.
fn record_test(d: &mut Diag, name: &str, category: &str, res: &str, ln: usize) -> Option<usize> {
    match status_of(res) {
        Some(st) => {
            d.tests.push(Test {
                name: name.to_string(),
                category: category.to_string(),
                status: st,
            });
            Some(d.tests.len() - 1)
        }
        None => {
            d.notes
                .push(format!("line {ln}: test {name:?} has an unreadable result {res:?}"));
            None
        }
    }
}

/// Each result's status of the test `name`, its warnings added to `d`.
fn result_statuses(name: &str, results: Option<&Vec<serde_json::Value>>, d: &mut Diag) -> Vec<Status> {
    use serde_json::Value;
    let mut per: Vec<Status> = Vec::new();
    for r in results.into_iter().flatten() {
        if let Some(st) = r.get("status").and_then(Value::as_str).and_then(status_of) {
            per.push(st);
        }
        json_warnings(name, r, d);
    }
    per
}

/// The `warnings` of one result (or of a 4.x `test_summary`) of the test `name`, added to `d`.
/// Distinct warnings (one test, one message): the same message from every GPU of the test is one
/// warning (docs/evidence.md). NVIDIA/DCGM dcgmi/Diag.cpp writes them as
/// * 2.x to 3.2: one message, a string, with the result's `error_id` beside it from 3.2
///   (`HelperJsonAddResult`, v2.4.7 and v3.2.5);
/// * 3.3 on: a list of objects whose message is `warning`, or `warnings` for a 3.3 Deployment test
///   (v3.3.8 `HelperJsonAddBasicTests`).
fn json_warnings(name: &str, r: &serde_json::Value, d: &mut Diag) {
    use serde_json::Value;
    let error_id = |v: &Value| v.get("error_id").and_then(Value::as_i64);
    match r.get("warnings") {
        Some(Value::String(msg)) => d.add_warning(name, msg, error_id(r)),
        Some(Value::Array(ws)) => {
            for w in ws {
                let msg = w
                    .get("warning")
                    .or_else(|| w.get("warnings"))
                    .and_then(Value::as_str)
                    .or_else(|| w.as_str());
                if let Some(msg) = msg {
                    d.add_warning(name, msg, error_id(w));
                }
            }
        }
        _ => {}
    }
}

/// A per-entity verdict can only make the test worse (Fail beats Pass; Skip on some GPUs downgrades
/// a Pass to Skip because not every GPU ran it).
fn merge_entity(t: &mut Test, st: Status) {
    if st > t.status {
        t.status = st;
    }
}

/// The report's version, driver and runtime error (a failing test named "runtime"), wherever the
/// DCGM version put them.
fn read_json_metadata(v: &serde_json::Value, root: &serde_json::Value, d: &mut Diag) {
    use serde_json::Value;
    // dcgmi 3.1–3.3 write the version and driver beside the diagnostic, at the document's top
    // (dcgmi/Diag.cpp; testing/python3/dcgm_diag_schema.json); 4.x under `metadata`.
    d.version = root
        .get("version")
        .or_else(|| v.get("version"))
        .or_else(|| v.get("metadata").and_then(|m| m.get("version")))
        .or_else(|| root.get("metadata").and_then(|m| m.get("version")))
        .and_then(Value::as_str)
        .map(str::to_string);
    d.driver = v
        .get("metadata")
        .or_else(|| root.get("metadata"))
        .and_then(|m| m.get("Driver Version Detected"))
        .or_else(|| v.get("Driver Version Detected"))
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(e) = root.get("runtime_error").or_else(|| v.get("runtime_error")) {
        let msg = e.as_str().map(str::to_string).unwrap_or_else(|| e.to_string());
        d.notes.push(format!("DCGM runtime error: {msg}"));
        d.tests.push(Test {
            name: "runtime".into(),
            category: String::new(),
            status: Status::Fail,
        });
    }
}

/// The GPUs of the run (`entity_groups`) when DCGM is 4.5 or later, which writes no result for a
/// GPU that did not run a test (`DCGM_DIAG_RESULT_NOT_RUN`, a detached GPU) and still says Pass
/// in `test_summary` (NVIDIA/DCGM v4.5.0 e137795b, dcgmi/Diag.cpp); empty otherwise.
fn gpus_that_leave_no_result(v: &serde_json::Value, version: Option<&str>) -> Vec<i64> {
    use serde_json::Value;
    let at_least_4_5 = version.is_some_and(|v| {
        let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
        (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= (4, 5)
    });
    if !at_least_4_5 {
        return Vec::new();
    }
    v.get("entity_groups")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|g| g.get("entity_group").and_then(Value::as_str) == Some("GPU"))
        .flat_map(|g| g.get("entities").and_then(Value::as_array).into_iter().flatten())
        .filter_map(|e| e.get("entity_id").and_then(Value::as_i64))
        .collect()
}

/// The listed GPUs a test with GPU results has none for, as `1, 3`; None when every GPU has one
/// (or the test has no GPU results at all: a test of the system).
fn gpus_without_a_result(listed: &[i64], results: Option<&Vec<serde_json::Value>>) -> Option<String> {
    use serde_json::Value;
    let with_result: Vec<i64> = results
        .into_iter()
        .flatten()
        .filter(|r| r.get("entity_group").and_then(Value::as_str) == Some("GPU"))
        .filter_map(|r| r.get("entity_id").and_then(Value::as_i64))
        .collect();
    if with_result.is_empty() {
        return None;
    }
    let missing: Vec<String> = listed
        .iter()
        .filter(|g| !with_result.contains(g))
        .map(ToString::to_string)
        .collect();
    (!missing.is_empty()).then(|| missing.join(", "))
}

/// The `-j` report, or with `--iterations N` the report of every iteration
/// (`{"iterations": [report, …], "Overall Result": …}`, dcgmi's `NVVS_ITERATIONS`): each test
/// once, with its worst result over the iterations.
fn parse_json(s: &str) -> Result<Diag, ParseError> {
    let (v, _pre) = text::json_value(s)?;
    let iterations = v
        .get("iterations")
        .and_then(serde_json::Value::as_array)
        .filter(|_| v.get("DCGM Diagnostic").is_none() && v.get("DCGM GPU Diagnostic").is_none());
    let Some(iterations) = iterations else {
        return parse_json_report(&v);
    };
    let mut all = Diag::default();
    for report in iterations {
        let d = parse_json_report(report)?;
        all.tests.extend(d.tests);
        for w in d.warnings {
            if all.seen.insert((w.test.clone(), w.msg.clone())) {
                all.warnings.push(w);
            }
        }
        all.notes.extend(d.notes);
        all.version = all.version.or(d.version);
        all.driver = all.driver.or(d.driver);
        all.truncated |= d.truncated;
    }
    if iterations.is_empty() {
        return Err(ParseError::at(1, "diagnostic JSON has an empty \"iterations\" list"));
    }
    // One result a test per iteration: folded here, so no "listed more than once" follows.
    all.tests = fold_worst(std::mem::take(&mut all.tests));
    all.notes.push(format!(
        "{} iterations (--iterations): each test counted once, with its worst result",
        iterations.len()
    ));
    Ok(all)
}

/// One walk over a report's tests and their results, in document order.
fn parse_json_report(v: &serde_json::Value) -> Result<Diag, ParseError> {
    use serde_json::Value;
    let mut d = Diag::default();
    let root = v
        .get("DCGM Diagnostic")
        .or_else(|| v.get("DCGM GPU Diagnostic"))
        .ok_or_else(|| {
            ParseError::at(
                1,
                "JSON has neither a \"DCGM Diagnostic\" nor a \"DCGM GPU Diagnostic\" key",
            )
        })?;
    read_json_metadata(v, root, &mut d);
    let listed = gpus_that_leave_no_result(v, d.version.as_deref());
    let cats = root.get("test_categories").and_then(Value::as_array);
    for cat in cats.into_iter().flatten() {
        let cname = cat
            .get("category")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        for t in cat.get("tests").and_then(Value::as_array).into_iter().flatten() {
            if t.is_null() {
                continue;
            }
            let name = t.get("name").and_then(Value::as_str).unwrap_or("unnamed").to_string();
            let results = t.get("results").and_then(Value::as_array);
            let mut per = result_statuses(&name, results, &mut d);
            if let Some(missing) = gpus_without_a_result(&listed, results) {
                d.notes.push(format!(
                    "test {name:?}: GPU {missing} has no result (DCGM 4.5 and later leave out a GPU that did not run it): a skip"
                ));
                per.push(Status::Skip);
            }
            let summary = t.get("test_summary");
            // 4.0-4.4 write the warnings tied to no entity only here; 4.5 repeats every warning of
            // the test here too (dcgmi/Diag.cpp `HelperJsonAddTestSummary`).
            if let Some(s) = summary {
                json_warnings(&name, s, &mut d);
            }
            let summary = summary
                .and_then(|x| x.get("status"))
                .and_then(Value::as_str)
                .and_then(status_of);
            // The summary is DCGM's overall result, which is Pass when some GPUs passed and the
            // others skipped (nvvs/src/ResultHelpers.cpp `GetOverallDiagResult`): it is one more
            // result, and a GPU's Skip or Fail still makes the test Skip or Fail, as in the text.
            let status = match (summary, per.iter().copied().max()) {
                (Some(s), Some(worst)) => s.max(worst),
                (Some(s), None) | (None, Some(s)) => s,
                // dcgmi 4.x writes a test that was not run as its name alone (dcgmi/Diag.cpp
                // `HelperJsonAddResult` writes nothing for a NOT_RUN result), where the text table
                // of the same run says `Not Run`: a skip, as there.
                (None, None) => {
                    d.notes
                        .push(format!("test {name:?} has no result: not run, counted as skipped"));
                    Status::Skip
                }
            };
            d.tests.push(Test {
                name,
                category: cname.clone(),
                status,
            });
        }
    }
    if d.tests.is_empty() && cats.is_none() {
        return Err(ParseError::at(1, "diagnostic JSON has no test_categories"));
    }
    Ok(d)
}

#[cfg(test)]
#[path = "dcgm_diag_tests.rs"]
mod tests;
