//! The floors of `server/` (docs/architecture.md): imports go down, never in a circle, and a domain
//! reaches another domain only through its `service` or `model`. This test reads the source, draws
//! the import graph between modules and fails on a circle or on an import that runs up a floor, so a
//! new feature cannot quietly land in the wrong room.

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
    /// who is who (roles, sessions, tokens, users): what every handler stands on.
    Core,
    /// The web kit: extractors, who is asking, pages and their error, the request id.
    Web,
    /// The domains, each `model` → `repo` → `service` → `api`/`pages`.
    Domain,
    /// Pages that show every domain at once, and the demo that fills every domain.
    Overview,
    /// The URL map, its layers, OpenAPI and operations routes.
    Http,
}

const GROUND: [&str; 11] = [
    "validation",
    "money",
    "sizing",
    "evidence::parsers",
    "evidence::load_points",
    "review::decision",
    "review::comparison",
    "review::money",
    "review::decision_tests",
    "ledger::model",
    "ledger::csv",
];
const CORE: [&str; 18] = [
    "error",
    "versioned_cache",
    "outbox",
    "state",
    "config",
    "db",
    "db::lock",
    "telemetry",
    "secrets",
    "evidence_store",
    "audit",
    "auth",
    "auth::password",
    "auth::session",
    "auth::token",
    "auth::users",
    "auth::teams",
    "auth::lockout",
];
/// Domains, lowest first: one may use the `service` or `model` of a lower one only.
const DOMAINS: [(&str, u8); 11] = [
    ("briefs", 0),
    ("prices", 0),
    ("collect", 0),
    ("trials", 1),
    ("auth", 2),
    ("evidence", 2),
    ("ledger", 2),
    ("acceptance", 3),
    ("review", 4),
    ("plan", 4),
    ("signals", 5),
];
/// Layers inside a domain, by file: model-like files (0), SQL (1), use cases (2), handlers (3).
/// A file not named here is a model-like file.
const LAYERS: [(&str, u8); 18] = [
    ("repo", 1),
    ("service", 2),
    ("readiness", 2),
    ("compactor", 2),
    ("gather", 2),
    ("client", 2),
    ("steps", 2),
    ("plan_run", 2),
    ("loadgen", 2),
    ("api", 3),
    ("pages", 3),
    ("money_view", 3),
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
        _ => None,
    }
}

/// Every module under `server/` (by path, `a::b`) with its source.
fn modules() -> BTreeMap<String, String> {
    fn walk(dir: &Path, root: &Path, out: &mut BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).expect("server/ is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, root, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(root).unwrap().with_extension("");
                let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                if parts.last().is_some_and(|p| p == "mod") {
                    parts.pop();
                }
                let name = parts.join("::");
                if name != "lib" && name != "main" {
                    out.insert(name, std::fs::read_to_string(&path).unwrap());
                }
            }
        }
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("server");
    let mut out = BTreeMap::new();
    walk(&root, &root, &mut out);
    out
}

/// The source without comments, string literals and `#[cfg(test)]` items (tests may import anything).
fn code_only(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if escaped {
                        escaped = false;
                    } else if c == '\\' {
                        escaped = true;
                    } else if c == '"' {
                        break;
                    }
                }
                out.push_str("\"\"");
            }
            _ => out.push(c),
        }
    }
    match out.find("#[cfg(test)]") {
        Some(i) => out[..i].to_owned(),
        None => out,
    }
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
        for (root, base) in [("crate::", Vec::new()), ("super::", parent)] {
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
