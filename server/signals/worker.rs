//! The signals worker, one per server: it refreshes the signal snapshot of briefs that changed
//! (which may write `decision.changed` and `approval.stale` events) and delivers due webhook
//! deliveries. Several servers on one database share the work: claims skip rows another holds.

use std::time::{Duration, Instant};

use axum::http::header;
use chrono::Utc;
use tokio::{task::JoinHandle, task::JoinSet};

use super::{
    model::{backoff, sign, AttemptOutcome, DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER},
    repo::{self, Claimed},
    service,
};
use crate::{config::WebhookSettings, error::AppError, state::AppState};

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
        // The rules that made the stored snapshots may have changed since they were made.
        if let Err(e) = super::repo::mark_all(&state.pool).await {
            tracing::warn!(error = %e, "could not queue the briefs' snapshots for remaking");
        }
        loop {
            let mut busy = false;
            match service::refresh_changed(&state, BRIEFS_PER_ROUND, settings.settle).await {
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

/// No redirects followed (a receiver cannot bounce a signed event elsewhere), a timeout per POST.
fn client(settings: &WebhookSettings) -> reqwest::Result<reqwest::Client> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(settings.timeout)
        .user_agent(concat!("rentcheck-webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
}

/// Why a POST got no answer, with its causes, and without the URL: a Slack webhook's URL is itself
/// a secret.
fn describe(e: reqwest::Error, settings: &WebhookSettings) -> String {
    if e.is_timeout() {
        return format!("no answer within {} s", settings.timeout.as_secs_f64());
    }
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

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

/// One attempt: sign, POST, keep the outcome. What is signed is `"{timestamp}.{body}"` with the
/// webhook's secret, the exact bytes sent.
async fn deliver(state: &AppState, client: &reqwest::Client, settings: &WebhookSettings, c: Claimed) {
    let body = match serde_json::to_vec(&c.payload.0) {
        Ok(b) => b,
        Err(e) => {
            tracing::error!(delivery = %c.id, error = %e, "a webhook payload could not be serialised");
            return;
        }
    };
    let timestamp = Utc::now().timestamp();
    let started = Instant::now();
    let answer = client
        .post(&c.url)
        .header(header::CONTENT_TYPE, "application/json")
        .header(SIGNATURE_HEADER, sign(c.secret.as_bytes(), timestamp, &body))
        .header(TIMESTAMP_HEADER, timestamp.to_string())
        .header(EVENT_HEADER, &c.event)
        .header(DELIVERY_HEADER, c.id.to_string())
        .body(body)
        .send()
        .await;
    let outcome = match answer {
        Ok(r) if r.status().is_success() => AttemptOutcome::Delivered(r.status().as_u16()),
        Ok(r) => AttemptOutcome::Refused(r.status().as_u16()),
        // Without the URL: a Slack webhook's URL is itself a secret.
        Err(e) => AttemptOutcome::Unreachable(describe(e, settings)),
    };
    let duration_ms = i32::try_from(started.elapsed().as_millis()).unwrap_or(i32::MAX);
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
