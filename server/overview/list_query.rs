//! The briefs list's SQL (the dashboard, `GET /api/v1/briefs`): briefs narrowed and ordered by
//! what several domains keep — the review's kept summaries, the evidence, owners and teams — in
//! one statement. The overview is the read model above every domain: its SQL only reads other
//! domains' tables, never writes them (`tests/it/architecture.rs`).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value};
use sqlx::{types::Json, PgExecutor};
use uuid::Uuid;

use crate::{
    briefs::{
        model::{AllocationBoundary, Brief, CostUnit, DataBoundary, Targets},
        row::query_brief_row,
    },
    db::StoredText,
    error::AppError,
    ids::{BriefId, TeamId, UserId},
    sizing::{ArchitectureFields, Precision, WorkloadKind},
};

/// What lists (the dashboard, `GET /api/v1/briefs`) narrow briefs by in SQL.
///
/// `states` and `failing` read each brief's review summary (the `review_summaries` row the review's
/// summary watcher keeps, `review::summaries`). A brief whose summary is not current (changes still queued, or never made)
/// stays a candidate whatever its stored summary says: the caller remakes its summary and checks
/// again, so a list never answers from a summary older than the last committed change.
#[derive(Debug, Clone, Default)]
pub struct BriefFilter {
    /// Words in the name, model name or catalogue model (case-insensitive, as typed).
    pub search: Option<String>,
    /// Only briefs with (true) or without (false) any evidence.
    pub has_evidence: Option<bool>,
    /// Only briefs owned by this account.
    pub owner: Option<UserId>,
    /// Only briefs shared with this team.
    pub team: Option<TeamId>,
    /// Only briefs whose summary state is one of these (`awaiting-evidence`, `needs-approval`,
    /// `stale`, `approved`, `rejected`).
    pub states: Option<Vec<String>>,
    /// Only briefs whose summary has (true) or has not (false) a failing required criterion.
    pub failing: Option<bool>,
    /// Only this brief (a token limited to one brief).
    pub only: Option<BriefId>,
}

impl BriefFilter {
    /// Whether the filter reads review summaries (and so its candidates must be checked again).
    pub fn reads_summaries(&self) -> bool {
        self.states.is_some() || self.failing.is_some()
    }

    /// The search as a LIKE pattern; `None` without words to look for.
    fn search_pattern(&self) -> Option<String> {
        self.search
            .as_deref()
            .filter(|s| !s.trim().is_empty())
            .map(like_pattern)
    }
}

/// The orders a list of briefs can take besides newest first (the dashboard's sortable columns).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BriefOrder {
    /// Name, A to Z.
    Name,
    /// Owner's email, A to Z.
    Owner,
    /// The kept summary's decision, A to Z.
    Decision,
    /// The kept summary's cost per completed job, cheapest first, unknown last.
    Cost,
    /// The kept summary's approval state, what needs a person first: needs approval, stale,
    /// awaiting evidence, rejected, approved.
    Approval,
    /// The newest evidence first, none last.
    Evidence,
    /// The newest brief first (reversed: the oldest first).
    Created,
}

impl BriefOrder {
    const ALL: [BriefOrder; 7] = [
        BriefOrder::Name,
        BriefOrder::Owner,
        BriefOrder::Decision,
        BriefOrder::Cost,
        BriefOrder::Approval,
        BriefOrder::Evidence,
        BriefOrder::Created,
    ];

    /// The order named `name` (`as_str`'s names).
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.as_str() == name)
    }

    /// Dates sort newest first; text, costs and approval states (what needs a person first)
    /// ascending.
    pub fn newest_first(self) -> bool {
        matches!(self, BriefOrder::Created | BriefOrder::Evidence)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            BriefOrder::Name => "name",
            BriefOrder::Owner => "owner",
            BriefOrder::Decision => "decision",
            BriefOrder::Cost => "cost",
            BriefOrder::Approval => "approval",
            BriefOrder::Evidence => "evidence",
            BriefOrder::Created => "created",
        }
    }
}

