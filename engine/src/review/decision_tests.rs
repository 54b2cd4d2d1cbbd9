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
        reason: None,
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
            trial_billing: "on-demand".into(),
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

fn named(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

#[test]
fn each_rule_alone() {
    type Case = (&'static str, fn(&mut DecisionInputs), Verdict, Vec<&'static str>);
    let cases: Vec<Case> = vec![
        (
            "accepted and busy, no reserved price known → expand (8b)",
            |_| {},
            Verdict::Expand,
            vec!["8b"],
        ),
        (
            "1: managed API",
            |i| {
                i.brief.only_needs_model_output = true;
                i.brief.data_boundary = "shared-ok".into();
            },
            Verdict::Stop,
            vec!["1", "8b"],
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
            vec!["2"],
        ),
        (
            "2: dcgm diag failed though not on the card",
            |i| metric(i, "dcgm.diag.passed", json!(false)),
            Verdict::Stop,
            vec!["2", "8b"],
        ),
        (
            "2: restore failed though not on the card",
            |i| metric(i, "checkpoint.restore_ok", json!(false)),
            Verdict::Stop,
            vec!["2", "8b"],
        ),
        (
            "3: over the cost ceiling",
            |i| i.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.0101")),
            Verdict::Stop,
            vec!["3", "8b"],
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
            vec!["4"],
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
            vec!["5"],
        ),
        (
            "6: a required criterion missing → expand",
            |i| i.criteria[3] = crit("probe.drain_restart", "eq", json!(true), 4, Status::Missing, None),
            Verdict::Expand,
            vec!["6"],
        ),
        (
            "7: host control → dedicate",
            |i| i.brief.needs_host_control = true,
            Verdict::Dedicate,
            vec!["7", "8b"],
        ),
        (
            "7: dedicated-host boundary → dedicate",
            |i| i.brief.data_boundary = "dedicated-host".into(),
            Verdict::Dedicate,
            vec!["7", "8b"],
        ),
        (
            "9: accepted but idle → expand",
            |i| i.ledger.as_mut().unwrap().idle_hours = Some(dec("50")),
            Verdict::Expand,
            vec!["9"],
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
        named(&["1", "2", "3", "6"]),
        "every matching rule is listed, the first decides"
    );
    assert!(!d.accepted);
    assert_eq!(d.missing, BTreeMap::from([(4, vec!["probe.drain_restart".to_owned()])]));
}

#[test]
fn boundaries() {
    // No reserved price known: nothing is reserved (rule 8b); from 0.60 busy the reason asks for a
    // reserved price, just under 0.60 it is plain rule 9.
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().idle_hours = Some(dec("40"));
    let d = decide(&inputs);
    assert_eq!(d.utilization, Some(dec("0.6")));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["8b"])));
    assert!(!d.reservation.break_even_known);
    assert!(d.reservation.reserved_price_needed);
    assert!(
        d.reasons[0].says.contains("no reserved price of this offer is known"),
        "{}",
        d.reasons[0].says
    );
    inputs.ledger.as_mut().unwrap().idle_hours = Some(dec("40.01"));
    let d = decide(&inputs);
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    assert!(
        !d.reservation.reserved_price_needed,
        "below 60 % busy no reserved price is asked for"
    );

    // Cost exactly at the ceiling is not above it.
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.01"));
    assert_eq!(rules(&decide(&inputs)), named(&["8b"]));

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
    // Exactly 20 % of figures binary cannot hold: 0.6 of 3 ms (0.2 × 3 = 0.6000000000000001).
    metric(&mut inputs, "serving.e2e_p95_ms", json!(3.0));
    metric(&mut inputs, "serving.queue_time_p95_ms", json!(0.6));
    assert_eq!(decide(&inputs).decision, Verdict::Scale);
    metric(&mut inputs, "serving.queue_time_p95_ms", json!(0.5999));
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
    // Worst miss: throughput 3000 / 1000 = 3.0 (latency 1250 / 500 = 2.5) → ceil(1 replica × 3.0)
    // = 3 replicas of the 2-GPU allocation.
    assert_eq!(d.suggested_replicas, Some(3));

    inputs.brief.sized_count = 10;
    assert_eq!(
        decide(&inputs).suggested_replicas,
        Some(5),
        "never below the sizing's count: 10 GPUs are 5 replicas of 2"
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
    assert_eq!(rules(&d), named(&["9"]));
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
    assert_eq!(rules(&d), named(&["6"]));
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
    // Training and fine-tuning are batch work too (they resume from checkpoints); serving people
    // as they ask is not.
    for (kind, told) in [("training", true), ("finetune", true), ("realtime-inference", false)] {
        inputs.brief.workload_kind = kind.into();
        let d = decide(&inputs);
        assert_eq!(
            d.reasons[0].says.contains("interruptible"),
            told,
            "{kind}: {}",
            d.reasons[0].says
        );
    }
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

/// The base brief with money figures: 2 GPUs at 2.50 an hour, a load point of 100 requests over
/// 10 s, 80 of them good with 100 output tokens each (goodput 8 req/s), and a managed API that
/// charges `api_price` per million output tokens (its older single price).
fn with_money(api_price: &str) -> DecisionInputs {
    use super::super::cost_at_slo::{money_facts, ApiPrices, MoneyInputs, Rate, RateSource};
    use crate::evidence::load_points::{load_points, Operating};
    let metrics = json!({
        "serving.offered_rps": 10.0,
        "serving.request_throughput_rps": 10.0,
        "serving.duration_s": 10.0,
        "serving.completed": 100.0,
        "serving.failed": 0.0,
        "serving.output_tokens_per_s": 1000.0,
        "serving.slo_attainment": 0.8,
        "serving.goodput_rps": 8.0,
        "serving.good_output_tokens_per_s": 800.0,
        "serving.good_mean_output_tokens": 100.0,
    });
    let points = load_points(Uuid::from_u128(11), metrics.as_object().unwrap());
    let mut inputs = base();
    inputs.money = Some(money_facts(&MoneyInputs {
        rate: Some(Rate {
            per_gpu_hour: dec("2.50"),
            gpus_billed: 2,
            billing: "on-demand".into(),
            provider: String::new(),
            source: RateSource::Trial,
            description: "the trial's rate".into(),
        }),
        currency: "USD".into(),
        points,
        operating: Some(Operating {
            index: 0,
            qualified: false,
        }),
        attainment_target: 0.95,
        api: Some(ApiPrices {
            input_per_million: Decimal::ZERO,
            output_per_million: dec(api_price),
            output_price_only: true,
        }),
        ..MoneyInputs::default()
    }));
    inputs
}

#[test]
fn rule_6b_stops_when_a_good_request_costs_more_here_than_on_the_api() {
    // Here: 5.00 an hour ÷ (8 good requests/s × 3600) = 0.000174 a good request, 1.7361 per million
    // output tokens (100 a request); the API: 100 × 1.50 ÷ 10^6 = 0.00015 a request.
    let d = decide(&with_money("1.50"));
    assert_eq!(d.decision, Verdict::Stop);
    assert_eq!(rules(&d), ["6b", "8b"]);
    assert!(!d.reservation.reserved_price_needed, "stopped: no quote to ask for");
    let reason = &d.reasons[0];
    assert!(
        reason.says.contains("0.00017 USD") && reason.says.contains("0.00015 USD"),
        "{}",
        reason.says
    );
    assert!(
        reason.says.contains("1.74 USD") && reason.says.contains("1.50 USD"),
        "both per million output tokens: {}",
        reason.says
    );
    assert!(reason.says.contains("if kept busy all the time"), "{}", reason.says);
    assert!(reason
        .facts
        .iter()
        .any(|f| f.label == "API prices per million tokens" && f.value.contains("output price only")));
    assert_eq!(
        serde_json::to_value(reason).unwrap()["rule"],
        json!("6b"),
        "the API names the rule as decision.md does"
    );
    assert_eq!(serde_json::to_value(&d.reasons[1]).unwrap()["rule"], json!("8b"));
}

#[test]
fn rule_6b_does_not_fire_when_the_trial_is_cheaper_or_must_keep_its_host() {
    let d = decide(&with_money("2.00"));
    assert_eq!(rules(&d), ["8b"], "0.000174 a good request is below the API's 0.0002");

    let mut host = with_money("1.50");
    host.brief.needs_host_control = true;
    let d = decide(&host);
    assert_eq!(rules(&d), ["7", "8b"]);
    // Rule 7 decides, and 8b, which matched too, still asks for the reserved price it lacks.
    assert_eq!(d.decision, Verdict::Dedicate);
    assert!(d.reservation.reserved_price_needed);

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
    unknown.money.as_mut().unwrap().api = None;
    assert_eq!(rules(&decide(&unknown)), ["8b"], "no goodput, no API break-even");
}

#[test]
fn rule_6c_stops_spot_capacity_for_real_time_serving_only() {
    let mut spot = base();
    spot.brief.trial_billing = "spot".into();
    let d = decide(&spot);
    assert_eq!(d.decision, Verdict::Stop);
    assert_eq!(rules(&d), ["6c", "9"], "spot is never reserved: rule 8 does not match");
    assert_eq!(serde_json::to_value(&d.reasons[0]).unwrap()["rule"], json!("6c"));
    assert!(d.reasons[0].says.contains("reclaimed mid-request"));
    let mut batch = spot.clone();
    batch.brief.workload_kind = "batch-inference".into();
    let d = decide(&batch);
    assert_eq!(d.decision, Verdict::Expand, "spot suits batch work");
    assert!(d.reasons[0].says.contains("interruptible"));
}

#[test]
fn rule_8_reads_the_offers_break_even_plus_five_points() {
    use super::super::cost_at_slo::ReservationRates;
    // Reserved 2.10 ÷ on demand 3.50 = 0.60: reserve from 0.65. Reserved 3.15 ÷ 3.50 = 0.90: from
    // 0.95. The base trial is busy 80 %.
    let with_rates = |reserved: &str| {
        let mut i = with_money("9.00");
        i.money.as_mut().unwrap().reservation_rates = ReservationRates {
            reserved_rate: Some(dec(reserved)),
            reserved_gpus_billed: Some(2),
            on_demand_rate: Some(dec("3.50")),
            ..ReservationRates::default()
        };
        i
    };
    let d = decide(&with_rates("2.10"));
    assert_eq!(
        (d.decision, d.reservation.break_even, d.reservation.break_even_known),
        (Verdict::Reserve, Some(dec("0.6")), true)
    );
    // Like for like: on demand for the busy hours 2 × 3.50 × 730 × 0.8 = 4,088.00; reserved
    // 2 × 2.10 × 730 = 3,066.00; saving 1,022.00 a month.
    assert_eq!(d.reservation.on_demand_busy_monthly, Some(dec("4088.00")));
    assert_eq!(d.reservation.reserved_monthly, Some(dec("3066.00")));
    assert_eq!(d.reservation.reserve_saving_monthly, Some(dec("1022.00")));
    assert!(d.reasons[0].says.contains("1,022 USD"), "{}", d.reasons[0].says);
    let d = decide(&with_rates("3.15"));
    assert_eq!(
        (d.decision, d.reservation.break_even),
        (Verdict::Expand, Some(dec("0.9")))
    );
    assert!(d.reasons[0].says.contains("95 %"), "{}", d.reasons[0].says);
}

#[test]
fn a_load_test_where_nothing_completed_stops_and_says_so() {
    let mut inputs = base();
    inputs.criteria[2] = CriterionOutcome {
        reason: Some(crate::evidence::load_points::NOTHING_COMPLETED.into()),
        ..crit("serving.ttft_p95_ms", "le", json!(500), 3, Status::Fail, None)
    };
    let d = decide(&inputs);
    assert_eq!((d.decision, rules(&d)), (Verdict::Stop, named(&["5"])));
    assert!(d.reasons[0].says.contains("No request of the load test completed"));
    assert_eq!(d.reasons[0].facts[0].value, "no request completed");
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
    let mut other_billing = base();
    other_billing.brief.trial_billing = "reserved".into();
    assert_ne!(inputs_digest(&base()), inputs_digest(&other_billing));
    assert_ne!(inputs_digest(&with), inputs_digest(&other_rate));
}

#[test]
fn without_idle_hours_the_gpus_measured_utilization_decides_and_says_so() {
    let mut inputs = base();
    inputs.ledger.as_mut().unwrap().idle_hours = None;
    metric(&mut inputs, "gpu.util_pct_avg", json!(72.5));
    let d = decide(&inputs);
    assert_eq!(d.utilization, Some(dec("0.725")));
    assert_eq!(
        (d.decision, rules(&d)),
        (Verdict::Expand, named(&["8b"])),
        "72.5 % busy ≥ 0.60, but no reserved price is known"
    );
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

// One test per rule function: each rule alone, on the context `decide` builds, says whether it
// matches and what it concludes.

fn ctx_rule(inputs: &DecisionInputs, rule: RuleCheck) -> Option<(String, Verdict)> {
    rule(&Context::new(inputs)).map(|r| (r.rule.to_string(), r.decision))
}

fn failed_ttft(value: Value) -> CriterionOutcome {
    crit("serving.ttft_p95_ms", "le", json!(500), 3, Status::Fail, Some(value))
}

#[test]
fn rule_1_managed_api_fits_only_output_only_shareable_work() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, managed_api_fits), None);
    i.brief.only_needs_model_output = true;
    assert_eq!(
        ctx_rule(&i, managed_api_fits),
        None,
        "private-network data stays off shared APIs"
    );
    i.brief.data_boundary = "shared-ok".into();
    assert_eq!(ctx_rule(&i, managed_api_fits), Some(("1".into(), Verdict::Stop)));
    i.brief.needs_host_control = true;
    assert_eq!(ctx_rule(&i, managed_api_fits), None);
}

