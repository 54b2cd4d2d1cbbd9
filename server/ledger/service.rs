//! The ledger use cases, the door other domains use: store lines (all or nothing, with the audit
//! row), the summary (cost per completed job), the CSV export, and the demo import.

use serde_json::json;
use sqlx::PgPool;
use uuid::Uuid;

use super::{
    csv::{self, CsvError, MAX_IMPORT_LINES},
    focus::FocusImport,
    model::{Category, LedgerLine, LedgerSummary, Outputs, OutputsPatch},
    repo::{self, StoredLine},
};
use crate::{
    audit,
    briefs::service as briefs,
    error::AppError,
    ids::{BriefId, TrialId},
    state::AppState,
    trials::service as trials,
    validation::FieldError,
};

/// A CSV import that fails validation is 422 with each bad cell; one with too many lines is 413.
impl From<CsvError> for AppError {
    fn from(e: CsvError) -> Self {
        match e {
            CsvError::Invalid(errors) => AppError::Validation(errors),
            CsvError::TooManyLines => AppError::TooLarge(format!(
                "more than {MAX_IMPORT_LINES} lines in one import; split the file"
            )),
        }
    }
}

/// The brief's currency, or 404.
pub async fn brief_currency(state: &AppState, id: BriefId) -> Result<String, AppError> {
    Ok(trials::load_brief(&state.pool, id).await?.fields.currency)
}

/// Which trial a post goes to when a line names none: the one the request names, else the one its
/// token is scoped to, else the brief's only trial.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target {
    pub named: Option<TrialId>,
    pub token_trial: Option<TrialId>,
}

/// What a post stored, and on which trial the request's own lines and outputs went.
pub struct Stored {
    pub added: u64,
    /// Lines the trial already held field for field (a file sent again): not added again.
    pub repeated: u64,
    /// The request's trial: where lines without a `trial` and the outputs went (`None` when every
    /// line named its trial and no outputs came).
    pub trial: Option<TrialId>,
}

/// A caller's `Idempotency-Key` on a ledger post, with the request's fingerprint.
pub struct LedgerKey<'a> {
    /// Whose key: `Principal::idempotency_scope`.
    pub caller: &'a str,
    pub key: &'a str,
    pub fingerprint: String,
}

/// What a post with a key came to: stored now, or the first answer's `{ lines_added, trial }`.
pub enum StoreOutcome {
    Stored(Stored),
    Replayed {
        added: u64,
        repeated: u64,
        trial: Option<TrialId>,
    },
}

/// One write to a brief's ledger: its lines and outputs update, who sends them and how.
#[derive(Clone, Copy)]
pub struct LedgerWrite<'a> {
    pub brief_id: BriefId,
    pub target: Target,
    /// Who posts, as the audit row names them: a person's email, a token's label.
    pub actor: &'a str,
    /// How the lines came (`json`, `csv`, `form`, `csv-form`, `import`, `demo`), for the audit row
    /// and the errors' places.
    pub source: &'a str,
    pub lines: &'a [LedgerLine],
    pub outputs: Option<&'a OutputsPatch>,
}

/// Stores lines and an outputs update in one transaction with its audit row. All or nothing. Each
/// line goes to the trial it names (id or name), else to the request's trial.
pub async fn store(state: &AppState, write: LedgerWrite<'_>) -> Result<Stored, AppError> {
    match store_once(state, write, None).await? {
        StoreOutcome::Stored(s) => Ok(s),
        StoreOutcome::Replayed { added, repeated, trial } => Ok(Stored { added, repeated, trial }),
    }
}

