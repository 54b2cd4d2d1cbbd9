//! Across trials (decision.md "Across trials"): which trial to recommend, which is closest when none
//! can be, what a re-run changed, and one digest over every trial. Pure: no I/O.

use std::cmp::Ordering;

use rust_decimal::Decimal;
use serde::Serialize;
use serde_json::Value;

use super::{
    cost_at_slo::MoneyFacts,
    decision::{CriterionOutcome, Status, Verdict},
};
use crate::ids::TrialId;

/// What the comparison reads of one trial.
#[derive(Debug, Clone)]
pub struct TrialStanding {
    pub trial_id: TrialId,
    pub position: i32,
    pub accepted: bool,
    /// The trial's own decision: only reserve, dedicate or expand can be recommended.
    pub decision: Verdict,
    /// The monthly cost of carrying the brief's expected peak at the SLO, when known.
    pub monthly_cost: Option<Decimal>,
    /// Cost per million output tokens at the SLO, when it is known.
    pub cost_per_million_at_slo: Option<Decimal>,
    pub cost_per_job: Option<Decimal>,
    /// GPUs it would take (for the peak when known, else the allocation's).
    pub gpus: u32,
    /// Required criteria that fail.
    pub failing_required: usize,
    /// Required criteria without evidence.
    pub missing_required: usize,
}

/// The recommended trial, or (when none can be recommended) the closest one.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recommendation {
    pub recommended: Option<TrialId>,
    /// With none recommendable: the trial with the fewest failing required criteria (then fewest
    /// missing), so the page can say what it lacks.
    pub closest: Option<TrialId>,
}

