//! Commitments as handlers use them: opened by an approval, listed for whoever may see them, their
//! use per month, and a manager's changes.

use std::collections::BTreeMap;

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::{json, Map, Value};
use sqlx::PgConnection;

use super::{
    model::{self, AcceleratorUse, CommitmentState, MonthUse, ProviderUse, Renewal, TeamTotal, TermUse, UseBasis},
    repo::{self, CommitmentRow, NewCommitment},
};
use crate::{
    acceptance::service as cards,
    audit,
    auth::{teams, Principal, Role},
    briefs::service as briefs,
    error::AppError,
    ids::{ApprovalId, BriefId, CommitmentId, TrialId},
    ledger::{model::Merged, service as ledger, LedgerSummary},
    prices::model::{PriceRow, StoredPrice},
    review::model::Reservation,
    state::AppState,
    trials::{model::Allocation, service as trials},
    validation::FieldError,
};

/// The approval a commitment is opened for.
pub struct Approved<'a> {
    pub approval_id: ApprovalId,
    pub brief_id: BriefId,
    pub approved_at: DateTime<Utc>,
    pub reservation: &'a Reservation,
    /// The offer's on-demand rate the review read (what the busy hours would have cost by the hour).
    pub on_demand_rate: Option<Decimal>,
    /// The committed trial's criteria as the approval read them (`review::decision::CriterionOutcome`s).
    pub criteria: Value,
    /// What the reservation does to the brief's commitments ([`continues`], read once by the
    /// approval, which moved a renewal's start by it).
    pub continues: Continues,
}

/// Opens the commitment an approval's reservation records, in the approval's transaction, with its
/// audit row. A brief whose commitment is due for renewal gets the new one as its renewal; a trial
/// whose commitment of the same offer still runs keeps that one, pinned to the new approval. A
/// reservation kept at on-demand billing is its own on-demand rate.
pub async fn open_for_approval(
    conn: &mut PgConnection,
    a: &Approved<'_>,
    actor: &str,
) -> Result<CommitmentId, AppError> {
    let reservation = a.reservation;
    let end_date = model::end_date(reservation.start_date, reservation.term_months).ok_or_else(|| {
        AppError::Validation(vec![FieldError::new(
            "reservation",
            "the term ends past the calendar's end",
        )])
    })?;
    let on_demand = a
        .on_demand_rate
        .or((reservation.billing == "on-demand").then_some(reservation.rate_per_gpu_hour));
    let renews = match a.continues {
        Continues::Pin(id) => return pin_to_approval(&mut *conn, id, a, actor).await,
        Continues::Renew { id, .. } => Some(id),
        Continues::Nothing => None,
    };
    let to_i32 = |n: u32, field: &'static str| {
        i32::try_from(n).map_err(|_| AppError::Validation(vec![FieldError::new(field, "is too large")]))
    };
    let criteria = approved_criteria(a);
    let new = NewCommitment {
        brief_id: a.brief_id,
        trial_id: reservation.trial,
        approval_id: a.approval_id,
        approved_at: a.approved_at,
        approved_criteria: &criteria,
        provider: reservation.provider.as_deref().unwrap_or(""),
        gpu: &reservation.gpu,
        gpus_per_node: to_i32(reservation.gpus_per_node, "gpus_per_node")?,
        gpus: to_i32(reservation.gpus, "gpus")?,
        billing: &reservation.billing,
        rate_per_gpu_hour: reservation.rate_per_gpu_hour,
        on_demand_rate_per_gpu_hour: on_demand,
        currency: &reservation.currency,
        term_months: to_i32(reservation.term_months, "term_months")?,
        start_date: reservation.start_date,
        end_date,
        monthly_cost: reservation.monthly_cost,
        renews,
    };
    let id = repo::insert(&mut *conn, &new).await?;
    audit::record(
        &mut *conn,
        actor,
        "commitment.opened",
        &format!("brief:{}", a.brief_id),
        json!({
            "commitment": id,
            "approval": a.approval_id,
            "trial": reservation.trial,
            "gpus": reservation.gpus,
            "rate_per_gpu_hour": reservation.rate_per_gpu_hour.to_string(),
            "currency": reservation.currency,
            "start_date": reservation.start_date,
            "end_date": end_date,
            "renews": renews,
        }),
    )
    .await?;
    Ok(id)
}

/// What approving a reservation does to the brief's commitments.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Continues {
    /// The trial's running commitment of the same offer: approving the trial again (its approval
    /// went stale, or a re-run regressed it) buys nothing new, so that commitment is judged from
    /// the new approval on, its term and rate as they were.
    Pin(CommitmentId),
    /// The brief's commitment due for renewal: the reservation is its renewal, a new commitment
    /// linked to it, from the day after `last_day`.
    Renew { id: CommitmentId, last_day: NaiveDate },
    /// A commitment of its own.
    Nothing,
}

