//! FinOps FOCUS 1.x cost-and-usage exports (what AWS, Azure, Google Cloud and Oracle write) read as
//! one trial's ledger lines. No I/O: the API streams the body into [`parse`] the way it streams a
//! ledger CSV, under the same caps, with errors named by line and column.
//!
//! - **Which rows.** The trial's rows are those whose `ResourceId` the request lists
//!   (`resources=`) or whose `Tags` carry `rentcheck-trial: <the trial's id>` (a provider
//!   prefix such as `user:` is allowed); both select together. Only the id: a trial's name ("Trial 1")
//!   is the same in many briefs, and an account's export holds every team's spend, whose other
//!   rows are not read further.
//! - **Usage only.** Selected `Usage` rows become lines. `Purchase`, `Tax`, `Credit` and
//!   `Adjustment` rows, and negative usage rows (refunds), are never added: they are listed with
//!   their sums, and so are non-usage rows that name no resource at all (account-wide taxes and
//!   credits), which may concern the trial.
//! - **The line.** `starts_at`/`ends_at` from `ChargePeriodStart`/`ChargePeriodEnd` (a date-time
//!   without an offset is UTC, FOCUS's rule); `amount` from `EffectiveCost` whenever it has a value
//!   (0 included), else `BilledCost`; `BillingCurrency` must be the brief's; `resource` =
//!   `ResourceId`; `description` = `ChargeDescription`. Category from `ServiceCategory`: Storage →
//!   storage, Networking → network, Support → support, Compute → accelerator when the resource has
//!   GPUs and the row is priced by time, anything else → host. A Compute row of a GPU resource that
//!   is priced by the GB (data transfer) is a host line: the ledger counts an hour of a resource's
//!   accelerator time once, so such a row would otherwise vanish into the instance-hour's line.
//! - **GPUs.** From `gpus_per_resource` (one number for every selected resource, or
//!   `RESOURCE=N,…`), else from an instance type the imported offer catalogue prices, read from
//!   the row (an `…InstanceType` column, `SkuPriceDetails`, `ResourceType` or the charge
//!   description). A Compute resource whose GPUs stay unknown is listed: its lines are host lines.
//! - **Identity.** A row is its resource, charge period and charge description (the SHA-256 of
//!   them, kept per trial by the database): re-importing an export adds nothing. Rows of one file
//!   with the same identity are added together into one line.
//!
//! Columns are found by name, never by position; FOCUS's `NULL` cells are empty.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap, HashSet},
    io::Read,
};

use chrono::{DateTime, NaiveDate, NaiveDateTime, SecondsFormat, SubsecRound, Utc};
use rust_decimal::{prelude::ToPrimitive, Decimal};
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::{
    csv::{guarded, shown, CsvError, MAX_ERRORS, MAX_IMPORT_LINES},
    model::{validate_line, Category, LedgerLine, LineInput, MAX_GPUS},
};
use crate::ids::TrialId;
use crate::validation::FieldError;

/// The tag that puts a row on a trial.
pub const TRIAL_TAG: &str = "rentcheck-trial";
/// Columns every export must have.
const REQUIRED: [&str; 6] = [
    "ChargeCategory",
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "BillingCurrency",
    "ResourceId",
    "ServiceCategory",
];
/// Lines quoted per listed group, resources listed as host.
const MAX_QUOTED: usize = 20;

/// GPUs per selected resource, as the request gives them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum GpusPerResource {
    /// Not given: the offer catalogue's instance types say.
    #[default]
    Unknown,
    /// One number for every selected resource.
    All(i32),
    /// `RESOURCE=N,…`.
    Each(HashMap<String, i32>),
}

impl GpusPerResource {
    /// `8`, or `i-0abc=8,i-0def=4`; an error names `gpus_per_resource`.
    pub fn parse(raw: Option<&str>) -> Result<Self, FieldError> {
        let raw = raw.map(str::trim).unwrap_or("");
        if raw.is_empty() {
            return Ok(Self::Unknown);
        }
        let count = |s: &str| {
            match s.trim().parse::<i32>() {
            Ok(n) if (1..=MAX_GPUS).contains(&n) => Ok(n),
            _ => Err(FieldError::new(
                "gpus_per_resource",
                format!(
                    "{} is not a GPU count: give one number (8) for every resource, or RESOURCE=N pairs separated by commas",
                    shown(s.trim())
                ),
            )),
        }
        };
        if !raw.contains('=') {
            return count(raw).map(Self::All);
        }
        let mut each = HashMap::new();
        for pair in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((resource, n)) = pair.rsplit_once('=') else {
                return Err(FieldError::new(
                    "gpus_per_resource",
                    format!("{} is not RESOURCE=N", shown(pair)),
                ));
            };
            each.insert(resource_key(resource.trim()), count(n)?);
        }
        Ok(Self::Each(each))
    }

    fn of(&self, resource: &str) -> Option<i32> {
        match self {
            Self::Unknown => None,
            Self::All(n) => Some(*n),
            Self::Each(m) => m.get(&resource_key(resource)).copied(),
        }
    }
}

/// What the request selects and knows about the trial's resources.
#[derive(Debug, Clone)]
pub struct Selection {
    pub trial_id: TrialId,
    /// `resources=`: the trial's resource ids.
    pub resources: HashSet<String>,
    pub gpus: GpusPerResource,
    /// Instance type (lower case) → GPUs per instance, from the imported offer catalogue.
    pub catalogue: HashMap<String, i32>,
}

impl Selection {
    /// `resources=` as the request gives it: ids separated by commas (or new lines on the form).
    pub fn resources_from(raw: Option<&str>) -> HashSet<String> {
        raw.unwrap_or("")
            .split([',', '\n', '\r'])
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(resource_key)
            .collect()
    }

    fn tagged(&self, tags: &str) -> bool {
        let id = self.trial_id.to_string();
        trial_tags(tags).iter().any(|v| v.eq_ignore_ascii_case(&id))
    }

    /// Whether the row's Tags name another trial (and not this one): such a row is that trial's,
    /// even when its resource is listed in `resources=`.
    fn tagged_for_another_trial(&self, tags: &str) -> bool {
        let tagged = trial_tags(tags);
        !tagged.is_empty() && !self.tagged(tags)
    }
}

/// A resource id as it is compared: Azure's (`/subscriptions/…`) in lower case, since Azure
/// ignores case in them and its exports and `az … --query id` spell them differently
/// (`resourcegroups/…/microsoft.compute` against `resourceGroups/…/Microsoft.Compute`); any other
/// provider's as written.
fn resource_key(id: &str) -> String {
    match id
        .get(..15)
        .is_some_and(|head| head.eq_ignore_ascii_case("/subscriptions/"))
    {
        true => id.to_ascii_lowercase(),
        false => id.to_owned(),
    }
}

/// The trial ids a FOCUS `Tags` cell carries under `rentcheck-trial` (a provider prefix such as
/// `user:` allowed; in any case, as Azure's tag names are).
fn trial_tags(tags: &str) -> Vec<String> {
    if !tags.to_ascii_lowercase().contains(TRIAL_TAG) {
        return Vec::new();
    }
    let Ok(serde_json::Value::Object(map)) = serde_json::from_str::<serde_json::Value>(tags) else {
        return Vec::new();
    };
    let is_trial_tag = |k: &str| k.eq_ignore_ascii_case(TRIAL_TAG);
    map.iter()
        .filter(|(key, _)| is_trial_tag(key) || key.rsplit_once(':').is_some_and(|(_, k)| is_trial_tag(k)))
        .filter_map(|(_, value)| value.as_str().map(|v| v.trim().to_owned()))
        .collect()
}

/// Rows left out of the ledger, by charge category and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct NotAdded {
    /// FOCUS's `ChargeCategory` (Purchase, Tax, Credit, Adjustment, or Usage for refunds).
    pub charge_category: String,
    /// `not usage`, `refund` (a negative usage row) or `tagged for another trial` (a resource
    /// listed in `resources=` whose row's Tags give another trial's id).
    pub reason: &'static str,
    /// `trial`: rows of the trial's resources or tag; `account`: rows naming no resource.
    pub of: &'static str,
    pub rows: u64,
    /// The rows' costs (`EffectiveCost`, else `BilledCost`) added up.
    #[serde(with = "rust_decimal::serde::str")]
    pub sum: Decimal,
    pub currency: String,
    /// The first lines of the file they are on (line 1 is the header).
    pub lines: Vec<u64>,
}

/// A ledger line from the export, with the identity that keeps a re-import from adding it again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FocusLine {
    pub line: LedgerLine,
    /// SHA-256 of resource, charge period start and end (RFC 3339, UTC) and charge description.
    pub identity: [u8; 32],
    /// The first line of the file it comes from.
    pub file_line: u64,
    /// Where the line's time comes from.
    pub time: LineTime,
}

/// Where a line's time (its GPU-hours, once it is accelerator time) comes from. The ledger counts
/// GPU-hours from a line's interval, so a consumed time shorter than the charge period is written
/// as an interval that starts with the charge period and lasts the consumed time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LineTime {
    /// `ConsumedQuantity` in a time `ConsumedUnit`, in microseconds; the charge period ends at `period_end`.
    Consumed { micros: i64, period_end: DateTime<Utc> },
    /// The charge period, for the reason given (listed in the answer when the line is accelerator time).
    ChargePeriod(&'static str),
    /// Not an instance's time (storage, data transfer): the charge period only places the line.
    NotTime,
}

/// Accelerator lines whose GPU-hours come from the charge period, since the row says no usage time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct HoursFromChargePeriod {
    /// Why: `no ConsumedQuantity in a time unit`, or `ConsumedQuantity longer than the charge period`.
    pub reason: &'static str,
    pub rows: u64,
    /// The first lines of the file they are on (line 1 is the header).
    pub lines: Vec<u64>,
}

/// A commitment bought (`Purchase` rows with a `CommitmentDiscountId`: a savings plan, a reservation),
/// listed by its id and never added: it is the account's, whichever trials it later discounts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CommitmentPurchase {
    /// FOCUS's `CommitmentDiscountId`.
    pub commitment_discount_id: String,
    pub rows: u64,
    /// The rows' costs (`EffectiveCost`, else `BilledCost`) added up.
    #[serde(with = "rust_decimal::serde::str")]
    pub sum: Decimal,
    pub currency: String,
    pub lines: Vec<u64>,
}

/// What the provider says a commitment discount did in one usage row: `Used` (it covered this
/// usage), `Unused` (hours of the commitment nothing used) or not said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiscountStatus {
    Used,
    Unused,
}

