//! Evaluation of a card over the newest evidence (decision.md "Criterion status"). Pure: no I/O.
//!
//! * A criterion reads the newest metric with its key **among evidence of its own stage**
//!   (newest by `collected_at`, ties by `received_at`, then by id — ids are UUIDv7, so upload order).
//!   A stage-3 latency is never satisfied by a stage-1 smoke figure.
//! * Except the serving figures a load test measures (latency quantiles, throughput, error rate,
//!   attainment): at stage 3 they come from the trial's **operating point** (`evidence::load_points`),
//!   whatever order its load points arrived in. A figure the operating point lacks may come from
//!   evidence that is no load test (a `/metrics` scrape), never from another load point. When no
//!   request of the operating point completed, such a criterion fails: "no request completed".
//! * Derived keys (`ledger.cost_per_job`, `manifest.lint_errors`) ignore the evidence and the stage:
//!   their value comes from the `derived` map the caller computed.
//! * No value → `missing`. A value of the wrong type → `fail` with a reason, never `missing`.
//! * A stage fails when any required criterion fails, passes when every required criterion passes
//!   (a stage without required criteria passes), and is `missing` otherwise.

use std::{
    cmp::Ordering,
    collections::{BTreeMap, HashMap},
};

use serde::Serialize;
use serde_json::Value;
use uuid::Uuid;

use super::model::{is_derived, link_rank, stage_name, Criterion, Threshold, STAGES};
use crate::evidence::load_points::{is_load_test_key, LoadPoint, NOTHING_COMPLETED};
/// One metric value as evidence gave it (read by `evidence::service::newest_metrics`).
pub use crate::evidence::model::Observation;

/// The load test a trial's stage-3 serving criteria read.
#[derive(Debug, Clone, Copy)]
pub struct OperatingLoad<'a> {
    /// The operating point.
    pub point: &'a LoadPoint,
    /// Every load-test upload of the trial: their figures count only through the operating point.
    pub load_tests: &'a [Uuid],
}

/// The newest value of each (key, stage), as one SQL query returns it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MetricsSnapshot {
    newest: BTreeMap<(String, u8), Observation>,
}

impl MetricsSnapshot {
    /// Keeps the newest observation per (key, stage), whatever order they come in.
    pub fn from_observations(observations: impl IntoIterator<Item = Observation>) -> Self {
        let mut newest: BTreeMap<(String, u8), Observation> = BTreeMap::new();
        for o in observations {
            let slot = (o.key.clone(), o.stage);
            match newest.get(&slot) {
                Some(current) if !o.newer_than(current) => {}
                _ => {
                    newest.insert(slot, o);
                }
            }
        }
        Self { newest }
    }

    pub fn get(&self, key: &str, stage: u8) -> Option<&Observation> {
        self.newest.get(&(key.to_owned(), stage))
    }

    pub fn len(&self) -> usize {
        self.newest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.newest.is_empty()
    }
}

/// A criterion's status: the one type the review's decision reads too.
pub use crate::criteria::Status;

/// A criterion with its status, the value that decided it and where the value came from.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct EvaluatedCriterion {
    #[serde(flatten)]
    pub criterion: Criterion,
    pub status: Status,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub evidence_id: Option<Uuid>,
    /// Why a criterion fails on a wrong-typed value, or a hint for a missing one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// `evidence` or `derived`.
    pub source: &'static str,
}

/// One stage of the card: its status and how many of its criteria passed, failed or lack evidence.
#[derive(Debug, Clone, PartialEq, Serialize, utoipa::ToSchema)]
pub struct StageEvaluation {
    pub stage: u8,
    pub name: &'static str,
    pub status: Status,
    pub passed: usize,
    pub failed: usize,
    pub missing: usize,
    /// Non-required criteria that fail: shown, but they do not fail the stage.
    pub advisory_failures: usize,
}

/// Every criterion and stage of a card, evaluated.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CardEvaluation {
    pub criteria: Vec<EvaluatedCriterion>,
    pub stages: Vec<StageEvaluation>,
}