/// Which of [`Continues`] approving `r` on `brief_id` is.
pub async fn continues(conn: &mut PgConnection, brief_id: BriefId, r: &Reservation) -> Result<Continues, AppError> {
    let count = |n: u32| i32::try_from(n).unwrap_or(i32::MAX);
    let offer = repo::OfferOf {
        trial_id: r.trial,
        provider: r.provider.as_deref().unwrap_or(""),
        gpu: &r.gpu,
        gpus: count(r.gpus),
        gpus_per_node: count(r.gpus_per_node),
        billing: &r.billing,
        currency: &r.currency,
        term_months: count(r.term_months),
    };
    if let Some(id) = repo::running_of_offer(&mut *conn, &offer).await? {
        return Ok(Continues::Pin(id));
    }
    Ok(match repo::renewal_due_of(&mut *conn, brief_id).await? {
        Some((id, last_day)) => Continues::Renew { id, last_day },
        None => Continues::Nothing,
    })
}

/// The criteria an approval pinned, as later runs are judged against them (none when they were
/// not a list).
fn approved_criteria(a: &Approved<'_>) -> Value {
    if a.criteria.is_array() {
        a.criteria.clone()
    } else {
        Value::Array(Vec::new())
    }
}

/// Pins the running commitment `id` to the approval `a`, with its audit row.
async fn pin_to_approval(
    conn: &mut PgConnection,
    id: CommitmentId,
    a: &Approved<'_>,
    actor: &str,
) -> Result<CommitmentId, AppError> {
    repo::pin_to_approval(&mut *conn, id, a.approval_id, a.approved_at, &approved_criteria(a)).await?;
    audit::record(
        &mut *conn,
        actor,
        "commitment.approved_again",
        &format!("brief:{}", a.brief_id),
        json!({ "commitment": id, "approval": a.approval_id, "trial": a.reservation.trial }),
    )
    .await?;
    Ok(id)
}

/// Which commitments a caller reads.
#[derive(Clone, Copy)]
enum Sight {
    /// Managers and admins: every one.
    All,
    /// Engineers: those of the briefs they may edit (`auth::teams`, the one place that rule lives).
    Editable,
    /// A token limited to one brief reads that brief's, within what its person may read (a
    /// manager's any, an engineer's when they may edit the brief).
    OneBrief { brief: BriefId, manager: bool },
}

fn sight(caller: &Principal) -> Result<Sight, AppError> {
    caller.require_person(Role::Engineer)?;
    let manager = caller.role() >= Role::Manager;
    Ok(match caller.brief_scope() {
        Some(brief) => Sight::OneBrief { brief, manager },
        None if manager => Sight::All,
        None => Sight::Editable,
    })
}

/// Whether the caller reads the commitments of `brief`.
async fn may_read(state: &AppState, caller: &Principal, sight: Sight, brief: BriefId) -> Result<bool, AppError> {
    match sight {
        Sight::All => Ok(true),
        Sight::OneBrief { brief: scope, .. } if scope != brief => Ok(false),
        Sight::OneBrief { manager: true, .. } => Ok(true),
        Sight::OneBrief { manager: false, .. } | Sight::Editable => {
            teams::can_edit_brief(&state.pool, caller, brief).await
        }
    }
}

/// A commitment with where it stands today and its use so far.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CommitmentDetail {
    #[serde(flatten)]
    pub commitment: CommitmentRow,
    pub brief_name: String,
    pub trial_name: String,
    /// The teams the brief is shared with, by name (none: the brief is no team's).
    pub teams: Vec<String>,
    /// Days from today to the term's last day, both included (0 once ended).
    pub days_left: i64,
    /// Each calendar month of the term so far (completed days only).
    pub months: Vec<MonthUse>,
    /// The months added up.
    pub term: TermUse,
    /// While the renewal is due: renew, resize or release, by the reservation rule on the term's
    /// busy share (null otherwise, and without an on-demand rate to compare with).
    pub renewal: Option<Renewal>,
}

impl CommitmentDetail {
    pub fn state(&self) -> CommitmentState {
        self.commitment.state
    }

    /// The newest month of the term so far.
    pub fn this_month(&self) -> Option<&MonthUse> {
        self.months.last()
    }
}

/// One page of the commitments the caller may see (newest start first), each with its use so far,
/// and, over all of them (not only this page), how many there are and the running ones' monthly
/// cost per currency and per team.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct CommitmentList {
    /// A page of commitments (50 unless `limit` says otherwise); `next_cursor` leads to the next ones.
    pub items: Vec<CommitmentDetail>,
    /// How many commitments the list holds over all its pages.
    pub total: usize,
    /// How many of them need attention (revalidation-due, regressed or renewal-due).
    pub needing_attention: usize,
    /// Per currency, the running commitments (neither ended nor released) and their monthly cost.
    pub totals_per_currency: Vec<model::CurrencyTotal>,
    /// Per team and currency, the running commitments and their monthly cost; a brief shared with
    /// two teams counts in both.
    pub totals_per_team: Vec<TeamTotal>,
    /// Pass as `?cursor=` for the next page; null on the last.
    pub next_cursor: Option<String>,
}

/// Commitments on one page of the list, unless the API asks for another number (at most
/// [`MAX_PAGE`]).
pub const PAGE: usize = 50;
pub const MAX_PAGE: usize = 200;

