//! The floors of `server/` and `engine/src/` (docs/architecture.md): imports go down, never in a
//! circle, and a domain reaches another domain only through its `service` or `model`. This test reads
//! the source, draws the import graph between modules and fails on a circle or on an import that runs
//! up a floor, so a new feature cannot quietly land in the wrong room. The engine crate holds the
//! ground floor's pure engines at the module paths the server re-exports them under, so both trees
//! are read as one; every engine module must be on the ground floor, and the engine's manifest may
//! name no database, web or async crate. It also reads the SQL: each table has one owning domain,
//! and a statement in another domain's file that names the table fails.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::Path,
};

/// Floors, lowest first. A module may import modules on its own floor or below.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Floor {
    /// Pure engines and plain types: no I/O, no web, no database.
    Ground,
    /// Error, state, config, database, telemetry, secrets, the evidence store, the audit log and
    /// who is who (`auth`: roles, sessions, tokens, users, teams, lockout): what every handler
    /// stands on. The pages and API for people are the `people` domain.
    Core,
    /// The web kit: extractors, who is asking, pages and their error, the request id.
    Web,
    /// The domains, each `model` → `repo` → `service` → `api`/`pages`.
    Domain,
    /// Pages that show every domain at once, and the demo that fills every domain.
    Overview,
    /// The URL map, its layers, OpenAPI and operations routes.
    Http,
    /// `main.rs`, the thin command line over the library.
    Binary,
}

const GROUND: [&str; 15] = [
    "validation",
    "ids",
    "figures",
    "thresholds",
    "criteria",
    "sizing",
    "evidence::parsers",
    "evidence::load_points",
    "review::decision",
    "review::comparison",
    "review::cost_at_slo",
    "review::decision_tests",
    "ledger::model",
    "ledger::csv",
    // which import a CSV header belongs to: pure, and read by the ledger's CSV reader too
    "prices::detect",
];
const CORE: [&str; 21] = [
    "error",
    "versioned_cache",
    "outbox",
    "outbox::store",
    "state",
    "config",
    "db",
    "db::lock",
    "db::stored_text",
    "telemetry",
    "secrets",
    "evidence_store",
    "audit",
    "auth",
    "auth::password",
    "auth::session",
    "auth::token",
    "auth::token_cache",
    "auth::users",
    "auth::teams",
    "auth::lockout",
];
/// Domains, lowest first: one may use the `service` or `model` of a lower one only.
const DOMAINS: [(&str, u8); 12] = [
    ("briefs", 0),
    ("prices", 0),
    ("collect", 0),
    ("trials", 1),
    ("people", 2),
    ("evidence", 2),
    ("ledger", 2),
    ("acceptance", 3),
    ("review", 4),
    ("plan", 4),
    // Opened by the review's approval (same rank), and its worker reads the review.
    ("commitments", 4),
    ("signals", 5),
];
/// Layers inside a domain, by file: model-like files (0), SQL (1), use cases (2), handlers (3).
/// A file not named here is a model-like file.
const LAYERS: [(&str, u8); 24] = [
    ("repo", 1),
    ("summaries_repo", 1),
    ("summaries", 2),
    ("service", 2),
    ("readiness", 2),
    ("compactor", 2),
    ("group_insert", 2),
    ("gather", 2),
    // the review's answer types and the cached bytes of them
    ("answer", 2),
    ("client", 2),
    ("steps", 2),
    ("plan_run", 2),
    ("loadgen", 2),
    ("api", 3),
    ("pages", 3),
    ("brief_api", 3),
    ("brief_pages", 3),
    ("cost_at_slo_view", 3),
    ("decision_view", 3),
    ("first_screen", 3),
    ("admin", 3),
    ("upload", 3),
    ("worker", 2),
    ("summary", 0),
];

/// Imports that run up a floor on purpose, each with its reason. Keep this list short (≤ 5).
const ALLOWED_UP: [(&str, &str, &str); 0] = [];

fn in_list(module: &str, list: &[&str]) -> bool {
    list.iter()
        .any(|m| module == *m || module.starts_with(&format!("{m}::")))
}

/// (floor, domain, layer) of a module path such as `ledger::repo`.
fn place(module: &str) -> (Floor, Option<(&'static str, u8)>, u8) {
    if in_list(module, &GROUND) {
        return (Floor::Ground, None, 0);
    }
    if CORE.contains(&module) {
        return (Floor::Core, None, 0);
    }
    if module == "main" {
        return (Floor::Binary, None, 0);
    }
    // The crate roots only declare the modules (and re-export the engine's): they import nothing
    // of the crate, so they stand on the ground.
    if module == "lib" {
        return (Floor::Ground, None, 0);
    }
    let mut parts = module.split("::");
    let top = parts.next().unwrap_or_default();
    match top {
        "web" => return (Floor::Web, None, 0),
        "overview" | "demo" => return (Floor::Overview, None, 0),
        "http" => return (Floor::Http, None, 0),
        _ => {}
    }
    let domain = DOMAINS
        .iter()
        .find(|(d, _)| *d == top)
        .copied()
        .unwrap_or_else(|| panic!("module {module} is on no floor: add it to tests/it/architecture.rs"));
    let file = parts.next().unwrap_or("mod");
    let layer = LAYERS.iter().find(|(f, _)| *f == file).map(|(_, l)| *l).unwrap_or(0);
    (Floor::Domain, Some(domain), layer)
}

/// Why an import from `from` to `to` is not allowed, if it is not.
fn violation(from: &str, to: &str) -> Option<&'static str> {
    let (floor_a, domain_a, layer_a) = place(from);
    let (floor_b, domain_b, layer_b) = place(to);
    if floor_b > floor_a {
        return Some("imports a higher floor");
    }
    match (floor_a, domain_a, domain_b) {
        (Floor::Domain, Some((a, rank_a)), Some((b, rank_b))) if a != b => {
            if !matches!(layer_b, 0 | 2) {
                Some("reaches into another domain's repo, api or pages (use its service or model)")
            } else if rank_b > rank_a {
                Some("imports a higher domain")
            } else {
                None
            }
        }
        (Floor::Domain, Some(_), Some(_)) if layer_b > layer_a => Some("imports a higher layer of its own domain"),
        // The overview composes domains through their services, models and page sections.
        (Floor::Overview, _, Some(_)) if matches!(layer_b, 1) || to.ends_with("::api") => {
            Some("the overview reads domains through their services, models and page sections")
        }
        (Floor::Binary, _, Some(_)) if layer_b != 0 && layer_b != 2 => {
            Some("the command line reaches domains through their services and models")
        }
        _ => None,
    }
}