/// [`store`], once per key: a retry with the same caller, key and request is answered from the
/// first (nothing stored again); the same key with another request is 409. The key is checked and
/// written under the brief's row lock, so two requests racing with one key store once.
// Long, and reads better whole: the idempotency key's check, the write and the key's record run in
// one transaction under the brief's lock.
pub async fn store_once(
    state: &AppState,
    write: LedgerWrite<'_>,
    key: Option<&LedgerKey<'_>>,
) -> Result<StoreOutcome, AppError> {
    let LedgerWrite {
        brief_id,
        target,
        actor,
        source,
        lines,
        outputs,
    } = write;
    let trials = trials::names(state, brief_id).await?;
    let needs_default = outputs.is_some() || lines.iter().any(|l| l.trial.is_none()) || lines.is_empty();
    let default = if needs_default {
        Some(trials::place(state, brief_id, target.named, target.token_trial).await?)
    } else {
        None
    };
    let mut line_trials = Vec::with_capacity(lines.len());
    let mut errors = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        match &line.trial {
            None => line_trials.push(default.unwrap_or(TrialId::from(Uuid::nil()))),
            Some(reference) => match find_trial(&trials, reference) {
                Some(id) => line_trials.push(id),
                None => errors.push(FieldError::new(
                    if source == "csv" {
                        // The header is line 1.
                        format!("line {}, column 10 (trial)", i + 2)
                    } else {
                        format!("lines[{i}].trial")
                    },
                    format!(
                        "{reference:?} is not a trial of this brief; its trials are: {}",
                        trials.iter().map(|(_, n)| n.as_str()).collect::<Vec<_>>().join(", ")
                    ),
                )),
            },
        }
    }
    if !errors.is_empty() {
        return Err(AppError::Validation(errors));
    }
    let mut used: Vec<TrialId> = line_trials.clone();
    used.extend(default);
    used.sort_unstable();
    used.dedup();
    for id in &used {
        // A trial token may only write to its own trial; the first line starts a planned trial.
        trials::place(state, brief_id, Some(*id), target.token_trial).await?;
    }

    let mut tx = state.pool.begin().await?;
    briefs::lock(&mut *tx, brief_id).await?;
    if let Some(k) = key {
        if let Some((fingerprint, first)) = repo::find_idempotent(&mut *tx, brief_id, k.caller, k.key).await? {
            tx.rollback().await?;
            if fingerprint != k.fingerprint {
                return Err(AppError::Conflict(
                    "this Idempotency-Key was already used with a different request body".into(),
                ));
            }
            return Ok(StoreOutcome::Replayed {
                added: first["lines_added"].as_u64().unwrap_or(0),
                repeated: first["lines_already_in_ledger"].as_u64().unwrap_or(0),
                trial: first["trial"].as_str().and_then(|t| t.parse::<TrialId>().ok()),
            });
        }
    }
    let import_id = Uuid::now_v7();
    // Lines the trial already holds (the same file sent again) are not added twice.
    let repeats = repo::repeats(&mut tx, brief_id, &line_trials, lines).await?;
    let added = if repeats.is_empty() {
        repo::insert_lines(&mut tx, brief_id, import_id, &line_trials, lines).await?
    } else {
        let (new_lines, new_trials): (Vec<LedgerLine>, Vec<TrialId>) = lines
            .iter()
            .zip(&line_trials)
            .enumerate()
            .filter(|(i, _)| !repeats.contains(i))
            .map(|(_, (l, t))| (l.clone(), *t))
            .unzip();
        repo::insert_lines(&mut tx, brief_id, import_id, &new_trials, &new_lines).await?
    };
    let repeated = repeats.len() as u64;
    for trial in &used {
        let trial_lines = lines
            .iter()
            .zip(&line_trials)
            .filter(|(_, t)| *t == trial)
            .map(|(l, _)| l);
        remerge_accelerators(&mut tx, brief_id, *trial, trial_lines).await?;
    }
    if let (Some(patch), Some(trial)) = (outputs, default) {
        repo::upsert_outputs(&mut *tx, brief_id, trial, patch).await?;
    }
    audit::record(
        &mut *tx,
        actor,
        "ledger.import",
        &format!("brief:{brief_id}"),
        json!({
            "import_id": import_id,
            "source": source,
            "lines": added,
            "lines_already_in_ledger": repeated,
            "trials": used,
            "outputs": outputs.map(|p| json!({
                "trial": default,
                "accepted": p.accepted, "rejected": p.rejected, "retries": p.retries,
                "failed_jobs": p.failed_jobs, "idle_hours": p.idle_hours,
            })),
        }),
    )
    .await?;
    if let Some(k) = key {
        let first = json!({ "lines_added": added, "lines_already_in_ledger": repeated, "trial": default });
        repo::save_idempotent(&mut *tx, brief_id, k.caller, k.key, &k.fingerprint, &first).await?;
    }
    tx.commit().await?;
    Ok(StoreOutcome::Stored(Stored {
        added,
        repeated,
        trial: default,
    }))
}

