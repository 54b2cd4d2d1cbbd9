//! The review page's view: the template's fields, filled by `page` in the order the template shows
//! them from the sections beside this file, and what the form's helpers tell the template.

use std::collections::BTreeMap;

use askama::Template;

use super::{
    approval::{
        approval_view, approve_words, confirmation, field_label, form_fields, form_reservation, preview,
        recorded_reservation, ApprovalView, FormState,
    },
    compare::{comparison, ComparisonRow, TrialColumn, TrialCosts},
    criteria::{cost_bars, latency_bars, reason_view, stages, CostBar, LatencyBar, ReasonView, StageView},
    record::filters,
    STAGE_NAMES,
};
use crate::{
    auth::Role,
    figures,
    review::{
        cost_at_slo_view::{money_section, MoneySection},
        decision::{Status, Verdict},
        decision_view,
        first_screen::{self, BriefLine, MoneyFigure},
        gather::TrialKv,
        model::{ApprovalVerdict, Reservation},
        service::{needs_reservation, Review, TrialReview},
    },
    web::{auth::PageUser, page::PageContext},
};

#[derive(Template)]
#[template(path = "review/review.html")]
pub(super) struct ReviewPage {
    ctx: PageContext,
    /// A commitment of the brief whose renewal is due: renew, resize or release, and how.
    pub(super) renewal: Option<crate::commitments::service::RenewalNotice>,
    brief_id: String,
    brief_name: String,
    decision: &'static str,
    /// What the verdict means for a manager ("keep renting by the hour, commit to nothing yet").
    decision_meaning: &'static str,
    /// The approval next to the verdict: by whom, and whether it went stale and why.
    approval_line: String,
    approval_state: &'static str,
    /// "Load figures judged at 8 req/s of the 4–16 req/s sweep (3 load points)."
    operating_line: Option<String>,
    /// Evidence naming another GPU model than the decided trial's.
    gpu_mismatch: Option<(String, String)>,
    /// The GPU model the form's trial's evidence names instead of its own: approving asks to
    /// acknowledge it.
    selected_mismatch: Option<String>,
    /// The approve button's words: what approving records and the trial it names ("Approve:
    /// reserve 8 × H200 SXM for 12 months — trial “8 × H200 · Cloud A”").
    action: String,
    /// The name of the trial the form names.
    selected_name: String,
    /// The reservation comparison of the trial the form names, in words (the approval preview).
    comparison: String,
    /// Rule 8b's call to action: the price import with the decided trial's offer filled in, when
    /// no reserved price of it is known.
    reserved_price_link: Option<String>,
    /// The deciding reason in one plain sentence, and its rule number.
    why: String,
    deciding_rule: String,
    brief_lines: Vec<BriefLine>,
    figures: Vec<MoneyFigure>,
    /// After a verdict was recorded (post/redirect/get): what was recorded, shown at the top.
    flash: Option<String>,
    /// A bad verdict: each field's message, and what is wrong overall (shown at the top).
    field_errors: BTreeMap<String, String>,
    problem: String,
    comment: String,
    override_choice: String,
    override_reason: String,
    /// The override select's actions: every action but the computed one.
    override_options: Vec<&'static str>,
    /// The action the override button approves: the one chosen (kept after a reload or an error),
    /// else the select's first, so the button names it without JavaScript too.
    override_action: &'static str,
    /// "20,440 USD a month", and the whole term: "245,280 USD over 12 months".
    monthly_total: String,
    currency: String,
    /// The verb static/review.js puts before "N × GPU for M months" on the approve button.
    approve_verb: &'static str,
    /// Where the reservation's figures come from ("no reserved price is current …").
    reservation_note: String,
    /// Why there is no reservation to approve (no rate known).
    reservation_missing: String,
    accepted: bool,
    reasons: Vec<ReasonView>,
    stages: Vec<StageView>,
    missing: Vec<(String, String)>,
    latency: Vec<LatencyBar>,
    costs: Vec<CostBar>,
    cost_per_job: String,
    approval: Option<ApprovalView>,
    may_decide: bool,
    needs_reservation: bool,
    reservation: BTreeMap<String, String>,
    monthly_preview: String,
    digest: String,
    several_trials: bool,
    /// The trial the brief-level decision above is taken from.
    trial_name: String,
    recommended: Option<String>,
    /// With none recommended: the closest trial and what it lacks.
    closest: Option<(String, String)>,
    /// The trial the approval form names (the recommended one unless the manager picked another).
    selected_trial: String,
    selected_decision: &'static str,
    trial_columns: Vec<TrialColumn>,
    comparison_rows: Vec<ComparisonRow>,
    trial_costs: TrialCosts,
    money: MoneySection,
    /// The decided trial's predicted KV-cache capacity beside vLLM's logged one.
    kv: Option<TrialKv>,
}

impl ReviewPage {
    /// A verdict is recorded and still current, and the manager is not correcting a form: the
    /// approval section shows what was recorded, the form to decide again folded away.
    fn settled(&self) -> bool {
        self.approval.as_ref().is_some_and(|a| !a.stale) && self.problem.is_empty()
    }