#[test]
fn rule_2_environment_failed_reads_required_stages_1_2_4_and_false_diagnostics() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, environment_failed), None);
    i.criteria[3] = crit(
        "probe.drain_restart",
        "eq",
        json!(true),
        4,
        Status::Fail,
        Some(json!(false)),
    );
    assert_eq!(ctx_rule(&i, environment_failed), Some(("2".into(), Verdict::Stop)));
    let mut i = base();
    i.criteria[2] = failed_ttft(json!(900));
    assert_eq!(ctx_rule(&i, environment_failed), None, "stage 3 is the load rules'");
    metric(&mut i, "checkpoint.restore_ok", json!(false));
    let r = environment_failed(&Context::new(&i)).unwrap();
    assert_eq!(r.facts.len(), 1);
    assert_eq!(
        r.facts[0].link.as_deref(),
        Some("evidence:00000000-0000-0000-0000-000000000007")
    );
}

#[test]
fn rule_3_cost_above_ceiling_needs_both_a_cost_and_a_ceiling() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, cost_above_ceiling), None);
    i.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.0100"));
    assert_eq!(ctx_rule(&i, cost_above_ceiling), None, "at the ceiling is not above it");
    i.ledger.as_mut().unwrap().cost_per_job = Some(dec("0.0101"));
    let r = cost_above_ceiling(&Context::new(&i)).unwrap();
    assert_eq!((r.rule, r.decision), (Rule::Numbered(3), Verdict::Stop));
    // The cost, the ceiling, then one fact per ledger category.
    assert_eq!(r.facts.len(), 4);
    i.brief.max_cost_per_job = None;
    assert_eq!(ctx_rule(&i, cost_above_ceiling), None);
}

