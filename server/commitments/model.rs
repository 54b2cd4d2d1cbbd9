//! Commitments without I/O: the term, the states, and the use per calendar month.
//!
//! A commitment's term runs from `start_date` to `end_date`, both days included, at whole UTC days.
//! For each calendar month of the term up to the day before `as_of` (completed days only):
//! - **committed GPU-hours** = the commitment's GPUs × 24 × the days of the month inside the term;
//! - **billed GPU-hours** of the trial: its accelerator lines clipped to those days and merged as the
//!   ledger merges them (`ledger::model::merge_spans`: overlaps of one resource counted once, at the
//!   largest GPU count);
//! - **busy GPU-hours** = billed GPU-hours less their idle GPU-hours. The ledger counts idle GPU-hours
//!   for the whole trial, not per line, so a month's share of them is the trial's idle share
//!   (idle ÷ all billed GPU-hours) of its billed hours that month; without an idle figure every
//!   billed hour counts as busy;
//! - **utilization** = busy ÷ committed; **coverage** = committed ÷ the GPU-hours every trial of the
//!   brief billed that month (above 1 when the commitment is larger than what ran);
//! - **idle cost** = the committed hours not busy × the committed rate;
//! - **on-demand cost avoided** = the busy hours the commitment carried (at most the committed ones)
//!   × the on-demand rate of the offer: what paying by the hour would have cost for them.

use std::str::FromStr;

use chrono::{DateTime, Datelike, Days, Months, NaiveDate, Utc};
use rust_decimal::{prelude::ToPrimitive, Decimal};
use serde::Serialize;
use serde_json::Value;

use crate::{
    criteria::{capitalized, criterion_name},
    ids::TrialId,
    ledger::model::{merge_spans, sort_spans, Span},
    prices::model::PriceRow,
    review::{comparison::moved, cost_at_slo::BREAK_EVEN_MARGIN},
};

/// Where a commitment stands. `released` and `ended` are final.
// Stored as text: a stored value that is none of these fails to decode (never a default state).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, utoipa::ToSchema, sqlx::Type)]
#[serde(rename_all = "kebab-case")]
#[sqlx(type_name = "text", rename_all = "kebab-case")]
pub enum CommitmentState {
    Active,
    RevalidationDue,
    Regressed,
    RenewalDue,
    Ended,
    Released,
}

impl CommitmentState {
    pub const ALL: [CommitmentState; 6] = [
        CommitmentState::Active,
        CommitmentState::RevalidationDue,
        CommitmentState::Regressed,
        CommitmentState::RenewalDue,
        CommitmentState::Ended,
        CommitmentState::Released,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            CommitmentState::Active => "active",
            CommitmentState::RevalidationDue => "revalidation-due",
            CommitmentState::Regressed => "regressed",
            CommitmentState::RenewalDue => "renewal-due",
            CommitmentState::Ended => "ended",
            CommitmentState::Released => "released",
        }
    }

    /// The state in words, for pages.
    pub fn words(self) -> &'static str {
        match self {
            CommitmentState::Active => "active",
            CommitmentState::RevalidationDue => "re-validation due",
            CommitmentState::Regressed => "regressed",
            CommitmentState::RenewalDue => "renewal due",
            CommitmentState::Ended => "ended",
            CommitmentState::Released => "released",
        }
    }

    /// Whether it still commits money: neither ended nor released.
    pub fn running(self) -> bool {
        !matches!(self, CommitmentState::Ended | CommitmentState::Released)
    }

    /// Whether someone should look at it: it regressed, its re-run or its renewal is due.
    pub fn needs_attention(self) -> bool {
        matches!(
            self,
            CommitmentState::RevalidationDue | CommitmentState::Regressed | CommitmentState::RenewalDue
        )
    }
}

impl FromStr for CommitmentState {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        CommitmentState::ALL.into_iter().find(|c| c.as_str() == s).ok_or(())
    }
}

/// The last day of a term of `months` from `start`: one day before the same day `months` later
/// (2026-01-31 for 12 months ends 2027-01-30). `None` past the calendar's end.
pub fn end_date(start: NaiveDate, months: u32) -> Option<NaiveDate> {
    start
        .checked_add_months(Months::new(months))?
        .checked_sub_days(Days::new(1))
}

/// The last day GPUs are committed: the term's last day, or the day before it was released.
pub fn last_committed_day(end_date: NaiveDate, released_on: Option<NaiveDate>) -> NaiveDate {
    match released_on.and_then(|r| r.pred_opt()) {
        Some(before) if before < end_date => before,
        _ => end_date,
    }
}

/// Days from `today` to the term's last day, that day included (0 once it has passed).
pub fn days_left(today: NaiveDate, end_date: NaiveDate) -> i64 {
    ((end_date - today).num_days() + 1).max(0)
}

/// One accelerator ledger line of any trial of the brief, as the use needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceleratorUse {
    pub trial: TrialId,
    pub resource: String,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub gpus: i32,
}

/// The provider's own account of one stretch of the commitment (a FOCUS row naming its
/// `CommitmentDiscountId` with a `CommitmentDiscountStatus`): GPUs used or unused over a time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderUse {
    pub used: bool,
    pub starts_at: DateTime<Utc>,
    pub ends_at: DateTime<Utc>,
    pub gpus: i32,
}

/// What a commitment's months are computed from.
#[derive(Debug, Clone)]
pub struct UseBasis<'a> {
    pub trial: TrialId,
    pub gpus: u32,
    pub rate_per_gpu_hour: Decimal,
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    pub start_date: NaiveDate,
    /// The last day GPUs are committed ([`last_committed_day`]).
    pub last_day: NaiveDate,
    /// Days before this one count; the month of `as_of` counts its completed days only.
    pub as_of: NaiveDate,
    /// The accelerator lines of every trial of the brief (any order; those outside the term are
    /// ignored).
    pub lines: &'a [AcceleratorUse],
    /// The trial's idle GPU-hours ÷ its billed GPU-hours ([`idle_share`]).
    pub idle_share: Decimal,
    /// The provider's Used / Unused rows of the commitment (any order; none when it has none).
    pub provider: &'a [ProviderUse],
}

