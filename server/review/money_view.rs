//! The review page's money section: for each trial, plain sentences (what a million output tokens
//! cost at the SLO, how much traffic one replica carries, whether a managed API is cheaper), the
//! figures as rows with trials as columns, each linked to the evidence, price row or ledger it
//! came from, and a chart of attainment against request rate with the target line.

use super::{
    money::{LoadPoint, MoneyFacts, RateSource},
    service::{Review, TrialReview},
};
use crate::money::{figure, percent, with_currency};

/// One figure of one trial, with where it came from.
pub struct MoneyCell {
    pub text: String,
    pub href: Option<String>,
}

/// One money figure across trials.
pub struct MoneyRow {
    pub label: &'static str,
    pub cells: Vec<MoneyCell>,
}

/// What the page says of one trial's money, in sentences.
pub struct MoneySummary {
    pub trial: String,
    pub sentences: Vec<String>,
}

/// One plotted load point.
pub struct ChartPoint {
    pub x: f64,
    pub y: f64,
    pub title: String,
    /// The highest rate that kept the target (where the trial crosses the line).
    pub capacity: bool,
}

/// One trial's line on the chart.
pub struct ChartSeries {
    pub name: String,
    /// `series-0` … `series-3`: one colour per trial.
    pub class: String,
    pub path: String,
    pub points: Vec<ChartPoint>,
    pub legend_y: f64,
}

/// Attainment (share of requests inside every target) against request rate.
pub struct AttainmentChart {
    pub series: Vec<ChartSeries>,
    pub target_y: f64,
    pub target_label: String,
    pub x_ticks: Vec<(f64, String)>,
    pub y_ticks: Vec<(f64, String)>,
    pub height: f64,
}

pub struct MoneySection {
    pub summaries: Vec<MoneySummary>,
    pub rows: Vec<MoneyRow>,
    pub chart: Option<AttainmentChart>,
    /// The brief gives a managed API's price (rule 6b).
    pub api_price: Option<String>,
}

fn evidence_href(p: &LoadPoint) -> Option<String> {
    Some(format!("/evidence/{}", p.evidence_id))
}

fn rate_href(m: &MoneyFacts, brief_id: &str, trial_id: &str) -> Option<String> {
    Some(match &m.rate.as_ref()?.source {
        RateSource::PriceRow { price_id } | RateSource::CheapestOffer { price_id } => {
            format!("/prices#price-{price_id}")
        }
        RateSource::Ledger => format!("/briefs/{brief_id}#ledger"),
        RateSource::Trial => format!("/trials/{trial_id}"),
    })
}

fn cell(text: impl Into<String>, href: Option<String>) -> MoneyCell {
    MoneyCell {
        text: text.into(),
        href,
    }
}

fn unknown(why: &str) -> MoneyCell {
    cell(why, None)
}

/// The sentences a manager reads about one trial's money.
fn sentences(t: &TrialReview, m: Option<&MoneyFacts>, currency: &str) -> Vec<String> {
    let name = &t.context.trial.fields.name;
    let allocation = t.context.allocation.as_ref().map(|a| a.label()).unwrap_or_default();
    let Some(m) = m else {
        return vec![format!(
            "{name} has no rate and no load test yet: give the trial's rate per GPU-hour (or import a price \
             sheet with its provider's price) and upload a load test with per-request data to see what a \
             million output tokens cost at the SLO."
        )];
    };
    let mut out = Vec::new();
    match (&m.operating_point, m.slo_attainment) {
        (Some(p), Some(a)) => {
            let share = if m.slo_attainment_estimated {
                format!(
                    "at most {} of requests inside every target (estimated from histograms, one target at a time)",
                    percent(a)
                )
            } else {
                format!("{} of requests inside every target", percent(a))
            };
            let cost = m
                .cost_per_million_output_tokens_at_slo
                .map(|c| format!("; a million output tokens cost {} there", with_currency(c, currency)))
                .unwrap_or_default();
            out.push(format!(
                "At {} requests/s the {allocation} trial ({name}) keeps {share}{cost}.",
                figure(p.rate_rps)
            ));
        }
        (Some(p), None) => out.push(format!(
            "{name}'s newest load test ran at {} requests/s but has no per-request data, so the share of \
             requests inside every target is unknown (vLLM's --save-detailed, GenAI-Perf's profile export or \
             GuideLLM's report give it).",
            figure(p.rate_rps)
        )),
        (None, _) => out.push(format!(
            "{name} has no load test yet: upload a bench-serving result to see cost per million tokens at the SLO."
        )),
    }
    match (
        m.capacity_at_slo_rps,
        m.replicas_for_peak,
        m.monthly_cost,
        m.expected_peak_rps,
    ) {
        (Some(cap), Some(n), Some(monthly), Some(peak)) => out.push(format!(
            "One replica carries {} requests/s within the targets; the expected peak of {} requests/s needs {n} \
             {}, {} a month.",
            figure(cap),
            figure(peak),
            if n == 1 { "replica" } else { "replicas" },
            with_currency(monthly, currency)
        )),
        (Some(cap), _, _, _) => out.push(format!(
            "One replica carries {} requests/s within the targets{}.",
            figure(cap),
            if m.expected_peak_rps.is_none() {
                " (give the brief's expected peak to see replicas and a monthly cost)"
            } else {
                ""
            }
        )),
        (None, _, _, _) if m.load_points.iter().any(|p| p.attainment.is_some()) => out.push(format!(
            "No load point kept {} of requests inside every target, so the capacity at the SLO is unknown; a \
             sweep at lower rates would find it.",
            percent(m.attainment_target)
        )),
        _ => {}
    }
    if m.rate.is_none() {
        out.push(format!(
            "{name} has no rate, so its cost is unknown: give its rate per GPU-hour, or import a price sheet \
             with its provider's price."
        ));
    }
    match (m.api_price_per_million_tokens, m.cost_per_million_output_tokens_at_slo) {
        (Some(api), Some(ours)) if ours > api => out.push(format!(
            "A managed API at {} per million output tokens is cheaper than this trial's {}.",
            with_currency(api, currency),
            with_currency(ours, currency)
        )),
        (Some(api), Some(ours)) => out.push(format!(
            "This trial's {} per million output tokens beats the managed API's {}.",
            with_currency(ours, currency),
            with_currency(api, currency)
        )),
        _ => {}
    }
    out
}

