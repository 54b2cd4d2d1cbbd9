//! Across trials (decision.md "Across trials"): which trial to recommend, which is closest when none
//! is accepted, what a re-run changed, and one digest over every trial. Pure: no I/O.

use std::cmp::Ordering;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::decision::{CriterionOutcome, Status};

/// What the comparison reads of one trial.
#[derive(Debug, Clone)]
pub struct TrialStanding {
    pub trial_id: Uuid,
    pub position: i32,
    pub accepted: bool,
    pub cost_per_job: Option<Decimal>,
    /// Cost per million output tokens at the SLO, when it is known.
    pub cost_per_million_at_slo: Option<Decimal>,
    pub gpus: u32,
    /// Required criteria that fail.
    pub failing_required: usize,
    /// Required criteria without evidence.
    pub missing_required: usize,
}

/// The recommended trial, or (when no trial is accepted) the closest one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    pub recommended: Option<Uuid>,
    /// With none accepted: the trial with the fewest failing required criteria (then fewest
    /// missing), so the page can say what it lacks.
    pub closest: Option<Uuid>,
}

/// Lower is better; an unknown figure sorts after every known one.
fn by_known(a: Option<Decimal>, b: Option<Decimal>) -> Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.cmp(&b),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
}

/// Among accepted trials, the lowest cost per job; ties go to the lower cost per million output
/// tokens at the SLO, then to fewer GPUs, then to the earlier trial.
pub fn recommend(trials: &[TrialStanding]) -> Recommendation {
    let recommended = trials
        .iter()
        .filter(|t| t.accepted)
        .min_by(|a, b| {
            by_known(a.cost_per_job, b.cost_per_job)
                .then_with(|| by_known(a.cost_per_million_at_slo, b.cost_per_million_at_slo))
                .then_with(|| a.gpus.cmp(&b.gpus))
                .then_with(|| a.position.cmp(&b.position))
        })
        .map(|t| t.trial_id);
    let closest = match recommended {
        Some(_) => None,
        None => trials
            .iter()
            .min_by(|a, b| {
                a.failing_required
                    .cmp(&b.failing_required)
                    .then_with(|| a.missing_required.cmp(&b.missing_required))
                    .then_with(|| a.position.cmp(&b.position))
            })
            .map(|t| t.trial_id),
    };
    Recommendation { recommended, closest }
}

/// One criterion between a trial and the trial it re-runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Change {
    pub key: String,
    pub stage: u8,
    pub before: Option<Value>,
    pub after: Option<Value>,
    /// `better`, `worse`, `same`, `new` (no value before) or `gone` (no value now).
    pub verdict: &'static str,
}

/// What got better or worse since the trial this one re-runs, criterion by criterion. A status
/// change decides (fail → pass is better); with the same status, a number moves in the direction
/// the criterion's operator prefers (`lt`/`le`: lower is better; `gt`/`ge`: higher is better).
pub fn rerun_changes(before: &[CriterionOutcome], after: &[CriterionOutcome]) -> Vec<Change> {
    let rank = |s: Status| match s {
        Status::Fail => 0,
        Status::Missing | Status::NotApplicable => 1,
        Status::Pass => 2,
    };
    after
        .iter()
        .map(|now| {
            let then = before.iter().find(|b| b.key == now.key && b.stage == now.stage);
            let verdict = match (then.and_then(|t| t.value.as_ref()), now.value.as_ref()) {
                (None, None) => "same",
                (None, Some(_)) => "new",
                (Some(_), None) => "gone",
                (Some(b), Some(a)) => {
                    let then_status = then.map(|t| t.status).unwrap_or(Status::Missing);
                    match rank(now.status).cmp(&rank(then_status)) {
                        Ordering::Greater => "better",
                        Ordering::Less => "worse",
                        Ordering::Equal => match (b.as_f64(), a.as_f64()) {
                            (Some(b), Some(a)) if a == b => "same",
                            (Some(b), Some(a)) => {
                                let higher_is_better = matches!(now.op.as_str(), "gt" | "ge");
                                let lower_is_better = matches!(now.op.as_str(), "lt" | "le");
                                if (higher_is_better && a > b) || (lower_is_better && a < b) {
                                    "better"
                                } else if higher_is_better || lower_is_better {
                                    "worse"
                                } else {
                                    "same"
                                }
                            }
                            _ if a == b => "same",
                            _ => "same",
                        },
                    }
                }
            };
            Change {
                key: now.key.clone(),
                stage: now.stage,
                before: then.and_then(|t| t.value.clone()),
                after: now.value.clone(),
                verdict,
            }
        })
        .collect()
}