#[test]
fn rule_4_scales_a_saturated_miss() {
    let mut i = base();
    i.criteria[2] = failed_ttft(json!(900));
    assert_eq!(ctx_rule(&i, load_missed_while_saturated), None, "not saturated");
    metric(&mut i, "serving.kv_cache_usage_max_pct", json!(95));
    assert_eq!(
        ctx_rule(&i, load_missed_while_saturated),
        Some(("4".into(), Verdict::Scale))
    );
    // 900 / 500 = 1.8 → 2 replicas of 2 GPUs, and the sizing's 2 GPUs need 1.
    let s = scale_out(&Context::new(&i));
    assert_eq!((s.replicas, s.per_replica), (2, 2));
    // decision.md's rule 4 has no exception for a run where nothing completed (this test used to
    // send it to rule 5).
    i.criteria[2].reason = Some(crate::evidence::load_points::NOTHING_COMPLETED.into());
    assert_eq!(
        ctx_rule(&i, load_missed_while_saturated),
        Some(("4".into(), Verdict::Scale)),
        "saturated, though nothing completed"
    );
}

#[test]
fn rule_5_stops_a_miss_that_more_units_will_not_fix() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, load_missed_where_more_units_will_not_help), None);
    i.criteria[2] = failed_ttft(json!(900));
    assert_eq!(
        ctx_rule(&i, load_missed_where_more_units_will_not_help),
        Some(("5".into(), Verdict::Stop))
    );
    i.criteria[2].reason = Some(crate::evidence::load_points::NOTHING_COMPLETED.into());
    let r = load_missed_where_more_units_will_not_help(&Context::new(&i)).unwrap();
    assert!(
        r.says.starts_with("No request of the load test completed"),
        "{}",
        r.says
    );
    metric(&mut i, "serving.preemptions_total", json!(3));
    assert_eq!(
        ctx_rule(&i, load_missed_where_more_units_will_not_help),
        None,
        "saturated is rule 4, whether or not a request completed"
    );
}