/// Every module under `server/` and the engine's `engine/src/` (by path, `a::b`) with its source.
/// The engine's modules sit at the paths the server re-exports them under (`evidence::parsers`,
/// `review::decision`), so an import of `crate::sizing` reads the same from either crate; where both
/// have a file of one name (a domain's `mod.rs` and the engine's `mod.rs` beside it), their sources
/// are read together.
fn modules() -> BTreeMap<String, String> {
    let mut out = server_modules();
    for (name, source) in engine_modules() {
        out.entry(name).or_default().push_str(&source);
    }
    out
}

fn server_modules() -> BTreeMap<String, String> {
    modules_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("server"))
}

fn engine_modules() -> BTreeMap<String, String> {
    modules_under(&Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/src"))
}

/// Every module of the source tree at `root`, one per file: the crate root `lib.rs` is read as
/// `lib`, `main.rs` as `main`, a folder's `mod.rs` by the folder's name.
fn modules_under(root: &Path) -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("the source tree is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|p| p == "mod") {
                    parts.pop();
                }
                out.insert(parts.join("::"), std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A source file as the compiler reads it: comments dropped, char literals blanked, and each string
/// literal (plain, byte or raw) replaced by a numbered placeholder (`"0"`, `"1"`, …) whose text is
/// kept in `strings`, so no brace, quote or `crate::` inside a literal or a comment is taken for code.
/// The newlines of what is dropped are kept, so a line of `code` is the same line of the source.
struct Lexed {
    code: String,
    strings: Vec<String>,
}

fn lex(source: &str) -> Lexed {
    let s: Vec<char> = source.chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let mut code = String::with_capacity(source.len());
    let mut strings = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        if c == '/' && s.get(i + 1) == Some(&'/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
            continue;
        }
        if c == '/' && s.get(i + 1) == Some(&'*') {
            // Block comments nest in Rust.
            let mut depth = 0;
            let start = i;
            while i < s.len() {
                if s[i] == '/' && s.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if s[i] == '*' && s.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
            keep_lines(&mut code, &s[start..i.min(s.len())]);
            continue;
        }
        // A raw string `r"…"`, `r#"…"#`, `br#"…"#`: the `r` starts a token (or follows a lone `b`).
        let starts_token = i == 0 || !ident(s[i - 1]) || (s[i - 1] == 'b' && (i < 2 || !ident(s[i - 2])));
        if c == 'r' && starts_token {
            let mut j = i + 1;
            while s.get(j) == Some(&'#') {
                j += 1;
            }
            let hashes = j - i - 1;
            if s.get(j) == Some(&'"') {
                let start = j + 1;
                let mut k = start;
                while k < s.len() && !(s[k] == '"' && (1..=hashes).all(|h| s.get(k + h) == Some(&'#'))) {
                    k += 1;
                }
                strings.push(s[start..k.min(s.len())].iter().collect());
                code.push_str(&format!("\"{}\"", strings.len() - 1));
                keep_lines(&mut code, &s[start..k.min(s.len())]);
                i = k + 1 + hashes;
                continue;
            }
        }
        if c == '"' {
            let mut text = String::new();
            let mut k = i + 1;
            while k < s.len() && s[k] != '"' {
                if s[k] == '\\' {
                    k += 1;
                }
                if let Some(&e) = s.get(k) {
                    text.push(e);
                }
                k += 1;
            }
            code.push_str(&format!("\"{}\"", strings.len()));
            keep_lines(&mut code, &s[i..k.min(s.len())]);
            strings.push(text);
            i = k + 1;
            continue;
        }
        if c == '\'' {
            // A char literal ('x', '\n', '\''); a lifetime ('a) has no closing quote after one char.
            if s.get(i + 1) == Some(&'\\') {
                let mut k = i + 3;
                while k < s.len() && s[k] != '\'' {
                    k += 1;
                }
                code.push_str("' '");
                i = k + 1;
                continue;
            }
            if s.get(i + 2) == Some(&'\'') {
                code.push_str("' '");
                i += 3;
                continue;
            }
        }
        code.push(c);
        i += 1;
    }
    Lexed { code, strings }
}

/// Adds to `code` the newlines of dropped text, after the placeholder that stands for it.
fn keep_lines(code: &mut String, dropped: &[char]) {
    code.extend(dropped.iter().filter(|c| **c == '\n'));
}

/// `code` without its `#[cfg(test)]` items (tests may import anything and name any table): each
/// item runs from the attribute to its `;` or through its matched braces, so what follows a test
/// module is read. An item's newlines stay, so lines keep their numbers.
fn without_test_items(code: &str) -> String {
    const TEST: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(i) = rest.find(TEST) {
        out.push_str(&rest[..i]);
        let item = &rest[i + TEST.len()..];
        let mut depth = 0i32;
        let mut end = item.len();
        for (k, c) in item.char_indices() {
            match c {
                '(' | '[' | '{' => depth += 1,
                ')' | ']' => depth -= 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = k + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = k + 1;
                    break;
                }
                _ => {}
            }
        }
        out.extend(item[..end].chars().filter(|c| *c == '\n'));
        rest = &item[end..];
    }
    out.push_str(rest);
    out
}

/// The code of a source file: no comments, no `#[cfg(test)]` items, literals as placeholders.
fn code_only(source: &str) -> String {
    without_test_items(&lex(source).code)
}

/// The string literals of a source file's code (not of its comments or test items): its SQL.
fn code_strings(source: &str) -> Vec<String> {
    let lexed = lex(source);
    let code = without_test_items(&lexed.code);
    // Placeholders are the only quotes left in the code: every second piece is a literal's number.
    code.split('"')
        .skip(1)
        .step_by(2)
        .filter_map(|n| n.parse::<usize>().ok())
        .map(|n| lexed.strings[n].clone())
        .collect()
}

/// The paths a use tree starting at `s` names, each as its segments after the leading root.
fn use_tree_paths(s: &str) -> Vec<Vec<String>> {
    fn tree(s: &[u8], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let skip_ws = |i: &mut usize| {
            while *i < s.len() && s[*i].is_ascii_whitespace() {
                *i += 1;
            }
        };
        skip_ws(i);
        if *i < s.len() && s[*i] == b'{' {
            *i += 1;
            loop {
                skip_ws(i);
                if *i >= s.len() || s[*i] == b'}' {
                    *i += 1;
                    return;
                }
                tree(s, i, prefix, out);
                skip_ws(i);
                if *i < s.len() && s[*i] == b',' {
                    *i += 1;
                }
            }
        }
        let start = *i;
        while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_' || s[*i] == b'*') {
            *i += 1;
        }
        if start == *i {
            return;
        }
        let mut path = prefix.to_vec();
        path.push(String::from_utf8_lossy(&s[start..*i]).into_owned());
        if s[*i..].starts_with(b"::") {
            *i += 2;
            tree(s, i, &path, out);
        } else {
            out.push(path);
            // `name as alias`: the alias names nothing new.
            skip_ws(i);
            if s[*i..].starts_with(b"as") && s.get(*i + 2).is_some_and(|c| c.is_ascii_whitespace()) {
                *i += 2;
                skip_ws(i);
                while *i < s.len() && (s[*i].is_ascii_alphanumeric() || s[*i] == b'_') {
                    *i += 1;
                }
            }
        }
    }
    let mut out = Vec::new();
    tree(s.as_bytes(), &mut 0, &[], &mut out);
    out
}