impl CardEvaluation {
    /// Every required criterion passes.
    pub fn accepted(&self) -> bool {
        self.criteria
            .iter()
            .filter(|c| c.criterion.required && c.status != Status::NotApplicable)
            .all(|c| c.status == Status::Pass)
    }

    pub fn stage(&self, stage: u8) -> Option<&StageEvaluation> {
        self.stages.iter().find(|s| s.stage == stage)
    }
}

/// Compares `value` with the criterion's threshold: `Ok(pass?)`, or `Err(reason)` for a value of
/// the wrong type.
pub fn compare(c: &Criterion, value: &Value) -> Result<bool, String> {
    let wrong = |expected: &str| {
        Err(format!(
            "{} is {}, but the threshold is {expected}",
            c.key,
            describe(value),
        ))
    };
    match (&c.threshold, value) {
        (Threshold::Number(t), Value::Number(v)) => {
            let v = v.as_f64().ok_or_else(|| format!("{} is not a finite number", c.key))?;
            Ok(v.partial_cmp(t).is_some_and(|o| c.op.holds(o)))
        }
        (Threshold::Bool(t), Value::Bool(v)) => Ok(c.op.holds(v.cmp(t))),
        (Threshold::Text(t), Value::String(v)) => {
            if c.op.is_ordering() {
                // Only the link-class scale is ordered (validation allows nothing else).
                match (link_rank(v), link_rank(t)) {
                    (Some(v), Some(t)) => Ok(c.op.holds(v.cmp(&t))),
                    _ => Err(format!("{v:?} is not a link class ({} {} {t})", c.key, c.op.symbol())),
                }
            } else if link_rank(t).is_some() && link_rank(v).is_some() {
                Ok(c.op.holds(link_rank(v).cmp(&link_rank(t))))
            } else {
                Ok(c.op.holds(v.as_str().cmp(t.as_str())))
            }
        }
        (Threshold::Number(_), _) => wrong("a number"),
        (Threshold::Bool(_), _) => wrong("a boolean"),
        (Threshold::Text(_), _) => wrong("a string"),
    }
}

fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => format!("a boolean ({b})"),
        Value::Number(n) => format!("a number ({n})"),
        Value::String(s) => format!("a string ({s:?})"),
        Value::Array(a) => format!("a list of {}", a.len()),
        Value::Object(_) => "an object".into(),
    }
}

fn missing_hint(c: &Criterion) -> String {
    if is_derived(&c.key) {
        return format!("{} has not been computed yet", c.key);
    }
    let mut s = format!("no stage-{} evidence gives {} yet", c.stage, c.key);
    if c.key.starts_with("serving.") && c.key.contains("_p95_") {
        s.push_str(" (vllm bench serve writes p95 only with --metric-percentiles including 95)");
    }
    s
}

/// Evaluates one criterion.
pub fn evaluate_one(c: &Criterion, snapshot: &MetricsSnapshot, derived: &HashMap<String, Value>) -> EvaluatedCriterion {
    evaluate_one_at(c, snapshot, derived, None)
}

