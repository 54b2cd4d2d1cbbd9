//! The signals worker, one per server: it runs the review's summary watcher round
//! (`review::summaries::refresh_changed`: remakes the kept summary of briefs that changed, which may
//! write `decision.changed` and `approval.stale` events) and delivers due webhook deliveries. Several servers on one database share the work: claims skip rows another holds.

use std::time::{Duration, Instant};

use axum::http::header;
use chrono::Utc;
use tokio::{task::JoinHandle, task::JoinSet};

use super::model::{
    address_refusal, backoff, non_public, private_message, sign, AttemptOutcome, DELIVERY_HEADER, EVENT_HEADER,
    SIGNATURE_HEADER, TIMESTAMP_HEADER,
};
use crate::{
    config::WebhookSettings,
    error::AppError,
    outbox::store::{self as repo, Claimed},
    review::summaries,
    state::AppState,
};

/// Deliveries one round claims and sends side by side.
const DELIVERIES_PER_ROUND: i64 = 16;
/// Briefs one round refreshes.
const BRIEFS_PER_ROUND: i64 = 20;

/// Starts the worker; abort the handle to stop it.
pub fn spawn(state: AppState) -> JoinHandle<()> {
    tokio::spawn(async move {
        let settings = state.config.webhooks.clone();
        let client = match client(&settings) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "the webhook HTTP client could not be built; no webhooks are sent");
                return;
            }
        };
        // Summaries made by older rules than this server's are remade; the others are kept.
        if let Err(e) = summaries::mark_outdated(&state).await {
            tracing::warn!(error = %e, "could not queue the briefs' snapshots for remaking");
        }
        loop {
            let mut busy = false;
            match summaries::refresh_changed(&state, BRIEFS_PER_ROUND, settings.settle).await {
                Ok(n) => busy |= n > 0,
                Err(e) => tracing::warn!(error = %e, "refreshing brief signals failed"),
            }
            match deliver_due(&state, &client, &settings).await {
                Ok(n) => busy |= n > 0,
                Err(e) => tracing::warn!(error = %e, "claiming webhook deliveries failed"),
            }
            if !busy {
                tokio::time::sleep(settings.poll).await;
            }
        }
    })
}

/// No redirects followed (a receiver cannot bounce a signed event elsewhere), a timeout per POST,
/// and unless private addresses are allowed, names resolved to public addresses only (so a name
/// re-pointed at this machine or the private network after it was added reaches nothing there).
fn client(settings: &WebhookSettings) -> reqwest::Result<reqwest::Client> {
    let builder = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(settings.timeout)
        .user_agent(concat!("rentcheck-webhooks/", env!("CARGO_PKG_VERSION")));
    if settings.allow_private {
        builder.build()
    } else {
        builder.dns_resolver(std::sync::Arc::new(PublicOnly)).build()
    }
}

/// Resolves a webhook's host name and keeps its public addresses only.
struct PublicOnly;

/// A host that resolves to no public address.
#[derive(Debug)]
struct NotPublic(String);

