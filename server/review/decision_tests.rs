//! Table-driven tests of the decision rules: each rule alone, rule order, every boundary.

use std::collections::BTreeMap;

use rust_decimal::Decimal;
use serde_json::{json, Value};
use uuid::Uuid;

use super::*;

fn dec(s: &str) -> Decimal {
    s.parse().unwrap()
}

fn crit(key: &str, op: &str, threshold: Value, stage: u8, status: Status, value: Option<Value>) -> CriterionOutcome {
    CriterionOutcome {
        key: key.into(),
        op: op.into(),
        threshold,
        stage,
        required: true,
        status,
        value,
        evidence_id: Some(Uuid::nil()),
    }
}

fn pass(key: &str, stage: u8) -> CriterionOutcome {
    crit(key, "eq", json!(true), stage, Status::Pass, Some(json!(true)))
}

/// An accepted single-GPU realtime brief, 80 % utilized, under its cost ceiling.
fn base() -> DecisionInputs {
    DecisionInputs {
        brief: BriefFacts {
            workload_kind: "realtime-inference".into(),
            only_needs_model_output: false,
            needs_host_control: false,
            data_boundary: "private-network".into(),
            max_cost_per_job: Some(dec("0.0100")),
            currency: "USD".into(),
            sized_count: 2,
            current_units: 2,
        },
        criteria: vec![
            pass("dcgm.diag.passed", 1),
            pass("probe.output_format", 2),
            crit(
                "serving.ttft_p95_ms",
                "le",
                json!(500),
                3,
                Status::Pass,
                Some(json!(420)),
            ),
            pass("probe.drain_restart", 4),
        ],
        metrics: BTreeMap::new(),
        ledger: Some(LedgerFacts {
            cost_per_job: Some(dec("0.0080")),
            total: dec("800"),
            accelerator_hours: dec("100"),
            idle_hours: Some(dec("20")),
            totals: BTreeMap::from([("accelerator".into(), dec("700")), ("host".into(), dec("100"))]),
        }),
        money: None,
    }
}

fn metric(inputs: &mut DecisionInputs, key: &str, value: Value) {
    inputs.metrics.insert(
        key.into(),
        MetricFact {
            value,
            evidence_id: Uuid::from_u128(7),
        },
    );
}

/// The rules that matched, as decision.md names them ("3", "6b").
fn rules(d: &Decision) -> Vec<String> {
    d.reasons.iter().map(|r| r.rule.to_string()).collect()
}

fn named(numbers: &[u8]) -> Vec<String> {
    numbers.iter().map(u8::to_string).collect()
}

