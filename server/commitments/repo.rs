//! SQL of commitments: the `commitments` table only (names, ledger lines and evidence come from
//! their own domains' services).

use chrono::{DateTime, NaiveDate, Utc};
use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use sqlx::PgExecutor;
use uuid::Uuid;

use super::model::CommitmentState;
use crate::ids::{ApprovalId, BriefId, CommitmentId, TrialId};

/// A commitment as stored.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
#[schema(as = Commitment)]
pub struct CommitmentRow {
    #[schema(value_type = Uuid)]
    pub id: CommitmentId,
    /// The brief's id.
    #[serde(rename = "brief")]
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    /// The committed trial's id.
    #[serde(rename = "trial")]
    #[schema(value_type = Uuid)]
    pub trial_id: TrialId,
    /// The approval that recorded the reservation, and when.
    #[schema(value_type = Uuid)]
    pub approval_id: ApprovalId,
    pub approved_at: DateTime<Utc>,
    pub provider: String,
    pub gpu: String,
    pub gpus_per_node: i32,
    pub gpus: i32,
    pub billing: String,
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub rate_per_gpu_hour: Decimal,
    /// The offer's on-demand rate when the approval was recorded (null when none was known).
    #[serde(with = "rust_decimal::serde::str_option")]
    #[schema(value_type = Option<String>)]
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    pub currency: String,
    pub term_months: i32,
    pub start_date: NaiveDate,
    /// The term's last day (included).
    pub end_date: NaiveDate,
    /// GPUs × rate × 730.
    #[serde(with = "rust_decimal::serde::str")]
    #[schema(value_type = String)]
    pub monthly_cost: Decimal,
    pub provider_commitment_id: Option<String>,
    pub revalidate_every_days: i32,
    /// active | revalidation-due | regressed | renewal-due | ended | released.
    pub state: CommitmentState,
    /// Why it is in that state, in words.
    pub state_reason: String,
    pub state_changed_at: DateTime<Utc>,
    /// The newest run (evidence) of the trial since the approval, as the background task last saw it.
    pub last_run_at: Option<DateTime<Utc>>,
    pub released_on: Option<NaiveDate>,
    /// The commitment this one renews.
    #[schema(value_type = Option<Uuid>)]
    pub renews: Option<CommitmentId>,
    pub created_at: DateTime<Utc>,
}

/// A commitment to open.
pub struct NewCommitment<'a> {
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub approval_id: ApprovalId,
    pub approved_at: DateTime<Utc>,
    pub approved_criteria: &'a Value,
    pub provider: &'a str,
    pub gpu: &'a str,
    pub gpus_per_node: i32,
    pub gpus: i32,
    pub billing: &'a str,
    pub rate_per_gpu_hour: Decimal,
    pub on_demand_rate_per_gpu_hour: Option<Decimal>,
    pub currency: &'a str,
    pub term_months: i32,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub monthly_cost: Decimal,
    pub renews: Option<CommitmentId>,
}

pub async fn insert(db: impl PgExecutor<'_>, c: &NewCommitment<'_>) -> Result<CommitmentId, sqlx::Error> {
    let id = sqlx::query_scalar!(
        "INSERT INTO commitments (id, brief_id, trial_id, approval_id, approved_at, approved_criteria, provider, gpu,
             gpus_per_node, gpus, billing, rate_per_gpu_hour, on_demand_rate_per_gpu_hour, currency, term_months,
             start_date, end_date, monthly_cost, renews)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)
         RETURNING id",
        Uuid::now_v7(),
        c.brief_id.as_uuid(),
        c.trial_id.as_uuid(),
        c.approval_id.as_uuid(),
        c.approved_at,
        c.approved_criteria,
        c.provider,
        c.gpu,
        c.gpus_per_node,
        c.gpus,
        c.billing,
        c.rate_per_gpu_hour,
        c.on_demand_rate_per_gpu_hour,
        c.currency,
        c.term_months,
        c.start_date,
        c.end_date,
        c.monthly_cost,
        c.renews.map(CommitmentId::as_uuid),
    )
    .fetch_one(db)
    .await?;
    Ok(id.into())
}

