//! Validation shared by every domain model: one message per field, and a reader that takes the same
//! fields from a JSON object (the API) or an HTML form and collects every bad field at once. Pure,
//! with no web or database dependency, so the pure engines and models can use it.

use std::collections::HashMap;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{Map, Value};

/// An enumeration stored as text: one place lists its values and their spelling. Used by the
/// domain models (`text_enum!(Name { Variant => "text", … })`).
// `$text` is a `tt`, not a `literal`: a `literal` fragment reaches the derives wrapped in an
// invisible group, which serde reads but utoipa's `rename` does not (the document then listed
// the variants' Rust names instead of their text).
#[macro_export]
macro_rules! text_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:tt),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
        pub enum $name { $(#[serde(rename = $text)] $variant),+ }
        impl $name {
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];
            pub fn as_str(&self) -> &'static str { match self { $(Self::$variant => $text),+ } }
        }
        impl std::str::FromStr for $name {
            type Err = ();
            fn from_str(s: &str) -> Result<Self, ()> {
                Self::ALL.iter().copied().find(|v| v.as_str() == s).ok_or(())
            }
        }
        impl $crate::validation::TextEnum for $name {
            fn variants() -> &'static [Self] { Self::ALL }
            fn text(self) -> &'static str { self.as_str() }
        }
    };
}

/// An enumeration kept as text, each value by one spelling that `FromStr` reads back: every
/// `text_enum!` type and the engine's own (workload kind, precision, verdict, ledger category). The
/// server stores and reads any of them through one wrapper (`db::StoredText`); this crate knows no
/// database, so the trait is all it says.
pub trait TextEnum: std::str::FromStr + Copy + 'static {
    /// Every value, in the order the type lists them.
    fn variants() -> &'static [Self];
    /// The value's spelling (its serde name too).
    fn text(self) -> &'static str;
}

/// The longest value a choice field (an enumeration) is read as.
const CHOICE_MAX_LEN: usize = 200;

/// What a text field holding NUL is told. PostgreSQL text cannot hold U+0000 and no person types
/// one, so every JSON body, form and query string refuses it at its field (`web::extract`). Tool
/// output is another matter: evidence keeps its raw bytes and replaces NUL in what it reads.
pub const NUL_MESSAGE: &str = "must not contain a NUL character (U+0000)";

/// One invalid field: its name as the API and the form name it, and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
#[schema(as = FieldProblem)]
pub struct FieldError {
    /// field name
    pub field: String,
    /// what is wrong with it
    pub message: String,
}

impl FieldError {
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }
}

/// Raw input before validation.
pub enum Input<'a> {
    Json(&'a Map<String, Value>),
    Form(&'a HashMap<String, String>),
}

impl Input<'_> {
    /// One field's raw value; `outer.inner` reads a nested JSON object's field.
    pub fn raw(&self, field: &str) -> Raw<'_> {
        match self {
            Input::Json(map) => match field.split_once('.') {
                Some((outer, inner)) => match map.get(outer) {
                    Some(Value::Object(o)) => Raw::from_json(o.get(inner)),
                    _ => Raw::Absent,
                },
                None => Raw::from_json(map.get(field)),
            },
            Input::Form(map) => match map.get(field).map(|s| s.trim()) {
                None | Some("") => Raw::Absent,
                Some(s) => Raw::FormText(s),
            },
        }
    }
}