/// Module → the other modules it imports (by `crate::` and `super::` paths).
fn import_graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let known: BTreeSet<&str> = mods.keys().map(String::as_str).collect();
    let resolve = |segments: &[String]| -> Option<String> {
        (1..=segments.len())
            .rev()
            .map(|k| segments[..k].join("::"))
            .find(|m| known.contains(m.as_str()))
    };
    let mut graph = BTreeMap::new();
    for (name, source) in &mods {
        let code = code_only(source);
        // `super` is the module's parent, whether the module is a file or a folder's `mod.rs`.
        let mut parent: Vec<String> = name.split("::").map(str::to_owned).collect();
        parent.pop();
        let mut edges = BTreeSet::new();
        // The binary names the library by its crate name.
        let own_root = if name == "main" { "rentcheck::" } else { "crate::" };
        for (root, base) in [(own_root, Vec::new()), ("super::", parent)] {
            for (i, _) in code.match_indices(root) {
                if code[..i].ends_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
                    continue;
                }
                for path in use_tree_paths(&code[i + root.len()..]) {
                    let full: Vec<String> = base.iter().cloned().chain(path).collect();
                    if let Some(target) = resolve(&full) {
                        if target != *name && !name.starts_with(&format!("{target}::")) {
                            edges.insert(target);
                        }
                    }
                }
            }
        }
        graph.insert(name.clone(), edges);
    }
    graph
}

/// Strongly connected components with more than one module: the import circles.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    // Kosaraju: order by finish time, then walk the reversed graph.
    fn visit(n: &str, g: &BTreeMap<String, BTreeSet<String>>, seen: &mut BTreeSet<String>, order: &mut Vec<String>) {
        if !seen.insert(n.to_owned()) {
            return;
        }
        for m in g.get(n).into_iter().flatten() {
            visit(m, g, seen, order);
        }
        order.push(n.to_owned());
    }
    let mut seen = BTreeSet::new();
    let mut order = Vec::new();
    for n in graph.keys() {
        visit(n, graph, &mut seen, &mut order);
    }
    let mut reversed: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (a, bs) in graph {
        for b in bs {
            reversed.entry(b.clone()).or_default().insert(a.clone());
        }
    }
    let mut assigned = BTreeSet::new();
    let mut out = Vec::new();
    for n in order.iter().rev() {
        let mut component = Vec::new();
        visit(n, &reversed, &mut assigned, &mut component);
        if component.len() > 1 {
            component.sort();
            out.push(component);
        }
    }
    out
}

#[test]
fn no_module_imports_another_in_a_circle() {
    let found = circles(&import_graph());
    assert!(found.is_empty(), "import circles: {found:?}");
}

#[test]
fn imports_go_down_the_floors() {
    let graph = import_graph();
    let mut up = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            if let Some(why) = violation(from, to) {
                if !ALLOWED_UP.iter().any(|(a, b, _)| a == from && b == to) {
                    up.push(format!("{from} → {to}: {why}"));
                }
            }
        }
    }
    assert!(ALLOWED_UP.len() <= 5, "at most five imports may run up a floor");
    assert!(up.is_empty(), "imports that run up a floor:\n{}", up.join("\n"));
}