/// Evaluates one criterion; stage-3 load-test figures from `load`'s operating point.
pub fn evaluate_one_at(
    c: &Criterion,
    snapshot: &MetricsSnapshot,
    derived: &HashMap<String, Value>,
    load: Option<&OperatingLoad<'_>>,
) -> EvaluatedCriterion {
    let from_snapshot = |o: &Observation| (Some(o.value.clone()), Some(o.evidence_id), "evidence");
    let load_test = load.filter(|_| c.stage == 3 && is_load_test_key(&c.key));
    let (value, evidence_id, source) = if is_derived(&c.key) {
        (derived.get(&c.key).cloned(), None, "derived")
    } else if let Some(l) = load_test {
        match l.point.metrics.get(&c.key) {
            Some(v) => (Some(v.clone()), Some(l.point.evidence_id), "evidence"),
            None if l.point.nothing_completed() => {
                return EvaluatedCriterion {
                    criterion: c.clone(),
                    status: Status::Fail,
                    value: None,
                    evidence_id: Some(l.point.evidence_id),
                    reason: Some(NOTHING_COMPLETED.into()),
                    source: "evidence",
                };
            }
            // Another figure of the same key counts only when it is not a load test's.
            None => match snapshot.get(&c.key, c.stage) {
                Some(o) if !l.load_tests.contains(&o.evidence_id) => from_snapshot(o),
                _ => (None, None, "evidence"),
            },
        }
    } else {
        match snapshot.get(&c.key, c.stage) {
            Some(o) => from_snapshot(o),
            None => (None, None, "evidence"),
        }
    };
    let (status, reason) = match &value {
        None | Some(Value::Null) if load_test.is_some() => (
            Status::Missing,
            Some(format!(
                "{}; the operating point's load test does not give it",
                missing_hint(c)
            )),
        ),
        None | Some(Value::Null) => (Status::Missing, Some(missing_hint(c))),
        Some(v) => match compare(c, v) {
            Ok(true) => (Status::Pass, None),
            Ok(false) => (Status::Fail, None),
            Err(reason) => (Status::Fail, Some(reason)),
        },
    };
    EvaluatedCriterion {
        criterion: c.clone(),
        status,
        value: value.filter(|v| !v.is_null()),
        evidence_id,
        reason,
        source,
    }
}

/// Evaluates a card: each criterion over the snapshot (derived keys from `derived`), then each stage.
pub fn evaluate(
    criteria: &[Criterion],
    snapshot: &MetricsSnapshot,
    derived: &HashMap<String, Value>,
) -> CardEvaluation {
    evaluate_with(criteria, snapshot, derived, &|_| false)
}

/// [`evaluate`], with the criteria that do not apply to the allocation under test (collectives on
/// one GPU) marked `n/a`: they neither pass, fail nor go missing.
pub fn evaluate_with(
    criteria: &[Criterion],
    snapshot: &MetricsSnapshot,
    derived: &HashMap<String, Value>,
    not_applicable: &dyn Fn(&Criterion) -> bool,
) -> CardEvaluation {
    evaluate_at(criteria, snapshot, derived, None, not_applicable)
}

/// [`evaluate_with`], the stage-3 load-test figures read from `load`'s operating point.
pub fn evaluate_at(
    criteria: &[Criterion],
    snapshot: &MetricsSnapshot,
    derived: &HashMap<String, Value>,
    load: Option<&OperatingLoad<'_>>,
    not_applicable: &dyn Fn(&Criterion) -> bool,
) -> CardEvaluation {
    let criteria: Vec<EvaluatedCriterion> = criteria
        .iter()
        .map(|c| {
            let mut e = evaluate_one_at(c, snapshot, derived, load);
            if not_applicable(c) {
                e.status = Status::NotApplicable;
            }
            e
        })
        .collect();
    let stages = STAGES
        .iter()
        .map(|(stage, _)| stage_status(*stage, &criteria))
        .collect();
    CardEvaluation { criteria, stages }
}

/// A stage's status from its criteria.
pub fn stage_status(stage: u8, criteria: &[EvaluatedCriterion]) -> StageEvaluation {
    let mine: Vec<&EvaluatedCriterion> = criteria.iter().filter(|c| c.criterion.stage == stage).collect();
    let required = || mine.iter().filter(|c| c.criterion.required);
    let count = |s: Status| required().filter(|c| c.status == s).count();
    let (passed, failed, missing) = (count(Status::Pass), count(Status::Fail), count(Status::Missing));
    let status = if failed > 0 {
        Status::Fail
    } else if missing > 0 {
        Status::Missing
    } else {
        Status::Pass
    };
    StageEvaluation {
        stage,
        name: stage_name(stage),
        status,
        passed,
        failed,
        missing,
        advisory_failures: mine
            .iter()
            .filter(|c| !c.criterion.required && c.status == Status::Fail)
            .count(),
    }
}