/// The brief's commitment a new reservation renews: its newest one whose renewal is due and not
/// yet approved (no commitment renews it already), with its last day.
pub async fn renewal_due_of(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
) -> Result<Option<(CommitmentId, NaiveDate)>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT id, end_date FROM commitments c WHERE brief_id = $1 AND state = 'renewal-due'
           AND NOT EXISTS (SELECT 1 FROM commitments n WHERE n.renews = c.id)
         ORDER BY end_date DESC, id DESC LIMIT 1",
        brief_id.as_uuid()
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id.into(), r.end_date)))
}

/// The offer a reservation rents, as a running commitment of it is found.
pub struct OfferOf<'a> {
    pub trial_id: TrialId,
    pub provider: &'a str,
    pub gpu: &'a str,
    pub gpus: i32,
    pub gpus_per_node: i32,
    pub billing: &'a str,
    pub currency: &'a str,
    pub term_months: i32,
}

/// The trial's commitment of the same offer (provider, GPU, GPUs, node size, billing, currency and
/// term) that runs and is not on its way out: active, due a re-validation or regressed, not due for
/// renewal and not released from a day ahead. The one whose term has begun first, then the newest.
pub async fn running_of_offer(db: impl PgExecutor<'_>, o: &OfferOf<'_>) -> Result<Option<CommitmentId>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM commitments
         WHERE trial_id = $1 AND state IN ('active', 'revalidation-due', 'regressed') AND released_on IS NULL
           AND provider = $2 AND gpu = $3 AND gpus = $4 AND gpus_per_node = $5 AND billing = $6
           AND currency = $7 AND term_months = $8
         ORDER BY start_date <= (now() AT TIME ZONE 'UTC')::date DESC, start_date DESC, id DESC LIMIT 1",
        o.trial_id.as_uuid(),
        o.provider,
        o.gpu,
        o.gpus,
        o.gpus_per_node,
        o.billing,
        o.currency,
        o.term_months,
    )
    .fetch_optional(db)
    .await
    .map(|id| id.map(CommitmentId::from))
}

