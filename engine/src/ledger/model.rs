//! Ledger types, validation and the summary arithmetic. Pure: no I/O.
//!
//! The rules (overlaps, GPU counts, cost) are in the module doc of the server's `ledger`
//! (`server/ledger/mod.rs`) and in docs/ledger.md.

use std::{
    cmp::Reverse,
    collections::{BTreeMap, BinaryHeap},
    str::FromStr,
};

use chrono::{DateTime, Datelike, NaiveDate, SubsecRound, Utc};
use rust_decimal::Decimal;
use serde::{Deserialize, Deserializer, Serialize};

use crate::validation::{FieldError, TextEnum};

/// Microseconds in an hour: GPU-time is counted in whole microseconds (PostgreSQL's resolution).
const MICROS_PER_HOUR: i64 = 3_600_000_000;
/// Largest GPU count on one line.
pub const MAX_GPUS: i32 = 1_000_000;
/// Longest resource id and description. An Azure VM's resource id reaches some 265 characters
/// (resource group names up to 90, VM names up to 64), a scale set's in AKS nearly 200.
const MAX_RESOURCE: usize = 512;
/// The longest interval one line may cover: a year, with a leap day.
const MAX_SPAN_DAYS: i64 = 366;
/// The years a line's times may fall in (the first, and the one after the last).
const EARLIEST_YEAR: i32 = 2000;
const LATEST_YEAR: i32 = 2100;
const MAX_DESCRIPTION: usize = 1000;

/// What a line pays for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Category {
    Accelerator,
    Host,
    Storage,
    Network,
    Support,
    License,
}

impl Category {
    pub const ALL: [Category; 6] = [
        Category::Accelerator,
        Category::Host,
        Category::Storage,
        Category::Network,
        Category::Support,
        Category::License,
    ];

    pub fn as_str(&self) -> &'static str {
        match self {
            Category::Accelerator => "accelerator",
            Category::Host => "host",
            Category::Storage => "storage",
            Category::Network => "network",
            Category::Support => "support",
            Category::License => "license",
        }
    }
}

impl FromStr for Category {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        Category::ALL.into_iter().find(|c| c.as_str() == s).ok_or(())
    }
}

impl TextEnum for Category {
    fn variants() -> &'static [Self] {
        &Category::ALL
    }
    fn text(self) -> &'static str {
        self.as_str()
    }
}

/// A valid ledger line. Accelerator lines always carry `resource`, an interval and `gpus`;
/// `amount` is always set (given, or computed from interval × gpus × rate).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LedgerLine {
    pub category: Category,
    pub resource: String,
    pub description: String,
    pub starts_at: Option<DateTime<Utc>>,
    pub ends_at: Option<DateTime<Utc>>,
    pub gpus: Option<i32>,
    pub rate_per_gpu_hour: Option<Decimal>,
    pub amount: Decimal,
    pub currency: String,
    /// The trial the line belongs to, as the sender named it (an id or a name); `None` for the
    /// request's trial. The service resolves it against the brief's trials.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trial: Option<String>,
}

/// A line as sent: every field a string (CSV cells, or JSON strings/numbers), not yet checked.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineInput {
    #[serde(default, deserialize_with = "loose")]
    pub category: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub resource: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub description: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub starts_at: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub ends_at: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub gpus: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub rate_per_gpu_hour: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub amount: Option<String>,
    #[serde(default, deserialize_with = "loose")]
    pub currency: Option<String>,
    /// Optional: the trial (id or name) this line belongs to.
    #[serde(default, deserialize_with = "loose")]
    pub trial: Option<String>,
}

/// The optional last CSV column: the trial a line belongs to (its id or name). Without it, every
/// line goes to the request's trial.
pub const CSV_TRIAL_COLUMN: &str = "trial";

/// The CSV columns, in order. The header row must be exactly these names (then, optionally, `trial`).
pub const CSV_COLUMNS: [&str; 9] = [
    "category",
    "resource",
    "description",
    "starts_at",
    "ends_at",
    "gpus",
    "rate_per_gpu_hour",
    "amount",
    "currency",
];

impl LineInput {
    /// From the nine CSV cells, in `CSV_COLUMNS` order.
    pub fn from_cells(cells: [&str; 9]) -> Self {
        let cell = |i: usize| Some(cells[i].to_owned());
        LineInput {
            category: cell(0),
            resource: cell(1),
            description: cell(2),
            starts_at: cell(3),
            ends_at: cell(4),
            gpus: cell(5),
            rate_per_gpu_hour: cell(6),
            amount: cell(7),
            currency: cell(8),
            trial: None,
        }
    }
}

/// Accepts a JSON string, number or null as an optional string; money stays exact because a
/// number is taken by its literal digits, never through a float we computed.
fn loose<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    match serde_json::Value::deserialize(d)? {
        serde_json::Value::Null => Ok(None),
        serde_json::Value::String(s) => Ok(Some(s)),
        serde_json::Value::Number(n) => Ok(Some(n.to_string())),
        serde_json::Value::Bool(b) => Ok(Some(b.to_string())),
        other => Err(serde::de::Error::custom(format!(
            "expected a string or number, got {other}"
        ))),
    }
}