impl std::fmt::Display for NotPublic {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotPublic {}

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<std::net::SocketAddr> =
                found.iter().copied().filter(|a| non_public(a.ip()).is_none()).collect();
            if public.is_empty() {
                let why = found
                    .first()
                    .and_then(|a| non_public(a.ip()).map(|kind| private_message(&format!("{host} ({})", a.ip()), kind)))
                    .unwrap_or_else(|| format!("{host} has no address"));
                return Err(Box::new(NotPublic(why)) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// What the attempt list says of a POST that got no answer. The same words for a refused
/// connection, a reset, a timeout or a TLS failure: which of those it was would tell an admin
/// which ports answer on a host (a port scanner). The cause, without the URL (a Slack webhook's
/// URL is itself a secret), goes to the server's log for the operator. A host refused for being
/// private says so.
fn describe(e: reqwest::Error, delivery: uuid::Uuid) -> String {
    let e = e.without_url();
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(&e);
    let mut refused = None;
    while let Some(s) = source {
        if let Some(not_public) = s.downcast_ref::<NotPublic>() {
            refused = Some(not_public.0.clone());
        }
        cause.push_str(": ");
        cause.push_str(&s.to_string());
        source = s.source();
    }
    tracing::info!(%delivery, cause, "a webhook POST got no answer");
    match refused {
        Some(why) => format!("not sent: the host {why}"),
        None => UNREACHABLE.to_owned(),
    }
}

/// The attempt list's words for a POST that got no HTTP answer.
pub const UNREACHABLE: &str = "no answer (the connection failed, was refused or timed out)";

/// How long a claim holds a delivery: the POST's timeout and time to record what came of it.
fn lease(settings: &WebhookSettings) -> Duration {
    settings.timeout + Duration::from_secs(30)
}

/// Claims due deliveries and sends them side by side; answers how many it claimed.
pub async fn deliver_due(
    state: &AppState,
    client: &reqwest::Client,
    settings: &WebhookSettings,
) -> Result<usize, AppError> {
    let claimed = repo::claim_due(&state.pool, DELIVERIES_PER_ROUND, lease(settings).as_secs_f64()).await?;
    let n = claimed.len();
    let mut sends = JoinSet::new();
    for c in claimed {
        let (state, client, settings) = (state.clone(), client.clone(), settings.clone());
        sends.spawn(async move { deliver(&state, &client, &settings, c).await });
    }
    while sends.join_next().await.is_some() {}
    Ok(n)
}

/// One attempt: sign, POST, keep the outcome. What is signed is the body, the exact bytes sent,
/// with the webhook's secret; the body carries this attempt's `sent_at`, so a replay of a captured
/// request shows its age under the signature.
async fn deliver(state: &AppState, client: &reqwest::Client, settings: &WebhookSettings, c: Claimed) {
    let sent_at = Utc::now();
    let timestamp = sent_at.timestamp();
    let mut payload = c.payload.0.clone();
    if let Some(fields) = payload.as_object_mut() {
        fields.insert(
            "sent_at".into(),
            serde_json::Value::String(sent_at.format("%Y-%m-%dT%H:%M:%SZ").to_string()),
        );
    }
    let body = match serde_json::to_vec(&payload) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(delivery = %c.id, error = %e, "a webhook payload could not be serialised");
            return;
        }
    };
    let started = Instant::now();
    // An address in the URL itself is never resolved: check it here (a webhook added before this
    // rule, or while private addresses were allowed).
    let refused = if settings.allow_private {
        None
    } else {
        address_refusal(&c.url)
    };
    if let Some(why) = refused {
        record(
            state,
            settings,
            &c,
            AttemptOutcome::Unreachable(format!("not sent: the url {why}")),
            0,
        )
        .await;
        return;
    }
    let answer = client
        .post(&c.url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, sign(c.secret.as_bytes(), &body))
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(EVENT_HEADER, &c.event)
        .header(DELIVERY_HEADER, c.id.to_string())
        .body(body)
        .send()
        .await;
    let elapsed = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
    let (outcome, duration_ms) = match answer {
        Ok(r) if r.status().is_success() => (AttemptOutcome::Delivered(r.status().as_u16()), elapsed),
        Ok(r) => (AttemptOutcome::Refused(r.status().as_u16()), elapsed),
        // No duration either: a quick refusal and a slow timeout must read the same.
        Err(e) => (AttemptOutcome::Unreachable(describe(e, c.id)), 0),
    };
    record(state, settings, &c, outcome, duration_ms).await;
}

/// Keeps what came of one attempt and when the next is due.
async fn record(state: &AppState, settings: &WebhookSettings, c: &Claimed, outcome: AttemptOutcome, duration_ms: i32) {
    let attempts = u32::try_from(c.attempts).unwrap_or(u32::MAX);
    let (next_state, retry_at) = match &outcome {
        AttemptOutcome::Delivered(_) => ("delivered", None),
        _ => {
            let wait = backoff(attempts, settings.retry_base, settings.retry_max);
            let age = (Utc::now() - c.created_at).to_std().unwrap_or_default();
            if age + wait > settings.give_up_after {
                ("failed", None)
            } else {
                let wait = chrono::Duration::from_std(wait).unwrap_or(chrono::Duration::hours(1));
                ("pending", Some(Utc::now() + wait))
            }
        }
    };
    state.metrics.observe_webhook_attempt(match next_state {
        "delivered" => "delivered",
        "pending" => "retrying",
        _ => "gave_up",
    });
    if next_state != "delivered" {
        tracing::info!(delivery = %c.id, event = %c.event, attempt = attempts, outcome = ?outcome.error(), next_state,
            "a webhook delivery attempt failed");
    }
    // The database may be away (a restart): keep trying to record until the lease runs out, after
    // which another claim sends the event again: at least once, never lost.
    let deadline = Instant::now() + lease(settings);
    let mut pause = Duration::from_millis(100);
    loop {
        let recorded = async {
            let mut tx = state.pool.begin().await?;
            repo::record_attempt(
                &mut tx,
                c.id,
                outcome.status_code(),
                outcome.error().as_deref(),
                duration_ms,
                next_state,
                retry_at,
            )
            .await?;
            tx.commit().await
        }
        .await;
        match recorded {
            Ok(()) => return,
            Err(e) if Instant::now() + pause < deadline => {
                tracing::warn!(delivery = %c.id, error = %e, "recording a webhook attempt failed; retrying");
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => {
                tracing::error!(delivery = %c.id, error = %e, "recording a webhook attempt failed; it will be sent again");
                return;
            }
        }
    }
}