/// Briefs narrowed by `filter` in `order` (ties newest first), `limit` of them from `offset`.
/// Paged by offset, not by keyset: a sorted list is read a page or two deep by people, and the
/// newest-first list (`list_filtered`) keeps its keyset for the API and for deep paging. Its own
/// statement rather than an ORDER BY parameter of `list_filtered`'s: there, newest first must stay a
/// walk of the creation index, which a computed sort key would turn into a sort of every brief; the
/// column list is shared (`query_brief_row!`) because sqlx checks only literal statements.
pub async fn list_sorted(
    db: impl PgExecutor<'_>,
    filter: &BriefFilter,
    order: BriefOrder,
    reversed: bool,
    offset: i64,
    limit: i64,
) -> Result<Vec<Brief>, AppError> {
    let pattern = filter.search_pattern();
    let rows = query_brief_row!(
        "SELECT",
        r#"t.gpu AS "trial_gpu?", t.gpu_count AS "trial_gpu_count?"
           FROM briefs b LEFT JOIN trials t ON t.brief_id = b.id AND t.position = 1
             LEFT JOIN review_summaries s ON s.brief_id = b.id
           WHERE ($1::text IS NULL OR b.name ILIKE $1 OR b.model_name ILIKE $1 OR b.catalog_model ILIKE $1)
             AND ($2::bool IS NULL OR EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id) = $2)
             AND ($3::uuid IS NULL OR b.id = ANY (ARRAY(SELECT o.brief_id FROM brief_owners o WHERE o.user_id = $3)))
             AND ($4::uuid IS NULL OR EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = b.id AND bt.team_id = $4))
             AND (($5::text[] IS NULL AND $6::bool IS NULL) OR s.brief_id IS NULL
                  OR (($5::text[] IS NULL OR s.state = ANY($5)) AND ($6::bool IS NULL OR s.failing = $6))
                  OR EXISTS (SELECT 1 FROM review_changes d WHERE d.brief_id = b.id))
             AND ($7::uuid IS NULL OR b.id = $7)
           ORDER BY CASE WHEN NOT $11 THEN CASE $8 WHEN 'name' THEN lower(b.name) WHEN 'owner' THEN lower(b.owner)
                            WHEN 'decision' THEN s.decision END END ASC NULLS LAST,
                    CASE WHEN $11 THEN CASE $8 WHEN 'name' THEN lower(b.name) WHEN 'owner' THEN lower(b.owner)
                            WHEN 'decision' THEN s.decision END END DESC NULLS LAST,
                    CASE WHEN $8 = 'approval' AND NOT $11 THEN array_position(
                         ARRAY['needs-approval', 'stale', 'awaiting-evidence', 'rejected', 'approved'], s.state) END ASC NULLS LAST,
                    CASE WHEN $8 = 'approval' AND $11 THEN array_position(
                         ARRAY['needs-approval', 'stale', 'awaiting-evidence', 'rejected', 'approved'], s.state) END DESC NULLS LAST,
                    CASE WHEN $8 = 'cost' AND NOT $11 THEN s.cost_per_job END ASC NULLS LAST,
                    CASE WHEN $8 = 'cost' AND $11 THEN s.cost_per_job END DESC NULLS LAST,
                    CASE WHEN $8 = 'evidence' AND NOT $11 THEN s.last_evidence_at END DESC NULLS LAST,
                    CASE WHEN $8 = 'evidence' AND $11 THEN s.last_evidence_at END ASC NULLS LAST,
                    CASE WHEN $8 = 'created' AND $11 THEN b.created_at END ASC,
                    b.created_at DESC, b.id DESC
           OFFSET $9 LIMIT $10"#,
        pattern,
        filter.has_evidence,
        filter.owner.map(Uuid::from),
        filter.team.map(Uuid::from),
        filter.states.as_deref(),
        filter.failing,
        filter.only.map(Uuid::from),
        order.as_str(),
        offset,
        limit,
        reversed,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Brief::from).collect())
}

