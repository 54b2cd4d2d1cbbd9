//! What one evidence item may hold, whatever was uploaded (docs/evidence.md, "Limits"): at most
//! [`MAX_METRIC_KEYS`] metric keys, keys of at most [`MAX_KEY_CHARS`] characters, string values of at
//! most [`MAX_TEXT_BYTES`]. An item over a limit is stored like unreadable input (raw bytes kept,
//! `failed`, an error naming the limit, no metrics), so nothing downstream (the card's reads, the
//! metrics compactor, the review) pays for it.
//!
//! The limits are enforced while reading, not after: a JSON document is first walked without being
//! built (`scan_json`), and refused at the first object wider than the key limit, so a file of a
//! million keys never becomes a million-entry map; parsers insert metrics through [`super::Parsed`],
//! which stops taking keys at the limit.

use serde::de::{DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use std::fmt;

use super::{MetricValue, ParseError, Parsed};

/// Metric keys one item may have.
pub const MAX_METRIC_KEYS: usize = 1_000;
/// Characters in one metric key.
pub const MAX_KEY_CHARS: usize = 200;
/// Bytes in one string value (a text metric, or one entry of a list).
pub const MAX_TEXT_BYTES: usize = 4 * 1024;

/// The error of an item with too many keys.
pub(crate) fn too_many_keys() -> String {
    format!("over the limit of {MAX_METRIC_KEYS} metric keys per item; no metrics were read")
}

/// The first limit a metric breaks, if any.
pub(crate) fn violation(key: &str, value: &MetricValue) -> Option<String> {
    if key.chars().count() > MAX_KEY_CHARS {
        let head: String = key.chars().take(40).collect();
        return Some(format!(
            "metric key {head:?}… is over the limit of {MAX_KEY_CHARS} characters per key; no metrics were read"
        ));
    }
    let long = match value {
        MetricValue::Text(t) => t.len() > MAX_TEXT_BYTES,
        MetricValue::List(l) => l.iter().any(|t| t.len() > MAX_TEXT_BYTES),
        _ => false,
    };
    long.then(|| {
        format!(
            "{key}: a string value over the limit of {} KiB per value; no metrics were read",
            MAX_TEXT_BYTES / 1024
        )
    })
}

/// The whole item checked once more (parsers may build their map in ways [`Parsed`]'s helpers do
/// not see): the first limit broken, as the item's error.
pub(crate) fn check(p: &Parsed) -> Result<(), ParseError> {
    if let Some(v) = &p.over_limit {
        return Err(ParseError::new(None, None, v.clone()));
    }
    if p.metrics.len() > MAX_METRIC_KEYS {
        return Err(ParseError::new(None, None, too_many_keys()));
    }
    match p.metrics.iter().find_map(|(k, v)| violation(k, v)) {
        Some(v) => Err(ParseError::new(None, None, v)),
        None => Ok(()),
    }
}

/// What `scan_json` saw of a document it walked without building.
#[derive(Debug, Default)]
pub struct Scanned {
    /// The top-level object's keys (none for an array), in order.
    pub(crate) top_keys: Vec<String>,
    /// `Some(line)` when an object there has more keys than an item may have metrics.
    pub(crate) too_wide_at: Option<usize>,
}

const TOO_WIDE: &str = "rentcheck: object wider than the key limit";

/// Walks one JSON document without building it, stopping at the first object with more than
/// [`MAX_METRIC_KEYS`] keys. No format rentcheck reads has an object that wide: every key of such an
/// object would be a metric (`metrics`, `probe`) or it is not a tool's output. `Err` is any other
/// JSON error (the caller's own parse reports it as before).
pub(crate) fn scan_json(body: &str) -> Result<Scanned, serde_json::Error> {
    let mut scanned = Scanned::default();
    let mut de = serde_json::Deserializer::from_str(body);
    let result = Walk {
        depth: 0,
        top_keys: &mut scanned.top_keys,
    }
    .deserialize(&mut de)
    .and_then(|()| de.end());
    match result {
        Ok(()) => Ok(scanned),
        Err(e) if e.to_string().starts_with(TOO_WIDE) => {
            scanned.too_wide_at = Some(e.line().max(1));
            Ok(scanned)
        }
        Err(e) => Err(e),
    }
}

struct Walk<'a> {
    depth: usize,
    top_keys: &'a mut Vec<String>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("JSON")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut scratch = Vec::new();
        while seq
            .next_element_seed(Walk {
                depth: self.depth + 1,
                top_keys: &mut scratch,
            })?
            .is_some()
        {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut n = 0usize;
        let mut scratch = Vec::new();
        loop {
            let more = if self.depth == 0 {
                match map.next_key::<String>()? {
                    Some(k) => {
                        if self.top_keys.len() < MAX_METRIC_KEYS {
                            self.top_keys.push(k);
                        }
                        true
                    }
                    None => false,
                }
            } else {
                map.next_key::<IgnoredAny>()?.is_some()
            };
            if !more {
                return Ok(());
            }
            n += 1;
            if n > MAX_METRIC_KEYS {
                return Err(serde::de::Error::custom(TOO_WIDE));
            }
            map.next_value_seed(Walk {
                depth: self.depth + 1,
                top_keys: &mut scratch,
            })?;
        }
    }
}