/// A cell as an error message quotes it: at most 40 characters, so a megabyte cell cannot make a
/// megabyte message (nor, repeated per error, many).
fn shown(raw: &str) -> String {
    const MAX: usize = 40;
    match raw.char_indices().nth(MAX) {
        None => format!("{raw:?}"),
        Some((cut, _)) => format!("{:?}…", &raw[..cut]),
    }
}

fn non_empty(v: &Option<String>) -> Option<&str> {
    v.as_deref().map(str::trim).filter(|s| !s.is_empty())
}

fn parse_money(field: &'static str, raw: &str, errors: &mut Vec<FieldError>) -> Option<Decimal> {
    match Decimal::from_str_exact(raw) {
        Ok(d) if d.is_sign_negative() && !d.is_zero() => {
            errors.push(FieldError::new(
                field,
                format!("must not be negative (got {})", shown(raw)),
            ));
            None
        }
        Ok(d) if d >= money_cap() => {
            errors.push(FieldError::new(field, format!("is too large (got {})", shown(raw))));
            None
        }
        Ok(d) => Some(d.normalize()),
        Err(_) => {
            errors.push(FieldError::new(
                field,
                format!("must be a decimal number such as 12.50 (got {})", shown(raw)),
            ));
            None
        }
    }
}

/// Largest money figure (amount, rate, idle hours) on one line: keeps every product inside `Decimal`.
fn money_cap() -> Decimal {
    Decimal::from(1_000_000_000_000_000_i64)
}

fn parse_time(field: &'static str, raw: &str, errors: &mut Vec<FieldError>) -> Option<DateTime<Utc>> {
    match DateTime::parse_from_rfc3339(raw) {
        // PostgreSQL keeps microseconds; keep the same here so Rust and SQL agree to the microsecond.
        Ok(t) => Some(t.with_timezone(&Utc).trunc_subsecs(6)),
        Err(e) => {
            errors.push(FieldError::new(
                field,
                format!(
                    "must be an RFC 3339 time such as 2026-11-01T01:30:00-04:00 (got {}: {e})",
                    shown(raw)
                ),
            ));
            None
        }
    }
}

/// A line typed by a person into the brief page's form, read the way they meant it: a time without
/// an offset (`2026-11-20 09:00`, seconds optional, `T` or a space, a trailing `UTC`) is UTC, and
/// money may carry the brief's own currency (`$2.99` when it is USD, `2.99 EUR`, `€2.99`) and
/// thousands separators (`1,234.50`). Anything else is left as typed, for `validate_line` to
/// report. The API and CSV imports stay strict: a program should send RFC 3339 and plain decimals.
pub fn as_people_type_it(mut input: LineInput, currency: &str) -> LineInput {
    for time in [&mut input.starts_at, &mut input.ends_at] {
        if let Some(t) = time.as_deref().and_then(typed_time) {
            *time = Some(t);
        }
    }
    for money in [&mut input.amount, &mut input.rate_per_gpu_hour] {
        if let Some(m) = money.as_deref().and_then(|m| typed_money(m, currency)) {
            *money = Some(m);
        }
    }
    input
}

/// `2026-11-20 09:00` (or with seconds, or `T`, or a trailing `UTC`) as RFC 3339 in UTC; `None`
/// when it is RFC 3339 already or not a time.
fn typed_time(raw: &str) -> Option<String> {
    let raw = raw.trim();
    if DateTime::parse_from_rfc3339(raw).is_ok() {
        return None;
    }
    let bare = raw
        .strip_suffix("UTC")
        .or_else(|| raw.strip_suffix('Z'))
        .unwrap_or(raw)
        .trim_end();
    [
        "%Y-%m-%d %H:%M",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%dT%H:%M:%S",
    ]
    .iter()
    .find_map(|f| chrono::NaiveDateTime::parse_from_str(bare, f).ok())
    .map(|t| t.and_utc().to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
}

/// The symbols that name one currency only.
const CURRENCY_SYMBOLS: [(&str, &str); 4] = [("$", "USD"), ("€", "EUR"), ("£", "GBP"), ("¥", "JPY")];

/// `$2.99`, `2.99 USD`, `USD 2.99`, `1,234.50` as a plain decimal when the mark is the brief's
/// currency; `None` when there is nothing to take off.
fn typed_money(raw: &str, currency: &str) -> Option<String> {
    let mut text = raw.trim().to_owned();
    let mut changed = false;
    let upper = text.to_ascii_uppercase();
    let code = currency.to_ascii_uppercase();
    if let Some(rest) = upper.strip_prefix(&code).or_else(|| upper.strip_suffix(&code)) {
        // The code is ASCII, so the upper-cased text has the same byte offsets.
        let start = if upper.starts_with(&code) { code.len() } else { 0 };
        text = text[start..start + rest.len()].trim().to_owned();
        changed = true;
    }
    for (symbol, symbol_code) in CURRENCY_SYMBOLS {
        if symbol_code == code {
            if let Some(rest) = text.strip_prefix(symbol).or_else(|| text.strip_suffix(symbol)) {
                text = rest.trim().to_owned();
                changed = true;
            }
        }
    }
    // Commas only as thousands separators (1,234 or 12,345.67): a comma elsewhere may be a decimal
    // comma, which is ambiguous, so it is left for the validator to refuse.
    let (whole, fraction) = match text.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (text.as_str(), None),
    };
    let groups: Vec<&str> = whole.split(',').collect();
    // A first group of 0 (`0,875`, `01,500`) groups no thousands: it is a decimal comma.
    let thousands = groups.len() > 1
        && (1..=3).contains(&groups[0].len())
        && !groups[0].starts_with('0')
        && groups[1..].iter().all(|g| g.len() == 3)
        && groups.iter().all(|g| g.chars().all(|c| c.is_ascii_digit()));
    if thousands {
        let joined = groups.concat();
        text = match fraction {
            Some(f) => format!("{joined}.{f}"),
            None => joined,
        };
        changed = true;
    }
    changed.then_some(text)
}

