//! The ledger's pure arithmetic: validation, interval merging and the summary (no database).

mod api;
mod focus;
mod pages;

use std::str::FromStr;

use chrono::{DateTime, Utc};
use rentcheck::ledger::model::{summarize, utilization, validate_line, Category, LedgerLine, LineInput, Outputs};
use rust_decimal::Decimal;

fn d(s: &str) -> Decimal {
    Decimal::from_str(s).unwrap()
}

fn input(cells: [&str; 9]) -> LineInput {
    LineInput::from_cells(cells)
}

/// An accelerator line priced by rate.
fn acc(resource: &str, start: &str, end: &str, gpus: i32, rate: &str) -> LedgerLine {
    validate_line(
        &input([
            "accelerator",
            resource,
            "",
            start,
            end,
            &gpus.to_string(),
            rate,
            "",
            "USD",
        ]),
        "USD",
    )
    .unwrap()
}

/// An accelerator line with a billed amount.
fn acc_amount(resource: &str, start: &str, end: &str, gpus: i32, amount: &str) -> LedgerLine {
    validate_line(
        &input([
            "accelerator",
            resource,
            "",
            start,
            end,
            &gpus.to_string(),
            "",
            amount,
            "USD",
        ]),
        "USD",
    )
    .unwrap()
}

fn other(category: &str, amount: &str) -> LedgerLine {
    validate_line(&input([category, "", "", "", "", "", "", amount, ""]), "USD").unwrap()
}

fn hours_and_cost(lines: &[LedgerLine]) -> (Decimal, Decimal) {
    let s = summarize(lines, &Outputs::default(), "USD");
    (s.accelerator_hours, s.totals.accelerator)
}

const H0: &str = "2026-03-01T00:00:00Z";
const H1: &str = "2026-03-01T01:00:00Z";
const H2: &str = "2026-03-01T02:00:00Z";
const H3: &str = "2026-03-01T03:00:00Z";
const H4: &str = "2026-03-01T04:00:00Z";

#[test]
fn rate_lines_compute_their_amount_exactly() {
    // 90 minutes × 3 GPUs × 1.10 = 4.95
    let l = acc("r", "2026-03-01T00:00:00Z", "2026-03-01T01:30:00Z", 3, "1.10");
    assert_eq!(l.amount, d("4.95"));
    // 1 second × 1 GPU × 3.60 = 0.001 exactly
    let l = acc("r", "2026-03-01T00:00:00Z", "2026-03-01T00:00:01Z", 1, "3.60");
    assert_eq!(l.amount, d("0.001"));
    // A given amount wins over the rate.
    let l = validate_line(&input(["accelerator", "r", "", H0, H1, "1", "2", "1.99", "USD"]), "USD").unwrap();
    assert_eq!(l.amount, d("1.99"));
}

#[test]
fn disjoint_intervals_add_up() {
    let (h, c) = hours_and_cost(&[acc("r", H0, H1, 2, "1"), acc("r", H2, H4, 2, "1")]);
    assert_eq!(h, d("6"));
    assert_eq!(c, d("6"));
}

#[test]
fn touching_intervals_do_not_overlap() {
    let (h, c) = hours_and_cost(&[acc("r", H0, H2, 1, "2"), acc("r", H2, H3, 1, "2")]);
    assert_eq!(h, d("3"));
    assert_eq!(c, d("6"));
}

#[test]
fn overlapping_intervals_count_once() {
    // [0,2) and [1,3) of one resource: 3 hours, not 4; each line bills 4.00, the overlap hour once.
    let (h, c) = hours_and_cost(&[acc("r", H0, H2, 1, "2"), acc("r", H1, H3, 1, "2")]);
    assert_eq!(h, d("3"));
    assert_eq!(c, d("6"));
}

#[test]
fn nested_intervals_count_the_outer_one() {
    let (h, c) = hours_and_cost(&[acc("r", H0, H4, 2, "1"), acc("r", H1, H2, 2, "1")]);
    assert_eq!(h, d("8"));
    assert_eq!(c, d("8"));
}

#[test]
fn identical_lines_count_once() {
    let (h, c) = hours_and_cost(&[acc("r", H0, H2, 4, "3"), acc("r", H0, H2, 4, "3")]);
    assert_eq!(h, d("8"));
    assert_eq!(c, d("24"), "a duplicated billing line is not paid twice");
    // Amounts that do not divide evenly still come out exact.
    let (_, c) = hours_and_cost(&[
        acc_amount("r", H0, "2026-03-01T00:00:03Z", 1, "10"),
        acc_amount("r", H0, "2026-03-01T00:00:03Z", 1, "10"),
    ]);
    assert_eq!(c, d("10"));
}

