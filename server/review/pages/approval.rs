//! The approval as the review page shows it: the verdict recorded and its reservation in words,
//! the confirmation after a verdict, the approve button's words, and the approval form (the
//! reservation it holds, what a re-rendered form keeps, its field labels and messages).

use std::collections::BTreeMap;

use crate::{
    figures,
    ids::TrialId,
    review::{
        decision::Verdict,
        decision_view, first_screen,
        model::{apply_choices, months, ApprovalVerdict, Reservation},
        service::{Review, TrialReview},
    },
    validation::FieldError,
};

pub(super) struct ApprovalView {
    /// "approved" or "rejected".
    pub(super) done: &'static str,
    /// Approved, not rejected: the badge's colour.
    pub(super) approved: bool,
    pub(super) verdict: ApprovalVerdict,
    pub(super) decision: Verdict,
    /// The name of the trial the verdict was given on.
    pub(super) trial: String,
    /// An override in words: "Approved reserve over the computed expand: <reason>".
    pub(super) override_line: Option<String>,
    pub(super) by: String,
    pub(super) at: String,
    pub(super) comment: String,
    pub(super) stale: bool,
    pub(super) changed: String,
    pub(super) reservation: Option<String>,
}

/// What a re-rendered approval form keeps: the values typed and what was wrong with them.
#[derive(Default)]
pub(super) struct FormState {
    pub(super) reservation: Option<BTreeMap<String, String>>,
    pub(super) trial: Option<TrialId>,
    pub(super) comment: String,
    /// The override's action and reason as typed.
    pub(super) override_choice: String,
    pub(super) override_reason: String,
    pub(super) field_errors: BTreeMap<String, String>,
    pub(super) problem: String,
}

pub(super) fn approval_view(r: &Review) -> Option<ApprovalView> {
    let a = r.approval.as_ref()?;
    let currency = &r.context.inputs.brief.currency;
    Some(ApprovalView {
        done: a.row.verdict.done(),
        approved: a.row.verdict == ApprovalVerdict::Approve,
        verdict: a.row.verdict,
        decision: a.row.decision,
        trial: first_screen::approved_trial_name(r).unwrap_or_default(),
        override_line: first_screen::recorded_override(&a.row).map(|o| {
            // decision.md's words, the reason as typed after the colon.
            format!("Approved {} over the computed {}: {}", o.approved, o.computed, o.reason)
        }),
        by: a.row.decided_by.clone(),
        at: a.row.decided_at.format("%Y-%m-%d %H:%M UTC").to_string(),
        comment: a.row.comment.clone(),
        stale: a.stale,
        changed: decision_view::changed_in_words(&a.changed, r),
        reservation: recorded_reservation(r).map(|res| {
            format!(
                "{}, {}, {} from {}, at {} per GPU-hour: {} a month, {} in all",
                res.size_in_words(),
                res.billing,
                months(res.term_months),
                res.start_date,
                figures::rate_with_currency(res.rate_per_gpu_hour, currency),
                figures::sum_with_currency(res.monthly_cost, currency),
                figures::sum_with_currency(res.total(), currency),
            )
        }),
    })
}

/// The reservation the latest approval recorded, if it recorded one: the object it kept, else
/// (approvals recorded before it was kept) what its columns say.
pub(super) fn recorded_reservation(r: &Review) -> Option<Reservation> {
    let row = &r.approval.as_ref()?.row;
    if let Some(kept) = row
        .reservation
        .as_ref()
        .and_then(|j| serde_json::from_value::<Reservation>(j.0.clone()).ok())
    {
        return Some(kept);
    }
    let gpus = u32::try_from(row.reservation_count?).ok()?;
    Some(Reservation {
        trial: row.trial_id.unwrap_or(r.context.trial.id),
        provider: row.reservation_provider.clone(),
        gpu: row.reservation_gpu.clone()?,
        gpus_per_node: gpus,
        replicas: 1,
        gpus,
        billing: row.reservation_billing.clone().unwrap_or_default(),
        rate_per_gpu_hour: row.reservation_rate_per_gpu_hour.unwrap_or_default(),
        currency: r.brief.fields.currency.clone(),
        term_months: u32::try_from(row.reservation_term_months?).ok()?,
        monthly_cost: row.reservation_monthly_cost?,
        start_date: row.reservation_start?,
        note: String::new(),
    })
}

