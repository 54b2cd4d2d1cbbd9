//! The commitments portfolio (`/commitments`, its CSV) and one commitment's page with its
//! committed-vs-used chart per month (server-rendered SVG, as the review's charts).

use askama::Template;
use axum::{
    extract::State,
    http::header,
    response::{IntoResponse, Response},
    routing::get,
    Router,
};
use chrono::NaiveDate;
use rust_decimal::{prelude::ToPrimitive, Decimal};

use super::{
    model::{CommitmentState, MonthUse},
    repo::CommitmentRow,
    service::{self, CommitmentDetail},
};
use crate::{
    error::AppError,
    figures,
    ids::CommitmentId,
    state::AppState,
    web::{
        auth::PageUser,
        extract::{ApiQuery, Path},
        page::{render, PageContext, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/commitments", get(portfolio))
        .route("/commitments.csv", get(portfolio_csv))
        .route("/commitments/{cid}", get(show))
}

#[derive(serde::Deserialize)]
struct StateQuery {
    state: Option<String>,
    cursor: Option<String>,
}

/// A share (a decimal string such as "0.4235") as people read it: "42.4 %"; "—" when unknown.
fn share(d: Option<Decimal>) -> String {
    d.and_then(|d| d.to_f64())
        .map_or_else(|| "—".to_owned(), figures::percent)
}

/// GPU-hours with separators: "5,760"; "1,382.40".
fn hours(d: Decimal) -> String {
    figures::sum(d)
}

/// A calendar month as the API names it ("2026-12") the way people say it: "December 2026".
fn month_words(month: &str) -> String {
    NaiveDate::parse_from_str(&format!("{month}-01"), "%Y-%m-%d")
        .map_or_else(|_| month.to_owned(), |first| first.format("%B %Y").to_string())
}

/// One row of the portfolio, ready to show.
struct Row {
    id: CommitmentId,
    brief_id: String,
    brief_name: String,
    trial_name: String,
    what: String,
    monthly_cost: String,
    utilization: String,
    coverage: String,
    days_left: i64,
    state: &'static str,
    attention: bool,
    term: String,
    last_run: String,
}

fn row(d: &CommitmentDetail) -> Row {
    let c = &d.commitment;
    let this = d.this_month();
    Row {
        id: c.id,
        brief_id: c.brief_id.to_string(),
        brief_name: d.brief_name.clone(),
        trial_name: d.trial_name.clone(),
        what: format!("{} × {}{}", c.gpus, c.gpu, provider_words(&c.provider)),
        monthly_cost: figures::with_currency(c.monthly_cost, &c.currency),
        utilization: share(this.and_then(|m| m.utilization)),
        coverage: share(this.and_then(|m| m.coverage)),
        days_left: d.days_left,
        state: d.state().words(),
        attention: d.state().needs_attention(),
        term: format!("{} to {}", c.start_date, c.end_date),
        last_run: c.last_run_at.map_or_else(
            || "none since the approval".to_owned(),
            |t| t.format("%Y-%m-%d").to_string(),
        ),
    }
}

fn provider_words(p: &str) -> String {
    if p.is_empty() {
        String::new()
    } else {
        format!(" at {p}")
    }
}

#[derive(Template)]
#[template(path = "commitments/portfolio.html")]
struct PortfolioPage {
    ctx: PageContext,
    rows: Vec<Row>,
    /// (currency, commitments, monthly cost in words).
    totals: Vec<(String, usize, String)>,
    /// (team, commitments, monthly cost in words), per team and currency.
    team_totals: Vec<(String, usize, String)>,
    states: Vec<(&'static str, &'static str, bool)>,
    filter: String,
    attention: usize,
    /// Commitments over all pages.
    total: usize,
    /// Whether this is a later page (a link back to the first).
    later_page: bool,
    /// The query of the next page's link (`state=…&cursor=…`), when there is one.
    next_page: Option<String>,
}

async fn portfolio(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> PageResult<Response> {
    let filter = q.state.unwrap_or_default();
    let cursor = q.cursor.filter(|c| !c.is_empty());
    let list = service::list(
        &state,
        &user.principal(),
        Some(filter.as_str()),
        service::Paging::After {
            cursor: cursor.as_deref(),
            limit: service::PAGE,
        },
    )
    .await?;
    let team_totals = list
        .totals_per_team
        .iter()
        .map(|t| {
            (
                t.team.clone().unwrap_or_else(|| "no team".to_owned()),
                t.commitments,
                figures::with_currency(t.monthly_cost, &t.currency),
            )
        })
        .collect();
    let next_page = list.next_cursor.as_deref().map(|c| {
        let mut pairs = vec![("cursor", c)];
        if !filter.is_empty() {
            pairs.insert(0, ("state", filter.as_str()));
        }
        serde_urlencoded::to_string(pairs).unwrap_or_default()
    });
    render(&PortfolioPage {
        ctx: (&user).into(),
        team_totals,
        attention: list.needing_attention,
        total: list.total,
        later_page: cursor.is_some(),
        next_page,
        rows: list.items.iter().map(row).collect(),
        totals: list
            .totals_per_currency
            .iter()
            .map(|t| {
                let words = figures::sum_with_currency(t.monthly_cost, &t.currency);
                (t.currency.clone(), t.commitments, words)
            })
            .collect(),
        states: CommitmentState::ALL
            .iter()
            .map(|s| (s.as_str(), s.words(), s.as_str() == filter))
            .collect(),
        filter,
    })
}

/// The portfolio as CSV, one commitment a line, money as exact decimals.
async fn portfolio_csv(
    State(state): State<AppState>,
    user: PageUser,
    ApiQuery(q): ApiQuery<StateQuery>,
) -> PageResult<Response> {
    let list = service::list(
        &state,
        &user.principal(),
        q.state.as_deref(),
        service::Paging::Everything,
    )
    .await?;
    let mut w = csv::Writer::from_writer(Vec::new());
    let internal = |e: csv::Error| AppError::Internal(anyhow::Error::new(e));
    w.write_record(CSV_COLUMNS).map_err(internal)?;
    for d in &list.items {
        w.write_record(csv_row(d)).map_err(internal)?;
    }
    let body = w
        .into_inner()
        .map_err(|e| AppError::Internal(anyhow::anyhow!("writing the CSV: {e}")))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8"),
            (header::CONTENT_DISPOSITION, "attachment; filename=\"commitments.csv\""),
        ],
        body,
    )
        .into_response())
}

