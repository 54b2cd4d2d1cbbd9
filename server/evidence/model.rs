//! Evidence uploads as the domain sees them: validated fields, the parse outcome, the list cursor.
//! Pure: no I/O. The three request forms (JSON envelope, raw body + query, multipart) all become an
//! [`Upload`]; [`analyse`] turns its bytes into metrics with the parsers.

use std::collections::HashMap;

use base64::Engine as _;
use bytes::Bytes;
use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use uuid::Uuid;

use super::parsers::{self, EvidenceKind, ParseError, Parsed, SloTargets};
use crate::ids::{EvidenceId, TrialId};
use crate::validation::FieldError;

/// The kind a caller asked for: a named kind, or `auto` (detect it from the content).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindChoice {
    Auto,
    Named(EvidenceKind),
}

impl KindChoice {
    pub fn as_str(&self) -> &'static str {
        match self {
            KindChoice::Auto => "auto",
            KindChoice::Named(k) => k.as_str(),
        }
    }
}

fn parse_kind(raw: &str) -> Result<KindChoice, FieldError> {
    if raw == "auto" {
        return Ok(KindChoice::Auto);
    }
    raw.parse::<EvidenceKind>().map(KindChoice::Named).map_err(|_| {
        let known: Vec<&str> = EvidenceKind::ALL.iter().map(EvidenceKind::as_str).collect();
        FieldError::new(
            "kind",
            format!("unknown kind {raw:?}; use auto or one of {}", known.join(", ")),
        )
    })
}

fn parse_stage(v: &Value) -> Result<i16, FieldError> {
    let n = match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    match n {
        Some(n @ 1..=5) => Ok(n as i16),
        _ => Err(FieldError::new("stage", "must be an integer from 1 to 5")),
    }
}

fn parse_collected_at(v: &Value) -> Result<Option<DateTime<Utc>>, FieldError> {
    match v {
        Value::Null => Ok(None),
        Value::String(s) if s.is_empty() => Ok(None),
        Value::String(s) => DateTime::parse_from_rfc3339(s)
            .map(|t| Some(t.with_timezone(&Utc)))
            .map_err(|_| {
                FieldError::new(
                    "collected_at",
                    "must be an RFC 3339 timestamp, e.g. 2026-11-29T10:00:00Z",
                )
            }),
        _ => Err(FieldError::new("collected_at", "must be an RFC 3339 timestamp string")),
    }
}

/// Labels are a flat JSON object of short strings (`window`, `phase`, anything the harness wants).
const MAX_LABELS: usize = 32;
const MAX_LABEL_LEN: usize = 256;

fn parse_labels(v: &Value) -> Result<Map<String, Value>, FieldError> {
    let bad = |m: &str| FieldError::new("labels", m);
    let map = match v {
        Value::Null => return Ok(Map::new()),
        Value::Object(m) => m,
        _ => return Err(bad("must be an object of string values")),
    };
    if map.len() > MAX_LABELS {
        return Err(bad("at most 32 labels"));
    }
    for (k, v) in map {
        let ok = k.len() <= MAX_LABEL_LEN && !k.is_empty() && matches!(v, Value::String(s) if s.len() <= MAX_LABEL_LEN);
        // Names and values are shown on pages and kept as jsonb, which cannot hold NUL.
        let control =
            k.chars().any(char::is_control) || matches!(v, Value::String(s) if s.chars().any(char::is_control));
        if control {
            return Err(bad("labels may not contain control characters such as NUL"));
        }
        if !ok {
            return Err(bad(
                "each label is a non-empty name with a string value of at most 256 bytes",
            ));
        }
    }
    if let Some(Value::String(p)) = map.get("phase") {
        if p != "before" && p != "after" {
            return Err(bad("labels.phase must be before or after"));
        }
    }
    Ok(map.clone())
}

/// A content type we can hand back in a header later; anything else is stored as octet-stream.
pub fn clean_content_type(ct: Option<&str>) -> String {
    match ct.map(str::trim) {
        Some(ct) if !ct.is_empty() && ct.len() <= 255 && ct.bytes().all(|b| (0x20..0x7f).contains(&b)) => ct.to_owned(),
        _ => "application/octet-stream".to_owned(),
    }
}

