//! The review page's money section: for each trial, plain sentences (what a million output tokens
//! cost at the SLO, how much traffic one replica carries, whether a managed API is cheaper), the
//! figures as rows with trials as columns, each linked to the evidence, price row or ledger it
//! came from, and a chart of attainment against request rate with the target line.

use super::{
    cost_at_slo::{ApiBreakEven, MoneyFacts, RateSource},
    service::{Review, TrialReview},
};
use crate::{
    briefs::model::BriefFields,
    evidence::load_points::LoadPoint,
    figures::{figure, percent, sum_with_currency, with_currency},
};

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
    /// Current prices of the trials' GPUs in other currencies: listed, never used.
    pub other_currency: Vec<String>,
}

fn evidence_href(id: uuid::Uuid) -> Option<String> {
    Some(format!("/evidence/{id}"))
}

/// The load a point was run at, for a sentence: its offered rate, else what it achieved.
fn rate_of(offered: Option<f64>, achieved: Option<f64>) -> Option<f64> {
    offered.or(achieved)
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
    if let Some(p) = &m.operating_point {
        out.push(format!("{name}'s load figures are {}.", p.described));
    }
    out.push(attainment_sentence(m, name, &allocation, currency));
    out.extend(capacity_sentence(m, currency));
    if m.rate.is_none() {
        out.push(format!(
            "{name} has no rate, so its cost is unknown: give its rate per GPU-hour, or import a price sheet \
             with its provider's price."
        ));
    }
    if let Some(api) = &m.api {
        out.push(api_sentence(api, currency));
    }
    if let Some(Ok(res)) = &t.reservation {
        out.push(format!(
            "Approving would reserve {}, {} at {} per GPU-hour: {} a month.",
            res.size_in_words(),
            res.billing,
            crate::figures::rate_with_currency(res.rate_per_gpu_hour, currency),
            sum_with_currency(res.monthly_cost, currency)
        ));
    }
    out
}

/// What share of requests the trial keeps inside every target at its operating point, and what a
/// million output tokens cost there.
fn attainment_sentence(m: &MoneyFacts, name: &str, allocation: &str, currency: &str) -> String {
    match (&m.operating_point, m.slo_attainment) {
        (Some(p), Some(_))
            if m.load_points
                .iter()
                .any(|q| q.evidence_id == p.evidence_id && q.run == p.run && q.nothing_completed()) =>
        {
            format!(
                "No request of {name}'s load test completed (every request failed), so nothing was served within \
                 the targets."
            )
        }
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
            format!(
                "At {} requests/s the {allocation} trial ({name}) keeps {share}{cost}.",
                figure(rate_of(p.offered_rps, p.achieved_rps).unwrap_or(0.0))
            )
        }
        (Some(p), None) => format!(
            "{name}'s load test ran at {} requests/s but has no per-request data, so the share of requests \
             inside every target is unknown (vLLM's --save-detailed, GenAI-Perf's profile export or GuideLLM's \
             report give it).",
            figure(rate_of(p.offered_rps, p.achieved_rps).unwrap_or(0.0))
        ),
        (None, _) => format!(
            "{name} has no load test yet: upload a bench-serving result to see cost per million tokens at the SLO."
        ),
    }
}

/// What one replica carries within the targets, and what the expected peak needs.
fn capacity_sentence(m: &MoneyFacts, currency: &str) -> Option<String> {
    match (
        m.capacity_at_slo_rps,
        m.replicas_for_peak,
        m.monthly_cost,
        m.expected_peak_rps,
    ) {
        (Some(cap), Some(n), Some(monthly), Some(peak)) => Some(format!(
            "One replica carries {} requests/s within the targets; the expected peak of {} requests/s{} needs {n} \
             {}, {} a month.",
            figure(cap),
            figure(peak),
            if m.headroom_pct > 0.0 {
                format!(" with {} % headroom", figure(m.headroom_pct))
            } else {
                " (no headroom)".to_owned()
            },
            if n == 1 { "replica" } else { "replicas" },
            with_currency(monthly, currency)
        )),
        (Some(cap), _, _, _) => Some(format!(
            "One replica carries {} requests/s within the targets{}.",
            figure(cap),
            if m.expected_peak_rps.is_none() {
                " (give the brief's expected peak to see replicas and a monthly cost)"
            } else {
                ""
            }
        )),
        // Only where a share was measured: without per-request data the sentence before says the
        // share is unknown, and "no load point kept 95 %" would judge what was not measured.
        (None, _, _, _)
            if m.operating_point.as_ref().is_some_and(|p| !p.qualified)
                && (m.slo_attainment.is_some()
                    || m.operating_point.as_ref().is_some_and(|p| p.slo_attainment.is_some())) =>
        {
            Some(format!(
                "No load point kept {} of requests inside every target, so the capacity at the SLO is unknown; a \
             sweep at lower rates would find it.",
                percent(m.attainment_target)
            ))
        }
        _ => None,
    }
}