impl DiscountStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            DiscountStatus::Used => "Used",
            DiscountStatus::Unused => "Unused",
        }
    }

    /// FOCUS's `CommitmentDiscountStatus` (any case); `None` for anything else or empty.
    pub fn parse(raw: &str) -> Option<Self> {
        match raw.trim().to_ascii_lowercase().as_str() {
            "used" => Some(DiscountStatus::Used),
            "unused" => Some(DiscountStatus::Unused),
            _ => None,
        }
    }
}

/// A usage row that names a `CommitmentDiscountId`, kept whoever's trial it served (tagged or not):
/// the commitment whose provider id it is counts it (docs/commitments.md). No cost is kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitmentUse {
    pub commitment_discount_id: String,
    /// `CommitmentDiscountStatus`, when the export says it.
    pub status: Option<DiscountStatus>,
    pub resource: String,
    /// The row's time, as a ledger line's: its consumed time from the charge period's start, else
    /// the charge period.
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    /// GPUs of the resource when the request or the offer catalogue says (else the commitment's
    /// GPUs per node are used).
    pub gpus: Option<i32>,
    /// SHA-256 of the id, the status, the resource, the charge period and the description.
    pub identity: [u8; 32],
}

impl CommitmentUse {
    /// A row of the commitment discount `id` over `[starts_at, ends_at)` inside the charge period
    /// that ends at `period_end`, its identity made as an import makes it.
    pub fn new(
        id: &str,
        status: Option<DiscountStatus>,
        resource: &str,
        (starts_at, ends_at, period_end): (DateTime<Utc>, DateTime<Utc>, DateTime<Utc>),
        description: &str,
        gpus: Option<i32>,
    ) -> Self {
        let key = format!(
            "{id}\u{1f}{}\u{1f}{resource}",
            status.map(DiscountStatus::as_str).unwrap_or("")
        );
        CommitmentUse {
            commitment_discount_id: id.to_owned(),
            status,
            resource: resource.to_owned(),
            starts_at,
            ends_at,
            gpus,
            identity: identity(&key, starts_at, period_end, description),
        }
    }
}

/// An export read for one trial.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FocusImport {
    pub lines: Vec<FocusLine>,
    pub not_added: Vec<NotAdded>,
    /// Compute resources whose GPU count is unknown: their lines are host lines.
    pub counted_as_host: Vec<String>,
    /// Rows read (without the header), and the trial's among them.
    pub rows_read: u64,
    pub rows_selected: u64,
    /// Rows added into an earlier row of the file with the same identity.
    pub rows_combined: u64,
    /// Accelerator lines whose hours are their charge period, by reason.
    pub hours_from_charge_period: Vec<HoursFromChargePeriod>,
    /// Commitments bought in this export, by id.
    pub commitment_purchases: Vec<CommitmentPurchase>,
    /// Usage rows naming a commitment discount (any trial's, or none's), once per identity.
    pub commitment_use: Vec<CommitmentUse>,
}

/// A FOCUS date-time: RFC 3339, or without an offset (UTC), `T` or a space, optional fraction, a
/// trailing `Z` or ` UTC`; a bare date is midnight UTC.
pub fn parse_time(raw: &str) -> Option<DateTime<Utc>> {
    let raw = raw.trim();
    if let Ok(t) = DateTime::parse_from_rfc3339(raw) {
        return Some(t.with_timezone(&Utc));
    }
    for f in ["%Y-%m-%d %H:%M:%S%.f%:z", "%Y-%m-%d %H:%M:%S%.f%z"] {
        if let Ok(t) = DateTime::parse_from_str(raw, f) {
            return Some(t.with_timezone(&Utc));
        }
    }
    let bare = raw
        .strip_suffix("UTC")
        .or_else(|| raw.strip_suffix('Z'))
        .unwrap_or(raw)
        .trim_end();
    [
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M",
        "%Y-%m-%dT%H:%M",
    ]
    .iter()
    .find_map(|f| NaiveDateTime::parse_from_str(bare, f).ok())
    .or_else(|| {
        NaiveDate::parse_from_str(bare, "%Y-%m-%d")
            .ok()
            .and_then(|d| d.and_hms_opt(0, 0, 0))
    })
    .map(|t| t.and_utc())
}

/// A FOCUS money cell: a decimal, or scientific notation as some exports write small amounts.
fn parse_cost(raw: &str) -> Option<Decimal> {
    Decimal::from_str_exact(raw)
        .or_else(|_| Decimal::from_scientific(raw))
        .ok()
}

/// Whether a pricing unit is time (an instance-hour), so the row is the allocation's time. Oracle
/// prices a part of an instance by the hour: its `GPU Per Hour` is the GPUs' time too; its other
/// parts (`OCPU Per Hour`, `Gigabyte Per Hour`) are not, they stay host lines.
fn priced_by_time(unit: &str) -> bool {
    let unit = unit.trim().to_ascii_lowercase();
    let unit = unit.trim_start_matches(|c: char| c.is_ascii_digit() || c == ' ');
    matches!(
        unit,
        "hours" | "hour" | "hrs" | "hr" | "h" | "seconds" | "second" | "secs" | "minutes" | "minute"
    ) || per_hour_of(unit).is_some_and(|part| part.eq_ignore_ascii_case("gpu"))
}

/// What an Oracle "<part> Per Hour" unit counts the hours of (`gpu` in `GPU Per Hour`).
fn per_hour_of(unit: &str) -> Option<&str> {
    const SUFFIX: &str = " per hour";
    let unit = unit.trim();
    let cut = unit.len().checked_sub(SUFFIX.len())?;
    let part = unit.get(..cut)?.trim();
    (unit.get(cut..)?.eq_ignore_ascii_case(SUFFIX) && !part.is_empty()).then_some(part)
}

/// The wall time of a row consumed in `unit`: time itself, or for Oracle's `GPU Per Hour` the
/// GPU-hours over the resource's GPUs (16 GPU-hours of an 8-GPU machine: 2 hours; `None` while its
/// GPUs are unknown, and the charge period stands). Another part's hours (`OCPU Per Hour`) are no
/// wall time: `None`.
fn consumed_micros_of(quantity: Decimal, unit: &str, gpus: Option<i32>) -> Option<i64> {
    match per_hour_of(unit) {
        Some(part) if part.eq_ignore_ascii_case("gpu") => {
            let gpus = Decimal::from(gpus.filter(|n| *n > 0)?);
            micros_of(quantity.checked_div(gpus)?, "hours")
        }
        Some(_) => None,
        None => micros_of(quantity, unit),
    }
}

/// A GPU row's consumed time as wall time. Google Cloud's GPU SKUs ("Nvidia Tesla A100 GPU
/// running in Americas") consume GPU-seconds in `seconds`: 8 GPUs for half an hour are 14,400
/// seconds, which no hour holds, and for five minutes 2,400. A row that names a GPU, whose unit is
/// plain time (not Oracle's `GPU Per Hour`, already per GPU) and that is in seconds as Google
/// writes them, or consumed more than its period, is read as that over its resource's GPUs when
/// that fits the period (8 GPU-hours read as the period were 2× the half hour; 12× for five
/// minutes); otherwise the consumed time stands.
fn gpu_time_as_wall_time(
    consumed: Option<i64>,
    period: i64,
    gpus: Option<i32>,
    description: &str,
    unit: &str,
) -> Option<i64> {
    let m = consumed?;
    let names_gpu = description
        .split(|c: char| !c.is_ascii_alphanumeric())
        .any(|w| w.eq_ignore_ascii_case("gpu") || w.eq_ignore_ascii_case("gpus"));
    let unit = unit.trim();
    let in_seconds = unit.eq_ignore_ascii_case("seconds") || unit.eq_ignore_ascii_case("second");
    let already_per_gpu = per_hour_of(unit).is_some();
    match gpus.filter(|n| *n > 1) {
        Some(n) if names_gpu && !already_per_gpu && (in_seconds || m > period) && m / i64::from(n) <= period => {
            Some(m / i64::from(n))
        }
        _ => Some(m),
    }
}

/// Seconds in one `ConsumedUnit` of time (`Hours`, `Hrs`, `1 Hour`, `Seconds`, `100 Hours`…); `None`
/// when the unit is not time (GB, requests).
fn seconds_per_unit(unit: &str) -> Option<Decimal> {
    let unit = unit.trim().to_ascii_lowercase();
    let word_at = unit
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unit.len());
    let (count, word) = unit.split_at(word_at);
    let count = if count.is_empty() {
        Decimal::ONE
    } else {
        Decimal::from_str_exact(count)
            .ok()
            .filter(|n| n.is_sign_positive() && !n.is_zero())?
    };
    let seconds: i64 = match word.trim() {
        "hours" | "hour" | "hrs" | "hr" | "h" => 3_600,
        "minutes" | "minute" | "mins" | "min" => 60,
        "seconds" | "second" | "secs" | "sec" | "s" => 1,
        "days" | "day" => 86_400,
        _ => return None,
    };
    count.checked_mul(Decimal::from(seconds))
}

/// The reasons a line's hours are its charge period.
const NO_CONSUMED_TIME: &str = "no ConsumedQuantity in a time unit";
const LONGER_THAN_PERIOD: &str = "ConsumedQuantity longer than the charge period";

/// A usage row's time: its consumed time when that fits its charge period, else the period.
fn line_time(consumed_micros: Option<i64>, start: DateTime<Utc>, end: DateTime<Utc>) -> LineTime {
    let period = (end - start).num_microseconds().unwrap_or(i64::MAX);
    match consumed_micros {
        Some(m) if m > 0 && m <= period => LineTime::Consumed {
            micros: m,
            period_end: end,
        },
        Some(m) if m > period => LineTime::ChargePeriod(LONGER_THAN_PERIOD),
        _ => LineTime::ChargePeriod(NO_CONSUMED_TIME),
    }
}

/// The interval a line covers: the consumed time from the charge period's start, else the period.
fn interval_end(time: LineTime, start: DateTime<Utc>, period_end: DateTime<Utc>) -> DateTime<Utc> {
    match time {
        LineTime::Consumed { micros, .. } => start + chrono::Duration::microseconds(micros),
        _ => period_end,
    }
}

fn identity(resource: &str, start: DateTime<Utc>, end: DateTime<Utc>, description: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    for part in [
        resource,
        &start.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        &end.to_rfc3339_opts(SecondsFormat::AutoSi, true),
        description,
    ] {
        h.update(part.as_bytes());
        h.update([0]);
    }
    h.finalize().into()
}

