//! CSV import and export of ledger lines, with this header (docs/ledger.md):
//! `category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency` and an
//! optional last column `trial` (the trial's id or name; the export always writes it).
//!
//! The parser reads from any `Read`; the server's API feeds it the request body chunk by chunk
//! through its `ledger::channel::ChannelReader` (so the body is parsed while it streams in, under a
//! byte cap), the page feeds it a pasted text. Errors name the line (1 is the header) and the
//! column (1-based, with its name).

use std::io::Read;

use chrono::SecondsFormat;

use super::model::{validate_line, LedgerLine, LineInput, CSV_COLUMNS, CSV_TRIAL_COLUMN};
use crate::validation::FieldError;

/// Most lines one import may carry; split larger files.
pub const MAX_IMPORT_LINES: usize = 250_000;
/// Errors reported before the import gives up reading.
pub const MAX_ERRORS: usize = 50;

fn at(line: u64, column: Option<usize>, message: String) -> FieldError {
    match column {
        Some(i) => {
            let name = CSV_COLUMNS.get(i).copied().unwrap_or(CSV_TRIAL_COLUMN);
            FieldError::new(format!("line {line}, column {} ({name})", i + 1), message)
        }
        None => FieldError::new(format!("line {line}"), message),
    }
}

/// Why an import was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CsvError {
    /// Bad header or lines: each error names its line and column (422).
    Invalid(Vec<FieldError>),
    /// More than `MAX_IMPORT_LINES` lines (413); reading stopped there.
    TooManyLines,
}

/// Longest line (bytes between newlines) an import may have. A ledger line is a few hundred bytes;
/// without a cap, one endless "line" (80 KB of gzip inflates to 64 MiB of NULs) is held whole by
/// the CSV reader, then copied into the header and its error message.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// A `Read` that stops with an error at a line longer than `MAX_LINE_BYTES` or at a NUL byte (no
/// text column may hold one; PostgreSQL refuses them), so the parser never holds more than one
/// short line of a hostile body.
struct Guarded<R> {
    inner: R,
    line: u64,
    since_newline: usize,
}

impl<R: Read> Read for Guarded<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &b in &buf[..n] {
            match b {
                b'\n' => {
                    self.line += 1;
                    self.since_newline = 0;
                }
                0 => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("line {} holds a NUL byte; a ledger CSV is text", self.line),
                    ))
                }
                _ => {
                    self.since_newline += 1;
                    if self.since_newline > MAX_LINE_BYTES {
                        return Err(std::io::Error::new(
                            std::io::ErrorKind::InvalidData,
                            format!("line {} is longer than {MAX_LINE_BYTES} bytes", self.line),
                        ));
                    }
                }
            }
        }
        Ok(n)
    }
}

/// `reader` behind the same guard a ledger CSV is read through (no NUL, no line longer than
/// `MAX_LINE_BYTES`), for the other CSV formats the ledger imports.
pub fn guarded<R: Read>(reader: R) -> impl Read {
    Guarded {
        inner: reader,
        line: 1,
        since_newline: 0,
    }
}

/// A header cell as an error quotes it: at most 40 characters.
pub fn shown(cell: &str) -> String {
    match cell.char_indices().nth(40) {
        None => format!("{cell:?}"),
        Some((cut, _)) => format!("{:?}…", &cell[..cut]),
    }
}

/// Cells a spreadsheet would run as a formula start with one of these (OWASP "CSV injection").
const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// Exported text cells that a spreadsheet would take for a formula get a leading `'`, which
/// spreadsheets show as text. Cells that already start with quotes before such a character get one
/// more, so [`unescape_cell`] gives back exactly what was stored.
fn escape_cell(cell: &str) -> std::borrow::Cow<'_, str> {
    if cell.trim_start_matches('\'').starts_with(FORMULA_START) {
        std::borrow::Cow::Owned(format!("'{cell}"))
    } else {
        std::borrow::Cow::Borrowed(cell)
    }
}

/// Undoes [`escape_cell`] on import, so an exported ledger imports to the same lines.
fn unescape_cell(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if rest.trim_start_matches('\'').starts_with(FORMULA_START) => rest,
        _ => cell,
    }
}