/// Checks one line against the brief's currency. Field names in errors are the column names.
pub fn validate_line(input: &LineInput, brief_currency: &str) -> Result<LedgerLine, Vec<FieldError>> {
    let nul = refuse_nul(input);
    if !nul.is_empty() {
        return Err(nul);
    }
    let mut errors = Vec::new();
    let category = read_category(input, &mut errors);
    let resource = non_empty(&input.resource).unwrap_or("").to_owned();
    if resource.chars().count() > MAX_RESOURCE {
        errors.push(FieldError::new(
            "resource",
            format!("is longer than {MAX_RESOURCE} characters"),
        ));
    }
    let description = input.description.as_deref().unwrap_or("").trim().to_owned();
    if description.chars().count() > MAX_DESCRIPTION {
        errors.push(FieldError::new(
            "description",
            format!("is longer than {MAX_DESCRIPTION} characters"),
        ));
    }
    let (starts_at, ends_at) = read_interval(input, &mut errors);
    let gpus = read_gpus(input, &mut errors);
    let rate = non_empty(&input.rate_per_gpu_hour).and_then(|r| parse_money("rate_per_gpu_hour", r, &mut errors));
    let amount = non_empty(&input.amount).and_then(|r| parse_money("amount", r, &mut errors));
    let currency = read_currency(input, brief_currency, &mut errors);
    let amount = match category {
        Some(Category::Accelerator) => {
            let read = AcceleratorRead {
                resource: &resource,
                starts_at,
                ends_at,
                gpus,
                rate,
                amount,
            };
            accelerator_amount_or_errors(input, &read, &mut errors)
        }
        Some(_) if non_empty(&input.amount).is_none() => {
            errors.push(FieldError::new("amount", "is required on lines other than accelerator"));
            amount
        }
        _ => amount,
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(LedgerLine {
        category: category.expect("checked above"),
        resource,
        description,
        starts_at,
        ends_at,
        gpus,
        rate_per_gpu_hour: rate,
        amount: amount.expect("checked above"),
        currency,
        trial: non_empty(&input.trial).map(str::to_owned),
    })
}

/// PostgreSQL text cannot hold NUL: refuse it at the field rather than fail the insert (a 500).
fn refuse_nul(input: &LineInput) -> Vec<FieldError> {
    let fields = [
        ("category", &input.category),
        ("resource", &input.resource),
        ("description", &input.description),
        ("starts_at", &input.starts_at),
        ("ends_at", &input.ends_at),
        ("gpus", &input.gpus),
        ("rate_per_gpu_hour", &input.rate_per_gpu_hour),
        ("amount", &input.amount),
        ("currency", &input.currency),
        ("trial", &input.trial),
    ];
    fields
        .into_iter()
        .filter(|(_, value)| value.as_deref().is_some_and(|v| v.contains('\0')))
        .map(|(field, _)| FieldError::new(field, "must not contain a NUL (\\0) character"))
        .collect()
}

/// The category, required and one of the six.
fn read_category(input: &LineInput, errors: &mut Vec<FieldError>) -> Option<Category> {
    let Some(raw) = non_empty(&input.category) else {
        errors.push(FieldError::new("category", "is required"));
        return None;
    };
    match raw.parse::<Category>() {
        Ok(c) => Some(c),
        Err(()) => {
            errors.push(FieldError::new(
                "category",
                format!(
                    "must be one of accelerator, host, storage, network, support, license (got {})",
                    shown(raw)
                ),
            ));
            None
        }
    }
}

/// `starts_at` and `ends_at`: both or neither, and the end after the start.
fn read_interval(input: &LineInput, errors: &mut Vec<FieldError>) -> (Option<DateTime<Utc>>, Option<DateTime<Utc>>) {
    let starts_at = non_empty(&input.starts_at).and_then(|r| parse_time("starts_at", r, errors));
    let ends_at = non_empty(&input.ends_at).and_then(|r| parse_time("ends_at", r, errors));
    match (non_empty(&input.starts_at), non_empty(&input.ends_at)) {
        (Some(_), None) => errors.push(FieldError::new("ends_at", "is required when starts_at is given")),
        (None, Some(_)) => errors.push(FieldError::new("starts_at", "is required when ends_at is given")),
        _ => {}
    }
    if let (Some(s), Some(e)) = (starts_at, ends_at) {
        if e <= s {
            errors.push(FieldError::new(
                "ends_at",
                format!(
                    "must be after starts_at ({} is not after {})",
                    e.to_rfc3339(),
                    s.to_rfc3339()
                ),
            ));
        } else if e - s > chrono::Duration::days(MAX_SPAN_DAYS) {
            // Each day of an accelerator line is a row of the daily GPU-time: a mistyped year
            // (0206 for 2026) made some 660,000 of them, and 0001–9999 millions.
            errors.push(FieldError::new(
                "ends_at",
                format!(
                    "is more than {MAX_SPAN_DAYS} days after starts_at ({} to {}): split a longer span into lines of a \
                     year or less",
                    s.to_rfc3339(),
                    e.to_rfc3339()
                ),
            ));
        }
    }
    for (field, at) in [("starts_at", starts_at), ("ends_at", ends_at)] {
        if let Some(at) = at.filter(|t| !(EARLIEST_YEAR..LATEST_YEAR).contains(&t.year())) {
            errors.push(FieldError::new(
                field,
                format!(
                    "must fall in the years {EARLIEST_YEAR}–{} (got {})",
                    LATEST_YEAR - 1,
                    at.to_rfc3339()
                ),
            ));
        }
    }
    (starts_at, ends_at)
}

fn read_gpus(input: &LineInput, errors: &mut Vec<FieldError>) -> Option<i32> {
    let raw = non_empty(&input.gpus)?;
    match raw.parse::<i32>() {
        Ok(n) if (1..=MAX_GPUS).contains(&n) => Some(n),
        _ => {
            errors.push(FieldError::new(
                "gpus",
                format!("must be a whole number from 1 to {MAX_GPUS} (got {})", shown(raw)),
            ));
            None
        }
    }
}

/// The line's currency: the brief's, whatever case it is written in; another one is refused.
fn read_currency(input: &LineInput, brief_currency: &str, errors: &mut Vec<FieldError>) -> String {
    match non_empty(&input.currency) {
        Some(c) if !c.eq_ignore_ascii_case(brief_currency) => errors.push(FieldError::new(
            "currency",
            format!(
                "{} is not this brief's currency {brief_currency}; a brief's ledger has one currency",
                shown(c)
            ),
        )),
        _ => {}
    }
    brief_currency.to_owned()
}

/// What an accelerator line's own rules read, as `validate_line` parsed it.
struct AcceleratorRead<'a> {
    resource: &'a str,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    gpus: Option<i32>,
    rate: Option<Decimal>,
    amount: Option<Decimal>,
}