/// The digest an approval pins. With one trial it is that trial's own digest (so approvals made
/// before trials existed stay current); with several, a hash over every trial's id and digest in
/// trial order, so new evidence on any trial makes an approval stale.
pub fn overall_digest(trials: &[(Uuid, String)]) -> String {
    match trials {
        [(_, only)] => only.clone(),
        _ => {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            for (id, digest) in trials {
                h.update(id.as_bytes());
                h.update(digest.as_bytes());
            }
            h.finalize().iter().map(|b| format!("{b:02x}")).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn standing(position: i32, accepted: bool, cost: Option<i64>, gpus: u32) -> TrialStanding {
        TrialStanding {
            trial_id: Uuid::from_u128(position as u128),
            position,
            accepted,
            cost_per_job: cost.map(|c| Decimal::new(c, 4)),
            cost_per_million_at_slo: None,
            gpus,
            failing_required: 0,
            missing_required: 0,
        }
    }

    #[test]
    fn the_cheapest_accepted_trial_is_recommended() {
        let trials = [
            standing(1, true, Some(90), 8),
            standing(2, true, Some(60), 2),
            standing(3, false, Some(10), 1),
        ];
        let r = recommend(&trials);
        assert_eq!(
            r.recommended,
            Some(Uuid::from_u128(2)),
            "trial 3 is cheaper but not accepted"
        );
        assert_eq!(r.closest, None);
    }

    #[test]
    fn ties_go_to_cost_per_million_tokens_then_fewer_gpus() {
        let mut a = standing(1, true, Some(50), 8);
        let mut b = standing(2, true, Some(50), 2);
        assert_eq!(
            recommend(&[a.clone(), b.clone()]).recommended,
            Some(b.trial_id),
            "fewer GPUs"
        );
        a.cost_per_million_at_slo = Some(Decimal::new(120, 2));
        b.cost_per_million_at_slo = Some(Decimal::new(139, 2));
        assert_eq!(
            recommend(&[a.clone(), b]).recommended,
            Some(a.trial_id),
            "the cheaper tokens win before the GPU count"
        );
        let c = standing(3, true, None, 1);
        assert_eq!(
            recommend(&[c, standing(4, true, Some(9999), 16)]).recommended,
            Some(Uuid::from_u128(4)),
            "a known cost beats an unknown one"
        );
    }

    #[test]
    fn with_none_accepted_the_closest_is_named() {
        let mut a = standing(1, false, Some(10), 8);
        a.failing_required = 2;
        let mut b = standing(2, false, None, 2);
        b.failing_required = 0;
        b.missing_required = 3;
        let mut c = standing(3, false, None, 2);
        c.failing_required = 0;
        c.missing_required = 1;
        let r = recommend(&[a, b, c]);
        assert_eq!(r.recommended, None);
        assert_eq!(r.closest, Some(Uuid::from_u128(3)), "no failures and the fewest gaps");
    }

    fn outcome(key: &str, op: &str, status: Status, value: Option<Value>) -> CriterionOutcome {
        CriterionOutcome {
            key: key.into(),
            op: op.into(),
            threshold: json!(0),
            stage: 3,
            required: true,
            status,
            value,
            evidence_id: None,
        }
    }

    #[test]
    fn a_rerun_says_what_got_better_or_worse() {
        let before = [
            outcome("serving.ttft_p95_ms", "le", Status::Pass, Some(json!(180.0))),
            outcome("serving.output_tokens_per_s", "ge", Status::Fail, Some(json!(900.0))),
            outcome("dcgm.diag.passed", "eq", Status::Pass, Some(json!(true))),
        ];
        let after = [
            outcome("serving.ttft_p95_ms", "le", Status::Pass, Some(json!(240.0))),
            outcome("serving.output_tokens_per_s", "ge", Status::Pass, Some(json!(1400.0))),
            outcome("dcgm.diag.passed", "eq", Status::Pass, Some(json!(true))),
            outcome("nccl.busbw_peak_gbps", "ge", Status::Missing, None),
        ];
        let verdicts: Vec<&str> = rerun_changes(&before, &after).iter().map(|c| c.verdict).collect();
        assert_eq!(verdicts, ["worse", "better", "same", "same"]);
    }

    #[test]
    fn one_trial_keeps_its_own_digest() {
        let a = (Uuid::from_u128(1), "aa".to_owned());
        let b = (Uuid::from_u128(2), "bb".to_owned());
        assert_eq!(overall_digest(std::slice::from_ref(&a)), "aa");
        let both = overall_digest(&[a.clone(), b.clone()]);
        assert_eq!(both.len(), 64);
        assert_ne!(both, overall_digest(&[a, (b.0, "bc".to_owned())]));
    }
}