/// The fewest bytes a JSON object wider than the key limit takes: `{`, `}`, and
/// `MAX_METRIC_KEYS + 1` members of at least `"":0` with a comma between each two.
const SMALLEST_WIDE_BYTES: usize = 2 + 4 * (MAX_METRIC_KEYS + 1) + MAX_METRIC_KEYS;

/// What `scan_json` saw, when `body` holds an object wider than the key limit. A body too short to
/// hold one (every ordinary upload) is not walked at all, so the upload, kind detection and the
/// parsers may each ask without walking it again and again.
pub fn too_wide(body: &str) -> Option<Scanned> {
    if body.len() < SMALLEST_WIDE_BYTES {
        return None;
    }
    scan_json(body).ok().filter(|s| s.too_wide_at.is_some())
}

/// [`too_wide`] as a parser's first step: an over-wide document is the item's error.
pub(crate) fn refuse_wide_json(body: &str) -> Result<(), ParseError> {
    match too_wide(body) {
        Some(Scanned {
            too_wide_at: Some(line),
            ..
        }) => Err(ParseError::at(line, too_many_keys())),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(n: usize) -> String {
        let members: Vec<String> = (0..n).map(|i| format!("\"k{i}\":{i}")).collect();
        format!("{{\"metrics\":{{{}}}}}", members.join(","))
    }

    #[test]
    fn an_object_of_the_limit_is_read_and_one_more_key_is_refused() {
        let ok = scan_json(&object(MAX_METRIC_KEYS)).unwrap();
        assert_eq!(ok.top_keys, vec!["metrics".to_string()]);
        assert_eq!(ok.too_wide_at, None);
        let wide = scan_json(&object(MAX_METRIC_KEYS + 1)).unwrap();
        assert_eq!(wide.top_keys, vec!["metrics".to_string()]);
        assert_eq!(wide.too_wide_at, Some(1));
    }

    #[test]
    fn arrays_of_many_small_objects_are_not_wide() {
        let doc = format!("[{}]", vec!["{\"a\":1,\"b\":[1,2]}"; 5_000].join(","));
        assert_eq!(scan_json(&doc).unwrap().too_wide_at, None);
    }

    #[test]
    fn the_shortest_over_wide_object_is_still_walked() {
        let members = vec!["\"\":0"; MAX_METRIC_KEYS + 1].join(",");
        let shortest = format!("{{{members}}}");
        assert_eq!(shortest.len(), SMALLEST_WIDE_BYTES);
        assert_eq!(too_wide(&shortest).map(|s| s.too_wide_at), Some(Some(1)));
        let one_fewer = format!("{{{}}}", vec!["\"\":0"; MAX_METRIC_KEYS].join(","));
        assert!(too_wide(&one_fewer).is_none());
    }

    #[test]
    fn other_json_errors_are_left_to_the_parser() {
        assert!(scan_json("{\"a\":").is_err());
        assert!(scan_json("{\"a\":1}\n{\"b\":2}").is_err());
    }
}