#[test]
fn the_engine_holds_only_ground_modules() {
    // A module of the engine that only declares its children (`evidence/mod.rs`) is named like the
    // server's domain folder beside it; it stands on the floor of what it holds.
    let off: Vec<String> = engine_modules()
        .into_keys()
        .filter(|m| place(m).0 != Floor::Ground)
        .filter(|m| !GROUND.iter().any(|g| g.starts_with(&format!("{m}::"))))
        .collect();
    assert!(
        off.is_empty(),
        "engine modules off the ground floor (the engine holds pure engines only): {off:?}"
    );
}

/// Crates the engine may never depend on: a database, a web framework, templates, a runtime.
const NOT_IN_ENGINE: [&str; 4] = ["sqlx", "axum", "askama", "tokio"];

/// The crates a manifest depends on outside `[dev-dependencies]` (`[dependencies]`,
/// `[build-dependencies]`, per-target ones), each by its key and, when renamed, by its `package`.
fn manifest_dependencies(manifest: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_deps = false;
    for line in manifest.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[') {
            let section = section.trim_end_matches(']');
            in_deps = section.ends_with("dependencies") && !section.ends_with("dev-dependencies");
            // `[dependencies.sqlx]`
            if let Some((head, name)) = section.rsplit_once('.') {
                if head.ends_with("dependencies") && !head.ends_with("dev-dependencies") {
                    out.push(name.trim_matches('"').to_owned());
                }
            }
            continue;
        }
        if !in_deps || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some((key, value)) = line.split_once('=') {
            out.push(
                key.trim()
                    .split('.')
                    .next()
                    .unwrap_or_default()
                    .trim_matches('"')
                    .to_owned(),
            );
            if let Some(rest) = value.split("package").nth(1) {
                out.extend(rest.split('"').nth(1).map(str::to_owned));
            }
        }
    }
    out
}

#[test]
fn the_engine_depends_on_no_database_web_or_runtime_crate() {
    let manifest = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("engine/Cargo.toml")).unwrap();
    let deps = manifest_dependencies(&manifest);
    assert!(
        deps.iter().any(|d| d == "serde"),
        "the engine's manifest was not read: {deps:?}"
    );
    let found: Vec<&String> = deps.iter().filter(|d| NOT_IN_ENGINE.contains(&d.as_str())).collect();
    assert!(
        found.is_empty(),
        "engine/Cargo.toml depends on {found:?}: the engine has no database, web or async runtime \
         (docs/architecture.md, \"The floors\"); that code belongs in the server"
    );
    // The reader finds each way a manifest can name one.
    let sample = "[package]\nname = \"x\"\n[dependencies]\nserde = \"1\"\ndb = { package = \"sqlx\", version = \"0.8\" }\n\
                  tokio.workspace = true\n[dev-dependencies]\naskama = \"0.14\"\n[dependencies.axum]\nversion = \"0.8\"\n";
    assert_eq!(manifest_dependencies(sample), ["serde", "db", "sqlx", "tokio", "axum"]);
}

#[test]
fn the_checker_sees_what_it_must_refuse() {
    // A circle of two, and the imports the rules exist to stop.
    let mut g = BTreeMap::new();
    g.insert("a".to_owned(), BTreeSet::from(["b".to_owned()]));
    g.insert("b".to_owned(), BTreeSet::from(["a".to_owned()]));
    assert_eq!(circles(&g), vec![vec!["a".to_owned(), "b".to_owned()]]);
    assert!(violation("briefs::pages", "acceptance::pages").is_some());
    assert!(violation("review::service", "briefs::repo").is_some());
    assert!(violation("briefs::service", "review::service").is_some());
    assert!(violation("sizing::memory", "error").is_some());
    assert!(violation("web::page", "briefs::model").is_some());
    assert!(violation("web::auth", "people::pages").is_some());
    assert!(violation("config", "auth::session").is_none());
    assert!(violation("people::pages", "trials::service").is_none());
    assert!(violation("ledger::repo", "ledger::service").is_some());
    assert!(violation("review::service", "briefs::service").is_none());
    assert!(violation("overview::brief_page", "ledger::pages").is_none());
    // And the parser reads nested use trees.
    assert_eq!(
        use_tree_paths("{a::b, c::{d, e as f}};"),
        vec![
            vec!["a".to_owned(), "b".to_owned()],
            vec!["c".to_owned(), "d".to_owned()],
            vec!["c".to_owned(), "e".to_owned()]
        ]
    );
}