/// Which part of the list to answer.
#[derive(Debug, Clone, Copy)]
pub enum Paging<'a> {
    /// `limit` commitments after the cursor (from the first without one).
    After { cursor: Option<&'a str>, limit: usize },
    /// Every commitment at once (the CSV export).
    Everything,
}

/// A page's place in the list as `next_cursor` writes it: `<start_date>.<id>` of the last commitment
/// of the page before.
fn encode_cursor(c: &repo::CommitmentKey) -> String {
    format!("{}.{}", c.start_date, c.id)
}

fn decode_cursor(s: &str) -> Option<(NaiveDate, CommitmentId)> {
    let (day, id) = s.split_once('.')?;
    Some((day.parse().ok()?, id.parse().ok()?))
}

fn today() -> NaiveDate {
    Utc::now().date_naive()
}

/// A brief's name, its trials' names and the names of the teams it is shared with.
type BriefNames = (String, Vec<(TrialId, String)>, Vec<String>);

/// Names of briefs, their trials and their teams, read once per brief.
#[derive(Default)]
struct Names(BTreeMap<BriefId, BriefNames>);

impl Names {
    /// (the brief's name, the trial's name, the brief's teams).
    async fn of(
        &mut self,
        state: &AppState,
        brief: BriefId,
        trial: TrialId,
    ) -> Result<(String, String, Vec<String>), AppError> {
        if let std::collections::btree_map::Entry::Vacant(slot) = self.0.entry(brief) {
            let name = briefs::name(&state.pool, brief).await?;
            let trials = trials::names(state, brief).await?;
            let teams = teams::brief_access(&state.pool, brief)
                .await?
                .teams
                .into_iter()
                .map(|t| t.name)
                .collect();
            slot.insert((name, trials, teams));
        }
        let (name, trials, teams) = &self.0[&brief];
        let trial_name = trials
            .iter()
            .find(|(id, _)| *id == trial)
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        Ok((name.clone(), trial_name, teams.clone()))
    }
}

/// The renewal choice at today's prices: a renewal pays the reserved rate current now for the
/// committed offer (its provider, GPU, node shape and currency), against the on-demand rate current
/// now; where no such row is current, the rates the commitment was approved at stand, and the why
/// says which.
fn renewal_at(current: &RenewalPrices, c: &CommitmentRow, term: &model::TermUse) -> Option<model::Renewal> {
    let rows: Vec<&PriceRow> = current.rows.iter().map(|p| &p.row).collect();
    let offer = model::CommittedOffer {
        provider: &c.provider,
        gpu: &c.gpu,
        currency: &c.currency,
        gpus_per_node: c.gpus_per_node,
        region: current.regions.get(&c.trial_id).map(String::as_str),
    };
    let rate_now = |billing: &str| model::rate_now(&rows, &offer, billing);
    let (reserved_now, on_demand_now) = (rate_now("reserved"), rate_now("on-demand"));
    let source = match (reserved_now, on_demand_now) {
        (Some(_), Some(_)) => "at today's reserved and on-demand prices",
        (None, None) => "at the rates approved (no current price of this offer)",
        _ => "at today's price where one is current, else the rate approved",
    };
    model::renewal(
        term,
        u32::try_from(c.gpus).unwrap_or(0),
        u32::try_from(c.gpus_per_node).unwrap_or(1),
        reserved_now.unwrap_or(c.rate_per_gpu_hour),
        on_demand_now.or(c.on_demand_rate_per_gpu_hour),
    )
    .map(|mut r| {
        r.why = format!("{} ({source})", r.why);
        r
    })
}

/// The current prices, when one of `rows` is renewal-due (its renewal reads them), else none.
async fn prices_for_renewals(state: &AppState, rows: &[CommitmentRow]) -> Result<RenewalPrices, AppError> {
    let due: Vec<&CommitmentRow> = rows.iter().filter(|c| c.state == CommitmentState::RenewalDue).collect();
    if due.is_empty() {
        return Ok(RenewalPrices::default());
    }
    let mut regions = std::collections::HashMap::new();
    for c in due {
        let trial = trials::load(state, c.trial_id).await?;
        if let Some(region) = trial.fields.region.filter(|r| !r.trim().is_empty()) {
            regions.insert(c.trial_id, region);
        }
    }
    Ok(RenewalPrices {
        rows: crate::prices::service::current(state).await?,
        regions,
    })
}

/// What renewals are priced from: today's price rows, and the region each renewal-due
/// commitment's trial names.
#[derive(Default)]
struct RenewalPrices {
    rows: Vec<StoredPrice>,
    regions: std::collections::HashMap<TrialId, String>,
}