/// One field's raw value.
pub enum Raw<'a> {
    Absent,
    Json(&'a Value),
    FormText(&'a str),
}

impl<'a> Raw<'a> {
    pub fn from_json(v: Option<&'a Value>) -> Self {
        match v {
            None | Some(Value::Null) => Raw::Absent,
            Some(Value::String(s)) if s.trim().is_empty() => Raw::Absent,
            Some(v) => Raw::Json(v),
        }
    }

    pub fn text(&self) -> Result<Option<String>, String> {
        match self {
            Raw::Absent => Ok(None),
            Raw::FormText(s) => Ok(Some((*s).to_owned())),
            Raw::Json(Value::String(s)) => Ok(Some(s.trim().to_owned())),
            Raw::Json(_) => Err("must be a string".into()),
        }
    }

    pub fn number(&self) -> Result<Option<f64>, String> {
        let n = match self {
            Raw::Absent => return Ok(None),
            Raw::FormText(s) => s.parse::<f64>().map_err(|_| "must be a number".to_owned())?,
            Raw::Json(Value::Number(n)) => n.as_f64().ok_or("must be a number")?,
            Raw::Json(_) => return Err("must be a number".into()),
        };
        if n.is_finite() {
            Ok(Some(n))
        } else {
            Err("must be a finite number".into())
        }
    }

    pub fn integer(&self) -> Result<Option<i64>, String> {
        match self {
            Raw::Absent => Ok(None),
            Raw::FormText(s) => s.parse::<i64>().map(Some).map_err(|_| "must be a whole number".into()),
            Raw::Json(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| "must be a whole number".into()),
            Raw::Json(_) => Err("must be a whole number".into()),
        }
    }

    pub fn boolean(&self) -> Result<Option<bool>, String> {
        match self {
            Raw::Absent => Ok(None),
            Raw::FormText(s) => match s.to_ascii_lowercase().as_str() {
                "on" | "true" | "yes" | "1" => Ok(Some(true)),
                "off" | "false" | "no" | "0" => Ok(Some(false)),
                _ => Err("must be true or false".into()),
            },
            Raw::Json(Value::Bool(b)) => Ok(Some(*b)),
            Raw::Json(_) => Err("must be true or false".into()),
        }
    }

    pub fn list(&self) -> Result<Option<Vec<String>>, String> {
        let items: Vec<String> = match self {
            Raw::Absent => return Ok(None),
            Raw::FormText(s) => s.split([',', '\n']).map(|p| p.trim().to_owned()).collect(),
            Raw::Json(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => Ok(s.trim().to_owned()),
                    _ => Err("must be a list of strings".to_owned()),
                })
                .collect::<Result<_, _>>()?,
            Raw::Json(_) => return Err("must be a list of strings".into()),
        };
        Ok(Some(items.into_iter().filter(|s| !s.is_empty()).collect()))
    }
}

/// Reads fields and collects every per-field error while it goes, so a form or an API answer can
/// report all bad fields at once.
pub struct FieldReader<'a> {
    pub input: &'a Input<'a>,
    pub errors: Vec<FieldError>,
}

impl<'a> FieldReader<'a> {
    pub fn new(input: &'a Input<'a>) -> Self {
        Self {
            input,
            errors: Vec::new(),
        }
    }

    pub fn fail(&mut self, field: &str, message: impl Into<String>) {
        self.errors.push(FieldError::new(field, message));
    }

