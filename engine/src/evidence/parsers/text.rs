//! Shared text helpers: UTF-8 decoding with a line/column error, ANSI stripping, lenient numbers,
//! JSON with preamble tolerance.

use super::ParseError;
use std::borrow::Cow;

/// Decode bytes as UTF-8 (a leading BOM is dropped). Invalid UTF-8 is an error naming the line and
/// column (1-based, column in characters) of the first bad byte.
pub(crate) fn decode(bytes: &[u8]) -> Result<Cow<'_, str>, ParseError> {
    if let Some(text) = utf16(bytes) {
        return text.map(Cow::Owned);
    }
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    match std::str::from_utf8(bytes) {
        Ok(s) => Ok(Cow::Borrowed(s)),
        Err(e) => {
            let good = bytes.get(..e.valid_up_to()).unwrap_or_default();
            // The prefix is valid UTF-8 by construction.
            let prefix = std::str::from_utf8(good).unwrap_or_default();
            let line = prefix.matches('\n').count() + 1;
            let col = prefix.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0) + 1;
            Err(ParseError::at_col(
                line,
                col,
                format!("input is not valid UTF-8 (byte offset {})", e.valid_up_to()),
            ))
        }
    }
}

/// Text saved as UTF-16 with its byte-order mark, as Windows PowerShell 5.1's `>` writes it
/// (`nvidia-smi -L > gpus.txt`); `None` for any other input.
fn utf16(bytes: &[u8]) -> Option<Result<String, ParseError>> {
    let little = match bytes.get(..2)? {
        [0xFF, 0xFE] => true,
        [0xFE, 0xFF] => false,
        _ => return None,
    };
    let units = bytes[2..].chunks(2).map(|c| match (c, little) {
        ([a, b], true) => u16::from_le_bytes([*a, *b]),
        ([a, b], false) => u16::from_be_bytes([*a, *b]),
        _ => 0xDC00, // an odd byte at the end: a lone surrogate, refused below
    });
    let mut out = String::with_capacity(bytes.len() / 2);
    for (i, c) in char::decode_utf16(units).enumerate() {
        match c {
            Ok(c) => out.push(c),
            Err(_) => {
                let line = out.matches('\n').count() + 1;
                return Some(Err(ParseError::at(
                    line,
                    format!("input is not valid UTF-16 (code unit {})", i + 1),
                )));
            }
        }
    }
    Some(Ok(out))
}

/// A substring to look for, its searcher set up on first use and kept: `str::find` sets one up on
/// every call, and a parser asking twenty questions of each line of a megabyte spent most of its
/// time doing that. Declared as a `static` beside the parser that asks.
pub(crate) struct Needle {
    text: &'static str,
    finder: std::sync::OnceLock<memchr::memmem::Finder<'static>>,
}

impl Needle {
    pub(crate) const fn new(text: &'static str) -> Self {
        Needle {
            text,
            finder: std::sync::OnceLock::new(),
        }
    }

    /// Where the needle first stands in `hay`.
    pub(crate) fn find(&self, hay: &str) -> Option<usize> {
        self.finder
            .get_or_init(|| memchr::memmem::Finder::new(self.text))
            .find(hay.as_bytes())
    }

    pub(crate) fn is_in(&self, hay: &str) -> bool {
        self.find(hay).is_some()
    }

    /// What follows the needle's first place in `hay`.
    pub(crate) fn after<'a>(&self, hay: &'a str) -> Option<&'a str> {
        self.find(hay).and_then(|i| hay.get(i + self.text.len()..))
    }
}

/// Remove ANSI escape sequences (`ESC [ … letter`), e.g. underline codes from a TTY capture.
pub(crate) fn strip_ansi(s: &str) -> Cow<'_, str> {
    if !s.contains('\u{1b}') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for c2 in chars.by_ref() {
                    if c2.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    Cow::Owned(out)
}