/// The portfolio CSV's columns; `last_run` last, so the columns a spreadsheet already reads keep
/// their places.
const CSV_COLUMNS: [&str; 21] = [
    "id",
    "brief",
    "trial",
    "provider",
    "gpu",
    "gpus",
    "billing",
    "rate_per_gpu_hour",
    "currency",
    "monthly_cost",
    "start_date",
    "end_date",
    "days_left",
    "state",
    "month",
    "utilization",
    "coverage",
    "idle_cost",
    "provider_commitment_id",
    "teams",
    "last_run",
];

/// One commitment's line of the portfolio CSV, in [`CSV_COLUMNS`]' order.
fn csv_row(d: &CommitmentDetail) -> [String; 21] {
    let c = &d.commitment;
    let this = d.this_month();
    let opt = |v: Option<Decimal>| v.map(|v| v.to_string()).unwrap_or_default();
    [
        c.id.to_string(),
        csv_safe(&d.brief_name),
        csv_safe(&d.trial_name),
        csv_safe(&c.provider),
        csv_safe(&c.gpu),
        c.gpus.to_string(),
        c.billing.clone(),
        c.rate_per_gpu_hour.normalize().to_string(),
        c.currency.clone(),
        c.monthly_cost.normalize().to_string(),
        c.start_date.to_string(),
        c.end_date.to_string(),
        d.days_left.to_string(),
        c.state.as_str().to_owned(),
        this.map(|m| m.month.clone()).unwrap_or_default(),
        opt(this.and_then(|m| m.utilization)),
        opt(this.and_then(|m| m.coverage)),
        opt(this.map(|m| m.idle_cost)),
        csv_safe(c.provider_commitment_id.as_deref().unwrap_or("")),
        csv_safe(&d.teams.join("; ")),
        // The newest re-validation run since the approval (UTC), empty when none came.
        c.last_run_at
            .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
            .unwrap_or_default(),
    ]
}

