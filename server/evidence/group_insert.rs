//! Single uploads that arrive together are written together: an upload without an
//! `Idempotency-Key` joins a queue, and the queue is written by at most [`MAX_WRITERS`] tasks, each
//! taking every row waiting (up to [`MAX_GROUP`]) into one autocommitted multi-row `INSERT`. A
//! quiet server writes each upload at once, alone; under load the uploads that arrive while a
//! statement runs share the next one, so the statement, its triggers and its commit are paid once
//! per group instead of once per upload (PostgreSQL's own group commit, one level up).
//!
//! Every upload is answered only after the statement that holds its row has committed, as before:
//! acknowledged means stored. When a group's statement fails for a reason of one row (a brief
//! deleted meanwhile, a character text cannot hold), each row of it is written alone, so one bad
//! row fails only its own upload; when the database is unavailable, every upload of the group is
//! told so and none of it is stored (a statement commits whole or not at all).

use std::sync::{Arc, Mutex, PoisonError};

use sqlx::PgPool;
use tokio::sync::oneshot;

use super::repo::{self, NewEvidence};
use crate::error::AppError;

/// Group statements in flight at once. Two keep one statement running while the next group
/// gathers, without taking more of the pool and the two cores from the requests being served.
const MAX_WRITERS: usize = 2;
/// Rows per statement at most (the batch endpoint's size).
const MAX_GROUP: usize = 100;

/// An upload waiting to be written, with what it is answered.
pub trait QueuedRow: Send + 'static {
    fn row(&self) -> NewEvidence<'_>;
}

/// Answers an item back once written, or why it was not.
type Done<T> = oneshot::Sender<Result<T, AppError>>;

/// The per-app queue (kept in the state's slots).
pub struct GroupInsert<T> {
    queue: Mutex<Queue<T>>,
}

struct Queue<T> {
    waiting: Vec<(T, Done<T>)>,
    writers: usize,
}

impl<T> Default for GroupInsert<T> {
    fn default() -> Self {
        Self {
            queue: Mutex::new(Queue {
                waiting: Vec::new(),
                writers: 0,
            }),
        }
    }
}

impl<T: QueuedRow> GroupInsert<T> {
    fn queue(&self) -> std::sync::MutexGuard<'_, Queue<T>> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Writes `item`'s row with whatever else is waiting, and answers the item back once its
    /// statement has committed.
    pub async fn insert(self: &Arc<Self>, pool: &PgPool, item: T) -> Result<T, AppError> {
        let (done, answer) = oneshot::channel();
        let start_writer = {
            let mut queue = self.queue();
            queue.waiting.push((item, done));
            let start = queue.writers < MAX_WRITERS;
            if start {
                queue.writers += 1;
            }
            start
        };
        if start_writer {
            // A task of its own: a request that goes away mid-statement must not leave the rows
            // of the others in the group unanswered.
            tokio::spawn(write_while_waiting(self.clone(), pool.clone()));
        }
        answer.await.unwrap_or_else(|_| {
            Err(AppError::Internal(anyhow::anyhow!(
                "the evidence writer stopped before answering"
            )))
        })
    }
}

/// Counts a writer out if it ends without finding the queue empty (a panic); the last one out
/// drops the rows still waiting, so their uploads are answered with an error, not left hanging.
struct WriterGuard<T: QueuedRow> {
    groups: Arc<GroupInsert<T>>,
    counted_out: bool,
}

impl<T: QueuedRow> Drop for WriterGuard<T> {
    fn drop(&mut self) {
        if !self.counted_out {
            let mut queue = self.groups.queue();
            queue.writers -= 1;
            if queue.writers == 0 {
                queue.waiting.clear();
            }
        }
    }
}

async fn write_while_waiting<T: QueuedRow>(groups: Arc<GroupInsert<T>>, pool: PgPool) {
    let mut guard = WriterGuard {
        groups,
        counted_out: false,
    };
    loop {
        let group: Vec<(T, Done<T>)> = {
            let mut queue = guard.groups.queue();
            if queue.waiting.is_empty() {
                // Counted out under the same lock that found nothing: an upload queued after
                // this starts a writer of its own.
                queue.writers -= 1;
                drop(queue);
                guard.counted_out = true;
                return;
            }
            let n = queue.waiting.len().min(MAX_GROUP);
            queue.waiting.drain(..n).collect()
        };
        if write_group(&pool, group).await == Outcome::DatabaseUnavailable {
            // What queued meanwhile would wait out another connect timeout for the same answer:
            // told at once, so its senders retry after Retry-After instead of waiting twice.
            let waiting = std::mem::take(&mut guard.groups.queue().waiting);
            for (_, done) in waiting {
                let _ = done.send(Err(AppError::DatabaseUnavailable));
            }
        }
    }
}

#[derive(PartialEq)]
enum Outcome {
    /// Each upload of the group was answered with its own row's result.
    Answered,
    /// The database could not be reached: every upload of the group was told so.
    DatabaseUnavailable,
}

/// Writes one group and answers each of its uploads.
async fn write_group<T: QueuedRow>(pool: &PgPool, group: Vec<(T, Done<T>)>) -> Outcome {
    let rows: Vec<NewEvidence<'_>> = group.iter().map(|(item, _)| item.row()).collect();
    let result = repo::insert_many(pool, &rows).await;
    drop(rows);
    match result {
        Ok(()) => {
            for (item, done) in group {
                let _ = done.send(Ok(item));
            }
        }
        Err(e) => match repo::fk_to_not_found(e) {
            AppError::DatabaseUnavailable => {
                for (_, done) in group {
                    let _ = done.send(Err(AppError::DatabaseUnavailable));
                }
                return Outcome::DatabaseUnavailable;
            }
            e if group.len() == 1 => {
                if let Some((_, done)) = group.into_iter().next() {
                    let _ = done.send(Err(e));
                }
            }
            _ => {
                // One row's fault must not fail the others: each alone.
                for (item, done) in group {
                    let written = repo::insert(pool, &item.row()).await.map_err(repo::fk_to_not_found);
                    let _ = done.send(written.map(|()| item));
                }
            }
        },
    }
    Outcome::Answered
}
