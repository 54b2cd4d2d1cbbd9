//! Generic metrics JSON: `{ "metrics": { "key": number|bool|string|[string…], … } }`, keys as given
//! (non-empty, no whitespace; at most 1,000 keys of ≤ 200 characters and strings ≤ 4 KiB, see `limits`). Optional top-level `tool` and `tool_version`.
//! Non-finite numbers cannot occur in JSON, but Python's `json.dumps` writes `NaN` and `Infinity`:
//! those values are left out with a warning; numbers above 2^53 in magnitude are rejected.
//!
//! A document is read straight into its metrics ([`MetricsDocument`]), without first building a
//! JSON tree of it: under batch ingest the tree, and dropping it, were a third of the server's
//! time. Anything that reading does not take (a preamble before the JSON, a document of another
//! shape, a key given twice, malformed JSON) is read the general way instead, so the result and
//! every error are the same either way.

use std::{borrow::Cow, collections::BTreeMap, fmt};

use serde::de::{Deserialize, Deserializer, IgnoredAny, SeqAccess, Visitor};
use serde_json::Value;

use super::{limits, probe::kind, text, ParseError, Parsed, MAX_COUNT};

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    if let Some(p) = parse_direct(s) {
        return Ok(p);
    }
    let (v, _, non_finite) = text::harness_json_value(s)?;
    let mut p = parse_value(&v)?;
    if non_finite {
        p.warn(text::NOT_NUMBERS);
    }
    Ok(p)
}

pub(crate) fn parse_value(v: &Value) -> Result<Parsed, ParseError> {
    let metrics = v
        .get("metrics")
        .and_then(Value::as_object)
        .ok_or_else(|| ParseError::at(1, "expected `{ \"metrics\": { … } }`"))?;
    let tool = v.get("tool").and_then(Value::as_str).map(str::to_string);
    let tool_version = v.get("tool_version").and_then(Value::as_str).map(str::to_string);
    Ok(read(
        metrics.iter().map(|(k, val)| (k.as_str(), MetricInput::of(val))),
        tool,
        tool_version,
    ))
}

/// The rules for each metric, the same whichever way the document was read: `metrics` in key
/// order (a JSON object's keys as a map holds them).
fn read<'a, K: AsRef<str>>(
    metrics: impl Iterator<Item = (K, MetricInput<'a>)>,
    tool: Option<String>,
    tool_version: Option<String>,
) -> Parsed {
    let mut p = Parsed {
        tool,
        tool_version,
        ..Parsed::default()
    };
    for (k, val) in metrics {
        let k = k.as_ref();
        if k.is_empty() || k.chars().any(char::is_whitespace) {
            p.warn(format!("metric key {k:?} is not a valid key; skipped"));
            continue;
        }
        match val {
            MetricInput::Bool(b) => p.boolean(k, b),
            MetricInput::Number(x) if x.abs() > MAX_COUNT => p.warn(format!("{k}: {x} exceeds 2^53; not stored")),
            MetricInput::Number(x) => {
                p.num(k, x);
            }
            MetricInput::Text(t) => p.text(k, t.into_owned()),
            MetricInput::List(items) => p.list(k, items.into_iter().map(Cow::into_owned).collect()),
            MetricInput::UnreadableNumber => p.warn(format!("{k}: unreadable number")),
            MetricInput::Other(what) => p.warn(format!(
                "{k}: expected number, bool, string or list of strings, got {what}"
            )),
        }
    }
    p
}

/// One metric's value as given.
enum MetricInput<'a> {
    Bool(bool),
    Number(f64),
    Text(Cow<'a, str>),
    List(Vec<Cow<'a, str>>),
    /// A number that is not an f64 (cannot happen without serde_json's arbitrary precision).
    UnreadableNumber,
    /// Anything else, by the name of its JSON type.
    Other(&'static str),
}

impl<'a> MetricInput<'a> {
    fn of(v: &'a Value) -> MetricInput<'a> {
        match v {
            Value::Bool(b) => MetricInput::Bool(*b),
            // Without serde_json's arbitrary precision every number reads as an f64.
            Value::Number(n) => n.as_f64().map_or(MetricInput::UnreadableNumber, MetricInput::Number),
            Value::String(t) => MetricInput::Text(Cow::Borrowed(t)),
            Value::Array(a) if a.iter().all(Value::is_string) => {
                MetricInput::List(a.iter().filter_map(Value::as_str).map(Cow::Borrowed).collect())
            }
            other => MetricInput::Other(kind(other)),
        }
    }
}

/// `{ "metrics": { … }, "tool"?, "tool_version"? }` read in one pass. Other top-level members are
/// skipped unread, as [`parse_value`] ignores them; a member given twice fails here (serde refuses
/// a duplicate field) and the general reading then keeps the last, as a JSON map does.
#[derive(serde::Deserialize)]
struct MetricsDocument<'a> {
    #[serde(borrow)]
    metrics: BTreeMap<Name<'a>, MetricInput<'a>>,
    #[serde(default)]
    tool: Option<Value>,
    #[serde(default)]
    tool_version: Option<Value>,
}

/// The document read directly, or `None` where only the general reading gives the right answer or
/// error.
fn parse_direct(s: &str) -> Option<Parsed> {
    // The general reading allows text before the JSON (a preamble) and finds the document after it.
    if !s.trim_start().starts_with('{') {
        return None;
    }
    // An object wider than the key limit must be refused before it is built.
    if limits::too_wide(s).is_some() {
        return None;
    }
    let doc: MetricsDocument<'_> = serde_json::from_str(s).ok()?;
    let text = |v: Option<Value>| match v {
        Some(Value::String(s)) => Some(s),
        _ => None,
    };
    Some(read(
        doc.metrics.into_iter().map(|(k, v)| (k.0, v)),
        text(doc.tool),
        text(doc.tool_version),
    ))
}

impl<'de: 'a, 'a> Deserialize<'de> for MetricInput<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MetricInputVisitor)
    }
}

