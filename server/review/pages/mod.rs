//! The review page, the manager's verdict form, the audit page and the decision record.
//!
//! This file holds the routes and the handlers of the review page, its verdict form and the audit
//! page; the page's view is in `view.rs`, filled from its sections: `criteria.rs` (the reasons,
//! the criteria stage by stage, the charts), `compare.rs` (the trials side by side) and
//! `approval.rs` (the recorded verdict and the approval form); the decision record is in
//! `record.rs`.

mod approval;
mod compare;
mod criteria;
mod record;
mod view;

use std::collections::BTreeMap;

use askama::Template;
use axum::{
    extract::State,
    response::{IntoResponse, Redirect, Response},
    routing::get,
    Router,
};

use self::{
    approval::{field_messages, FormState},
    record::{record_json, record_md, record_page},
    view::page,
};
use super::service::{self, VerdictRequest};
use crate::{
    error::AppError,
    ids::TrialId,
    state::AppState,
    web::{
        auth::{CsrfForm, PageUser},
        extract::{ApiQuery, BriefPath},
        page::{render, PageContext, PageError, PageResult},
    },
};

pub fn routes() -> Router<AppState> {
    Router::new()
        .route("/briefs/{id}/review", get(review_page).post(verdict))
        .route("/briefs/{id}/audit", get(audit_page))
        .route("/briefs/{id}/decision", get(record_page))
        .route("/briefs/{id}/decision.md", get(record_md))
        .route("/briefs/{id}/decision.json", get(record_json))
}

pub const STAGE_NAMES: [&str; 5] = [
    "Environment smoke test",
    "Functional test",
    "Representative load",
    "Failure test",
    "Acceptance review",
];

/// `?decided=<approval id>`: the redirect after a verdict, so the page confirms it at the top;
/// `?trial=<id>`: the trial the approval form names (choosing one without JavaScript reloads the
/// form with it, so the approve button's words are that trial's).
#[derive(serde::Deserialize)]
struct ReviewQuery {
    decided: Option<String>,
    trial: Option<String>,
}

async fn review_page(
    State(state): State<AppState>,
    user: PageUser,
    BriefPath { id }: BriefPath,
    ApiQuery(q): ApiQuery<ReviewQuery>,
) -> PageResult<Response> {
    let r = service::review(&state, id).await?;
    // A trial id that is not one of the brief's leaves the form on the recommended trial.
    let form = FormState {
        trial: q.trial.and_then(|t| t.trim().parse::<TrialId>().ok()),
        ..FormState::default()
    };
    let mut shown = page(&r, &user, form, q.decided.as_deref());
    shown.renewal = crate::commitments::service::renewal_notice(&state, id).await?;
    render(&shown)
}

async fn verdict(
    State(state): State<AppState>,
    BriefPath { id }: BriefPath,
    CsrfForm(user, mut form): CsrfForm,
) -> PageResult<Response> {
    // What the form shows again when nothing is recorded: the values as typed.
    let kept = FormState {
        reservation: Some(
            form.iter()
                .filter_map(|(k, v)| k.strip_prefix("reservation.").map(|k| (k.to_owned(), v.clone())))
                .collect(),
        ),
        trial: form.get("trial").and_then(|t| t.trim().parse::<TrialId>().ok()),
        comment: form.get("comment").cloned().unwrap_or_default(),
        override_choice: form.get("decision").cloned().unwrap_or_default(),
        override_reason: form.get("override_reason").cloned().unwrap_or_default(),
        ..FormState::default()
    };
    // Without JavaScript, choosing the override's action is a step of its own: the form comes back
    // with the action chosen and the button naming it; nothing is recorded.
    if form.get("verdict").map(String::as_str) == Some("choose-override") {
        return render(&page(&service::review(&state, id).await?, &user, kept, None));
    }
    // The override button sends `approve-override`: an approval of the action chosen in the
    // override select; the approve button approves the computed action whatever the select says.
    let overriding = form.get("verdict").map(String::as_str) == Some("approve-override");
    if overriding {
        form.insert("verdict".into(), "approve".into());
    }
    let request = VerdictRequest {
        verdict: form.remove("verdict").unwrap_or_default(),
        comment: form.remove("comment").unwrap_or_default(),
        inputs_digest: form.remove("inputs_digest").unwrap_or_default(),
        trial: kept.trial,
        reservation: kept.reservation.clone().unwrap_or_default(),
        decision: overriding.then(|| kept.override_choice.clone()),
        override_reason: kept.override_reason.clone(),
        acknowledge_mismatch: form.get("acknowledge_mismatch").is_some_and(|v| v == "yes"),
    };
    match service::record_verdict(&state, id, &user.principal(), request).await {
        // Post/redirect/get: a reload shows the confirmation again and records nothing twice.
        Ok(row) => Ok(Redirect::to(&format!("/briefs/{id}/review?decided={}", row.id)).into_response()),
        Err(AppError::Forbidden(m)) => Err(PageError(AppError::Forbidden(m))),
        Err(e @ (AppError::Validation(_) | AppError::Conflict(_))) => {
            let status = e.status();
            let (field_errors, problem) = match &e {
                AppError::Validation(errors) => {
                    let fields = field_messages(errors);
                    let problem = format!(
                        "Nothing was recorded: {} to correct below.",
                        if fields.len() == 1 {
                            "one field".to_owned()
                        } else {
                            format!("{} fields", fields.len())
                        }
                    );
                    (fields, problem)
                }
                _ => (
                    BTreeMap::new(),
                    "Nothing was recorded: the review changed since you loaded it (new evidence, ledger lines, \
                     prices or a change to the card). This is the current review: read it and decide again."
                        .to_owned(),
                ),
            };
            let r = service::review(&state, id).await?;
            let form = FormState {
                field_errors,
                problem,
                ..kept
            };
            let mut response = render(&page(&r, &user, form, None))?;
            *response.status_mut() = status;
            Ok(response)
        }
        Err(e) => Err(PageError(e)),
    }
}