#[test]
fn two_resources_at_the_same_time_both_count() {
    let (h, c) = hours_and_cost(&[acc("a", H0, H2, 1, "1"), acc("b", H1, H3, 1, "1")]);
    assert_eq!(h, d("4"));
    assert_eq!(c, d("4"));
}

#[test]
fn an_overlap_counts_the_largest_gpu_count() {
    // 8 GPUs over [0,2), 4 GPUs over [1,3): [0,2) at 8 + [2,3) at 4 = 20 GPU-hours, not 24.
    let (h, c) = hours_and_cost(&[acc("r", H0, H2, 8, "2"), acc("r", H1, H3, 4, "2")]);
    assert_eq!(h, d("20"));
    // Cost: the 8-GPU line bills [0,2) in full (32); the 4-GPU line bills its last hour (16 × 1/2 = 8).
    assert_eq!(c, d("40"));
}

#[test]
fn order_of_lines_does_not_matter() {
    let a = [
        acc("r", H1, H3, 4, "2"),
        acc("q", H0, H1, 1, "1"),
        acc("r", H0, H2, 8, "2"),
    ];
    let mut b = a.clone();
    b.reverse();
    assert_eq!(hours_and_cost(&a), hours_and_cost(&b));
    assert_eq!(hours_and_cost(&a), (d("21"), d("41")));
}

#[test]
fn intervals_across_a_daylight_saving_change_use_real_elapsed_time() {
    // America/New_York leaves daylight saving at 2026-11-01 02:00 EDT (-04:00) → 01:00 EST (-05:00).
    // 00:30-04:00 (04:30Z) to 01:30-05:00 (06:30Z): the wall clock says 1 hour, 2 hours elapsed.
    let a = acc("r", "2026-11-01T00:30:00-04:00", "2026-11-01T01:30:00-05:00", 1, "10");
    assert_eq!(a.amount, d("20"));
    // 01:30-04:00 (05:30Z) to 02:00-05:00 (07:00Z): 1.5 hours, overlapping the first by one hour.
    let b = acc("r", "2026-11-01T01:30:00-04:00", "2026-11-01T02:00:00-05:00", 1, "10");
    assert_eq!(b.amount, d("15"));
    // Merged: 04:30Z–07:00Z = 2.5 hours; cost 20 + 15 × (0.5 / 1.5) = 25.
    let (h, c) = hours_and_cost(&[a, b]);
    assert_eq!(h, d("2.5"));
    assert_eq!(c, d("25"));
}

/// Every category, an overlap, outputs and diagnostics; figures worked out by hand.
#[test]
fn worked_example_cost_per_completed_job() {
    let lines = vec![
        // r1: 10 h × 8 GPUs × 2.50 = 200.00, then a line billed again from 08:00 to 12:00 (80.00).
        acc("r1", "2026-03-01T00:00:00Z", "2026-03-01T10:00:00Z", 8, "2.50"),
        acc("r1", "2026-03-01T08:00:00Z", "2026-03-01T12:00:00Z", 8, "2.50"),
        // r2 runs at the same time: 4 h × 1 GPU for a billed 6.00.
        acc_amount("r2", "2026-03-01T00:00:00Z", "2026-03-01T04:00:00Z", 1, "6.00"),
        other("host", "120.00"),
        other("storage", "15.50"),
        other("network", "4.25"),
        other("support", "30"),
        other("license", "9.75"),
    ];
    let outputs = Outputs {
        accepted: 1000,
        rejected: 50,
        retries: 20,
        failed_jobs: 7,
        idle_hours: Some(d("25")),
    };
    let s = summarize(&lines, &outputs, "USD");
    // r1 merged 00:00–12:00 = 12 h × 8 = 96 GPU-h; r2 4 GPU-h → 100.
    assert_eq!(s.accelerator_hours, d("100"));
    // r1: 200 + 80 × (2 h / 4 h) = 240 (= 96 GPU-h × 2.50); r2: 6 → 246.
    assert_eq!(s.totals.accelerator, d("246"));
    assert_eq!(s.totals.host, d("120"));
    assert_eq!(s.totals.storage, d("15.5"));
    assert_eq!(s.totals.network, d("4.25"));
    assert_eq!(s.totals.support, d("30"));
    assert_eq!(s.totals.license, d("9.75"));
    // 246 + 120 + 15.50 + 4.25 + 30 + 9.75 = 425.50; idle hours and failed jobs are not added in.
    assert_eq!(s.total, d("425.5"));
    assert_eq!(s.accepted_outputs, 1000);
    // 425.50 / 1000 accepted = 0.4255 (not / 1050 or 1007: rejected and failed work is not a job done).
    assert_eq!(s.cost_per_job, Some(d("0.4255")));
    assert_eq!(s.diagnostics.idle_hours, Some(d("25")));
    assert_eq!(s.diagnostics.failed_jobs, 7);
    assert_eq!(s.diagnostics.rejected_outputs, 50);
    assert_eq!(s.diagnostics.retries, 20);
    // (100 − 25) / 100
    assert_eq!(utilization(&s), Some(d("0.75")));

    let json = serde_json::to_value(&s).unwrap();
    assert_eq!(json["total"], "425.5");
    assert_eq!(json["cost_per_job"], "0.4255");
    assert_eq!(json["totals"]["accelerator"], "246");
    assert_eq!(json["accelerator_hours"], "100");
}

