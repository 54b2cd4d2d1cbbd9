//! The review in plain words, for a manager who is not a GPU specialist (docs/decision.md "Words on
//! the page"): the verdict's sentence of why, the reasons without metric keys or raw decimals, what
//! approving does, and what changed since a stale approval. Built from the computed review;
//! decides nothing. The brief's three lines and the money figures are `first_screen`.

use rust_decimal::{prelude::ToPrimitive, Decimal};
use serde_json::Value;

use super::{
    decision::{CriterionOutcome, Fact, Reason, Rule, Status, UtilizationSource, Verdict},
    model::Reservation,
    service::{Review, TrialReview},
};
use crate::ids::TrialId;
use crate::{acceptance::model::known_key, figures};

/// The card unit of a metric key ("ms", "fraction", "count"; empty when unknown).
pub fn unit_of(key: &str) -> &'static str {
    known_key(key).map(|k| k.unit).unwrap_or("")
}

pub use crate::criteria::{capitalized, criterion_name};

/// "a", "a and b", "a, b and c".
fn joined(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// At most three items, then how many more (the reasons below list them all), so a sentence at
/// the top stays one sentence: "a, b, c and 2 more".
fn joined_few(items: &[String]) -> String {
    const NAMED: usize = 3;
    if items.len() <= NAMED + 1 {
        return joined(items);
    }
    format!("{} and {} more", items[..NAMED].join(", "), items.len() - NAMED)
}

/// Whether a failed load criterion of `t` says no request completed (every request failed).
fn nothing_completed(t: &TrialReview) -> bool {
    failing(t, &[3]).any(|c| c.reason.as_deref() == Some(crate::evidence::load_points::NOTHING_COMPLETED))
}

/// A failing criterion in words: "the GPU health check (DCGM diagnostic) failed", "the time to the
/// first token (95th percentile) was 620 ms against a target of ≤ 500 ms".
pub fn failure(c: &CriterionOutcome) -> String {
    let name = criterion_name(&c.key);
    let unit = unit_of(&c.key);
    match &c.value {
        Some(Value::Bool(false)) if c.threshold == Value::Bool(true) => format!("{name} failed"),
        Some(v) => format!(
            "{name} was {} against a target of {}",
            figures::measured(v, unit),
            figures::threshold(&c.op, &c.threshold, unit)
        ),
        None => format!("{name} has no value"),
    }
}

/// The GPUs under test: "8 × H200 SXM".
pub(super) fn allocation(t: &TrialReview) -> String {
    t.context
        .allocation
        .as_ref()
        .map(|a| a.label())
        .unwrap_or_else(|| "trial's".into())
}

/// The busy share as a percentage ("78 %").
fn busy(t: &TrialReview) -> Option<String> {
    t.decision.utilization.and_then(|u| u.to_f64()).map(figures::percent)
}

/// A share (0–1) as a percentage.
fn share(d: Decimal) -> String {
    d.to_f64().map(figures::percent).unwrap_or_default()
}

fn failing<'a>(t: &'a TrialReview, stages: &'a [u8]) -> impl Iterator<Item = &'a CriterionOutcome> + 'a {
    t.context
        .inputs
        .criteria
        .iter()
        .filter(move |c| c.required && c.status == Status::Fail && stages.contains(&c.stage))
}

/// What one completed job is, in words ("request", "1,000 tokens").
pub(super) fn job_word(unit: &str) -> &str {
    match unit {
        "1k-tokens" => "1,000 tokens",
        other => other,
    }
}