#[test]
fn each_rule_alone() {
    type Case = (&'static str, fn(&mut DecisionInputs), Verdict, Vec<u8>);
    let cases: Vec<Case> = vec![
        ("accepted and busy → reserve", |_| {}, Verdict::Reserve, vec![8]),
        (
            "1: managed API",
            |i| {
                i.brief.only_needs_model_output = true;
                i.brief.data_boundary = "shared-ok".into();
            },
            Verdict::Stop,
            vec![1, 8],
        ),
        (
            "2: a stage-1 criterion fails",
            |i| {
                i.criteria[0] = crit(
                    "dcgm.diag.passed",
                    "eq",
                    json!(true),
                    1,
                    Status::Fail,
                    Some(json!(false)),
                )
            },
            Verdict::Stop,
            vec![2],
        ),
        (
            "2: dcgm diag failed though not on the card",
            |i| metric(i, "dcgm.diag.passed", json!(false)),
            Verdict::Stop,
            vec![2, 8],
        ),
        (
            "2: restore failed though not on the card",
            |i| metric(i, "checkpoint.restore_ok", json!(false)),
            Verdict::Stop,
            vec![2, 8],
        ),
        (
            "3: over the cost ceiling",
            |i| i.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.0101")),
            Verdict::Stop,
            vec![3, 8],
        ),
        (
            "4: SLO missed while saturated → scale",
            |i| {
                i.criteria[2] = crit(
                    "serving.ttft_p95_ms",
                    "le",
                    json!(500),
                    3,
                    Status::Fail,
                    Some(json!(900)),
                );
                metric(i, "serving.preemptions_total", json!(12));
            },
            Verdict::Scale,
            vec![4],
        ),
        (
            "5: SLO missed while not saturated → stop",
            |i| {
                i.criteria[2] = crit(
                    "serving.ttft_p95_ms",
                    "le",
                    json!(500),
                    3,
                    Status::Fail,
                    Some(json!(900)),
                )
            },
            Verdict::Stop,
            vec![5],
        ),
        (
            "6: a required criterion missing → expand",
            |i| i.criteria[3] = crit("probe.drain_restart", "eq", json!(true), 4, Status::Missing, None),
            Verdict::Expand,
            vec![6],
        ),
        (
            "7: host control → dedicate",
            |i| i.brief.needs_host_control = true,
            Verdict::Dedicate,
            vec![7, 8],
        ),
        (
            "7: dedicated-host boundary → dedicate",
            |i| i.brief.data_boundary = "dedicated-host".into(),
            Verdict::Dedicate,
            vec![7, 8],
        ),
        (
            "9: accepted but idle → expand",
            |i| i.ledger.as_mut().unwrap().idle_hours = Some(dec("50")),
            Verdict::Expand,
            vec![9],
        ),
    ];
    for (name, change, verdict, expected_rules) in cases {
        let mut inputs = base();
        change(&mut inputs);
        let d = decide(&inputs);
        assert_eq!(d.decision, verdict, "{name}: {:#?}", d.reasons);
        assert_eq!(rules(&d), named(&expected_rules), "{name}");
    }
}

#[test]
fn rule_order_when_several_match() {
    let mut inputs = base();
    inputs.brief.only_needs_model_output = true;
    inputs.brief.data_boundary = "shared-ok".into();
    inputs.ledger.as_mut().unwrap().cost_per_job = Some(dec("1"));
    metric(&mut inputs, "dcgm.diag.passed", json!(false));
    inputs.criteria[3] = crit("probe.drain_restart", "eq", json!(true), 4, Status::Missing, None);
    let d = decide(&inputs);
    assert_eq!(d.decision, Verdict::Stop);
    assert_eq!(
        rules(&d),
        named(&[1, 2, 3, 6]),
        "every matching rule is listed, the first decides"
    );
    assert!(!d.accepted);
    assert_eq!(d.missing, BTreeMap::from([(4, vec!["probe.drain_restart".to_owned()])]));
}

#[test]
fn boundaries() {
    // Utilization exactly 0.60 reserves; just under does not.
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().idle_hours = Some(dec("40"));
    let d = decide(&inputs);
    assert_eq!(d.utilization, Some(dec("0.6")));
    assert_eq!(d.decision, Verdict::Reserve);
    inputs.ledger.as_mut().unwrap().idle_hours = Some(dec("40.01"));
    assert_eq!(decide(&inputs).decision, Verdict::Expand);

    // Cost exactly at the ceiling is not above it.
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.01"));
    assert_eq!(decide(&inputs).decision, Verdict::Reserve);

    // KV usage exactly 90 % is saturated; 89.9 is not.
    let failing = |i: &mut DecisionInputs| {
        i.criteria[2] = crit(
            "serving.ttft_p95_ms",
            "le",
            json!(500),
            3,
            Status::Fail,
            Some(json!(750)),
        );
    };
    let mut inputs = base();
    failing(&mut inputs);
    metric(&mut inputs, "serving.kv_cache_usage_max_pct", json!(90.0));
    assert_eq!(decide(&inputs).decision, Verdict::Scale);
    metric(&mut inputs, "serving.kv_cache_usage_max_pct", json!(89.9));
    assert_eq!(decide(&inputs).decision, Verdict::Stop);

    // Queue time exactly 20 % of e2e is saturated.
    let mut inputs = base();
    failing(&mut inputs);
    metric(&mut inputs, "serving.e2e_p95_ms", json!(1000));
    metric(&mut inputs, "serving.queue_time_p95_ms", json!(200));
    assert_eq!(decide(&inputs).decision, Verdict::Scale);
    metric(&mut inputs, "serving.queue_time_p95_ms", json!(199));
    assert_eq!(decide(&inputs).decision, Verdict::Stop);

    // Zero preemptions is not saturation.
    let mut inputs = base();
    failing(&mut inputs);
    metric(&mut inputs, "serving.preemptions_total", json!(0));
    assert_eq!(decide(&inputs).decision, Verdict::Stop);
}

#[test]
fn scale_suggests_units_from_the_worst_miss_never_below_sizing() {
    let mut inputs = base();
    inputs.brief.current_units = 2;
    inputs.brief.sized_count = 2;
    inputs.criteria[2] = crit(
        "serving.ttft_p95_ms",
        "le",
        json!(500),
        3,
        Status::Fail,
        Some(json!(1250)),
    );
    inputs.criteria.push(crit(
        "serving.output_tokens_per_s",
        "ge",
        json!(3000),
        3,
        Status::Fail,
        Some(json!(1000)),
    ));
    metric(&mut inputs, "serving.preemptions_total", json!(3));
    let d = decide(&inputs);
    assert_eq!(d.decision, Verdict::Scale);
    // Worst miss: throughput 3000 / 1000 = 3.0 (latency 1250 / 500 = 2.5) → ceil(2 × 3.0) = 6.
    assert_eq!(d.suggested_units, Some(6));

    inputs.brief.sized_count = 8;
    assert_eq!(
        decide(&inputs).suggested_units,
        Some(8),
        "never below the sizing's count"
    );
}

#[test]
fn undefined_cost_and_utilization() {
    let mut inputs = base();
    let ledger = inputs.ledger.as_mut().unwrap();
    ledger.cost_per_job = None;
    ledger.idle_hours = None;
    let d = decide(&inputs);
    assert_eq!(d.utilization, None);
    assert_eq!(d.decision, Verdict::Expand, "accepted, utilization unknown → expand");
    assert_eq!(rules(&d), named(&[9]));
    assert!(d.reasons[0].facts.iter().any(|f| f.value == "unknown"));

    let mut inputs = base();
    inputs.ledger = None;
    assert_eq!(decide(&inputs).decision, Verdict::Expand, "no ledger at all");
}

#[test]
fn a_multi_gpu_brief_without_nccl_evidence_is_expand() {
    let mut inputs = base();
    inputs.brief.sized_count = 4;
    inputs.brief.current_units = 4;
    inputs
        .criteria
        .push(crit("nccl.busbw_peak_gbps", "ge", json!(100), 1, Status::Missing, None));
    inputs
        .criteria
        .push(crit("topo.worst_link", "eq", json!("NV18"), 1, Status::Missing, None));
    let d = decide(&inputs);
    assert_eq!(d.decision, Verdict::Expand);
    assert_eq!(rules(&d), named(&[6]));
    assert_eq!(d.missing[&1], ["nccl.busbw_peak_gbps", "topo.worst_link"]);
}

#[test]
fn batch_work_that_is_not_busy_is_told_to_use_interruptible_capacity() {
    let mut inputs = base();
    inputs.brief.workload_kind = "batch-inference".into();
    inputs.ledger.as_mut().unwrap().idle_hours = Some(dec("90"));
    let d = decide(&inputs);
    assert_eq!(d.decision, Verdict::Expand);
    assert!(d.reasons[0].says.contains("interruptible"));
}

#[test]
fn the_digest_changes_when_and_only_when_an_input_changes() {
    let a = base();
    let same = base();
    assert_eq!(inputs_digest(&a), inputs_digest(&same), "same inputs, same digest");
    assert_eq!(decide(&a).inputs_digest, inputs_digest(&a));

    let changes: Vec<fn(&mut DecisionInputs)> = vec![
        |i| i.brief.max_cost_per_job = Some(dec("0.02")),
        |i| i.brief.needs_host_control = true,
        |i| i.brief.current_units = 4,
        |i| i.criteria[2].value = Some(json!(421)),
        |i| i.criteria[2].evidence_id = Some(Uuid::from_u128(9)),
        |i| i.criteria[1].threshold = json!(false),
        |i| metric(i, "serving.preemptions_total", json!(0)),
        |i| i.ledger.as_mut().unwrap().idle_hours = Some(dec("21")),
        |i| i.ledger.as_mut().unwrap().total = dec("801"),
    ];
    let mut seen = std::collections::HashSet::from([inputs_digest(&a)]);
    for change in changes {
        let mut b = base();
        change(&mut b);
        assert!(seen.insert(inputs_digest(&b)), "every input change gives a new digest");
    }
}

/// The base brief with money figures: a million output tokens cost 1.7361 USD at the SLO on this
/// trial, and the brief names a managed API's price.
fn with_money(api_price: &str) -> DecisionInputs {
    use super::super::money::{money_facts, LoadPoint, MoneyInputs, Rate, RateSource};
    let point = LoadPoint {
        run: String::new(),
        evidence_id: Uuid::from_u128(11),
        rate_rps: 10.0,
        output_tokens_per_s: Some(1000.0),
        attainment: Some(0.8),
    };
    let mut inputs = base();
    inputs.money = Some(money_facts(&MoneyInputs {
        rate: Some(Rate {
            per_gpu_hour: dec("2.50"),
            gpus_billed: 2,
            source: RateSource::Trial,
            description: "the trial's rate".into(),
        }),
        currency: "USD".into(),
        points: vec![point.clone()],
        newest: Some(point),
        attainment_target: 0.95,
        api_price_per_million_tokens: Some(dec(api_price)),
        ..MoneyInputs::default()
    }));
    inputs
}

#[test]
fn rule_6b_stops_when_the_api_is_cheaper_at_the_slo() {
    let d = decide(&with_money("1.50"));
    assert_eq!(d.decision, Verdict::Stop);
    assert_eq!(rules(&d), ["6b", "8"]);
    let reason = &d.reasons[0];
    assert!(
        reason.says.contains("1.74 USD") && reason.says.contains("1.50 USD"),
        "{}",
        reason.says
    );
    assert!(reason
        .facts
        .iter()
        .any(|f| f.label == "traffic it assumes" && f.value.contains("10.0 requests/s")));
    assert_eq!(
        serde_json::to_value(reason).unwrap()["rule"],
        json!("6b"),
        "the API names the rule as decision.md does"
    );
    assert_eq!(serde_json::to_value(&d.reasons[1]).unwrap()["rule"], json!(8));
}

#[test]
fn rule_6b_does_not_fire_when_the_trial_is_cheaper_or_must_keep_its_host() {
    let d = decide(&with_money("2.00"));
    assert_eq!(rules(&d), ["8"], "1.74 at the SLO is below 2.00");

    let mut host = with_money("1.50");
    host.brief.needs_host_control = true;
    assert_eq!(rules(&decide(&host)), ["7", "8"]);

    let mut boundary = with_money("1.50");
    boundary.brief.data_boundary = "dedicated-host".into();
    assert_eq!(decide(&boundary).decision, Verdict::Dedicate);

    let mut not_accepted = with_money("1.50");
    not_accepted.criteria[3] = crit("probe.drain_restart", "eq", json!(true), 4, Status::Missing, None);
    assert_eq!(
        rules(&decide(&not_accepted)),
        ["6"],
        "no money verdict before acceptance"
    );

    let mut unknown = with_money("1.50");
    unknown.money.as_mut().unwrap().cost_per_million_output_tokens_at_slo = None;
    assert_eq!(rules(&decide(&unknown)), ["8"], "no figure at the SLO, no break-even");
}

#[test]
fn the_digest_pins_the_money_figures_and_leaves_old_inputs_alone() {
    let plain = base();
    let with = with_money("1.50");
    assert_ne!(inputs_digest(&plain), inputs_digest(&with));
    let json = serde_json::to_value(&plain).unwrap();
    assert!(
        json.get("money").is_none(),
        "without money figures the inputs read as before"
    );
    let mut other_rate = with_money("1.50");
    other_rate.money.as_mut().unwrap().cost_per_hour = Some(dec("5.01"));
    assert_ne!(inputs_digest(&with), inputs_digest(&other_rate));
}

#[test]
fn without_idle_hours_the_gpus_measured_utilization_decides_and_says_so() {
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().idle_hours = None;
    metric(&mut inputs, "gpu.util_pct_avg", json!(72.5));
    let d = decide(&inputs);
    assert_eq!(d.utilization, Some(dec("0.725")));
    assert_eq!(d.decision, Verdict::Reserve, "72.5 % busy ≥ 0.60");
    assert!(d.reasons[0].says.contains("dcgm-exporter"), "{}", d.reasons[0].says);
    assert_eq!(
        d.reasons[0].facts[0].link.as_deref(),
        Some(format!("evidence:{}", Uuid::from_u128(7)).as_str())
    );
    assert_eq!(
        d.utilization_source,
        UtilizationSource::DcgmExporter {
            evidence_id: Uuid::from_u128(7)
        }
    );

    // The ledger's idle hours win when it has them: 80 % busy there, whatever the GPUs reported.
    let mut inputs = base();
    metric(&mut inputs, "gpu.util_pct_avg", json!(10));
    let d = decide(&inputs);
    assert_eq!(d.utilization, Some(dec("0.8")));
    assert_eq!(d.utilization_source, UtilizationSource::Ledger);
}