/// Chart geometry: the plot starts at x = 60 and is 560 wide; the attainment axis is 200 high.
const PLOT_X: f64 = 60.0;
const PLOT_W: f64 = 560.0;
const PLOT_TOP: f64 = 10.0;
const PLOT_H: f64 = 200.0;

fn chart(r: &Review) -> Option<AttainmentChart> {
    let with_points: Vec<(&TrialReview, &MoneyFacts)> = r
        .trials
        .iter()
        .filter_map(|t| t.context.inputs.money.as_ref().map(|m| (t, m)))
        .filter(|(_, m)| m.load_points.iter().any(|p| p.attainment.is_some()))
        .collect();
    if with_points.is_empty() {
        return None;
    }
    let max_rate = with_points
        .iter()
        .flat_map(|(_, m)| m.load_points.iter().map(|p| p.rate_rps))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x_max = nice_ceiling(max_rate * 1.1);
    let x = |rate: f64| PLOT_X + rate / x_max * PLOT_W;
    let y = |share: f64| PLOT_TOP + (1.0 - share) * PLOT_H;
    let target = with_points[0].1.attainment_target;
    let series = with_points
        .iter()
        .enumerate()
        .map(|(i, (t, m))| {
            let mut pts: Vec<&LoadPoint> = m.load_points.iter().filter(|p| p.attainment.is_some()).collect();
            pts.sort_by(|a, b| a.rate_rps.total_cmp(&b.rate_rps));
            let points: Vec<ChartPoint> = pts
                .iter()
                .map(|p| {
                    let a = p.attainment.unwrap_or(0.0);
                    ChartPoint {
                        x: x(p.rate_rps),
                        y: y(a),
                        title: format!(
                            "{}: {} requests/s, {} inside every target",
                            t.context.trial.fields.name,
                            figure(p.rate_rps),
                            percent(a)
                        ),
                        capacity: m.capacity_at_slo_rps == Some(p.rate_rps),
                    }
                })
                .collect();
            let path = points
                .iter()
                .enumerate()
                .map(|(j, p)| format!("{}{:.1},{:.1}", if j == 0 { "M" } else { " L" }, p.x, p.y))
                .collect();
            ChartSeries {
                name: match m.capacity_at_slo_rps {
                    Some(cap) => format!(
                        "{} — keeps the target up to {} requests/s",
                        t.context.trial.fields.name,
                        figure(cap)
                    ),
                    None => format!("{} — never keeps the target", t.context.trial.fields.name),
                },
                class: format!("series-{}", i % 4),
                path,
                points,
                legend_y: PLOT_TOP + PLOT_H + 64.0 + i as f64 * 20.0,
            }
        })
        .collect::<Vec<_>>();
    let x_ticks = (0..=4)
        .map(|k| {
            let v = x_max * f64::from(k) / 4.0;
            (x(v), figure(v))
        })
        .collect();
    let y_ticks = [0.0, 0.25, 0.5, 0.75, 1.0]
        .iter()
        .map(|s| (y(*s), percent(*s)))
        .collect();
    Some(AttainmentChart {
        height: PLOT_TOP + PLOT_H + 70.0 + series.len() as f64 * 20.0,
        series,
        target_y: y(target),
        target_label: format!("target {}", percent(target)),
        x_ticks,
        y_ticks,
    })
}

