//! Approvals and reservations: validation and the "what changed" of a stale approval. No I/O.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde_json::Value;

use crate::validation::FieldError;

use crate::money::HOURS_PER_MONTH;

pub const BILLING_MODELS: [&str; 4] = ["on-demand", "reserved", "spot", "dedicated"];

/// What approving reserve, dedicate or scale commits to.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Reservation {
    /// Who rents it: the reserved trial's provider.
    pub provider: Option<String>,
    pub gpu: String,
    pub count: u32,
    pub billing: String,
    pub term_months: u32,
    pub start: NaiveDate,
    pub rate_per_gpu_hour: Decimal,
    pub monthly_cost: Decimal,
}

/// The expected monthly accelerator cost of `count` GPUs at `rate` per GPU-hour.
pub fn monthly_cost(count: u32, rate: Decimal) -> Decimal {
    (Decimal::from(count) * rate * HOURS_PER_MONTH).round_dp(2)
}

/// What a reservation commits to over its whole term: the monthly cost × the term in months
/// (count × rate × 730 hours × months), from the same rounded monthly figure the approval records.
pub fn total_commitment(count: u32, rate: Decimal, term_months: u32) -> Decimal {
    monthly_cost(count, rate) * Decimal::from(term_months)
}

/// Reservation fields as strings (a form, or JSON values turned to text), over defaults.
pub fn parse_reservation(fields: &BTreeMap<String, String>) -> Result<Reservation, Vec<FieldError>> {
    let mut errors = Vec::new();
    let get = |k: &str| fields.get(k).map(|s| s.trim()).filter(|s| !s.is_empty());
    let gpu = match get("gpu") {
        Some(g) => crate::sizing::gpu_by_name(g)
            .map(|s| s.model.clone())
            .unwrap_or_else(|| {
                errors.push(FieldError::new("reservation.gpu", "is not in the GPU catalogue"));
                String::new()
            }),
        None => {
            errors.push(FieldError::new("reservation.gpu", "is required"));
            String::new()
        }
    };
    let mut positive = |k: &str, max: u32| -> u32 {
        match get(k).map(str::parse::<u32>) {
            Some(Ok(n)) if n > 0 && n <= max => n,
            _ => {
                errors.push(FieldError::new(
                    format!("reservation.{k}"),
                    format!("must be a whole number from 1 to {max}"),
                ));
                0
            }
        }
    };
    let count = positive("count", 4096);
    let term_months = positive("term_months", 60);
    let billing = match get("billing") {
        Some(b) if BILLING_MODELS.contains(&b) => b.to_owned(),
        _ => {
            errors.push(FieldError::new(
                "reservation.billing",
                format!("must be one of: {}", BILLING_MODELS.join(", ")),
            ));
            String::new()
        }
    };
    let start = match get("start").map(|s| NaiveDate::parse_from_str(s, "%Y-%m-%d")) {
        Some(Ok(d)) => d,
        _ => {
            errors.push(FieldError::new("reservation.start", "must be a date like 2026-12-01"));
            NaiveDate::MIN
        }
    };
    let rate = match get("rate_per_gpu_hour").map(str::parse::<Decimal>) {
        Some(Ok(r)) if !r.is_sign_negative() && r < Decimal::from(100_000) => r,
        _ => {
            errors.push(FieldError::new(
                "reservation.rate_per_gpu_hour",
                "must be a decimal such as 2.49",
            ));
            Decimal::ZERO
        }
    };
    if !errors.is_empty() {
        return Err(errors);
    }
    Ok(Reservation {
        provider: get("provider").map(str::to_owned),
        monthly_cost: monthly_cost(count, rate),
        gpu,
        count,
        billing,
        term_months,
        start,
        rate_per_gpu_hour: rate,
    })
}

/// The top-level inputs (and, one level down, the fields) that differ between two snapshots of
/// the decision's inputs, e.g. `criteria`, `ledger.total`, `metrics.serving.ttft_p95_ms`.
pub fn changed_inputs(before: &Value, now: &Value) -> Vec<String> {
    let mut changed = Vec::new();
    let (Some(b), Some(n)) = (before.as_object(), now.as_object()) else {
        return vec!["everything".into()];
    };
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(n.keys()).collect();
    for key in keys {
        match (b.get(key), n.get(key)) {
            (Some(Value::Object(bo)), Some(Value::Object(no))) => {
                let inner: std::collections::BTreeSet<&String> = bo.keys().chain(no.keys()).collect();
                for k in inner {
                    if bo.get(k) != no.get(k) {
                        changed.push(format!("{key}.{k}"));
                    }
                }
            }
            (x, y) if x != y => changed.push(key.clone()),
            _ => {}
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn monthly_cost_is_exact() {
        // 8 GPUs × 2.49 per GPU-hour × 730 hours = 14,541.60
        assert_eq!(
            monthly_cost(8, "2.49".parse().unwrap()),
            "14541.60".parse::<Decimal>().unwrap()
        );
    }

    #[test]
    fn the_commitment_is_the_recorded_monthly_figure_times_the_term() {
        // 8 × 3.50 × 730 = 20,440.00 a month; 12 months: 245,280.00.
        assert_eq!(
            total_commitment(8, "3.50".parse().unwrap(), 12),
            "245280".parse::<Decimal>().unwrap()
        );
        // The case: 8 × 2.60 × 730 = 15,184.00 a month, whatever was previewed before.
        assert_eq!(
            monthly_cost(8, "2.60".parse().unwrap()),
            "15184".parse::<Decimal>().unwrap()
        );
    }

    #[test]
    fn reservation_fields_are_checked() {
        let ok: BTreeMap<String, String> = [
            ("gpu", "h100 sxm"),
            ("count", "8"),
            ("billing", "reserved"),
            ("term_months", "12"),
            ("start", "2026-12-01"),
            ("rate_per_gpu_hour", "2.10"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let r = parse_reservation(&ok).unwrap();
        assert_eq!(r.gpu, "H100 SXM");
        assert_eq!(r.monthly_cost, "12264.00".parse::<Decimal>().unwrap());
        let mut bad = ok.clone();
        bad.insert("count".into(), "0".into());
        bad.insert("billing".into(), "forever".into());
        bad.insert("start".into(), "soon".into());
        let fields: Vec<String> = parse_reservation(&bad)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            ["reservation.count", "reservation.billing", "reservation.start"]
        );
    }

    #[test]
    fn changed_inputs_names_what_moved() {
        let a = json!({ "brief": { "currency": "USD", "sized_count": 2 }, "criteria": [1], "ledger": null });
        let b = json!({ "brief": { "currency": "USD", "sized_count": 4 }, "criteria": [1, 2], "ledger": null });
        assert_eq!(changed_inputs(&a, &b), ["brief.sized_count", "criteria"]);
        assert!(changed_inputs(&a, &a).is_empty());
    }
}