/// [`strip_ansi`], then the SGR codes whose ESC byte a paste into a web page dropped (`[4m`,
/// `[0m`, `[1;32m`): recent drivers underline `nvidia-smi topo -m`'s header even off a terminal,
/// and issue reports carry it so.
pub(crate) fn strip_ansi_and_lost_escapes(s: &str) -> Cow<'_, str> {
    let s = strip_ansi(s);
    if !s.contains('[') {
        return s;
    }
    let mut out = String::with_capacity(s.len());
    let mut rest: &str = &s;
    while let Some(at) = rest.find('[') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let code = after.bytes().take_while(|b| b.is_ascii_digit() || *b == b';').count();
        if code > 0 && after.as_bytes().get(code) == Some(&b'm') {
            rest = &after[code + 1..];
        } else {
            out.push('[');
            rest = after;
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Whitespace-separated tokens with their 1-based character column.
pub(crate) fn tokens_with_col(line: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<(usize, usize)> = None; // (byte, col)
    let mut col = 0usize;
    for (i, c) in line.char_indices() {
        col += 1;
        if c.is_whitespace() {
            if let Some((b, cc)) = start.take() {
                if let Some(t) = line.get(b..i) {
                    out.push((cc, t));
                }
            }
        } else if start.is_none() {
            start = Some((i, col));
        }
    }
    if let Some((b, cc)) = start {
        if let Some(t) = line.get(b..) {
            out.push((cc, t));
        }
    }
    out
}

/// A value without a bracketed note after it: `610.57.04 [Deprecated; will be removed in CUDA 14.0]` →
/// `610.57.04`.
pub(crate) fn without_note(v: &str) -> &str {
    v.split(" [").next().unwrap_or(v).trim()
}

/// Parse a number that may carry thousands separators, a unit suffix or trailing punctuation:
/// `"143771 MiB"`, `"1,234"`, `"27.34x"`. Returns None for `N/A`-like values.
pub(crate) fn lenient_number(s: &str) -> Option<f64> {
    let s = s.trim();
    let end = s
        .char_indices()
        .find(|(i, c)| {
            !(c.is_ascii_digit()
                || *c == '.'
                || *c == ','
                || ((*c == '-' || *c == '+') && *i == 0)
                || *c == 'e'
                || *c == 'E')
        })
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let num: String = s.get(..end)?.chars().filter(|c| *c != ',').collect();
    let num = num.trim_end_matches(['e', 'E', '.']);
    if num.is_empty() || num == "-" || num == "+" {
        return None;
    }
    num.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// Parse JSON, tolerating text before the first `{`/`[` (wrapper output such as
/// `Successfully ran diagnostic for group.`). Errors carry the line/column in the ORIGINAL input.
pub(crate) fn json_value(s: &str) -> Result<(serde_json::Value, Option<String>), ParseError> {
    json_value_with(s, Cow::Borrowed).map(|(v, pre, _)| (v, pre))
}

/// [`json_value`] of a harness's document (`metrics`, `probe`, `checkpoint-restore`) as Python's
/// `json.dumps` writes it: in the JSON (never the text before it), `NaN` and `±Infinity` are no
/// figure at all, so each becomes `null`, which the parsers leave out with a warning. The third
/// value says whether any was found.
pub(crate) fn harness_json_value(s: &str) -> Result<(serde_json::Value, Option<String>, bool), ParseError> {
    json_value_with(s, |body| python_constants(body, "null"))
}

/// The warning for a harness document whose `NaN`/`Infinity` were left out.
pub(crate) const NOT_NUMBERS: &str = "NaN and Infinity are not numbers: those values were left out";

/// Where the JSON of `s` starts: its first `{` or `[`, or, when that only opened a log line
/// (`[node005:291005] PMIX ERROR: …`, `[INFO] …`), the first later line that opens with one.
pub(crate) fn json_start(s: &str) -> Option<usize> {
    let first = s.find(['{', '['])?;
    Some(json_after_log_lines(s, first).unwrap_or(first))
}

fn json_value_with<'a>(
    s: &'a str,
    rewrite: impl Fn(&'a str) -> Cow<'a, str>,
) -> Result<(serde_json::Value, Option<String>, bool), ParseError> {
    let start = json_start(s).ok_or_else(|| ParseError::at(1, "no JSON object found (expected `{`)"))?;
    let preamble = s.get(..start).unwrap_or_default();
    let body = rewrite(s.get(start..).unwrap_or_default());
    let rewritten = matches!(body, Cow::Owned(_));
    let body = &*body;
    let line_off = preamble.matches('\n').count();
    let col_off = preamble.rsplit('\n').next().map(|l| l.chars().count()).unwrap_or(0);
    // Walked first without being built: an object wider than an item's key limit is refused
    // before it becomes a map.
    super::limits::refuse_wide_json(body).map_err(|e| ParseError {
        line: e.line.map(|l| l + line_off),
        ..e
    })?;
    match serde_json::from_str::<serde_json::Value>(body) {
        Ok(v) => {
            let pre = preamble.trim();
            Ok((v, (!pre.is_empty()).then(|| pre.to_string()), rewritten))
        }
        Err(e) => {
            let line = e.line() + line_off;
            let col = if e.line() == 1 {
                e.column() + col_off
            } else {
                e.column()
            };
            let msg = e.to_string();
            // serde_json appends " at line L column C"; drop it, we report our own.
            let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
            let msg = if e.is_eof() {
                format!("JSON ends early (truncated?): {msg}")
            } else {
                format!("invalid JSON: {msg}")
            };
            Err(ParseError::at_col(line.max(1), col.max(1), msg))
        }
    }
}

/// Where the JSON starts after log lines that open with a bracket (`[node005:291005] PMIX ERROR:
/// …`, `[INFO] …`), when the first bracket of `s` (at `first`) opened such a line: the first later
/// line that opens with `{` or `[` and is not one.
pub(crate) fn json_after_log_lines(s: &str, first: usize) -> Option<usize> {
    const LINES_PASSED: usize = 1000;
    let line_start = s.get(..first)?.rfind('\n').map_or(0, |n| n + 1);
    if !s.get(line_start..first)?.trim().is_empty() || !is_log_line(s.get(first..)?) {
        return None;
    }
    let mut at = line_start;
    for _ in 0..LINES_PASSED {
        at += s.get(at..)?.find('\n')? + 1;
        let line = s.get(at..)?.trim_start_matches([' ', '\t']);
        if line.starts_with(['{', '[']) && !is_log_line(line) {
            return Some(s.len() - line.len());
        }
    }
    None
}

/// A log line that opens with a bracketed tag: `[host:pid] …`, `[INFO] …`, Python logging's
/// `[2024-09-11 08:00:00,123] INFO …`, PyTorch's `[W socket.cpp:464] [c10d] …`, `[rank0]: …` — a
/// `]` on the line before any `"`, `{` or `[`, then a word, another tag or a colon. No JSON line
/// reads so (an array is closed by its last `]`, or holds a string or an object).
fn is_log_line(line: &str) -> bool {
    let line = line.split('\n').next().unwrap_or_default();
    let Some(rest) = line.strip_prefix('[') else {
        return false;
    };
    let Some(close) = rest.find(']') else {
        return false;
    };
    let tag = &rest[..close];
    !tag.trim().is_empty()
        && !tag.contains(['"', '{', '['])
        && rest[close + 1..]
            .trim_start()
            .starts_with(|c: char| c.is_alphabetic() || c == '[' || c == ':')
}

/// Number of the last line (1-based), used for "ends early" errors.
pub(crate) fn last_line(s: &str) -> usize {
    s.lines().count().max(1)
}

/// JSON as Python's `json.dumps` writes it by default: the bare constants `Infinity`, `-Infinity`
/// and `NaN` (not JSON, RFC 8259) outside strings become `"inf"` (the word `vllm bench serve` writes
/// for an unlimited request rate, which no number reader takes) and `null`. Text without them is
/// returned as is; strings are never touched.
pub(crate) fn python_json(s: &str) -> Cow<'_, str> {
    python_constants(s, "\"inf\"")
}

fn python_constants<'a>(s: &'a str, infinity: &str) -> Cow<'a, str> {
    if !s.contains("Infinity") && !s.contains("NaN") {
        return Cow::Borrowed(s);
    }
    let bytes = s.as_bytes();
    let mut out = String::with_capacity(s.len() + 16);
    let (mut in_string, mut escaped, mut copied, mut i) = (false, false, 0, 0);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        // Inside a character of more than one byte, or a word, no constant starts.
        let in_word = i > 0 && (bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
        let Some(rest) = s.get(i..).filter(|_| !in_word) else {
            i += 1;
            continue;
        };
        let constant = [("-Infinity", "null"), ("Infinity", infinity), ("NaN", "null")]
            .into_iter()
            .find(|(word, _)| {
                rest.starts_with(word)
                    && !rest[word.len()..]
                        .chars()
                        .next()
                        .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            });
        match constant {
            Some((word, with)) => {
                out.push_str(&s[copied..i]);
                out.push_str(with);
                i += word.len();
                copied = i;
            }
            None => i += 1,
        }
    }
    if copied == 0 {
        return Cow::Borrowed(s);
    }
    out.push_str(&s[copied..]);
    Cow::Owned(out)
}