/// What measuring `c`'s months up to `as_of` needs: its terms, the trial's idle share from its
/// ledger `summary`, and the lines and provider rows when they are measured from those.
fn use_basis<'a>(
    c: &CommitmentRow,
    as_of: NaiveDate,
    summary: &LedgerSummary,
    lines: &'a [AcceleratorUse],
    provider: &'a [ProviderUse],
) -> UseBasis<'a> {
    UseBasis {
        trial: c.trial_id,
        gpus: u32::try_from(c.gpus).unwrap_or(0),
        rate_per_gpu_hour: c.rate_per_gpu_hour,
        on_demand_rate_per_gpu_hour: c.on_demand_rate_per_gpu_hour,
        start_date: c.start_date,
        last_day: model::last_committed_day(c.end_date, c.released_on),
        as_of,
        lines,
        idle_share: model::idle_share(summary.diagnostics.idle_hours, summary.accelerator_hours),
        provider,
    }
}

/// The commitment's use from its start to `as_of` (days before it), read from the ledger.
async fn detail_of(
    state: &AppState,
    names: &mut Names,
    c: CommitmentRow,
    as_of: NaiveDate,
) -> Result<CommitmentDetail, AppError> {
    let last_day = model::last_committed_day(c.end_date, c.released_on);
    let until = as_of.min(last_day.succ_opt().unwrap_or(last_day));
    let (lines, provider) = term_lines(state, &c, until).await?;
    let summary = ledger::summary_from_pool(&state.pool, c.trial_id, &c.currency).await?;
    let months = model::months(&use_basis(&c, as_of, &summary, &lines, &provider));
    let (brief_name, trial_name, teams) = names.of(state, c.brief_id, c.trial_id).await?;
    let current = prices_for_renewals(state, std::slice::from_ref(&c)).await?;
    Ok(assemble(c, months, brief_name, trial_name, teams, as_of, &current))
}

/// A commitment's detail from its months and names.
fn assemble(
    c: CommitmentRow,
    months: Vec<MonthUse>,
    brief_name: String,
    trial_name: String,
    teams: Vec<String>,
    as_of: NaiveDate,
    current: &RenewalPrices,
) -> CommitmentDetail {
    let last_day = model::last_committed_day(c.end_date, c.released_on);
    let term = model::term_use(&months);
    let renewal = if c.state == CommitmentState::RenewalDue {
        renewal_at(current, &c, &term)
    } else {
        None
    };
    CommitmentDetail {
        renewal,
        brief_name,
        trial_name,
        teams,
        days_left: if c.state == CommitmentState::Released {
            0
        } else {
            model::days_left(as_of, last_day)
        },
        term,
        months,
        commitment: c,
    }
}

/// Which of `rows` are measured one by one ([`detail_of`]): those whose provider id names FOCUS
/// rows, which merge with the ledger lines.
async fn measured_alone(state: &AppState, rows: &[CommitmentRow]) -> Result<Vec<bool>, AppError> {
    let provider_ids: Vec<(BriefId, &str)> = rows
        .iter()
        .filter_map(|c| c.provider_commitment_id.as_deref().map(|id| (c.brief_id, id)))
        .collect();
    let with_rows = ledger::commitment_ids_with_rows(&state.pool, &provider_ids).await?;
    Ok(rows
        .iter()
        .map(|c| {
            c.provider_commitment_id
                .as_ref()
                .is_some_and(|id| with_rows.contains(&(c.brief_id, id.clone())))
        })
        .collect())
}

/// Every month of every term measured together, in order, as (brief, from, to); and where each
/// commitment's months start among them (`first[i]`).
type Windows = Vec<(BriefId, NaiveDate, NaiveDate)>;
fn month_days_of(rows: &[CommitmentRow], alone: &[bool], as_of: NaiveDate) -> (Windows, Vec<usize>) {
    let mut windows = Vec::new();
    let mut first = Vec::with_capacity(rows.len());
    for (c, alone) in rows.iter().zip(alone) {
        first.push(windows.len());
        if !alone {
            let last_day = model::last_committed_day(c.end_date, c.released_on);
            windows.extend(
                model::month_days(c.start_date, last_day, as_of)
                    .into_iter()
                    .map(|(from, to)| (c.brief_id, from, to)),
            );
        }
    }
    (windows, first)
}

/// The names a list shows, of a set of briefs at once: their briefs', trials' and teams', and
/// which trials each brief has.
struct ListNames {
    brief: BTreeMap<BriefId, String>,
    trial: BTreeMap<TrialId, String>,
    teams: BTreeMap<BriefId, Vec<String>>,
    trials: Vec<(BriefId, TrialId)>,
}

impl ListNames {
    async fn of(state: &AppState, brief_ids: &[BriefId]) -> Result<Self, AppError> {
        let brief = briefs::names(&state.pool, brief_ids).await?.into_iter().collect();
        let mut trial = BTreeMap::new();
        let mut trials = Vec::new();
        for (brief, id, name) in trials::names_of_briefs(state, brief_ids).await? {
            trial.insert(id, name);
            trials.push((brief, id));
        }
        let mut teams: BTreeMap<BriefId, Vec<String>> = BTreeMap::new();
        for (brief, name) in teams::team_names_of_briefs(&state.pool, brief_ids).await? {
            teams.entry(brief).or_default().push(name);
        }
        Ok(Self {
            brief,
            trial,
            teams,
            trials,
        })
    }
}