/// decision.md's rule 4 has no exception for a run where nothing completed: with a saturation
/// signal it scales (this engine used to stop it by rule 5).
#[test]
fn a_saturated_server_that_completed_nothing_is_scaled_not_stopped() {
    let mut i = base();
    i.criteria[2] = CriterionOutcome {
        reason: Some(crate::evidence::load_points::NOTHING_COMPLETED.into()),
        ..crit("serving.ttft_p95_ms", "le", json!(500), 3, Status::Fail, None)
    };
    metric(&mut i, "serving.kv_cache_usage_max_pct", json!(95));
    let d = decide(&i);
    assert_eq!((d.decision, rules(&d)), (Verdict::Scale, named(&["4"])));
    assert!(
        d.reasons[0]
            .says
            .starts_with("No request of the load test completed while the server was saturated"),
        "{}",
        d.reasons[0].says
    );
}

/// The suggested count is a whole number of replicas worked out without binary-fraction noise:
/// 0.07 against a 0.01 ceiling is 7 times over, so 7 replicas (not 8).
#[test]
fn the_suggested_replicas_are_the_miss_ratio_rounded_up_exactly() {
    let mut i = base();
    i.brief.sized_count = 1;
    i.brief.current_units = 1;
    i.criteria[2] = crit(
        "serving.error_rate",
        "le",
        json!(0.01),
        3,
        Status::Fail,
        Some(json!(0.07)),
    );
    metric(&mut i, "serving.preemptions_total", json!(3));
    let d = decide(&i);
    assert_eq!(d.decision, Verdict::Scale);
    assert_eq!(d.suggested_replicas, Some(7), "{:?}", d.reasons[0]);
    i.criteria[2] = crit(
        "serving.error_rate",
        "le",
        json!(0.01),
        3,
        Status::Fail,
        Some(json!(0.0701)),
    );
    assert_eq!(decide(&i).suggested_replicas, Some(8));
}

