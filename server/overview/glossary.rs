//! The glossary page (`/glossary`): the words of `docs/glossary.md`, embedded at build time and
//! shown as they are written there, so the page and the document cannot drift apart.

use askama::Template;
use axum::response::Response;

use crate::web::{
    auth::PageUser,
    page::{render, PageContext, PageResult},
};

const GLOSSARY: &str = include_str!("../../docs/glossary.md");

/// A run of text in a definition. The document uses four marks only: `*term*` (another entry),
/// `**word**`, `` `code` `` and plain text; a Markdown crate would be more than this needs.
#[derive(Debug, Clone, PartialEq)]
pub enum Inline {
    Text(String),
    Em(String),
    Strong(String),
    Code(String),
}

/// One entry: its term, an anchor (`#brief`) and the definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub term: String,
    pub anchor: String,
    pub definition: Vec<Inline>,
}

/// The entries of the glossary, in the document's order: each paragraph that opens with `**term**`.
pub fn entries(markdown: &str) -> Vec<Entry> {
    markdown
        .split("\n\n")
        .map(|p| p.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter_map(|p| {
            let rest = p.strip_prefix("**")?;
            let (term, definition) = rest.split_once("**")?;
            let definition = definition.trim_start().trim_start_matches('—').trim_start();
            Some(Entry {
                anchor: term
                    .to_lowercase()
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                    .collect::<Vec<_>>()
                    .join("-"),
                term: term.to_owned(),
                definition: inlines(definition),
            })
        })
        .collect()
}

/// Splits text at the marks `` ` ``, `**` and `*`; an unclosed mark stays as text.
fn inlines(text: &str) -> Vec<Inline> {
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let marked = match c {
            '`' => rest[1..]
                .split_once('`')
                .map(|(inner, after)| (Inline::Code(inner.to_owned()), after)),
            '*' if rest.starts_with("**") => rest[2..]
                .split_once("**")
                .map(|(inner, after)| (Inline::Strong(inner.to_owned()), after)),
            '*' => rest[1..]
                .split_once('*')
                .filter(|(inner, _)| !inner.is_empty() && !inner.starts_with(' '))
                .map(|(inner, after)| (Inline::Em(inner.to_owned()), after)),
            _ => None,
        };
        match marked {
            Some((inline, after)) => {
                if !plain.is_empty() {
                    out.push(Inline::Text(std::mem::take(&mut plain)));
                }
                out.push(inline);
                rest = after;
            }
            None => {
                plain.push(c);
                rest = &rest[c.len_utf8()..];
            }
        }
    }
    if !plain.is_empty() {
        out.push(Inline::Text(plain));
    }
    out
}

#[derive(Template)]
#[template(path = "overview/glossary.html")]
struct GlossaryPage {
    ctx: PageContext,
    entries: Vec<Entry>,
}

pub async fn glossary(user: PageUser) -> PageResult<Response> {
    render(&GlossaryPage {
        ctx: (&user).into(),
        entries: entries(GLOSSARY),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_of_the_document_is_read_with_its_marks() {
        let all = entries(GLOSSARY);
        for word in ["Brief", "Trial", "Acceptance card", "Stage", "Evidence", "Ledger"] {
            assert!(all.iter().any(|e| e.term == word), "{word} missing");
        }
        let brief = all.iter().find(|e| e.term == "Brief").unwrap();
        assert_eq!(brief.anchor, "brief");
        assert!(
            matches!(&brief.definition[0], Inline::Text(t) if t.starts_with("(workload brief) — the written plan"))
        );
    }

    /// The page says its words are in alphabetical order, and a definition starts with words: an
    /// entry that opened with two marked terms (`**Required** / **advisory**`) showed "/ advisory —".
    #[test]
    fn entries_are_in_alphabetical_order_and_each_definition_starts_with_words() {
        let all = entries(GLOSSARY);
        for pair in all.windows(2) {
            assert!(
                pair[0].term.to_lowercase() <= pair[1].term.to_lowercase(),
                "{} before {}",
                pair[0].term,
                pair[1].term
            );
        }
        for e in &all {
            let starts_with_a_mark = matches!(&e.definition[0], Inline::Text(t) if t.starts_with(['/', ',']));
            assert!(!starts_with_a_mark, "{}: {:?}", e.term, e.definition[0]);
        }
        for word in ["SLO", "p95", "KV cache", "Headroom"] {
            assert!(all.iter().any(|e| e.term == word), "{word} missing");
        }
    }

    #[test]
    fn marks_become_runs_and_unclosed_marks_stay_text() {
        assert_eq!(
            inlines("a *trial*, `gpu.count` and **x** 2 * 3"),
            vec![
                Inline::Text("a ".into()),
                Inline::Em("trial".into()),
                Inline::Text(", ".into()),
                Inline::Code("gpu.count".into()),
                Inline::Text(" and ".into()),
                Inline::Strong("x".into()),
                Inline::Text(" 2 * 3".into()),
            ]
        );
    }
}
