//! Checkpoint/restore harness JSON: `{ "written": bool, "restored": bool, "seconds": n, "bytes": n }`.
//! `checkpoint.restore_ok` = written && restored; a missing `written`/`restored` is an error.
//! Optional top-level `tool` and `tool_version`, as the other harness documents.

use super::{text, ParseError, Parsed};
use serde_json::Value;

pub(crate) fn parse(s: &str) -> Result<Parsed, ParseError> {
    let (v, pre, non_finite) = text::harness_json_value(s)?;
    let named = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let mut p = Parsed {
        tool: Some(named("tool").unwrap_or_else(|| "checkpoint-restore".into())),
        tool_version: named("tool_version"),
        ..Default::default()
    };
    if non_finite {
        p.warn(text::NOT_NUMBERS);
    }
    if let Some(pre) = pre {
        p.warn(format!(
            "text before the JSON ignored: {}",
            pre.chars().take(80).collect::<String>()
        ));
    }
    let obj = v
        .as_object()
        .ok_or_else(|| ParseError::at(1, "expected a JSON object"))?;
    let b = |k: &str| obj.get(k).and_then(Value::as_bool);
    let (Some(w), Some(r)) = (b("written"), b("restored")) else {
        return Err(ParseError::at(
            1,
            "`written` and `restored` must both be present as booleans",
        ));
    };
    p.boolean("checkpoint.written", w);
    p.boolean("checkpoint.restored", r);
    p.boolean("checkpoint.restore_ok", w && r);
    match obj.get("seconds").and_then(Value::as_f64) {
        Some(x) => {
            p.nonneg("checkpoint.restore_seconds", x);
        }
        None => p.warn("no numeric `seconds`"),
    }
    if let Some(x) = obj.get("bytes").and_then(Value::as_f64) {
        p.count("checkpoint.bytes", x);
    }
    Ok(p)
}