#[test]
fn rule_6_expands_while_required_criteria_are_missing_by_stage() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, criteria_missing), None);
    i.criteria[3] = crit("probe.drain_restart", "eq", json!(true), 4, Status::Missing, None);
    i.criteria.push(crit(
        "nccl.busbw_peak_gbps",
        "ge",
        json!(100),
        2,
        Status::NotApplicable,
        None,
    ));
    let r = criteria_missing(&Context::new(&i)).unwrap();
    assert_eq!((r.rule, r.decision), (Rule::Numbered(6), Verdict::Expand));
    assert_eq!(r.facts.len(), 1, "a criterion that does not apply is not missing");
    assert_eq!(
        (r.facts[0].label.as_str(), r.facts[0].value.as_str()),
        ("stage 4", "probe.drain_restart")
    );
}

#[test]
fn rule_6b_asks_an_accepted_trial_whether_the_api_is_cheaper() {
    let i = with_money("1");
    assert_eq!(
        ctx_rule(&i, accepted_but_api_cheaper),
        Some(("6b".into(), Verdict::Stop))
    );
    let mut not_accepted = with_money("1");
    not_accepted.criteria[0].status = Status::Fail;
    assert_eq!(ctx_rule(&not_accepted, accepted_but_api_cheaper), None);
    assert_eq!(ctx_rule(&with_money("1000"), accepted_but_api_cheaper), None);
}

