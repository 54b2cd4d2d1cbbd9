//! The dashboard (`/`): "what needs me". Briefs newest first, a page at a time, found by name or
//! model and narrowed to those that need approval, whose approval went stale, that fail a required
//! criterion, or that await evidence; each row with its computed decision, cost per completed
//! job, acceptance progress, approval and newest evidence (its token by the name it was given).
//!
//! Also narrowed to the signed-in person's briefs (`owner=me`) or a team's (`team=<name>`), and
//! sorted by a column (`sort=name`, `owner`, `decision`, `cost`, `approval`, `evidence`, or the
//! default `created`, newest first). The whole list is sorted, not one page: newest first pages by
//! a keyset cursor (`after=`), another order by page number (`page=2`).
//!
//! No row computes a review of its own: the list (`overview::brief_list`, shared with
//! `GET /api/v1/briefs`) reads each brief's kept review summary (`review::summaries`), and for a
//! brief with changes still queued, its summary of the review as the page reads it (not stored).

use askama::Template;
use axum::{extract::State, response::Response};
use chrono::{DateTime, Utc};
use serde::Deserialize;

use crate::{
    auth::teams,
    briefs::model::Brief,
    commitments::service as commitments,
    error::AppError,
    evidence::service as evidence,
    figures,
    ids::{BriefId, TeamId},
    overview::{
        brief_list::{self, decode_cursor, encode_cursor},
        list_query::{BriefFilter, BriefOrder},
    },
    review::{model::ApprovalVerdict, summaries::SummaryRow},
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

/// One row of the dashboard.
struct BriefRow {
    id: String,
    name: String,
    owner: String,
    /// For sorting by cost: the amount, without its currency.
    cost_amount: Option<rust_decimal::Decimal>,
    created_at: DateTime<Utc>,
    last_evidence_at: Option<DateTime<Utc>>,
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
    /// A commitment of the brief that needs attention: (its id, its state in words).
    commitment: Option<(String, &'static str)>,
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

    /// The part of the list filter this choice sets.
    fn narrow(self, filter: &mut BriefFilter) {
        match self {
            Show::All => {}
            Show::NeedsApproval => filter.states = Some(vec!["needs-approval".into(), "stale".into()]),
            Show::Stale => filter.states = Some(vec!["stale".into()]),
            Show::Failing => filter.failing = Some(true),
            Show::AwaitingEvidence => filter.has_evidence = Some(false),
        }
    }
}

/// The column `?sort=` names; without one, newest first.
fn parse_sort(s: Option<&str>) -> Result<BriefOrder, AppError> {
    match s.unwrap_or("") {
        "" => Ok(BriefOrder::Created),
        name => BriefOrder::from_name(name).ok_or_else(|| {
            AppError::BadRequest(format!(
                "There is no column {name:?} to sort by: use name, owner, decision, cost, approval, evidence or \
                 created."
            ))
        }),
    }
}

/// The list's order in SQL; `None` is newest first (the keyset walk).
fn sql_order(sort: BriefOrder, reversed: bool) -> Option<BriefOrder> {
    (sort != BriefOrder::Created || reversed).then_some(sort)
}

/// Names and owners A to Z, the cheapest first, what needs approval first, the newest evidence
/// and the newest brief first — or all of it the other way round when `reversed`; unknown
/// costs and evidence stay last either way, and ties keep the page's order (newest first). The
/// list arrives in this order from SQL by the kept summaries; a summary remade as the page was
/// read may move its row within the page.
fn sort_rows(rows: &mut [BriefRow], sort: BriefOrder, reversed: bool) {
    use std::cmp::Ordering;
    let flip = |o: Ordering| if reversed { o.reverse() } else { o };
    // Known values in the chosen direction, unknown ones after them.
    fn known_first<T: Ord>(a: Option<T>, b: Option<T>, flip: impl Fn(Ordering) -> Ordering) -> Ordering {
        match (a, b) {
            (Some(x), Some(y)) => flip(x.cmp(&y)),
            (Some(_), None) => Ordering::Less,
            (None, Some(_)) => Ordering::Greater,
            (None, None) => Ordering::Equal,
        }
    }
    let text = |s: &str| s.to_lowercase();
    rows.sort_by(|a, b| match sort {
        BriefOrder::Created => flip(b.created_at.cmp(&a.created_at)),
        BriefOrder::Name => flip(text(&a.name).cmp(&text(&b.name))),
        BriefOrder::Owner => flip(text(&a.owner).cmp(&text(&b.owner))),
        BriefOrder::Decision => flip(a.decision.cmp(&b.decision)),
        BriefOrder::Cost => known_first(a.cost_amount, b.cost_amount, flip),
        BriefOrder::Approval => flip(approval_rank(a.approval_state).cmp(&approval_rank(b.approval_state))),
        BriefOrder::Evidence => known_first(
            a.last_evidence_at.map(std::cmp::Reverse),
            b.last_evidence_at.map(std::cmp::Reverse),
            flip,
        ),
    });
}

/// What needs a person first: the approval states in the order the Approval column sorts them.
fn approval_rank(state: &str) -> usize {
    ["needs-approval", "stale", "awaiting-evidence", "rejected", "approved"]
        .iter()
        .position(|s| *s == state)
        .unwrap_or(usize::MAX)
}

/// A sortable column's heading: its label, the link that sorts by it, and whether it is the sort.
struct SortLink {
    label: &'static str,
    href: String,
    current: bool,
    /// `aria-sort` of the current column.
    direction: &'static str,
    /// ▲ or ▼ on the current column: the way its values run down the page.
    arrow: &'static str,
    /// What clicking does, for the link's title.
    title: String,
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
    /// The quick filters: label, link (keeping the search, owner and team), current.
    quick: Vec<(&'static str, String, bool)>,
    /// Only the signed-in person's briefs.
    mine: bool,
    /// Every team's name, for the team filter.
    teams: Vec<String>,
    /// The chosen team's name, or empty.
    team: String,
    /// The scan stopped at its limit before the page was full.
    scan_cut: bool,
    /// The sortable columns, by their key.
    sorts: std::collections::HashMap<&'static str, SortLink>,
    /// Briefs in this view, every page together.
    total: i64,
}

impl DashboardPage {
    fn sort_link(&self, key: &str) -> Option<&SortLink> {
        self.sorts.get(key)
    }
}

#[derive(Deserialize, Default)]
pub struct DashboardQuery {
    q: Option<String>,
    show: Option<String>,
    /// `me`: only the briefs the signed-in person owns.
    owner: Option<String>,
    /// A team's name: only the briefs shared with it.
    team: Option<String>,
    /// The keyset cursor of `brief_list` (written where the "next" link is made), newest first.
    after: Option<String>,
    /// The page number (from 1) in another order than newest first.
    page: Option<String>,
    /// The column the list is sorted by.
    sort: Option<String>,
    /// `reversed`: the column's other direction.
    dir: Option<String>,
}

/// What the links of a view keep: the search and every filter.
#[derive(Clone, Copy)]
struct View<'a> {
    search: &'a str,
    show: Show,
    mine: bool,
    team: &'a str,
    sort: BriefOrder,
    reversed: bool,
}

/// Where a page starts: `("after", cursor)` newest first, `("page", n)` in another order.
type Place<'a> = (&'static str, &'a str);

fn href(view: &View<'_>, at: Option<Place<'_>>) -> String {
    let mut pairs: Vec<(&str, &str)> = Vec::new();
    if !view.search.is_empty() {
        pairs.push(("q", view.search));
    }
    if view.show != Show::All {
        pairs.push(("show", view.show.as_str()));
    }
    if view.mine {
        pairs.push(("owner", "me"));
    }
    if !view.team.is_empty() {
        pairs.push(("team", view.team));
    }
    if view.sort != BriefOrder::Created {
        pairs.push(("sort", view.sort.as_str()));
    }
    if view.reversed {
        pairs.push(("dir", "reversed"));
    }
    if let Some(place) = at {
        pairs.push(place);
    }
    match serde_urlencoded::to_string(&pairs) {
        Ok(q) if !q.is_empty() => format!("/?{q}"),
        _ => "/".to_owned(),
    }
}

/// The dashboard: query parameters, the page of briefs, then one row per brief, in the order of the
/// page.
pub async fn dashboard(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<DashboardQuery>,
) -> PageResult<Response> {
    let show = Show::parse(q.show.as_deref())?;
    let sort = parse_sort(q.sort.as_deref())?;
    let reversed = reversed(q.dir.as_deref())?;
    let search = q.q.as_deref().unwrap_or("").trim().to_owned();
    let after = after_cursor(q.after.as_deref())?;
    let mine = mine(q.owner.as_deref())?;
    let teams = teams::team_names(&state.pool).await?;
    let team_name = q.team.as_deref().unwrap_or("").trim().to_owned();
    let team = team_named(&teams, &team_name)?;
    let mut filter = BriefFilter {
        search: Some(search.clone()).filter(|s| !s.is_empty()),
        owner: mine.then_some(user.0.id),
        team,
        ..BriefFilter::default()
    };
    show.narrow(&mut filter);
    let page_number = page_number(q.page.as_deref())?;
    // Newest first pages by keyset; another order by page number.
    let total = brief_list::count(&state, &filter).await?;
    let (items, next_place, scan_cut, first_page) = match sql_order(sort, reversed) {
        None => {
            let page = brief_list::page(&state, &filter, after, PAGE).await?;
            (
                page.items,
                page.next.map(encode_cursor).map(|c| ("after", c)),
                page.scan_cut,
                after.is_none(),
            )
        }
        Some(order) => {
            let (items, more) =
                brief_list::sorted_page(&state, &filter, order, reversed, (page_number - 1) * PAGE, PAGE).await?;
            (
                items,
                more.then(|| ("page", (page_number + 1).to_string())),
                false,
                page_number == 1,
            )
        }
    };
    let mut rows = brief_rows(&state, items).await?;
    sort_rows(&mut rows, sort, reversed);
    let view = View {
        search: &search,
        show,
        mine,
        team: &team_name,
        sort,
        reversed,
    };
    let sorts = sort_links(&view);
    render(&DashboardPage {
        ctx: (&user).into(),
        briefs: rows,
        first_page,
        next_href: next_place.as_ref().map(|(k, v)| href(&view, Some((k, v)))),
        first_href: href(&view, None),
        quick: Show::ALL
            .iter()
            .map(|&s| (s.label(), href(&View { show: s, ..view }, None), s == show))
            .collect(),
        mine,
        teams: teams.into_iter().map(|t| t.name).collect(),
        team: team_name.clone(),
        shows: Show::ALL.iter().map(|s| (s.as_str(), s.label())).collect(),
        show: show.as_str(),
        search,
        scan_cut,
        sorts,
        total,
    })
}

/// One row per brief of the page, with its newest evidence and a commitment that needs attention.
async fn brief_rows(state: &AppState, items: Vec<brief_list::Listed>) -> Result<Vec<BriefRow>, AppError> {
    let ids: Vec<BriefId> = items.iter().map(|l| l.brief.id).collect();
    let latest = evidence::latest_per_brief(state, &ids).await?;
    let attention = commitments::needing_attention(state, &ids).await?;
    Ok(items
        .into_iter()
        .map(|l| {
            let last = latest.get(&l.brief.id).cloned();
            let commitment = attention.get(&l.brief.id).map(|(id, s)| (id.to_string(), s.words()));
            BriefRow {
                commitment,
                ..row_for(l.brief, &l.summary, last)
            }
        })
        .collect())
}

/// `dir=reversed`, or nothing.
fn reversed(dir: Option<&str>) -> Result<bool, AppError> {
    Ok(match dir.unwrap_or("") {
        "" => false,
        "reversed" => true,
        other => {
            return Err(AppError::BadRequest(format!(
                "There is no sort direction called {other:?}: use dir=reversed, or leave it out."
            )))
        }
    })
}

/// The keyset cursor of `after=`, when the link has one.
fn after_cursor(after: Option<&str>) -> Result<Option<brief_list::Cursor>, AppError> {
    Ok(match after.filter(|a| !a.is_empty()) {
        None => None,
        Some(a) => Some(decode_cursor(a).ok_or_else(|| {
            AppError::BadRequest("This page link is damaged: start again from the first page.".into())
        })?),
    })
}

/// `owner=me`, or nothing for everyone's briefs.
fn mine(owner: Option<&str>) -> Result<bool, AppError> {
    Ok(match owner.unwrap_or("") {
        "" => false,
        "me" => true,
        other => {
            return Err(AppError::BadRequest(format!(
                "There is no owner choice called {other:?}: use owner=me, or leave it out for everyone's briefs."
            )))
        }
    })
}

/// The team `team=` names, when it names one.
fn team_named(teams: &[teams::TeamRef], team_name: &str) -> Result<Option<TeamId>, AppError> {
    Ok(match team_name {
        "" => None,
        name => Some(
            teams
                .iter()
                .find(|t| t.name == name)
                .map(|t| t.id)
                .ok_or_else(|| AppError::BadRequest(format!("There is no team called {name:?}.")))?,
        ),
    })
}

/// The page number of an ordered listing, 1 to 10,000.
fn page_number(page: Option<&str>) -> Result<usize, AppError> {
    Ok(match page.filter(|p| !p.is_empty()) {
        None => 1,
        Some(p) => p
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=10_000).contains(n))
            .ok_or_else(|| {
                AppError::BadRequest("This page link is damaged: start again from the first page.".into())
            })?,
    })
}

