//! The README and docs/*.md point at things that exist: every relative link (and the heading its
//! `#anchor` names), every `tests/…`, `server/…`, `docs/…` and `scripts/…` path they name; and they
//! speak in their own words, never of "issue N".

use std::{
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

const REPO: &str = env!("CARGO_MANIFEST_DIR");

/// README.md and every docs/*.md, with their text.
fn documents() -> Vec<(PathBuf, String)> {
    let mut paths = vec![Path::new(REPO).join("README.md")];
    let mut docs: Vec<PathBuf> = fs::read_dir(Path::new(REPO).join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    paths.extend(docs);
    paths
        .into_iter()
        .map(|p| {
            let text = fs::read_to_string(&p).unwrap();
            (p, text)
        })
        .collect()
}

fn name(path: &Path) -> String {
    path.strip_prefix(REPO).unwrap_or(path).display().to_string()
}

/// The targets of `[text](target)` links.
fn link_targets(text: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        if let Some(end) = after.find(')') {
            targets.push(after[..end].trim().to_owned());
        }
        rest = after;
    }
    targets
}

/// GitHub's anchor of a heading: lower case; letters, digits, `-` and `_` kept, spaces become `-`,
/// the rest dropped; a link inside the heading counts by its text.
fn anchor_of(heading: &str) -> String {
    let mut text = String::new();
    let mut rest = heading.trim();
    // [text](url) → text
    while let Some(open) = rest.find('[') {
        text.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match (after.find("]("), after.find(')')) {
            (Some(close), Some(end)) if close < end => {
                text.push_str(&after[..close]);
                rest = &after[end + 1..];
            }
            _ => {
                text.push('[');
                rest = after;
            }
        }
    }
    text.push_str(rest);
    text.to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> BTreeSet<String> {
    let mut in_code = false;
    let mut found = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_code = !in_code;
        }
        if !in_code && line.starts_with('#') {
            found.insert(anchor_of(line.trim_start_matches('#')));
        }
    }
    found
}

#[test]
fn every_relative_link_in_the_readme_and_docs_leads_to_a_file_and_heading_that_exist() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        let dir = doc.parent().unwrap();
        for target in link_targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            checked += 1;
            let (path, anchor) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() { doc.clone() } else { dir.join(path) };
            if !file.exists() {
                broken.push(format!("{}: {target} (no {})", name(&doc), name(&file)));
                continue;
            }
            if !anchor.is_empty() && file.extension().is_some_and(|e| e == "md") {
                let headings = anchors(&fs::read_to_string(&file).unwrap());
                if !headings.contains(anchor) {
                    broken.push(format!(
                        "{}: {target} (no heading #{anchor} in {})",
                        name(&doc),
                        name(&file)
                    ));
                }
            }
        }
    }
    assert!(checked > 50, "the links were found ({checked})");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Paths into the repository's own folders named in running text: `server/db.rs`,
/// `tests/it/first_run.rs`, `docs/screens/…`, `scripts/test.sh`.
fn named_paths(text: &str) -> Vec<String> {
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-*{}…".contains(c);
    let mut found = Vec::new();
    for root in ["tests/", "server/", "docs/", "scripts/"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(root) {
            let start = from + at;
            from = start + root.len();
            // Not the tail of a longer path or a URL (`…/docs/…`, `my-tests/`).
            if text[..start]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
            {
                continue;
            }
            let len: usize = text[start..]
                .chars()
                .take_while(|&c| is_path_char(c))
                .map(char::len_utf8)
                .sum();
            let path = text[start..start + len].trim_end_matches(['.', ',']);
            found.push(path.to_owned());
        }
    }
    found
}

/// Whether a named path exists; `tests/fixtures/*`, `docs/screens/…` and `{id}` stand for any name,
/// so the part before them must exist.
fn exists(path: &str) -> bool {
    let cut = path.find(['*', '…', '{']).unwrap_or(path.len());
    let (fixed, wild) = path.split_at(cut);
    if wild.is_empty() {
        return Path::new(REPO).join(fixed).exists();
    }
    // `docs/screens/engineer-*.png`: some entry of the folder starts with the fixed part.
    let full = Path::new(REPO).join(fixed);
    if fixed.ends_with('/') {
        return full.is_dir();
    }
    let (Some(dir), Some(prefix)) = (full.parent(), full.file_name()) else {
        return false;
    };
    fs::read_dir(dir).is_ok_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|e| e.file_name().to_string_lossy().starts_with(&*prefix.to_string_lossy()))
    })
}

#[test]
fn every_path_the_readme_and_docs_name_in_the_repository_exists() {
    let mut missing = Vec::new();
    let mut checked = 0;
    for (doc, text) in documents() {
        for path in named_paths(&text) {
            checked += 1;
            if !exists(&path) {
                missing.push(format!("{}: {path}", name(&doc)));
            }
        }
    }
    assert!(checked > 50, "the paths were found ({checked})");
    assert!(missing.is_empty(), "named but absent:\n{}", missing.join("\n"));
}

#[test]
fn the_docs_speak_in_their_own_words_and_never_cite_an_issue_number() {
    let mut cited = Vec::new();
    for (doc, text) in documents() {
        for (n, line) in text.lines().enumerate() {
            let lower = line.to_lowercase();
            let mut rest = lower.as_str();
            while let Some(at) = rest.find("issue") {
                let after = rest[at + "issue".len()..]
                    .trim_start_matches('s')
                    .trim_start_matches([' ', '#']);
                if after.starts_with(|c: char| c.is_ascii_digit()) {
                    cited.push(format!("{}:{}: {line}", name(&doc), n + 1));
                    break;
                }
                rest = &rest[at + "issue".len()..];
            }
        }
    }
    assert!(cited.is_empty(), "say what changed instead:\n{}", cited.join("\n"));
}

#[test]
fn the_checks_themselves_find_what_they_look_for() {
    assert_eq!(
        link_targets("see [a](docs/a.md#x-y) and [b](https://e.x/) then [c](#top)"),
        ["docs/a.md#x-y", "https://e.x/", "#top"]
    );
    assert_eq!(
        anchor_of(" Raw evidence in S3, MinIO or Ceph"),
        "raw-evidence-in-s3-minio-or-ceph"
    );
    assert_eq!(
        anchor_of(" The [review](x.md) page: `RENTCHECK_ADDR`"),
        "the-review-page-rentcheck_addr"
    );
    assert_eq!(
        named_paths("`tests/it/demo.rs`, scripts/test.sh. Not https://x/docs/a or my-tests/b"),
        ["tests/it/demo.rs", "scripts/test.sh"]
    );
    assert!(exists("docs/screens/review-*.png") && exists("tests/fixtures/") && exists("server/db.rs"));
    assert!(!exists("docs/perf.md") && !exists("tests/parsers.rs") && !exists("docs/screens/nothing-*.png"));
}