/// An accelerator line names its resource, interval and GPUs, and gives an amount or a rate; with a
/// rate only, the amount is computed. Returns the amount.
fn accelerator_amount_or_errors(
    input: &LineInput,
    read: &AcceleratorRead<'_>,
    errors: &mut Vec<FieldError>,
) -> Option<Decimal> {
    if read.resource.is_empty() {
        errors.push(FieldError::new(
            "resource",
            "is required on accelerator lines (the allocation or instance id)",
        ));
    }
    for (field, raw) in [
        ("starts_at", &input.starts_at),
        ("ends_at", &input.ends_at),
        ("gpus", &input.gpus),
    ] {
        if non_empty(raw).is_none() {
            errors.push(FieldError::new(field, "is required on accelerator lines"));
        }
    }
    if read.amount.is_some() || non_empty(&input.amount).is_some() {
        return read.amount;
    }
    match (
        non_empty(&input.rate_per_gpu_hour),
        read.starts_at,
        read.ends_at,
        read.gpus,
        read.rate,
    ) {
        (None, ..) => errors.push(FieldError::new(
            "amount",
            "give either amount or rate_per_gpu_hour (with the interval and gpus)",
        )),
        (Some(_), Some(s), Some(e), Some(g), Some(r)) if e > s => match accelerator_amount(s, e, g, r) {
            Some(a) => return Some(a),
            None => errors.push(FieldError::new("amount", "the computed amount is too large")),
        },
        _ => {} // the interval, gpus or rate already carries an error
    }
    read.amount
}

/// hours × gpus × rate, exactly: (microseconds × gpus × rate) ÷ 3.6e9, multiplying before the one division.
/// The quotient is exact whenever it terminates within `Decimal`'s 28 significant digits.
pub fn accelerator_amount(
    starts_at: DateTime<Utc>,
    ends_at: DateTime<Utc>,
    gpus: i32,
    rate: Decimal,
) -> Option<Decimal> {
    let micros = (ends_at - starts_at).num_microseconds()?;
    Decimal::from(micros)
        .checked_mul(Decimal::from(gpus))?
        .checked_mul(rate)?
        .checked_div(Decimal::from(MICROS_PER_HOUR))
        .map(|d| d.normalize())
}

/// Output counts for a brief (see the module doc: each post replaces the figures it names).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Outputs {
    pub accepted: i64,
    pub rejected: i64,
    pub retries: i64,
    pub failed_jobs: i64,
    /// Idle accelerator time in GPU-hours; `None` when never reported.
    pub idle_hours: Option<Decimal>,
}

/// An outputs update as sent: the fields given replace the stored ones.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutputsPatch {
    pub accepted: Option<i64>,
    pub rejected: Option<i64>,
    pub retries: Option<i64>,
    pub failed_jobs: Option<i64>,
    pub idle_hours: Option<Decimal>,
}

impl OutputsPatch {
    pub fn apply(&self, mut to: Outputs) -> Outputs {
        to.accepted = self.accepted.unwrap_or(to.accepted);
        to.rejected = self.rejected.unwrap_or(to.rejected);
        to.retries = self.retries.unwrap_or(to.retries);
        to.failed_jobs = self.failed_jobs.unwrap_or(to.failed_jobs);
        if self.idle_hours.is_some() {
            to.idle_hours = self.idle_hours;
        }
        to
    }
}

