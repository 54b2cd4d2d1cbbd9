//! Reading a serving-benchmark JSON document in one pass.
//!
//! A `--save-detailed` result is mostly per-request arrays (`ttfts`, `itls`, `errors`, `input_lens`,
//! `output_lens`, `generated_texts`). Building a `serde_json::Value` for them (one enum per number,
//! one `Vec` per request's ITLs) and dropping it again was most of the parse time, so the top-level
//! object is read in one pass into [`Obj`]: the arrays that are used (`ttfts`, `itls`, `errors`,
//! `output_lens`) become flat typed vectors, GuideLLM's `benchmarks` array is kept as a `Value`, every
//! other top-level array is checked and skipped, and everything else is a `Value` as before.
//! Numbers are read with `deserialize_any` everywhere, so the input is validated exactly as a
//! `Value` parse would (an out-of-range number is still an error). Anything this reader does not
//! take (not an object; serde_json's private raw-value token) falls back to a `Value` parse, which
//! [`Obj::from_map`] converts to the same shape.

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

pub(crate) enum Doc {
    Object(Obj),
    Other(Value),
}

pub(crate) fn read_doc(s: &str) -> Result<Doc, serde_json::Error> {
    if let Ok(o) = serde_json::from_str::<Obj>(s) {
        return Ok(Doc::Object(o));
    }
    Ok(match serde_json::from_str::<Value>(s)? {
        Value::Object(m) => Doc::Object(Obj::from_map(m)),
        v => Doc::Other(v),
    })
}

/// A top-level JSON object.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Obj {
    /// Every member (a later duplicate key replaces an earlier one, as in `Value`); array values are
    /// stored as `[]` (nothing reads a top-level array except those below), except the arrays named
    /// in [`KEPT_ARRAYS`], which are kept whole.
    pub(crate) map: Map<String, Value>,
    /// `ttfts` when it is an array: one entry per request, NaN where the element is not a number.
    pub(crate) ttfts: Option<Vec<f64>>,
    /// `itls` when it is an array.
    pub(crate) itls: Option<Itls>,
    /// `errors` when it is an array: per request, whether the element is a non-empty string.
    pub(crate) errors: Option<Vec<bool>>,
    /// `output_lens` when it is an array (tokens per request; NaN where not a number).
    pub(crate) output_lens: Option<Vec<f64>>,
    /// `input_lens` when it is an array (prompt tokens per request; NaN where not a number).
    pub(crate) input_lens: Option<Vec<f64>>,
    /// `latencies` when it is an array: each request's end-to-end latency in seconds, which newer
    /// `vllm bench serve --save-detailed` files keep (NaN where not a number).
    pub(crate) latencies: Option<Vec<f64>>,
}

/// The numbers of every request's ITL array, flattened; request `i`'s are `values[ends[i-1]..ends[i]]`
/// (a request whose element is not an array has none).
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Itls {
    pub(crate) values: Vec<f64>,
    pub(crate) ends: Vec<usize>,
}

/// The per-request arrays of plain numbers, each kept as its own vector.
const NUMBER_ARRAYS: [&str; 4] = ["ttfts", "output_lens", "input_lens", "latencies"];

impl Obj {
    /// The vector of a [`NUMBER_ARRAYS`] key (`ttfts` for any other, never asked for).
    fn numbers_mut(&mut self, key: &str) -> &mut Option<Vec<f64>> {
        match key {
            "output_lens" => &mut self.output_lens,
            "input_lens" => &mut self.input_lens,
            "latencies" => &mut self.latencies,
            _ => &mut self.ttfts,
        }
    }

    /// The same shape from an already parsed `Value` object (the fallback path).
    pub(crate) fn from_map(mut map: Map<String, Value>) -> Obj {
        let mut o = Obj::default();
        for (k, v) in map.iter_mut() {
            let Value::Array(items) = v else { continue };
            if KEPT_ARRAYS.contains(&k.as_str()) {
                continue;
            }
            let items = std::mem::take(items);
            match k.as_str() {
                k if NUMBER_ARRAYS.contains(&k) => {
                    *o.numbers_mut(k) = Some(items.iter().map(|x| x.as_f64().unwrap_or(f64::NAN)).collect())
                }
                "itls" => {
                    let mut t = Itls::default();
                    for x in &items {
                        t.values
                            .extend(x.as_array().into_iter().flatten().filter_map(Value::as_f64));
                        t.ends.push(t.values.len());
                    }
                    o.itls = Some(t);
                }
                "errors" => {
                    o.errors = Some(
                        items
                            .iter()
                            .map(|x| x.as_str().is_some_and(|s| !s.is_empty()))
                            .collect(),
                    )
                }
                _ => {}
            }
        }
        o.map = map;
        o
    }
}