/// One reason of the decision in a plain sentence.
// Long, and reads better whole: one match arm per rule of decision.md, each a sentence.
pub fn reason_sentence(reason: &Reason, t: &TrialReview, currency: &str, cost_unit: &str) -> String {
    let inputs = &t.context.inputs;
    let alloc = allocation(t);
    match reason.rule {
        Rule::Numbered(1) => {
            "The workload only needs the model's answers, needs no control of the server and may share \
             infrastructure, so a managed model API is a better buy than a rented GPU."
                .into()
        }
        Rule::Numbered(2) => {
            let mut problems: Vec<String> = failing(t, &[1, 2, 4]).map(failure).collect();
            for key in ["dcgm.diag.passed", "checkpoint.restore_ok"] {
                let failed = inputs.metrics.get(key).is_some_and(|m| m.value == Value::Bool(false));
                if failed && !failing(t, &[1, 2, 4]).any(|c| c.key == key) {
                    problems.push(format!("{} failed", criterion_name(key)));
                }
            }
            format!(
                "{} on the {alloc} server: fix or replace it before committing to anything.",
                capitalized(&joined_few(&problems))
            )
        }
        Rule::Numbered(3) => {
            let ledger = inputs.ledger.as_ref();
            match (ledger.and_then(|l| l.cost_per_job), inputs.brief.max_cost_per_job) {
                (Some(cost), Some(ceiling)) => {
                    let (cost, ceiling) = figures::compared_with_currency(cost, ceiling, currency);
                    format!(
                        "Each completed {} costs {cost}, more than the ceiling of {ceiling}.",
                        job_word(cost_unit)
                    )
                }
                _ => "Each completed job costs more than the brief's ceiling.".into(),
            }
        }
        Rule::Numbered(4) if nothing_completed(t) => {
            format!(
                "No request of the load test on the {alloc} server completed while it was full, so add capacity: \
                 {} replicas of the {alloc} allocation by the worst miss ratio; a run at a lower rate would size \
                 it better.",
                t.decision.suggested_replicas.unwrap_or(1)
            )
        }
        Rule::Numbered(4) => {
            let missed: Vec<String> = failing(t, &[3]).map(failure).collect();
            let replicas = t.decision.suggested_replicas.unwrap_or(1);
            format!(
                "{} while the server was full, so add capacity: {replicas} replicas of the {alloc} allocation \
                 instead of 1.",
                capitalized(&joined_few(&missed)),
            )
        }
        Rule::Numbered(5) if nothing_completed(t) => {
            format!(
                "No request of the load test on the {alloc} server completed — every request failed — so there is \
                 no latency to judge and more GPUs would not help: the setup needs fixing."
            )
        }
        Rule::Numbered(5) => {
            let missed: Vec<String> = failing(t, &[3]).map(failure).collect();
            format!(
                "{} while the server was not full, so more GPUs would not help: the setup needs fixing.",
                capitalized(&joined_few(&missed))
            )
        }
        Rule::Numbered(6) => {
            let names: Vec<String> = t
                .decision
                .missing
                .values()
                .flatten()
                .map(|k| criterion_name(k))
                .collect();
            // A few are named; a long list stays below ("Still missing"), so the sentence stays one.
            let which = if names.len() <= 3 {
                joined(&names)
            } else {
                let stages: Vec<String> = t.decision.missing.keys().map(u8::to_string).collect();
                format!(
                    "in {} {}, listed below",
                    if stages.len() == 1 { "stage" } else { "stages" },
                    joined(&stages)
                )
            };
            format!(
                "{} required {} still missing ({which}): keep the short rental until {} measured; nothing is \
                 committed before the trial is accepted.",
                names.len(),
                if names.len() == 1 {
                    "measurement is"
                } else {
                    "measurements are"
                },
                if names.len() == 1 { "it is" } else { "they are" }
            )
        }
        Rule::ApiCheaper => match inputs.money.as_ref().and_then(|m| m.api.as_ref()) {
            Some(api) => format!(
                "A managed model API is cheaper: a good request costs {} on the {alloc} server{}, against {} on \
                 the API{}.",
                figures::with_currency(api.our_cost_per_good_request, currency),
                if api.utilization.is_some() {
                    " at its measured utilization"
                } else {
                    " if kept busy all the time"
                },
                figures::with_currency(api.api_cost_per_request, currency),
                if api.output_price_only {
                    " (its output price only: input counted free)"
                } else {
                    ""
                }
            ),
            None => "A managed model API is cheaper for this traffic.".into(),
        },
        Rule::SpotForRealtime => format!(
            "The {alloc} trial met every target, but on spot capacity, which the provider can take back in the \
             middle of a request: a chat service needs the same allocation on demand or reserved."
        ),
        Rule::Numbered(7) => format!(
            "The {alloc} trial met every target and the workload needs {}, so rent a dedicated server.",
            if inputs.brief.needs_host_control {
                "control of the server itself"
            } else {
                "a server of its own for its data"
            }
        ),
        Rule::Numbered(8) | Rule::ReservedPriceNeeded => {
            let busy_text = match (&t.decision.utilization_source, busy(t)) {
                (UtilizationSource::DcgmExporter { .. }, Some(pct)) => {
                    format!("the GPUs were busy {pct} of the time on average (measured on the GPUs)")
                }
                (_, Some(pct)) => format!("the GPUs were busy {pct} of paid hours"),
                (_, None) => "the GPUs were busy enough".into(),
            };
            let c = &t.decision.reservation;
            if reason.rule == Rule::ReservedPriceNeeded {
                let below = c
                    .reserve_pays_below_rate
                    .map(|rate| {
                        format!(
                            "; reserving would pay at a reserved price below {} per GPU-hour",
                            figures::with_currency(rate, currency)
                        )
                    })
                    .unwrap_or_default();
                return format!(
                    "The {alloc} trial met every target and {busy_text}, but no reserved price of this offer is \
                     known, so nothing is reserved: keep paying by the hour and ask the provider for a reserved \
                     price{below}."
                );
            }
            format!(
                "The {alloc} trial met every target and {busy_text}, past the {} at which its reserved price pays \
                 (+ 5 points of margin), so reserving saves {} a month against paying by the hour for the busy hours.",
                share(c.break_even.unwrap_or_default()),
                figures::sum_with_currency(c.reserve_saving_monthly.unwrap_or_default(), currency)
            )
        }
        Rule::Numbered(9) if t.decision.accepted => {
            let batch = super::decision::is_batch_work(&inputs.brief.workload_kind);
            let how = if batch {
                ", preferably on interruptible capacity with a queue that resumes"
            } else {
                ""
            };
            let from = match t.decision.reservation.reserve_threshold {
                Some(from) => share(from),
                None => format!(
                    "{} at the earliest, once a reserved price of the offer is known",
                    share(super::decision::limits::ASK_FOR_RESERVED_PRICE_FROM)
                ),
            };
            if inputs.brief.trial_billing == "spot" {
                return format!(
                    "The {alloc} trial met every target on spot capacity, which is not reserved: keep paying as \
                     you go{how}."
                );
            }
            match busy(t) {
                Some(pct) => format!(
                    "The {alloc} trial met every target, but the GPUs were busy only {pct} of paid hours (a \
                     reservation pays from {from}), so keep paying by the hour{how}."
                ),
                None => format!(
                    "The {alloc} trial met every target, but how busy the GPUs were is not known (the ledger \
                     has no idle hours), so keep paying by the hour{how}."
                ),
            }
        }
        _ => {
            let failed: Vec<String> = failing(t, &[1, 2, 3, 4, 5]).map(failure).collect();
            if failed.is_empty() {
                "The trial is not accepted yet: keep paying by the hour until every required target passes.".into()
            } else {
                format!(
                    "{}: keep paying by the hour until it passes.",
                    capitalized(&joined_few(&failed))
                )
            }
        }
    }
}