#[test]
fn rule_6c_refuses_accepted_spot_capacity_for_realtime_serving() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, spot_for_realtime), None);
    i.brief.trial_billing = "spot".into();
    assert_eq!(ctx_rule(&i, spot_for_realtime), Some(("6c".into(), Verdict::Stop)));
    i.brief.workload_kind = "batch-inference".into();
    assert_eq!(ctx_rule(&i, spot_for_realtime), None);
}

#[test]
fn rule_7_dedicates_an_accepted_trial_that_needs_its_host() {
    let mut i = base();
    assert_eq!(ctx_rule(&i, dedicated_host_needed), None);
    i.brief.data_boundary = "dedicated-host".into();
    i.brief.needs_host_control = true;
    let r = dedicated_host_needed(&Context::new(&i)).unwrap();
    assert_eq!(
        (r.rule, r.decision, r.facts.len()),
        (Rule::Numbered(7), Verdict::Dedicate, 2)
    );
    i.criteria[1].status = Status::Missing;
    assert_eq!(ctx_rule(&i, dedicated_host_needed), None, "not accepted");
}

#[test]
fn rules_8_8b_and_9_reserve_only_with_a_reserved_price_else_stay() {
    // 80 % busy, no reserved price of the offer known: rule 8b, expand.
    let mut i = base();
    assert_eq!(
        ctx_rule(&i, reserve_or_stay_pay_as_you_go),
        Some(("8b".into(), Verdict::Expand))
    );
    i.ledger.as_mut().unwrap().idle_hours = Some(dec("40.01"));
    assert_eq!(
        ctx_rule(&i, reserve_or_stay_pay_as_you_go),
        Some(("9".into(), Verdict::Expand))
    );
    i.ledger.as_mut().unwrap().idle_hours = Some(dec("40"));
    assert_eq!(
        ctx_rule(&i, reserve_or_stay_pay_as_you_go),
        Some(("8b".into(), Verdict::Expand))
    );
    i.brief.trial_billing = "spot".into();
    let stay = reserve_or_stay_pay_as_you_go(&Context::new(&i)).unwrap();
    assert!(stay.says.contains("spot capacity"), "{}", stay.says);
    i.criteria[0].status = Status::Fail;
    assert_eq!(ctx_rule(&i, reserve_or_stay_pay_as_you_go), None, "not accepted");
}

#[test]
fn without_any_rule_a_failed_criterion_still_expands() {
    let mut i = base();
    i.criteria.push(crit(
        "serving.jobs_per_hour",
        "ge",
        json!(10),
        5,
        Status::Fail,
        Some(json!(3)),
    ));
    let ctx = Context::new(&i);
    assert!(RULES.iter().all(|rule| rule(&ctx).is_none()));
    let r = not_accepted_otherwise(&ctx);
    assert_eq!(
        (r.rule, r.decision, r.facts.len()),
        (Rule::Numbered(9), Verdict::Expand, 1)
    );
}

/// The demo offer, by hand: 8 × H200 on demand at 3.50 per GPU-hour, busy 77.7 % of the
/// billed hours (1,000 billed, 223 idle).
fn demo_offer(reserved: Option<&str>) -> DecisionInputs {
    use super::super::cost_at_slo::ReservationRates;
    let mut i = with_money("9.00");
    i.ledger.as_mut().unwrap().accelerator_hours = dec("1000");
    i.ledger.as_mut().unwrap().idle_hours = Some(dec("223"));
    i.money.as_mut().unwrap().reservation_rates = ReservationRates {
        reserved_rate: reserved.map(dec),
        reserved_gpus_billed: reserved.map(|_| 8),
        on_demand_rate: Some(dec("3.50")),
        ..ReservationRates::default()
    };
    i.money.as_mut().unwrap().rate.as_mut().unwrap().gpus_billed = 8;
    i
}