/// The use of one calendar month of the term.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MonthUse {
    /// "2026-11".
    pub month: String,
    /// Days of the month inside the term counted so far.
    pub days: u32,
    /// GPUs × 24 × days.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub committed_gpu_hours: Decimal,
    /// The committed trial's GPU-hours on the ledger those days.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub billed_gpu_hours: Decimal,
    /// Billed GPU-hours less their share of the trial's idle GPU-hours.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub busy_gpu_hours: Decimal,
    /// GPU-hours every trial of the brief billed those days.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub brief_gpu_hours: Decimal,
    /// busy ÷ committed (4 places).
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub utilization: Option<Decimal>,
    /// committed ÷ the brief's GPU-hours (4 places); null when nothing was billed.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub coverage: Option<Decimal>,
    /// committed GPU-hours × rate: what these days of the commitment cost.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub commitment_cost: Decimal,
    /// (committed − busy, at least 0) × rate.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub idle_cost: Decimal,
    /// min(busy, committed) × the on-demand rate; null when no on-demand rate is known.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub on_demand_avoided: Option<Decimal>,
    /// The provider's own figure: GPU-hours its FOCUS rows mark `Used` those days; null when no
    /// row of the commitment marks any of those days Used or Unused.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub provider_used_gpu_hours: Option<Decimal>,
    /// The provider's GPU-hours marked `Unused` those days; null as `provider_used_gpu_hours`.
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub provider_unused_gpu_hours: Option<Decimal>,
}

/// The trial's idle share: idle GPU-hours ÷ billed GPU-hours, between 0 and 1; 0 without an idle
/// figure or billed hours.
pub fn idle_share(idle_gpu_hours: Option<Decimal>, billed_gpu_hours: Decimal) -> Decimal {
    match idle_gpu_hours {
        Some(idle) if billed_gpu_hours > Decimal::ZERO => (idle / billed_gpu_hours).clamp(Decimal::ZERO, Decimal::ONE),
        _ => Decimal::ZERO,
    }
}

fn midnight(d: NaiveDate) -> DateTime<Utc> {
    d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc()
}

/// GPU-hours of `lines` (those `keep` selects) inside `[from, to)`, merged as the ledger merges them;
/// lines of different trials never merge.
fn gpu_hours_within(
    lines: &[AcceleratorUse],
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    keep: impl Fn(&AcceleratorUse) -> bool,
) -> Decimal {
    let keys: Vec<(String, &AcceleratorUse)> = lines
        .iter()
        .filter(|l| keep(l) && l.starts_at < to && l.ends_at > from)
        .map(|l| (format!("{}\u{1f}{}", l.trial, l.resource), l))
        .collect();
    let mut spans: Vec<Span<'_>> = keys
        .iter()
        .map(|(key, l)| Span {
            resource: key,
            start: l.starts_at.max(from),
            end: l.ends_at.min(to),
            gpus: l.gpus,
            amount: Decimal::ZERO,
        })
        .collect();
    sort_spans(&mut spans);
    merge_spans(spans).gpu_hours()
}

/// The provider's (Used, Unused) GPU-hours inside `[from, to)`, each row's GPUs × its hours there
/// (added up as the provider gives them, never merged); `None` when no row falls there.
fn provider_within(rows: &[ProviderUse], from: DateTime<Utc>, to: DateTime<Utc>) -> Option<(Decimal, Decimal)> {
    let mut seen = false;
    let (mut used, mut unused) = (Decimal::ZERO, Decimal::ZERO);
    for r in rows.iter().filter(|r| r.starts_at < to && r.ends_at > from) {
        seen = true;
        let seconds = (r.ends_at.min(to) - r.starts_at.max(from)).num_seconds();
        let gpu_hours = Decimal::from(r.gpus) * Decimal::from(seconds) / Decimal::from(3600);
        if r.used {
            used += gpu_hours;
        } else {
            unused += gpu_hours;
        }
    }
    seen.then(|| (used.round_dp(6).normalize(), unused.round_dp(6).normalize()))
}

/// The first day of the month after `d`'s.
fn next_month(d: NaiveDate) -> NaiveDate {
    let first = d.with_day(1).unwrap_or(d);
    first.checked_add_months(Months::new(1)).unwrap_or(NaiveDate::MAX)
}

/// The use of each calendar month of the term, from its first month to the month of the day
/// before `as_of` (nothing before the term starts).
pub fn months(b: &UseBasis<'_>) -> Vec<MonthUse> {
    months_with(b, |from, to| {
        (
            gpu_hours_within(b.lines, from, to, |l| l.trial == b.trial),
            gpu_hours_within(b.lines, from, to, |_| true),
        )
    })
}

/// The months of the term [`months`] measures, each as (its first day, the day after its last
/// counted day): from the term's first month to the month of the day before `as_of`.
pub fn month_days(start_date: NaiveDate, last_day: NaiveDate, as_of: NaiveDate) -> Vec<(NaiveDate, NaiveDate)> {
    let mut out = Vec::new();
    // Days up to and including `last` count.
    let Some(last) = as_of.pred_opt().map(|d| d.min(last_day)) else {
        return out;
    };
    let mut day = start_date;
    while day <= last {
        let month_end = next_month(day);
        out.push((day, month_end.min(last.succ_opt().unwrap_or(NaiveDate::MAX))));
        day = month_end;
    }
    out
}