/// A trial can be recommended only when it is accepted and its own decision keeps or commits to
/// it: a trial stopped by any rule (3, 6b, 6c …) never is, however cheap.
pub fn recommendable(t: &TrialStanding) -> bool {
    t.accepted && matches!(t.decision, Verdict::Reserve | Verdict::Dedicate | Verdict::Expand)
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

/// The cost a trial is ranked by, best measure first: the monthly cost of carrying the expected
/// peak at the SLO; else the cost per million output tokens at the SLO; else the cost per job.
/// (Which measure, then its figure: a trial known by a better measure ranks first.)
fn cost_per_unit_of_work(t: &TrialStanding) -> (u8, Option<Decimal>) {
    [t.monthly_cost, t.cost_per_million_at_slo, t.cost_per_job]
        .into_iter()
        .zip(0u8..)
        .find_map(|(cost, measure)| cost.map(|c| (measure, Some(c))))
        .unwrap_or((3, None))
}

/// Among recommendable trials, the cheapest per unit of work the brief asks for: the lowest monthly
/// cost of carrying the expected peak at the SLO; else the lowest cost per million output tokens
/// at the SLO; else the lowest cost per job; ties go to fewer GPUs (decision.md: never to another
/// measure), then to the earlier trial. A cheaper hourly rate never wins by itself.
pub fn recommend(trials: &[TrialStanding]) -> Recommendation {
    let recommended = trials
        .iter()
        .filter(|t| recommendable(t))
        .min_by(|a, b| {
            let ((a_measure, a_cost), (b_measure, b_cost)) = (cost_per_unit_of_work(a), cost_per_unit_of_work(b));
            a_measure
                .cmp(&b_measure)
                .then_with(|| by_known(a_cost, b_cost))
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

/// A re-run's change is "same" within this share of the earlier value…
pub const SAME_WITHIN_SHARE: f64 = 0.02;
/// …and, for a latency, within this many milliseconds.
pub const SAME_WITHIN_MS: f64 = 1.0;

/// Whether `before` → `after` moved enough to call it better or worse: beyond 2 % of the earlier
/// value, and beyond 1 ms for a latency.
pub fn moved(key: &str, before: f64, after: f64) -> bool {
    let delta = (after - before).abs();
    let beyond_share = delta > SAME_WITHIN_SHARE * before.abs();
    let beyond_ms = !key.ends_with("_ms") || delta > SAME_WITHIN_MS;
    beyond_share && beyond_ms
}

/// One criterion (or, at stage 0, one money figure) between a trial and the trial it re-runs.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct Change {
    pub key: String,
    /// The criterion's stage; 0 for the capacity and money rows.
    pub stage: u8,
    pub before: Option<Value>,
    pub after: Option<Value>,
    /// `better`, `worse`, `same`, `new` (no value before) or `gone` (no value now).
    pub verdict: &'static str,
}

/// What got better or worse since the trial this one re-runs, criterion by criterion. A number
/// moves in the direction the criterion's operator prefers (`lt`/`le`: lower is better; `gt`/`ge`:
/// higher is better), and only beyond 2 % (and 1 ms for a latency): a smaller move is "same", even
/// where it crosses the threshold (500.5 → 499.5 ms against 500 is noise, not an improvement: the
/// criterion's own status says pass or fail). Values that are not numbers compare by status.
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
                    let higher_is_better = matches!(now.op.as_str(), "gt" | "ge");
                    let lower_is_better = matches!(now.op.as_str(), "lt" | "le");
                    match (b.as_f64(), a.as_f64()) {
                        (Some(b), Some(a)) if higher_is_better || lower_is_better => {
                            if !moved(&now.key, b, a) {
                                "same"
                            } else if (higher_is_better && a > b) || (lower_is_better && a < b) {
                                "better"
                            } else {
                                "worse"
                            }
                        }
                        _ => {
                            let then_status = then.map(|t| t.status).unwrap_or(Status::Missing);
                            match rank(now.status).cmp(&rank(then_status)) {
                                Ordering::Greater => "better",
                                Ordering::Less => "worse",
                                Ordering::Equal => "same",
                            }
                        }
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

/// The capacity and money rows of a re-run's comparison: capacity at the SLO (higher is better),
/// cost per million output tokens at the SLO and the monthly cost at the peak (lower is better),
/// with the same 2 % rule.
pub fn money_changes(before: Option<&MoneyFacts>, after: Option<&MoneyFacts>) -> Vec<Change> {
    use rust_decimal::prelude::ToPrimitive;
    let dec = |d: Option<Decimal>| d.and_then(|d| d.to_f64());
    let rows: [(&str, bool, Option<f64>, Option<f64>); 3] = [
        (
            "capacity_at_slo_rps",
            true,
            before.and_then(|m| m.capacity_at_slo_rps),
            after.and_then(|m| m.capacity_at_slo_rps),
        ),
        (
            "cost_per_million_output_tokens_at_slo",
            false,
            dec(before.and_then(|m| m.cost_per_million_output_tokens_at_slo)),
            dec(after.and_then(|m| m.cost_per_million_output_tokens_at_slo)),
        ),
        (
            "monthly_cost",
            false,
            dec(before.and_then(|m| m.monthly_cost)),
            dec(after.and_then(|m| m.monthly_cost)),
        ),
    ];
    rows.into_iter()
        .map(|(key, higher_is_better, b, a)| Change {
            key: key.to_owned(),
            stage: 0,
            before: b.map(Value::from),
            after: a.map(Value::from),
            verdict: match (b, a) {
                (None, None) => "same",
                (None, Some(_)) => "new",
                (Some(_), None) => "gone",
                (Some(b), Some(a)) if !moved(key, b, a) => "same",
                (Some(b), Some(a)) if (a > b) == higher_is_better => "better",
                _ => "worse",
            },
        })
        .collect()
}

/// The digest an approval pins. With one trial it is that trial's own digest (so approvals made
/// before trials existed stay current); with several, a hash over every trial's id and digest in
/// trial order, so new evidence on any trial makes an approval stale.
pub fn overall_digest(trials: &[(TrialId, String)]) -> String {
    match trials {
        [(_, only)] => only.clone(),
        _ => {
            use sha2::{Digest, Sha256};
            let mut h = Sha256::new();
            for (id, digest) in trials {
                h.update(id.as_uuid().as_bytes());
                h.update(digest.as_bytes());
            }
            h.finalize().iter().map(|b| format!("{b:02x}")).collect()
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use uuid::Uuid;

    use super::*;

    fn standing(position: i32, accepted: bool, cost: Option<i64>, gpus: u32) -> TrialStanding {
        TrialStanding {
            trial_id: TrialId::from(Uuid::from_u128(position as u128)),
            position,
            accepted,
            decision: if accepted { Verdict::Reserve } else { Verdict::Expand },
            monthly_cost: None,
            cost_per_million_at_slo: None,
            cost_per_job: cost.map(|c| Decimal::new(c, 4)),
            gpus,
            failing_required: 0,
            missing_required: 0,
        }
    }

    #[test]
    fn a_stopped_trial_is_never_recommended_however_cheap() {
        let mut cheap = standing(1, true, Some(10), 1);
        cheap.decision = Verdict::Stop;
        let dear = standing(2, true, Some(90), 8);
        let r = recommend(&[cheap, dear.clone()]);
        assert_eq!(r.recommended, Some(dear.trial_id));
    }

    #[test]
    fn the_monthly_cost_at_the_peak_decides_before_the_cost_per_job() {
        let mut a = standing(1, true, Some(10), 2);
        a.monthly_cost = Some(Decimal::from(12_000));
        let mut b = standing(2, true, Some(90), 8);
        b.monthly_cost = Some(Decimal::from(9_000));
        assert_eq!(recommend(&[a, b.clone()]).recommended, Some(b.trial_id));
    }

    #[test]
    fn a_rerun_calls_small_moves_the_same() {
        assert!(!moved("serving.ttft_p95_ms", 100.0, 101.5), "1.5 % is the same");
        assert!(
            !moved("serving.itl_p95_ms", 20.0, 20.9),
            "0.9 ms is the same though 4.5 %"
        );
        assert!(moved("serving.ttft_p95_ms", 100.0, 103.0));
        assert!(moved("capacity_at_slo_rps", 8.0, 8.4), "5 %");
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
            Some(TrialId::from(Uuid::from_u128(2))),
            "trial 3 is cheaper but not accepted"
        );
        assert_eq!(r.closest, None);
    }

    #[test]
    fn without_a_monthly_cost_the_cost_per_million_tokens_decides_then_fewer_gpus() {
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
            Some(TrialId::from(Uuid::from_u128(4))),
            "a known cost beats an unknown one"
        );
    }

    /// decision.md: the cheapest by the brief's measure; "ties: fewer GPUs", not a second measure.
    #[test]
    fn a_tie_in_the_monthly_cost_goes_to_fewer_gpus_not_to_the_cheaper_tokens() {
        let mut a = standing(1, true, Some(10), 4);
        a.monthly_cost = Some(Decimal::from(10_950));
        a.cost_per_million_at_slo = Some(Decimal::new(100, 2));
        let mut b = standing(2, true, Some(90), 2);
        b.monthly_cost = Some(Decimal::from(10_950));
        b.cost_per_million_at_slo = Some(Decimal::new(150, 2));
        assert_eq!(recommend(&[a, b.clone()]).recommended, Some(b.trial_id));
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
        assert_eq!(
            r.closest,
            Some(TrialId::from(Uuid::from_u128(3))),
            "no failures and the fewest gaps"
        );
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
            reason: None,
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
        // 180 → 182 ms is within 2 %: the same.
        let close = [outcome("serving.ttft_p95_ms", "le", Status::Pass, Some(json!(182.0)))];
        assert_eq!(rerun_changes(&before, &close)[0].verdict, "same");
    }

    /// trials.md: better or worse only beyond 2 % and 1 ms, whatever side of the threshold the two
    /// values fall on (this used to let a change of status decide first).
    #[test]
    fn a_move_within_the_noise_is_the_same_even_across_the_threshold() {
        let before = [outcome("serving.ttft_p95_ms", "le", Status::Fail, Some(json!(500.5)))];
        let after = [outcome("serving.ttft_p95_ms", "le", Status::Pass, Some(json!(499.5)))];
        assert_eq!(rerun_changes(&before, &after)[0].verdict, "same");
        let after = [outcome("serving.ttft_p95_ms", "le", Status::Pass, Some(json!(480.0)))];
        assert_eq!(rerun_changes(&before, &after)[0].verdict, "better");
        // A value that is no number compares by status.
        let before = [outcome("dcgm.diag.passed", "eq", Status::Fail, Some(json!(false)))];
        let after = [outcome("dcgm.diag.passed", "eq", Status::Pass, Some(json!(true)))];
        assert_eq!(rerun_changes(&before, &after)[0].verdict, "better");
    }

    #[test]
    fn one_trial_keeps_its_own_digest() {
        let a = (TrialId::from(Uuid::from_u128(1)), "aa".to_owned());
        let b = (TrialId::from(Uuid::from_u128(2)), "bb".to_owned());
        assert_eq!(overall_digest(std::slice::from_ref(&a)), "aa");
        let both = overall_digest(&[a.clone(), b.clone()]);
        assert_eq!(both.len(), 64);
        assert_ne!(both, overall_digest(&[a, (b.0, "bc".to_owned())]));
    }
}