#[test]
fn cost_per_job_and_utilization_are_undefined_without_their_inputs() {
    let s = summarize(&[other("host", "10")], &Outputs::default(), "USD");
    assert_eq!(s.cost_per_job, None);
    assert_eq!(
        serde_json::to_value(&s).unwrap()["cost_per_job"],
        serde_json::Value::Null
    );
    assert_eq!(utilization(&s), None, "no idle figure");
}

fn errors(cells: [&str; 9]) -> Vec<(String, String)> {
    validate_line(&input(cells), "USD")
        .unwrap_err()
        .into_iter()
        .map(|e| (e.field, e.message))
        .collect()
}

#[test]
fn invalid_lines_name_their_fields() {
    let e = errors(["host", "", "", "", "", "", "", "-3", "USD"]);
    assert_eq!(e[0].0, "amount");
    assert!(e[0].1.contains("negative"));
    let e = errors(["accelerator", "r", "", H2, H1, "1", "1", "", "USD"]);
    assert!(e.iter().any(|(f, m)| f == "ends_at" && m.contains("after")), "{e:?}");
    let e = errors(["accelerator", "r", "", "yesterday", H1, "1", "1", "", "USD"]);
    assert!(e.iter().any(|(f, _)| f == "starts_at"), "{e:?}");
    let e = errors(["host", "", "", "", "", "", "", "1", "EUR"]);
    assert!(
        e.iter()
            .any(|(f, m)| f == "currency" && m.contains("EUR") && m.contains("USD")),
        "{e:?}"
    );
    let e = errors(["gpu", "", "", "", "", "", "", "1", "USD"]);
    assert_eq!(e[0].0, "category");
    let e = errors(["accelerator", "", "", "", "", "", "", "", ""]);
    let fields: Vec<&str> = e.iter().map(|(f, _)| f.as_str()).collect();
    for f in ["resource", "starts_at", "ends_at", "gpus", "amount"] {
        assert!(fields.contains(&f), "{f} missing from {fields:?}");
    }
    let e = errors(["storage", "", "", "", "", "", "", "1e3", ""]);
    assert_eq!(e[0].0, "amount");
    // An empty currency means the brief's.
    let ok = validate_line(&input(["storage", "", "", "", "", "", "", "1", ""]), "USD").unwrap();
    assert_eq!(ok.currency, "USD");
    assert_eq!(ok.category, Category::Storage);
}

#[test]
fn a_large_ledger_merges_in_one_pass() {
    let base = DateTime::parse_from_rfc3339(H0).unwrap().with_timezone(&Utc);
    let lines: Vec<LedgerLine> = (0..100_000)
        .map(|i| {
            let start = base + chrono::Duration::minutes(i64::from(i % 1000) * 30);
            LedgerLine {
                category: Category::Accelerator,
                resource: format!("node-{}", i / 1000),
                description: String::new(),
                starts_at: Some(start),
                ends_at: Some(start + chrono::Duration::hours(1)),
                gpus: Some(8),
                rate_per_gpu_hour: None,
                amount: d("16"),
                currency: "USD".into(),
                trial: None,
            }
        })
        .collect();
    let s = summarize(&lines, &Outputs::default(), "USD");
    // Each resource: 1000 one-hour lines every 30 minutes → 500.5 hours merged × 8 GPUs.
    assert_eq!(s.accelerator_hours, d("400400"));
    // Half of every line but the last overlaps its successor: 100 × (999 × 8 + 16) = 800,800.
    assert_eq!(s.totals.accelerator, d("800800"));
}