/// A fact behind a reason, for people: a metric key becomes its name with the threshold in signs,
/// a raw decimal a figure, a share a percentage.
pub fn fact_label(label: &str) -> String {
    let mut parts = label.splitn(3, ' ');
    let key = parts.next().unwrap_or_default();
    match (parts.next(), parts.next()) {
        (Some(op), Some(threshold)) if ["lt", "le", "gt", "ge", "eq", "ne"].contains(&op) => {
            let value: Value = serde_json::from_str(threshold).unwrap_or_else(|_| Value::String(threshold.into()));
            format!(
                "{} (target {})",
                capitalized(&criterion_name(key)),
                figures::threshold(op, &value, unit_of(key))
            )
        }
        _ if label == "utilization" => "Busy share of paid GPU hours".into(),
        _ if known_key(key).is_some() => capitalized(&format!("{}{}", criterion_name(key), &label[key.len()..])),
        _ => capitalized(&label.replace('_', " ")),
    }
}

pub fn fact_value(label: &str, value: &str) -> String {
    if label == "utilization" {
        if let Ok(share) = value.parse::<Decimal>() {
            return share.to_f64().map(figures::percent).unwrap_or_else(|| value.to_owned());
        }
    }
    let key = label.split(' ').next().unwrap_or_default();
    if let Ok(v) = serde_json::from_str::<Value>(value) {
        if !v.is_string() {
            return figures::measured(&v, unit_of(key));
        }
    }
    // "0.0490068292682926829268292683 USD": an amount and its currency.
    if let Some((number, currency)) = value.split_once(' ') {
        let is_currency = currency.len() == 3 && currency.chars().all(|c| c.is_ascii_uppercase());
        if let (Ok(d), true) = (number.parse::<Decimal>(), is_currency) {
            return figures::with_currency(d, currency);
        }
    }
    value.to_owned()
}