/// [`detail_of`] of many commitments with a fixed number of statements, whatever their number:
/// the names of their briefs, trials and teams, their trials' ledger summaries, and the merged
/// GPU-hours of every month of every term in one statement over the ledger lines. A commitment
/// whose provider id names FOCUS rows (they merge with the lines) is measured as [`detail_of`]
/// measures it. The same figures as [`detail_of`] (`model::months_with` over the same months).
async fn details_of(
    state: &AppState,
    rows: Vec<CommitmentRow>,
    as_of: NaiveDate,
) -> Result<Vec<CommitmentDetail>, AppError> {
    if rows.is_empty() {
        return Ok(Vec::new());
    }
    let alone = measured_alone(state, &rows).await?;

    let mut brief_ids: Vec<BriefId> = rows.iter().map(|c| c.brief_id).collect();
    brief_ids.sort_unstable();
    brief_ids.dedup();
    let names = ListNames::of(state, &brief_ids).await?;

    let keys: Vec<(TrialId, &str)> = rows.iter().map(|c| (c.trial_id, c.currency.as_str())).collect();
    let summaries = ledger::summaries_from_pool(&state.pool, &keys).await?;

    let (windows, first) = month_days_of(&rows, &alone, as_of);
    let micros = ledger::accelerator_micros_by_window(&state.pool, &windows, &names.trials).await?;
    let hours = |gpu_micros: i128| {
        Merged {
            gpu_micros,
            cost: Decimal::ZERO,
        }
        .gpu_hours()
    };

    let current = prices_for_renewals(state, &rows).await?;
    let mut one_by_one = Names::default();
    let mut items = Vec::with_capacity(rows.len());
    for (((c, summary), first), alone) in rows.into_iter().zip(summaries).zip(first).zip(alone) {
        if alone {
            items.push(detail_of(state, &mut one_by_one, c, as_of).await?);
            continue;
        }
        let mut window = first;
        let months = model::months_with(&use_basis(&c, as_of, &summary, &[], &[]), |_, _| {
            let per_trial = micros.get(window).map(Vec::as_slice).unwrap_or(&[]);
            window += 1;
            let billed: i128 = per_trial.iter().filter(|(t, _)| *t == c.trial_id).map(|(_, m)| m).sum();
            let brief: i128 = per_trial.iter().map(|(_, m)| m).sum();
            (hours(billed), hours(brief))
        });
        let brief_name = names.brief.get(&c.brief_id).cloned().unwrap_or_default();
        let trial_name = names.trial.get(&c.trial_id).cloned().unwrap_or_default();
        let teams = names.teams.get(&c.brief_id).cloned().unwrap_or_default();
        items.push(assemble(c, months, brief_name, trial_name, teams, as_of, &current));
    }
    Ok(items)
}

/// The accelerator lines of the brief from the term's start to `until`, with the FOCUS rows that
/// name the commitment's `provider_commitment_id`: a row the provider does not mark `Unused` is
/// the committed trial's accelerator time (whoever's it was tagged for), merged with its lines as
/// the ledger merges them; those marked `Used` or `Unused` are the provider's own figures.
async fn term_lines(
    state: &AppState,
    c: &CommitmentRow,
    until: NaiveDate,
) -> Result<(Vec<AcceleratorUse>, Vec<ProviderUse>), AppError> {
    if until <= c.start_date {
        return Ok((Vec::new(), Vec::new()));
    }
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc();
    let (from, to) = (midnight(c.start_date), midnight(until));
    let mut lines: Vec<AcceleratorUse> = ledger::accelerator_spans(&state.pool, c.brief_id, from, to)
        .await?
        .into_iter()
        .map(|s| AcceleratorUse {
            trial: s.trial_id,
            resource: s.resource,
            starts_at: s.starts_at,
            ends_at: s.ends_at,
            gpus: s.gpus,
        })
        .collect();
    let mut provider = Vec::new();
    let Some(id) = c.provider_commitment_id.as_deref() else {
        return Ok((lines, provider));
    };
    for r in ledger::commitment_use(&state.pool, c.brief_id, id, from, to).await? {
        let gpus = r.gpus.unwrap_or(c.gpus_per_node);
        let used = match r.status.as_deref() {
            Some("Used") => Some(true),
            Some("Unused") => Some(false),
            _ => None,
        };
        if used != Some(false) {
            lines.push(AcceleratorUse {
                trial: c.trial_id,
                resource: r.resource.clone(),
                starts_at: r.starts_at,
                ends_at: r.ends_at,
                gpus,
            });
        }
        if let Some(used) = used {
            provider.push(ProviderUse {
                used,
                starts_at: r.starts_at,
                ends_at: r.ends_at,
                gpus,
            });
        }
    }
    Ok((lines, provider))
}

