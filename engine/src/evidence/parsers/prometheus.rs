//! Prometheus text exposition format (0.0.4) parser, also tolerant of OpenMetrics additions.
//!
//! Hand-written on purpose: the crates available (`prometheus-parse` and similar) are line-regex based,
//! pull in regex/chrono/once_cell, do not report line/column errors and do not tolerate OpenMetrics
//! exemplars; the format is small enough that ~200 lines with zero dependencies are simpler to keep
//! panic-free and fast (1 MB in a few ms). Handled: `# HELP` / `# TYPE` (and other comments), metric
//! names with `:`, label values with `\\`, `\"`, `\n` escapes, a trailing comma in the label set,
//! `NaN` / `±Inf` values, optional timestamps, exemplars (` # {…} v [ts]`, ignored), `# EOF`, `\r\n`.
//! A malformed sample line is skipped with a warning (partial success); input with no sample at all
//! and a malformed line is an error naming that line and column.

use super::ParseError;
use std::borrow::Cow;
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
pub struct Sample<'a> {
    pub name: &'a str,
    /// Label pairs in input order (values unescaped; borrowed when they had no escapes).
    pub labels: Vec<(&'a str, Cow<'a, str>)>,
    pub value: f64,
    pub line: usize,
}

impl Sample<'_> {
    pub fn label(&self, key: &str) -> Option<&str> {
        self.labels.iter().find(|(k, _)| *k == key).map(|(_, v)| v.as_ref())
    }
}

#[derive(Debug, Clone, Default)]
pub struct Exposition<'a> {
    pub samples: Vec<Sample<'a>>,
    /// `# TYPE` declarations: family name → type.
    pub types: HashMap<&'a str, &'a str>,
    pub warnings: Vec<String>,
}

const MAX_WARN: usize = 50;

pub fn parse(s: &str) -> Result<Exposition<'_>, ParseError> {
    let mut out = Exposition::default();
    let mut first_err: Option<ParseError> = None;
    let mut bad = 0usize;
    for (i, raw) in s.split('\n').enumerate() {
        let ln = i + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        let t = line.trim_start();
        if t.is_empty() {
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            let c = c.trim_start();
            if let Some(rest) = c.strip_prefix("TYPE ") {
                let mut it = rest.split_whitespace();
                if let (Some(n), Some(ty)) = (it.next(), it.next()) {
                    out.types.insert(n, ty);
                }
            }
            continue;
        }
        match parse_sample(line, ln) {
            Ok(smp) => out.samples.push(smp),
            Err(e) => {
                bad += 1;
                if out.warnings.len() < MAX_WARN {
                    out.warnings.push(format!("{e} (line skipped)"));
                }
                first_err.get_or_insert(e);
            }
        }
    }
    if bad > MAX_WARN {
        out.warnings.push(format!("{} more malformed lines", bad - MAX_WARN));
    }
    if out.samples.is_empty() {
        return Err(first_err.unwrap_or_else(|| ParseError::at(1, "no metric samples found")));
    }
    Ok(out)
}

struct Cur<'a> {
    b: &'a [u8],
    i: usize,
    line: usize,
    s: &'a str,
}

impl<'a> Cur<'a> {
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }
    fn col(&self) -> usize {
        self.s
            .get(..self.i.min(self.s.len()))
            .map(|p| p.chars().count())
            .unwrap_or(self.i)
            + 1
    }
    fn err(&self, msg: impl Into<String>) -> ParseError {
        ParseError::at_col(self.line, self.col(), msg)
    }
    fn skip_ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.i += 1;
        }
    }
    fn ident(&mut self, colon: bool) -> Option<&'a str> {
        let start = self.i;
        let rest = self.b.get(start..).unwrap_or_default();
        let extra = if colon { COLON } else { 0 };
        if rest.first().is_none_or(|&c| CLASS[c as usize] & (ALPHA | extra) == 0) {
            return None;
        }
        let len = rest
            .iter()
            .position(|&c| CLASS[c as usize] & (ALPHA | DIGIT | extra) == 0)
            .unwrap_or(rest.len());
        self.i = start + len;
        self.s.get(start..self.i)
    }
}

/// Byte classes for names: `[A-Za-z_]`, digits, `:`.
const ALPHA: u8 = 1;
const DIGIT: u8 = 2;
const COLON: u8 = 4;
const CLASS: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        t[c] = if b.is_ascii_alphabetic() || b == b'_' {
            ALPHA
        } else if b.is_ascii_digit() {
            DIGIT
        } else if b == b':' {
            COLON
        } else {
            0
        };
        c += 1;
    }
    t
};