    fn reserved(&self, field: &str) -> &str {
        self.reservation.get(field).map(String::as_str).unwrap_or("")
    }

    /// The message for a form field (`reservation.count`, `comment`, `trial`), empty when fine.
    fn error_for(&self, field: &str) -> &str {
        self.field_errors.get(field).map(String::as_str).unwrap_or("")
    }

    fn label_of<'a>(&self, field: &'a str) -> &'a str {
        field_label(field)
    }

    fn reservation_error(&self, field: &str) -> &str {
        self.error_for(&format!("reservation.{field}"))
    }

    /// A reservation field the review computed (shown read-only): all but the term and the start.
    fn fixed(&self, field: &str) -> bool {
        !matches!(field, "term_months" | "start")
    }

    /// What the phone's keyboard should offer for a reservation field.
    fn input_mode(&self, field: &str) -> &'static str {
        match field {
            "count" | "term_months" => "numeric",
            "rate_per_gpu_hour" => "decimal",
            _ => "text",
        }
    }

    /// The element id of a form field: `reservation.count` → `reservation-count`.
    fn field_id(&self, field: &str) -> String {
        field.replace('.', "-")
    }
}

/// The review page's view, field by field in the order the template shows them.
pub(super) fn page(r: &Review, user: &PageUser, form: FormState, decided: Option<&str>) -> ReviewPage {
    let brief_id = r.brief.id.to_string();
    let selected = form.trial.and_then(|id| r.trial(id)).unwrap_or(&r.trials[r.chosen]);
    let form_commitment = form_reservation(selected, form.reservation.as_ref());
    let reservation = reservation_fields(form_commitment.as_ref(), form.reservation.as_ref());
    let currency = &r.context.inputs.brief.currency;
    let (trial_columns, comparison_rows, trial_costs) = comparison(r);
    let (monthly_preview, monthly_total) = preview(form_commitment.as_ref(), currency);
    let chosen = &r.trials[r.chosen];
    let top_commitment = top_commitment(r);
    let approval = approval_view(r);
    let changed = approval.as_ref().map(|a| a.changed.clone()).unwrap_or_default();
    let latency = latency_bars(r);
    let costs = cost_bars(r);
    ReviewPage {
        ctx: user.into(),
        renewal: None,
        brief_name: r.brief.fields.name.clone(),
        decision: r.decision.decision.as_str(),
        decision_meaning: first_screen::verdict_meaning(r.decision.decision),
        approval_line: first_screen::approval_line(r, &changed),
        approval_state: approval_state(r),
        operating_line: first_screen::operating_line(chosen),
        selected_mismatch: selected.context.gpu_mismatch.as_ref().map(|(_, named)| named.clone()),
        gpu_mismatch: gpu_mismatch(chosen),
        reservation_note: form_commitment.as_ref().map(|c| c.note.clone()).unwrap_or_default(),
        reservation_missing: reservation_missing(selected),
        action: approve_words(selected, form_commitment.as_ref()),
        selected_name: selected.context.trial.fields.name.clone(),
        comparison: decision_view::comparison_sentence(selected, currency),
        reserved_price_link: (chosen.decision.reservation.reserved_rate_per_gpu_hour.is_none())
            .then(|| first_screen::reserved_price_import(chosen, currency)),
        why: why_sentence(r, chosen, currency),
        deciding_rule: r
            .decision
            .reasons
            .first()
            .map(|x| x.rule.to_string())
            .unwrap_or_default(),
        brief_lines: first_screen::brief_lines(r),
        figures: first_screen::money_figures(r, top_commitment.as_ref()),
        flash: confirmation(r, decided),
        field_errors: form.field_errors,
        problem: form.problem,
        comment: form.comment,
        override_options: override_options(selected.decision.decision),
        override_action: override_action(&form.override_choice, selected.decision.decision),
        override_choice: form.override_choice,
        override_reason: form.override_reason,
        monthly_total,
        currency: currency.clone(),
        approve_verb: approve_verb(selected.decision.decision),
        accepted: r.decision.accepted,
        reasons: r.decision.reasons.iter().map(|x| reason_view(x, r)).collect(),
        stages: stages(r),
        missing: missing_lines(r),
        latency,
        costs,
        cost_per_job: cost_per_job(r, currency),
        approval,
        may_decide: user.0.role >= Role::Manager,
        needs_reservation: needs_reservation(selected.decision.decision),
        reservation,
        monthly_preview,
        digest: r.decision.inputs_digest.clone(),
        brief_id,
        money: money_section(r),
        kv: r.context.kv.clone(),
        several_trials: r.trials.len() > 1,
        trial_name: r.context.trial.fields.name.clone(),
        recommended: recommended(r),
        closest: closest(r),
        selected_trial: selected.context.trial.id.to_string(),
        selected_decision: selected.decision.decision.as_str(),
        trial_columns,
        comparison_rows,
        trial_costs,
    }
}

