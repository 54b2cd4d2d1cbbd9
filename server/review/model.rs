//! Approvals and reservations: validation and the "what changed" of a stale approval. No I/O.

use std::collections::BTreeMap;

use chrono::NaiveDate;
use rust_decimal::Decimal;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{cost_at_slo::MoneyFacts, decision::Verdict};
use crate::ids::TrialId;
use crate::{figures::HOURS_PER_MONTH, validation::FieldError};

/// A manager's verdict on a decision. Stored as the text `approve` / `reject` in
/// `approvals.verdict` and spelt the same on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, sqlx::Type, utoipa::ToSchema)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "text", rename_all = "lowercase")]
pub enum ApprovalVerdict {
    Approve,
    Reject,
}

impl ApprovalVerdict {
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovalVerdict::Approve => "approve",
            ApprovalVerdict::Reject => "reject",
        }
    }

    /// `approved` or `rejected`, as pages and messages say it.
    pub fn done(&self) -> &'static str {
        match self {
            ApprovalVerdict::Approve => "approved",
            ApprovalVerdict::Reject => "rejected",
        }
    }
}

impl std::str::FromStr for ApprovalVerdict {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        [ApprovalVerdict::Approve, ApprovalVerdict::Reject]
            .into_iter()
            .find(|v| v.as_str() == s)
            .ok_or(())
    }
}

impl std::fmt::Display for ApprovalVerdict {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An approval of an action other than the computed one (docs/decision.md, "Override"): recorded as
/// `{ computed, approved, reason }` in the approval's answer, the audit log, the decision record and
/// the `approval.recorded` webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct DecisionOverride {
    pub computed: Verdict,
    pub approved: Verdict,
    pub reason: String,
}

/// The shortest reason an override is accepted with.
pub const MIN_OVERRIDE_REASON_CHARS: usize = 20;

/// The override an approval asks for, checked: `None` when no action is named or it is the
/// computed one; an action other than `computed` needs an approval and a reason of at least
/// [`MIN_OVERRIDE_REASON_CHARS`] characters.
pub fn decision_override(
    verdict: ApprovalVerdict,
    computed: Verdict,
    requested: Option<&str>,
    reason: &str,
) -> Result<Option<DecisionOverride>, Vec<FieldError>> {
    let requested = match requested.map(str::trim).filter(|d| !d.is_empty()) {
        None => return Ok(None),
        Some(d) => d.parse::<Verdict>().map_err(|_| {
            vec![FieldError::new(
                "decision",
                "must be one of expand, reserve, dedicate, scale, stop",
            )]
        })?,
    };
    if requested == computed {
        return Ok(None);
    }
    if verdict != ApprovalVerdict::Approve {
        return Err(vec![FieldError::new(
            "decision",
            "only an approval names another action; a rejection rejects the computed one",
        )]);
    }
    let reason = reason.trim();
    if reason.chars().count() < MIN_OVERRIDE_REASON_CHARS {
        return Err(vec![FieldError::new(
            "override_reason",
            format!(
                "approving {requested} over the computed {computed} needs a reason of at least \
                 {MIN_OVERRIDE_REASON_CHARS} characters saying why"
            ),
        )]);
    }
    if reason.chars().count() > 10_000 {
        return Err(vec![FieldError::new(
            "override_reason",
            "must be at most 10000 characters",
        )]);
    }
    Ok(Some(DecisionOverride {
        computed,
        approved: requested,
        reason: reason.to_owned(),
    }))
}