/// The column headers' sort links.
fn sort_links(view: &View<'_>) -> std::collections::HashMap<&'static str, SortLink> {
    [
        (BriefOrder::Name, "Name"),
        (BriefOrder::Owner, "Owner"),
        (BriefOrder::Decision, "Decision"),
        (BriefOrder::Cost, "Cost per completed job"),
        (BriefOrder::Approval, "Approval"),
        (BriefOrder::Evidence, "Newest evidence"),
        (BriefOrder::Created, "Created"),
    ]
    .into_iter()
    .map(|(s, label)| (s.as_str(), sort_link(view, s, label)))
    .collect()
}

/// The heading link of column `s`: on the current column it reverses the order, elsewhere it
/// sorts by that column in its usual direction.
fn sort_link(view: &View<'_>, s: BriefOrder, label: &'static str) -> SortLink {
    let current = s == view.sort;
    let reversed = current && view.reversed;
    // Down the page: ascending unless the column runs newest first, and the other way reversed.
    let ascending = s.newest_first() == reversed;
    SortLink {
        label,
        href: href(
            &View {
                sort: s,
                reversed: current && !view.reversed,
                ..*view
            },
            None,
        ),
        current,
        direction: if ascending { "ascending" } else { "descending" },
        arrow: if ascending { "▲" } else { "▼" },
        title: if current {
            "Sorted by this column: click to reverse the order".to_owned()
        } else {
            format!("Sort by {}", label.to_lowercase())
        },
    }
}

/// The row of one brief from its summary.
fn row_for(brief: Brief, summary: &SummaryRow, last_evidence: Option<(DateTime<Utc>, String)>) -> BriefRow {
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
    let decided = s.approval_decision.as_deref().unwrap_or_default();
    let approval = match approval_state {
        "awaiting-evidence" => "awaiting evidence".to_owned(),
        "needs-approval" => "needs approval".to_owned(),
        "stale" if s.approval_verdict.as_deref().and_then(|v| v.parse().ok()) == Some(ApprovalVerdict::Approve) => {
            format!("approved {decided}, now stale")
        }
        "stale" => format!("rejected {decided}, now stale"),
        "approved" => format!("approved {decided}"),
        _ => format!("rejected {decided}"),
    };
    BriefRow {
        id: brief.id.to_string(),
        name: brief.fields.name.clone(),
        owner: brief.fields.owner.clone(),
        cost_amount: s.cost_per_job,
        created_at: brief.created_at,
        last_evidence_at: last_evidence.as_ref().map(|(at, _)| *at),
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
                    figures::with_currency(c, &brief.fields.currency),
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
        commitment: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_keep_the_search_and_every_filter() {
        let all = View {
            search: "",
            show: Show::All,
            mine: false,
            team: "",
            sort: BriefOrder::Created,
            reversed: false,
        };
        assert_eq!(href(&all, None), "/");
        let narrowed = View {
            search: "llama 70b",
            show: Show::Stale,
            mine: true,
            team: "Inference & serving",
            sort: BriefOrder::Owner,
            reversed: false,
        };
        assert_eq!(
            href(&narrowed, Some(("after", "1.x"))),
            "/?q=llama+70b&show=stale&owner=me&team=Inference+%26+serving&sort=owner&after=1.x"
        );
        // The sorted column's heading reverses it; another column's sorts the usual way.
        let owner = sort_link(&narrowed, BriefOrder::Owner, "Owner");
        assert_eq!((owner.arrow, owner.direction), ("▲", "ascending"));
        assert!(owner.href.ends_with("sort=owner&dir=reversed"), "{}", owner.href);
        let back = sort_link(
            &View {
                reversed: true,
                ..narrowed
            },
            BriefOrder::Owner,
            "Owner",
        );
        assert_eq!((back.arrow, back.direction), ("▼", "descending"));
        assert!(back.href.ends_with("sort=owner"), "{}", back.href);
        let evidence = sort_link(&narrowed, BriefOrder::Evidence, "Newest evidence");
        assert!(!evidence.current && evidence.href.ends_with("sort=evidence"));
        // Needs approval first, approved last.
        assert!(approval_rank("needs-approval") < approval_rank("stale"));
        assert!(approval_rank("rejected") < approval_rank("approved"));
        assert!(parse_sort(Some("price")).is_err());
        assert!(Show::parse(Some("bogus")).is_err());
    }
}