    pub fn read<T>(&mut self, field: &str, get: impl FnOnce(&Raw<'a>) -> Result<Option<T>, String>) -> Option<T> {
        let input: &'a Input<'a> = self.input;
        match get(&input.raw(field)) {
            Ok(v) => v,
            Err(message) => {
                self.fail(field, message);
                None
            }
        }
    }

    /// A one-line field (a name, an id, a choice): no control character at all, line breaks
    /// included, since such text is written into YAML comments, headers and copyable lines.
    pub fn text(&mut self, field: &str, max_len: usize) -> Option<String> {
        self.checked_text(field, max_len, |c| c.is_control())
    }

    /// A field of several lines (notes, plans, a manifest): line breaks and tabs, no other
    /// control characters.
    pub fn multiline_text(&mut self, field: &str, max_len: usize) -> Option<String> {
        self.checked_text(field, max_len, |c| {
            c.is_control() && c != '\n' && c != '\r' && c != '\t'
        })
    }

    fn checked_text(&mut self, field: &str, max_len: usize, refused: impl Fn(char) -> bool) -> Option<String> {
        let value = self.read(field, Raw::text)?;
        if value.chars().count() > max_len {
            self.fail(field, format!("must be at most {max_len} characters"));
            return None;
        }
        if value.chars().any(&refused) {
            let message = if refused('\n') && value.contains(['\n', '\r']) {
                "must be one line (no line breaks or other control characters)"
            } else {
                "must not contain control characters"
            };
            self.fail(field, message);
            return None;
        }
        Some(value)
    }

    /// A model id as Hugging Face and serving engines write it: letters, digits and `-_./:@+`.
    /// It goes into copyable command lines, so nothing a shell reads specially is let in.
    pub fn model_id(&mut self, field: &str, max_len: usize) -> Option<String> {
        let value = self.text(field, max_len)?;
        if value.is_empty() || !value.chars().all(is_model_id_char) {
            self.fail(
                field,
                "must be a model id: letters, digits and - _ . / : @ + only (e.g. meta-llama/Llama-3.1-70B-Instruct)",
            );
            return None;
        }
        // A leading dash would read as an option (`vllm serve --trust-remote-code`) on the copyable
        // command lines, and `collect --plan` refuses such a model.
        if value.starts_with('-') {
            self.fail(
                field,
                "must not start with a dash: a command line would read it as an option",
            );
            return None;
        }
        Some(value)
    }

    pub fn required_text(&mut self, field: &str, max_len: usize) -> Option<String> {
        let present = !matches!(self.input.raw(field), Raw::Absent);
        let value = self.text(field, max_len);
        if !present {
            self.fail(field, "is required");
        }
        value
    }

    pub fn choice<T: std::str::FromStr + Copy>(&mut self, field: &str, allowed: &[&str], required: bool) -> Option<T> {
        let absent = matches!(self.input.raw(field), Raw::Absent);
        let raw = self.text(field, CHOICE_MAX_LEN);
        match raw {
            Some(s) => match s.parse::<T>() {
                Ok(v) => Some(v),
                Err(_) => {
                    self.fail(field, format!("must be one of: {}", allowed.join(", ")));
                    None
                }
            },
            None => {
                if required && absent {
                    self.fail(field, "is required");
                }
                None
            }
        }
    }

    pub fn positive_number(&mut self, field: &str, max: f64) -> Option<f64> {
        let v = self.read(field, Raw::number)?;
        if v <= 0.0 {
            self.fail(field, "must be greater than 0");
            None
        } else if v > max {
            self.fail(field, format!("must be at most {max}"));
            None
        } else {
            Some(v)
        }
    }

    pub fn positive_integer(&mut self, field: &str, max: i64) -> Option<i64> {
        let v = self.read(field, Raw::integer)?;
        if v <= 0 {
            self.fail(field, "must be greater than 0");
            None
        } else if v > max {
            self.fail(field, format!("must be at most {max}"));
            None
        } else {
            Some(v)
        }
    }

    /// A whole number from 0 to `max` (layer counts, where 0 switches a config's window off).
    pub fn count(&mut self, field: &str, max: i64) -> Option<u32> {
        let v = self.read(field, Raw::integer)?;
        if !(0..=max).contains(&v) {
            self.fail(field, format!("must be a whole number from 0 to {max}"));
            return None;
        }
        u32::try_from(v).ok()
    }

    pub fn positive_u32(&mut self, field: &str, max: i64) -> Option<u32> {
        self.positive_integer(field, max).and_then(|v| u32::try_from(v).ok())
    }

    pub fn positive_u64(&mut self, field: &str, max: i64) -> Option<u64> {
        self.positive_integer(field, max).and_then(|v| u64::try_from(v).ok())
    }

    /// A decimal string (money, a rate): not negative, at most `max`, at most 6 decimal places.
    /// Never a float; a currency sign or a thousands separator is refused with a message that says so.
    pub fn money(&mut self, field: &str, max: i64) -> Option<Decimal> {
        let text = match self.input.raw(field) {
            Raw::Absent => return None,
            Raw::Json(Value::String(s)) => s.trim().to_owned(),
            Raw::FormText(s) => s.trim().to_owned(),
            Raw::Json(_) => {
                self.fail(field, "must be a decimal string such as \"0.25\"");
                return None;
            }
        };
        match text.parse::<Decimal>() {
            Ok(d) if d.is_sign_negative() => {
                self.fail(field, "must not be negative");
                None
            }
            Ok(d) if d > Decimal::from(max) || d.scale() > 6 => {
                self.fail(field, format!("must be at most {max} with at most 6 decimal places"));
                None
            }
            Ok(d) => Some(d.normalize()),
            Err(_) => {
                self.fail(
                    field,
                    "must be a decimal number such as 0.25 (no currency sign, no thousands separator)",
                );
                None
            }
        }
    }
}

/// The characters of a model id (Hugging Face ids, served model names).
pub fn is_model_id_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || "-_./:@+".contains(c)
}