/// Top-level arrays a reader needs whole (GuideLLM's list of benchmarks; AIPerf's kinds of request
/// error, whose emptiness says no request failed).
pub(crate) const KEPT_ARRAYS: [&str; 2] = ["benchmarks", "error_summary"];

const RAW_VALUE_TOKEN: &str = "$serde_json::private::RawValue";

impl<'de> serde::Deserialize<'de> for Obj {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Obj, D::Error> {
        d.deserialize_any(ObjVisitor)
    }
}

struct ObjVisitor;

impl<'de> Visitor<'de> for ObjVisitor {
    type Value = Obj;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON object")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Obj, A::Error> {
        let mut o = Obj::default();
        let mut first = true;
        while let Some(k) = m.next_key::<String>()? {
            if first && k == RAW_VALUE_TOKEN {
                return Err(de::Error::custom("raw value token: read as a Value"));
            }
            first = false;
            let v = match k.as_str() {
                k if NUMBER_ARRAYS.contains(&k) => match m.next_value::<Member<Ttfts>>()? {
                    Member::Array(Ttfts(t)) => {
                        *o.numbers_mut(k) = Some(t);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        *o.numbers_mut(k) = None;
                        v
                    }
                },
                "itls" => match m.next_value::<Member<Itls>>()? {
                    Member::Array(t) => {
                        o.itls = Some(t);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        o.itls = None;
                        v
                    }
                },
                "errors" => match m.next_value::<Member<Errors>>()? {
                    Member::Array(Errors(e)) => {
                        o.errors = Some(e);
                        Value::Array(Vec::new())
                    }
                    Member::Other(v) => {
                        o.errors = None;
                        v
                    }
                },
                k if KEPT_ARRAYS.contains(&k) => m.next_value::<Value>()?,
                _ => match m.next_value::<Member<Skipped>>()? {
                    Member::Array(Skipped) => Value::Array(Vec::new()),
                    Member::Other(v) => v,
                },
            };
            o.map.insert(k, v);
        }
        Ok(o)
    }
}

/// Builds `T` from an array's elements.
trait FromSeq<'de>: Sized {
    fn from_seq<A: SeqAccess<'de>>(seq: A) -> Result<Self, A::Error>;
}

/// A top-level member: an array read as `T`, or any other value as a `Value`.
enum Member<T> {
    Array(T),
    Other(Value),
}

impl<'de, T: FromSeq<'de>> serde::Deserialize<'de> for Member<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(MemberVisitor(std::marker::PhantomData))
    }
}

struct MemberVisitor<T>(std::marker::PhantomData<T>);

impl<'de, T: FromSeq<'de>> Visitor<'de> for MemberVisitor<T> {
    type Value = Member<T>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        T::from_seq(seq).map(Member::Array)
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<Self::Value, A::Error> {
        serde::Deserialize::deserialize(de::value::MapAccessDeserializer::new(m)).map(Member::Other)
    }
    // The scalars as serde_json's own `Value` visitor builds them.
    fn visit_bool<E>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Number(v.into())))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Number(v.into())))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Self::Value, E> {
        Ok(Member::Other(
            serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number),
        ))
    }
    fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::String(v.to_owned())))
    }
    fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(Member::Other(Value::Null))
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        serde::Deserialize::deserialize(d).map(Member::Other)
    }
}

/// Any value, checked and dropped.
struct Ignored;

impl<'de> serde::Deserialize<'de> for Ignored {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrIgnored).map(|_| Ignored)
    }
}

/// Any value; a number as `f64`, anything else (checked, then dropped) as NaN.
struct NumberOrIgnored;

struct Num(f64);

impl<'de> serde::Deserialize<'de> for Num {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(NumberOrIgnored).map(Num)
    }
}

impl<'de> Visitor<'de> for NumberOrIgnored {
    type Value = f64;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_i64<E>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_u64<E>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_f64<E>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_bool<E>(self, _: bool) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_str<E>(self, _: &str) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_unit<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_none<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        <Ignored as serde::Deserialize>::deserialize(d).map(|_| f64::NAN)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<f64, A::Error> {
        while seq.next_element::<Ignored>()?.is_some() {}
        Ok(f64::NAN)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<f64, A::Error> {
        while m.next_key::<Ignored>()?.is_some() {
            m.next_value::<Ignored>()?;
        }
        Ok(f64::NAN)
    }
}

/// A top-level array nothing reads.
struct Skipped;

impl<'de> FromSeq<'de> for Skipped {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        while seq.next_element::<Ignored>()?.is_some() {}
        Ok(Skipped)
    }
}

struct Ttfts(Vec<f64>);