/// [`months`] with each month's (committed trial's, every trial's) merged GPU-hours inside
/// `[from, to)` given by `hours` instead of read from `b.lines` (a list measures many commitments'
/// months from one statement's sums).
pub fn months_with(
    b: &UseBasis<'_>,
    mut hours: impl FnMut(DateTime<Utc>, DateTime<Utc>) -> (Decimal, Decimal),
) -> Vec<MonthUse> {
    let mut out = Vec::new();
    let gpus = Decimal::from(b.gpus);
    let busy_share = Decimal::ONE - b.idle_share;
    for (day, until) in month_days(b.start_date, b.last_day, b.as_of) {
        let days = (until - day).num_days();
        let (from, to) = (midnight(day), midnight(until));
        let committed = gpus * Decimal::from(24 * days);
        let (billed, brief) = hours(from, to);
        let busy = (billed * busy_share).round_dp(6).normalize();
        let utilization = (committed > Decimal::ZERO).then(|| (busy / committed).round_dp(4).normalize());
        let coverage = (brief > Decimal::ZERO).then(|| (committed / brief).round_dp(4).normalize());
        let unused = (committed - busy).max(Decimal::ZERO);
        let provider = provider_within(b.provider, from, to);
        out.push(MonthUse {
            month: format!("{:04}-{:02}", day.year(), day.month()),
            days: u32::try_from(days).unwrap_or(0),
            committed_gpu_hours: committed,
            billed_gpu_hours: billed,
            busy_gpu_hours: busy,
            brief_gpu_hours: brief,
            utilization,
            coverage,
            commitment_cost: (committed * b.rate_per_gpu_hour).round_dp(2).normalize(),
            idle_cost: (unused * b.rate_per_gpu_hour).round_dp(2).normalize(),
            on_demand_avoided: b
                .on_demand_rate_per_gpu_hour
                .map(|r| (busy.min(committed) * r).round_dp(2).normalize()),
            provider_used_gpu_hours: provider.map(|p| p.0),
            provider_unused_gpu_hours: provider.map(|p| p.1),
        });
    }
    out
}

/// Totals over the months: committed and busy GPU-hours and the term's utilization so far.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TermUse {
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub committed_gpu_hours: Decimal,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub busy_gpu_hours: Decimal,
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub utilization: Option<Decimal>,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub idle_cost: Decimal,
}

pub fn term_use(months: &[MonthUse]) -> TermUse {
    let committed: Decimal = months.iter().map(|m| m.committed_gpu_hours).sum();
    let busy: Decimal = months.iter().map(|m| m.busy_gpu_hours).sum();
    TermUse {
        committed_gpu_hours: committed,
        busy_gpu_hours: busy,
        utilization: (committed > Decimal::ZERO).then(|| (busy / committed).round_dp(4).normalize()),
        idle_cost: months.iter().map(|m| m.idle_cost).sum(),
    }
}

/// The running commitments of one team in one currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct TeamTotal {
    /// The team's name; null for briefs shared with no team.
    pub team: Option<String>,
    pub currency: String,
    pub commitments: usize,
    /// Their monthly costs added up.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub monthly_cost: Decimal,
}

/// The monthly cost per team and currency of `running` commitments, each given as (its brief's
/// teams, its currency, its monthly cost): a commitment counts in every team its brief is shared
/// with, and under "no team" (`team: None`, last) when it is shared with none. Teams by name,
/// then currency. Currencies are never added together.
pub fn totals_per_team<'a>(running: impl IntoIterator<Item = (&'a [String], &'a str, Decimal)>) -> Vec<TeamTotal> {
    let mut sums: std::collections::BTreeMap<(bool, String, String), (usize, Decimal)> = Default::default();
    for (teams, currency, monthly) in running {
        let keys: Vec<(bool, String)> = if teams.is_empty() {
            vec![(true, String::new())]
        } else {
            teams.iter().map(|t| (false, t.clone())).collect()
        };
        for (none, team) in keys {
            let slot = sums.entry((none, team, currency.to_owned())).or_default();
            slot.0 += 1;
            slot.1 += monthly;
        }
    }
    sums.into_iter()
        .map(|((none, team, currency), (n, sum))| TeamTotal {
            team: (!none).then_some(team),
            currency,
            commitments: n,
            monthly_cost: sum.normalize(),
        })
        .collect()
}

/// The running commitments in one currency.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct CurrencyTotal {
    pub currency: String,
    pub commitments: usize,
    /// Their monthly costs added up.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub monthly_cost: Decimal,
}

/// The monthly cost per currency of `running` commitments, each given as (its currency, its
/// monthly cost), by currency name. Currencies are never added together.
pub fn totals_per_currency<'a>(running: impl IntoIterator<Item = (&'a str, Decimal)>) -> Vec<CurrencyTotal> {
    let mut sums: std::collections::BTreeMap<&str, (usize, Decimal)> = Default::default();
    for (currency, monthly) in running {
        let slot = sums.entry(currency).or_default();
        slot.0 += 1;
        slot.1 += monthly;
    }
    sums.into_iter()
        .map(|(currency, (n, sum))| CurrencyTotal {
            currency: currency.to_owned(),
            commitments: n,
            monthly_cost: sum.normalize(),
        })
        .collect()
}

/// What to do with a commitment whose renewal is due, by the reservation rule of docs/decision.md
/// (reserve from the break-even plus 5 points) applied to the term's measured busy share.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Renewal {
    /// `renew` (the same GPUs), `resize` (fewer or more GPUs, whole nodes) or `release`.
    pub choice: &'static str,
    /// The GPUs to commit to for the next term (0 to release).
    pub gpus: u32,
    /// Why, with the figures.
    pub why: String,
}