/// Parses and validates a whole CSV. All or nothing: any error and no line is returned. One pass
/// over the CSV's records, every error by line and column.
pub fn parse(reader: impl Read, currency: &str) -> Result<Vec<LedgerLine>, CsvError> {
    let reader = Guarded {
        inner: reader,
        line: 1,
        since_newline: 0,
    };
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(reader);
    let header = match rdr.headers() {
        Ok(h) => h.clone(),
        Err(e) => {
            return Err(CsvError::Invalid(vec![at(
                1,
                None,
                format!("could not read the header: {e}"),
            )]))
        }
    };
    let (with_trial, columns) = header_columns(&header)?;
    let mut lines = Vec::new();
    let mut errors = Vec::new();
    let mut record = ::csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                errors.push(at(line, None, format!("unreadable CSV: {e}")));
                break;
            }
        }
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        if record.len() == 1 && record.get(0) == Some("") {
            continue; // a blank line
        }
        if record.len() != columns {
            errors.push(at(
                line,
                None,
                format!("expected {columns} fields, found {}", record.len()),
            ));
        } else {
            let cells: [&str; 9] = std::array::from_fn(|i| unescape_cell(record.get(i).unwrap_or("")));
            let mut input = LineInput::from_cells(cells);
            if with_trial {
                input.trial = record.get(CSV_COLUMNS.len()).map(|t| unescape_cell(t).to_owned());
            }
            match validate_line(&input, currency) {
                Ok(l) if errors.is_empty() => lines.push(l),
                Ok(_) => {}
                Err(es) => errors.extend(es.into_iter().map(|e| {
                    let col = CSV_COLUMNS.iter().position(|c| *c == e.field);
                    at(line, col, e.message)
                })),
            }
        }
        if lines.len() > MAX_IMPORT_LINES {
            return Err(CsvError::TooManyLines);
        }
        if errors.len() >= MAX_ERRORS {
            errors.truncate(MAX_ERRORS);
            errors.push(FieldError::new("file", format!("stopped after {MAX_ERRORS} errors")));
            break;
        }
    }
    if errors.is_empty() {
        Ok(lines)
    } else {
        Err(CsvError::Invalid(errors))
    }
}

/// Whether the header ends with the optional trial column, and how many columns each line has;
/// an error naming the first wrong column when the header is not the import header.
fn header_columns(header: &::csv::StringRecord) -> Result<(bool, usize), CsvError> {
    let got: Vec<&str> = header.iter().collect();
    let with_trial = got.len() == CSV_COLUMNS.len() + 1 && got.last() == Some(&CSV_TRIAL_COLUMN);
    let columns = if with_trial {
        CSV_COLUMNS.len() + 1
    } else {
        CSV_COLUMNS.len()
    };
    if got[..got.len().min(CSV_COLUMNS.len())] != CSV_COLUMNS[..got.len().min(CSV_COLUMNS.len())]
        || got.len() != columns
    {
        let detail = match got.iter().zip(CSV_COLUMNS).position(|(g, want)| *g != want) {
            Some(i) => format!("column {} is {}, expected {:?}", i + 1, shown(got[i]), CSV_COLUMNS[i]),
            None => format!(
                "expected {} or {} columns, found {}",
                CSV_COLUMNS.len(),
                CSV_COLUMNS.len() + 1,
                got.len()
            ),
        };
        return Err(CsvError::Invalid(vec![FieldError::new(
            "line 1",
            format!(
                "the header must be exactly {} (then, optionally, {CSV_TRIAL_COLUMN}); {detail}{}",
                CSV_COLUMNS.join(","),
                crate::prices::detect::belongs_elsewhere(
                    &got.iter().map(|h| (*h).to_owned()).collect::<Vec<_>>(),
                    crate::prices::detect::Import::Ledger
                )
            ),
        )]));
    }
    Ok((with_trial, columns))
}