struct AuditLine {
    at: String,
    actor: String,
    /// What was done, in words ("approved the decision"); the stored action beside it.
    what: String,
    action: String,
    /// The details as `name: value` pairs, for people.
    facts: Vec<(String, String)>,
    /// The details as stored (JSON), behind a disclosure.
    details: String,
}

/// An audit action in words, for the brief's audit log.
fn action_in_words(action: &str) -> &str {
    match action {
        "brief.create" => "created the brief",
        "brief.update" => "changed the brief",
        "brief.owner" => "changed the brief's owner",
        "brief.share" => "shared the brief with a team",
        "brief.unshare" => "stopped sharing the brief with a team",
        "card.revise" => "revised the acceptance card",
        "trial.create" => "added a trial",
        "trial.update" => "changed a trial",
        "token.mint" => "made an agent token",
        "token.revoke" => "revoked a token",
        "ledger.import" => "imported ledger lines",
        "approval.approve" => "approved the decision",
        "approval.reject" => "rejected the decision",
        "commitment.opened" => "opened a commitment",
        "commitment.changed" => "changed a commitment",
        "commitment.state" => "changed a commitment's state",
        "commitment.approved_again" => "kept a commitment for a new approval",
        other => other,
    }
}

/// A JSON object's fields as `name: value` (names with spaces, nulls left out); another value as
/// one line.
fn facts_of(details: &serde_json::Value) -> Vec<(String, String)> {
    match details {
        serde_json::Value::Object(fields) => fields
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.replace('_', " "), value_in_words(v)))
            .collect(),
        serde_json::Value::Null => Vec::new(),
        other => vec![(String::new(), value_in_words(other))],
    }
}

/// A detail's value for people: a change `{from, to}` as "from → to", an object as its fields
/// ("name: value; …"), a list joined by commas, nothing as "none".
fn value_in_words(v: &serde_json::Value) -> String {
    use serde_json::Value;
    match v {
        Value::Null => "none".to_owned(),
        Value::String(s) if s.is_empty() => "(empty)".to_owned(),
        Value::String(s) => s.clone(),
        Value::Array(items) => items.iter().map(value_in_words).collect::<Vec<_>>().join(", "),
        Value::Object(fields) => match (fields.get("from"), fields.get("to")) {
            (Some(from), Some(to)) if fields.len() == 2 => {
                format!("{} → {}", value_in_words(from), value_in_words(to))
            }
            _ => fields
                .iter()
                .map(|(k, v)| format!("{}: {}", k.replace('_', " "), value_in_words(v)))
                .collect::<Vec<_>>()
                .join("; "),
        },
        // Numbers and booleans as every page shows them ("6,210.4", "yes").
        other => crate::figures::value(other),
    }
}

#[derive(Template)]
#[template(path = "review/audit.html")]
struct AuditPage {
    ctx: PageContext,
    brief_id: String,
    brief_name: String,
    entries: Vec<AuditLine>,
}

async fn audit_page(State(state): State<AppState>, user: PageUser, path: BriefPath) -> PageResult<Response> {
    let brief = path.load(&state).await?;
    let id = brief.id;
    let entries = crate::audit::for_brief(&state.pool, id)
        .await?
        .into_iter()
        .map(|e| AuditLine {
            at: e.at.format("%Y-%m-%d %H:%M:%S UTC").to_string(),
            actor: e.actor,
            what: action_in_words(&e.action).to_owned(),
            facts: facts_of(&e.details.0),
            action: e.action,
            details: e.details.0.to_string(),
        })
        .collect();
    render(&AuditPage {
        ctx: (&user).into(),
        brief_id: id.to_string(),
        brief_name: brief.fields.name,
        entries,
    })
}

#[cfg(test)]
mod audit_words {
    use super::facts_of;
    use serde_json::json;

    /// The audit log's details read as the other pages read: yes/no, numbers grouped.
    #[test]
    fn details_read_as_every_page_reads_values() {
        let facts = facts_of(&json!({"disabled": true, "rate": 6210.4, "role": {"from": false, "to": true}}));
        assert_eq!(
            facts,
            [
                ("disabled".to_owned(), "yes".to_owned()),
                ("rate".to_owned(), "6,210.4".to_owned()),
                ("role".to_owned(), "no → yes".to_owned()),
            ]
        );
    }
}