/// The renewal choice of a term `term` used so far, for `gpus` GPUs in nodes of `gpus_per_node`
/// at `rate` per GPU-hour against the offer's `on_demand` rate. The break-even is rate ÷ on
/// demand; a commitment pays from the break-even plus 5 points busy:
/// - busy more than committed (above 100 %): **resize** up to the whole nodes that carried it;
/// - busy at least the break-even + 5 points: **renew**;
/// - else the most whole nodes that the busy GPU-hours keep above it: **resize** down to them;
/// - none: **release** (paying by the hour is cheaper for this work).
///
/// `None` without an on-demand rate or a measured month.
pub fn renewal(
    term: &TermUse,
    gpus: u32,
    gpus_per_node: u32,
    rate: Decimal,
    on_demand: Option<Decimal>,
) -> Option<Renewal> {
    let on_demand = on_demand.filter(|r| *r > Decimal::ZERO)?;
    let u = term.utilization?;
    let per_node = gpus_per_node.max(1);
    let break_even = (rate / on_demand).round_dp(4);
    let needed = break_even + BREAK_EVEN_MARGIN;
    let busy_gpus = u * Decimal::from(gpus);
    let share = |d: Decimal| format!("{} %", (d * Decimal::ONE_HUNDRED).round_dp(1).normalize());
    let measured = format!(
        "busy {} of the term so far; the break-even is {} ({} ÷ {}), and a commitment pays from {}",
        share(u),
        share(break_even),
        rate.normalize(),
        on_demand.normalize(),
        share(needed)
    );
    if u > Decimal::ONE {
        let nodes = (busy_gpus / Decimal::from(per_node)).ceil();
        let more = nodes.to_u32().unwrap_or(u32::MAX / per_node).saturating_mul(per_node);
        return Some(Renewal {
            choice: "resize",
            gpus: more,
            why: format!("{measured}: more ran than was committed, so commit to {more} GPUs"),
        });
    }
    if u >= needed {
        return Some(Renewal {
            choice: "renew",
            gpus,
            why: format!("{measured}: renew the {gpus} GPUs"),
        });
    }
    let nodes = (busy_gpus / (needed * Decimal::from(per_node))).floor();
    let fewer = nodes.to_u32().unwrap_or(0).saturating_mul(per_node);
    if fewer >= per_node && fewer < gpus {
        return Some(Renewal {
            choice: "resize",
            gpus: fewer,
            why: format!("{measured}: the busy hours would keep {fewer} GPUs above it, so commit to {fewer}"),
        });
    }
    Some(Renewal {
        choice: "release",
        gpus: 0,
        why: format!("{measured}: not even one node would be busy enough, so pay by the hour"),
    })
}

/// Which state the clock alone puts a commitment in on `today` (re-runs are judged elsewhere):
/// released stays released, and a release dated ahead takes effect on its day; ended after its
/// last day; renewal-due from 60 days before it (unless renewed already or released ahead);
/// revalidation-due when the last run is older than `revalidate_every_days` (or none since the
/// start is); else the current state if it is regressed (a regression stays until a good re-run),
/// else active.
pub fn clock_state(c: &ClockFacts) -> CommitmentState {
    use CommitmentState::*;
    if c.current == Released || c.released_on.is_some_and(|d| c.today >= d) {
        return Released;
    }
    if c.today > c.last_day {
        return Ended;
    }
    if c.current == Regressed {
        return Regressed;
    }
    // A commitment already renewed, or released from a day ahead, has no renewal left to decide.
    if !c.renewed && c.released_on.is_none() && (c.last_day - c.today).num_days() <= RENEWAL_NOTICE_DAYS {
        return RenewalDue;
    }
    // Judged as of a day before the approval (`worker::round_on` with an earlier day), the term's
    // start stands.
    let approved = Some(c.approved_on).filter(|d| *d <= c.today).unwrap_or(c.start_date);
    let since = c.last_run.unwrap_or(approved).max(c.start_date);
    if c.today > since && (c.today - since).num_days() > i64::from(c.revalidate_every_days) {
        return RevalidationDue;
    }
    Active
}

/// Renewal is due from this many days before the end.
pub const RENEWAL_NOTICE_DAYS: i64 = 60;

/// What [`clock_state`] reads.
#[derive(Debug, Clone, Copy)]
pub struct ClockFacts {
    pub current: CommitmentState,
    pub today: NaiveDate,
    pub start_date: NaiveDate,
    pub last_day: NaiveDate,
    pub revalidate_every_days: u32,
    /// The day a manager released it from (`PATCH … released_on`), which may lie ahead.
    pub released_on: Option<NaiveDate>,
    /// The day of the newest evidence of the committed trial since the approval.
    pub last_run: Option<NaiveDate>,
    /// A newer commitment renews it (its renewal was approved).
    pub renewed: bool,
    /// The day of the approval it is judged against (a later one when its trial was approved
    /// again): the re-validation period counts from it, or from the term's start when that is later.
    pub approved_on: NaiveDate,
}

/// What a re-validation run found against the approval, criterion by criterion, in words with the
/// figure before and after: a required criterion that fails on the run (and did not fail when
/// approved) — "The time to the first token (95th percentile) failed the re-run at stage 3: 180 ms
/// when approved, 260 ms now (serving.ttft_p95_ms)" — or any criterion's figure worse than when
/// approved beyond the re-run thresholds (docs/trials.md, "Re-runs": beyond 2 % of the approved
/// figure, and beyond 1 ms for a latency), in the direction its operator prefers — "The rate of
/// requests served inside every target (goodput) is worse on the re-run at stage 3: 25.3 when
/// approved, 24.1 now (serving.goodput_rps)". A key with no name in words
/// (`criteria::criterion_name`) is said as written, without the key again.
/// `approved` is what the approval pinned; `now` the criteria judged on the evidence received after
/// the approval only. Both are JSON arrays of `{ key, op, stage, required, status, value }`; a
/// criterion the run has no value for is not judged.
pub fn regressions(approved: &Value, now: &Value) -> Vec<String> {
    let empty = Vec::new();
    let before = approved.as_array().unwrap_or(&empty);
    // Figures as people read them: at most two decimals (468.24850499983313 → 468.25).
    let shown = |v: Option<&Value>| match v {
        Some(Value::Null) | None => "no value".to_owned(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => match v.as_f64() {
            Some(x) => ((x * 100.0).round() / 100.0).to_string(),
            None => v.to_string(),
        },
    };
    let mut out = Vec::new();
    for c in now.as_array().unwrap_or(&empty) {
        let value = c.get("value").filter(|v| !v.is_null());
        if value.is_none() || !(c["status"] == "pass" || c["status"] == "fail") {
            continue;
        }
        let key = c["key"].as_str().unwrap_or("a criterion");
        let was = before.iter().find(|b| b["key"] == c["key"] && b["stage"] == c["stage"]);
        let was_value = was.and_then(|b| b.get("value"));
        // The criterion in words for the manager who reads it, its key after the figures for
        // whoever checks the card.
        let name = criterion_name(key);
        let (head, tail) = match name == key {
            true => (key.to_owned(), String::new()),
            false => (capitalized(&name), format!(" ({key})")),
        };
        let stage = &c["stage"];
        // The key's unit beside each figure ("264.9 ms"); shares stay bare, their scale varies.
        let unit = c["unit"]
            .as_str()
            .filter(|u| !u.is_empty() && !u.contains('%'))
            .map(|u| format!(" {u}"))
            .unwrap_or_default();
        let with_unit = |v: Option<&Value>| match v.filter(|v| !v.is_null()) {
            Some(_) => format!("{}{unit}", shown(v)),
            None => shown(v),
        };
        let figures = format!("{} when approved, {} now{tail}", with_unit(was_value), with_unit(value));
        if c["required"] == Value::Bool(true) && c["status"] == "fail" && was.is_none_or(|b| b["status"] != "fail") {
            out.push(format!("{head} failed the re-run at stage {stage}: {figures}"));
            continue;
        }
        let (Some(b), Some(a)) = (was_value.and_then(Value::as_f64), value.and_then(Value::as_f64)) else {
            continue;
        };
        let worse = match c["op"].as_str() {
            Some("lt" | "le") => a > b,
            Some("gt" | "ge") => a < b,
            _ => false,
        };
        if worse && moved(key, b, a) {
            out.push(format!("{head} is worse on the re-run at stage {stage}: {figures}"));
        }
    }
    out
}

/// The offer a commitment renews: its provider, GPU, currency and the GPUs of one replica.
pub struct CommittedOffer<'a> {
    pub provider: &'a str,
    pub gpu: &'a str,
    pub currency: &'a str,
    pub gpus_per_node: i32,
    /// The committed trial's region, when it names one: an offer is priced in one region, so a
    /// cheaper reserved row of another region never meets this one's on-demand row.
    pub region: Option<&'a str>,
}

