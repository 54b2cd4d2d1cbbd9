//! One list of briefs for the dashboard (`/`) and the API (`GET /api/v1/briefs`): newest first, a
//! page at a time by a keyset cursor, narrowed in SQL — search, owner, team, evidence, and the
//! review summaries' state and failing flag — then checked again against current summaries.
//!
//! The SQL (`list_query`) reads each brief's kept summary, and keeps as candidates the briefs whose
//! summary is not current (changes still queued for the review's summary watcher, or never made).
//! Those few are summarised from their review by `review::summaries::current` and checked again, so
//! a list never waits for the watcher and never answers from a summary older than the last
//! committed change. A list only reads: it stores no summary and tells no webhook.

use chrono::{DateTime, Utc};

use super::list_query::{self, BriefFilter, BriefOrder};
use crate::{
    briefs::model::Brief,
    error::AppError,
    ids::BriefId,
    review::summaries::{self as summaries, SummaryRow},
    state::AppState,
};

/// The states a summary can be in, as lists filter on them.
pub const STATES: [&str; 5] = ["awaiting-evidence", "needs-approval", "stale", "approved", "rejected"];

/// A page's place in the list: the (created_at, id) of the last brief looked at.
pub type Cursor = (DateTime<Utc>, BriefId);

/// The cursor as links and the API write it: `<created_at in microseconds>.<brief id>`.
pub fn encode_cursor((at, id): Cursor) -> String {
    format!("{}.{id}", at.timestamp_micros())
}

/// The cursor read back, or `None` when it was not written by [`encode_cursor`].
pub fn decode_cursor(s: &str) -> Option<Cursor> {
    let (micros, id) = s.split_once('.')?;
    Some((DateTime::from_timestamp_micros(micros.parse().ok()?)?, id.parse().ok()?))
}

/// One listed brief with its current summary.
pub struct Listed {
    pub brief: Brief,
    pub summary: SummaryRow,
}

pub struct ListPage {
    pub items: Vec<Listed>,
    /// Where the next page starts; `None` on the last page.
    pub next: Option<Cursor>,
    /// The page stopped at the scan limit before it was full (many candidates whose summaries
    /// were remade no longer matched).
    pub scan_cut: bool,
}

/// Whether a current summary meets the summary part of `filter`.
pub fn matches(filter: &BriefFilter, summary: &SummaryRow) -> bool {
    let state_ok = filter
        .states
        .as_ref()
        .is_none_or(|states| states.contains(&summary.summary.state));
    let failing_ok = filter.failing.is_none_or(|f| f == summary.summary.failing);
    state_ok && failing_ok
}

/// Up to `limit` briefs after `after` that meet `filter`, each with its current summary.
pub async fn page(
    state: &AppState,
    filter: &BriefFilter,
    after: Option<Cursor>,
    limit: usize,
) -> Result<ListPage, AppError> {
    // Candidates one request may look at: the SQL already applied every filter to current
    // summaries, so only briefs with queued changes can drop out; this bounds a page's work when
    // thousands are queued at once (after a price change, or at start-up).
    let max_scanned = 20 * limit;
    let mut items = Vec::new();
    let mut cursor = after;
    let mut scanned = 0;
    loop {
        // One extra row says whether anything follows.
        let batch = list_query::list_filtered(&state.pool, filter, cursor, limit as i64 + 1).await?;
        let exhausted = batch.len() <= limit;
        let ids: Vec<BriefId> = batch.iter().map(|b| b.id).collect();
        let mut summaries = summaries::current(state, &ids).await?;
        for brief in batch.into_iter().take(limit) {
            if items.len() == limit || scanned == max_scanned {
                return Ok(ListPage {
                    scan_cut: items.len() < limit,
                    items,
                    next: cursor,
                });
            }
            scanned += 1;
            cursor = Some((brief.created_at, brief.id));
            let Some(at) = summaries.iter().position(|s| s.brief_id == brief.id) else {
                continue;
            };
            let summary = summaries.swap_remove(at);
            if matches(filter, &summary) {
                items.push(Listed { brief, summary });
            }
        }
        if exhausted {
            return Ok(ListPage {
                items,
                next: None,
                scan_cut: false,
            });
        }
        if items.len() == limit {
            return Ok(ListPage {
                items,
                next: cursor,
                scan_cut: false,
            });
        }
    }
}

/// How many briefs meet `filter` (the dashboard's total).
pub async fn count(state: &AppState, filter: &BriefFilter) -> Result<i64, AppError> {
    list_query::count_matching(&state.pool, filter).await
}

/// A page of the list in another order than newest first: up to `limit` briefs from `offset` that
/// meet `filter`, each with its current summary, and whether more follow. The order is the kept
/// summaries'; a brief whose summary is remade as it is read keeps its place on this page.
pub async fn sorted_page(
    state: &AppState,
    filter: &BriefFilter,
    order: BriefOrder,
    reversed: bool,
    offset: usize,
    limit: usize,
) -> Result<(Vec<Listed>, bool), AppError> {
    // One extra row says whether anything follows.
    let batch = list_query::list_sorted(&state.pool, filter, order, reversed, offset as i64, limit as i64 + 1).await?;
    let more = batch.len() > limit;
    let ids: Vec<BriefId> = batch.iter().map(|b| b.id).collect();
    let mut summaries = summaries::current(state, &ids).await?;
    let items = batch
        .into_iter()
        .take(limit)
        .filter_map(|brief| {
            let at = summaries.iter().position(|s| s.brief_id == brief.id)?;
            let summary = summaries.swap_remove(at);
            matches(filter, &summary).then_some(Listed { brief, summary })
        })
        .collect();
    Ok((items, more))
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    #[test]
    fn the_cursor_reads_back_and_a_damaged_one_is_refused() {
        let id = BriefId::from(Uuid::now_v7());
        let at = DateTime::from_timestamp_micros(1_764_000_000_123_456).unwrap();
        assert_eq!(decode_cursor(&encode_cursor((at, id))), Some((at, id)));
        assert_eq!(decode_cursor("nonsense"), None);
        assert_eq!(decode_cursor("12.not-a-uuid"), None);
    }
}