/// Reads an export for the trial `selection` names, in the brief's `currency`. All or nothing:
/// any malformed row of the trial refuses the file, each bad cell named by line and column. One
/// pass over the rows, the state kept between them in [`Gathered`].
pub fn parse(reader: impl Read, currency: &str, selection: &Selection) -> Result<FocusImport, CsvError> {
    let mut rdr = ::csv::ReaderBuilder::new()
        .has_headers(true)
        .flexible(true)
        .trim(::csv::Trim::All)
        .from_reader(guarded(reader));
    let header: Vec<String> = match rdr.headers() {
        Ok(h) => h.iter().map(str::to_owned).collect(),
        Err(e) => {
            return Err(CsvError::Invalid(vec![FieldError::new(
                "line 1",
                format!("could not read the header: {e}"),
            )]))
        }
    };
    let h = FocusHeader::read(header, selection)?;
    let mut g = Gathered::default();
    let mut record = ::csv::StringRecord::new();
    loop {
        match rdr.read_record(&mut record) {
            Ok(false) => break,
            Ok(true) => {}
            Err(e) => {
                let line = e.position().map(|p| p.line()).unwrap_or(0);
                g.errors
                    .push(FieldError::new(format!("line {line}"), format!("unreadable CSV: {e}")));
                break;
            }
        }
        let line = record.position().map(|p| p.line()).unwrap_or(0);
        if record.len() == 1 && record.get(0) == Some("") {
            continue;
        }
        g.out.rows_read += 1;
        if record.len() != h.names.len() {
            g.errors.push(FieldError::new(
                format!("line {line}"),
                format!("expected {} fields, found {}", h.names.len(), record.len()),
            ));
        } else {
            let row = Row {
                record: &record,
                line,
                h: &h,
            };
            g.read_row(&row, currency, selection);
        }
        if g.out.lines.len() > MAX_IMPORT_LINES || g.out.commitment_use.len() > MAX_IMPORT_LINES {
            return Err(CsvError::TooManyLines);
        }
        if g.errors.len() >= MAX_ERRORS {
            g.errors.truncate(MAX_ERRORS);
            g.errors
                .push(FieldError::new("file", format!("stopped after {MAX_ERRORS} errors")));
            break;
        }
    }
    g.finish(h.tags.is_some(), selection)
}

/// Where the export's columns are, found once from its header.
struct FocusHeader {
    names: Vec<String>,
    category: usize,
    start: usize,
    end: usize,
    currency: usize,
    resource: usize,
    service: usize,
    effective: Option<usize>,
    billed: Option<usize>,
    tags: Option<usize>,
    description: Option<usize>,
    unit: Option<usize>,
    consumed_quantity: Option<usize>,
    consumed_unit: Option<usize>,
    commitment: Option<usize>,
    discount_status: Option<usize>,
    /// Where an instance type may be written, most specific first.
    instance: Vec<usize>,
}

impl FocusHeader {
    /// The header's columns; an error when it lacks a FOCUS column, or when nothing can pick the
    /// trial's rows (no Tags column and no resources listed).
    fn read(names: Vec<String>, selection: &Selection) -> Result<Self, CsvError> {
        let find = |name: &str| names.iter().position(|h| h.eq_ignore_ascii_case(name));
        let mut missing: Vec<&str> = REQUIRED.iter().copied().filter(|c| find(c).is_none()).collect();
        let (effective, billed) = (find("EffectiveCost"), find("BilledCost"));
        if effective.is_none() && billed.is_none() {
            missing.push("EffectiveCost (or BilledCost)");
        }
        let tags = find("Tags");
        if !missing.is_empty() {
            return Err(CsvError::Invalid(vec![FieldError::new(
                "line 1",
                format!(
                    "a FOCUS cost-and-usage export names the columns {}; this header lacks {} (is it a FOCUS export?){}",
                    REQUIRED.join(", "),
                    missing.join(", "),
                    crate::prices::detect::belongs_elsewhere(&names, crate::prices::detect::Import::Focus)
                ),
            )]));
        }
        if selection.resources.is_empty() && tags.is_none() {
            return Err(CsvError::Invalid(vec![FieldError::new(
                "resources",
                format!("this export has no Tags column: list the trial's resources (resources=ID,ID…), or export with Tags carrying {TRIAL_TAG}"),
            )]));
        }
        let column = |name: &str| find(name).expect("checked above");
        let mut instance: Vec<usize> = names
            .iter()
            .enumerate()
            .filter(|(_, h)| h.to_ascii_lowercase().ends_with("instancetype"))
            .map(|(i, _)| i)
            .collect();
        instance.extend(
            ["SkuPriceDetails", "ResourceType", "SkuMeter", "ChargeDescription"]
                .iter()
                .filter_map(|c| find(c)),
        );
        Ok(Self {
            category: column("ChargeCategory"),
            start: column("ChargePeriodStart"),
            end: column("ChargePeriodEnd"),
            currency: column("BillingCurrency"),
            resource: column("ResourceId"),
            service: column("ServiceCategory"),
            effective,
            billed,
            tags,
            description: find("ChargeDescription"),
            unit: find("PricingUnit").or_else(|| find("ConsumedUnit")),
            consumed_quantity: find("ConsumedQuantity"),
            consumed_unit: find("ConsumedUnit"),
            commitment: find("CommitmentDiscountId"),
            discount_status: find("CommitmentDiscountStatus"),
            instance,
            names,
        })
    }

    /// An error in the cell at `line` and `column`, named by the column's header.
    fn at(&self, line: u64, column: usize, message: String) -> FieldError {
        FieldError::new(
            format!("line {line}, column {} ({})", column + 1, self.names[column]),
            message,
        )
    }
}

/// One data row of the export, at `line` of the file.
struct Row<'a> {
    record: &'a ::csv::StringRecord,
    line: u64,
    h: &'a FocusHeader,
}

impl<'a> Row<'a> {
    /// The cell in column `c`; FOCUS writes a missing value as NULL.
    fn cell(&self, c: usize) -> &'a str {
        match self.record.get(c).unwrap_or("") {
            "NULL" => "",
            v => v,
        }
    }

    /// The row's cost: its EffectiveCost, else its BilledCost; an error when it has neither or the
    /// one it has is no decimal.
    fn cost(&self, errors: &mut Vec<FieldError>) -> Option<Decimal> {
        let line = self.line;
        let (c, raw) = match self
            .h
            .effective
            .map(|c| (c, self.cell(c)))
            .filter(|(_, v)| !v.is_empty())
        {
            Some(found) => found,
            None => match self.h.billed.map(|c| (c, self.cell(c))).filter(|(_, v)| !v.is_empty()) {
                Some(found) => found,
                None => {
                    errors.push(FieldError::new(
                        format!("line {line}"),
                        "has neither an EffectiveCost nor a BilledCost",
                    ));
                    return None;
                }
            },
        };
        let parsed = parse_cost(raw);
        if parsed.is_none() {
            errors.push(
                self.h
                    .at(line, c, format!("must be a decimal amount (got {})", shown(raw))),
            );
        }
        parsed
    }

    /// The row's cost when it reads, its errors dropped: for rows that are listed, not added.
    fn cost_if_any(&self) -> Option<Decimal> {
        self.cost(&mut Vec::new())
    }

    /// The date-time in column `i`, to the microsecond; an error when it is none.
    fn time(&self, i: usize, errors: &mut Vec<FieldError>) -> Option<DateTime<Utc>> {
        let raw = self.cell(i);
        let t = parse_time(raw).map(|t| t.trunc_subsecs(6));
        if t.is_none() {
            errors.push(self.h.at(
                self.line,
                i,
                format!("must be a date-time such as 2024-09-01T00:00:00Z (got {})", shown(raw)),
            ));
        }
        t
    }

    /// The ConsumedQuantity, when the row gives one; an error when it is no number.
    fn consumed_quantity(&self, errors: &mut Vec<FieldError>) -> Option<Decimal> {
        let c = self.h.consumed_quantity?;
        let consumed = self.cell(c);
        if consumed.is_empty() {
            return None;
        }
        let quantity = parse_cost(consumed);
        if quantity.is_none() {
            errors.push(
                self.h
                    .at(self.line, c, format!("must be a number (got {})", shown(consumed))),
            );
        }
        quantity
    }

    /// The row's currency, in capitals.
    fn currency(&self) -> String {
        self.cell(self.h.currency).to_ascii_uppercase()
    }
}

/// What the rows read so far make: the import and its errors, and what later rows are matched
/// against.
#[derive(Default)]
struct Gathered {
    out: FocusImport,
    errors: Vec<FieldError>,
    by_identity: HashMap<[u8; 32], usize>,
    /// Where each listed group is in `out.not_added` (kept in the order first seen).
    not_added_at: HashMap<(String, &'static str, &'static str, String), usize>,
    /// The commitments bought, by id.
    commitments: BTreeMap<String, CommitmentPurchase>,
    commitment_use_seen: HashSet<[u8; 32]>,
    /// What each line is (parallel to `out.lines`), and the GPUs a resource is known to have.
    kinds: Vec<RowKind>,
    resource_gpus: HashMap<String, i32>,
}

impl Gathered {
    /// One data row: a commitment bought or used is kept whoever's trial it serves; the trial's
    /// rows become lines or are listed as not added; another trial's are left, or listed.
    fn read_row(&mut self, row: &Row<'_>, currency: &str, selection: &Selection) {
        let h = row.h;
        let resource = row.cell(h.resource);
        let charge = row.cell(h.category);
        let for_another_trial = h.tags.is_some_and(|c| selection.tagged_for_another_trial(row.cell(c)));
        let listed = !resource.is_empty() && selection.resources.contains(&resource_key(resource));
        let selected = !for_another_trial && (listed || h.tags.is_some_and(|c| selection.tagged(row.cell(c))));
        // Commitments bought: listed by id whoever's trial they serve.
        let commitment = h.commitment.map(|c| row.cell(c)).unwrap_or("");
        if charge.eq_ignore_ascii_case("Purchase") && !commitment.is_empty() {
            if let Some(sum) = row.cost_if_any() {
                self.purchase(row, commitment, sum);
            }
        }
        // Usage a commitment discount covered, or its unused hours: kept by id whoever's it is.
        if charge.eq_ignore_ascii_case("Usage") && !commitment.is_empty() {
            let status = h.discount_status.map(|c| row.cell(c)).unwrap_or("");
            if let Some(u) = commitment_use(row.record, commitment, status, resource, selection, h) {
                if self.commitment_use_seen.insert(u.identity) {
                    self.out.commitment_use.push(u);
                }
            }
        }
        if selected {
            self.out.rows_selected += 1;
            self.trial_row(row, charge, resource, currency, selection);
            return;
        }
        if listed && for_another_trial {
            // A listed resource whose row another trial's tag claims: that trial's, and said.
            if let Some(sum) = row.cost_if_any() {
                let currency = row.currency();
                self.note(row.line, charge, "tagged for another trial", "trial", sum, &currency);
            }
        }
        // Account-wide charges (taxes, credits) name no resource; the trial may owe a share.
        if resource.is_empty() && !charge.is_empty() && !charge.eq_ignore_ascii_case("Usage") {
            if let Some(sum) = row.cost_if_any() {
                let currency = row.currency();
                self.note(row.line, charge, "not usage", "account", sum, &currency);
            }
        }
    }

