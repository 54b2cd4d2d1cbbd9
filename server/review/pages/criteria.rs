//! The grounds of the decision as the review page and the decision record show them: the reasons
//! with their facts, the criteria stage by stage, and the latency and cost charts.

use rust_decimal::Decimal;

use super::STAGE_NAMES;
use crate::{
    figures,
    review::{
        decision::{Reason, Status},
        decision_view,
        service::Review,
    },
};

pub(super) struct FactView {
    pub(super) label: String,
    pub(super) value: String,
    pub(super) href: Option<String>,
}

pub(super) struct ReasonView {
    pub(super) rule: String,
    pub(super) decision: &'static str,
    pub(super) says: String,
    /// The reason in plain words (decision_view::reason_sentence).
    pub(super) sentence: String,
    pub(super) facts: Vec<FactView>,
}

pub(super) struct CriterionView {
    pub(super) key: String,
    /// What the key measures, in words ("The time to the first token (95th percentile)").
    pub(super) name: String,
    pub(super) rule: String,
    pub(super) value: String,
    pub(super) status: &'static str,
    pub(super) href: Option<String>,
    pub(super) required: bool,
}

pub(super) struct StageView {
    pub(super) number: u8,
    pub(super) name: &'static str,
    pub(super) status: &'static str,
    pub(super) criteria: Vec<CriterionView>,
}

/// A horizontal bar of the latency chart: the measured value against its threshold.
pub(super) struct LatencyBar {
    pub(super) label: String,
    pub(super) value: f64,
    pub(super) threshold: f64,
    pub(super) value_width: f64,
    pub(super) threshold_x: f64,
    pub(super) pass: bool,
}

pub(super) struct CostBar {
    pub(super) label: String,
    pub(super) amount: String,
    pub(super) width: f64,
}

fn href(link: &Option<String>, brief_id: &str) -> Option<String> {
    let link = link.as_deref()?;
    let (kind, rest) = link.split_once(':')?;
    Some(match kind {
        "evidence" => format!("/evidence/{rest}"),
        "criterion" => format!("#crit-{rest}"),
        "ledger" => format!("/briefs/{brief_id}#ledger"),
        _ => return None,
    })
}

pub(super) fn reason_view(reason: &Reason, r: &Review) -> ReasonView {
    let brief_id = r.brief.id.to_string();
    let t = &r.trials[r.chosen];
    ReasonView {
        rule: reason.rule.to_string(),
        decision: reason.decision.as_str(),
        says: reason.says.clone(),
        sentence: decision_view::reason_sentence(
            reason,
            t,
            &r.brief.fields.currency,
            r.brief.fields.cost_unit.as_str(),
        ),
        facts: reason
            .facts
            .iter()
            .map(|f| {
                let plain = decision_view::plain_fact(f);
                FactView {
                    label: plain.label,
                    value: plain.value,
                    href: href(&plain.link, &brief_id),
                }
            })
            .collect(),
    }
}

pub(super) fn status_str(s: Status) -> &'static str {
    match s {
        Status::Pass => "pass",
        Status::Fail => "fail",
        Status::Missing => "missing",
        Status::NotApplicable => "n/a",
    }
}

/// A measured value with its key's unit, as every page shows it.
pub(super) fn shown(key: &str, v: &serde_json::Value) -> String {
    figures::measured(v, decision_view::unit_of(key))
}

/// Beside the NCCL bus bandwidth: "84 % of what this topology should do (expected 476 GB/s)".
fn nccl_share(r: &Review, key: &str) -> Option<String> {
    if !key.starts_with("nccl.busbw_") {
        return None;
    }
    let shown = &r.context.shown;
    let pct = shown.get("nccl.busbw_pct_of_expected")?.value.as_f64()?;
    let mut text = format!("{} % of what this topology should do", figures::figure(pct));
    if let Some(expected) = shown.get("nccl.expected_busbw_gbps").and_then(|m| m.value.as_f64()) {
        text.push_str(&format!(", expected {} GB/s", figures::figure(expected)));
    }
    Some(text)
}