/// The owner of each table (`migrations/`, `CREATE TABLE`): a domain or a core module. Only the
/// owner's files name the table in SQL; another domain reaches it through the owner's `service`.
const TABLE_OWNERS: [(&str, &str); 42] = [
    ("briefs", "briefs"),
    ("trials", "trials"),
    ("evidence", "evidence"),
    ("evidence_metrics_latest", "evidence"),
    ("evidence_metrics_pending", "evidence"),
    ("evidence_metrics_set_aside", "evidence"),
    ("idempotency_keys", "evidence"),
    ("ledger_lines", "ledger"),
    ("ledger_outputs", "ledger"),
    ("ledger_accelerator_merged", "ledger"),
    ("ledger_accelerator_daily", "ledger"),
    ("ledger_focus_rows", "ledger"),
    ("ledger_commitment_rows", "ledger"),
    ("ledger_idempotency_keys", "ledger"),
    ("card_revisions", "acceptance"),
    ("readiness_confirmations", "acceptance"),
    ("approvals", "review"),
    ("commitments", "commitments"),
    ("prices", "prices"),
    ("price_sheets", "prices"),
    ("price_catalogue_instances", "prices"),
    // Who is who: core, `auth::users`, `auth::session`, `auth::token`, `auth::teams`, `auth::lockout`.
    ("users", "auth"),
    ("sessions", "auth"),
    ("api_tokens", "auth"),
    ("teams", "auth"),
    ("team_members", "auth"),
    ("brief_teams", "auth"),
    ("brief_owners", "auth"),
    ("login_attempts", "auth"),
    ("sign_in_accounts", "auth"),
    ("sign_in_devices", "auth"),
    ("audit_log", "audit"),
    // The webhook store: events are written by the core outbox in the caller's transaction, with
    // one delivery per subscribed webhook; signals manages webhooks and delivers through it.
    ("webhook_events", "outbox"),
    ("webhooks", "outbox"),
    ("webhook_deliveries", "outbox"),
    ("webhook_attempts", "outbox"),
    // The kept review summary and its change queue (`review::summaries`).
    ("review_summaries", "review"),
    ("review_summary_trials", "review"),
    ("review_changes", "review"),
    ("review_changes_taken", "review"),
    // Per trial and stage, the evidence counted by the watcher as it takes the change queue's marks.
    ("trial_stage_totals", "review"),
    // Dropped by migration 8; named so an old statement is still placed.
    ("evidence_metrics", "evidence"),
];

/// Statements that name another owner's table today, by (module, table), each with why it is still
/// there. A new crossing fails the test, and so does an entry here that no longer crosses: fix a
/// crossing by moving its statement to the owner's `repo.rs` and calling it through its `service`.
const ALLOWED_CROSSINGS: [(&str, &str, &str); 0] = [];

/// The tables a piece of SQL names after `FROM`, `JOIN`, `INTO`, `UPDATE` (and so `DELETE FROM`).
/// Keywords are matched in capitals, as every statement here is written, so prose in a message
/// ("read from evidence") is not taken for SQL.
fn tables_named(sql: &str) -> Vec<&str> {
    let words: Vec<&str> = sql
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .collect();
    words
        .windows(2)
        .filter(|w| matches!(w[0], "FROM" | "JOIN" | "INTO" | "UPDATE"))
        .map(|w| w[1])
        .collect()
}

fn owner_of(table: &str) -> Option<&'static str> {
    TABLE_OWNERS.iter().find(|(t, _)| *t == table).map(|(_, o)| *o)
}

/// Whether a statement writes or locks rows: it inserts, updates, deletes, merges, truncates or
/// locks (`FOR UPDATE`, `FOR SHARE`, …). Keywords in capitals, as in `tables_named`.
fn writes(sql: &str) -> bool {
    sql.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).any(|w| {
        matches!(
            w,
            "INSERT" | "UPDATE" | "DELETE" | "MERGE" | "TRUNCATE" | "SHARE" | "LOCK"
        )
    })
}

/// The overview (`overview/`) is the read model above every domain: it owns no table, and its SQL
/// may read any domain's tables (the brief list filters on summaries, evidence, owners and teams in
/// one statement) but never write or lock one.
fn may_read_across(module: &str) -> bool {
    module == "overview" || module.starts_with("overview::")
}

/// (module, table, the module's domain, the table's owner) for each statement that names a table
/// its module does not own.
fn crossings(mods: &BTreeMap<String, String>) -> BTreeSet<(String, String, String, String)> {
    let mut out = BTreeSet::new();
    for (name, source) in mods {
        for sql in code_strings(source) {
            if may_read_across(name) && !writes(&sql) {
                continue;
            }
            for table in tables_named(&sql) {
                let Some(owner) = owner_of(table) else { continue };
                if name != owner && !name.starts_with(&format!("{owner}::")) {
                    let domain = name.split("::").next().unwrap_or_default().to_owned();
                    out.insert((name.clone(), table.to_owned(), domain, owner.to_owned()));
                }
            }
        }
    }
    out
}

#[test]
fn every_table_has_one_owner() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut created = BTreeSet::new();
    // In the order they run, so a table renamed later (`ALTER TABLE a RENAME TO b`) is known by its
    // new name.
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .expect("migrations/ is readable")
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    for file in files {
        let sql = std::fs::read_to_string(file).unwrap();
        let words: Vec<&str> = sql.split_whitespace().collect();
        for (i, w) in words.windows(3).enumerate() {
            if w[0].eq_ignore_ascii_case("CREATE") && w[1].eq_ignore_ascii_case("TABLE") {
                created.insert(w[2].trim_end_matches('(').to_owned());
            }
            let renamed = words.get(i + 3..i + 6);
            if let (true, Some([rename, to, new])) = (
                w[0].eq_ignore_ascii_case("ALTER") && w[1].eq_ignore_ascii_case("TABLE"),
                renamed,
            ) {
                if rename.eq_ignore_ascii_case("RENAME") && to.eq_ignore_ascii_case("TO") && created.remove(w[2]) {
                    created.insert(new.trim_end_matches(';').to_owned());
                }
            }
        }
    }
    let unowned: Vec<&String> = created.iter().filter(|t| owner_of(t).is_none()).collect();
    assert!(
        unowned.is_empty(),
        "tables without an owner in TABLE_OWNERS: {unowned:?}"
    );
    let owners: BTreeSet<&str> = TABLE_OWNERS.iter().map(|(t, _)| *t).collect();
    assert_eq!(
        owners.len(),
        TABLE_OWNERS.len(),
        "a table is named twice in TABLE_OWNERS"
    );
}