/// The commitments the caller may see, `state` filtering, a page of them (newest start first) each
/// with its use so far, and the totals of them all. Only the page's commitments are measured; the
/// totals need their monthly cost and teams alone.
pub async fn list(
    state: &AppState,
    caller: &Principal,
    filter: Option<&str>,
    paging: Paging<'_>,
) -> Result<CommitmentList, AppError> {
    let sight = sight(caller)?;
    let filter = match filter.map(str::trim).filter(|s| !s.is_empty()) {
        Some(s) => Some(s.parse::<CommitmentState>().map_err(|()| {
            AppError::Validation(vec![FieldError::new(
                "state",
                "must be one of active, revalidation-due, regressed, renewal-due, ended, released",
            )])
        })?),
        None => None,
    };
    let (after, limit) = read_paging(paging)?;
    let keys = repo::keys(&state.pool, filter.map(CommitmentState::as_str)).await?;
    let shown = visible_keys(state, caller, sight, keys).await?;
    let Totals {
        per_currency: totals_per_currency,
        per_team: totals_per_team,
        needing_attention,
    } = totals(state, &shown).await?;
    // The list is ordered newest start first (start_date DESC, id DESC): a page starts after the
    // cursor, at the first commitment below it.
    let start = after.map_or(0, |(day, id)| {
        shown.partition_point(|c| (c.start_date, c.id) >= (day, id))
    });
    let page = &shown[start.min(shown.len())..];
    let (page, next_cursor) = if page.len() > limit {
        (&page[..limit], page.get(limit - 1).map(encode_cursor))
    } else {
        (page, None)
    };
    let ids: Vec<CommitmentId> = page.iter().map(|c| c.id).collect();
    let rows = repo::get_many(&state.pool, &ids).await?;
    let items = details_of(state, rows, today()).await?;
    Ok(CommitmentList {
        items,
        total: shown.len(),
        needing_attention,
        totals_per_currency,
        totals_per_team,
        next_cursor,
    })
}

/// Where a page starts (after the cursor's commitment) and how many it holds: a damaged cursor or a
/// limit out of range is a 422 at its field.
fn read_paging(paging: Paging<'_>) -> Result<(Option<(NaiveDate, CommitmentId)>, usize), AppError> {
    let Paging::After { cursor, limit } = paging else {
        return Ok((None, usize::MAX));
    };
    if !(1..=MAX_PAGE).contains(&limit) {
        return Err(AppError::Validation(vec![FieldError::new(
            "limit",
            format!("must be 1 to {MAX_PAGE}"),
        )]));
    }
    let after = match cursor.filter(|c| !c.is_empty()) {
        Some(c) => Some(decode_cursor(c).ok_or_else(|| {
            AppError::Validation(vec![FieldError::new("cursor", "is not a next_cursor this list wrote")])
        })?),
        None => None,
    };
    Ok((after, limit))
}

/// What a list adds up over all its pages.
struct Totals {
    per_currency: Vec<model::CurrencyTotal>,
    per_team: Vec<TeamTotal>,
    needing_attention: usize,
}

/// The running commitments' monthly cost per currency and per team (the teams of their briefs, read
/// once), and how many commitments need attention.
async fn totals(state: &AppState, shown: &[repo::CommitmentKey]) -> Result<Totals, AppError> {
    let mut brief_ids: Vec<BriefId> = shown.iter().map(|c| c.brief_id).collect();
    brief_ids.sort_unstable();
    brief_ids.dedup();
    let mut teams_of: BTreeMap<BriefId, Vec<String>> = BTreeMap::new();
    for (brief, name) in teams::team_names_of_briefs(&state.pool, &brief_ids).await? {
        teams_of.entry(brief).or_default().push(name);
    }
    let running = || shown.iter().filter(|c| c.state.running());
    Ok(Totals {
        per_currency: model::totals_per_currency(running().map(|c| (c.currency.as_str(), c.monthly_cost))),
        per_team: model::totals_per_team(running().map(|c| {
            (
                teams_of.get(&c.brief_id).map_or(&[][..], Vec::as_slice),
                c.currency.as_str(),
                c.monthly_cost,
            )
        })),
        needing_attention: shown.iter().filter(|c| c.state.needs_attention()).count(),
    })
}

/// Of `keys`, those the caller may see: all of them for managers and admins (`all`), else those of
/// the briefs the caller may edit (`auth::teams`, one statement for all of them).
async fn visible_keys(
    state: &AppState,
    caller: &Principal,
    sight: Sight,
    mut keys: Vec<repo::CommitmentKey>,
) -> Result<Vec<repo::CommitmentKey>, AppError> {
    match sight {
        Sight::All => return Ok(keys),
        Sight::OneBrief { brief, .. } => {
            keys.retain(|c| c.brief_id == brief);
            if !may_read(state, caller, sight, brief).await? {
                keys.clear();
            }
            return Ok(keys);
        }
        Sight::Editable => {}
    }
    let mut briefs: Vec<BriefId> = keys.iter().map(|c| c.brief_id).collect();
    briefs.sort_unstable();
    briefs.dedup();
    let editable = teams::editable_of(&state.pool, caller, &briefs).await?;
    Ok(keys.into_iter().filter(|c| editable.contains(&c.brief_id)).collect())
}