/// The line that confirms a verdict just recorded, shown at the top after the redirect.
pub(super) fn confirmation(r: &Review, decided: Option<&str>) -> Option<String> {
    let a = r.approval.as_ref()?;
    if decided? != a.row.id.to_string() {
        return None;
    }
    let at = a.row.decided_at.format("%Y-%m-%d %H:%M UTC");
    let currency = &r.brief.fields.currency;
    let trial = a.row.trial_id.and_then(|id| r.trial(id)).unwrap_or(&r.trials[r.chosen]);
    let recorded = recorded_reservation(r);
    Some(if a.row.verdict == ApprovalVerdict::Approve {
        let mut text = format!(
            "Approved by {} at {at}: {}",
            a.row.decided_by,
            decision_view::action(trial.decision.decision, trial, recorded.as_ref())
        );
        if let Some(res) = &recorded {
            text.push_str(&format!(
                ", {} a month, {} in all",
                figures::sum_with_currency(res.monthly_cost, currency),
                figures::sum_with_currency(res.total(), currency)
            ));
        }
        text.push('.');
        text
    } else {
        format!(
            "Rejected by {} at {at}: {} was not approved. “{}”",
            a.row.decided_by, a.row.decision, a.row.comment
        )
    })
}

/// The approve button's words: the action approving `t` records and the trial it names, so what
/// the button says is what is recorded ("Approve: stop renting 4 × H100 SXM — trial “4 × H100 · Cloud B”").
pub(super) fn approve_words(t: &TrialReview, commitment: Option<&Reservation>) -> String {
    format!(
        "Approve: {} — trial “{}”",
        decision_view::action(t.decision.decision, t, commitment),
        t.context.trial.fields.name
    )
}

/// The form's monthly figure and the whole term, from the reservation the approval records
/// (computed by the review, with the manager's term and start applied). static/review.js
/// recomputes the whole term as the manager types.
pub(super) fn preview(reservation: Option<&Reservation>, currency: &str) -> (String, String) {
    match reservation {
        Some(res) => (
            format!("{} a month", figures::sum_with_currency(res.monthly_cost, currency)),
            format!(
                "{} over {}",
                figures::sum_with_currency(res.total(), currency),
                months(res.term_months)
            ),
        ),
        None => ("needs a rate per GPU-hour".into(), String::new()),
    }
}

/// A reservation as the form shows it: every field, the computed ones read-only.
pub(super) fn form_fields(res: &Reservation) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("gpu".to_owned(), res.gpu.clone()),
        ("count".to_owned(), res.gpus.to_string()),
        ("billing".to_owned(), res.billing.clone()),
        ("term_months".to_owned(), res.term_months.to_string()),
        ("start".to_owned(), res.start_date.to_string()),
        ("rate_per_gpu_hour".to_owned(), figures::plain(res.rate_per_gpu_hour)),
    ])
}

/// The reservation the form holds for `t`: the computed one with the manager's choices (term,
/// start) when they are valid.
pub(super) fn form_reservation(t: &TrialReview, typed: Option<&BTreeMap<String, String>>) -> Option<Reservation> {
    let mut res = t.recorded_reservation()?.clone();
    if let Some(typed) = typed {
        let choices: BTreeMap<String, String> = typed
            .iter()
            .filter(|(k, _)| matches!(k.as_str(), "term_months" | "start" | "start_date"))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut chosen = res.clone();
        if apply_choices(&mut chosen, &choices).is_ok() {
            res = chosen;
        }
    }
    Some(res)
}

/// The label of an approval form field, for the list of problems at the top.
pub(super) fn field_label(field: &str) -> &str {
    match field {
        "reservation.gpu" => "GPU model",
        "reservation.count" => "Count (GPUs)",
        "reservation.billing" => "Billing model",
        "reservation.term_months" => "Term (months)",
        "reservation.start" | "reservation.start_date" => "Start",
        "reservation.rate_per_gpu_hour" => "Rate per GPU-hour",
        "comment" => "Comment",
        "trial" => "Trial",
        "decision" => "Action to approve instead",
        "override_reason" => "Why (override)",
        "acknowledge_mismatch" => "Another GPU in the evidence",
        "verdict" => "Verdict",
        other => other,
    }
}

/// A field's message as the form shows it: the field's name is the label beside it.
pub(super) fn field_messages(errors: &[FieldError]) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for e in errors {
        let message = decision_view::capitalized(&e.message);
        out.entry(e.field.clone())
            .and_modify(|m| {
                m.push_str("; ");
                m.push_str(&e.message);
            })
            .or_insert(message);
    }
    out
}