/// What approving reserve, dedicate or scale commits to: computed by [`reservation`] from the
/// review, the one function the review's first screen, the approval form, the stored approval and
/// the decision record all show (docs/decision.md, "Approval").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Reservation {
    #[schema(value_type = Uuid)]
    pub trial: TrialId,
    /// Who rents it: the trial's provider (absent when it names none).
    pub provider: Option<String>,
    pub gpu: String,
    /// GPUs per node rented: whole nodes of the offer's size.
    pub gpus_per_node: u32,
    pub replicas: u32,
    /// replicas × GPUs per node.
    pub gpus: u32,
    pub billing: String,
    #[serde(with = "rust_decimal::serde::str")]
    pub rate_per_gpu_hour: Decimal,
    pub currency: String,
    pub term_months: u32,
    /// GPUs × rate × 730 hours.
    #[serde(with = "rust_decimal::serde::str")]
    pub monthly_cost: Decimal,
    pub start_date: NaiveDate,
    /// Where the rate comes from, and what is missing ("no reserved price is current …").
    pub note: String,
}

/// "1 month", "12 months".
pub fn months(n: u32) -> String {
    if n == 1 {
        "1 month".into()
    } else {
        format!("{n} months")
    }
}

impl Reservation {
    /// Its size in words: "8 × H100 SXM (2 replicas of 4 GPUs)".
    pub fn size_in_words(&self) -> String {
        format!(
            "{} × {} ({} {} of {} GPUs)",
            self.gpus,
            self.gpu,
            self.replicas,
            if self.replicas == 1 { "replica" } else { "replicas" },
            self.gpus_per_node
        )
    }

    /// The whole term: the monthly cost × the months.
    pub fn total(&self) -> Decimal {
        self.monthly_cost * Decimal::from(self.term_months)
    }
}

/// What a trial's reservation is computed from.
#[derive(Debug, Clone, Copy)]
pub struct ReservationBasis<'a> {
    pub trial: TrialId,
    pub provider: &'a str,
    pub gpu: &'a str,
    pub currency: &'a str,
    pub decision: Verdict,
    /// Rule 4's replicas, for a scale.
    pub suggested_replicas: Option<u32>,
    pub money: Option<&'a MoneyFacts>,
    pub start_date: NaiveDate,
}

/// Why a trial has no reservation to approve.
pub const NO_RATE: &str = "no rate is known for this trial: give its rate per GPU-hour, or import a price sheet \
with its provider's price";