/// Text a person typed, safe to open in a spreadsheet: a cell starting with `=`, `+`, `-` or `@`
/// would run as a formula, so it gets a leading apostrophe.
fn csv_safe(s: &str) -> String {
    if s.starts_with(['=', '+', '-', '@', '\t', '\r']) {
        format!("'{s}")
    } else {
        s.to_owned()
    }
}

/// One month's bars on the chart.
struct Bar {
    x: f64,
    label: String,
    committed_y: f64,
    committed_h: f64,
    busy_y: f64,
    busy_h: f64,
    title: String,
}

/// The committed-vs-used chart: per month, an outlined bar of the committed GPU-hours and a filled
/// bar of the busy ones, on one scale.
struct Chart {
    bars: Vec<Bar>,
    width: f64,
    /// (y, label) of the horizontal grid lines.
    ticks: Vec<(f64, String)>,
}

const CHART_TOP: f64 = 10.0;
const CHART_BOTTOM: f64 = 200.0;
const CHART_LEFT: f64 = 70.0;

fn chart(months: &[MonthUse]) -> Option<Chart> {
    let top = months
        .iter()
        .flat_map(|m| [m.committed_gpu_hours, m.busy_gpu_hours])
        .max()
        .filter(|m| *m > Decimal::ZERO)?
        .to_f64()?;
    // Room for a month label ("2026-09") under each bar.
    let step = 76.0;
    let scale = |v: Decimal| v.to_f64().unwrap_or(0.0) / top * (CHART_BOTTOM - CHART_TOP);
    let bars = months
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let x = CHART_LEFT + 10.0 + i as f64 * step;
            let ch = scale(m.committed_gpu_hours);
            let bh = scale(m.busy_gpu_hours);
            Bar {
                x,
                label: m.month.clone(),
                committed_y: CHART_BOTTOM - ch,
                committed_h: ch,
                busy_y: CHART_BOTTOM - bh,
                busy_h: bh,
                title: format!(
                    "{}: {} GPU-hours committed, {} busy ({})",
                    m.month,
                    hours(m.committed_gpu_hours),
                    hours(m.busy_gpu_hours),
                    share(m.utilization)
                ),
            }
        })
        .collect::<Vec<_>>();
    let ticks = (0..=4)
        .map(|i| {
            let f = f64::from(i) / 4.0;
            (
                CHART_BOTTOM - f * (CHART_BOTTOM - CHART_TOP),
                figures::figure((top * f).round()),
            )
        })
        .collect();
    Some(Chart {
        // At least as wide as the page shows it, so a term of few months keeps its text at size.
        width: (CHART_LEFT + 20.0 + bars.len() as f64 * step).max(640.0),
        bars,
        ticks,
    })
}

/// The provider's own figures of a month in words: "4,800 used, 960 unused".
fn provider_words_of(m: &MonthUse) -> String {
    match (m.provider_used_gpu_hours, m.provider_unused_gpu_hours) {
        (Some(used), Some(unused)) => format!("{} used, {} unused", hours(used), hours(unused)),
        _ => "—".to_owned(),
    }
}

/// One month as a table row.
struct MonthRow {
    month: String,
    committed: String,
    busy: String,
    utilization: String,
    coverage: String,
    idle_cost: String,
    avoided: String,
    /// The provider's own Used / Unused GPU-hours ("1,200 used, 240 unused"), or "—".
    provider: String,
}

#[derive(Template)]
#[template(path = "commitments/show.html")]
struct CommitmentPage {
    ctx: PageContext,
    d: CommitmentDetail,
    state_words: &'static str,
    attention: bool,
    summary: Vec<String>,
    chart: Option<Chart>,
    months: Vec<MonthRow>,
    /// Whether any month has the provider's own figures (the column shows then).
    provider_column: bool,
    monthly_cost: String,
    rate: String,
    /// Under the months' table where the committed rate is no reserved one: the hours' on-demand
    /// cost is what they cost either way, no saving (the demo's dedicate showed 15,660 USD "avoided").
    avoided_is_no_saving: bool,
}