/// Writes lines as CSV with the import header and the `trial` column; importing the result gives
/// the same lines on the same trials.
pub fn write<W: std::io::Write>(out: W, lines: &[LedgerLine]) -> Result<W, ::csv::Error> {
    let mut w = ::csv::Writer::from_writer(out);
    w.write_record(CSV_COLUMNS.iter().chain([&CSV_TRIAL_COLUMN]))?;
    let time = |t: Option<chrono::DateTime<chrono::Utc>>| {
        t.map(|t| t.to_rfc3339_opts(SecondsFormat::AutoSi, true))
            .unwrap_or_default()
    };
    for l in lines {
        w.write_record([
            l.category.as_str(),
            &escape_cell(&l.resource),
            &escape_cell(&l.description),
            &time(l.starts_at),
            &time(l.ends_at),
            &l.gpus.map(|g| g.to_string()).unwrap_or_default(),
            &l.rate_per_gpu_hour.map(|r| r.to_string()).unwrap_or_default(),
            &l.amount.to_string(),
            &l.currency,
            &escape_cell(l.trial.as_deref().unwrap_or("")),
        ])?;
    }
    w.flush()?;
    w.into_inner().map_err(|e| ::csv::Error::from(e.into_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(resource: &str, description: &str) -> LedgerLine {
        LedgerLine {
            category: crate::ledger::model::Category::Host,
            resource: resource.into(),
            description: description.into(),
            starts_at: None,
            ends_at: None,
            gpus: None,
            rate_per_gpu_hour: None,
            amount: "12.50".parse().unwrap(),
            currency: "USD".into(),
            trial: Some("@trial".into()),
        }
    }

    #[test]
    fn exported_cells_never_start_a_formula_and_import_back_unchanged() {
        let lines = vec![
            line("=HYPERLINK(\"http://evil.example\")", "+1+1"),
            line("-2+3", "@SUM(A1:A9)"),
            line("'=already quoted", "plain text"),
            line("node-1", "=cmd|' /C calc'!A0"),
        ];
        let out = String::from_utf8(write(Vec::new(), &lines).unwrap()).unwrap();
        for row in out.lines().skip(1) {
            for cell in row.split(',') {
                let cell = cell.trim_start_matches('"');
                assert!(
                    !cell.starts_with(['=', '+', '-', '@', '\t', '\r']),
                    "a cell a spreadsheet would run: {cell:?} in {row:?}"
                );
            }
        }
        assert!(out.contains("'=HYPERLINK"), "{out}");
        // The export imports to exactly the lines it was made from (the trial cell too).
        let back = parse(out.as_bytes(), "USD").unwrap();
        assert_eq!(back, lines);
    }

    /// Counts what the parser pulled from its reader.
    struct Counting<R> {
        inner: R,
        read: std::rc::Rc<std::cell::Cell<usize>>,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read.set(self.read.get() + n);
            Ok(n)
        }
    }

    #[test]
    fn an_endless_line_or_a_nul_stops_the_parser_early_with_a_short_message() {
        for (body, says) in [
            (vec![b'a'; 32 * 1024 * 1024], "longer than 65536 bytes"),
            (vec![0u8; 32 * 1024 * 1024], "NUL byte"),
        ] {
            let read = std::rc::Rc::new(std::cell::Cell::new(0));
            let reader = Counting {
                inner: std::io::Cursor::new(body),
                read: read.clone(),
            };
            let Err(CsvError::Invalid(errors)) = parse(reader, "USD") else {
                panic!("refused")
            };
            let message = format!("{errors:?}");
            assert!(message.contains(says), "{message}");
            assert!(
                message.len() < 1000,
                "a short message, not the cell: {} bytes",
                message.len()
            );
            assert!(
                read.get() <= MAX_LINE_BYTES + 64 * 1024,
                "stopped after {} bytes of 32 MiB",
                read.get()
            );
        }
        // A long header cell is quoted short in the message.
        let header = format!("{},resource\n", "x".repeat(10_000));
        let Err(CsvError::Invalid(errors)) = parse(header.as_bytes(), "USD") else {
            panic!("refused")
        };
        assert!(format!("{errors:?}").len() < 1000);
    }

    #[test]
    fn a_nul_in_a_cell_is_a_field_error() {
        let lines = vec![line("node-1", "ok")];
        let out = String::from_utf8(write(Vec::new(), &lines).unwrap()).unwrap();
        let with_nul = out.replace("ok", "o\u{0}k");
        let Err(CsvError::Invalid(errors)) = parse(with_nul.as_bytes(), "USD") else {
            panic!("refused")
        };
        assert!(format!("{errors:?}").contains("NUL"), "{errors:?}");
    }
}
