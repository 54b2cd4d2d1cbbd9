//! The trials side by side: one column per trial, one row per criterion with each trial's value,
//! and the cost-per-job bars.

use rust_decimal::{prelude::ToPrimitive, Decimal};

use super::{
    approval::approve_words,
    criteria::{shown, status_str},
};
use crate::{
    figures,
    ids::TrialId,
    review::{
        decision_view, first_screen,
        service::{needs_reservation, Review, TrialReview},
    },
};

/// One trial's column in the comparison.
pub(super) struct TrialColumn {
    pub(super) id: String,
    pub(super) name: String,
    pub(super) allocation: String,
    pub(super) provider: String,
    pub(super) decision: &'static str,
    /// What the decision means for a manager.
    pub(super) meaning: &'static str,
    pub(super) accepted: bool,
    pub(super) recommended: bool,
    pub(super) closest: bool,
    pub(super) criteria: String,
    pub(super) cost_per_job: String,
    pub(super) utilization: String,
    /// For a re-run: "better: …; worse: …" since the trial it re-runs.
    pub(super) changes: Vec<RerunChange>,
    pub(super) rerun_of: Option<String>,
    /// The approve button's words when this trial is chosen in the form (its computed reservation
    /// at the default term): static/review.js shows them when the manager picks it.
    pub(super) approve_words: String,
    /// Approving it records a reservation.
    pub(super) reserves: bool,
    /// Its reservation comparison in words (the approval preview follows the select).
    pub(super) comparison: String,
}

/// A criterion or money figure that moved since the trial a re-run re-runs.
pub(super) struct RerunChange {
    pub(super) key: String,
    pub(super) better: bool,
}

/// A re-run's money row in words.
fn change_label(key: &str) -> String {
    match key {
        "capacity_at_slo_rps" => "capacity at the SLO".into(),
        "cost_per_million_output_tokens_at_slo" => "cost per million output tokens at the SLO".into(),
        "monthly_cost" => "monthly cost at the peak".into(),
        other => decision_view::criterion_name(other),
    }
}

/// One trial's value and status of a criterion.
pub(super) struct ComparisonCell {
    pub(super) value: String,
    pub(super) status: &'static str,
}

/// One row of the comparison: a criterion (key and stage) with each trial's value and status.
pub(super) struct ComparisonRow {
    pub(super) key: String,
    /// The metric key alone, shown small under its name.
    pub(super) metric: String,
    pub(super) label: String,
    pub(super) cells: Vec<ComparisonCell>,
}

/// One bar of the cost-per-job chart across trials.
pub(super) struct TrialCostBar {
    pub(super) label: String,
    pub(super) amount: String,
    pub(super) width: f64,
    pub(super) recommended: bool,
}

/// The trials' cost chart: what it measures, and a bar per trial that has it.
pub(super) struct TrialCosts {
    /// "Cost per completed job", or per million output tokens at the SLO.
    pub(super) measure: &'static str,
    pub(super) bars: Vec<TrialCostBar>,
}

/// The comparison table's columns (one per trial), rows (one per criterion) and cost bars.
pub(super) fn comparison(r: &Review) -> (Vec<TrialColumn>, Vec<ComparisonRow>, TrialCosts) {
    let columns: Vec<TrialColumn> = r.trials.iter().map(|t| column(r, t)).collect();
    (columns, criterion_rows(r), cost_bars(r))
}

/// One trial's column: its allocation, decision, criteria passed, cost per job and changes.
fn column(r: &Review, t: &TrialReview) -> TrialColumn {
    let currency = &r.brief.fields.currency;
    let trial = &t.context.trial;
    let (passed, required) = t.criteria_passed();
    let name_of = |id: TrialId| {
        r.trials
            .iter()
            .find(|o| o.context.trial.id == id)
            .map(|o| o.context.trial.fields.name.clone())
    };
    TrialColumn {
        id: trial.id.to_string(),
        name: trial.fields.name.clone(),
        allocation: t
            .context
            .allocation
            .as_ref()
            .map(|a| {
                let mut label = a.label();
                if a.suggested {
                    label.push_str(" (suggested)");
                }
                label
            })
            .unwrap_or_else(|| "—".into()),
        provider: if trial.fields.provider.is_empty() {
            "—".into()
        } else {
            trial.fields.provider.clone()
        },
        decision: t.decision.decision.as_str(),
        meaning: first_screen::verdict_meaning(t.decision.decision),
        accepted: t.decision.accepted,
        recommended: r.recommendation.recommended == Some(trial.id),
        closest: r.recommendation.closest == Some(trial.id),
        criteria: format!("{passed} of {required} pass"),
        cost_per_job: match t.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
            Some(Some(c)) => figures::with_currency(c, currency),
            Some(None) => "not known yet (nothing accepted)".into(),
            None => "no ledger yet".into(),
        },
        utilization: t
            .decision
            .utilization
            .and_then(|u| u.to_f64())
            .map(figures::percent)
            .unwrap_or_else(|| "unknown".into()),
        changes: t
            .changes
            .iter()
            .filter(|c| matches!(c.verdict, "better" | "worse"))
            .map(|c| RerunChange {
                key: change_label(&c.key),
                better: c.verdict == "better",
            })
            .collect(),
        rerun_of: trial.fields.rerun_of.and_then(name_of),
        approve_words: approve_words(t, t.recorded_reservation()),
        reserves: needs_reservation(t.decision.decision),
        comparison: decision_view::comparison_sentence(t, currency),
    }
}