/// Checks `{ accepted, rejected, retries, failed_jobs, idle_hours }`: counts are whole numbers ≥ 0,
/// idle hours a decimal ≥ 0. Empty strings count as "not given" (HTML forms send them).
pub fn validate_outputs(raw: &BTreeMap<String, Option<String>>) -> Result<OutputsPatch, Vec<FieldError>> {
    let mut errors = Vec::new();
    let mut patch = OutputsPatch::default();
    for (key, value) in raw {
        let Some(v) = value.as_deref().map(str::trim).filter(|v| !v.is_empty()) else {
            continue;
        };
        let count = |errors: &mut Vec<FieldError>| match v.parse::<i64>() {
            Ok(n) if n >= 0 => Some(n),
            _ => {
                errors.push(FieldError::new(
                    key.clone(),
                    format!("must be a whole number ≥ 0 (got {})", shown(v)),
                ));
                None
            }
        };
        match key.as_str() {
            "accepted" => patch.accepted = count(&mut errors),
            "rejected" => patch.rejected = count(&mut errors),
            "retries" => patch.retries = count(&mut errors),
            "failed_jobs" => patch.failed_jobs = count(&mut errors),
            "idle_hours" => patch.idle_hours = parse_money("idle_hours", v, &mut errors),
            other => errors.push(FieldError::new(
                other.to_owned(),
                "is not an output field (accepted, rejected, retries, failed_jobs, idle_hours)",
            )),
        }
    }
    if errors.is_empty() {
        Ok(patch)
    } else {
        Err(errors)
    }
}

/// Money per category (decimal strings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CategoryTotals {
    pub accelerator: Decimal,
    pub host: Decimal,
    pub storage: Decimal,
    pub network: Decimal,
    pub support: Decimal,
    pub license: Decimal,
}

impl CategoryTotals {
    pub fn get(&self, c: Category) -> Decimal {
        match c {
            Category::Accelerator => self.accelerator,
            Category::Host => self.host,
            Category::Storage => self.storage,
            Category::Network => self.network,
            Category::Support => self.support,
            Category::License => self.license,
        }
    }

    pub fn add(&mut self, c: Category, amount: Decimal) {
        let slot = match c {
            Category::Accelerator => &mut self.accelerator,
            Category::Host => &mut self.host,
            Category::Storage => &mut self.storage,
            Category::Network => &mut self.network,
            Category::Support => &mut self.support,
            Category::License => &mut self.license,
        };
        *slot += amount;
    }

    pub fn sum(&self) -> Decimal {
        Category::ALL.iter().map(|c| self.get(*c)).sum()
    }

    fn normalized(mut self) -> Self {
        for c in Category::ALL {
            let v = self.get(c).normalize();
            self.add(c, -self.get(c));
            self.add(c, v);
        }
        self
    }
}

/// What went to waste: shown beside the cost per job, never added into it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Diagnostics {
    /// Idle GPU-hours (a decimal string), or null when not counted.
    pub idle_hours: Option<Decimal>,
    pub failed_jobs: i64,
    pub rejected_outputs: i64,
    pub retries: i64,
}

/// The ledger summary (docs/ledger.md). Money and hours serialize as decimal strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct LedgerSummary {
    pub currency: String,
    /// GPU-hours over merged intervals (overlaps of one resource counted once).
    pub accelerator_hours: Decimal,
    pub totals: CategoryTotals,
    pub total: Decimal,
    pub accepted_outputs: i64,
    /// `total ÷ accepted_outputs`; `None` (JSON null) when nothing was accepted.
    pub cost_per_job: Option<Decimal>,
    pub diagnostics: Diagnostics,
}

/// One accelerator line as the merge needs it. Spans must arrive sorted by (resource, start, end).
#[derive(Debug, Clone, Copy)]
pub struct Span<'a> {
    pub resource: &'a str,
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub gpus: i32,
    pub amount: Decimal,
}

/// What the merge yields: GPU-microseconds counted once and the accelerator cost counted once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Merged {
    pub gpu_micros: i128,
    pub cost: Decimal,
}

impl Merged {
    pub fn gpu_hours(&self) -> Decimal {
        (Decimal::from_i128_with_scale(self.gpu_micros, 0) / Decimal::from(MICROS_PER_HOUR)).normalize()
    }
}

/// Sorts spans into merge order (resource, start, end); a no-op check when they already are.
pub fn sort_spans(spans: &mut [Span<'_>]) {
    fn key<'a>(s: &Span<'a>) -> (&'a str, DateTime<Utc>, DateTime<Utc>) {
        (s.resource, s.start, s.end)
    }
    if !spans.is_sorted_by(|a, b| key(a) <= key(b)) {
        spans.sort_unstable_by(|a, b| key(a).cmp(&key(b)));
    }
}