/// The evidence (its id) that names another GPU model than the trial's, and the model it names.
fn gpu_mismatch(chosen: &TrialReview) -> Option<(String, String)> {
    chosen
        .context
        .gpu_mismatch
        .as_ref()
        .map(|(id, named)| (id.to_string(), named.clone()))
}

/// Why the selected trial has no reservation to approve, if it has none.
fn reservation_missing(selected: &TrialReview) -> String {
    selected
        .reservation
        .as_ref()
        .and_then(|x| x.as_ref().err())
        .map(|why| (*why).to_owned())
        .unwrap_or_default()
}

/// The verb of the approve button for a decision that commits.
fn approve_verb(decision: Verdict) -> &'static str {
    match decision {
        Verdict::Reserve => "reserve",
        Verdict::Dedicate => "dedicate",
        Verdict::Scale => "scale to",
        _ => "",
    }
}

/// The recommended trial's name.
fn recommended(r: &Review) -> Option<String> {
    r.recommendation
        .recommended
        .and_then(|id| r.trial(id))
        .map(|t| t.context.trial.fields.name.clone())
}

/// The trial closest to being accepted, and what it lacks.
fn closest(r: &Review) -> Option<(String, String)> {
    r.recommendation
        .closest
        .and_then(|id| r.trial(id))
        .map(|t| (t.context.trial.fields.name.clone(), lacks(t)))
}

/// The reservation form's fields: what the manager typed (kept after an error) over the computed
/// ones.
fn reservation_fields(
    form_commitment: Option<&Reservation>,
    typed: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    let mut reservation = form_commitment.map(form_fields).unwrap_or_default();
    if let Some(typed) = typed {
        for (k, v) in typed {
            if matches!(k.as_str(), "term_months" | "start") {
                reservation.insert(k.clone(), v.clone());
            }
        }
    }
    reservation
}

/// The commitment on the first screen: the approved reservation while it holds, else the one
/// approving the decided trial would record.
fn top_commitment(r: &Review) -> Option<Reservation> {
    let recorded = match &r.approval {
        Some(a) if a.row.verdict == ApprovalVerdict::Approve && !a.stale => recorded_reservation(r),
        _ => None,
    };
    let computed = r.trials[r.chosen].recorded_reservation().cloned();
    recorded.or(computed)
}

/// Where the approval stands: none, stale, approved or rejected.
fn approval_state(r: &Review) -> &'static str {
    match &r.approval {
        None => "none",
        Some(a) if a.stale => "stale",
        Some(a) if a.row.verdict == ApprovalVerdict::Approve => "approved",
        Some(_) => "rejected",
    }
}

/// Why the decision is what it is: its first reason, in a sentence.
fn why_sentence(r: &Review, chosen: &TrialReview, currency: &str) -> String {
    r.decision
        .reasons
        .first()
        .map(|reason| decision_view::reason_sentence(reason, chosen, currency, r.brief.fields.cost_unit.as_str()))
        .unwrap_or_default()
}

/// The evidence each stage still misses, by stage.
fn missing_lines(r: &Review) -> Vec<(String, String)> {
    r.decision
        .missing
        .iter()
        .map(|(stage, keys)| {
            (
                format!("Stage {stage} · {}", STAGE_NAMES[usize::from(stage - 1).min(4)]),
                keys.join(", "),
            )
        })
        .collect()
}

/// The cost per completed job, or why it is not known.
fn cost_per_job(r: &Review, currency: &str) -> String {
    match r.context.inputs.ledger.as_ref().map(|l| l.cost_per_job) {
        Some(Some(c)) => figures::with_currency(c, currency),
        Some(None) => "not known yet — nothing accepted".into(),
        None => "no ledger yet".into(),
    }
}

/// What a trial that cannot be recommended still lacks: its failing and missing required
/// criteria, or the rule that stopped it.
fn lacks(t: &TrialReview) -> String {
    let mut out: Vec<String> = t
        .context
        .inputs
        .criteria
        .iter()
        .filter(|c| c.required && matches!(c.status, Status::Fail | Status::Missing))
        .map(|c| match c.status {
            Status::Fail => format!("a pass on {}", decision_view::criterion_name(&c.key)),
            _ => decision_view::criterion_name(&c.key),
        })
        .collect();
    if out.is_empty() {
        if let Some(reason) = t.decision.reasons.first().filter(|x| x.decision == Verdict::Stop) {
            out.push(format!("a way past rule {} ({})", reason.rule, reason.says));
        }
    }
    out.join("; ")
}

/// The override select's actions: every decision but the computed one, in the order the select
/// lists them.
fn override_options(computed: Verdict) -> Vec<&'static str> {
    ["expand", "reserve", "dedicate", "scale", "stop"]
        .into_iter()
        .filter(|a| *a != computed.as_str())
        .collect()
}

/// The action the override button approves: `chosen` when it is one of the select's actions, else
/// the select's first.
fn override_action(chosen: &str, computed: Verdict) -> &'static str {
    let options = override_options(computed);
    options
        .iter()
        .find(|a| **a == chosen)
        .or_else(|| options.first())
        .copied()
        .unwrap_or("expand")
}