/// A validated upload, whichever form it came in.
#[derive(Debug, Clone)]
pub struct Upload {
    pub kind: KindChoice,
    /// The trial the upload names (`trial`); `None` for the token's trial or the brief's only one.
    pub trial: Option<TrialId>,
    pub stage: i16,
    pub collected_at: Option<DateTime<Utc>>,
    pub labels: Map<String, Value>,
    pub content_type: String,
    pub filename: Option<String>,
    pub raw: Bytes,
}

/// An envelope's `data` member: the JSON object or array as the bytes sent (kept as they came, so
/// nothing is built from it before its parser reads it), or what it was instead.
pub enum EnvelopeData {
    Json(Bytes),
    /// Not an object or array.
    Other,
}

/// The envelope's bytes and their content type: from exactly one of `content` (text),
/// `content_base64` (with `content_type`) or `data` (JSON).
fn envelope_body(
    o: &Map<String, Value>,
    data: Option<EnvelopeData>,
    errors: &mut Vec<FieldError>,
) -> Option<(Bytes, String)> {
    let given: Vec<&str> = ["content", "content_base64"]
        .into_iter()
        .filter(|k| o.get(*k).is_some_and(|v| !v.is_null()))
        .chain(data.is_some().then_some("data"))
        .collect();
    let mut body = None;
    match given.as_slice() {
        ["content"] => match &o["content"] {
            Value::String(s) => body = Some((Bytes::from(s.clone()), "text/plain; charset=utf-8".to_owned())),
            _ => errors.push(FieldError::new(
                "content",
                "must be a string (use data for a JSON object)",
            )),
        },
        ["content_base64"] => match &o["content_base64"] {
            Value::String(s) => match base64::engine::general_purpose::STANDARD.decode(s.trim()) {
                Ok(b) => {
                    let ct = o.get("content_type").and_then(Value::as_str);
                    body = Some((Bytes::from(b), clean_content_type(ct)));
                }
                Err(e) => errors.push(FieldError::new("content_base64", format!("is not valid base64: {e}"))),
            },
            _ => errors.push(FieldError::new("content_base64", "must be a base64 string")),
        },
        ["data"] => match data {
            Some(EnvelopeData::Json(b)) => body = Some((b, "application/json".to_owned())),
            _ => errors.push(FieldError::new("data", "must be a JSON object or array")),
        },
        [] => errors.push(FieldError::new(
            "content",
            "one of content, content_base64 or data is required",
        )),
        _ => errors.push(FieldError::new(
            "content",
            "give only one of content, content_base64 or data",
        )),
    }
    body
}