#[test]
fn sql_touches_only_tables_its_domain_owns() {
    let found = crossings(&modules());
    let new: Vec<String> = found
        .iter()
        .filter(|(m, t, _, _)| !ALLOWED_CROSSINGS.iter().any(|(am, at, _)| am == m && at == t))
        .map(|(m, t, d, o)| format!("{m} (domain {d}) names table {t}, owned by {o}: go through {o}'s service"))
        .collect();
    assert!(new.is_empty(), "SQL that crosses a table's owner:\n{}", new.join("\n"));
    let fixed: Vec<String> = ALLOWED_CROSSINGS
        .iter()
        .filter(|(m, t, _)| !found.iter().any(|(fm, ft, _, _)| fm == m && ft == t))
        .map(|(m, t, _)| format!("{m} → {t}"))
        .collect();
    assert!(
        fixed.is_empty(),
        "allowed crossings that no longer cross (remove them): {fixed:?}"
    );
}

#[test]
fn the_sql_check_refuses_a_cross_domain_write() {
    // Synthetic fixture tree: a briefs repo that writes the trials table, with a test module
    // (which may name anything) and code after that module, which must still be read.
    let tree = BTreeMap::from([
        (
            "briefs::repo".to_owned(),
            r##"
            pub async fn insert(db: impl PgExecutor<'_>) {
                sqlx::query!("INSERT INTO briefs (id) VALUES ($1)", id); // FROM approvals, a comment
                let brace = '{';
            }
            #[cfg(test)]
            mod tests {
                fn t() { sqlx::query!(r#"SELECT "x" FROM approvals"#); }
            }
            pub async fn add_trial(db: impl PgExecutor<'_>) {
                sqlx::query!(r#"INSERT INTO trials (id, name) VALUES ($1, "Trial 1")"#, id);
                let message = "read from evidence";
            }
            "##
            .to_owned(),
        ),
        (
            "trials::repo".to_owned(),
            r#"pub async fn get() { sqlx::query!("SELECT id FROM trials t JOIN briefs b ON b.id = t.brief_id"); }"#
                .to_owned(),
        ),
    ]);
    let found: Vec<_> = crossings(&tree).into_iter().collect();
    assert_eq!(
        found,
        vec![
            ("briefs::repo".into(), "trials".into(), "briefs".into(), "trials".into()),
            ("trials::repo".into(), "briefs".into(), "trials".into(), "briefs".into()),
        ]
    );
}

#[test]
fn the_overview_reads_every_domain_and_writes_none() {
    // The overview may read any table; a write (or a row lock) of one fails like any crossing.
    let tree = BTreeMap::from([
        (
            "overview::list_query".to_owned(),
            r#"pub async fn list() {
                sqlx::query!("SELECT b.id FROM briefs b JOIN trials t ON t.brief_id = b.id
                              WHERE EXISTS (SELECT 1 FROM review_changes d WHERE d.brief_id = b.id)");
            }"#
            .to_owned(),
        ),
        (
            "overview::dashboard".to_owned(),
            r#"pub async fn mark() {
                sqlx::query!("INSERT INTO review_changes (brief_id) SELECT id FROM briefs");
                sqlx::query!("UPDATE trials SET status = 'running' WHERE id = $1");
                sqlx::query!("SELECT id FROM evidence WHERE id = $1 FOR UPDATE");
            }"#
            .to_owned(),
        ),
    ]);
    let found: Vec<_> = crossings(&tree).into_iter().collect();
    let row = |t: &str, o: &str| {
        (
            "overview::dashboard".to_owned(),
            t.to_owned(),
            "overview".to_owned(),
            o.to_owned(),
        )
    };
    assert_eq!(
        found,
        vec![
            row("briefs", "briefs"),
            row("evidence", "evidence"),
            row("review_changes", "review"),
            row("trials", "trials"),
        ]
    );
}

/// `Json(x): Json<T>` in a handler's arguments: axum's own extractor, whose refusal is a plain-text
/// 400/422 rather than our problem+json (clippy.toml forbids the other raw extractors by type; this
/// one is also the response type, so it is looked for here).
fn raw_json_extractors(source: &str) -> Vec<String> {
    code_only(source)
        .lines()
        .filter(|l| {
            l.find("): Json<")
                .is_some_and(|at| l[..at].contains("Json(") && !l[..at].contains("ApiJson("))
        })
        .map(|l| l.trim().to_owned())
        .collect()
}

#[test]
fn request_bodies_are_read_with_our_own_extractor() {
    let found: Vec<String> = server_modules()
        .iter()
        .flat_map(|(module, source)| {
            raw_json_extractors(source)
                .into_iter()
                .map(move |l| format!("{module}: {l}"))
        })
        .collect();
    assert!(
        found.is_empty(),
        "read request bodies with web::extract::ApiJson: {found:#?}"
    );
    assert_eq!(
        raw_json_extractors("async fn f(Json(body): Json<Brief>) {}\nasync fn g(ApiJson(body): ApiJson<Brief>) {}"),
        ["async fn f(Json(body): Json<Brief>) {}"],
        "the check sees what it must refuse"
    );
}

#[test]
fn test_modules_are_skipped_by_parsing_not_by_stopping() {
    let source = r#"
        use crate::sizing;
        #[cfg(test)]
        mod tests {
            use crate::http;
            fn f() { if true { let _ = "}"; } }
        }
        use crate::review::service;
        #[cfg(test)]
        use crate::overview;
        fn g<'a>(x: &'a str) -> char { '}' }
    "#;
    let code = code_only(source);
    assert!(
        code.contains("crate::sizing") && code.contains("crate::review::service"),
        "{code}"
    );
    assert!(
        !code.contains("crate::http") && !code.contains("crate::overview"),
        "{code}"
    );
    assert!(code.contains("fn g<'a>"), "a lifetime is not a char literal: {code}");
}

/// The longest a function may be, in lines from `fn` to its closing brace, unless a comment right
/// above it (among its doc comments and attributes) says why it reads better whole, with a line
/// holding [`WHOLE_MARKER`]. A long function usually hides several steps that want names.
const MAX_FN_LINES: usize = 80;
const WHOLE_MARKER: &str = "reads better whole";
/// The most functions over [`MAX_FN_LINES`] that may carry [`WHOLE_MARKER`]: exemptions stay few
/// enough that a reader believes them (docs/style.md, "The test kit").
const MAX_WHOLE_EXEMPTIONS: usize = 10;

/// (line of `fn`, name, lines) of each function with a body in `source`, test items left out.
fn functions(source: &str) -> Vec<(usize, String, usize)> {
    let code: Vec<char> = code_only(source).chars().collect();
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let line_of = |i: usize| code[..i].iter().filter(|c| **c == '\n').count() + 1;
    let mut out = Vec::new();
    let mut i = 0;
    while i + 3 < code.len() {
        let is_fn = code[i..i + 3] == ['f', 'n', ' '] && (i == 0 || !ident(code[i - 1]));
        if !is_fn {
            i += 1;
            continue;
        }
        let name: String = code[i + 3..]
            .iter()
            .skip_while(|c| c.is_whitespace())
            .take_while(|c| ident(**c))
            .collect();
        // The body starts at the first `{` outside the signature's brackets; a `;` there first
        // ends a declaration without one.
        let mut k = i + 3;
        let mut depth = 0i32;
        let mut body = None;
        while k < code.len() {
            match code[k] {
                '(' | '[' => depth += 1,
                ')' | ']' => depth -= 1,
                ';' if depth == 0 => break,
                '{' if depth == 0 => {
                    body = Some(k);
                    break;
                }
                _ => {}
            }
            k += 1;
        }
        let Some(open) = body else {
            i = k;
            continue;
        };
        let mut braces = 0i32;
        let mut close = open;
        for (j, c) in code.iter().enumerate().skip(open) {
            match c {
                '{' => braces += 1,
                '}' => {
                    braces -= 1;
                    if braces == 0 {
                        close = j;
                        break;
                    }
                }
                _ => {}
            }
        }
        let first = line_of(i);
        out.push((first, name, line_of(close) - first + 1));
        // Functions inside this one are read too.
        i = open;
    }
    out
}

/// Whether the comments and attributes right above line `line` (1-based) hold the marker.
fn justified_whole(source: &str, line: usize) -> bool {
    let lines: Vec<&str> = source.lines().collect();
    lines[..line - 1]
        .iter()
        .rev()
        .map(|l| l.trim())
        .take_while(|l| l.starts_with("//") || l.starts_with("#["))
        .any(|l| l.contains(WHOLE_MARKER))
}

/// `module::fn (N lines, line L)` for each function over the limit without the marker.
fn long_functions(mods: &BTreeMap<String, String>) -> Vec<String> {
    over_the_limit(mods, false)
}

/// `module::fn (N lines, line L)` for each function over the limit that carries the marker.
fn long_functions_said_whole(mods: &BTreeMap<String, String>) -> Vec<String> {
    over_the_limit(mods, true)
}

/// `module::fn (N lines, line L)` for each function over the limit whose marker is there or not,
/// as `said_whole` asks; test-only files left out.
fn over_the_limit(mods: &BTreeMap<String, String>, said_whole: bool) -> Vec<String> {
    let mut out = Vec::new();
    // Test-only files (included under `#[cfg(test)]` with `#[path = …]`): tests are tables of
    // cases. Found by their inclusion, not by their name, so a parser called `…_tests` is read.
    let test_only: BTreeSet<String> = mods
        .values()
        .flat_map(|source| {
            let lines: Vec<&str> = source.lines().collect();
            lines
                .windows(2)
                .filter(|w| w[0].trim() == "#[cfg(test)]" && w[1].trim().starts_with("#[path = \""))
                .filter_map(|w| w[1].trim().strip_prefix("#[path = \"")?.split('"').next())
                .map(|file| file.trim_end_matches(".rs").to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    for (name, source) in mods {
        if name.rsplit("::").next().is_some_and(|last| test_only.contains(last)) {
            continue;
        }
        for (line, function, lines) in functions(source) {
            if lines > MAX_FN_LINES && justified_whole(source, line) == said_whole {
                out.push(format!("{name}::{function} ({lines} lines, line {line})"));
            }
        }
    }
    out
}

#[test]
fn no_function_is_long_without_saying_why() {
    let found = long_functions(&modules());
    assert!(
        found.is_empty(),
        "functions over {MAX_FN_LINES} lines: split them into named steps, or say in a comment right above \
         why one reads better whole (a line with \"{WHOLE_MARKER}\"):\n{}",
        found.join("\n")
    );
}

#[test]
fn few_long_functions_say_they_read_better_whole() {
    let found = long_functions_said_whole(&modules());
    assert!(
        found.len() <= MAX_WHOLE_EXEMPTIONS,
        "{} functions over {MAX_FN_LINES} lines say they read better whole; at most {MAX_WHOLE_EXEMPTIONS} may, \
         or the exemption stops meaning anything: split some into named steps:\n{}",
        found.len(),
        found.join("\n")
    );
}

#[test]
fn the_exemption_count_reads_only_long_functions_that_carry_the_marker() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let marked = |name: &str, n: usize| {
        format!(
            "// One arm per kind: reads better whole.\nfn {name}() {{\n{}}}\n",
            body(n)
        )
    };
    // Two long functions with the marker, one short one with it, one long one without it, and a
    // marked long one in a test module.
    let source = format!(
        "{}{}{}fn long_unsaid() {{\n{}}}\n#[cfg(test)]\nmod tests {{\n{}}}\n",
        marked("whole_a", 90),
        marked("short_said", 10),
        marked("whole_b", 79),
        body(95),
        marked("test_table", 120),
    );
    let mods = BTreeMap::from([("m".to_owned(), source)]);
    assert_eq!(
        long_functions_said_whole(&mods),
        ["m::whole_a (92 lines, line 2)", "m::whole_b (81 lines, line 108)"]
    );
    assert_eq!(long_functions(&mods), ["m::long_unsaid (97 lines, line 189)"]);
}

#[test]
fn every_source_file_of_the_server_and_the_engine_is_read() {
    fn rust_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .map(|p| {
                if p.is_dir() {
                    rust_files(&p)
                } else {
                    usize::from(p.extension().is_some_and(|e| e == "rs"))
                }
            })
            .sum()
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    assert_eq!(
        server_modules().len() + engine_modules().len(),
        rust_files(&root.join("server")) + rust_files(&root.join("engine/src")),
        "every .rs file is a module the architecture checks read, none left out by name"
    );
    assert!(modules().contains_key("lib") && modules().contains_key("main"));
}

#[test]
fn the_length_check_counts_lines_and_reads_the_marker() {
    let body = |n: usize| "    let x = \"{\";\n".repeat(n);
    let source = format!(
        "fn short() {{\n{}}}\n\
         /// Too long.\n#[allow(dead_code)]\nfn long(a: [u8; 2]) -> u8 {{\n{}}}\n\
         // One match arm per kind: reads better whole.\n#[inline]\nfn long_but_said(x: u8) {{\n{}}}\n\
         trait T {{ fn declared(&self); }}\n\
         #[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{}    }}\n}}\n\
         pub(crate) fn after_tests() {{\n    /* {{ */\n{}}}\n",
        body(78),
        body(79),
        body(100),
        body(100),
        body(79),
    );
    let found = functions(&source);
    let lengths: Vec<(&str, usize)> = found.iter().map(|(_, n, l)| (n.as_str(), *l)).collect();
    assert_eq!(
        lengths,
        [("short", 80), ("long", 81), ("long_but_said", 102), ("after_tests", 82)]
    );
    let mods = BTreeMap::from([("m".to_owned(), source)]);
    assert_eq!(
        long_functions(&mods),
        ["m::long (81 lines, line 83)", "m::after_tests (82 lines, line 374)"]
    );
}

/// The section of docs/architecture.md that names every hidden writer.
fn hidden_writers_doc() -> String {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/architecture.md")).unwrap();
    let start = doc
        .find("## Hidden writers")
        .expect("docs/architecture.md names the hidden writers");
    let end = doc[start + 3..].find("\n## ").map_or(doc.len(), |e| start + 3 + e);
    doc[start..end].to_owned()
}

/// The first cell of each row of the section's tables, without its backticks.
fn first_cells(section: &str) -> BTreeSet<String> {
    section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn every_trigger_and_per_server_queue_is_named_in_the_architecture_doc() {
    let section = hidden_writers_doc();
    let named = first_cells(&section);
    let (_database, pool) = crate::common::migrated_database(1).await;
    let triggers: Vec<(String, String)> = sqlx::query_as(
        "SELECT t.tgname::text, c.relname::text FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
         WHERE NOT t.tgisinternal ORDER BY 1",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut problems = Vec::new();
    for (trigger, table) in &triggers {
        if !section.contains(&format!("| `{trigger}` | `{table}` |")) {
            problems.push(format!(
                "trigger {trigger} on {table} is not in the table of hidden writers"
            ));
        }
    }
    // Each value a domain keeps in `AppState::slots`, by its type's last name.
    let mut slots = BTreeSet::new();
    for (module, source) in modules() {
        for (at, _) in source.match_indices("slots.get::<") {
            let ty = &source[at + "slots.get::<".len()..];
            let ty = ty[..ty.find(['<', '>']).unwrap()]
                .rsplit("::")
                .next()
                .unwrap()
                .to_owned();
            if !named.contains(&ty) {
                problems.push(format!("{module} keeps {ty} in AppState::slots, not in the table"));
            }
            slots.insert(ty);
        }
    }
    for name in &named {
        if !triggers.iter().any(|(t, _)| t == name) && !slots.contains(name) {
            problems.push(format!(
                "the table names {name}, which is no trigger and no slot any more"
            ));
        }
    }
    assert!(triggers.len() >= 10 && slots.len() >= 3, "{triggers:?} {slots:?}");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A brief is whole wherever it is held (style.md, "The test kit": one `Brief` shape, one loader).
/// Only the trials domain's service turns the brief's own record into a `Brief`, adding trial 1's
/// allocation, and a handler takes the brief its route names as `BriefPath` (loaded by
/// `BriefPath::load`), never as a bare `Path<BriefId>`.
#[test]
fn a_brief_has_one_shape_and_one_loader() {
    let mut problems = Vec::new();
    for (module, source) in server_modules() {
        let code = code_only(&source);
        let completes = code.contains("load_record(") || code.contains("with_first_allocation(");
        if completes && !module.starts_with("briefs::") && module != "trials::service" {
            problems.push(format!("{module} makes a Brief of the brief's own record"));
        }
        if code.contains("Path<BriefId>") {
            problems.push(format!("{module} takes Path<BriefId>: take BriefPath"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // The check sees what it must: the handlers take BriefPath.
    let handlers = server_modules()
        .values()
        .filter(|source| code_only(source).contains(": BriefPath"))
        .count();
    assert!(handlers >= 10, "only {handlers} modules take BriefPath");
}