/// A round axis end at or above `x` (a power of ten times 1, 1.5, 2, 2.5, 3, 4, 5, 6 or 8), so
/// the four ticks read as round numbers.
fn nice_ceiling(x: f64) -> f64 {
    let magnitude = 10f64.powf(x.log10().floor());
    [1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0]
        .iter()
        .map(|m| m * magnitude)
        .find(|v| *v >= x)
        .unwrap_or(10.0 * magnitude)
}

pub fn money_section(r: &Review) -> MoneySection {
    let currency = &r.brief.fields.currency;
    let brief_id = r.brief.id.to_string();
    let money = |t: &TrialReview| t.context.inputs.money.clone();
    let mut rows = Vec::new();
    let mut row = |label: &'static str, f: &dyn Fn(&TrialReview, &MoneyFacts) -> MoneyCell| {
        rows.push(MoneyRow {
            label,
            cells: r
                .trials
                .iter()
                .map(|t| match money(t) {
                    Some(m) => f(t, &m),
                    None => unknown("—"),
                })
                .collect(),
        });
    };
    row("Cost per hour", &|t, m| match (&m.rate, m.cost_per_hour) {
        (Some(rate), Some(hourly)) => cell(
            format!(
                "{} ({} GPUs × {}; {})",
                with_currency(hourly, currency),
                rate.gpus_billed,
                with_currency(rate.per_gpu_hour, currency),
                rate.description
            ),
            rate_href(m, &brief_id, &t.context.trial.id.to_string()),
        ),
        _ => unknown("no rate yet"),
    });
    row(
        "Requests inside every target",
        &|_, m| match (m.slo_attainment, &m.operating_point) {
            (Some(a), Some(p)) => cell(
                format!(
                    "{}{} at {} requests/s",
                    if m.slo_attainment_estimated { "≤ " } else { "" },
                    percent(a),
                    figure(p.rate_rps)
                ),
                evidence_href(p),
            ),
            _ => unknown("needs per-request data"),
        },
    );
    row(
        "Goodput (requests/s inside every target)",
        &|_, m| match (m.goodput_rps, &m.operating_point) {
            (Some(g), Some(p)) => cell(figure(g), evidence_href(p)),
            _ => unknown("—"),
        },
    );
    row(
        "Cost per million output tokens, all requests",
        &|_, m| match (m.cost_per_million_output_tokens, &m.rate) {
            (Some(c), _) => cell(with_currency(c, currency), m.headline.as_ref().and_then(evidence_href)),
            (None, None) => unknown("no rate yet"),
            (None, Some(_)) => unknown("needs a load test with output tokens/s"),
        },
    );
    row("Cost per million output tokens at the SLO", &|_, m| match (
        m.cost_per_million_output_tokens_at_slo,
        &m.operating_point,
        &m.rate,
    ) {
        (Some(c), Some(p), _) => cell(with_currency(c, currency), evidence_href(p)),
        (_, _, None) => unknown("no rate yet"),
        _ => unknown("needs per-request data"),
    });
    row(
        "Capacity of one replica at the SLO",
        &|_, m| match m.capacity_at_slo_rps {
            Some(cap) => cell(
                format!("{} requests/s", figure(cap)),
                m.operating_point.as_ref().and_then(evidence_href),
            ),
            None => unknown("needs a sweep that keeps the target"),
        },
    );
    row("Replicas and monthly cost at the expected peak", &|_, m| match (
        m.replicas_for_peak,
        m.monthly_cost,
        m.expected_peak_rps,
    ) {
        (Some(n), Some(c), Some(peak)) => cell(
            format!(
                "{n} for {} requests/s: {} a month",
                figure(peak),
                with_currency(c, currency)
            ),
            None,
        ),
        (_, _, None) => unknown("the brief gives no expected peak"),
        _ => unknown("needs the capacity and a rate"),
    });
    let api_price = r
        .brief
        .fields
        .api_price_per_million_tokens
        .map(|p| with_currency(p, currency));
    if api_price.is_some() {
        row(
            "Managed API per million output tokens",
            &|_, m| match (m.api_price_per_million_tokens, m.api_is_cheaper) {
                (Some(api), Some(true)) => cell(format!("{} — cheaper", with_currency(api, currency)), None),
                (Some(api), Some(false)) => cell(format!("{} — dearer", with_currency(api, currency)), None),
                (Some(api), None) => cell(format!("{} — not comparable yet", with_currency(api, currency)), None),
                _ => unknown("—"),
            },
        );
    }
    MoneySection {
        summaries: r
            .trials
            .iter()
            .map(|t| MoneySummary {
                trial: t.context.trial.fields.name.clone(),
                sentences: sentences(t, t.context.inputs.money.as_ref(), currency),
            })
            .collect(),
        rows,
        chart: chart(r),
        api_price,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn axis_ends_are_round() {
        assert_eq!(nice_ceiling(17.6), 20.0);
        assert_eq!(nice_ceiling(26.4), 30.0);
        assert_eq!(nice_ceiling(2.2), 2.5);
        assert_eq!(nice_ceiling(0.7), 0.8);
        assert_eq!(nice_ceiling(130.0), 150.0);
    }
}
