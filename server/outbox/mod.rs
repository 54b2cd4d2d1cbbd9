//! The webhook outbox: a domain that changes something a webhook may be told about writes the event
//! here with the same executor (its open transaction) as the change, so an event exists exactly
//! when its change committed. The outbox owns the webhook store (`store`: the webhooks, their
//! events, deliveries and attempts); the `signals` domain manages webhooks and delivers through it.

pub mod store;

use chrono::Utc;
use serde_json::{json, Value};
use sqlx::PgExecutor;
use uuid::Uuid;

use crate::ids::{BriefId, TrialId};

/// The kinds of event a webhook may listen to.
pub const EVENTS: [&str; 7] = [
    DECISION_CHANGED,
    APPROVAL_RECORDED,
    APPROVAL_STALE,
    EVIDENCE_FAILED,
    COMMITMENT_REGRESSED,
    COMMITMENT_REVALIDATION_DUE,
    COMMITMENT_RENEWAL_DUE,
];
pub const DECISION_CHANGED: &str = "decision.changed";
pub const APPROVAL_RECORDED: &str = "approval.recorded";
pub const APPROVAL_STALE: &str = "approval.stale";
pub const EVIDENCE_FAILED: &str = "evidence.failed";
pub const COMMITMENT_REGRESSED: &str = "commitment.regressed";
pub const COMMITMENT_REVALIDATION_DUE: &str = "commitment.revalidation_due";
pub const COMMITMENT_RENEWAL_DUE: &str = "commitment.renewal_due";

/// One event about one brief (and one of its trials, when it concerns one).
#[derive(Debug, Clone)]
pub struct Event<'a> {
    pub kind: &'static str,
    pub brief_id: BriefId,
    pub brief_name: &'a str,
    pub trial_id: Option<TrialId>,
    pub old: Value,
    pub new: Value,
    /// One readable line: what a Slack incoming webhook shows (`text`).
    pub text: String,
}

/// The JSON document a receiver gets (docs/operations.md, "Webhooks"). `public_url` is
/// `RENTCHECK_PUBLIC_URL`, without a trailing slash. `id` is the event's: a bare UUID, as the
/// outbox keeps for any domain's event.
pub fn payload(id: Uuid, e: &Event<'_>, public_url: &str) -> Value {
    let link = format!("{public_url}/briefs/{}/review", e.brief_id);
    json!({
        "id": id,
        "event": e.kind,
        "occurred_at": Utc::now(),
        "brief": { "id": e.brief_id, "name": e.brief_name },
        "trial": e.trial_id,
        "old": e.old,
        "new": e.new,
        "link": link,
        "text": format!("{} <{link}|open the review>", slack_escape(&e.text)),
    })
}

/// Slack reads `<`, `>` and `&` in `text` as markup: a brief named `<!channel>` must not ping anyone.
fn slack_escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;")
}

/// Writes the event and one pending delivery per webhook listening to its kind, in one statement;
/// nothing when no webhook listens. Returns whether an event was written.
pub async fn enqueue(db: impl PgExecutor<'_>, public_url: &str, e: &Event<'_>) -> Result<bool, sqlx::Error> {
    let id = Uuid::now_v7();
    let written = sqlx::query_scalar!(
        r#"WITH event AS (
               INSERT INTO webhook_events (id, event, brief_id, trial_id, payload)
               SELECT $1, $2, $3, $4, $5
                WHERE EXISTS (SELECT 1 FROM webhooks WHERE $2 = ANY (events))
               RETURNING id, event
           ), deliveries AS (
               INSERT INTO webhook_deliveries (id, webhook_id, event_id)
               SELECT gen_random_uuid(), w.id, event.id FROM webhooks w, event WHERE event.event = ANY (w.events)
           )
           SELECT count(*) AS "count!" FROM event"#,
        id,
        e.kind,
        e.brief_id.as_uuid(),
        e.trial_id.map(TrialId::as_uuid),
        payload(id, e, public_url),
    )
    .fetch_one(db)
    .await?;
    Ok(written > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_payload_names_the_brief_and_links_to_its_review() {
        let brief = BriefId::from(Uuid::nil());
        let e = Event {
            kind: APPROVAL_RECORDED,
            brief_id: brief,
            brief_name: "chat <prod>",
            trial_id: None,
            old: Value::Null,
            new: json!({ "verdict": "approve" }),
            text: "Approved chat <prod>".into(),
        };
        let p = payload(Uuid::nil(), &e, "https://rc.example");
        assert_eq!(p["event"], "approval.recorded");
        assert_eq!(p["brief"]["name"], "chat <prod>");
        assert_eq!(p["link"], format!("https://rc.example/briefs/{brief}/review"));
        assert!(p["text"]
            .as_str()
            .unwrap()
            .starts_with("Approved chat &lt;prod&gt; <https://rc.example/briefs/"));
    }
}