#[test]
fn a_real_reserved_quote_is_compared_like_for_like_with_the_busy_hours() {
    // Reserved 2.60: break-even 2.60 ÷ 3.50 = 0.7429, threshold 0.7929; busy 0.777 is below it.
    // Reserved a month: 8 × 2.60 × 730 = 15,184.00. On demand for the busy hours only:
    // 8 × 3.50 × 730 × 0.777 = 15,881.88. Saving 697.88 (4.39 % of 15,881.88): under the margin,
    // so rule 9 keeps paying by the hour — never the 20,440 of every hour.
    let d = decide(&demo_offer(Some("2.60")));
    let c = &d.reservation;
    assert_eq!(d.utilization, Some(dec("0.777")));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    assert_eq!(c.break_even, Some(dec("0.7429")));
    assert_eq!(c.reserve_threshold, Some(dec("0.7929")));
    assert_eq!(c.gpus, Some(8));
    assert_eq!(c.reserved_monthly, Some(dec("15184.00")));
    assert_eq!(c.on_demand_busy_monthly, Some(dec("15881.88")));
    assert_eq!(c.reserve_saving_monthly, Some(dec("697.88")));
    assert_eq!(c.reserve_saving_share, Some(dec("0.0439")));
    assert!(!c.reserved_price_needed);
    let words = &d.reasons[0].says;
    assert!(
        words.contains("reserving saves 697.88 USD (4.4 %) a month at 77.7 % busy")
            && words.contains("15,184 USD a month against 15,881.88 USD on demand for the busy hours only")
            && words.contains("79.3 %"),
        "{words}"
    );
    assert!(
        !words.contains("20,440"),
        "never against the on-demand cost of every hour: {words}"
    );

    // A quote of 2.50 (break-even 0.7143, threshold 0.7643 ≤ 0.777) reserves: 8 × 2.50 × 730 =
    // 14,600.00 against 15,881.88, saving 1,281.88 a month.
    let d = decide(&demo_offer(Some("2.50")));
    assert_eq!((d.decision, rules(&d)), (Verdict::Reserve, named(&["8"])));
    assert_eq!(d.reservation.reserve_saving_monthly, Some(dec("1281.88")));
    assert!(d.reasons[0].says.contains("1,281.88 USD"), "{}", d.reasons[0].says);
}

#[test]
fn rule_8b_never_reserves_without_a_reserved_price_and_says_which_price_would_pay() {
    // No reserved price: expand, and reserving would pay below 3.50 × (0.777 − 0.05) = 2.5445 per
    // GPU-hour. A quote of 2.60 is above it (rule 9 above); one of 2.50 is below it (rule 8).
    let d = decide(&demo_offer(None));
    let c = &d.reservation;
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["8b"])));
    assert!(c.reserved_price_needed);
    assert_eq!(
        (c.break_even, c.reserve_threshold, c.reserved_monthly),
        (None, None, None)
    );
    assert_eq!(c.reserve_pays_below_rate, Some(dec("2.5445")));
    assert_eq!(c.on_demand_busy_monthly, Some(dec("15881.88")));
    let says = &d.reasons[0].says;
    assert!(
        says.contains("below 2.54 USD per GPU-hour (77.7 % less 5 points, of the on-demand 3.50 USD)"),
        "{says}"
    );
    assert!(says.contains("nothing is reserved"), "{says}");
    assert_eq!(serde_json::to_value(&d.reasons[0]).unwrap()["rule"], json!("8b"));
    // Knowing a real quote only moves a trial towards reserve, never away from it.
    assert_eq!(decide(&demo_offer(Some("2.50"))).decision, Verdict::Reserve);
}