/// The lowest current `billing` rate per GPU-hour of the committed offer. A replica of 16 GPUs is
/// priced by the provider's 8-GPU node rows: rows whose node size tiles the replica count, the
/// largest such node first (the shape the commitment was quoted in); `None` without one.
pub fn rate_now(rows: &[&PriceRow], offer: &CommittedOffer<'_>, billing: &str) -> Option<Decimal> {
    let of_offer: Vec<&&PriceRow> = rows
        .iter()
        .filter(|p| {
            p.billing == billing
                && p.gpu == offer.gpu
                && p.currency == offer.currency
                && p.provider.eq_ignore_ascii_case(offer.provider)
                && p.gpu_count > 0
                && offer.gpus_per_node % p.gpu_count == 0
                && offer
                    .region
                    .is_none_or(|r| p.region.trim().eq_ignore_ascii_case(r.trim()))
        })
        .collect();
    let node = of_offer.iter().map(|p| p.gpu_count).max()?;
    of_offer
        .iter()
        .filter(|p| p.gpu_count == node)
        .map(|p| p.rate_per_gpu_hour)
        .min()
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    fn d(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }
    fn t(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }
    fn dec(s: &str) -> Decimal {
        s.parse().unwrap()
    }
    fn line(trial: TrialId, resource: &str, from: &str, to: &str, gpus: i32) -> AcceleratorUse {
        AcceleratorUse {
            trial,
            resource: resource.into(),
            starts_at: t(from),
            ends_at: t(to),
            gpus,
        }
    }

    fn row(gpus: i32, billing: &str, rate: &str) -> PriceRow {
        PriceRow {
            line: 2,
            provider: "Cloud A".into(),
            gpu: "H100 SXM".into(),
            gpu_count: gpus,
            billing: billing.into(),
            rate_per_gpu_hour: dec(rate),
            currency: "USD".into(),
            region: "us-east".into(),
            valid_from: d("2026-11-01"),
            source: String::new(),
        }
    }

    /// A 16-GPU replica was quoted on 8-GPU nodes: its renewal reads today's 8-GPU rows (it used to
    /// look for 16-GPU rows, find none, and keep the approved rates).
    #[test]
    fn a_renewal_prices_a_replica_of_two_nodes_from_the_node_rows() {
        let rows = [
            row(8, "reserved", "2.10"),
            row(8, "reserved", "2.05"),
            row(1, "reserved", "1.90"),
            row(8, "on-demand", "3.50"),
            row(3, "reserved", "1.00"),
        ];
        let rows: Vec<&PriceRow> = rows.iter().collect();
        let offer = CommittedOffer {
            provider: "cloud a",
            gpu: "H100 SXM",
            currency: "USD",
            gpus_per_node: 16,
            region: None,
        };
        assert_eq!(
            rate_now(&rows, &offer, "reserved"),
            Some(dec("2.05")),
            "the 8-GPU node's, not a 1-GPU row's"
        );
        assert_eq!(rate_now(&rows, &offer, "on-demand"), Some(dec("3.50")));
        let eight = CommittedOffer {
            gpus_per_node: 8,
            ..offer
        };
        assert_eq!(rate_now(&rows, &eight, "reserved"), Some(dec("2.05")));
        let other = CommittedOffer {
            currency: "EUR",
            ..eight
        };
        assert_eq!(rate_now(&rows, &other, "reserved"), None);
        // The trial's region: another region's rows are another offer (region matched in any case).
        let west = PriceRow {
            region: "eu-west".into(),
            ..row(8, "reserved", "1.50")
        };
        let both = [row(8, "reserved", "2.10"), west, row(8, "on-demand", "3.50")];
        let both: Vec<&PriceRow> = both.iter().collect();
        let in_region = |region| CommittedOffer {
            region: Some(region),
            ..eight
        };
        assert_eq!(rate_now(&both, &in_region("US-East"), "reserved"), Some(dec("2.10")));
        assert_eq!(rate_now(&both, &in_region("eu-west"), "reserved"), Some(dec("1.50")));
        assert_eq!(rate_now(&both, &in_region("eu-west"), "on-demand"), None);
        assert_eq!(
            rate_now(&both, &eight, "reserved"),
            Some(dec("1.50")),
            "no region named: any"
        );
    }

    #[test]
    fn a_term_ends_the_day_before_the_same_day_its_months_later() {
        assert_eq!(end_date(d("2026-11-15"), 12), Some(d("2027-11-14")));
        assert_eq!(end_date(d("2026-01-01"), 3), Some(d("2026-03-31")));
        // The 31st plus one month is the 28th of February; the term ends the day before.
        assert_eq!(end_date(d("2027-01-31"), 1), Some(d("2027-02-27")));
        assert_eq!(
            last_committed_day(d("2026-03-31"), Some(d("2026-03-01"))),
            d("2026-02-28")
        );
        assert_eq!(
            last_committed_day(d("2026-03-31"), Some(d("2026-05-01"))),
            d("2026-03-31")
        );
        assert_eq!(days_left(d("2026-03-30"), d("2026-03-31")), 2);
        assert_eq!(days_left(d("2026-04-02"), d("2026-03-31")), 0);
    }

    #[test]
    fn committed_busy_utilization_coverage_idle_cost_and_avoided_cost_per_month() {
        let ours = TrialId::from(Uuid::from_u128(1));
        let other = TrialId::from(Uuid::from_u128(2));
        // 8 GPUs committed from 2026-01-15 for 2 months (to 2026-03-14) at 2.10, on demand 3.50.
        // January: 17 days (15th–31st) × 24 h × 8 = 3264 committed GPU-hours.
        // Ours ran 10 days of 8 GPUs in January (1920 GPU-hours) — 2 of them before the term
        // (the 13th and 14th) — plus an overlapping duplicate of one day that counts once: 8 × 24 ×
        // 8 = 1536 in the term. Another trial ran 4 GPUs for 5 days in the term: 480.
        // February: ours 28 days × 8 GPUs = 5376, the whole month.
        let lines = vec![
            line(ours, "node-a", "2026-01-13T00:00:00Z", "2026-01-23T00:00:00Z", 8),
            line(ours, "node-a", "2026-01-20T00:00:00Z", "2026-01-21T00:00:00Z", 8),
            line(other, "node-a", "2026-01-16T00:00:00Z", "2026-01-21T00:00:00Z", 4),
            line(ours, "node-a", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z", 8),
        ];
        // The trial billed 1920 + 5376 = 7296 GPU-hours and reported 729.6 idle: a share of 0.1.
        let share = idle_share(Some(dec("729.6")), dec("7296"));
        assert_eq!(share, dec("0.1"));
        let basis = UseBasis {
            trial: ours,
            gpus: 8,
            rate_per_gpu_hour: dec("2.10"),
            on_demand_rate_per_gpu_hour: Some(dec("3.50")),
            start_date: d("2026-01-15"),
            last_day: end_date(d("2026-01-15"), 2).unwrap(),
            as_of: d("2026-03-03"),
            lines: &lines,
            idle_share: share,
            provider: &[],
        };
        let m = months(&basis);
        assert_eq!(
            m.iter().map(|m| (m.month.as_str(), m.days)).collect::<Vec<_>>(),
            [("2026-01", 17), ("2026-02", 28), ("2026-03", 2)],
            "March counts the two completed days before as_of"
        );
        let jan = &m[0];
        assert_eq!(jan.committed_gpu_hours, dec("3264"));
        assert_eq!(jan.billed_gpu_hours, dec("1536"));
        // 1536 × 0.9 = 1382.4 busy; 1382.4 ÷ 3264 = 0.42352… → 0.4235.
        assert_eq!(jan.busy_gpu_hours, dec("1382.4"));
        assert_eq!(jan.utilization, Some(dec("0.4235")));
        // The brief billed 1536 + 480 = 2016; 3264 ÷ 2016 = 1.6190…
        assert_eq!(jan.brief_gpu_hours, dec("2016"));
        assert_eq!(jan.coverage, Some(dec("1.619")));
        // 3264 × 2.10 = 6854.40; unused 1881.6 × 2.10 = 3951.36; avoided 1382.4 × 3.50 = 4838.40.
        assert_eq!(jan.commitment_cost, dec("6854.4"));
        assert_eq!(jan.idle_cost, dec("3951.36"));
        assert_eq!(jan.on_demand_avoided, Some(dec("4838.4")));
        let feb = &m[1];
        assert_eq!(feb.committed_gpu_hours, dec("5376"));
        assert_eq!(feb.busy_gpu_hours, dec("4838.4"));
        assert_eq!(feb.utilization, Some(dec("0.9")));
        assert_eq!(feb.coverage, Some(dec("1")));
        assert_eq!(feb.idle_cost, dec("1128.96"), "537.6 × 2.10");
        // March: 2 days committed, nothing billed.
        assert_eq!(m[2].committed_gpu_hours, dec("384"));
        assert_eq!(m[2].utilization, Some(dec("0")));
        assert_eq!(m[2].coverage, None);
        assert_eq!(m[2].idle_cost, dec("806.4"));
        let term = term_use(&m);
        assert_eq!(term.committed_gpu_hours, dec("9024"));
        assert_eq!(term.busy_gpu_hours, dec("6220.8"));
        assert_eq!(term.utilization, Some(dec("0.6894")), "6220.8 ÷ 9024 = 0.68936…");
    }

    #[test]
    fn busy_hours_beyond_the_commitment_avoid_no_more_than_the_committed_hours() {
        let ours = TrialId::from(Uuid::from_u128(1));
        // 1 GPU committed for 1 day; the trial ran 2 GPUs all that day: utilization 2, nothing idle.
        let lines = vec![line(ours, "n", "2026-05-01T00:00:00Z", "2026-05-02T00:00:00Z", 2)];
        let m = months(&UseBasis {
            trial: ours,
            gpus: 1,
            rate_per_gpu_hour: dec("2"),
            on_demand_rate_per_gpu_hour: Some(dec("3")),
            start_date: d("2026-05-01"),
            last_day: d("2026-05-01"),
            as_of: d("2026-06-01"),
            lines: &lines,
            idle_share: idle_share(None, dec("48")),
            provider: &[],
        });
        assert_eq!(m.len(), 1);
        assert_eq!(m[0].utilization, Some(dec("2")));
        assert_eq!(m[0].idle_cost, dec("0"));
        assert_eq!(m[0].on_demand_avoided, Some(dec("72")), "24 committed hours × 3");
    }

    #[test]
    fn the_providers_used_and_unused_hours_are_added_up_per_month_as_given() {
        let ours = TrialId::from(Uuid::from_u128(1));
        let row = |used, from: &str, to: &str, gpus| ProviderUse {
            used,
            starts_at: t(from),
            ends_at: t(to),
            gpus,
        };
        // 8 GPUs from 2026-01-30. The provider says: used 8 GPUs from the 30th 12:00 to the 1st
        // 12:00 (36 h in January, 12 in February), unused 8 GPUs the 30th 00:00–12:00, and used
        // 8 GPUs on 3 February for half an hour.
        let provider = [
            row(true, "2026-01-30T12:00:00Z", "2026-02-01T12:00:00Z", 8),
            row(false, "2026-01-30T00:00:00Z", "2026-01-30T12:00:00Z", 8),
            row(true, "2026-02-03T00:00:00Z", "2026-02-03T00:30:00Z", 8),
        ];
        let m = months(&UseBasis {
            trial: ours,
            gpus: 8,
            rate_per_gpu_hour: dec("2"),
            on_demand_rate_per_gpu_hour: None,
            start_date: d("2026-01-30"),
            last_day: d("2026-12-31"),
            as_of: d("2026-03-02"),
            lines: &[],
            idle_share: Decimal::ZERO,
            provider: &provider,
        });
        // January: used 36 h × 8 = 288, unused 12 h × 8 = 96.
        assert_eq!(m[0].provider_used_gpu_hours, Some(dec("288")));
        assert_eq!(m[0].provider_unused_gpu_hours, Some(dec("96")));
        // February: 12 h × 8 + 0.5 h × 8 = 100 used, nothing unused.
        assert_eq!(m[1].provider_used_gpu_hours, Some(dec("100")));
        assert_eq!(m[1].provider_unused_gpu_hours, Some(dec("0")));
        // March's first day: no row says anything.
        assert_eq!(m[2].provider_used_gpu_hours, None);
        assert_eq!(m[2].provider_unused_gpu_hours, None);
        // Our own busy hours stay the ledger's (none here).
        assert_eq!(m[0].busy_gpu_hours, dec("0"));
    }

    #[test]
    fn totals_per_team_count_a_shared_brief_in_each_team_and_never_add_currencies() {
        let (ml, search) = ("ml".to_owned(), "search".to_owned());
        let both = [ml.clone(), search.clone()];
        let only_ml = [ml.clone()];
        let running = [
            (&both[..], "USD", dec("12264")),
            (&only_ml[..], "USD", dec("3066")),
            (&only_ml[..], "EUR", dec("1000.50")),
            (&[][..], "USD", dec("500")),
        ];
        let got = totals_per_team(running);
        let row = |team: Option<&str>, cur: &str, n, sum: &str| TeamTotal {
            team: team.map(str::to_owned),
            currency: cur.into(),
            commitments: n,
            monthly_cost: dec(sum),
        };
        assert_eq!(
            got,
            [
                row(Some("ml"), "EUR", 1, "1000.5"),
                // 12,264 + 3,066.
                row(Some("ml"), "USD", 2, "15330"),
                row(Some("search"), "USD", 1, "12264"),
                row(None, "USD", 1, "500"),
            ]
        );
    }

    #[test]
    fn a_renewal_is_renew_resize_or_release_by_the_reservation_rule_on_the_terms_busy_share() {
        let term = |u: &str| TermUse {
            utilization: Some(dec(u)),
            ..TermUse::default()
        };
        // 2.10 reserved ÷ 3.50 on demand: break-even 60 %, a commitment pays from 65 %.
        let at = |u: &str| renewal(&term(u), 16, 8, dec("2.10"), Some(dec("3.50"))).unwrap();
        assert_eq!((at("0.70").choice, at("0.70").gpus), ("renew", 16));
        assert_eq!((at("0.65").choice, at("0.65").gpus), ("renew", 16), "exactly at it");
        // 40 % of 16 GPUs is 6.4 busy GPUs: one node of 8 would be busy 80 %, two 40 %.
        let r = at("0.40");
        assert_eq!((r.choice, r.gpus), ("resize", 8));
        assert_eq!(
            r.why,
            "busy 40 % of the term so far; the break-even is 60 % (2.1 ÷ 3.5), and a commitment pays from 65 %: \
             the busy hours would keep 8 GPUs above it, so commit to 8"
        );
        // 30 % of 16 is 4.8 busy GPUs: one node would be busy 60 %, under 65 %.
        assert_eq!((at("0.30").choice, at("0.30").gpus), ("release", 0));
        // 130 % of 16 is 20.8 GPUs: three nodes.
        assert_eq!((at("1.3").choice, at("1.3").gpus), ("resize", 24));
        // Without an on-demand rate, or a month measured, nothing to compare.
        assert_eq!(renewal(&term("0.7"), 16, 8, dec("2.10"), None), None);
        assert_eq!(
            renewal(&TermUse::default(), 16, 8, dec("2.10"), Some(dec("3.50"))),
            None
        );
    }

    #[test]
    fn a_term_that_has_not_started_has_no_months() {
        let m = months(&UseBasis {
            trial: TrialId::from(Uuid::from_u128(1)),
            gpus: 8,
            rate_per_gpu_hour: dec("2"),
            on_demand_rate_per_gpu_hour: None,
            start_date: d("2026-12-07"),
            last_day: d("2027-12-06"),
            as_of: d("2026-12-07"),
            lines: &[],
            idle_share: Decimal::ZERO,
            provider: &[],
        });
        assert!(m.is_empty());
    }

    #[test]
    fn a_rerun_regresses_on_a_required_failure_or_a_figure_worse_beyond_the_rerun_thresholds() {
        let approved = serde_json::json!([
            { "key": "serving.ttft_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 180.0 },
            { "key": "serving.tpot_p95_ms", "op": "le", "stage": 3, "required": true, "status": "fail", "value": 90.0 },
            { "key": "serving.itl_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 20.0 },
            { "key": "serving.goodput_rps", "op": "ge", "stage": 3, "required": true, "status": "pass", "value": 25.3 },
            { "key": "serving.slo_attainment", "op": "ge", "stage": 3, "required": false, "status": "pass", "value": 0.99 },
            { "key": "serving.e2e_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 900.0 },
        ]);
        let now = serde_json::json!([
            // Passed when approved, fails now: a regression whatever the size of the move.
            { "key": "serving.ttft_p95_ms", "op": "le", "stage": 3, "required": true, "status": "fail", "value": 260.0 },
            // Failed already when approved (an approval over it): failing is no news, but 90 → 90.5
            // ms is within 1 ms: the same.
            { "key": "serving.tpot_p95_ms", "op": "le", "stage": 3, "required": true, "status": "fail", "value": 90.5 },
            // 20 → 20.9 ms is 4.5 % but only 0.9 ms: the same.
            { "key": "serving.itl_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 20.9 },
            // 25.3 → 24.7 rps is 2.4 % lower (beyond 2 %): worse, though it still passes.
            { "key": "serving.goodput_rps", "op": "ge", "stage": 3, "required": true, "status": "pass", "value": 24.7 },
            // 0.99 → 0.975 is 1.5 %: the same; an optional figure counts as any other.
            { "key": "serving.slo_attainment", "op": "ge", "stage": 3, "required": false, "status": "pass", "value": 0.975 },
            // Better is never a regression; a criterion the run did not measure is not judged.
            { "key": "serving.e2e_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 700.0 },
            { "key": "gpu.nccl_busbw_gbps", "op": "ge", "stage": 2, "required": true, "status": "missing", "value": null },
        ]);
        assert_eq!(
            regressions(&approved, &now),
            [
                "The time to the first token (95th percentile) failed the re-run at stage 3: 180 when approved, 260 now (serving.ttft_p95_ms)",
                "The rate of requests served inside every target (goodput) is worse on the re-run at stage 3: 25.3 when approved, 24.7 now (serving.goodput_rps)",
            ]
        );
        assert!(regressions(&approved, &approved).is_empty());
        // 20 → 21.5 ms: 7.5 % and 1.5 ms, beyond both; a failing one that got worse (90 → 95 ms) too.
        // The run's criteria carry their unit: the figures are said with it.
        let slower = serde_json::json!([
            { "key": "serving.itl_p95_ms", "op": "le", "stage": 3, "required": true, "status": "pass", "value": 21.5, "unit": "ms" },
            { "key": "serving.tpot_p95_ms", "op": "le", "stage": 3, "required": true, "status": "fail", "value": 95.0, "unit": "ms" },
        ]);
        assert_eq!(
            regressions(&approved, &slower),
            [
                "The time between tokens (95th percentile) is worse on the re-run at stage 3: 20 ms when approved, 21.5 ms now (serving.itl_p95_ms)",
                "The time per output token of a request (95th percentile) is worse on the re-run at stage 3: 90 ms when approved, 95 ms now (serving.tpot_p95_ms)",
            ]
        );
        // A key of the harness's own has no name in words: it is said as written, once.
        let own = |value: f64| {
            serde_json::json!([
                { "key": "custom.tokens_per_joule", "op": "ge", "stage": 2, "required": true, "status": "pass", "value": value },
            ])
        };
        assert_eq!(
            regressions(&own(4.0), &own(3.0)),
            ["custom.tokens_per_joule is worse on the re-run at stage 2: 4 when approved, 3 now"]
        );
    }

    #[test]
    fn the_clock_moves_a_commitment_through_its_states() {
        let facts = |today: &str, last_run: Option<&str>, current| ClockFacts {
            current,
            today: d(today),
            start_date: d("2026-01-01"),
            last_day: d("2026-12-31"),
            revalidate_every_days: 30,
            released_on: None,
            renewed: false,
            approved_on: d("2025-12-31"),
            last_run: last_run.map(d),
        };
        use CommitmentState::*;
        assert_eq!(
            clock_state(&facts("2026-01-31", None, Active)),
            Active,
            "30 days: not yet"
        );
        assert_eq!(clock_state(&facts("2026-02-01", None, Active)), RevalidationDue);
        assert_eq!(
            clock_state(&facts("2026-03-01", Some("2026-02-15"), RevalidationDue)),
            Active
        );
        assert_eq!(
            clock_state(&facts("2026-03-01", Some("2026-02-15"), Regressed)),
            Regressed
        );
        // 2026-11-01 is 60 days before the last day (2026-12-31): renewal due; a day earlier, not yet.
        assert_eq!(clock_state(&facts("2026-10-31", Some("2026-10-30"), Active)), Active);
        assert_eq!(
            clock_state(&facts("2026-11-01", Some("2026-10-30"), Active)),
            RenewalDue
        );
        assert_eq!(clock_state(&facts("2027-01-01", None, RenewalDue)), Ended);
        assert_eq!(clock_state(&facts("2027-01-01", None, Released)), Released);
        // A release dated ahead leaves it as it is until that day (it used to release it at once).
        let ahead = |today: &str| ClockFacts {
            released_on: Some(d("2026-06-01")),
            ..facts(today, Some("2026-05-20"), Active)
        };
        assert_eq!(clock_state(&ahead("2026-05-31")), Active);
        assert_eq!(clock_state(&ahead("2026-06-01")), Released);
        // Nor is it renewal-due when its release day is within 60 days of the end of the term or of
        // the release (the manager has decided: no renewal).
        let released_ahead = |today: &str| ClockFacts {
            released_on: Some(d("2026-12-01")),
            last_day: d("2026-11-30"),
            ..facts(today, Some("2026-10-20"), Active)
        };
        assert_eq!(clock_state(&released_ahead("2026-11-01")), Active);
        // A renewed one stays as it is to its end: the new commitment carries on.
        let renewed = ClockFacts {
            renewed: true,
            ..facts("2026-11-01", Some("2026-10-30"), RenewalDue)
        };
        assert_eq!(clock_state(&renewed), Active);
        // Approved again on 2026-03-10 (pinned to that approval): its 30 days count from then.
        let again = |today: &str| ClockFacts {
            approved_on: d("2026-03-10"),
            ..facts(today, None, Active)
        };
        assert_eq!(clock_state(&again("2026-04-09")), Active);
        assert_eq!(clock_state(&again("2026-04-10")), RevalidationDue);
    }
}