/// Merges accelerator spans in one pass. `spans` must be sorted by (resource, start, end); this is
/// checked, and out-of-order input panics in debug builds (it would silently over-count otherwise).
///
/// The pass keeps one open cluster (lines of one resource that overlap, directly or through each
/// other). A line starting at or after the cluster's end closes it; touching intervals do not overlap.
/// A cluster of one line counts its full duration × gpus and its full amount, exactly. A cluster of
/// several lines is swept over its start/end events: each elementary piece of time counts once, at the
/// largest GPU count among the lines covering it, and its cost is that of the costliest covering line
/// (amount per second), pro rata.
pub fn merge_spans<'a>(spans: impl IntoIterator<Item = Span<'a>>) -> Merged {
    let mut out = Merged::default();
    let mut cluster: Vec<Span<'a>> = Vec::new();
    let mut cluster_end: Option<DateTime<Utc>> = None;
    for span in spans {
        if let Some(last) = cluster.last() {
            debug_assert!(
                (last.resource, last.start, last.end) <= (span.resource, span.start, span.end),
                "spans must be sorted by (resource, start, end)"
            );
            let same = last.resource == span.resource;
            if !same || Some(span.start) >= cluster_end {
                flush(&mut cluster, &mut out);
                cluster_end = None;
            }
        }
        cluster_end = Some(cluster_end.map_or(span.end, |e| e.max(span.end)));
        cluster.push(span);
    }
    flush(&mut cluster, &mut out);
    out.cost = out.cost.normalize();
    out
}

fn micros(a: DateTime<Utc>, b: DateTime<Utc>) -> i64 {
    (b - a).num_microseconds().unwrap_or(i64::MAX)
}

fn flush(cluster: &mut Vec<Span<'_>>, out: &mut Merged) {
    match cluster.len() {
        0 => {}
        1 => {
            let s = cluster[0];
            out.gpu_micros += i128::from(micros(s.start, s.end).max(0)) * i128::from(s.gpus);
            out.cost += s.amount;
        }
        _ => sweep(cluster, out),
    }
    cluster.clear();
}