/// How many briefs meet `filter`, by the kept summaries (the dashboard's total; a summary being
/// remade counts with the view it had).
pub async fn count_matching(db: impl PgExecutor<'_>, filter: &BriefFilter) -> Result<i64, AppError> {
    let pattern = filter.search_pattern();
    Ok(sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM briefs b LEFT JOIN review_summaries s ON s.brief_id = b.id
           WHERE ($1::text IS NULL OR b.name ILIKE $1 OR b.model_name ILIKE $1 OR b.catalog_model ILIKE $1)
             AND ($2::bool IS NULL OR EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id) = $2)
             AND ($3::uuid IS NULL OR b.id = ANY (ARRAY(SELECT o.brief_id FROM brief_owners o WHERE o.user_id = $3)))
             AND ($4::uuid IS NULL OR EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = b.id AND bt.team_id = $4))
             AND ($5::text[] IS NULL OR s.state = ANY($5))
             AND ($6::bool IS NULL OR s.failing = $6)
             AND ($7::uuid IS NULL OR b.id = $7)"#,
        pattern,
        filter.has_evidence,
        filter.owner.map(Uuid::from),
        filter.team.map(Uuid::from),
        filter.states.as_deref(),
        filter.failing,
        filter.only.map(Uuid::from),
    )
    .fetch_one(db)
    .await?)
}

/// `%`, `_` and `\` typed in a search are literal characters, not LIKE patterns.
fn like_pattern(search: &str) -> String {
    let escaped = search
        .trim()
        .replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_");
    format!("%{escaped}%")
}

/// Briefs newest first after the keyset cursor `after` (created_at, id), narrowed by `filter`.
///
/// A person owns few briefs: their ids (`= ANY (ARRAY(…))`) drive the owner filter through the
/// primary key, where an `EXISTS` would walk every brief newest first looking for them (26 ms
/// against 3 ms for an owner of 250 of 10,000 briefs). A team shares many, so newest first with
/// `EXISTS` stays the faster way there (docs/benchmarks.md has both plans). The summary is
/// joined (one primary-key probe per brief walked) rather than tested with `EXISTS` sub-plans,
/// which hashed the whole summary table on every call (10 ms against 3 ms for `stale`).
pub async fn list_filtered(
    db: impl PgExecutor<'_>,
    filter: &BriefFilter,
    after: Option<(DateTime<Utc>, BriefId)>,
    limit: i64,
) -> Result<Vec<Brief>, AppError> {
    let pattern = filter.search_pattern();
    let (after_at, after_id) = after.unzip();
    let rows = query_brief_row!(
        "SELECT",
        r#"t.gpu AS "trial_gpu?", t.gpu_count AS "trial_gpu_count?"
           FROM briefs b LEFT JOIN trials t ON t.brief_id = b.id AND t.position = 1
             LEFT JOIN review_summaries s ON s.brief_id = b.id
           WHERE ($1::text IS NULL OR b.name ILIKE $1 OR b.model_name ILIKE $1 OR b.catalog_model ILIKE $1)
             AND ($2::bool IS NULL OR EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id) = $2)
             AND ($3::timestamptz IS NULL OR (b.created_at, b.id) < ($3, $4))
             AND ($6::uuid IS NULL OR b.id = ANY (ARRAY(SELECT o.brief_id FROM brief_owners o WHERE o.user_id = $6)))
             AND ($7::uuid IS NULL OR EXISTS (SELECT 1 FROM brief_teams bt WHERE bt.brief_id = b.id AND bt.team_id = $7))
             AND (($8::text[] IS NULL AND $9::bool IS NULL) OR s.brief_id IS NULL
                  OR (($8::text[] IS NULL OR s.state = ANY($8)) AND ($9::bool IS NULL OR s.failing = $9))
                  OR EXISTS (SELECT 1 FROM review_changes d WHERE d.brief_id = b.id))
             AND ($10::uuid IS NULL OR b.id = $10)
           ORDER BY b.created_at DESC, b.id DESC LIMIT $5"#,
        pattern,
        filter.has_evidence,
        after_at,
        after_id.map(Uuid::from),
        limit,
        filter.owner.map(Uuid::from),
        filter.team.map(Uuid::from),
        filter.states.as_deref(),
        filter.failing,
        filter.only.map(Uuid::from),
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(Brief::from).collect())
}