    /// A row of the trial: a usage line, a refund or another charge listed as not added, or
    /// errors naming its cells.
    fn trial_row(&mut self, row: &Row<'_>, charge: &str, resource: &str, currency: &str, selection: &Selection) {
        let (h, line) = (row.h, row.line);
        let mut row_errors = Vec::new();
        let charge = match charge.to_ascii_lowercase().as_str() {
            "usage" => "Usage",
            "purchase" => "Purchase",
            "tax" => "Tax",
            "credit" => "Credit",
            "adjustment" => "Adjustment",
            _ => {
                row_errors.push(h.at(
                    line,
                    h.category,
                    format!(
                        "must be Usage, Purchase, Tax, Credit or Adjustment (got {})",
                        shown(charge)
                    ),
                ));
                ""
            }
        };
        let amount = row.cost(&mut row_errors);
        let row_currency = row.cell(h.currency);
        if !row_currency.eq_ignore_ascii_case(currency) {
            row_errors.push(h.at(
                line,
                h.currency,
                format!(
                    "{} is not this brief's currency {currency}; a brief's ledger has one currency (rentcheck converts nothing)",
                    shown(row_currency)
                ),
            ));
        }
        match (charge, amount) {
            _ if !row_errors.is_empty() => self.errors.append(&mut row_errors),
            ("Usage", Some(a)) if a.is_sign_negative() && !a.is_zero() => {
                self.note(line, "Usage", "refund", "trial", a, currency)
            }
            ("Usage", Some(amount)) => {
                if let Some((l, kind)) = usage_line(row, resource, amount, currency, selection, &mut self.errors) {
                    self.add_usage(l, kind, line);
                }
            }
            (other, Some(a)) => self.note(line, other, "not usage", "trial", a, currency),
            (_, None) => {}
        }
    }

    /// A usage line of the trial, added into an earlier line of the same identity if there is one.
    fn add_usage(&mut self, l: FocusLine, kind: RowKind, line: u64) {
        if let (RowKind::ComputeTime, Some(g)) = (kind, l.line.gpus) {
            self.resource_gpus.entry(l.line.resource.clone()).or_insert(g);
        }
        match self.by_identity.get(&l.identity) {
            Some(&i) => match combine(&mut self.out.lines[i], &l) {
                Some(()) => self.out.rows_combined += 1,
                None => self
                    .errors
                    .push(too_large(line, "this row added to the same charge's earlier rows")),
            },
            None => {
                self.by_identity.insert(l.identity, self.out.lines.len());
                self.out.lines.push(l);
                self.kinds.push(kind);
            }
        }
    }

    /// A purchase of `commitment` costing `sum`, added to its earlier purchases in the file.
    fn purchase(&mut self, row: &Row<'_>, commitment: &str, sum: Decimal) {
        let entry = self
            .commitments
            .entry(commitment.to_owned())
            .or_insert_with(|| CommitmentPurchase {
                commitment_discount_id: commitment.to_owned(),
                rows: 0,
                sum: Decimal::ZERO,
                currency: row.currency(),
                lines: Vec::new(),
            });
        match entry.sum.checked_add(sum) {
            Some(total) => {
                entry.sum = total;
                entry.rows += 1;
                if entry.lines.len() < MAX_QUOTED {
                    entry.lines.push(row.line);
                }
            }
            None => self
                .errors
                .push(too_large(row.line, "the purchases of this commitment")),
        }
    }

    /// A row listed as not added, in its group (charge category, reason, whose, currency).
    fn note(
        &mut self,
        line: u64,
        category: &str,
        reason: &'static str,
        of: &'static str,
        sum: Decimal,
        currency: &str,
    ) {
        let key = (category.to_owned(), reason, of, currency.to_owned());
        let out = &mut self.out;
        let i = *self.not_added_at.entry(key).or_insert_with(|| {
            out.not_added.push(NotAdded {
                charge_category: category.to_owned(),
                reason,
                of,
                rows: 0,
                sum: Decimal::ZERO,
                currency: currency.to_owned(),
                lines: Vec::new(),
            });
            out.not_added.len() - 1
        });
        let group = &mut self.out.not_added[i];
        let Some(total) = group.sum.checked_add(sum) else {
            self.errors
                .push(too_large(line, &format!("the {category} rows listed as {reason}")));
            return;
        };
        group.sum = total;
        group.rows += 1;
        if group.lines.len() < MAX_QUOTED {
            group.lines.push(line);
        }
    }

    /// The import, once every row is read: refused on any error or when no row is the trial's;
    /// else with the resources' categories settled and the groups summed.
    fn finish(mut self, has_tags: bool, selection: &Selection) -> Result<FocusImport, CsvError> {
        if !self.errors.is_empty() {
            return Err(CsvError::Invalid(self.errors));
        }
        if self.out.rows_selected == 0 {
            return Err(CsvError::Invalid(vec![FieldError::new(
                "resources",
                format!(
                    "no row of this export is the trial's: none names a listed resource{}",
                    if has_tags {
                        format!(" or carries the tag {TRIAL_TAG}: {}", selection.trial_id)
                    } else {
                        String::new()
                    }
                ),
            )]));
        }
        self.settle_accelerators();
        one_accelerator_line_per_period(&mut self.out.lines);
        let mut out = self.out;
        out.hours_from_charge_period = hours_from_charge_period(&out.lines);
        out.commitment_purchases = self
            .commitments
            .into_values()
            .map(|mut c| {
                c.sum = c.sum.normalize();
                c
            })
            .collect();
        for n in &mut out.not_added {
            n.sum = n.sum.normalize();
        }
        Ok(out)
    }

    /// A resource has GPUs when any of its rows says so (the request, or an instance type the
    /// catalogue prices): its other hours of compute are accelerator time too. The others are
    /// counted as hosts, and named.
    fn settle_accelerators(&mut self) {
        let mut hosts: BTreeSet<String> = BTreeSet::new();
        for (l, kind) in self.out.lines.iter_mut().zip(&self.kinds) {
            if *kind != RowKind::ComputeTime || l.line.category != Category::Host {
                continue;
            }
            match self.resource_gpus.get(&l.line.resource) {
                Some(&g) => {
                    l.line.category = Category::Accelerator;
                    l.line.gpus = Some(g);
                }
                None => {
                    hosts.insert(l.line.resource.clone());
                }
            }
        }
        self.out.counted_as_host = hosts.into_iter().take(MAX_QUOTED).collect();
    }
}

/// A GPU resource's usage rows in one charge period are parts of one bill (GCP's GPU SKU beside the
/// instance's cores, an Azure VM's licence meter beside its compute meter), never one charge twice.
/// As accelerator lines they would all start at the period's start and overlap, and the ledger
/// bills an overlap once, at the costliest line: the other parts' cost would be lost. So the part
/// with the longest time (then the costliest, then the first) stays the accelerator line, which
/// counts the resource's time as the overlap did, and the others become host lines: every part's
/// cost counts in full and no time counts twice.
fn one_accelerator_line_per_period(lines: &mut [FocusLine]) {
    let mut periods: BTreeMap<(String, DateTime<Utc>, DateTime<Utc>), Vec<usize>> = BTreeMap::new();
    for (i, l) in lines.iter().enumerate() {
        let (Category::Accelerator, Some(start), Some(end)) = (l.line.category, l.line.starts_at, l.line.ends_at)
        else {
            continue;
        };
        let period_end = match l.time {
            LineTime::Consumed { period_end, .. } => period_end,
            _ => end,
        };
        periods
            .entry((l.line.resource.clone(), start, period_end))
            .or_default()
            .push(i);
    }
    for parts in periods.into_values().filter(|parts| parts.len() > 1) {
        let length = |i: usize| lines[i].line.ends_at.zip(lines[i].line.starts_at).map(|(e, s)| e - s);
        // A part whose consumed time no period holds (a VM's vCPU-seconds) says nothing of the
        // resource's time: a part whose consumed time fits goes first.
        let fits = |i: usize| !matches!(lines[i].time, LineTime::ChargePeriod(LONGER_THAN_PERIOD));
        let kept = parts.iter().copied().reduce(|best, i| {
            let fitting = fits(i).cmp(&fits(best));
            let longer = length(i).cmp(&length(best));
            let dearer = lines[i].line.amount.cmp(&lines[best].line.amount);
            if fitting.then(longer).then(dearer).is_gt() {
                i
            } else {
                best
            }
        });
        for i in parts.into_iter().filter(|&i| Some(i) != kept) {
            let part = &mut lines[i];
            part.line.category = Category::Host;
            part.line.gpus = None;
            part.line.rate_per_gpu_hour = None;
            part.time = LineTime::NotTime;
        }
    }
}

/// The accelerator lines whose hours are their charge period, grouped by reason.
fn hours_from_charge_period(lines: &[FocusLine]) -> Vec<HoursFromChargePeriod> {
    let mut from_period: BTreeMap<&'static str, HoursFromChargePeriod> = BTreeMap::new();
    for l in lines {
        if let (Category::Accelerator, LineTime::ChargePeriod(reason)) = (l.line.category, l.time) {
            let group = from_period.entry(reason).or_insert_with(|| HoursFromChargePeriod {
                reason,
                rows: 0,
                lines: Vec::new(),
            });
            group.rows += 1;
            if group.lines.len() < MAX_QUOTED {
                group.lines.push(l.file_line);
            }
        }
    }
    from_period.into_values().collect()
}

/// A 422 naming the row whose cost no longer fits an exact decimal.
fn too_large(line: u64, what: &str) -> FieldError {
    FieldError::new(
        format!("line {line}"),
        format!("the sum of {what} is too large to add up exactly: check this row's cost"),
    )
}