struct MetricInputVisitor;

impl<'de> Visitor<'de> for MetricInputVisitor {
    type Value = MetricInput<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(MetricInput::Bool(b))
    }
    fn visit_u64<E>(self, n: u64) -> Result<Self::Value, E> {
        Ok(MetricInput::Number(n as f64))
    }
    fn visit_i64<E>(self, n: i64) -> Result<Self::Value, E> {
        Ok(MetricInput::Number(n as f64))
    }
    fn visit_f64<E>(self, n: f64) -> Result<Self::Value, E> {
        Ok(MetricInput::Number(n))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(MetricInput::Text(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(MetricInput::Text(Cow::Owned(s.to_owned())))
    }
    fn visit_string<E>(self, s: String) -> Result<Self::Value, E> {
        Ok(MetricInput::Text(Cow::Owned(s)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(MetricInput::Other("null"))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(MetricInput::Other("null"))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        // A list of strings, or else an "array": the rest is read through without being kept.
        let mut items = Vec::new();
        while let Some(item) = seq.next_element::<StringOrNot<'de>>()? {
            match item {
                StringOrNot::String(s) => items.push(s),
                StringOrNot::Not => {
                    while seq.next_element::<IgnoredAny>()?.is_some() {}
                    return Ok(MetricInput::Other("array"));
                }
            }
        }
        Ok(MetricInput::List(items))
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(MetricInput::Other("object"))
    }
}

/// An element of a metric's list: a string, or anything else (read through, not kept).
enum StringOrNot<'a> {
    String(Cow<'a, str>),
    Not,
}

impl<'de: 'a, 'a> Deserialize<'de> for StringOrNot<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_any(MetricInputVisitor)? {
            MetricInput::Text(s) => Ok(StringOrNot::String(s)),
            _ => Ok(StringOrNot::Not),
        }
    }
}

/// A metric's key, borrowed from the document where it has no escapes.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
struct Name<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Name<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match d.deserialize_str(MetricInputVisitor)? {
            MetricInput::Text(s) => Ok(Name(s)),
            _ => Err(serde::de::Error::custom("a metric key is a string")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The general reading: the document built as a JSON value, then read.
    fn general(s: &str) -> Result<Parsed, ParseError> {
        let (v, _) = text::json_value(s)?;
        parse_value(&v)
    }

    /// Every document the direct reading takes comes out exactly as the general reading makes it
    /// (values, warnings and their order, tool, the limits); those it does not take fall back, so
    /// `parse` equals the general reading for all of them, errors included.
    #[test]
    fn the_direct_reading_gives_what_the_general_reading_gives() {
        let long_key = "k".repeat(300);
        let many: serde_json::Map<String, Value> = (0..1000).map(|i| (format!("m{i}"), json!(i))).collect();
        let values = [
            json!({ "metrics": { "serving.ttft_p95_ms": 300, "ok": true, "name": "x", "list": ["a", "b"] },
                    "tool": "harness", "tool_version": "1.2" }),
            json!({ "metrics": { "bad key": 1, "": 2, "nested": { "a": [1] }, "huge": 1e300, "big": 9_007_199_254_740_993u64,
                                 "neg": -4, "mixed": [1, "a"], "strings_then_other": ["a", null], "empty": [],
                                 "null": null, "z": 0.1 },
                    "tool": 3, "tool_version": null, "other": { "x": 1 } }),
            json!({ "metrics": { long_key: 1 } }),
            json!({ "metrics": { "s": "x".repeat(5000) } }),
            json!({ "metrics": many }),
        ];
        let mut docs: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        let (escapes, member_twice) = (docs.len(), docs.len() + 1);
        docs.extend(
            [
                // Escapes in keys and strings, whitespace, a key given twice (the last wins).
                "  {\n \"metrics\" : { \"a\\u0020b\": 1, \"t\\n\": \"x\\\"y\", \"d\": 1, \"d\": \"two\" } }\n",
                // A top-level member given twice: the direct reading declines, the general keeps the last.
                r#"{ "metrics": { "a": 1 }, "metrics": { "b": 2 } }"#,
                r#"log line before it {"metrics": {"a": 1}}"#,
                r#"{"not_metrics": {}}"#,
                r#"{"metrics": [1, 2]}"#,
                "[1, 2]",
                r#"{"metrics": {"a": 1}"#,
                r#"{"metrics": {"a": 1e400}}"#,
                "",
            ]
            .map(str::to_owned),
        );
        for (i, doc) in docs.iter().enumerate() {
            assert_eq!(parse(doc), general(doc), "{doc:.200}");
            if i < values.len() {
                assert!(parse_direct(doc).is_some(), "the direct reading should take {doc:.200}");
            }
        }
        assert!(parse_direct(&docs[escapes]).is_some(), "escapes and whitespace");
        assert!(parse_direct(&docs[member_twice]).is_none(), "a member given twice");
        let twice = parse(&docs[escapes]).unwrap();
        assert_eq!(
            twice.metrics.get("d"),
            Some(&super::super::MetricValue::Text("two".into()))
        );
    }
}