pub struct PlainFact {
    pub label: String,
    pub value: String,
    pub link: Option<String>,
}

pub fn plain_fact(f: &Fact) -> PlainFact {
    // Rule 6 lists the missing keys of a stage.
    if f.label.starts_with("stage ") {
        return PlainFact {
            label: capitalized(&f.label),
            value: f.value.split(", ").map(criterion_name).collect::<Vec<_>>().join("; "),
            link: f.link.clone(),
        };
    }
    PlainFact {
        label: fact_label(&f.label),
        value: fact_value(&f.label, &f.value),
        link: f.link.clone(),
    }
}

/// What the verdict asks the manager to approve, as a short imperative: "reserve 8 × H200 SXM for
/// 12 months". `commitment` is the reservation the approval would record (or the recorded one).
pub fn action(decision: Verdict, t: &TrialReview, commitment: Option<&Reservation>) -> String {
    let alloc = allocation(t);
    let held = |verb: &str| match commitment {
        Some(c) => format!(
            "{verb} {} × {} for {}",
            c.gpus,
            c.gpu,
            super::model::months(c.term_months)
        ),
        None => format!("{verb} {alloc}"),
    };
    match decision {
        Verdict::Reserve => held("reserve"),
        Verdict::Dedicate => held("dedicate"),
        Verdict::Scale => match commitment {
            Some(c) => format!(
                "scale to {} × {} for {}",
                c.gpus,
                c.gpu,
                super::model::months(c.term_months)
            ),
            None => format!(
                "scale to {} replicas of {alloc}",
                t.decision.suggested_replicas.unwrap_or(1)
            ),
        },
        Verdict::Expand if t.decision.accepted => format!("keep {alloc}, paying by the hour"),
        Verdict::Expand => format!("keep testing on {alloc}, paying by the hour"),
        Verdict::Stop => format!("stop renting {alloc}"),
    }
}

/// What moved since a stale approval, in words: "the results against the card; new evidence for
/// the time to the first token (95th percentile)".
pub fn changed_in_words(changed: &[String], r: &Review) -> String {
    let mut out: Vec<String> = Vec::new();
    for path in changed {
        let (head, rest) = path.split_once('.').unwrap_or((path, ""));
        let (trial, head, rest) = match head.parse::<TrialId>().ok().and_then(|id| r.trial(id)) {
            Some(t) => {
                let (h, rest) = rest.split_once('.').unwrap_or((rest, ""));
                (Some(t.context.trial.fields.name.clone()), h, rest)
            }
            None => (None, head, rest),
        };
        let words = match head {
            "criteria" => "the results against the acceptance card".to_owned(),
            "ledger" => "the ledger (costs or completed jobs)".to_owned(),
            "metrics" if !rest.is_empty() => format!("new evidence for {}", criterion_name(rest)),
            "metrics" => "new evidence".to_owned(),
            "money" => "prices or load tests".to_owned(),
            "brief" if !rest.is_empty() => format!("the brief ({})", rest.replace('_', " ")),
            "brief" => "the brief".to_owned(),
            "" => "everything".to_owned(),
            other => other.replace('_', " "),
        };
        let words = match trial {
            Some(name) => format!("{words} of trial “{name}”"),
            None => words,
        };
        if !out.contains(&words) {
            out.push(words);
        }
    }
    joined(&out)
}