/// Pins a running commitment to a later approval: what later runs are judged against, from when.
/// Its state starts again from active (a regression is answered by the approval), and the task
/// judges it at its next round with no run seen yet.
pub async fn pin_to_approval(
    db: impl PgExecutor<'_>,
    id: CommitmentId,
    approval_id: ApprovalId,
    approved_at: DateTime<Utc>,
    approved_criteria: &Value,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE commitments SET approval_id = $2, approved_at = $3, approved_criteria = $4,
             state = 'active', state_reason = '', state_changed_at = now(), last_run_at = NULL, checked_at = NULL
         WHERE id = $1",
        id.as_uuid(),
        approval_id.as_uuid(),
        approved_at,
        approved_criteria,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// `SELECT <every column of a commitment> FROM commitments <tail>`, checked at build time as
/// `query_as!` of [`CommitmentRow`]: the column list written once for every statement that reads
/// whole commitments.
macro_rules! query_commitment_row {
    ($tail:literal $(, $($args:tt)*)?) => {
        sqlx::query_as!(
            CommitmentRow,
            r#"SELECT id, brief_id, trial_id, approval_id, approved_at, provider, gpu, gpus_per_node, gpus,
                  billing, rate_per_gpu_hour, on_demand_rate_per_gpu_hour, currency, term_months, start_date,
                  end_date, monthly_cost, provider_commitment_id, revalidate_every_days,
                  state AS "state: CommitmentState", state_reason, state_changed_at, last_run_at, released_on,
                  renews AS "renews: CommitmentId", created_at
               FROM commitments "#
                + $tail
            $(, $($args)*)?
        )
    };
}

/// Every commitment, newest start first; `state` filters when given.
pub async fn list(db: impl PgExecutor<'_>, state: Option<&str>) -> Result<Vec<CommitmentRow>, sqlx::Error> {
    query_commitment_row!(
        "WHERE ($1::text IS NULL OR state = $1) ORDER BY start_date DESC, id DESC",
        state,
    )
    .fetch_all(db)
    .await
}

/// What a list needs of every commitment to page it and add up its totals.
#[derive(Debug, Clone)]
pub struct CommitmentKey {
    pub id: CommitmentId,
    pub brief_id: BriefId,
    pub start_date: NaiveDate,
    pub state: CommitmentState,
    pub currency: String,
    pub monthly_cost: Decimal,
}

/// [`CommitmentKey`] of every commitment (in `state` when given), newest start first, as [`list`]
/// orders them.
pub async fn keys(db: impl PgExecutor<'_>, state: Option<&str>) -> Result<Vec<CommitmentKey>, sqlx::Error> {
    sqlx::query_as!(
        CommitmentKey,
        r#"SELECT id, brief_id, start_date, state AS "state: CommitmentState", currency, monthly_cost FROM commitments
           WHERE ($1::text IS NULL OR state = $1)
           ORDER BY start_date DESC, id DESC"#,
        state,
    )
    .fetch_all(db)
    .await
}

/// The commitments of `ids`, newest start first.
pub async fn get_many(db: impl PgExecutor<'_>, ids: &[CommitmentId]) -> Result<Vec<CommitmentRow>, sqlx::Error> {
    query_commitment_row!("WHERE id = ANY($1) ORDER BY start_date DESC, id DESC", ids as _,)
        .fetch_all(db)
        .await
}

pub async fn get(db: impl PgExecutor<'_>, id: CommitmentId) -> Result<Option<CommitmentRow>, sqlx::Error> {
    query_commitment_row!("WHERE id = $1", id.as_uuid(),)
        .fetch_optional(db)
        .await
}

/// Locks one commitment for a change; `None` when there is none.
pub async fn lock(db: impl PgExecutor<'_>, id: CommitmentId) -> Result<Option<CommitmentId>, sqlx::Error> {
    sqlx::query_scalar!("SELECT id FROM commitments WHERE id = $1 FOR UPDATE", id.as_uuid())
        .fetch_optional(db)
        .await
        .map(|id| id.map(CommitmentId::from))
}

/// What a manager may change: the provider's id, the re-validation period and the release.
pub async fn update(
    db: impl PgExecutor<'_>,
    id: CommitmentId,
    provider_commitment_id: Option<&str>,
    revalidate_every_days: i32,
    released_on: Option<NaiveDate>,
    state: &str,
    state_reason: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "UPDATE commitments SET provider_commitment_id = $2, revalidate_every_days = $3, released_on = $4,
             state_changed_at = CASE WHEN state <> $5 THEN now() ELSE state_changed_at END,
             state = $5, state_reason = $6
         WHERE id = $1",
        id.as_uuid(),
        provider_commitment_id,
        revalidate_every_days,
        released_on,
        state,
        state_reason,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// A commitment the background task judges, with what it reads.
pub struct Due {
    pub id: CommitmentId,
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub approved_at: DateTime<Utc>,
    pub approved_criteria: Value,
    pub state: CommitmentState,
    pub state_reason: String,
    pub start_date: NaiveDate,
    pub end_date: NaiveDate,
    pub released_on: Option<NaiveDate>,
    pub revalidate_every_days: i32,
    /// The newest run of the trial it saw last time (`None`: none since the approval).
    pub last_run_at: Option<DateTime<Utc>>,
    /// When it last judged it (`None`: never).
    pub checked_at: Option<DateTime<Utc>>,
    /// A newer commitment renews it.
    pub renewed: bool,
    /// It renews an older one.
    pub renews_another: bool,
}

/// Claims up to `limit` commitments that are not final and were not judged within `every`
/// (or never): locked until the caller's transaction ends and skipped by another server's claim
/// meanwhile (`SKIP LOCKED`), so two servers never judge one at once.
pub async fn claim_due(db: impl PgExecutor<'_>, limit: i64, every_secs: f64) -> Result<Vec<Due>, sqlx::Error> {
    sqlx::query_as!(
        Due,
        r#"SELECT id, brief_id, trial_id, approved_at, approved_criteria, state AS "state: CommitmentState", state_reason, start_date, end_date,
                  released_on, revalidate_every_days, last_run_at, checked_at,
                  EXISTS (SELECT 1 FROM commitments n WHERE n.renews = c.id) AS "renewed!",
                  renews IS NOT NULL AS "renews_another!"
           FROM commitments c
           WHERE state NOT IN ('ended', 'released')
             AND (checked_at IS NULL OR checked_at < now() - make_interval(secs => $2))
           ORDER BY checked_at NULLS FIRST, id
           LIMIT $1
           FOR UPDATE SKIP LOCKED"#,
        limit,
        every_secs,
    )
    .fetch_all(db)
    .await
}

/// The task's judgements of one round, as columns: each commitment's state, why, and the newest
/// run it saw.
#[derive(Debug, Default)]
pub struct Judged {
    ids: Vec<CommitmentId>,
    states: Vec<String>,
    reasons: Vec<String>,
    last_runs: Vec<Option<DateTime<Utc>>>,
}

impl Judged {
    pub fn push(&mut self, id: CommitmentId, state: &str, reason: &str, last_run: Option<DateTime<Utc>>) {
        self.ids.push(id);
        self.states.push(state.to_owned());
        self.reasons.push(reason.to_owned());
        self.last_runs.push(last_run);
    }
}

/// Records the task's judgements of a round in one statement: the state, why, the newest run it
/// saw, and when it looked.
pub async fn set_judged(db: impl PgExecutor<'_>, judged: &Judged) -> Result<(), sqlx::Error> {
    if judged.ids.is_empty() {
        return Ok(());
    }
    sqlx::query!(
        "UPDATE commitments c SET checked_at = now(), state_reason = j.reason, last_run_at = j.last_run,
             state_changed_at = CASE WHEN c.state <> j.state THEN now() ELSE c.state_changed_at END, state = j.state
         FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[]) AS j (id, state, reason, last_run)
         WHERE c.id = j.id",
        &judged.ids as _,
        &judged.states,
        &judged.reasons,
        &judged.last_runs as &[Option<DateTime<Utc>>],
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Of each brief in `brief_ids`, its newest commitment that needs attention (re-validation or
/// renewal due, or regressed): (brief, commitment, state).
pub async fn needing_attention(
    db: impl PgExecutor<'_>,
    brief_ids: &[BriefId],
) -> Result<Vec<(BriefId, CommitmentId, CommitmentState)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT DISTINCT ON (brief_id) brief_id, id, state AS "state: CommitmentState" FROM commitments
         WHERE brief_id = ANY($1) AND state IN ('revalidation-due', 'regressed', 'renewal-due')
         ORDER BY brief_id, start_date DESC, id DESC"#,
        brief_ids as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| (r.brief_id.into(), r.id.into(), r.state))
        .collect())
}

/// The reason of the regressed commitment `approval_id` opened, if it is regressed.
pub async fn regression_of(db: impl PgExecutor<'_>, approval_id: ApprovalId) -> Result<Option<String>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT state_reason FROM commitments WHERE approval_id = $1 AND state = 'regressed'",
        approval_id.as_uuid()
    )
    .fetch_optional(db)
    .await
}

/// The trial's running commitment (neither ended nor released), newest first: (id, its
/// re-validation period in days).
pub async fn running_of_trial(
    db: impl PgExecutor<'_>,
    trial_id: TrialId,
) -> Result<Option<(CommitmentId, i32)>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT id, revalidate_every_days FROM commitments
         WHERE trial_id = $1 AND state NOT IN ('ended', 'released')
         ORDER BY start_date DESC, id DESC LIMIT 1",
        trial_id.as_uuid()
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.id.into(), r.revalidate_every_days)))
}