#[cfg(test)]
mod python_json_tests {
    use super::python_json;

    #[test]
    fn pythons_constants_become_json_and_strings_stay() {
        assert_eq!(
            python_json(r#"{"request_rate": Infinity, "x": NaN, "y": -Infinity, "s": "NaN Infinity"}"#),
            r#"{"request_rate": "inf", "x": null, "y": null, "s": "NaN Infinity"}"#
        );
        assert_eq!(python_json(r#"[NaN,NaN]"#), "[null,null]");
        assert!(matches!(python_json(r#"{"a": 1}"#), std::borrow::Cow::Borrowed(_)));
        // A word that only starts or ends like a constant is not one, and a character of several
        // bytes before one is passed over whole.
        assert_eq!(python_json(r#"{"NaNo": NaNo}"#), r#"{"NaNo": NaNo}"#);
        assert_eq!(python_json("xNaN — NaN"), "xNaN — null");
    }
}

#[cfg(test)]
mod tests {
    use super::super::{detect::detect, parse, EvidenceKind};

    fn utf16le(s: &str) -> Vec<u8> {
        let mut out = vec![0xFF, 0xFE];
        out.extend(s.encode_utf16().flat_map(u16::to_le_bytes));
        out
    }

    /// Windows PowerShell 5.1's `nvidia-smi -L > gpus.txt` writes UTF-16LE with a byte-order mark.
    #[test]
    fn a_listing_saved_as_utf16_by_powershell_is_read() {
        let listing = "GPU 0: NVIDIA GeForce RTX 4070 Laptop GPU (UUID: GPU-6f1d3e44-0000-0000-0000-000000000000)\r\n";
        let bytes = utf16le(listing);
        assert_eq!(detect(&bytes), Some(EvidenceKind::NvidiaSmiList));
        let p = parse(EvidenceKind::NvidiaSmiList, &bytes).unwrap();
        assert_eq!(p.get_num("gpu.count"), Some(1.0));
        let mut big_endian = vec![0xFE, 0xFF];
        big_endian.extend(listing.encode_utf16().flat_map(u16::to_be_bytes));
        assert_eq!(
            parse(EvidenceKind::NvidiaSmiList, &big_endian)
                .unwrap()
                .get_num("gpu.count"),
            Some(1.0)
        );
        // Cut in the middle of a code unit: an error, never a panic.
        let cut = &bytes[..bytes.len() - 1];
        let e = parse(EvidenceKind::NvidiaSmiList, cut).unwrap_err();
        assert!(e.message.contains("not valid UTF-16"), "{}", e.message);
    }
}
