//! The background task that moves commitments through their states on its own (never on a page
//! read): ended after the term, renewal-due from 60 days before its end, revalidation-due without
//! a run of the trial within `revalidate_every_days`, regressed when the evidence received after the
//! approval fails a required criterion or has a figure worse than the approval's beyond the re-run
//! thresholds (`model::regressions`). Each change is audited and sent as a
//! webhook (`commitment.regressed`, `commitment.revalidation_due`, `commitment.renewal_due`).
//!
//! Several servers on one database share it as they share webhook delivery: a round claims the
//! commitments it judges with `FOR UPDATE SKIP LOCKED` in one transaction, so another server's
//! round skips them, and the state change, its audit row and its event commit together.

use std::time::Duration;

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::json;
use tokio::task::JoinHandle;

use super::{
    model::{self, ClockFacts, CommitmentState},
    repo::{self, Due},
    service,
};
use crate::{
    audit, briefs::service as briefs, error::AppError, evidence::service as evidence, outbox, state::AppState,
};

/// Commitments one round judges (their newest runs read, and their judgements written, in one
/// statement each).
const PER_ROUND: i64 = 100;
/// A commitment is judged again this long after the last time (so a run is judged within it).
const EVERY_SECS: f64 = 60.0;
/// How long the task waits when a round found nothing to do.
const IDLE: Duration = Duration::from_secs(30);

/// Starts the task; abort the handle to stop it.
pub fn spawn(state: AppState) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            match round(&state).await {
                Ok(n) if n > 0 => continue,
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "judging commitments failed"),
            }
            tokio::time::sleep(IDLE).await;
        }
    })
}

/// One round: claims due commitments, judges each, commits. Answers how many it judged.
pub async fn round(state: &AppState) -> Result<usize, AppError> {
    round_on(state, Utc::now().date_naive()).await
}

/// [`round`] as of `today` (the day the clock's states are judged on).
pub async fn round_on(state: &AppState, today: NaiveDate) -> Result<usize, AppError> {
    let mut tx = state.pool.begin().await?;
    let due = repo::claim_due(&mut *tx, PER_ROUND, EVERY_SECS).await?;
    let n = due.len();
    let trials: Vec<_> = due.iter().map(|c| (c.brief_id, c.trial_id)).collect();
    let newest = evidence::newest_received_of_trials(state, &trials).await?;
    let mut judged = repo::Judged::default();
    for c in due {
        let current = c.state;
        let last_run = newest_run(&c, newest.get(&c.trial_id).copied(), today);
        let new_run = last_run.is_some() && last_run != c.last_run_at;
        // A new run: judge the trial's criteria on the evidence received since the approval (each
        // figure's newest value, and the load points of the newest run's load tests only), against
        // the figures the approval pinned.
        let mut regressed: Vec<String> = Vec::new();
        if new_run {
            let now = service::rerun_criteria(state, c.brief_id, c.trial_id, c.approved_at).await?;
            regressed = model::regressions(&c.approved_criteria, &now);
        }
        let last_day = model::last_committed_day(c.end_date, c.released_on);
        let (next, reason) = if !regressed.is_empty() && today <= last_day {
            (CommitmentState::Regressed, regressed.join("; "))
        } else {
            // A new run that passes clears a regression; without one, a regression stays.
            let base = if current == CommitmentState::Regressed && new_run {
                CommitmentState::Active
            } else {
                current
            };
            let next = model::clock_state(&ClockFacts {
                current: base,
                today,
                start_date: c.start_date,
                last_day,
                revalidate_every_days: u32::try_from(c.revalidate_every_days).unwrap_or(30),
                released_on: c.released_on,
                last_run: last_run.map(|t| t.date_naive()),
                renewed: c.renewed,
                approved_on: c.approved_at.date_naive(),
            });
            (next, clock_reason(next, &c, last_run, last_day))
        };
        judged.push(c.id, next.as_str(), &reason, last_run);
        if next != current {
            audit::record(
                &mut *tx,
                "rentcheck",
                "commitment.state",
                &format!("brief:{}", c.brief_id),
                json!({ "commitment": c.id, "before": current.as_str(), "after": next.as_str(), "reason": reason }),
            )
            .await?;
            if let Some(kind) = event_of(next) {
                let brief_name = briefs::name(&state.pool, c.brief_id).await?;
                outbox::enqueue(
                    &mut *tx,
                    &state.config.public_url,
                    &outbox::Event {
                        kind,
                        brief_id: c.brief_id,
                        brief_name: &brief_name,
                        trial_id: Some(c.trial_id),
                        old: json!({ "commitment": c.id, "state": current.as_str() }),
                        new: json!({ "commitment": c.id, "state": next.as_str(), "reason": reason }),
                        text: format!("The commitment of brief {brief_name} is {}: {reason}", next.words()),
                    },
                )
                .await?;
            }
        }
    }
    repo::set_judged(&mut *tx, &judged).await?;
    tx.commit().await?;
    Ok(n)
}

/// The newest run of `c`'s trial it takes: the trial's newest evidence (received at `newest`) since
/// the approval. A renewal approved ahead of its term takes none before the term begins (the
/// commitment it renews carries the trial meanwhile): its runs are judged from its first day.
fn newest_run(c: &Due, newest: Option<DateTime<Utc>>, today: NaiveDate) -> Option<DateTime<Utc>> {
    if c.renews_another && today < c.start_date {
        return c.last_run_at;
    }
    newest.filter(|t| *t > c.approved_at)
}

fn event_of(s: CommitmentState) -> Option<&'static str> {
    match s {
        CommitmentState::Regressed => Some(outbox::COMMITMENT_REGRESSED),
        CommitmentState::RevalidationDue => Some(outbox::COMMITMENT_REVALIDATION_DUE),
        CommitmentState::RenewalDue => Some(outbox::COMMITMENT_RENEWAL_DUE),
        _ => None,
    }
}

/// Why the clock put it where it is, in words.
fn clock_reason(s: CommitmentState, c: &Due, last_run: Option<chrono::DateTime<Utc>>, last_day: NaiveDate) -> String {
    match s {
        CommitmentState::Ended => format!("the term ended on {last_day}"),
        CommitmentState::RenewalDue => format!("the term ends on {last_day}: renew, resize or release it"),
        CommitmentState::RevalidationDue => match last_run {
            Some(t) => format!(
                "no run of the trial since {} (a re-run is due every {} days)",
                t.date_naive(),
                c.revalidate_every_days
            ),
            None => format!(
                "no run of the trial since the approval (a re-run is due every {} days)",
                c.revalidate_every_days
            ),
        },
        CommitmentState::Regressed => c.state_reason.clone(),
        CommitmentState::Released => match c.released_on {
            Some(d) => format!("released from {d}"),
            None => String::new(),
        },
        CommitmentState::Active => String::new(),
    }
}