impl Upload {
    /// The JSON envelope `{ kind, stage, collected_at?, labels?, content | content_base64 | data }`,
    /// given as its members other than `data`, each parsed, and its `data` as the bytes sent
    /// (`upload::read_envelope`). `content_type` may accompany `content_base64` to say what the
    /// bytes are. One read per envelope field, every error collected.
    pub fn from_envelope(o: Map<String, Value>, data: Option<EnvelopeData>) -> Result<Upload, Vec<FieldError>> {
        let mut errors = Vec::new();
        let kind = match o.get("kind") {
            Some(Value::String(s)) => parse_kind(s).map_err(|e| errors.push(e)).ok(),
            Some(_) => {
                errors.push(FieldError::new("kind", "must be a string"));
                None
            }
            None => {
                errors.push(FieldError::new("kind", "is required (a kind, or auto)"));
                None
            }
        };
        let stage = match o.get("stage") {
            Some(v) => parse_stage(v).map_err(|e| errors.push(e)).ok(),
            None => {
                errors.push(FieldError::new("stage", "is required (1 to 5)"));
                None
            }
        };
        let collected_at = parse_collected_at(o.get("collected_at").unwrap_or(&Value::Null))
            .map_err(|e| errors.push(e))
            .ok()
            .flatten();
        let trial = match o.get("trial") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => parse_trial(s).map_err(|e| errors.push(e)).ok(),
            Some(_) => {
                errors.push(FieldError::new("trial", "must be a trial id (a string)"));
                None
            }
        };
        let labels = parse_labels(o.get("labels").unwrap_or(&Value::Null))
            .map_err(|e| errors.push(e))
            .unwrap_or_default();
        let body = envelope_body(&o, data, &mut errors);
        match (kind, stage, body) {
            (Some(kind), Some(stage), Some((raw, content_type))) if errors.is_empty() => Ok(Upload {
                kind,
                trial,
                stage,
                collected_at,
                labels,
                content_type,
                filename: None,
                raw,
            }),
            _ => Err(errors),
        }
    }

    /// Fields given as text pairs: the query of a raw upload, or the text parts (and query) of a
    /// multipart upload. `label.<name>=value` sets a label; `labels` may hold a JSON object.
    pub fn from_fields(
        fields: &HashMap<String, String>,
        content_type: String,
        filename: Option<String>,
        raw: Bytes,
    ) -> Result<Upload, Vec<FieldError>> {
        let mut errors = Vec::new();
        let kind = match fields.get("kind") {
            Some(s) => parse_kind(s).map_err(|e| errors.push(e)).ok(),
            None => {
                errors.push(FieldError::new("kind", "is required (?kind=…, a kind or auto)"));
                None
            }
        };
        let stage = match fields.get("stage") {
            Some(s) => parse_stage(&Value::String(s.clone())).map_err(|e| errors.push(e)).ok(),
            None => {
                errors.push(FieldError::new("stage", "is required (?stage=1 to 5)"));
                None
            }
        };
        let collected_at = fields
            .get("collected_at")
            .map(|s| parse_collected_at(&Value::String(s.clone())))
            .transpose()
            .map_err(|e| errors.push(e))
            .ok()
            .flatten()
            .flatten();
        let trial = match fields.get("trial").map(|s| s.trim()).filter(|s| !s.is_empty()) {
            None => None,
            Some(s) => parse_trial(s).map_err(|e| errors.push(e)).ok(),
        };
        let mut labels = Value::Null;
        if let Some(s) = fields.get("labels") {
            match serde_json::from_str::<Value>(s) {
                Ok(v) => labels = v,
                Err(_) => errors.push(FieldError::new("labels", "must be a JSON object")),
            }
        }
        let mut extra: Vec<(&String, &String)> = fields
            .iter()
            .filter_map(|(k, v)| k.strip_prefix("label.").map(|_| (k, v)))
            .collect();
        extra.sort();
        if !extra.is_empty() {
            let mut map = labels.as_object().cloned().unwrap_or_default();
            for (k, v) in extra {
                map.insert(k["label.".len()..].to_owned(), Value::String(v.clone()));
            }
            labels = Value::Object(map);
        }
        let labels = parse_labels(&labels).map_err(|e| errors.push(e)).unwrap_or_default();
        match (kind, stage) {
            (Some(kind), Some(stage)) if errors.is_empty() => Ok(Upload {
                kind,
                trial,
                stage,
                collected_at,
                labels,
                content_type,
                // Control characters (NUL above all) cannot be stored or shown; drop them.
                filename: filename
                    .map(|f| f.chars().filter(|c| !c.is_control()).take(255).collect::<String>())
                    .filter(|f| !f.is_empty()),
                raw,
            }),
            _ => Err(errors),
        }
    }

    /// What identifies "the same request" for `Idempotency-Key`: the fields as the client sent them
    /// and the bytes, not the transport (a multipart boundary differs between retries of one file).
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        let mut head = serde_json::json!({
            "kind": self.kind.as_str(),
            "stage": self.stage,
            "collected_at": self.collected_at,
            "labels": self.labels,
            "content_type": self.content_type,
            "filename": self.filename,
        });
        // Only when named, so keys stored before trials existed still match their retries.
        if let Some(trial) = self.trial {
            head["trial"] = Value::String(trial.to_string());
        }
        h.update(head.to_string().as_bytes());
        h.update([0]);
        h.update(&self.raw);
        hex::encode(h.finalize())
    }

    /// `Some(window id)` when this is the `after` scrape of a window (vLLM or dcgm-exporter).
    pub fn window_after(&self) -> Option<&str> {
        self.window_phase("after")
    }

    /// `Some(window id)` when this is the `before` scrape of a window.
    pub fn window_before(&self) -> Option<&str> {
        self.window_phase("before")
    }

    fn window_phase(&self, phase: &str) -> Option<&str> {
        match (self.labels.get("window"), self.labels.get("phase")) {
            (Some(Value::String(w)), Some(Value::String(p))) if p == phase => Some(w),
            _ => None,
        }
    }
}