/// The trial against a managed API's prices, per good request.
fn api_sentence(api: &ApiBreakEven, currency: &str) -> String {
    let busy = match api.utilization {
        Some(u) => format!(
            "at the ledger's measured utilization of {}",
            rust_decimal::prelude::ToPrimitive::to_f64(&u)
                .map(percent)
                .unwrap_or_default()
        ),
        None => "if kept busy all the time".to_owned(),
    };
    let prices = if api.output_price_only {
        format!(
            "{} per million output tokens (output price only)",
            with_currency(api.output_price_per_million, currency)
        )
    } else {
        format!(
            "{} per million input and {} per million output tokens",
            with_currency(api.input_price_per_million, currency),
            with_currency(api.output_price_per_million, currency)
        )
    };
    let ours = with_currency(api.our_cost_per_good_request, currency);
    let theirs = with_currency(api.api_cost_per_request, currency);
    if api.api_is_cheaper {
        format!(
            "A managed API at {prices} is cheaper: a good request costs {theirs} there against {ours} here \
             {busy} ({} against {} per million output tokens).",
            with_currency(api.api_cost_per_million_output_tokens, currency),
            with_currency(api.our_cost_per_million_output_tokens, currency)
        )
    } else {
        format!(
            "This trial beats a managed API at {prices}: a good request costs {ours} here {busy} against \
             {theirs} there ({} against {} per million output tokens).",
            with_currency(api.our_cost_per_million_output_tokens, currency),
            with_currency(api.api_cost_per_million_output_tokens, currency)
        )
    }
}

/// Chart geometry: the plot starts at x = 60 and is 560 wide; the attainment axis is 200 high.
const PLOT_X: f64 = 60.0;
const PLOT_W: f64 = 560.0;
const PLOT_TOP: f64 = 10.0;
const PLOT_H: f64 = 200.0;

/// One chart's scales, points and labels, computed in drawing order.
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
        .flat_map(|(_, m)| m.load_points.iter().filter_map(|p| p.achieved_rps))
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let x_max = nice_ceiling(max_rate * 1.1);
    let scale = ChartScale { x_max };
    let x = |rate: f64| scale.x(rate);
    let y = ChartScale::y;
    let target = with_points[0].1.attainment_target;
    let series = with_points
        .iter()
        .enumerate()
        .map(|(i, (t, m))| chart_series(i, t, m, &scale))
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

/// Where a rate and a share of requests fall on the plot.
struct ChartScale {
    /// The rate at the right end of the x axis.
    x_max: f64,
}

impl ChartScale {
    fn x(&self, rate: f64) -> f64 {
        PLOT_X + rate / self.x_max * PLOT_W
    }

    fn y(share: f64) -> f64 {
        PLOT_TOP + (1.0 - share) * PLOT_H
    }
}

