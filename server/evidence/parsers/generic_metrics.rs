//! Generic metrics JSON: `{ "metrics": { "key": number|bool|string|[string…], … } }`, keys as given
//! (non-empty, no whitespace; at most 1,000 keys of ≤ 200 characters and strings ≤ 4 KiB, see `limits`). Optional top-level `tool` and `tool_version`.
//! Non-finite numbers cannot occur in JSON; numbers above 2^53 in magnitude are rejected.

use super::{probe::kind, text, ParseError, Parsed, MAX_COUNT};
use serde_json::Value;

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let (v, _) = text::json_value(s)?;
    parse_value(&v)
}

/// The same from the document already decoded (an envelope's `data`: `parsers::parse_metrics_value`).
pub(crate) fn parse_value(v: &Value) -> Result<Parsed, ParseError> {
    let mut p = Parsed::default();
    let metrics = v
        .get("metrics")
        .and_then(Value::as_object)
        .ok_or_else(|| ParseError::at(1, "expected `{ \"metrics\": { … } }`"))?;
    p.tool = v.get("tool").and_then(Value::as_str).map(str::to_string);
    p.tool_version = v.get("tool_version").and_then(Value::as_str).map(str::to_string);
    for (k, val) in metrics {
        // A key over the length limit fails the item (`limits`); these are merely unusable.
        if k.is_empty() || k.chars().any(char::is_whitespace) {
            p.warn(format!("metric key {k:?} is not a valid key; skipped"));
            continue;
        }
        match val {
            Value::Bool(b) => p.boolean(k, *b),
            Value::Number(n) => match n.as_f64() {
                Some(x) if x.abs() > MAX_COUNT => p.warn(format!("{k}: {x} exceeds 2^53; not stored")),
                Some(x) => {
                    p.num(k, x);
                }
                None => p.warn(format!("{k}: unreadable number")),
            },
            Value::String(t) => p.text(k, t.clone()),
            Value::Array(a) if a.iter().all(Value::is_string) => {
                p.list(k, a.iter().filter_map(Value::as_str).map(str::to_string).collect())
            }
            other => p.warn(format!(
                "{k}: expected number, bool, string or list of strings, got {}",
                kind(other)
            )),
        }
    }
    Ok(p)
}