/// Adds a row into the earlier line of the same identity (resource, charge period, description):
/// the costs and the consumed times add up. `None` when the cost no longer fits a decimal.
fn combine(into: &mut FocusLine, row: &FocusLine) -> Option<()> {
    into.line.amount = into.line.amount.checked_add(row.line.amount)?;
    if let (LineTime::Consumed { micros: a, period_end }, LineTime::Consumed { micros: b, .. }) = (into.time, row.time)
    {
        let start = into.line.starts_at?;
        into.time = line_time(Some(a.saturating_add(b)), start, period_end);
        into.line.ends_at = Some(interval_end(into.time, start, period_end));
    } else if let LineTime::ChargePeriod(_) = row.time {
        if let (LineTime::Consumed { period_end, .. }, Some(_)) = (into.time, into.line.starts_at) {
            into.line.ends_at = Some(period_end);
        }
        into.time = row.time;
    }
    Some(())
}

/// What a usage row is, for the category its resource's other rows may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RowKind {
    /// Compute priced by time (an instance-hour): accelerator time once the resource has GPUs.
    ComputeTime,
    Other,
}

/// Microseconds of `quantity` of `unit` when the unit is time; out-of-range products are simply
/// longer than any period.
fn micros_of(quantity: Decimal, unit: &str) -> Option<i64> {
    let seconds = seconds_per_unit(unit)?;
    let micros = quantity
        .checked_mul(seconds)?
        .checked_mul(Decimal::from(1_000_000))?
        .round();
    Some(
        micros
            .to_i64()
            .unwrap_or(if micros.is_sign_negative() { 0 } else { i64::MAX }),
    )
}

/// GPUs of a row's resource: from the request, else an instance type the catalogue prices.
fn gpus_of(record: &::csv::StringRecord, resource: &str, selection: &Selection, c: &FocusHeader) -> Option<i32> {
    let cell = |i: usize| match record.get(i).unwrap_or("") {
        "NULL" => "",
        v => v,
    };
    selection.gpus.of(resource).or_else(|| {
        c.instance.iter().find_map(|&i| {
            let tokens: Vec<String> = cell(i)
                .split(|ch: char| !(ch.is_ascii_alphanumeric() || matches!(ch, '.' | '_' | '-')))
                .filter(|t| !t.is_empty())
                .map(str::to_ascii_lowercase)
                .collect();
            tokens
                .iter()
                .find_map(|token| selection.catalogue.get(token).copied())
                .or_else(|| azure_size(&tokens, &selection.catalogue))
        })
    })
}

/// Azure bills write a VM size as its meter name, "ND96amsr A100 v4", where the catalogue (and
/// Azure's API) says `Standard_ND96amsr_A100_v4`: two to four words in a row, read as that name.
fn azure_size(tokens: &[String], catalogue: &HashMap<String, i32>) -> Option<i32> {
    (2..=4).rev().find_map(|n| {
        tokens
            .windows(n)
            .find_map(|words| catalogue.get(&format!("standard_{}", words.join("_"))).copied())
    })
}

/// A usage row naming a commitment discount, as its commitment reads it; `None` when its charge
/// period does not read as times (the row is left alone: it may be no trial's).
fn commitment_use(
    record: &::csv::StringRecord,
    commitment: &str,
    status: &str,
    resource: &str,
    selection: &Selection,
    c: &FocusHeader,
) -> Option<CommitmentUse> {
    let cell = |i: usize| match record.get(i).unwrap_or("") {
        "NULL" => "",
        v => v,
    };
    let start = parse_time(cell(c.start))?.trunc_subsecs(6);
    let period_end = parse_time(cell(c.end))?.trunc_subsecs(6);
    if period_end <= start {
        return None;
    }
    let consumed = c
        .consumed_quantity
        .map(cell)
        .and_then(parse_cost)
        .and_then(|q| micros_of(q, c.consumed_unit.map(cell).unwrap_or("")));
    let end = interval_end(line_time(consumed, start, period_end), start, period_end);
    let description = c.description.map(cell).unwrap_or("").trim();
    Some(CommitmentUse::new(
        commitment,
        DiscountStatus::parse(status),
        resource,
        (start, end, period_end),
        description,
        gpus_of(record, resource, selection, c).filter(|g| (1..=MAX_GPUS).contains(g)),
    ))
}

/// One usage row as a ledger line, checked by the ledger's own rules; errors are named by the
/// export's columns: one FOCUS column per ledger field.
fn usage_line(
    row: &Row<'_>,
    resource: &str,
    amount: Decimal,
    currency: &str,
    selection: &Selection,
    errors: &mut Vec<FieldError>,
) -> Option<(FocusLine, RowKind)> {
    let (c, line, record) = (row.h, row.line, row.record);
    let cell = |i: usize| row.cell(i);
    let mut row_errors = Vec::new();
    let (start, end) = (row.time(c.start, &mut row_errors), row.time(c.end, &mut row_errors));
    let consumed = row.consumed_quantity(&mut row_errors);
    let description = c.description.map(cell).unwrap_or("").trim().to_owned();
    let service = cell(c.service);
    let by_time = c.unit.is_none_or(|u| cell(u).is_empty() || priced_by_time(cell(u)));
    let gpus = gpus_of(record, resource, selection, c);
    let consumed_micros = consumed.and_then(|q| consumed_micros_of(q, c.consumed_unit.map(cell).unwrap_or(""), gpus));
    let compute = service.eq_ignore_ascii_case("compute");
    // A consumed time of 0 is no time, not the charge period: such a row is a host line (its cost,
    // if any, kept) and adds no GPU-hours.
    let no_time = consumed_micros.is_some_and(|m| m == 0);
    let kind = if compute && by_time && !resource.is_empty() && !no_time {
        RowKind::ComputeTime
    } else {
        RowKind::Other
    };
    let category = category_of(service, kind, gpus);
    if !row_errors.is_empty() {
        errors.append(&mut row_errors);
        return None;
    }
    let (start, period_end) = (start?, end?);
    let time = if kind == RowKind::ComputeTime {
        let period = (period_end - start).num_microseconds().unwrap_or(i64::MAX);
        line_time(
            gpu_time_as_wall_time(
                consumed_micros,
                period,
                gpus,
                &description,
                c.consumed_unit.map(cell).unwrap_or(""),
            ),
            start,
            period_end,
        )
    } else {
        LineTime::NotTime
    };
    let end = interval_end(time, start, period_end);
    let stamp = |t: DateTime<Utc>| t.to_rfc3339_opts(SecondsFormat::AutoSi, true);
    let input = LineInput {
        category: Some(category.as_str().to_owned()),
        resource: Some(resource.to_owned()),
        description: Some(description.clone()),
        starts_at: Some(stamp(start)),
        ends_at: Some(stamp(end)),
        gpus: (category == Category::Accelerator).then(|| gpus.unwrap_or_default().to_string()),
        rate_per_gpu_hour: None,
        amount: Some(amount.normalize().to_string()),
        currency: Some(currency.to_owned()),
        trial: None,
    };
    match validate_line(&input, currency) {
        Ok(l) => Some((
            FocusLine {
                identity: identity(resource, start, period_end, &description),
                line: l,
                file_line: line,
                time,
            },
            kind,
        )),
        Err(es) => {
            errors.extend(es.into_iter().map(|e| named_by_column(line, e)));
            None
        }
    }
}

/// The ledger category of a usage row: compute priced by time is accelerator time when its
/// resource has GPUs.
fn category_of(service: &str, kind: RowKind, gpus: Option<i32>) -> Category {
    match service.to_ascii_lowercase().as_str() {
        "compute" if gpus.is_some() && kind == RowKind::ComputeTime => Category::Accelerator,
        "compute" => Category::Host,
        "storage" => Category::Storage,
        "networking" | "network" => Category::Network,
        "support" => Category::Support,
        _ => Category::Host,
    }
}