/// One row per criterion any trial evaluates, in the first trial's order, then the others', each
/// trial's value and status in its cell.
fn criterion_rows(r: &Review) -> Vec<ComparisonRow> {
    // Every criterion any trial evaluates, in the first trial's order, then the others'.
    let mut keys: Vec<(String, u8)> = Vec::new();
    for t in &r.trials {
        for c in &t.context.inputs.criteria {
            if !keys.iter().any(|(k, s)| *k == c.key && *s == c.stage) {
                keys.push((c.key.clone(), c.stage));
            }
        }
    }
    keys.sort_by_key(|(_, stage)| *stage);
    keys.into_iter()
        .map(|(key, stage)| ComparisonRow {
            metric: key.clone(),
            label: format!(
                "Stage {stage} · {}",
                decision_view::capitalized(&decision_view::criterion_name(&key))
            ),
            key: format!("{key}@{stage}"),
            cells: r
                .trials
                .iter()
                .map(|t| {
                    match t
                        .context
                        .inputs
                        .criteria
                        .iter()
                        .find(|c| c.key == key && c.stage == stage)
                    {
                        Some(c) => ComparisonCell {
                            value: c.value.as_ref().map(|v| shown(&key, v)).unwrap_or_else(|| "—".into()),
                            status: status_str(c.status),
                        },
                        None => ComparisonCell {
                            value: "—".into(),
                            status: "n/a",
                        },
                    }
                })
                .collect(),
        })
        .collect()
}

/// The trials' costs per completed job as bars, the largest 400 wide; where no trial has one yet
/// (nothing accepted), their cost per million output tokens at the SLO, the measure the
/// recommendation ranks inference trials by.
fn cost_bars(r: &Review) -> TrialCosts {
    let costs_by = |of: fn(&TrialReview) -> Option<Decimal>| -> Vec<(usize, Decimal)> {
        r.trials
            .iter()
            .enumerate()
            .filter_map(|(i, t)| of(t).map(|c| (i, c)))
            .collect()
    };
    let per_job = costs_by(cost_per_job);
    let (measure, costs) = if per_job.is_empty() {
        (
            "Cost per million output tokens at the SLO",
            costs_by(cost_per_million_at_slo),
        )
    } else {
        ("Cost per completed job", per_job)
    };
    TrialCosts {
        measure,
        bars: bars_of(r, &costs),
    }
}

fn cost_per_job(t: &TrialReview) -> Option<Decimal> {
    t.context.inputs.ledger.as_ref().and_then(|l| l.cost_per_job)
}

fn cost_per_million_at_slo(t: &TrialReview) -> Option<Decimal> {
    t.context
        .inputs
        .money
        .as_ref()
        .and_then(|m| m.cost_per_million_output_tokens_at_slo)
}

fn bars_of(r: &Review, costs: &[(usize, Decimal)]) -> Vec<TrialCostBar> {
    let currency = &r.brief.fields.currency;
    let max = costs.iter().map(|(_, c)| *c).max().unwrap_or_default();
    costs
        .iter()
        .map(|(i, c)| {
            let t = &r.trials[*i];
            TrialCostBar {
                label: t.context.trial.fields.name.clone(),
                amount: figures::with_currency(*c, currency),
                width: if max.is_zero() {
                    0.0
                } else {
                    (*c / max * Decimal::from(400)).round_dp(1).to_f64().unwrap_or(0.0)
                },
                recommended: r.recommendation.recommended == Some(t.context.trial.id),
            }
        })
        .collect()
}