impl<'de> FromSeq<'de> for Ttfts {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut v = Vec::new();
        while let Some(Num(x)) = seq.next_element()? {
            v.push(x);
        }
        Ok(Ttfts(v))
    }
}

impl<'de> FromSeq<'de> for Itls {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut t = Itls::default();
        while seq.next_element_seed(ItlRow(&mut t.values))?.is_some() {
            t.ends.push(t.values.len());
        }
        Ok(t)
    }
}

/// One request's ITL array: its numbers are appended to the shared vector.
struct ItlRow<'v>(&'v mut Vec<f64>);

impl<'de> DeserializeSeed<'de> for ItlRow<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for ItlRow<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(Num(x)) = seq.next_element()? {
            // JSON numbers are never NaN: NaN marks a non-number, which `as_f64` would skip.
            if !x.is_nan() {
                self.0.push(x);
            }
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<(), A::Error> {
        NumberOrIgnored.visit_map(m).map(|_| ())
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
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        <Ignored as serde::Deserialize>::deserialize(d).map(|_| ())
    }
}

struct Errors(Vec<bool>);

impl<'de> FromSeq<'de> for Errors {
    fn from_seq<A: SeqAccess<'de>>(mut seq: A) -> Result<Self, A::Error> {
        let mut v = Vec::new();
        while let Some(Failed(f)) = seq.next_element()? {
            v.push(f);
        }
        Ok(Errors(v))
    }
}

/// An `errors` element: true for a non-empty string.
struct Failed(bool);

impl<'de> serde::Deserialize<'de> for Failed {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_str<E>(self, v: &str) -> Result<bool, E> {
                Ok(!v.is_empty())
            }
            fn visit_bool<E>(self, _: bool) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_i64<E>(self, _: i64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_u64<E>(self, _: u64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_f64<E>(self, _: f64) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_unit<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_none<E>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<bool, D::Error> {
                <Ignored as serde::Deserialize>::deserialize(d).map(|_| false)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
                NumberOrIgnored.visit_seq(seq).map(|_| false)
            }
            fn visit_map<A: MapAccess<'de>>(self, m: A) -> Result<bool, A::Error> {
                NumberOrIgnored.visit_map(m).map(|_| false)
            }
        }
        d.deserialize_any(V).map(Failed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one-pass reader gives what a `Value` parse converted by `Obj::from_map` gives.
    #[test]
    fn typed_reader_matches_value_parse() {
        let inputs = [
            r#"{"completed": 3, "ttfts": [0.1, 2, -3, "x", null, [1], {"a": 1}], "errors": ["", "boom", 5, null, [], {}, "e"]}"#,
            r#"{"itls": [[0.01, 0.02], 7, [], [1, "a", [2], {"b": 3}, 4e-3], "s", null, {"k": [1]}], "ttfts": 5}"#,
            r#"{"ttfts": [1, 2], "ttfts": "again", "itls": "no", "itls": [[1]], "errors": {"a": 1}}"#,
            r#"{"input_lens": [1, 2, 3], "generated_texts": ["a\"b", "\u00e9"], "x": {"nested": [1, [2, {"y": null}]]}}"#,
            r#"{"a": true, "b": false, "c": null, "d": -12, "e": 18446744073709551615, "f": 1.5e300, "g": "t"}"#,
            r#"{}"#,
        ];
        for s in inputs {
            let typed: Obj = serde_json::from_str(s).unwrap();
            let Value::Object(m) = serde_json::from_str::<Value>(s).unwrap() else {
                panic!("not an object: {s}")
            };
            let via_value = Obj::from_map(m);
            // NaN != NaN: compare the bit patterns of the typed arrays.
            let bits = |o: &Obj| {
                o.ttfts
                    .as_ref()
                    .map(|t| t.iter().map(|x| x.to_bits()).collect::<Vec<_>>())
            };
            assert_eq!(bits(&typed), bits(&via_value), "{s}");
            assert_eq!(typed.map, via_value.map, "{s}");
            assert_eq!(typed.itls, via_value.itls, "{s}");
            assert_eq!(typed.errors, via_value.errors, "{s}");
        }
        // Invalid input is rejected by both, including a number out of range in a skipped array.
        for s in [
            r#"{"input_lens": [1e999]}"#,
            r#"{"ttfts": [1,]}"#,
            r#"{"a": 1"#,
            r#"[1, 2]"#,
        ] {
            assert!(serde_json::from_str::<Obj>(s).is_err(), "{s}");
        }
        assert!(read_doc(r#"{"input_lens": [1e999]}"#).is_err());
        assert!(matches!(read_doc("[1, 2]"), Ok(Doc::Other(Value::Array(_)))));
    }
}
