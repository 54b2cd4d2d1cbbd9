//! The dashboard (`/`): "what needs me". Briefs newest first, a page at a time, found by name or
//! model and narrowed to those that need approval, whose approval went stale, that fail a required
//! criterion, or that await evidence; each row with its computed decision, cost per completed
//! job, acceptance progress, approval and newest evidence (its token by the name it was given).
//!
//! No row computes a review: each brief's summary (decision, cost per job, criteria, approval
//! state) is kept current by the signals watcher, and `signals::service::current` remakes, before
//! the page reads them, the few whose changes it has not taken yet. Search and "awaiting evidence"
//! are answered by SQL alone. The other filters read the summaries: SQL first narrows to the
//! briefs that can match (with evidence; with an approval), then summaries are read a batch at a
//! time until the page is full, at most `MAX_SCANNED` per request; the "next" link continues where
//! the scan stopped.

use askama::Template;
use axum::{extract::State, response::Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use uuid::Uuid;

use crate::{
    briefs::{model::Brief, service as briefs, service::BriefFilter},
    error::AppError,
    evidence::service as evidence,
    money,
    signals::service::{self as signals, SummaryRow},
    state::AppState,
    trials::model::Allocation,
    web::{
        auth::PageUser,
        extract::ApiQuery,
        page::{render, PageContext, PageResult},
    },
};

/// Rows on one page.
const PAGE: usize = 25;
/// Briefs one request may look through when a filter needs their summaries (twenty pages' worth).
const MAX_SCANNED: usize = 20 * PAGE;

/// One row of the dashboard.
struct BriefRow {
    id: String,
    name: String,
    model: String,
    workload: &'static str,
    precision: &'static str,
    under_test: String,
    created: String,
    decision: String,
    cost_per_job: String,
    progress: String,
    /// `needs-approval`, `awaiting-evidence`, `stale`, `approved`, `rejected`: a class and a test hook.
    approval_state: &'static str,
    approval: String,
    last_evidence: String,
}

/// The filters, as `?show=` names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Show {
    All,
    NeedsApproval,
    Stale,
    Failing,
    AwaitingEvidence,
}

impl Show {
    const ALL: [Show; 5] = [
        Show::All,
        Show::NeedsApproval,
        Show::Stale,
        Show::Failing,
        Show::AwaitingEvidence,
    ];

    fn parse(s: Option<&str>) -> Result<Self, AppError> {
        match s.unwrap_or("") {
            "" | "all" => Ok(Show::All),
            "needs-approval" => Ok(Show::NeedsApproval),
            "stale" => Ok(Show::Stale),
            "failing" => Ok(Show::Failing),
            "awaiting-evidence" => Ok(Show::AwaitingEvidence),
            other => Err(AppError::BadRequest(format!(
                "There is no filter called {other:?}: use needs-approval, stale, failing or awaiting-evidence."
            ))),
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Show::All => "all",
            Show::NeedsApproval => "needs-approval",
            Show::Stale => "stale",
            Show::Failing => "failing",
            Show::AwaitingEvidence => "awaiting-evidence",
        }
    }

    fn label(self) -> &'static str {
        match self {
            Show::All => "All briefs",
            Show::NeedsApproval => "Needs approval",
            Show::Stale => "Approval stale",
            Show::Failing => "Failing a required criterion",
            Show::AwaitingEvidence => "Awaiting evidence",
        }
    }

    /// What SQL can narrow before any review is computed.
    fn narrowing(self) -> (Option<bool>, Option<bool>) {
        match self {
            Show::All => (None, None),
            Show::NeedsApproval | Show::Failing => (Some(true), None),
            Show::Stale => (Some(true), Some(true)),
            Show::AwaitingEvidence => (Some(false), None),
        }
    }

    fn needs_review(self) -> bool {
        matches!(self, Show::NeedsApproval | Show::Stale | Show::Failing)
    }
}

#[derive(Template)]
#[template(path = "overview/dashboard.html")]
struct DashboardPage {
    ctx: PageContext,
    briefs: Vec<BriefRow>,
    search: String,
    show: &'static str,
    shows: Vec<(&'static str, &'static str)>,
    first_page: bool,
    next_href: Option<String>,
    first_href: String,
    /// The scan stopped at `MAX_SCANNED` before the page was full.
    scan_cut: bool,
    reviewed: usize,
}

#[derive(Deserialize, Default)]
pub struct DashboardQuery {
    q: Option<String>,
    show: Option<String>,
    /// The keyset cursor: `<created_at in microseconds>.<brief id>` of the last brief scanned
    /// (written where the "next" link is made).
    after: Option<String>,
}

fn decode_cursor(s: &str) -> Option<(DateTime<Utc>, Uuid)> {
    let (micros, id) = s.split_once('.')?;
    Some((
        DateTime::from_timestamp_micros(micros.parse().ok()?)?,
        Uuid::parse_str(id).ok()?,
    ))
}

fn href(search: &str, show: Show, after: Option<&str>) -> String {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if !search.is_empty() {
        pairs.push(("q", search));
    }
    if show != Show::All {
        pairs.push(("show", show.as_str()));
    }
    if let Some(a) = after {
        pairs.push(("after", a));
    }
    match serde_urlencoded::to_string(&pairs) {
        Ok(q) if !q.is_empty() => format!("/?{q}"),
        _ => "/".to_owned(),
    }
}