/// An offer at `reserved` / `on_demand` per GPU-hour, busy (billed − idle) ÷ billed.
fn offer_busy(reserved: Option<&str>, on_demand: Option<&str>, billed: &str, idle: &str) -> DecisionInputs {
    use super::super::cost_at_slo::ReservationRates;
    let mut i = with_money("9.00");
    i.ledger.as_mut().unwrap().accelerator_hours = dec(billed);
    i.ledger.as_mut().unwrap().idle_hours = Some(dec(idle));
    i.money.as_mut().unwrap().reservation_rates = ReservationRates {
        reserved_rate: reserved.map(dec),
        reserved_gpus_billed: reserved.map(|_| 2),
        on_demand_rate: on_demand.map(dec),
        ..ReservationRates::default()
    };
    i
}

/// decision.md compares exact decimals: a busy share that only rounds up to the threshold (as the
/// page shows it, to four places) is below it.
#[test]
fn rules_8_and_8b_compare_the_unrounded_busy_share_and_break_even() {
    // 3.00 ÷ 4.00 = 0.75, reserve from 0.80. Busy (10,000 − 2,000.4) ÷ 10,000 = 0.79996, shown
    // as 0.8000: not yet. 2,000 idle hours is 0.80 exactly: reserve.
    let d = decide(&offer_busy(Some("3.00"), Some("4.00"), "10000", "2000.4"));
    assert_eq!(d.utilization, Some(dec("0.8000")));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    let d = decide(&offer_busy(Some("3.00"), Some("4.00"), "10000", "2000"));
    assert_eq!((d.decision, rules(&d)), (Verdict::Reserve, named(&["8"])));

    // 1.00 ÷ 3.00 = 0.3333…, shown as 0.3333; reserve from 0.38333…, not from 0.3833.
    let d = decide(&offer_busy(Some("1.00"), Some("3.00"), "10000", "6167"));
    assert_eq!(d.reservation.break_even, Some(dec("0.3333")));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    let d = decide(&offer_busy(Some("1.00"), Some("3.00"), "10000", "6166"));
    assert_eq!((d.decision, rules(&d)), (Verdict::Reserve, named(&["8"])));

    // Rule 8b from 0.60 exactly: 0.59996 is below it.
    let d = decide(&offer_busy(None, Some("4.00"), "10000", "4000.4"));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    assert!(!d.reservation.reserved_price_needed);
    let d = decide(&offer_busy(None, Some("4.00"), "10000", "4000"));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["8b"])));
}

/// Rule 8b is for an offer with no reserved price. A reserved quote without an on-demand price
/// has no break-even, so nothing is reserved (rule 9), and nobody is told to ask for a quote that
/// was already imported.
#[test]
fn a_reserved_quote_without_an_on_demand_price_is_rule_9_and_says_what_is_missing() {
    let d = decide(&offer_busy(Some("2.00"), None, "100", "20"));
    assert_eq!((d.decision, rules(&d)), (Verdict::Expand, named(&["9"])));
    assert!(!d.reservation.reserved_price_needed);
    assert!(!d.reservation.break_even_known);
    let says = &d.reasons[0].says;
    assert!(says.contains("no on-demand price of this offer is known"), "{says}");
    assert!(!says.contains("no reserved price"), "{says}");
}

/// The words decision.md gives rules 8b and 9.
#[test]
fn rules_8b_and_9_say_what_decision_md_says() {
    let d = decide(&demo_offer(None));
    let says = &d.reasons[0].says;
    assert!(
        says.contains("no reserved price of this offer is known — ask the provider for one"),
        "{says}"
    );
    // 2.60 ÷ 3.50 = 74.3 %, reserve from 79.3 %.
    let d = decide(&demo_offer(Some("2.60")));
    let says = &d.reasons[0].says;
    assert!(
        says.contains("we reserve from 79.3 % busy (break-even 74.3 % + 5 points of margin)"),
        "{says}"
    );
    // The break-even as people read it, never a bare 0.7429.
    let break_even = d.reasons[0]
        .facts
        .iter()
        .find(|f| f.label == "reservation break-even")
        .unwrap();
    assert_eq!(
        break_even.value,
        "74.3 % (reserved 2.60 USD ÷ on demand 3.50 USD per GPU-hour)"
    );
}