/// The reservation comparison of one trial in words a finance reader checks by hand — the same
/// sentence on the review's first screen, the approval preview and the decision record: the saving
/// (or extra cost) like for like and the threshold; or, with no reserved price of the offer, the
/// reserved price below which reserving would pay.
pub fn comparison_sentence(t: &TrialReview, currency: &str) -> String {
    let c = &t.decision.reservation;
    let provider = if t.context.trial.fields.provider.is_empty() {
        "the provider".to_owned()
    } else {
        t.context.trial.fields.provider.clone()
    };
    match (c.reserve_threshold, c.break_even) {
        (Some(from), Some(break_even)) if c.on_demand_busy_monthly.is_some() => format!(
            "{}; we reserve from {} busy (break-even {} = reserved {} ÷ on demand {} per GPU-hour, + 5 points of \
             margin).",
            capitalized(&super::decision::comparison_in_words(c, currency)),
            share(from),
            share(break_even),
            figures::rate_with_currency(c.reserved_rate_per_gpu_hour.unwrap_or_default(), currency),
            figures::rate_with_currency(c.on_demand_rate_per_gpu_hour.unwrap_or_default(), currency),
        ),
        (Some(from), Some(break_even)) => format!(
            "How busy the trial was is not known, so the busy hours cannot be priced; we reserve from {} busy \
             (break-even {} + 5 points of margin).",
            share(from),
            share(break_even)
        ),
        _ => match (c.reserve_pays_below_rate, c.utilization) {
            (Some(rate), Some(u)) => format!(
                "No reserved price of this offer is known, so nothing is reserved. At {} busy, reserving would pay \
                 at a reserved price below {} per GPU-hour ({} less 5 points, of the on-demand {}): ask {provider} \
                 for one.",
                share(u),
                figures::with_currency(rate, currency),
                share(u),
                figures::rate_with_currency(c.on_demand_rate_per_gpu_hour.unwrap_or_default(), currency),
            ),
            _ => format!("No reserved price of this offer is known, so nothing is reserved: ask {provider} for one."),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn outcome(key: &str, op: &str, threshold: Value, value: Value) -> CriterionOutcome {
        CriterionOutcome {
            key: key.into(),
            op: op.into(),
            threshold,
            stage: 1,
            required: true,
            status: Status::Fail,
            value: Some(value),
            evidence_id: None,
            reason: None,
        }
    }

    #[test]
    fn failures_read_as_words() {
        assert_eq!(
            failure(&outcome("dcgm.diag.passed", "eq", json!(true), json!(false))),
            "the GPU health check (DCGM diagnostic) failed"
        );
        assert_eq!(
            failure(&outcome("serving.ttft_p95_ms", "le", json!(500), json!(612.4))),
            "the time to the first token (95th percentile) was 612 ms against a target of ≤ 500 ms"
        );
        assert_eq!(
            failure(&outcome("serving.error_rate", "le", json!(0.01), json!(0.034))),
            "the share of requests that failed was 3.4 % against a target of ≤ 1 %"
        );
    }

    #[test]
    fn facts_lose_their_keys_and_raw_decimals() {
        assert_eq!(
            fact_label("dcgm.diag.passed eq true"),
            "The GPU health check (DCGM diagnostic) (target = yes)"
        );
        assert_eq!(fact_value("dcgm.diag.passed eq true", "false"), "no");
        assert_eq!(fact_label("utilization"), "Busy share of paid GPU hours");
        assert_eq!(fact_value("utilization", "0.7768"), "77.7 %");
        assert_eq!(
            fact_value("cost per completed job", "0.0490068292682926829268292683 USD"),
            "0.049 USD"
        );
        assert_eq!(
            fact_label("gpu.count ge 8.0"),
            "The number of GPUs the server shows (target ≥ 8)"
        );
        assert_eq!(
            fact_label("serving.kv_cache_usage_max_pct ≥ 90"),
            "The fullest the KV cache got ≥ 90"
        );
        let missing = plain_fact(&Fact {
            label: "stage 3".into(),
            value: "serving.ttft_p95_ms, serving.error_rate".into(),
            link: None,
        });
        assert_eq!(missing.label, "Stage 3");
        assert_eq!(
            missing.value,
            "the time to the first token (95th percentile); the share of requests that failed"
        );
    }

    #[test]
    fn lists_join_with_and() {
        assert_eq!(joined(&["a".into()]), "a");
        assert_eq!(joined(&["a".into(), "b".into(), "c".into()]), "a, b and c");
        let six: Vec<String> = ["a", "b", "c", "d", "e", "f"].map(String::from).to_vec();
        assert_eq!(joined_few(&six), "a, b, c and 3 more");
        assert_eq!(joined_few(&six[..4]), "a, b, c and d");
    }
}