/// A hand-written scanner of one exposition line: name, labels, value, timestamp, in order.
fn parse_sample(line: &str, ln: usize) -> Result<Sample<'_>, ParseError> {
    let mut c = Cur {
        b: line.as_bytes(),
        i: 0,
        line: ln,
        s: line,
    };
    c.skip_ws();
    let name = c.ident(true).ok_or_else(|| c.err("expected a metric name"))?;
    let mut labels = Vec::new();
    c.skip_ws();
    if c.peek() == Some(b'{') {
        // vLLM series have 1–4 labels: one allocation, no regrowth.
        labels = Vec::with_capacity(4);
        c.i += 1;
        loop {
            c.skip_ws();
            match c.peek() {
                Some(b'}') => {
                    c.i += 1;
                    break;
                }
                None => return Err(c.err("label set not closed (line cut short?)")),
                _ => {}
            }
            let k = c.ident(false).ok_or_else(|| c.err("expected a label name"))?;
            c.skip_ws();
            if c.peek() != Some(b'=') {
                return Err(c.err("expected `=` after label name"));
            }
            c.i += 1;
            c.skip_ws();
            if c.peek() != Some(b'"') {
                return Err(c.err("expected `\"` to start the label value"));
            }
            c.i += 1;
            let v = label_value(&mut c)?;
            labels.push((k, v));
            c.skip_ws();
            match c.peek() {
                Some(b',') => c.i += 1,
                Some(b'}') => {}
                None => return Err(c.err("label set not closed (line cut short?)")),
                _ => return Err(c.err("expected `,` or `}` in the label set")),
            }
        }
    }
    c.skip_ws();
    let vstart = c.i;
    while matches!(c.peek(), Some(b) if b != b' ' && b != b'\t') {
        c.i += 1;
    }
    let vtxt = line.get(vstart..c.i).unwrap_or_default();
    if vtxt.is_empty() {
        return Err(c.err("missing sample value (line cut short?)"));
    }
    let value = parse_value(vtxt)
        .ok_or_else(|| ParseError::at_col(ln, vstart + 1, format!("invalid sample value {vtxt:?}")))?;
    skip_timestamp(&mut c)?;
    Ok(Sample {
        name,
        labels,
        value,
        line: ln,
    })
}

/// A label's value, after its opening quote and up to and past its closing one; borrowed from the
/// line unless it has an escape.
fn label_value<'a>(c: &mut Cur<'a>) -> Result<Cow<'a, str>, ParseError> {
    let line = c.s;
    let vstart = c.i;
    // Built only when the value has an escape; otherwise the value is borrowed from the line.
    let mut owned: Option<String> = None;
    let mut run = c.i;
    loop {
        match c.peek() {
            None => return Err(c.err("label value not closed (line cut short?)")),
            Some(b'"') => {
                if let Some(v) = owned.as_mut() {
                    v.push_str(line.get(run..c.i).unwrap_or_default());
                }
                c.i += 1;
                break;
            }
            Some(b'\\') => {
                let v = owned.get_or_insert_with(String::new);
                v.push_str(line.get(run..c.i).unwrap_or_default());
                c.i += 1;
                match c.peek() {
                    Some(b'n') => v.push('\n'),
                    Some(b'\\') => v.push('\\'),
                    Some(b'"') => v.push('"'),
                    Some(_) => {
                        // unknown escape: keep it verbatim
                        v.push('\\');
                        continue_run(c, &mut run);
                        continue;
                    }
                    None => return Err(c.err("label value not closed (line cut short?)")),
                }
                c.i += 1;
                run = c.i;
            }
            Some(_) => {
                // jump to the next quote or backslash
                let rest = c.b.get(c.i..).unwrap_or_default();
                c.i += rest.iter().position(|&b| b == b'"' || b == b'\\').unwrap_or(rest.len());
            }
        }
    }
    Ok(match owned {
        Some(v) => Cow::Owned(v),
        None => Cow::Borrowed(line.get(vstart..c.i.saturating_sub(1)).unwrap_or_default()),
    })
}

/// The optional timestamp, then the optional exemplar (` # {…} value [ts]`): both ignored, the
/// timestamp checked.
fn skip_timestamp(c: &mut Cur<'_>) -> Result<(), ParseError> {
    let line = c.s;
    c.skip_ws();
    if let Some(b) = c.peek() {
        if b != b'#' {
            let ts_start = c.i;
            while matches!(c.peek(), Some(b) if b != b' ' && b != b'\t') {
                c.i += 1;
            }
            let ts = line.get(ts_start..c.i).unwrap_or_default();
            if parse_value(ts).is_none() {
                return Err(ParseError::at_col(
                    c.line,
                    ts_start + 1,
                    format!("invalid timestamp {ts:?}"),
                ));
            }
            c.skip_ws();
            if !matches!(c.peek(), None | Some(b'#')) {
                return Err(c.err("unexpected text after the sample"));
            }
        }
    }
    Ok(())
}

fn continue_run(c: &mut Cur<'_>, run: &mut usize) {
    // `\x` unknown escape: the backslash was pushed; resume the raw run at `x`.
    *run = c.i;
}

pub fn parse_value(v: &str) -> Option<f64> {
    match v {
        "NaN" | "nan" => Some(f64::NAN),
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        _ => {
            // Rust accepts "infinity"/"nan" spellings; Prometheus values are plain floats otherwise.
            if v.bytes().any(|b| b.is_ascii_alphabetic() && b != b'e' && b != b'E') {
                return None;
            }
            v.parse::<f64>().ok()
        }
    }
}