/// One commitment with its months; 404 for one the caller may not see.
pub async fn get(state: &AppState, caller: &Principal, id: CommitmentId) -> Result<CommitmentDetail, AppError> {
    let sight = sight(caller)?;
    let row = repo::get(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("commitment"))?;
    if !may_read(state, caller, sight, row.brief_id).await? {
        return Err(AppError::NotFound("commitment"));
    }
    detail_of(state, &mut Names::default(), row, today()).await
}

/// Longest provider commitment id.
const MAX_PROVIDER_ID: usize = 200;

/// What a manager's change asks for, checked against the commitment as it is.
struct Change {
    provider_id: Option<String>,
    every: i32,
    released_on: Option<NaiveDate>,
}

/// Reads `body` field by field over `before`: each bad field is named (422), and a release is
/// never taken back, nor an ended commitment released (409).
fn read_change(before: &CommitmentRow, body: &Map<String, Value>) -> Result<Change, AppError> {
    let mut provider_id = before.provider_commitment_id.clone();
    let mut every = before.revalidate_every_days;
    let mut released_on = before.released_on;
    let mut errors = Vec::new();
    for (field, value) in body {
        match field.as_str() {
            "provider_commitment_id" => match value {
                Value::Null => provider_id = None,
                // One line, as every id field: a line break or other control character is refused.
                Value::String(s) if s.chars().any(char::is_control) => errors.push(FieldError::new(
                    field.clone(),
                    "must be one line, without control characters",
                )),
                Value::String(s) if !s.trim().is_empty() && s.trim().chars().count() <= MAX_PROVIDER_ID => {
                    provider_id = Some(s.trim().to_owned());
                }
                _ => errors.push(FieldError::new(
                    field.clone(),
                    format!("must be the provider's id as a string of 1 to {MAX_PROVIDER_ID} characters, or null"),
                )),
            },
            "revalidate_every_days" => match value.as_i64().filter(|d| (1..=365).contains(d)) {
                Some(d) => every = d as i32,
                None => errors.push(FieldError::new(
                    field.clone(),
                    "must be a whole number of days from 1 to 365",
                )),
            },
            "released_on" => match value.as_str().and_then(|s| s.parse::<NaiveDate>().ok()) {
                Some(d) if d >= before.start_date && d <= before.end_date => released_on = Some(d),
                Some(_) => errors.push(FieldError::new(
                    field.clone(),
                    format!(
                        "must be inside the term, from {} to {}",
                        before.start_date, before.end_date
                    ),
                )),
                None => errors.push(FieldError::new(field.clone(), "must be a date such as 2026-11-30")),
            },
            _ => errors.push(FieldError::new(
                field.clone(),
                "is not a field a manager may change (provider_commitment_id, revalidate_every_days, released_on)",
            )),
        }
    }
    if !errors.is_empty() {
        return Err(AppError::Validation(errors));
    }
    // An ended term has nothing left to release.
    if before.state == CommitmentState::Ended && released_on != before.released_on {
        return Err(AppError::Conflict(format!(
            "this commitment ended on {}; there is nothing left to release",
            before.end_date
        )));
    }
    if before.released_on.is_some() && released_on != before.released_on {
        return Err(AppError::Conflict(format!(
            "this commitment was released on {}; a release is not taken back",
            before.released_on.unwrap_or_default()
        )));
    }
    Ok(Change {
        provider_id,
        every,
        released_on,
    })
}

/// A manager's change: `provider_commitment_id` (a string, or null to clear it),
/// `revalidate_every_days` (1–365) and `released_on` (a date inside the term: the commitment is
/// released that day). Any other field is refused. Audited with before and after.
pub async fn patch(
    state: &AppState,
    caller: &Principal,
    id: CommitmentId,
    body: &Map<String, Value>,
) -> Result<CommitmentDetail, AppError> {
    caller.require_person(Role::Manager)?;
    caller.require_unscoped()?;
    let mut tx = state.pool.begin().await?;
    repo::lock(&mut *tx, id)
        .await?
        .ok_or(AppError::NotFound("commitment"))?;
    let before = repo::get(&mut *tx, id).await?.ok_or(AppError::NotFound("commitment"))?;
    let Change {
        provider_id,
        every,
        released_on,
    } = read_change(&before, body)?;
    // A release takes effect at once when it is dated today or earlier, or on or before the term's
    // first day (nothing was ever committed); one dated later, while the term runs, on its day (the
    // judging round moves it then), and the hours until then stay committed.
    let (state_now, reason) = match released_on {
        Some(d) if before.released_on.is_none() && d <= today().max(before.start_date) => (
            CommitmentState::Released,
            format!("released on {d} by {}", caller.label()),
        ),
        _ => (before.state, before.state_reason.clone()),
    };
    repo::update(
        &mut *tx,
        id,
        provider_id.as_deref(),
        every,
        released_on,
        state_now.as_str(),
        &reason,
    )
    .await?;
    audit::record(
        &mut *tx,
        &caller.label(),
        "commitment.changed",
        &format!("brief:{}", before.brief_id),
        json!({
            "commitment": id,
            "before": {
                "provider_commitment_id": before.provider_commitment_id,
                "revalidate_every_days": before.revalidate_every_days,
                "released_on": before.released_on,
                "state": before.state,
            },
            "after": {
                "provider_commitment_id": provider_id,
                "revalidate_every_days": every,
                "released_on": released_on,
                "state": state_now,
            },
        }),
    )
    .await?;
    tx.commit().await?;
    let after = repo::get(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("commitment"))?;
    detail_of(state, &mut Names::default(), after, today()).await
}