/// The committed rate and where it came from. An approval records the offer's reserved price when
/// one is current, else the trial's own billing and rate (decision.md, "Approval"), so a commitment
/// billed otherwise than `reserved` had no reserved price to take: a manager reading "reserved" would
/// believe a discount the provider never gave.
fn rate_words(c: &CommitmentRow) -> String {
    let rate = figures::rate_with_currency(c.rate_per_gpu_hour, &c.currency);
    if c.billing == "reserved" {
        format!("the reserved rate of {rate} per GPU-hour")
    } else {
        format!(
            "the trial's own {} rate of {rate} per GPU-hour (no reserved price of this offer was known when it was approved)",
            c.billing
        )
    }
}

/// The plain sentences the page opens with.
fn sentences(d: &CommitmentDetail) -> Vec<String> {
    let c = &d.commitment;
    let mut out = vec![format!(
        "{} committed to {} × {}{} for {} months, from {} to {}, at {}: {} a month.",
        d.brief_name,
        c.gpus,
        c.gpu,
        provider_words(&c.provider),
        c.term_months,
        c.start_date,
        c.end_date,
        rate_words(c),
        figures::sum_with_currency(c.monthly_cost, &c.currency),
    )];
    match d.this_month() {
        Some(m) => out.push(format!(
            "In {} it was busy {} of the committed GPU-hours ({} of {}); idle time cost {}.",
            month_words(&m.month),
            share(m.utilization),
            hours(m.busy_gpu_hours),
            hours(m.committed_gpu_hours),
            figures::sum_with_currency(m.idle_cost, &c.currency),
        )),
        None => out.push("The term has not started yet: nothing is measured before its first day.".into()),
    }
    if let Some(u) = d.term.utilization {
        out.push(format!(
            "Over the term so far it was busy {}; idle time cost {} in all.",
            share(Some(u)),
            figures::sum_with_currency(d.term.idle_cost, &c.currency)
        ));
    }
    out.push(match d.state() {
        CommitmentState::Ended => "The term has ended.".to_owned(),
        CommitmentState::Released => format!("It was released: {}.", c.state_reason),
        _ => format!("{} days are left in the term.", d.days_left),
    });
    out
}

async fn show(State(state): State<AppState>, user: PageUser, Path(id): Path<CommitmentId>) -> PageResult<Response> {
    let d = service::get(&state, &user.principal(), id).await?;
    let cur = d.commitment.currency.clone();
    render(&CommitmentPage {
        ctx: (&user).into(),
        state_words: d.state().words(),
        attention: d.state().needs_attention(),
        summary: sentences(&d),
        chart: chart(&d.months),
        months: d
            .months
            .iter()
            .map(|m| MonthRow {
                month: m.month.clone(),
                committed: hours(m.committed_gpu_hours),
                busy: hours(m.busy_gpu_hours),
                utilization: share(m.utilization),
                coverage: share(m.coverage),
                idle_cost: figures::with_currency(m.idle_cost, &cur),
                avoided: m.on_demand_avoided.map_or_else(
                    || "not known (no on-demand price)".to_owned(),
                    |a| figures::with_currency(a, &cur),
                ),
                provider: provider_words_of(m),
            })
            .collect(),
        provider_column: d.months.iter().any(|m| m.provider_used_gpu_hours.is_some()),
        monthly_cost: figures::with_currency(d.commitment.monthly_cost, &cur),
        rate: rate_words(&d.commitment),
        avoided_is_no_saving: d.commitment.billing != "reserved",
        d,
    })
}

#[cfg(test)]
mod tests {
    use super::month_words;

    #[test]
    fn a_month_is_named_as_people_say_it() {
        assert_eq!(month_words("2026-12"), "December 2026");
        assert_eq!(month_words("2027-01"), "January 2027");
        // Not a month: shown as it came rather than hidden.
        assert_eq!(month_words("2026-13"), "2026-13");
    }
}
