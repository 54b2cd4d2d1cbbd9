//! CSV import and export of ledger lines, with the header in api.md:
//! `category,resource,description,starts_at,ends_at,gpus,rate_per_gpu_hour,amount,currency` and an
//! optional last column `trial` (the trial's id or name; the export always writes it).
//!
//! The parser reads from any `Read`; the API feeds it the request body chunk by chunk through
//! [`ChannelReader`] (so the body is parsed while it streams in, under a byte cap), the page feeds it
//! a pasted text. Errors name the line (1 is the header) and the column (1-based, with its name).

use std::io::Read;

use bytes::Bytes;
use chrono::SecondsFormat;
use tokio::sync::mpsc;

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

/// Parses and validates a whole CSV. All or nothing: any error and no line is returned.
pub fn parse(reader: impl Read, currency: &str) -> Result<Vec<LedgerLine>, CsvError> {
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
            Some(i) => format!("column {} is {:?}, expected {:?}", i + 1, got[i], CSV_COLUMNS[i]),
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
                "the header must be exactly {} (then, optionally, {CSV_TRIAL_COLUMN}); {detail}",
                CSV_COLUMNS.join(",")
            ),
        )]));
    }
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
            let cells: [&str; 9] = std::array::from_fn(|i| record.get(i).unwrap_or(""));
            let mut input = LineInput::from_cells(cells);
            if with_trial {
                input.trial = record.get(CSV_COLUMNS.len()).map(str::to_owned);
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
            &l.resource,
            &l.description,
            &time(l.starts_at),
            &time(l.ends_at),
            &l.gpus.map(|g| g.to_string()).unwrap_or_default(),
            &l.rate_per_gpu_hour.map(|r| r.to_string()).unwrap_or_default(),
            &l.amount.to_string(),
            &l.currency,
            l.trial.as_deref().unwrap_or(""),
        ])?;
    }
    w.flush()?;
    w.into_inner().map_err(|e| ::csv::Error::from(e.into_error()))
}

/// A blocking `Read` over body chunks sent from the async side: the CSV parser runs on a blocking
/// thread and reads the request body as it arrives. A closed channel is the end of the body.
pub struct ChannelReader {
    rx: mpsc::Receiver<Bytes>,
    current: Bytes,
}

impl ChannelReader {
    pub fn new(rx: mpsc::Receiver<Bytes>) -> Self {
        Self {
            rx,
            current: Bytes::new(),
        }
    }
}

impl Read for ChannelReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.current.is_empty() {
            match self.rx.blocking_recv() {
                Some(chunk) => self.current = chunk,
                None => return Ok(0),
            }
        }
        let n = buf.len().min(self.current.len());
        buf[..n].copy_from_slice(&self.current.split_to(n));
        Ok(n)
    }
}
