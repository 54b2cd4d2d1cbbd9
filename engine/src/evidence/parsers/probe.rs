//! Probe harness JSON: `{ "checks": { "name": bool|number, … } }` → `probe.<name>`.
//! Names must be non-empty, ≤ 100 chars, without whitespace; other values (strings, objects) are
//! skipped with a warning.

use super::{text, ParseError, Parsed};
use serde_json::Value;

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let (v, _, non_finite) = text::harness_json_value(s)?;
    let mut p = Parsed {
        tool: Some("probe".into()),
        ..Default::default()
    };
    if non_finite {
        p.warn(text::NOT_NUMBERS);
    }
    let checks = v
        .get("checks")
        .and_then(Value::as_object)
        .ok_or_else(|| ParseError::at(1, "expected `{ \"checks\": { … } }`"))?;
    if let Some(t) = v.get("tool").and_then(Value::as_str) {
        p.tool = Some(t.to_string());
    }
    if let Some(t) = v.get("tool_version").and_then(Value::as_str) {
        p.tool_version = Some(t.to_string());
    }
    for (name, val) in checks {
        if name.is_empty() || name.len() > 100 || name.chars().any(char::is_whitespace) {
            p.warn(format!("check name {name:?} is not a valid key; skipped"));
            continue;
        }
        let key = format!("probe.{name}");
        match val {
            Value::Bool(b) => p.boolean(&key, *b),
            Value::Number(n) => match n.as_f64() {
                Some(x) => {
                    p.num(&key, x);
                }
                None => p.warn(format!("{key}: unreadable number")),
            },
            other => p.warn(format!("{key}: expected bool or number, got {}", kind(other))),
        }
    }
    if p.metrics.is_empty() {
        p.warn("no usable checks");
    }
    Ok(p)
}

pub(crate) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}