/// The event sweep over one cluster of overlapping lines (k lines, O(k log k)).
fn sweep(cluster: &[Span<'_>], out: &mut Merged) {
    // Cost per microsecond of each line: the costliest covering line bills each piece of time.
    let durations: Vec<i64> = cluster.iter().map(|s| micros(s.start, s.end).max(1)).collect();
    let density: Vec<Decimal> = cluster
        .iter()
        .zip(&durations)
        .map(|(s, d)| s.amount / Decimal::from(*d))
        .collect();
    // Events: (time, is_start, line). Ends sort before starts at the same instant (half-open intervals).
    let mut events: Vec<(DateTime<Utc>, bool, usize)> = Vec::with_capacity(cluster.len() * 2);
    for (i, s) in cluster.iter().enumerate() {
        events.push((s.start, true, i));
        events.push((s.end, false, i));
    }
    events.sort_unstable_by_key(|&(t, is_start, i)| (t, is_start, i));
    // Max-heaps with lazy deletion: an ended line is dropped when it reaches the top.
    let mut active = vec![false; cluster.len()];
    let mut gpus: BinaryHeap<(i32, usize)> = BinaryHeap::with_capacity(cluster.len());
    let mut by_cost: BinaryHeap<(Decimal, Reverse<usize>)> = BinaryHeap::with_capacity(cluster.len());
    let mut won = vec![0_i64; cluster.len()];
    let mut prev: Option<DateTime<Utc>> = None;
    for (t, is_start, i) in events {
        if let Some(p) = prev.filter(|p| t > *p) {
            while gpus.peek().is_some_and(|&(_, j)| !active[j]) {
                gpus.pop();
            }
            while by_cost.peek().is_some_and(|&(_, Reverse(j))| !active[j]) {
                by_cost.pop();
            }
            if let (Some(&(g, _)), Some(&(_, Reverse(w)))) = (gpus.peek(), by_cost.peek()) {
                let piece = micros(p, t);
                out.gpu_micros += i128::from(piece) * i128::from(g);
                won[w] += piece;
            }
        }
        prev = Some(t);
        active[i] = is_start;
        if is_start {
            gpus.push((cluster[i].gpus, i));
            by_cost.push((density[i], Reverse(i)));
        }
    }
    // Each line's share: amount × (time it was the billing line) ÷ its duration, multiplied first so a
    // line that bills its whole interval counts its amount exactly.
    for (i, s) in cluster.iter().enumerate() {
        if won[i] == durations[i] {
            out.cost += s.amount;
        } else if won[i] > 0 {
            out.cost += s.amount * Decimal::from(won[i]) / Decimal::from(durations[i]);
        }
    }
}

/// The merged GPU-microseconds of one resource's spans per UTC day: every instant counts once, at
/// the largest GPU count among the spans covering it, as [`merge_spans`] counts it, and the sum over
/// the days is its `gpu_micros`. A commitment's months are whole days, so they add these up.
pub fn gpu_micros_per_day(spans: &[Span<'_>]) -> BTreeMap<NaiveDate, i128> {
    let mut out = BTreeMap::new();
    // Ends sort before starts at the same instant (half-open intervals).
    let mut events: Vec<(DateTime<Utc>, bool, usize)> = Vec::with_capacity(spans.len() * 2);
    for (i, s) in spans.iter().enumerate().filter(|(_, s)| s.end > s.start) {
        events.push((s.start, true, i));
        events.push((s.end, false, i));
    }
    events.sort_unstable_by_key(|&(t, is_start, i)| (t, is_start, i));
    let mut active = vec![false; spans.len()];
    let mut gpus: BinaryHeap<(i32, usize)> = BinaryHeap::new();
    let mut prev: Option<DateTime<Utc>> = None;
    for (t, is_start, i) in events {
        if let Some(p) = prev.filter(|p| t > *p) {
            while gpus.peek().is_some_and(|&(_, j)| !active[j]) {
                gpus.pop();
            }
            if let Some(&(g, _)) = gpus.peek() {
                add_by_day(&mut out, p, t, g);
            }
        }
        prev = Some(t);
        active[i] = is_start;
        if is_start {
            gpus.push((spans[i].gpus, i));
        }
    }
    out
}

/// Adds `[from, to)` × `gpus` to the days it covers, cut at midnights UTC.
fn add_by_day(days: &mut BTreeMap<NaiveDate, i128>, mut from: DateTime<Utc>, to: DateTime<Utc>, gpus: i32) {
    while from < to {
        let day = from.date_naive();
        let next = day
            .succ_opt()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
            .map_or(to, |m| m.and_utc().min(to));
        *days.entry(day).or_insert(0) += i128::from(micros(from, next)) * i128::from(gpus);
        from = next;
    }
}

/// Builds the summary from per-category sums of the non-accelerator lines and the merged accelerator spans.
pub fn finish(mut totals: CategoryTotals, merged: &Merged, outputs: &Outputs, currency: &str) -> LedgerSummary {
    totals.accelerator = merged.cost;
    let totals = totals.normalized();
    let total = totals.sum().normalize();
    let cost_per_job = if outputs.accepted > 0 {
        Some((total / Decimal::from(outputs.accepted)).normalize())
    } else {
        None
    };
    LedgerSummary {
        currency: currency.to_owned(),
        accelerator_hours: merged.gpu_hours(),
        totals,
        total,
        accepted_outputs: outputs.accepted,
        cost_per_job,
        diagnostics: Diagnostics {
            idle_hours: outputs.idle_hours.map(|d| d.normalize()),
            failed_jobs: outputs.failed_jobs,
            rejected_outputs: outputs.rejected,
            retries: outputs.retries,
        },
    }
}

/// The summary of a brief's ledger, computed from its lines (the review engine calls this).
/// The server computes the same figures with the sums in SQL (`repo::summary`).
pub fn summarize(lines: &[LedgerLine], outputs: &Outputs, currency: &str) -> LedgerSummary {
    let mut totals = CategoryTotals::default();
    let mut spans: Vec<Span<'_>> = Vec::new();
    for line in lines {
        match (line.category, line.starts_at, line.ends_at, line.gpus) {
            (Category::Accelerator, Some(start), Some(end), Some(gpus)) => spans.push(Span {
                resource: &line.resource,
                start,
                end,
                gpus,
                amount: line.amount,
            }),
            // Valid accelerator lines always have an interval; a hand-made one without counts its amount.
            (Category::Accelerator, ..) => {}
            (c, ..) => totals.add(c, line.amount),
        }
    }
    let stray: Decimal = lines
        .iter()
        .filter(|l| {
            l.category == Category::Accelerator && (l.starts_at.is_none() || l.ends_at.is_none() || l.gpus.is_none())
        })
        .map(|l| l.amount)
        .sum();
    sort_spans(&mut spans);
    let mut merged = merge_spans(spans);
    merged.cost += stray;
    finish(totals, &merged, outputs, currency)
}

/// Accelerator utilization per decision.md: (billed accelerator hours − idle hours) ÷ billed hours,
/// both in GPU-hours over merged intervals. `None` without an idle figure or without billed hours.
/// It can fall below 0 when the reported idle time exceeds the billed time: a data error worth seeing.
pub fn utilization(summary: &LedgerSummary) -> Option<Decimal> {
    let idle = summary.diagnostics.idle_hours?;
    if summary.accelerator_hours.is_zero() {
        return None;
    }
    Some(((summary.accelerator_hours - idle) / summary.accelerator_hours).normalize())
}

#[cfg(test)]
mod typed_by_people {
    use super::*;

    #[test]
    fn times_without_an_offset_are_utc_and_money_may_carry_its_currency() {
        let typed = as_people_type_it(
            LineInput {
                starts_at: Some("2026-11-20 09:00".into()),
                ends_at: Some("2026-11-20T10:30:15 UTC".into()),
                amount: Some("$2.99".into()),
                rate_per_gpu_hour: Some("1,234.50 usd".into()),
                ..Default::default()
            },
            "USD",
        );
        assert_eq!(typed.starts_at.as_deref(), Some("2026-11-20T09:00:00Z"));
        assert_eq!(typed.ends_at.as_deref(), Some("2026-11-20T10:30:15Z"));
        assert_eq!(typed.amount.as_deref(), Some("2.99"));
        assert_eq!(typed.rate_per_gpu_hour.as_deref(), Some("1234.50"));
    }

    #[test]
    fn a_first_group_of_zero_is_a_decimal_comma_left_to_be_refused() {
        // `0,875` (a EUR rate typed with a decimal comma) read as thousands was 875: 1,000 × the rate.
        for typed in ["0,875", "€0,875", "01,500"] {
            let t = as_people_type_it(
                LineInput {
                    rate_per_gpu_hour: Some(typed.into()),
                    ..Default::default()
                },
                "EUR",
            );
            let kept = t.rate_per_gpu_hour.unwrap();
            assert!(kept.contains(','), "{typed} became {kept}");
        }
        let line = LineInput {
            category: Some("host".into()),
            amount: Some("0,875".into()),
            currency: Some("EUR".into()),
            ..Default::default()
        };
        assert!(validate_line(&as_people_type_it(line, "EUR"), "EUR").is_err());
    }

    #[test]
    fn a_line_spans_a_year_at_most_within_this_century() {
        let line = |start: &str, end: &str| LineInput {
            category: Some("accelerator".into()),
            resource: Some("node-1".into()),
            starts_at: Some(start.into()),
            ends_at: Some(end.into()),
            gpus: Some("8".into()),
            amount: Some("10".into()),
            currency: Some("USD".into()),
            ..Default::default()
        };
        assert!(validate_line(&line("2026-01-01T00:00:00Z", "2027-01-01T00:00:00Z"), "USD").is_ok());
        let errors = validate_line(&line("0001-01-01T00:00:00Z", "9999-12-31T23:59:59Z"), "USD").unwrap_err();
        assert!(
            errors.iter().any(|e| e.message.contains("more than 366 days")),
            "{errors:?}"
        );
        assert!(
            errors.iter().any(|e| e.message.contains("years 2000–2099")),
            "{errors:?}"
        );
        // A mistyped year: 0206 for 2026.
        let errors = validate_line(&line("0206-11-20T09:00:00Z", "2026-11-20T10:00:00Z"), "USD").unwrap_err();
        assert!(errors.iter().any(|e| e.field == "ends_at"), "{errors:?}");
    }

    #[test]
    fn another_currency_a_decimal_comma_and_a_day_first_date_stay_as_typed() {
        let typed = as_people_type_it(
            LineInput {
                category: Some("host".into()),
                amount: Some("€2.99".into()),
                rate_per_gpu_hour: Some("2,99".into()),
                starts_at: Some("20/11/2026 09:00".into()),
                ..Default::default()
            },
            "USD",
        );
        assert_eq!(typed.amount.as_deref(), Some("€2.99"));
        assert_eq!(typed.rate_per_gpu_hour.as_deref(), Some("2,99"));
        assert_eq!(typed.starts_at.as_deref(), Some("20/11/2026 09:00"));
        assert!(validate_line(&typed, "USD").is_err());
    }
}

#[cfg(test)]
mod merged_per_day {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    fn span(start: &str, end: &str, gpus: i32) -> Span<'static> {
        Span {
            resource: "node-1",
            start: at(start),
            end: at(end),
            gpus,
            amount: Decimal::ZERO,
        }
    }

    const HOUR: i128 = 3_600_000_000;

    #[test]
    fn a_line_over_midnight_counts_on_both_days_and_an_overlap_once_at_the_larger_count() {
        let spans = [
            // 22:00–02:00 on 8 GPUs, and 23:00–01:00 on 4 GPUs inside it: the 4 add nothing.
            span("2026-11-30T22:00:00Z", "2026-12-01T02:00:00Z", 8),
            span("2026-11-30T23:00:00Z", "2026-12-01T01:00:00Z", 4),
            // 01:30–03:00 on 16 GPUs: 01:30–02:00 counts at 16, not 8 + 16.
            span("2026-12-01T01:30:00Z", "2026-12-01T03:00:00Z", 16),
        ];
        let days = gpu_micros_per_day(&spans);
        let nov30 = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let dec1 = NaiveDate::from_ymd_opt(2026, 12, 1).unwrap();
        assert_eq!(days.get(&nov30), Some(&(2 * 8 * HOUR)));
        // 00:00–01:30 at 8, 01:30–03:00 at 16.
        assert_eq!(days.get(&dec1), Some(&(3 * 8 * HOUR / 2 + 3 * 16 * HOUR / 2)));
        assert_eq!(days.len(), 2);
        assert_eq!(days.values().sum::<i128>(), merge_spans(spans).gpu_micros);
    }

    #[test]
    fn the_days_add_up_to_the_merge_for_any_mix_of_lines() {
        // A fixed pseudo-random walk: lines of 1 minute to 40 hours, starting anywhere in ten days,
        // on 1 to 8 GPUs, many overlapping.
        let mut seed: u64 = 0x5eed;
        let mut next = |n: u64| {
            seed = seed
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            (seed >> 33) % n
        };
        let origin = at("2026-11-01T00:00:00Z");
        for round in 0..50 {
            let mut spans: Vec<Span<'static>> = (0..(1 + round % 30))
                .map(|_| {
                    let start = origin + chrono::Duration::seconds(next(10 * 86_400) as i64);
                    let end = start + chrono::Duration::seconds(60 + next(40 * 3_600) as i64);
                    Span {
                        resource: "node-1",
                        start,
                        end,
                        gpus: 1 + next(8) as i32,
                        amount: Decimal::ZERO,
                    }
                })
                .collect();
            sort_spans(&mut spans);
            let days = gpu_micros_per_day(&spans);
            assert_eq!(
                days.values().sum::<i128>(),
                merge_spans(spans.clone()).gpu_micros,
                "round {round}"
            );
            assert!(
                days.values().all(|m| *m > 0 && *m <= 8 * 24 * HOUR),
                "round {round}: {days:?}"
            );
        }
    }
}