pub async fn dashboard(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<DashboardQuery>,
) -> PageResult<Response> {
    let show = Show::parse(q.show.as_deref())?;
    let search = q.q.as_deref().unwrap_or("").trim().to_owned();
    let after = match q.after.as_deref().filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => Some(decode_cursor(a).ok_or_else(|| {
            AppError::BadRequest("This page link is damaged: start again from the first page.".into())
        })?),
    };
    let (has_evidence, has_approval) = show.narrowing();
    let filter = BriefFilter {
        search: Some(search.clone()).filter(|s| !s.is_empty()),
        has_evidence,
        has_approval,
    };

    let mut rows = Vec::new();
    let mut cursor = after;
    let mut more = false;
    let mut reviewed = 0;
    let mut scan_cut = false;
    'scan: loop {
        // One extra row says whether anything follows.
        let batch = briefs::list_filtered(&state.pool, &filter, cursor, PAGE as i64 + 1).await?;
        let exhausted = batch.len() <= PAGE;
        let ids: Vec<Uuid> = batch.iter().map(|b| b.id).collect();
        let (latest, summaries) =
            tokio::try_join!(evidence::latest_per_brief(&state, &ids), signals::current(&state, &ids),)?;
        for brief in batch.into_iter().take(PAGE) {
            if rows.len() == PAGE || (show.needs_review() && reviewed == MAX_SCANNED) {
                scan_cut = rows.len() < PAGE;
                more = true;
                break 'scan;
            }
            let next_cursor = (brief.created_at, brief.id);
            let last = latest.get(&brief.id).cloned();
            reviewed += 1;
            let summary = summaries.iter().find(|s| s.brief_id == brief.id);
            if let Some(row) = summary.and_then(|s| row_for(brief, s, last, show)) {
                rows.push(row);
            }
            cursor = Some(next_cursor);
        }
        if exhausted {
            break;
        }
        if rows.len() == PAGE {
            more = true;
            break;
        }
    }
    let next_after = cursor.map(|(at, id)| format!("{}.{id}", at.timestamp_micros()));
    render(&DashboardPage {
        ctx: (&user).into(),
        briefs: rows,
        first_page: after.is_none(),
        next_href: more.then(|| href(&search, show, next_after.as_deref())),
        first_href: href(&search, show, None),
        shows: Show::ALL.iter().map(|s| (s.as_str(), s.label())).collect(),
        show: show.as_str(),
        search,
        scan_cut,
        reviewed,
    })
}

/// The row of one brief from its summary, or `None` when the filter's condition does not hold.
fn row_for(
    brief: Brief,
    summary: &SummaryRow,
    last_evidence: Option<(DateTime<Utc>, String)>,
    show: Show,
) -> Option<BriefRow> {
    let sizing = brief.fields.sizing();
    // The first trial's allocation, as the brief page marks it: a suggestion is said to be one.
    let under_test = match Allocation::resolve(brief.fields.trial_gpu.as_deref(), brief.fields.trial_gpu_count, &sizing)
    {
        Some(a) if a.suggested => format!("{} (suggested)", a.label()),
        Some(a) => a.label(),
        None => "none fits".to_owned(),
    };
    let s = &summary.summary;
    let approval_state = s.state.as_str();
    let keep = match show {
        Show::All | Show::AwaitingEvidence => true,
        Show::NeedsApproval => approval_state == "needs-approval" || approval_state == "stale",
        Show::Stale => approval_state == "stale",
        Show::Failing => s.failing,
    };
    if !keep {
        return None;
    }
    let decided = s.approval_decision.as_deref().unwrap_or_default();
    let approval = match approval_state {
        "awaiting-evidence" => "awaiting evidence".to_owned(),
        "needs-approval" => "needs approval".to_owned(),
        "stale" if s.approval_verdict.as_deref() == Some("approve") => format!("approved {decided}, now stale"),
        "stale" => format!("rejected {decided}, now stale"),
        "approved" => format!("approved {decided}"),
        _ => format!("rejected {decided}"),
    };
    Some(BriefRow {
        id: brief.id.to_string(),
        name: brief.fields.name.clone(),
        model: brief.fields.model_name.clone(),
        workload: brief.fields.workload_kind.as_str(),
        precision: brief.fields.precision.as_str(),
        under_test,
        created: brief.created_at.format("%Y-%m-%d").to_string(),
        decision: summary.decision.clone(),
        cost_per_job: s
            .cost_per_job
            .map(|c| {
                format!(
                    "{} per {}",
                    money::with_currency(c, &brief.fields.currency),
                    brief.fields.cost_unit.as_str()
                )
            })
            .unwrap_or_else(|| "—".to_owned()),
        progress: format!("{}/{} required", s.criteria_passed, s.criteria_required),
        approval_state: match approval_state {
            "awaiting-evidence" => "awaiting-evidence",
            "needs-approval" => "needs-approval",
            "stale" => "stale",
            "approved" => "approved",
            _ => "rejected",
        },
        approval,
        last_evidence: match last_evidence {
            Some((at, by)) => format!("{} · {by}", at.format("%Y-%m-%d")),
            None => "none yet".to_owned(),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_search_and_filter_and_the_cursor_reads_back() {
        assert_eq!(href("", Show::All, None), "/");
        assert_eq!(
            href("llama 70b", Show::Stale, Some("1.x")),
            "/?q=llama+70b&show=stale&after=1.x"
        );
        let id = Uuid::now_v7();
        let at = DateTime::from_timestamp_micros(1_764_000_000_123_456).unwrap();
        assert_eq!(
            decode_cursor(&format!("{}.{id}", at.timestamp_micros())),
            Some((at, id))
        );
        assert_eq!(decode_cursor("nonsense"), None);
        assert!(Show::parse(Some("bogus")).is_err());
    }
}