/// Re-merges `trial`'s accelerator lines of every resource `lines` adds to (`repo::remerge`, each
/// resource once).
async fn remerge_accelerators<'l>(
    conn: &mut sqlx::PgConnection,
    brief_id: BriefId,
    trial: TrialId,
    lines: impl IntoIterator<Item = &'l LedgerLine>,
) -> Result<(), sqlx::Error> {
    let mut touched: Vec<&str> = lines
        .into_iter()
        .filter(|l| l.category == Category::Accelerator)
        .map(|l| l.resource.as_str())
        .collect();
    touched.sort_unstable();
    touched.dedup();
    repo::remerge(conn, brief_id, trial, &touched).await
}

/// What a FOCUS import stored on its trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FocusStored {
    pub trial: TrialId,
    pub added: u64,
    /// Lines of the export that an earlier import already added (nothing added again).
    pub already_imported: u64,
}

/// Stores a FOCUS export's lines on `trial` in one transaction with its audit row: each row's
/// identity is claimed first, and only the rows no earlier import brought become lines, so
/// re-importing an export adds nothing.
pub async fn store_focus(
    state: &AppState,
    brief_id: BriefId,
    trial: TrialId,
    token_trial: Option<TrialId>,
    actor: &str,
    import: &FocusImport,
) -> Result<FocusStored, AppError> {
    // A trial token may only write to its own trial; the first line starts a planned trial.
    trials::place(state, brief_id, Some(trial), token_trial).await?;
    let mut tx = state.pool.begin().await?;
    briefs::lock(&mut *tx, brief_id).await?;
    let import_id = Uuid::now_v7();
    let identities: Vec<Vec<u8>> = import.lines.iter().map(|l| l.identity.to_vec()).collect();
    let new: std::collections::HashSet<Vec<u8>> =
        repo::claim_focus_rows(&mut tx, brief_id, trial, import_id, &identities)
            .await?
            .into_iter()
            .collect();
    let fresh: Vec<LedgerLine> = import
        .lines
        .iter()
        .filter(|l| new.contains(l.identity.as_slice()))
        .map(|l| l.line.clone())
        .collect();
    let added = repo::insert_lines(&mut tx, brief_id, import_id, &vec![trial; fresh.len()], &fresh).await?;
    remerge_accelerators(&mut tx, brief_id, trial, &fresh).await?;
    let commitment_rows = repo::insert_commitment_use(&mut tx, brief_id, import_id, &import.commitment_use).await?;
    let already_imported = (import.lines.len() - fresh.len()) as u64;
    audit::record(
        &mut *tx,
        actor,
        "ledger.import",
        &format!("brief:{brief_id}"),
        json!({
            "import_id": import_id,
            "source": "focus",
            "lines": added,
            "trials": [trial],
            "rows_read": import.rows_read,
            "rows_selected": import.rows_selected,
            "already_imported": already_imported,
            "not_added": import.not_added.iter().map(|n| json!({
                "charge_category": n.charge_category, "reason": n.reason, "of": n.of,
                "rows": n.rows, "sum": n.sum.to_string(), "currency": n.currency,
            })).collect::<Vec<_>>(),
            "hours_from_charge_period": import.hours_from_charge_period.iter().map(|h| json!({
                "reason": h.reason, "rows": h.rows,
            })).collect::<Vec<_>>(),
            "commitment_rows_kept": commitment_rows,
            "commitment_purchases": import.commitment_purchases.iter().map(|c| json!({
                "commitment_discount_id": c.commitment_discount_id, "rows": c.rows,
                "sum": c.sum.to_string(), "currency": c.currency,
            })).collect::<Vec<_>>(),
        }),
    )
    .await?;
    tx.commit().await?;
    Ok(FocusStored {
        trial,
        added,
        already_imported,
    })
}

/// A trial named by its id or its name.
fn find_trial(trials: &[(TrialId, String)], reference: &str) -> Option<TrialId> {
    let reference = reference.trim();
    trials
        .iter()
        .find(|(id, name)| id.to_string() == reference.to_ascii_lowercase() || name == reference)
        .map(|(id, _)| *id)
}