/// A ledger error of a usage row, named by the export's column it came from.
fn named_by_column(line: u64, e: FieldError) -> FieldError {
    let column = match e.field.as_str() {
        "resource" => Some("ResourceId"),
        "description" => Some("ChargeDescription"),
        "starts_at" => Some("ChargePeriodStart"),
        "ends_at" => Some("ChargePeriodEnd"),
        "amount" => Some("EffectiveCost"),
        "currency" => Some("BillingCurrency"),
        _ => None,
    };
    match column {
        Some(name) => FieldError::new(format!("line {line} ({name})"), e.message),
        None => FieldError::new(format!("line {line}"), format!("{}: {}", e.field, e.message)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    const HEADER: &str = "BilledCost,EffectiveCost,BillingCurrency,ChargeCategory,ChargeDescription,\
ChargePeriodStart,ChargePeriodEnd,PricingUnit,ResourceId,ServiceCategory,Tags\n";

    fn trial() -> Selection {
        Selection {
            trial_id: TrialId::from(Uuid::from_u128(7)),
            resources: HashSet::new(),
            gpus: GpusPerResource::default(),
            catalogue: HashMap::new(),
        }
    }

    #[test]
    fn times_without_an_offset_are_utc() {
        let t = |s: &str| parse_time(s).map(|t| t.to_rfc3339());
        let nine = Some("2024-09-18T22:00:00+00:00".to_owned());
        assert_eq!(t("2024-09-18 22:00:00"), nine);
        assert_eq!(t("2024-09-18T22:00:00Z"), nine);
        assert_eq!(t("2024-09-18T22:00:00.000Z"), nine);
        assert_eq!(t("2024-09-18 22:00:00 UTC"), nine);
        assert_eq!(t("2024-09-19T00:00:00+02:00"), nine);
        assert_eq!(t("2024-09-19 00:00:00+02:00"), nine);
        assert_eq!(t("2024-09-18").as_deref(), Some("2024-09-18T00:00:00+00:00"));
        assert_eq!(t("18/09/2024 22:00"), None);
    }

    #[test]
    fn gpus_per_resource_is_one_number_or_pairs() {
        assert_eq!(GpusPerResource::parse(None).unwrap(), GpusPerResource::Unknown);
        assert_eq!(GpusPerResource::parse(Some(" 8 ")).unwrap(), GpusPerResource::All(8));
        let each = GpusPerResource::parse(Some("i-1=8, arn:aws:x=y:i-2=4")).unwrap();
        assert_eq!(each.of("i-1"), Some(8));
        assert_eq!(each.of("arn:aws:x=y:i-2"), Some(4), "the last = splits");
        assert_eq!(each.of("i-3"), None);
        for bad in ["0", "eight", "i-1=", "i-1=2.5"] {
            assert_eq!(
                GpusPerResource::parse(Some(bad)).unwrap_err().field,
                "gpus_per_resource",
                "{bad}"
            );
        }
    }

    #[test]
    fn the_trials_rows_become_lines_and_the_rest_is_listed() {
        // Tagged with the trial's id (Uuid::from_u128(7)); a name is not enough.
        let tag = r#""{""user:rentcheck-trial"": ""00000000-0000-0000-0000-000000000007"", ""team"": ""ml""}""#;
        let other = r#""{""rentcheck-trial"": ""Trial 1""}""#;
        let text = format!(
            "{HEADER}\
10.00,9.00,USD,Usage,$1.25 per p4d.24xlarge Instance Hour,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-gpu,Compute,NULL\n\
0.50,0.50,USD,Usage,$0.09 per GB data transfer out,2024-09-01 00:00:00,2024-09-01 01:00:00,GB,i-gpu,Compute,NULL\n\
2.00,NULL,USD,Usage,$0.10 per GB-month gp3,2024-09-01 00:00:00,2024-09-02 00:00:00,GB-Mo,vol-1,Storage,{tag}\n\
4.00,0,USD,Usage,covered by a savings plan,2024-09-01 01:00:00,2024-09-01 02:00:00,Hours,i-gpu,Compute,NULL\n\
0.10,0.10,USD,Usage,$0.096 per On Demand Linux m5.large Instance Hour,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-cpu,Compute,NULL\n\
1.00,1.00,USD,Tax,VAT,2024-09-01 00:00:00,2024-10-01 00:00:00,NULL,NULL,NULL,NULL\n\
-3.00,-3.00,USD,Credit,Promotional credit,2024-09-01 00:00:00,2024-09-01 01:00:00,NULL,i-gpu,Compute,NULL\n\
-1.50,-1.50,USD,Usage,refund,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-gpu,Compute,NULL\n\
99.00,99.00,EUR,Usage,someone else's,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-other,Compute,{other}\n\
10.00,9.00,USD,Usage,$1.25 per p4d.24xlarge Instance Hour,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-gpu,Compute,NULL\n"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some("i-gpu,\ni-cpu"));
        selection.catalogue.insert("p4d.24xlarge".into(), 8);
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        let lines: Vec<(Category, &str, Option<i32>, String, u64)> = got
            .lines
            .iter()
            .map(|l| {
                (
                    l.line.category,
                    l.line.resource.as_str(),
                    l.line.gpus,
                    l.line.amount.to_string(),
                    l.file_line,
                )
            })
            .collect();
        assert_eq!(
            lines,
            [
                // EffectiveCost wins; the same row again at line 11 is added into it (9 + 9).
                (Category::Accelerator, "i-gpu", Some(8), "18".into(), 2),
                // Data transfer of the GPU instance is priced by the GB: a host line.
                (Category::Host, "i-gpu", None, "0.5".into(), 3),
                // Selected by its tag; EffectiveCost NULL → BilledCost.
                (Category::Storage, "vol-1", None, "2".into(), 4),
                // An EffectiveCost of 0 counts; the row names no instance type, but its resource has
                // 8 GPUs (line 2), so its hour is accelerator time.
                (Category::Accelerator, "i-gpu", Some(8), "0".into(), 5),
                // An instance type the catalogue does not price: its GPUs are unknown.
                (Category::Host, "i-cpu", None, "0.1".into(), 6),
            ]
        );
        assert_eq!(got.rows_combined, 1);
        assert_eq!(got.counted_as_host, ["i-cpu"]);
        let start = &got.lines[0].line;
        assert_eq!(
            (
                start.starts_at.unwrap().to_rfc3339(),
                start.ends_at.unwrap().to_rfc3339()
            ),
            ("2024-09-01T00:00:00+00:00".into(), "2024-09-01T01:00:00+00:00".into())
        );
        let listed: Vec<(&str, &str, &str, String)> = got
            .not_added
            .iter()
            .map(|n| (n.charge_category.as_str(), n.reason, n.of, n.sum.to_string()))
            .collect();
        assert_eq!(
            listed,
            [
                ("Tax", "not usage", "account", "1".into()),
                ("Credit", "not usage", "trial", "-3".into()),
                ("Usage", "refund", "trial", "-1.5".into()),
            ]
        );
        assert_eq!((got.rows_read, got.rows_selected), (10, 8));
    }

    #[test]
    fn a_listed_resource_whose_row_is_tagged_for_another_trial_is_left_to_that_trial_and_listed() {
        let mine = TrialId::from(Uuid::from_u128(7));
        let theirs = TrialId::from(Uuid::from_u128(8));
        let text = format!(
            "{HEADER}\
10.00,10.00,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-1,Compute,\"{{\"\"rentcheck-trial\"\": \"\"{mine}\"\"}}\"\n\
20.00,20.00,USD,Usage,x,2024-09-01 01:00:00,2024-09-01 02:00:00,Hours,i-1,Compute,\"{{\"\"user:rentcheck-trial\"\": \"\"{theirs}\"\"}}\"\n\
30.00,30.00,USD,Usage,x,2024-09-01 02:00:00,2024-09-01 03:00:00,Hours,i-1,Compute,NULL\n"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some("i-1"));
        let import = parse(text.as_bytes(), "USD", &selection).unwrap();
        // Its own tag and an untagged row of the listed resource: 10 + 30; the 20 is the other trial's.
        let total: Decimal = import.lines.iter().map(|l| l.line.amount).sum();
        assert_eq!(total, Decimal::from(40));
        assert_eq!(import.rows_selected, 2);
        let other = import
            .not_added
            .iter()
            .find(|n| n.reason == "tagged for another trial")
            .expect("listed");
        assert_eq!(
            (other.rows, other.sum, other.lines.clone()),
            (1, Decimal::from(20), vec![3])
        );
    }

    /// Azure ignores case in resource ids and tag names, and spells them differently in its
    /// exports (`resourcegroups/…/microsoft.compute`) and in `az … --query id`.
    #[test]
    fn azure_resource_ids_and_tag_names_match_in_any_case() {
        let mine = TrialId::from(Uuid::from_u128(7));
        let text = format!(
            "{HEADER}\
10.00,10.00,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm1,Compute,NULL\n\
20.00,20.00,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,/subscriptions/s/resourcegroups/rg/providers/microsoft.compute/virtualmachines/vm2,Compute,\"{{\"\"Rentcheck-Trial\"\": \"\"{mine}\"\"}}\"\n\
40.00,40.00,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-ABC,Compute,NULL\n"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1,i-abc",
        ));
        selection.gpus = GpusPerResource::parse(Some(
            "/subscriptions/s/resourceGroups/rg/providers/Microsoft.Compute/virtualMachines/vm1=8",
        ))
        .unwrap();
        let import = parse(text.as_bytes(), "USD", &selection).unwrap();
        // vm1 listed in another case, vm2 tagged with the tag name capitalised; an AWS id is
        // compared as written (i-ABC is not i-abc).
        let total: Decimal = import.lines.iter().map(|l| l.line.amount).sum();
        assert_eq!(total, Decimal::from(30));
        assert_eq!(import.rows_selected, 2);
        let vm1 = import
            .lines
            .iter()
            .find(|l| l.line.amount == Decimal::from(10))
            .unwrap();
        assert_eq!(vm1.line.gpus, Some(8), "its GPUs found under the id as given");
    }

    #[test]
    fn another_currency_or_a_bad_cell_of_the_trial_refuses_the_file_by_line_and_column() {
        let text = format!(
            "{HEADER}\
1.00,1.00,EUR,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-1,Compute,NULL\n\
1.00,one,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-1,Compute,NULL\n\
1.00,1.00,USD,Usage,x,yesterday,2024-09-01 01:00:00,Hours,i-1,Compute,NULL\n\
1.00,1.00,USD,Refund,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-1,Compute,NULL\n\
1.00,1.00,GBP,Usage,not ours,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-9,Compute,NULL\n"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some("i-1"));
        let Err(CsvError::Invalid(errors)) = parse(text.as_bytes(), "USD", &selection) else {
            panic!("refused")
        };
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "line 2, column 3 (BillingCurrency)",
                "line 3, column 2 (EffectiveCost)",
                "line 4, column 6 (ChargePeriodStart)",
                "line 5, column 4 (ChargeCategory)",
            ]
        );
        assert!(errors[0].message.contains("EUR"), "{:?}", errors[0]);
    }

    #[test]
    fn columns_are_found_by_name_and_a_file_without_the_trial_is_refused() {
        // Another order, lower-case names, no Tags and no PricingUnit.
        let text =
            "resourceid,servicecategory,chargeperiodend,chargeperiodstart,billingcurrency,chargecategory,billedcost\n\
                    i-1,Compute,2024-09-01T01:00:00Z,2024-09-01T00:00:00Z,USD,Usage,3.5\n";
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some("i-1"));
        selection.gpus = GpusPerResource::All(2);
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        assert_eq!(got.lines[0].line.category, Category::Accelerator);
        assert_eq!(got.lines[0].line.gpus, Some(2));
        selection.resources = Selection::resources_from(Some("i-2"));
        let Err(CsvError::Invalid(e)) = parse(text.as_bytes(), "USD", &selection) else {
            panic!("no row of the trial")
        };
        assert_eq!(e[0].field, "resources");
        selection.resources.clear();
        let Err(CsvError::Invalid(e)) = parse(text.as_bytes(), "USD", &selection) else {
            panic!("no Tags column and no resources")
        };
        assert!(e[0].message.contains("no Tags column"), "{e:?}");
        let Err(CsvError::Invalid(e)) = parse(&b"InstanceType,Price\nx,1\n"[..], "USD", &trial()) else {
            panic!("not FOCUS")
        };
        assert!(e[0].message.contains("ChargePeriodStart"), "{e:?}");
    }

    /// A shaped export from tests/fixtures/focus (see its PROVENANCE.md), tagged with the trial's id.
    fn shaped(text: &str) -> String {
        text.replace("TRIAL_ID", "00000000-0000-0000-0000-000000000007")
    }

    /// The accelerator GPU-hours and cost the ledger's summary gives for these lines.
    /// `rows` of an export with the consumed-time columns, read for `resource` with `gpus` GPUs.
    fn usage_of(resource: &str, gpus: i32, rows: &str) -> FocusImport {
        let text = format!(
            "BilledCost,BillingCurrency,ChargeCategory,ChargeDescription,ChargePeriodStart,ChargePeriodEnd,\
ConsumedQuantity,ConsumedUnit,ResourceId,ServiceCategory\n{rows}"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some(resource));
        selection.gpus = GpusPerResource::All(gpus);
        parse(text.as_bytes(), "USD", &selection).unwrap()
    }

    fn hours_and_cost(import: &FocusImport) -> (Decimal, Decimal) {
        let lines: Vec<LedgerLine> = import.lines.iter().map(|l| l.line.clone()).collect();
        let s = super::super::model::summarize(&lines, &Default::default(), "USD");
        (s.accelerator_hours, s.totals.accelerator)
    }

    /// Oracle prices a GPU shape per GPU-hour (`GPU Per Hour`, as its sample rows price OCPUs and
    /// memory per hour): 4 GPU-hours of an 8-GPU machine in an hour's row are half an hour of it, an
    /// accelerator line of 4 GPU-hours (it was a host line with none). An `OCPU Per Hour` row of the
    /// same machine is no GPU time: a host line, which never outlasts the GPUs' own line.
    #[test]
    fn oracle_rows_priced_per_gpu_hour_are_accelerator_time() {
        let gpu = "40.00,USD,Usage,Compute - GPU - H100,2024-09-11 08:00:00,2024-09-11 09:00:00,4,GPU Per Hour,\
ocid1.instance.oc1.gpu1,Compute\n";
        let got = usage_of("ocid1.instance.oc1.gpu1", 8, gpu);
        assert_eq!(got.lines[0].line.category, Category::Accelerator);
        assert_eq!(hours_and_cost(&got), (Decimal::from(4), Decimal::from(40)));
        assert!(got.hours_from_charge_period.is_empty());
        let ocpu = "3.00,USD,Usage,Standard - E5,2024-09-11 08:00:00,2024-09-11 09:00:00,8,OCPU Per Hour,\
ocid1.instance.oc1.gpu1,Compute\n";
        let got = usage_of("ocid1.instance.oc1.gpu1", 8, &format!("{gpu}{ocpu}"));
        let categories: Vec<Category> = got.lines.iter().map(|l| l.line.category).collect();
        assert_eq!(categories, [Category::Accelerator, Category::Host]);
        assert_eq!(hours_and_cost(&got), (Decimal::from(4), Decimal::from(40)));
    }

    #[test]
    fn an_aws_per_second_export_counts_the_seconds_used_not_the_hours_billed() {
        let text = shaped(include_str!("../../tests/fixtures/focus/aws-focus-1.2-per-second.csv"));
        let mut selection = trial();
        selection.catalogue.insert("p5.48xlarge".into(), 8);
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        // A p5.48xlarge (8 H100) that ran 09:33:20–12:53:20, billed per second in four hourly rows:
        // ConsumedQuantity 0.4444444444 + 1 + 1 + 0.8888888889 Hrs = 1,600 + 3,600 + 3,600 + 3,200 s
        // = 12,000 s = 3.3333 h; × 8 GPUs = 26.67 GPU-hours. The charge periods (4 h × 8) would say 32.
        let (hours, cost) = hours_and_cost(&got);
        assert_eq!(hours.round_dp(2), Decimal::new(2667, 2));
        // EffectiveCost 43.69777777 + 98.32 + 98.32 + 87.39555556 = 327.73333333.
        assert_eq!(cost, Decimal::new(32_773_333_333, 8));
        // Priced from its own bill: 327.73333333 ÷ 26.6667 = 12.29 per GPU-hour (98.32 per hour for
        // the 8 GPUs, the p5's on-demand price), where the charge periods gave 327.7333 ÷ 32 = 10.24.
        assert_eq!((cost / hours).round_dp(2), Decimal::new(1229, 2));
        // The first hour's line lasts the 26 min 40 s used, from the charge period's start.
        let first = &got.lines[0].line;
        assert_eq!(
            (
                first.starts_at.unwrap().to_rfc3339(),
                first.ends_at.unwrap().to_rfc3339()
            ),
            ("2025-02-10T09:00:00+00:00".into(), "2025-02-10T09:26:40+00:00".into())
        );
        assert!(
            got.hours_from_charge_period.is_empty(),
            "{:?}",
            got.hours_from_charge_period
        );
        // The Savings Plan bought that hour is listed by its id (BilledCost 10, EffectiveCost 0).
        assert_eq!(
            got.commitment_purchases,
            [CommitmentPurchase {
                commitment_discount_id:
                    "arn:aws:savingsplans::123456789012:savingsplan/3f2b6a1c-8d4e-4f7a-9b0c-1d2e3f4a5b6c".into(),
                rows: 1,
                sum: Decimal::ZERO,
                currency: "USD".into(),
                lines: vec![7],
            }]
        );
    }

    #[test]
    fn usage_rows_naming_a_commitment_discount_are_kept_whoever_they_serve() {
        let header = "BilledCost,EffectiveCost,BillingCurrency,ChargeCategory,ChargeDescription,ChargePeriodStart,\
ChargePeriodEnd,PricingUnit,ConsumedQuantity,ConsumedUnit,ResourceId,ServiceCategory,Tags,CommitmentDiscountId,\
CommitmentDiscountStatus\n";
        let tag = r#""{""rentcheck-trial"": ""00000000-0000-0000-0000-000000000007""}""#;
        let text = format!(
            "{header}\
98.32,61.00,USD,Usage,p5 reserved hour,2026-09-01 00:00:00,2026-09-01 01:00:00,Hours,1,Hours,i-gpu,Compute,{tag},ri-1,Used\n\
98.32,61.00,USD,Usage,p5 reserved hour,2026-09-01 01:00:00,2026-09-01 02:00:00,Hours,0.5,Hours,i-untagged,Compute,NULL,ri-1,used\n\
0,61.00,USD,Usage,unused reservation,2026-09-01 01:00:00,2026-09-01 02:00:00,Hours,NULL,NULL,NULL,Compute,NULL,ri-1,Unused\n\
0,61.00,USD,Usage,unused reservation,2026-09-01 01:00:00,2026-09-01 02:00:00,Hours,NULL,NULL,NULL,Compute,NULL,ri-1,Unused\n\
5.00,5.00,USD,Usage,someone's savings plan,2026-09-01 00:00:00,2026-09-01 01:00:00,Hours,1,Hours,i-x,Compute,NULL,sp-9,NULL\n\
7000,7000,USD,Purchase,the reservation,2026-09-01 00:00:00,2026-10-01 00:00:00,NULL,NULL,NULL,NULL,Compute,NULL,ri-1,NULL\n"
        );
        let mut selection = trial();
        selection.gpus = GpusPerResource::Each(HashMap::from([("i-gpu".to_owned(), 8)]));
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        // The trial's lines are as before: only the tagged row (the commitment id selects nothing).
        assert_eq!(got.lines.len(), 1);
        assert_eq!(got.lines[0].line.resource, "i-gpu");
        type Kept<'a> = (&'a str, Option<DiscountStatus>, &'a str, String, String, Option<i32>);
        let kept: Vec<Kept<'_>> = got
            .commitment_use
            .iter()
            .map(|u| {
                (
                    u.commitment_discount_id.as_str(),
                    u.status,
                    u.resource.as_str(),
                    u.starts_at.to_rfc3339(),
                    u.ends_at.to_rfc3339(),
                    u.gpus,
                )
            })
            .collect();
        assert_eq!(
            kept,
            [
                (
                    "ri-1",
                    Some(DiscountStatus::Used),
                    "i-gpu",
                    "2026-09-01T00:00:00+00:00".into(),
                    "2026-09-01T01:00:00+00:00".into(),
                    Some(8)
                ),
                // Tagged to no trial, its status in lower case; 0.5 h used from the period's start.
                (
                    "ri-1",
                    Some(DiscountStatus::Used),
                    "i-untagged",
                    "2026-09-01T01:00:00+00:00".into(),
                    "2026-09-01T01:30:00+00:00".into(),
                    None
                ),
                // The unused hour, once: the same row twice is one identity.
                (
                    "ri-1",
                    Some(DiscountStatus::Unused),
                    "",
                    "2026-09-01T01:00:00+00:00".into(),
                    "2026-09-01T02:00:00+00:00".into(),
                    None
                ),
                (
                    "sp-9",
                    None,
                    "i-x",
                    "2026-09-01T00:00:00+00:00".into(),
                    "2026-09-01T01:00:00+00:00".into(),
                    None
                ),
            ]
        );
        // The purchase is listed as before, never kept as use.
        assert_eq!(got.commitment_purchases.len(), 1);
    }

    #[test]
    fn an_azure_daily_export_counts_the_hours_used_not_the_day() {
        let text = shaped(include_str!("../../tests/fixtures/focus/azure-focus-1.0-daily.csv"));
        let mut selection = trial();
        selection.gpus = GpusPerResource::All(8);
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        // An ND96amsr_A100_v4 (8 A100 80GB) that ran 15.5 h on each of two days, one row per day:
        // 2 × 15.5 h × 8 GPUs = 248 GPU-hours, not 2 × 24 h × 8 = 384.
        let (hours, cost) = hours_and_cost(&got);
        assert_eq!(hours, Decimal::from(248));
        // 2 × 15.5 h × 32.77 = 1,015.87.
        assert_eq!(cost, Decimal::new(101_587, 2));
        // Priced from its own bill: 1,015.87 ÷ 248 = 4.09625 per GPU-hour, × 8 GPUs = 32.77 an hour
        // for the VM (its pay-as-you-go price); from the charge periods, 1,015.87 ÷ 384 × 8 = 21.16.
        let per_gpu_hour = cost / hours;
        assert_eq!(per_gpu_hour, Decimal::new(409_625, 5));
        assert_eq!((per_gpu_hour * Decimal::from(8)).round_dp(2), Decimal::new(3277, 2));
        // The disk is storage, priced per month: its line keeps its charge period (a day).
        let disk = got.lines.iter().find(|l| l.line.category == Category::Storage).unwrap();
        assert_eq!(disk.line.amount, Decimal::new(4096, 3));
        assert!(got.hours_from_charge_period.is_empty());
        // The reservation bought is listed by its id, never added.
        assert_eq!(got.commitment_purchases.len(), 1);
        assert!(got.commitment_purchases[0]
            .commitment_discount_id
            .ends_with("/reservations/0b1c2d3e-4f5a-4b6c-9d7e-8f9a0b1c2d3e"));
        assert_eq!(got.commitment_purchases[0].sum, Decimal::new(17_684_512, 2));
        assert_eq!(got.lines.len(), 3);
    }

    /// An Azure bill names the VM size by its meter, "ND96amsr A100 v4"; the catalogue by its API
    /// name, `Standard_ND96amsr_A100_v4`. Without `gpus_per_resource` the catalogue still gives the
    /// 8 GPUs: 2 × 15.5 h × 8 = 248 GPU-hours (the rows were host lines).
    #[test]
    fn an_azure_meter_name_finds_its_vm_size_in_the_catalogue() {
        let text = shaped(include_str!("../../tests/fixtures/focus/azure-focus-1.0-daily.csv"));
        let mut selection = trial();
        selection.catalogue.insert("standard_nd96amsr_a100_v4".into(), 8);
        let got = parse(text.as_bytes(), "USD", &selection).unwrap();
        assert_eq!(hours_and_cost(&got).0, Decimal::from(248));
        assert!(got.counted_as_host.is_empty(), "{:?}", got.counted_as_host);
    }

    #[test]
    fn a_row_without_a_consumed_time_counts_its_charge_period_and_is_listed() {
        let got = usage_of(
            "i-1",
            2,
            "10,USD,Usage,a,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,,,i-1,Compute\n\
10,USD,Usage,b,2025-02-10T01:00:00Z,2025-02-10T02:00:00Z,2,Hours,i-1,Compute\n\
10,USD,Usage,c,2025-02-10T02:00:00Z,2025-02-10T03:00:00Z,1800,Seconds,i-1,Compute\n\
10,USD,Usage,c,2025-02-10T02:00:00Z,2025-02-10T03:00:00Z,900,Seconds,i-1,Compute\n",
        );
        // Line 2: no consumed time → its hour. Line 3: 2 h in a 1-hour period → its hour. Lines 4 and
        // 5 are one charge (same resource, period, description): 1,800 + 900 s = 0.75 h.
        // (1 + 1 + 0.75) h × 2 GPUs = 5.5 GPU-hours.
        assert_eq!(hours_and_cost(&got).0, Decimal::new(55, 1));
        assert_eq!(
            got.hours_from_charge_period,
            [
                HoursFromChargePeriod {
                    reason: LONGER_THAN_PERIOD,
                    rows: 1,
                    lines: vec![3]
                },
                HoursFromChargePeriod {
                    reason: NO_CONSUMED_TIME,
                    rows: 1,
                    lines: vec![2]
                },
            ]
        );
        assert_eq!(got.rows_combined, 1);
    }

    /// GCP bills a GPU VM's hour as several SKUs of one resource (the GPUs, the instance's cores):
    /// one accelerator line per period (the longest, then the dearest), the other parts host lines,
    /// so every part's cost counts. (As overlapping accelerator lines the cores' cost was dropped.)
    #[test]
    fn parts_of_one_resources_hour_keep_their_cost_and_count_its_time_once() {
        let vm = "//compute.googleapis.com/projects/p/zones/us-central1-a/instances/vm-1";
        let got = usage_of(
            vm,
            2,
            &format!(
                "5.86,USD,Usage,Nvidia Tesla A100 GPU running in Americas,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,1,Hours,{vm},Compute\n\
0.37,USD,Usage,A2 Instance Core running in Americas,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,1,Hours,{vm},Compute\n\
5.86,USD,Usage,Nvidia Tesla A100 GPU running in Americas,2025-02-10T01:00:00Z,2025-02-10T02:00:00Z,0.5,Hours,{vm},Compute\n\
0.185,USD,Usage,A2 Instance Core running in Americas,2025-02-10T01:00:00Z,2025-02-10T02:00:00Z,0.5,Hours,{vm},Compute\n"
            ),
        );
        // (1 h + 0.5 h) × 2 GPUs = 3 GPU-hours, counted once; the GPUs' 5.86 + 5.86 = 11.72 is
        // accelerator cost, the cores' 0.37 + 0.185 host cost: 12.275 in all, none dropped.
        let lines: Vec<LedgerLine> = got.lines.iter().map(|l| l.line.clone()).collect();
        let s = super::super::model::summarize(&lines, &Default::default(), "USD");
        assert_eq!(s.accelerator_hours, Decimal::from(3));
        assert_eq!(s.totals.accelerator, Decimal::new(1172, 2));
        assert_eq!(s.total, Decimal::new(12_275, 3));
        let kinds: Vec<(Category, &str)> = got
            .lines
            .iter()
            .map(|l| (l.line.category, &l.line.description[..6]))
            .collect();
        assert_eq!(
            kinds,
            [
                (Category::Accelerator, "Nvidia"),
                (Category::Host, "A2 Ins"),
                (Category::Accelerator, "Nvidia"),
                (Category::Host, "A2 Ins"),
            ]
        );
    }

    /// Google Cloud's FOCUS view writes `usage.amount` in `usage.unit`: GPU-seconds for a GPU SKU,
    /// vCPU-seconds for the cores (its published FOCUS v1.0 BigQuery view; bufferapp's billing
    /// notes show `unit seconds`, `usage_amount 184590.0` for an instance core). An a3-highgpu-8g
    /// that ran half an hour: 4 GPU-hours (it was 8: both parts overran the hour, and the longest,
    /// the cores' hour, was kept).
    #[test]
    fn gpu_seconds_of_a_gpu_sku_are_the_vms_half_hour() {
        let vm = "//compute.googleapis.com/projects/p/zones/us-central1-a/instances/vm-8";
        let got = usage_of(
            vm,
            8,
            &format!(
                "44.05,USD,Usage,Nvidia H100 80GB GPU running in Americas,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,14400,seconds,{vm},Compute
3.10,USD,Usage,A3 Instance Core running in Americas,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,374400,seconds,{vm},Compute
"
            ),
        );
        let lines: Vec<LedgerLine> = got.lines.iter().map(|l| l.line.clone()).collect();
        let s = super::super::model::summarize(&lines, &Default::default(), "USD");
        assert_eq!(s.accelerator_hours, Decimal::from(4));
        assert_eq!(s.totals.accelerator, Decimal::new(4405, 2));
        assert_eq!(s.total, Decimal::new(4715, 2));
        assert_eq!(got.lines[1].line.category, Category::Host);
        // Five minutes: 2,400 GPU-seconds fit an hour, and are still 8 GPUs' (0.67 GPU-hours, not
        // 5.33).
        let got = usage_of(
            vm,
            8,
            &format!(
                "7.34,USD,Usage,Nvidia H100 80GB GPU running in Americas,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,2400,seconds,{vm},Compute\n"
            ),
        );
        assert_eq!(hours_and_cost(&got).0.round_dp(4), Decimal::new(6667, 4));
        // Oracle's GPU Per Hour is per GPU already: 16 GPU-hours of 8 GPUs are 2 hours, which
        // overrun the hour and stand as it (never divided again to 15 minutes).
        let got = usage_of(
            "shape-1",
            8,
            "10,USD,Usage,Compute - GPU - H100,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,16,GPU Per Hour,shape-1,Compute\n",
        );
        assert_eq!(hours_and_cost(&got).0, Decimal::from(8));
        // An instance priced by the hour whose description says GPU is wall time as it is.
        let got = usage_of(
            "vm-1",
            8,
            "32.77,USD,Usage,GPU instance hour,2025-02-10T00:00:00Z,2025-02-10T01:00:00Z,1,Hours,vm-1,Compute
",
        );
        assert_eq!(hours_and_cost(&got), (Decimal::from(8), Decimal::new(3277, 2)));
    }

    /// A usage row that consumed 0 hours adds no GPU-hours (it used to count its whole charge
    /// period: a day of 8 GPUs for a VM that did not run).
    #[test]
    fn a_row_that_consumed_no_time_adds_no_gpu_hours() {
        let got = usage_of(
            "vm-1",
            8,
            "32.77,USD,Usage,a,2025-02-10T00:00:00Z,2025-02-11T00:00:00Z,1,Hours,vm-1,Compute\n\
0,USD,Usage,a,2025-02-11T00:00:00Z,2025-02-12T00:00:00Z,0,Hours,vm-1,Compute\n",
        );
        assert_eq!(hours_and_cost(&got), (Decimal::from(8), Decimal::new(3277, 2)));
        assert_eq!(got.lines[1].line.category, Category::Host);
        assert!(got.hours_from_charge_period.is_empty());
    }

    #[test]
    fn seconds_per_unit_reads_the_time_units_exports_write() {
        let s = |u: &str| seconds_per_unit(u).map(|d| d.to_string());
        assert_eq!(s("Hrs").as_deref(), Some("3600"));
        assert_eq!(s("Hours").as_deref(), Some("3600"));
        assert_eq!(s("1 Hour").as_deref(), Some("3600"));
        assert_eq!(s("100 Hours").as_deref(), Some("360000"));
        assert_eq!(s("Seconds").as_deref(), Some("1"));
        assert_eq!(s("GB-Mo"), None);
        assert_eq!(s("1/Month"), None);
        assert_eq!(s(""), None);
    }

    #[test]
    fn sums_too_large_for_a_decimal_are_refused_naming_the_row() {
        let text = format!(
            "{HEADER}\
70000000000000000000000000000,70000000000000000000000000000,USD,Tax,t,2024-09-01 00:00:00,2024-09-01 01:00:00,NULL,NULL,NULL,NULL\n\
70000000000000000000000000000,70000000000000000000000000000,USD,Tax,t,2024-09-01 00:00:00,2024-09-01 01:00:00,NULL,NULL,NULL,NULL\n\
1,1,USD,Usage,x,2024-09-01 00:00:00,2024-09-01 01:00:00,Hours,i-1,Compute,NULL\n"
        );
        let mut selection = trial();
        selection.resources = Selection::resources_from(Some("i-1"));
        let Err(CsvError::Invalid(errors)) = parse(text.as_bytes(), "USD", &selection) else {
            panic!("refused")
        };
        assert_eq!(errors[0].field, "line 3");
        assert!(errors[0].message.contains("too large"), "{errors:?}");
    }

    #[test]
    fn a_re_import_has_the_same_identities() {
        let t = |s: &str| parse_time(s).unwrap();
        let a = identity("i-1", t("2024-09-01 00:00:00"), t("2024-09-01 01:00:00"), "x");
        assert_eq!(
            a,
            identity("i-1", t("2024-09-01T00:00:00Z"), t("2024-09-01T01:00:00+00:00"), "x")
        );
        assert_ne!(
            a,
            identity("i-1", t("2024-09-01 00:00:00"), t("2024-09-01 01:00:00"), "y")
        );
        assert_ne!(
            a,
            identity("i-2", t("2024-09-01 00:00:00"), t("2024-09-01 01:00:00"), "x")
        );
    }
}