/// Orders statuses worst first (fail, missing, pass), for summaries.
pub fn worst(a: Status, b: Status) -> Status {
    let rank = |s: Status| match s {
        Status::Fail => 0,
        Status::Missing => 1,
        Status::Pass | Status::NotApplicable => 2,
    };
    match rank(a).cmp(&rank(b)) {
        Ordering::Greater => b,
        _ => a,
    }
}

#[cfg(test)]
mod tests {
    use chrono::{TimeZone, Utc};
    use serde_json::json;

    use super::*;
    use crate::acceptance::model::{Op, COST_PER_JOB};

    fn c(key: &str, op: Op, threshold: Threshold, stage: u8) -> Criterion {
        Criterion {
            key: key.into(),
            op,
            threshold,
            unit: String::new(),
            stage,
            required: true,
            why: None,
        }
    }

    fn obs(key: &str, stage: u8, value: Value, collected_min: u32, received_min: u32, id: u128) -> Observation {
        Observation {
            key: key.into(),
            stage,
            value,
            evidence_id: Uuid::from_u128(id),
            collected_at: Utc.with_ymd_and_hms(2026, 11, 29, 10, collected_min, 0).unwrap(),
            received_at: Utc.with_ymd_and_hms(2026, 11, 29, 11, received_min, 0).unwrap(),
        }
    }

    #[test]
    fn the_newest_evidence_wins_by_collected_at_then_received_at() {
        let snap = MetricsSnapshot::from_observations([
            obs("serving.ttft_p95_ms", 3, json!(900.0), 5, 1, 1),
            obs("serving.ttft_p95_ms", 3, json!(400.0), 10, 0, 2), // collected later, uploaded earlier
            obs("serving.ttft_p95_ms", 3, json!(800.0), 1, 30, 3),
            obs("serving.ttft_p95_ms", 1, json!(10.0), 50, 50, 4), // another stage
        ]);
        let card = [c("serving.ttft_p95_ms", Op::Le, Threshold::Number(500.0), 3)];
        let e = evaluate(&card, &snap, &HashMap::new());
        assert_eq!(e.criteria[0].status, Status::Pass);
        assert_eq!(e.criteria[0].value, Some(json!(400.0)));
        assert_eq!(e.criteria[0].evidence_id, Some(Uuid::from_u128(2)));

        // Same collected_at: the later upload wins.
        let snap = MetricsSnapshot::from_observations([
            obs("dcgm.diag.passed", 1, json!(false), 5, 9, 7),
            obs("dcgm.diag.passed", 1, json!(true), 5, 3, 8),
        ]);
        let card = [c("dcgm.diag.passed", Op::Eq, Threshold::Bool(true), 1)];
        let e = evaluate(&card, &snap, &HashMap::new());
        assert_eq!(
            (e.criteria[0].status, e.criteria[0].evidence_id),
            (Status::Fail, Some(Uuid::from_u128(7)))
        );
    }

    #[test]
    fn a_value_of_the_wrong_type_fails_with_a_reason() {
        let snap = MetricsSnapshot::from_observations([
            obs("probe.output_format", 2, json!("yes"), 1, 1, 1),
            obs("gpu.count", 1, json!(true), 1, 1, 2),
            obs("x.level", 2, json!(3), 1, 1, 3),
        ]);
        let card = [
            c("probe.output_format", Op::Eq, Threshold::Bool(true), 2),
            c("gpu.count", Op::Ge, Threshold::Number(1.0), 1),
            c("x.level", Op::Eq, Threshold::Text("3".into()), 2),
        ];
        let e = evaluate(&card, &snap, &HashMap::new());
        for ec in &e.criteria {
            assert_eq!(ec.status, Status::Fail, "{ec:?}");
            assert!(ec.reason.as_deref().unwrap().contains("but the threshold is"), "{ec:?}");
        }
        assert_eq!(e.criteria[0].value, Some(json!("yes")), "the offending value is shown");
    }