/// The trial a read names (or its token's, or the brief's only one); 422 naming the trials when
/// the brief has several and none was named.
pub async fn read_target(state: &AppState, brief_id: BriefId, target: Target) -> Result<TrialId, AppError> {
    let trials = trials::names(state, brief_id).await?;
    trials::resolve(&trials, target.named, target.token_trial)
}

/// One trial's summary: its lines and outputs, cost per completed job.
pub async fn summary(state: &AppState, trial_id: TrialId, currency: &str) -> Result<LedgerSummary, AppError> {
    let mut conn = state.pool.acquire().await?;
    Ok(repo::summary(&mut conn, trial_id, currency).await?)
}

/// One trial's output counts.
pub async fn outputs(state: &AppState, trial_id: TrialId) -> Result<Outputs, AppError> {
    Ok(repo::outputs(&state.pool, trial_id).await?)
}

/// A page of one trial's lines, newest first, older than `cursor` (a line's `seq`), and the next cursor.
pub async fn lines_page(
    state: &AppState,
    trial_id: TrialId,
    cursor: Option<i64>,
    limit: i64,
) -> Result<(Vec<StoredLine>, Option<i64>), AppError> {
    let mut lines = repo::newest_lines(&state.pool, trial_id, cursor, limit + 1).await?;
    let next_cursor = if lines.len() as i64 > limit {
        lines.truncate(limit as usize);
        lines.last().map(|l| l.seq)
    } else {
        None
    };
    Ok((lines, next_cursor))
}

/// The summary for callers holding only a pool (the card's derived figures).
/// One trial's summary on the caller's connection (inside its transaction).
pub async fn summary_in(
    conn: &mut sqlx::PgConnection,
    trial_id: TrialId,
    currency: &str,
) -> Result<LedgerSummary, sqlx::Error> {
    repo::summary(conn, trial_id, currency).await
}

pub async fn summary_from_pool(pool: &PgPool, trial_id: TrialId, currency: &str) -> Result<LedgerSummary, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    repo::summary(&mut conn, trial_id, currency).await
}

/// Whether any trial of the brief has a ledger line (the readiness checklist's "cost view exists").
pub async fn has_lines(pool: &PgPool, brief_id: BriefId) -> Result<bool, sqlx::Error> {
    repo::brief_has_lines(pool, brief_id).await
}

/// Lines of one trial.
pub async fn count_lines(state: &AppState, trial_id: TrialId) -> Result<i64, AppError> {
    Ok(repo::count_lines(&state.pool, trial_id).await?)
}

/// Every line of every trial as CSV with the import header and each line's trial, in the order
/// they were added; 404 without the brief.
pub async fn export_csv(state: &AppState, brief_id: BriefId) -> Result<Vec<u8>, AppError> {
    brief_currency(state, brief_id).await?;
    // Two reads: the trials' names are the trials domain's.
    let trials = trials::names(state, brief_id).await?;
    let lines = repo::all_lines(&state.pool, brief_id, &trials).await?;
    csv::write(Vec::new(), &lines).map_err(|e| AppError::Internal(anyhow::Error::new(e)))
}

/// Imports a demo ledger (and its output counts) into one trial once: nothing happens when that
/// trial already has ledger lines. Goes through the same validated, all-or-nothing store as the API.
pub async fn demo_import(
    state: &AppState,
    brief_id: BriefId,
    trial_id: TrialId,
    csv_text: &str,
    outputs: &OutputsPatch,
) -> Result<bool, AppError> {
    if repo::count_lines(&state.pool, trial_id).await? > 0 {
        return Ok(false);
    }
    let currency = brief_currency(state, brief_id).await?;
    let lines = csv::parse(csv_text.as_bytes(), &currency)
        .map_err(|e| AppError::Internal(anyhow::anyhow!("the demo ledger is invalid: {e:?}")))?;
    let target = Target {
        named: Some(trial_id),
        token_trial: None,
    };
    store(
        state,
        LedgerWrite {
            brief_id,
            target,
            actor: "rentcheck demo",
            source: "demo",
            lines: &lines,
            outputs: Some(outputs),
        },
    )
    .await?;
    Ok(true)
}