fn parse_trial(s: &str) -> Result<TrialId, FieldError> {
    s.trim()
        .parse::<TrialId>()
        .map_err(|_| FieldError::new("trial", "must be the id of one of the brief's trials"))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The digest of a metrics object's keys (the first 16 bytes of the SHA-256 of the sorted keys,
/// each followed by a NUL), stored with the item: the compactor reads the keys of only the newest
/// item of each key set (migration `…_evidence_metric_keys_digest.sql`). `None` without keys.
pub fn metric_keys_digest(metrics: &Value) -> Option<[u8; 16]> {
    let keys = metrics.as_object().filter(|m| !m.is_empty())?;
    let mut h = Sha256::new();
    // serde_json's map is ordered by key, so equal key sets hash the same.
    for key in keys.keys() {
        h.update(key.as_bytes());
        h.update([0]);
    }
    let mut digest = [0; 16];
    digest.copy_from_slice(&h.finalize()[..16]);
    Some(digest)
}

/// The kind to parse as. `auto` that recognises nothing is stored as `log` with a warning: an upload
/// is never refused for being unrecognised (the agent's `collect` sends `auto` for unknown files).
pub fn resolve_kind(choice: KindChoice, raw: &[u8]) -> (EvidenceKind, Option<String>) {
    match choice {
        KindChoice::Named(k) => (k, None),
        KindChoice::Auto => match parsers::detect_kind(raw) {
            Some(k) => (k, None),
            None => (
                EvidenceKind::Log,
                Some("kind=auto: the format was not recognised; stored as log (no metrics)".to_owned()),
            ),
        },
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParseStatus {
    Ok,
    Partial,
    Failed,
}

impl ParseStatus {
    pub fn as_str(&self) -> &'static str {
        match self {
            ParseStatus::Ok => "ok",
            ParseStatus::Partial => "partial",
            ParseStatus::Failed => "failed",
        }
    }
}

/// The `before` side of a window, as found for an `after` upload.
pub enum Window<'a> {
    /// Not an `after` scrape (or not a kind with windows).
    NotWindowed,
    Before(&'a [u8]),
    /// An `after` scrape whose window has no `before` on this brief.
    Unmatched(&'a str),
}

/// What the parsers made of an upload. A failure is an outcome too: it is stored, never dropped.
#[derive(Debug, Clone)]
pub struct Outcome {
    pub kind: EvidenceKind,
    pub status: ParseStatus,
    pub metrics: Value,
    pub warnings: Vec<String>,
    pub error: Option<String>,
    pub tool: Option<String>,
    pub tool_version: Option<String>,
}

/// Parses `raw` as `kind` (pure; may take a few ms per MB, so large inputs run off the async thread),
/// judging serving latencies against the brief's `targets`.
/// NUL characters in what the parsers read out (metric keys and values, warnings, the tool's name)
/// become U+FFFD: PostgreSQL text and jsonb cannot hold them, and a tool's output is no reason for
/// a 500. The raw bytes keep them.
pub fn analyse(
    kind: EvidenceKind,
    raw: &[u8],
    window: Window<'_>,
    kind_warning: Option<String>,
    targets: &SloTargets,
) -> Outcome {
    let mut outcome = analyse_as_parsed(kind, raw, window, kind_warning, targets);
    let text = |s: &mut String| {
        if s.contains('\0') {
            *s = s.replace('\0', "\u{FFFD}");
        }
    };
    fn value(v: &mut Value, text: &dyn Fn(&mut String)) {
        match v {
            Value::String(s) => text(s),
            Value::Array(items) => items.iter_mut().for_each(|i| value(i, text)),
            Value::Object(map) => {
                if map.keys().any(|k| k.contains('\0')) {
                    *map = std::mem::take(map)
                        .into_iter()
                        .map(|(k, v)| (k.replace('\0', "\u{FFFD}"), v))
                        .collect();
                }
                map.values_mut().for_each(|i| value(i, text));
            }
            _ => {}
        }
    }
    value(&mut outcome.metrics, &text);
    outcome.warnings.iter_mut().for_each(text);
    outcome.error.iter_mut().for_each(text);
    outcome.tool.iter_mut().for_each(text);
    outcome.tool_version.iter_mut().for_each(text);
    outcome
}

fn analyse_as_parsed(
    kind: EvidenceKind,
    raw: &[u8],
    window: Window<'_>,
    kind_warning: Option<String>,
    targets: &SloTargets,
) -> Outcome {
    outcome(kind, parse_bytes(kind, raw, window, targets), kind_warning)
}

fn parse_bytes(kind: EvidenceKind, raw: &[u8], window: Window<'_>, targets: &SloTargets) -> Result<Parsed, ParseError> {
    match window {
        Window::Before(before) if kind.has_window() => parsers::parse_window(kind, before, raw, targets),
        Window::Unmatched(id) if kind.has_window() => parsers::parse_with(kind, raw, targets).map(|mut p| {
            p.warnings.insert(
                0,
                format!(
                    "window {id:?}: no `before` scrape with this window on this brief; values are cumulative \
                     since the server started"
                ),
            );
            p
        }),
        _ => parsers::parse_with(kind, raw, targets),
    }
}

fn outcome(kind: EvidenceKind, result: Result<Parsed, ParseError>, kind_warning: Option<String>) -> Outcome {
    match result {
        Ok(p) => {
            let mut warnings = p.warnings;
            if let Some(w) = kind_warning {
                warnings.insert(0, w);
            }
            Outcome {
                kind,
                status: if warnings.is_empty() {
                    ParseStatus::Ok
                } else {
                    ParseStatus::Partial
                },
                metrics: serde_json::to_value(&p.metrics).unwrap_or_else(|_| Value::Object(Map::new())),
                warnings,
                error: None,
                tool: p.tool,
                tool_version: p.tool_version,
            }
        }
        Err(e) => Outcome {
            kind,
            status: ParseStatus::Failed,
            metrics: Value::Object(Map::new()),
            warnings: kind_warning.into_iter().collect(),
            error: Some(e.to_string()),
            tool: None,
            tool_version: None,
        },
    }
}

/// Opaque list cursor: the (received_at, id) of the last item shown, base64url.
pub fn encode_cursor(received_at: DateTime<Utc>, id: EvidenceId) -> String {
    let s = format!("{}.{}", received_at.timestamp_micros(), id.as_uuid().simple());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s)
}

pub fn decode_cursor(cursor: &str) -> Option<(DateTime<Utc>, Uuid)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(cursor).ok()?;
    let s = std::str::from_utf8(&raw).ok()?;
    let (micros, id) = s.split_once('.')?;
    Some((
        DateTime::from_timestamp_micros(micros.parse().ok()?)?,
        Uuid::parse_str(id).ok()?,
    ))
}

/// Text a browser may show inline. Anything else (HTML, SVG, binaries…) is served as an attachment.
pub fn is_inline_text(content_type: &str) -> bool {
    let essence = content_type.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    matches!(
        essence.as_str(),
        "text/plain" | "text/csv" | "application/json" | "application/x-ndjson" | "application/jsonl"
    )
}

/// Human-readable size.
pub fn human_size(n: i64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// One metric value as evidence gave it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Observation {
    pub key: String,
    pub stage: u8,
    pub value: Value,
    pub evidence_id: Uuid,
    pub collected_at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
}

impl Observation {
    /// Newer by `collected_at`, ties by `received_at`, then by id (UUIDv7: upload order).
    pub fn newer_than(&self, other: &Observation) -> bool {
        (self.collected_at, self.received_at, self.evidence_id)
            > (other.collected_at, other.received_at, other.evidence_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn envelope_validation_names_each_field() {
        let envelope = |v: Value| match v {
            Value::Object(members) => Upload::from_envelope(members, None),
            _ => unreachable!("an envelope is an object"),
        };
        let e = envelope(json!({"kind": "nope", "stage": 9, "labels": [1]})).unwrap_err();
        let fields: Vec<&str> = e.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["kind", "stage", "labels", "content"]);
        let u = envelope(json!({"kind": "auto", "stage": "2", "content_base64": "/w=="})).unwrap();
        assert_eq!(&u.raw[..], &[0xff]);
        assert_eq!(u.content_type, "application/octet-stream");
    }

    #[test]
    fn cursor_round_trips_and_rejects_junk() {
        let t = DateTime::from_timestamp_micros(1_790_000_000_123_456).unwrap();
        let id = Uuid::now_v7();
        assert_eq!(decode_cursor(&encode_cursor(t, EvidenceId::from(id))), Some((t, id)));
        assert_eq!(decode_cursor("!!"), None);
        assert_eq!(decode_cursor("bm9wZQ"), None);
    }

    #[test]
    fn fingerprint_ignores_transport_but_not_fields() {
        let f = |stage: &str| {
            let m = HashMap::from([
                ("kind".to_owned(), "log".to_owned()),
                ("stage".to_owned(), stage.to_owned()),
            ]);
            Upload::from_fields(&m, "text/plain".into(), None, Bytes::from_static(b"x"))
                .unwrap()
                .fingerprint()
        };
        assert_eq!(f("1"), f("1"));
        assert_ne!(f("1"), f("2"));
    }
}