pub(super) fn stages(r: &Review) -> Vec<StageView> {
    (1..=5u8)
        .map(|n| {
            let criteria: Vec<CriterionView> = r
                .context
                .inputs
                .criteria
                .iter()
                .filter(|c| c.stage == n)
                .map(|c| CriterionView {
                    key: c.key.clone(),
                    name: decision_view::capitalized(&decision_view::criterion_name(&c.key)),
                    rule: figures::threshold(&c.op, &c.threshold, decision_view::unit_of(&c.key)),
                    value: match (c.value.as_ref(), nccl_share(r, &c.key)) {
                        (Some(v), Some(share)) => format!("{} ({share})", shown(&c.key, v)),
                        (Some(v), None) => shown(&c.key, v),
                        (None, _) => "—".into(),
                    },
                    status: status_str(c.status),
                    href: c.evidence_id.map(|id| format!("/evidence/{id}")),
                    required: c.required,
                })
                .collect();
            let required: Vec<&CriterionView> = criteria.iter().filter(|c| c.required).collect();
            let status = if required.iter().any(|c| c.status == "fail") {
                "fail"
            } else if required.is_empty() {
                "none"
            } else if required.iter().all(|c| c.status == "pass") {
                "pass"
            } else {
                "missing"
            };
            StageView {
                number: n,
                name: STAGE_NAMES[usize::from(n - 1)],
                status,
                criteria,
            }
        })
        .collect()
}

const CHART_WIDTH: f64 = 420.0;

/// A latency key as the chart's row label: "first token (p95)".
fn latency_label(key: &str) -> String {
    let short = key.trim_start_matches("serving.").trim_end_matches("_ms");
    let Some((what, pct)) = short.rsplit_once('_') else {
        return short.to_owned();
    };
    let what = match what {
        "ttft" => "first token",
        "itl" => "between tokens",
        // A request's mean time per output token, the figure the brief's inter-token target judges.
        "tpot" => "per output token",
        "e2e" => "whole request",
        "queue_time" => "queue wait",
        "prefill" => "prefill",
        "decode" => "decode",
        other => other,
    };
    format!("{what} ({pct})")
}

pub(super) fn latency_bars(r: &Review) -> Vec<LatencyBar> {
    let rows: Vec<(String, f64, f64, bool)> = r
        .context
        .inputs
        .criteria
        .iter()
        .filter(|c| c.key.ends_with("_ms"))
        .filter_map(|c| {
            let v = c.value.as_ref()?.as_f64()?;
            let t = c.threshold.as_f64()?;
            Some((latency_label(&c.key), v, t, c.status == Status::Pass))
        })
        .collect();
    // Each row on its own scale (milliseconds differ by orders of magnitude between metrics): the
    // threshold sits at the same place in every row, so a bar past the line is a miss at a glance.
    rows.into_iter()
        .map(|(label, value, threshold, pass)| {
            let max = value.max(threshold).max(f64::MIN_POSITIVE) * 1.25;
            LatencyBar {
                label,
                value,
                threshold,
                value_width: (value / max * CHART_WIDTH).max(1.0),
                threshold_x: threshold / max * CHART_WIDTH,
                pass,
            }
        })
        .collect()
}

pub(super) fn cost_bars(r: &Review) -> Vec<CostBar> {
    let Some(ledger) = &r.context.inputs.ledger else {
        return Vec::new();
    };
    let max = ledger.totals.values().copied().max().unwrap_or(Decimal::ZERO);
    ledger
        .totals
        .iter()
        .map(|(label, amount)| CostBar {
            label: label.clone(),
            amount: figures::with_currency(*amount, &r.context.inputs.brief.currency),
            width: if max > Decimal::ZERO {
                (amount / max * Decimal::from(380))
                    .round_dp(1)
                    .to_string()
                    .parse()
                    .unwrap_or(0.0)
            } else {
                0.0
            },
        })
        .collect()
}