/// The `i`-th trial's line: its load points by rate, the one at capacity marked, and its legend.
fn chart_series(i: usize, t: &TrialReview, m: &MoneyFacts, scale: &ChartScale) -> ChartSeries {
    let mut pts: Vec<&LoadPoint> = m
        .load_points
        .iter()
        .filter(|p| p.attainment.is_some() && p.achieved_rps.is_some())
        .collect();
    let rps = |p: &LoadPoint| p.achieved_rps.unwrap_or(0.0);
    pts.sort_by(|a, b| rps(a).total_cmp(&rps(b)));
    let operating = m.operating_load_point().filter(|_| m.capacity_at_slo_rps.is_some());
    let points: Vec<ChartPoint> = pts
        .iter()
        .map(|p| {
            let a = p.attainment.unwrap_or(0.0);
            ChartPoint {
                x: scale.x(rps(p)),
                y: ChartScale::y(a),
                title: format!(
                    "{}: {} requests/s, {} inside every target",
                    t.context.trial.fields.name,
                    figure(rps(p)),
                    percent(a)
                ),
                capacity: operating == Some(*p),
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

/// The managed API's prices the brief gives, as one line; `None` when it gives none.
fn api_price_text(f: &BriefFields, currency: &str) -> Option<String> {
    match (
        f.api_price_input_per_million,
        f.api_price_output_per_million,
        f.api_price_per_million_tokens,
    ) {
        (input, Some(output), _) => Some(format!(
            "{} per million input tokens, {} per million output tokens",
            with_currency(input.unwrap_or_default(), currency),
            with_currency(output, currency)
        )),
        (Some(input), None, Some(output)) => Some(format!(
            "{} per million input tokens, {} per million output tokens",
            with_currency(input, currency),
            with_currency(output, currency)
        )),
        (None, None, Some(output)) => Some(format!(
            "{} per million output tokens (output price only)",
            with_currency(output, currency)
        )),
        _ => None,
    }
}

/// Prices of the trials' offers that are not in the brief's currency, each once.
fn other_currency_lines(r: &Review, currency: &str) -> Vec<String> {
    r.trials
        .iter()
        .flat_map(|t| t.context.other_currency.iter())
        .map(|p| {
            format!(
                "{} {} × {}, {}{}: {} per GPU-hour — not in the brief's currency ({currency})",
                p.row.provider,
                p.row.gpu_count,
                p.row.gpu,
                p.row.billing,
                if p.row.region.is_empty() {
                    String::new()
                } else {
                    format!(", {}", p.row.region)
                },
                crate::figures::rate_with_currency(p.row.rate_per_gpu_hour, &p.row.currency)
            )
        })
        .fold(Vec::<String>::new(), |mut acc, line| {
            if !acc.contains(&line) {
                acc.push(line);
            }
            acc
        })
}

// Long, and reads better whole: one row per money figure, each cell's rule beside its label, in
// the order of the table on the page.
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
                "{} ({} GPUs × {}, {}; {})",
                with_currency(hourly, currency),
                rate.gpus_billed,
                crate::figures::rate_with_currency(rate.per_gpu_hour, currency),
                rate.billing,
                rate.description
            ),
            rate_href(m, &brief_id, &t.context.trial.id.to_string()),
        ),
        _ => unknown("no rate yet"),
    });
    row(
        "Operating point (where the load figures are read)",
        &|_, m| match &m.operating_point {
            Some(p) => cell(
                format!(
                    "{}{}",
                    p.described,
                    if p.qualified {
                        ""
                    } else {
                        " — no load point met the targets"
                    }
                ),
                evidence_href(p.evidence_id),
            ),
            None => unknown("no load test yet"),
        },
    );
    row(
        "Requests inside every target (good ÷ sent)",
        &|_, m| match (m.slo_attainment, &m.operating_point) {
            (Some(a), Some(p)) => cell(
                format!(
                    "{}{}",
                    if m.slo_attainment_estimated { "at most " } else { "" },
                    percent(a)
                ),
                evidence_href(p.evidence_id),
            ),
            _ => unknown("needs per-request data"),
        },
    );
    row(
        "Goodput (good requests/s)",
        &|_, m| match (m.goodput_rps, &m.operating_point) {
            (Some(g), Some(p)) => cell(
                format!(
                    "{}{}",
                    if m.slo_attainment_estimated { "at most " } else { "" },
                    figure(g)
                ),
                evidence_href(p.evidence_id),
            ),
            _ => unknown("—"),
        },
    );
    row(
        "Cost per million output tokens, all requests",
        &|_, m| match (m.cost_per_million_output_tokens, &m.rate) {
            (Some(c), _) => cell(
                with_currency(c, currency),
                m.operating_point.as_ref().and_then(|p| evidence_href(p.evidence_id)),
            ),
            (None, None) => unknown("no rate yet"),
            (None, Some(_)) => unknown("needs a load test with output tokens/s"),
        },
    );
    row(
        "Cost per million output tokens at the SLO (good requests' tokens)",
        &|_, m| match (m.cost_per_million_output_tokens_at_slo, &m.operating_point, &m.rate) {
            (Some(c), Some(p), _) => cell(
                format!(
                    "{}{}",
                    if m.slo_attainment_estimated { "at least " } else { "" },
                    with_currency(c, currency)
                ),
                evidence_href(p.evidence_id),
            ),
            (_, _, None) => unknown("no rate yet"),
            _ => unknown("needs per-request data"),
        },
    );
    row(
        "Capacity of one replica at the SLO",
        &|_, m| match m.capacity_at_slo_rps {
            Some(cap) => cell(
                format!("{} requests/s", figure(cap)),
                m.operating_point.as_ref().and_then(|p| evidence_href(p.evidence_id)),
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
                "{n} for {} requests/s with {} % headroom: {} a month",
                figure(peak),
                figure(m.headroom_pct),
                with_currency(c, currency)
            ),
            None,
        ),
        (_, _, None) => unknown("the brief gives no expected peak"),
        _ => unknown("needs the capacity and a rate"),
    });
    row("Reservation if approved", &|t, _| match &t.reservation {
        Some(Ok(res)) => cell(
            format!(
                "{} × {}, {} at {} per GPU-hour: {} a month",
                res.gpus,
                res.gpu,
                res.billing,
                crate::figures::rate_with_currency(res.rate_per_gpu_hour, currency),
                sum_with_currency(res.monthly_cost, currency)
            ),
            None,
        ),
        Some(Err(why)) => unknown(why),
        None => unknown("nothing to reserve for this decision"),
    });
    let api_price = api_price_text(&r.brief.fields, currency);
    if api_price.is_some() {
        row("Managed API per good request", &|_, m| match &m.api {
            Some(api) => cell(
                format!(
                    "{} there, {} here — the API is {}",
                    with_currency(api.api_cost_per_request, currency),
                    with_currency(api.our_cost_per_good_request, currency),
                    if api.api_is_cheaper { "cheaper" } else { "dearer" }
                ),
                None,
            ),
            None => unknown("not comparable yet (needs goodput, tokens per request and a rate)"),
        });
    }
    let other_currency = other_currency_lines(r, currency);
    MoneySection {
        other_currency,
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