/// The committed trial's criteria judged on the evidence received after `since` (the approval)
/// only, in the shape the approval keeps them: `[{ key, op, stage, required, status, value }]`.
pub async fn rerun_criteria(
    state: &AppState,
    brief_id: BriefId,
    trial_id: TrialId,
    since: DateTime<Utc>,
) -> Result<Value, AppError> {
    let brief = trials::load_brief(&state.pool, brief_id).await?;
    let trial = trials::load(state, trial_id).await?;
    let sizing = brief.fields.sizing();
    let alloc = Allocation::resolve(trial.fields.gpu.as_deref(), trial.fields.gpu_count, &sizing);
    let card = cards::evaluate_trial_since(&state.pool, &brief, trial_id, alloc.as_ref(), since).await?;
    Ok(Value::Array(
        card.evaluation
            .criteria
            .into_iter()
            .map(|e| {
                json!({
                    "key": e.criterion.key,
                    "op": e.criterion.op.as_str(),
                    "stage": e.criterion.stage,
                    "required": e.criterion.required,
                    "unit": e.criterion.unit,
                    "status": e.status,
                    "value": e.value,
                })
            })
            .collect(),
    ))
}

/// The words of the regression of the commitment an approval opened, when it is regressed (the
/// review says why the approval went stale).
pub async fn regression_of(db: impl sqlx::PgExecutor<'_>, approval_id: ApprovalId) -> Result<Option<String>, AppError> {
    Ok(repo::regression_of(db, approval_id).await?)
}

/// The trial's running commitment, if it has one: (its id, its re-validation period in days). The
/// plan page schedules the re-validation from it.
pub async fn running_of_trial(state: &AppState, trial_id: TrialId) -> Result<Option<(CommitmentId, u32)>, AppError> {
    Ok(repo::running_of_trial(&state.pool, trial_id)
        .await?
        .map(|(id, every)| (id, u32::try_from(every).unwrap_or(30))))
}

/// One running commitment's gauges for Prometheus (`/metrics/briefs`).
pub struct Gauge {
    pub id: CommitmentId,
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    /// This month's busy share of the committed GPU-hours (none before the term starts).
    pub utilization: Option<Decimal>,
    pub monthly_cost: Decimal,
    pub days_left: i64,
}

/// The gauges of every commitment that is neither ended nor released, measured together.
pub async fn gauges(state: &AppState) -> Result<Vec<Gauge>, AppError> {
    let running: Vec<CommitmentRow> = repo::list(&state.pool, None)
        .await?
        .into_iter()
        .filter(|c| c.state.running())
        .collect();
    Ok(details_of(state, running, today())
        .await?
        .into_iter()
        .map(|d| Gauge {
            id: d.commitment.id,
            brief_id: d.commitment.brief_id,
            trial_id: d.commitment.trial_id,
            utilization: d.this_month().and_then(|m| m.utilization),
            monthly_cost: d.commitment.monthly_cost,
            days_left: d.days_left,
        })
        .collect())
}

/// A brief's commitment whose renewal is due, as the review shows it beside the approval form:
/// approving a reservation of the trial then renews it (a new commitment linked to this one).
#[derive(Debug, Clone)]
pub struct RenewalNotice {
    pub commitment: CommitmentId,
    pub trial_name: String,
    pub end_date: NaiveDate,
    /// Renew, resize or release, with why; `None` while the term has no figures to judge.
    pub renewal: Option<model::Renewal>,
}

/// The [`RenewalNotice`] of `brief_id`, when one of its commitments is renewal-due.
pub async fn renewal_notice(state: &AppState, brief_id: BriefId) -> Result<Option<RenewalNotice>, AppError> {
    let Some((id, _)) = repo::renewal_due_of(&state.pool, brief_id).await? else {
        return Ok(None);
    };
    let Some(row) = repo::get(&state.pool, id).await? else {
        return Ok(None);
    };
    let detail = detail_of(state, &mut Names::default(), row, today()).await?;
    Ok(Some(RenewalNotice {
        commitment: id,
        end_date: detail.commitment.end_date,
        trial_name: detail.trial_name,
        renewal: detail.renewal,
    }))
}

/// Of each of `brief_ids`, the commitment that needs attention, if one does: (its id, its state).
/// The dashboard marks those briefs.
pub async fn needing_attention(
    state: &AppState,
    brief_ids: &[BriefId],
) -> Result<BTreeMap<BriefId, (CommitmentId, CommitmentState)>, AppError> {
    Ok(repo::needing_attention(&state.pool, brief_ids)
        .await?
        .into_iter()
        .map(|(brief, id, s)| (brief, (id, s)))
        .collect())
}