/// The reservation approving `b.decision` would record: the replicas the review computed (rule 4's
/// for a scale; for the brief's expected peak otherwise; 1 without one), whole nodes of the offer,
/// billing `reserved` at the offer's reserved price row when one is current, else the trial's own
/// billing and rate (the note says so), monthly = GPUs × rate × 730. `Err` without any rate.
pub fn reservation(b: &ReservationBasis<'_>) -> Result<Reservation, &'static str> {
    let money = b.money.ok_or(NO_RATE)?;
    let replicas = match b.decision {
        Verdict::Scale => b.suggested_replicas.unwrap_or(1),
        _ => money.replicas_for_peak.unwrap_or(1),
    }
    .max(1);
    let provider = (!b.provider.trim().is_empty()).then(|| b.provider.trim().to_owned());
    let who = provider.clone().unwrap_or_else(|| "the provider".into());
    let rates = &money.reservation_rates;
    let (billing, rate, per_node, note) = match (rates.reserved_rate, rates.reserved_gpus_billed, &money.rate) {
        (Some(rate), Some(per_node), _) => (
            "reserved".to_owned(),
            rate,
            per_node,
            format!(
                "at {}",
                rates
                    .reserved_description
                    .clone()
                    .unwrap_or_else(|| format!("{who}'s reserved price"))
            ),
        ),
        (_, _, Some(r)) => (
            r.billing.clone(),
            r.per_gpu_hour,
            r.gpus_billed,
            format!(
                "no reserved price is current for this offer, so this keeps the trial's own {} billing and rate \
                 ({}); ask {who} for a reserved price, or import one on the Prices page",
                r.billing, r.description
            ),
        ),
        _ => return Err(NO_RATE),
    };
    let gpus = replicas * per_node.max(1);
    Ok(Reservation {
        trial: b.trial,
        provider,
        gpu: b.gpu.to_owned(),
        gpus_per_node: per_node.max(1),
        replicas,
        gpus,
        term_months: if billing == "reserved" { 12 } else { 1 },
        billing,
        monthly_cost: monthly_cost(gpus, rate),
        rate_per_gpu_hour: rate,
        currency: b.currency.to_owned(),
        start_date: b.start_date,
        note,
    })
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

/// The longest term a manager may choose.
pub const MAX_TERM_MONTHS: u32 = 60;

/// A manager's choices on a computed reservation: its term and start date. Every other field is
/// what the review computed; a field sent with another value is refused at that field (change the
/// trial, the prices or the brief instead), so the approval records exactly the review's figures.
pub fn apply_choices(r: &mut Reservation, fields: &BTreeMap<String, String>) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    let get = |k: &str| fields.get(k).map(|s| s.trim()).filter(|s| !s.is_empty());
    if let Some(t) = get("term_months") {
        match t.parse::<u32>() {
            Ok(n) if (1..=MAX_TERM_MONTHS).contains(&n) => r.term_months = n,
            _ => errors.push(FieldError::new(
                "reservation.term_months",
                format!("must be a whole number from 1 to {MAX_TERM_MONTHS}"),
            )),
        }
    }
    // The API names it start_date, the form start: the message goes to the field that was sent.
    let start = get("start_date")
        .map(|d| ("start_date", d))
        .or_else(|| get("start").map(|d| ("start", d)));
    if let Some((field, d)) = start {
        match NaiveDate::parse_from_str(d, "%Y-%m-%d") {
            Ok(d) => r.start_date = d,
            Err(_) => errors.push(FieldError::new(
                format!("reservation.{field}"),
                "must be a date like 2026-12-01",
            )),
        }
    }
    let fixed: [(&str, String); 9] = [
        ("gpu", r.gpu.clone()),
        ("count", r.gpus.to_string()),
        ("gpus", r.gpus.to_string()),
        ("replicas", r.replicas.to_string()),
        ("gpus_per_node", r.gpus_per_node.to_string()),
        ("billing", r.billing.clone()),
        ("rate_per_gpu_hour", r.rate_per_gpu_hour.normalize().to_string()),
        ("currency", r.currency.clone()),
        ("monthly_cost", r.monthly_cost.normalize().to_string()),
    ];
    for (k, computed) in fixed {
        let Some(sent) = get(k) else { continue };
        let same = match (sent.parse::<Decimal>(), computed.parse::<Decimal>()) {
            (Ok(a), Ok(b)) => a == b,
            // The billing words of the price sheets, in any of the spellings they accept.
            _ if k == "billing" => {
                crate::figures::billing(sent).is_some_and(|w| Some(w) == crate::figures::billing(&computed))
            }
            _ => sent.eq_ignore_ascii_case(&computed),
        };
        if !same {
            // Money as people read it: "14,541.60 USD", not "14541.6".
            let shown = match k {
                "monthly_cost" => crate::figures::with_currency(r.monthly_cost, &r.currency),
                "rate_per_gpu_hour" => crate::figures::rate_with_currency(r.rate_per_gpu_hour, &r.currency),
                _ => computed,
            };
            errors.push(FieldError::new(
                format!("reservation.{k}"),
                format!(
                    "is what the review computed ({shown}); an approval records the review's reservation, so \
                     change the trial, its prices or the brief instead"
                ),
            ));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
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
    use uuid::Uuid;

    #[test]
    fn a_verdict_is_stored_and_sent_as_approve_or_reject() {
        for v in [ApprovalVerdict::Approve, ApprovalVerdict::Reject] {
            assert_eq!(v.as_str().parse::<ApprovalVerdict>(), Ok(v));
            assert_eq!(serde_json::to_value(v).unwrap(), v.as_str());
            assert_eq!(v.to_string(), v.as_str());
        }
        assert_eq!(ApprovalVerdict::Approve.done(), "approved");
        assert!(
            "Approve".parse::<ApprovalVerdict>().is_err(),
            "stored text is lower-case"
        );
        assert_eq!("dedicate".parse::<Verdict>(), Ok(Verdict::Dedicate));
        assert!("hold".parse::<Verdict>().is_err());
    }
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

    fn computed() -> Reservation {
        Reservation {
            trial: TrialId::from(Uuid::nil()),
            provider: Some("Cloud A".into()),
            gpu: "H100 SXM".into(),
            gpus_per_node: 8,
            replicas: 3,
            gpus: 24,
            billing: "reserved".into(),
            rate_per_gpu_hour: "2.10".parse().unwrap(),
            currency: "USD".into(),
            term_months: 12,
            monthly_cost: monthly_cost(24, "2.10".parse().unwrap()),
            start_date: NaiveDate::from_ymd_opt(2026, 12, 3).unwrap(),
            note: String::new(),
        }
    }

    #[test]
    fn a_manager_chooses_the_term_and_start_but_never_the_figures() {
        let mut r = computed();
        // 24 × 2.10 × 730 = 36,792.00 a month.
        assert_eq!(r.monthly_cost, "36792".parse::<Decimal>().unwrap());
        let choices: BTreeMap<String, String> = [("term_months", "6"), ("start_date", "2027-01-01"), ("count", "24")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        apply_choices(&mut r, &choices).unwrap();
        assert_eq!((r.term_months, r.start_date.to_string()), (6, "2027-01-01".into()));
        assert_eq!(r.total(), "220752".parse::<Decimal>().unwrap());
        let bad: BTreeMap<String, String> = [("rate_per_gpu_hour", "1.00"), ("count", "8"), ("start", "soon")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        let fields: Vec<String> = apply_choices(&mut computed(), &bad)
            .unwrap_err()
            .into_iter()
            .map(|e| e.field)
            .collect();
        assert_eq!(
            fields,
            [
                "reservation.start",
                "reservation.count",
                "reservation.rate_per_gpu_hour"
            ]
        );
    }

    #[test]
    fn changed_inputs_names_what_moved() {
        let a = json!({ "brief": { "currency": "USD", "sized_count": 2 }, "criteria": [1], "ledger": null });
        let b = json!({ "brief": { "currency": "USD", "sized_count": 4 }, "criteria": [1, 2], "ledger": null });
        assert_eq!(changed_inputs(&a, &b), ["brief.sized_count", "criteria"]);
        assert!(changed_inputs(&a, &a).is_empty());
    }

    #[test]
    fn an_override_needs_an_approval_and_a_reason_of_twenty_characters() {
        use ApprovalVerdict::{Approve, Reject};
        let field = |r: Result<Option<DecisionOverride>, Vec<FieldError>>| r.unwrap_err()[0].field.clone();
        assert_eq!(decision_override(Approve, Verdict::Expand, None, ""), Ok(None));
        assert_eq!(
            decision_override(Approve, Verdict::Expand, Some("expand"), ""),
            Ok(None),
            "the computed action is no override"
        );
        assert_eq!(
            field(decision_override(Approve, Verdict::Expand, Some("rent"), "")),
            "decision"
        );
        assert_eq!(
            field(decision_override(
                Approve,
                Verdict::Expand,
                Some("reserve"),
                "  capacity is scarce! "
            )),
            "override_reason",
            "19 characters once trimmed"
        );
        assert_eq!(
            field(decision_override(
                Reject,
                Verdict::Expand,
                Some("reserve"),
                "a reason long enough here"
            )),
            "decision"
        );
        assert_eq!(
            decision_override(Approve, Verdict::Expand, Some("reserve"), " capacity is scarce!! "),
            Ok(Some(DecisionOverride {
                computed: Verdict::Expand,
                approved: Verdict::Reserve,
                reason: "capacity is scarce!!".into(),
            }))
        );
    }
}