/// Stores already-validated lines for a brief's trial in one all-or-nothing import (tools and
/// benchmarks).
pub async fn import_lines(
    state: &AppState,
    brief_id: BriefId,
    target: Target,
    actor: &str,
    lines: &[LedgerLine],
) -> Result<u64, AppError> {
    let write = LedgerWrite {
        brief_id,
        target,
        actor,
        source: "import",
        lines,
        outputs: None,
    };
    Ok(store(state, write).await?.added)
}

pub use repo::CommitmentUseRow;

/// Keeps rows of a provider's FOCUS export that name commitment discounts (as an import keeps
/// them, once per identity) without reading an export: the demo's provider rows. Answers how many
/// were new.
pub async fn keep_commitment_use(
    state: &AppState,
    brief_id: BriefId,
    rows: &[super::focus::CommitmentUse],
) -> Result<u64, AppError> {
    let mut tx = state.pool.begin().await?;
    let kept = repo::insert_commitment_use(&mut tx, brief_id, Uuid::now_v7(), rows).await?;
    tx.commit().await?;
    Ok(kept)
}

/// The brief's kept FOCUS rows of the commitment discount `id` overlapping `[from, to)`.
pub async fn commitment_use(
    pool: &PgPool,
    brief_id: BriefId,
    id: &str,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<CommitmentUseRow>, sqlx::Error> {
    repo::commitment_use(pool, brief_id, id, from, to).await
}

/// [`summary_from_pool`] of many trials, each in its currency, in three statements; in the order of `keys`.
pub async fn summaries_from_pool(pool: &PgPool, keys: &[(TrialId, &str)]) -> Result<Vec<LedgerSummary>, sqlx::Error> {
    let mut conn = pool.acquire().await?;
    repo::summaries(&mut conn, keys).await
}

/// Which of the given (brief, CommitmentDiscountId) pairs have any FOCUS commitment row.
pub async fn commitment_ids_with_rows(
    pool: &PgPool,
    keys: &[(BriefId, &str)],
) -> Result<std::collections::HashSet<(BriefId, String)>, sqlx::Error> {
    if keys.is_empty() {
        return Ok(Default::default());
    }
    let briefs: Vec<BriefId> = keys.iter().map(|(b, _)| *b).collect();
    let ids: Vec<String> = keys.iter().map(|(_, id)| (*id).to_owned()).collect();
    Ok(repo::commitment_ids_with_rows(pool, &briefs, &ids)
        .await?
        .into_iter()
        .collect())
}

/// Per window `[from, to)` (whole UTC days) of a brief, the merged GPU-microseconds of its
/// accelerator lines there per trial, as merging the lines clipped to the window counts them (the
/// ledger's merge: lines of one trial and resource that overlap count once, at the largest GPU
/// count), read from the per-day merge every import keeps, in one statement for every window; in
/// the order of `windows`. `trials`: the trials of the windows' briefs.
pub async fn accelerator_micros_by_window(
    pool: &PgPool,
    windows: &[(BriefId, chrono::NaiveDate, chrono::NaiveDate)],
    trials: &[(BriefId, TrialId)],
) -> Result<Vec<Vec<(TrialId, i128)>>, sqlx::Error> {
    let mut out: Vec<Vec<(TrialId, i128)>> = vec![Vec::new(); windows.len()];
    if windows.is_empty() {
        return Ok(out);
    }
    let briefs: Vec<BriefId> = windows.iter().map(|(b, _, _)| *b).collect();
    let froms: Vec<_> = windows.iter().map(|w| w.1).collect();
    let tos: Vec<_> = windows.iter().map(|w| w.2).collect();
    let (trial_briefs, trial_ids): (Vec<BriefId>, Vec<TrialId>) = trials.iter().copied().unzip();
    for (window, trial, micros) in
        repo::accelerator_micros_by_days(pool, &briefs, &froms, &tos, (&trial_briefs, &trial_ids)).await?
    {
        if let Some(slot) = out.get_mut(window) {
            slot.push((trial, micros));
        }
    }
    Ok(out)
}

/// The accelerator lines of every trial of a brief overlapping `[from, to)` (a commitment's term).
pub async fn accelerator_spans(
    pool: &PgPool,
    brief_id: BriefId,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<repo::AcceleratorSpan>, sqlx::Error> {
    repo::accelerator_spans(pool, brief_id, from, to).await
}