    #[test]
    fn missing_evidence_is_missing_and_stages_follow_required_criteria() {
        let snap = MetricsSnapshot::from_observations([
            obs("gpu.count", 1, json!(8), 1, 1, 1),
            obs("serving.ttft_p95_ms", 1, json!(100), 1, 1, 2), // wrong stage for the stage-3 criterion
            obs("probe.alert_fired", 4, json!(false), 1, 1, 3),
        ]);
        let mut advisory = c("probe.alert_fired", Op::Eq, Threshold::Bool(true), 4);
        advisory.required = false;
        let card = [
            c("gpu.count", Op::Ge, Threshold::Number(8.0), 1),
            c("serving.ttft_p95_ms", Op::Le, Threshold::Number(500.0), 3),
            advisory,
        ];
        let e = evaluate(&card, &snap, &HashMap::new());
        assert_eq!(e.criteria[1].status, Status::Missing);
        assert!(e.criteria[1]
            .reason
            .as_deref()
            .unwrap()
            .contains("--metric-percentiles"));
        assert_eq!(e.stage(1).unwrap().status, Status::Pass);
        assert_eq!(e.stage(3).unwrap().status, Status::Missing);
        let s4 = e.stage(4).unwrap();
        assert_eq!(
            (s4.status, s4.advisory_failures),
            (Status::Pass, 1),
            "an advisory failure does not fail a stage"
        );
        assert_eq!(e.stage(2).unwrap().status, Status::Pass, "no required criteria");
        assert!(!e.accepted());
    }

    #[test]
    fn a_failing_required_criterion_fails_its_stage() {
        let snap = MetricsSnapshot::from_observations([
            obs("nccl.wrong", 1, json!(2), 1, 1, 1),
            obs("topo.worst_link", 1, json!("NV18"), 1, 1, 2),
        ]);
        let card = [
            c("nccl.wrong", Op::Eq, Threshold::Number(0.0), 1),
            c("topo.worst_link", Op::Le, Threshold::Text("NV#".into()), 1),
            c("dcgm.diag.passed", Op::Eq, Threshold::Bool(true), 1),
        ];
        let e = evaluate(&card, &snap, &HashMap::new());
        assert_eq!(e.criteria[1].status, Status::Pass, "NV18 is an NVLink pair");
        let s1 = e.stage(1).unwrap();
        assert_eq!((s1.status, s1.failed, s1.passed, s1.missing), (Status::Fail, 1, 1, 1));
    }

    #[test]
    fn link_classes_compare_on_their_scale() {
        let card = c("topo.worst_link", Op::Le, Threshold::Text("NV#".into()), 1);
        assert_eq!(compare(&card, &json!("SYS")), Ok(false));
        assert_eq!(compare(&card, &json!("X")), Ok(true));
        assert!(compare(&card, &json!("weird")).is_err());
    }

    #[test]
    fn derived_keys_come_from_the_map_not_the_evidence() {
        let snap = MetricsSnapshot::from_observations([obs(COST_PER_JOB, 5, json!(0.0001), 1, 1, 1)]);
        let card = [c(COST_PER_JOB, Op::Le, Threshold::Number(0.004), 5)];
        let e = evaluate(&card, &snap, &HashMap::new());
        assert_eq!(
            e.criteria[0].status,
            Status::Missing,
            "evidence cannot claim a derived figure"
        );
        let derived = HashMap::from([(COST_PER_JOB.to_owned(), json!(0.005))]);
        let e = evaluate(&card, &snap, &derived);
        assert_eq!((e.criteria[0].status, e.criteria[0].source), (Status::Fail, "derived"));
        assert_eq!(e.criteria[0].evidence_id, None);
    }

    #[test]
    fn worst_status() {
        assert_eq!(worst(Status::Pass, Status::Missing), Status::Missing);
        assert_eq!(worst(Status::Fail, Status::Missing), Status::Fail);
    }
}
