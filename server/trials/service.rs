//! The trial use cases, the door other domains use: list, load, create (a re-run too), replace,
//! and place an upload or a ledger line on the trial it belongs to. A brief and its trial 1 are
//! one use case, here above both: create or replace a brief (its fields and trial 1's allocation,
//! `trial_gpu` / `trial_gpu_count`, in one transaction) and load the whole brief.

use std::{
    collections::HashMap,
    sync::{
        atomic::{AtomicU64, Ordering},
        Mutex, PoisonError,
    },
    time::{Duration, Instant},
};

use super::{
    model::{next_name, resolve_target, validate, TargetError, Trial, TrialDefaults, TrialFields},
    repo,
};
use crate::{
    audit,
    auth::Principal,
    briefs::{
        model::{Brief, BriefFields, BriefRecord},
        service as briefs,
    },
    error::AppError,
    ids::{BriefId, TrialId},
    state::AppState,
    validation::{FieldError, Input},
    web::extract::BriefPath,
};

/// The whole brief: its fields and its trial 1's allocation; 404 without it.
pub async fn load_brief(pool: &sqlx::PgPool, id: BriefId) -> Result<Brief, AppError> {
    load_brief_in(&mut *pool.acquire().await?, id).await
}

/// [`load_brief`] on the caller's connection (inside its transaction: its snapshot). Two reads,
/// the brief's and the trial's, each by its owner.
pub async fn load_brief_in(conn: &mut sqlx::PgConnection, id: BriefId) -> Result<Brief, AppError> {
    let record = briefs::load_record(&mut *conn, id).await?;
    let (gpu, count) = repo::first_allocation(&mut *conn, id).await?.unwrap_or_default();
    Ok(record.with_first_allocation(gpu, count))
}

impl BriefPath {
    /// The whole brief the route names ([`load_brief`]), or 404; the handler has checked who may
    /// see it.
    pub async fn load(&self, state: &AppState) -> Result<Brief, AppError> {
        load_brief(&state.pool, self.id).await
    }
}

/// Writes trial 1 of the brief just written (created with the brief, named "Trial 1") with the
/// allocation `fields` asks, in the caller's transaction, and answers the whole brief.
async fn with_first_trial(
    conn: &mut sqlx::PgConnection,
    record: BriefRecord,
    fields: &BriefFields,
) -> Result<Brief, AppError> {
    repo::set_first_allocation(
        conn,
        record.id(),
        fields.trial_gpu.as_deref(),
        fields.trial_gpu_count,
        &fields.currency,
        fields.allocation_boundary.as_str(),
    )
    .await?;
    Ok(record.with_first_allocation(fields.trial_gpu.clone(), fields.trial_gpu_count))
}

/// Creates a brief owned by the person behind `actor` with its trial 1, audited, in one
/// transaction (`briefs::service::create_owned_in`, then the trial).
pub async fn create_brief(pool: &sqlx::PgPool, fields: &BriefFields, actor: &Principal) -> Result<Brief, AppError> {
    let mut tx = pool.begin().await?;
    let brief = briefs::create_owned_in(&mut tx, fields, actor).await?;
    let brief = with_first_trial(&mut tx, brief, fields).await?;
    tx.commit().await?;
    Ok(brief)
}

/// Creates a brief with a fixed id and its trial 1 unless the brief exists; `None` when it did
/// (the demo's brief).
pub async fn create_brief_with_id(
    pool: &sqlx::PgPool,
    id: BriefId,
    fields: &BriefFields,
) -> Result<Option<Brief>, AppError> {
    let mut tx = pool.begin().await?;
    let Some(brief) = briefs::create_with_id(&mut *tx, id, fields).await? else {
        return Ok(None);
    };
    let brief = with_first_trial(&mut tx, brief, fields).await?;
    tx.commit().await?;
    Ok(Some(brief))
}

/// Replaces a brief's fields and its trial 1's allocation if `actor` may edit it, recording which
/// fields changed in the audit log, in one transaction under the brief's lock; 403 or 404
/// otherwise.
pub async fn replace_brief(
    pool: &sqlx::PgPool,
    id: BriefId,
    fields: &BriefFields,
    actor: &Principal,
) -> Result<Brief, AppError> {
    briefs::may_edit(pool, actor, id).await?;
    let mut tx = pool.begin().await?;
    briefs::lock(&mut *tx, id).await?;
    let before = load_brief_in(&mut tx, id).await?;
    let after = briefs::replace_in(&mut tx, &before, fields, actor).await?;
    let after = with_first_trial(&mut tx, after, fields).await?;
    tx.commit().await?;
    Ok(after)
}

/// The brief's trials in order; 404 without the brief.
pub async fn list(state: &AppState, brief_id: BriefId) -> Result<Vec<Trial>, AppError> {
    let trials = repo::list_for_brief(&state.pool, brief_id).await?;
    if trials.is_empty() {
        // Every brief has a first trial: none means no brief.
        return Err(AppError::NotFound("brief"));
    }
    Ok(trials)
}

/// [`list`] on the caller's connection or transaction.
pub async fn list_in(db: impl sqlx::PgExecutor<'_>, brief_id: BriefId) -> Result<Vec<Trial>, AppError> {
    let trials = repo::list_for_brief(db, brief_id).await?;
    if trials.is_empty() {
        return Err(AppError::NotFound("brief"));
    }
    Ok(trials)
}

/// The trial a page or a read names, or the brief's first trial when it names none; 404 when the
/// named trial is not one of the brief's.
pub async fn pick(state: &AppState, brief_id: BriefId, named: Option<TrialId>) -> Result<Trial, AppError> {
    let trials = list(state, brief_id).await?;
    match named {
        Some(id) => trials
            .into_iter()
            .find(|t| t.id == id)
            .ok_or(AppError::NotFound("trial")),
        None => trials.into_iter().next().ok_or(AppError::NotFound("brief")),
    }
}

/// One trial, or 404.
pub async fn load(state: &AppState, id: TrialId) -> Result<Trial, AppError> {
    repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("trial"))
}

/// One trial, if there is one (the CLI, which has a pool and no state).
pub async fn get(db: impl sqlx::PgExecutor<'_>, id: TrialId) -> Result<Option<Trial>, AppError> {
    Ok(repo::get(db, id).await?)
}

/// The defaults a new trial of `brief` takes for what the input leaves out.
pub fn defaults_for(brief: &Brief, existing: &[Trial]) -> TrialDefaults {
    TrialDefaults {
        currency: brief.fields.currency.clone(),
        allocation_boundary: brief.fields.allocation_boundary.as_str().to_owned(),
        name: next_name(&existing.iter().map(|t| t.fields.name.clone()).collect::<Vec<_>>()),
    }
}

/// Validates a new trial for `brief_id` (JSON or form) and adds it after the others.
pub async fn create(state: &AppState, brief_id: BriefId, input: &Input<'_>, actor: &str) -> Result<Trial, AppError> {
    let brief = load_brief(&state.pool, brief_id).await?;
    let existing = list(state, brief_id).await?;
    let fields = validate(input, &defaults_for(&brief, &existing)).map_err(AppError::Validation)?;
    check_rerun_of(&fields, &existing, None)?;
    let mut tx = state.pool.begin().await?;
    // One trial added at a time per brief: the position is the next free one.
    briefs::lock(&mut *tx, brief_id).await?;
    let trial = repo::insert(&mut tx, brief_id, &fields).await.map_err(name_taken)?;
    audit::record(
        &mut *tx,
        actor,
        "trial.create",
        &format!("brief:{brief_id}"),
        serde_json::json!({ "trial": trial.id, "name": trial.fields.name, "rerun_of": trial.fields.rerun_of }),
    )
    .await?;
    tx.commit().await?;
    state.slots.get::<UploadPlaces>().forget(brief_id);
    Ok(trial)
}

/// Replaces a trial's fields (an edit, or ending it with `status: ended`).
pub async fn replace(state: &AppState, id: TrialId, input: &Input<'_>, actor: &str) -> Result<Trial, AppError> {
    let current = load(state, id).await?;
    let brief = load_brief(&state.pool, current.brief_id).await?;
    let existing = list(state, brief.id).await?;
    let mut defaults = defaults_for(&brief, &existing);
    defaults.name = current.fields.name.clone();
    let fields = validate(input, &defaults).map_err(AppError::Validation)?;
    check_rerun_of(&fields, &existing, Some(id))?;
    let mut tx = state.pool.begin().await?;
    let trial = repo::update(&mut *tx, id, &fields)
        .await
        .map_err(name_taken)?
        .ok_or(AppError::NotFound("trial"))?;
    audit::record(
        &mut *tx,
        actor,
        "trial.update",
        &format!("brief:{}", trial.brief_id),
        serde_json::json!({ "trial": id, "changes": changes(&current.fields, &trial.fields) }),
    )
    .await?;
    tx.commit().await?;
    state.slots.get::<UploadPlaces>().forget(trial.brief_id);
    Ok(trial)
}

/// What an edit changed, field by field, for the audit log.
fn changes(before: &TrialFields, after: &TrialFields) -> serde_json::Value {
    let (b, a) = (
        serde_json::to_value(before).unwrap_or_default(),
        serde_json::to_value(after).unwrap_or_default(),
    );
    let mut out = serde_json::Map::new();
    if let (Some(b), Some(a)) = (b.as_object(), a.as_object()) {
        for (k, v) in a {
            if b.get(k) != Some(v) {
                out.insert(k.clone(), serde_json::json!({ "from": b.get(k), "to": v }));
            }
        }
    }
    serde_json::Value::Object(out)
}

/// A re-run names an earlier trial of the same brief, and not itself.
fn check_rerun_of(fields: &TrialFields, existing: &[Trial], this: Option<TrialId>) -> Result<(), AppError> {
    match fields.rerun_of {
        Some(of) if Some(of) == this || !existing.iter().any(|t| t.id == of) => {
            Err(AppError::Validation(vec![FieldError::new(
                "rerun_of",
                "must be the id of another trial of this brief",
            )]))
        }
        _ => Ok(()),
    }
}

fn name_taken(e: sqlx::Error) -> AppError {
    match &e {
        sqlx::Error::Database(db) if db.constraint() == Some("trials_brief_name_key") => {
            AppError::Validation(vec![FieldError::new(
                "name",
                "another trial of this brief has this name",
            )])
        }
        _ => e.into(),
    }
}

/// (id, name) of each trial of a brief, in order; 404 without the brief.
pub async fn names(state: &AppState, brief_id: BriefId) -> Result<Vec<(TrialId, String)>, AppError> {
    let trials = repo::names(&state.pool, brief_id).await?;
    if trials.is_empty() {
        return Err(AppError::NotFound("brief"));
    }
    Ok(trials.into_iter().map(|t| (t.id, t.name)).collect())
}

/// (brief, trial id, name) of each trial of the given briefs, read in one statement.
pub async fn names_of_briefs(
    state: &AppState,
    brief_ids: &[BriefId],
) -> Result<Vec<(BriefId, TrialId, String)>, AppError> {
    let trials = repo::names_of_briefs(&state.pool, brief_ids).await?;
    Ok(trials.into_iter().map(|t| (t.brief_id, t.id, t.name)).collect())
}

/// [`resolve_target`] as an API answer: 422 naming the trials, or 403 for a token scoped to another.
pub fn resolve(
    trials: &[(TrialId, String)],
    named: Option<TrialId>,
    token_trial: Option<TrialId>,
) -> Result<TrialId, AppError> {
    resolve_target(named, token_trial, trials).map_err(|e| match e {
        TargetError::OtherTrial => AppError::Forbidden(e.message()),
        _ => AppError::Validation(vec![FieldError::new("trial", e.message())]),
    })
}

/// The brief's trials as placing an upload needs them; 404 without the brief. Read before the
/// body, so a missing brief is answered without reading it.
pub async fn for_upload(state: &AppState, brief_id: BriefId) -> Result<Vec<repo::TrialName>, AppError> {
    let places = state.slots.get::<UploadPlaces>();
    if let Some(trials) = places.fresh(brief_id) {
        return Ok(trials);
    }
    let (generation, read_at) = (places.generation(), Instant::now());
    let trials = repo::names(&state.pool, brief_id).await?;
    if trials.is_empty() {
        return Err(AppError::NotFound("brief"));
    }
    places.keep(brief_id, generation, read_at, &trials);
    Ok(trials)
}

/// How long a brief's trials, read to place uploads, are used again without reading them: under
/// load a brief's uploads arrive many times a second and its trials change rarely. A change made
/// through this server forgets them at once ([`UploadPlaces::forget`]); one made by another
/// server on the same database is seen within this time. What a stale list could do is bounded:
/// a trial deleted meanwhile (with its brief) is refused by the database's foreign key (404), and
/// a trial added by another server is seen a second later.
const UPLOAD_PLACES_TTL: Duration = Duration::from_secs(1);
/// Briefs kept at most; past it, entries older than the TTL are dropped.
const UPLOAD_PLACES_MAX: usize = 10_000;

/// Each brief's trials as [`for_upload`] read them, per app (kept in the state's slots).
#[derive(Default)]
pub struct UploadPlaces {
    entries: Mutex<HashMap<BriefId, (Instant, Vec<repo::TrialName>)>>,
    /// Counts the changes: a read that began before a change does not keep what it read.
    changes: AtomicU64,
}

impl UploadPlaces {
    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<BriefId, (Instant, Vec<repo::TrialName>)>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn fresh(&self, brief: BriefId) -> Option<Vec<repo::TrialName>> {
        let entries = self.entries();
        let (read_at, trials) = entries.get(&brief)?;
        (read_at.elapsed() < UPLOAD_PLACES_TTL).then(|| trials.clone())
    }

    fn generation(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// Keeps what a read begun at `read_at`, after `read_from` changes, found (its age counts
    /// from when the read began).
    fn keep(&self, brief: BriefId, read_from: u64, read_at: Instant, trials: &[repo::TrialName]) {
        let mut entries = self.entries();
        // Checked under the lock `forget` takes too: a change that committed after the read began
        // has bumped the count, and the read may predate it.
        if self.generation() != read_from {
            return;
        }
        if entries.len() >= UPLOAD_PLACES_MAX {
            entries.retain(|_, (read_at, _)| read_at.elapsed() < UPLOAD_PLACES_TTL);
        }
        entries.insert(brief, (read_at, trials.to_vec()));
    }

    /// After a change to a brief's trials commits: the next upload reads them again.
    fn forget(&self, brief: BriefId) {
        let mut entries = self.entries();
        self.changes.fetch_add(1, Ordering::AcqRel);
        entries.remove(&brief);
    }
}

/// Picks the trial among `trials` (see [`place`]) and starts it when it was planned.
pub async fn choose(
    state: &AppState,
    trials: &[repo::TrialName],
    named: Option<TrialId>,
    token_trial: Option<TrialId>,
) -> Result<TrialId, AppError> {
    let pairs: Vec<(TrialId, String)> = trials.iter().map(|t| (t.id, t.name.clone())).collect();
    let id = resolve(&pairs, named, token_trial)?;
    if let Some(t) = trials.iter().find(|t| t.id == id && t.planned) {
        // The first evidence or ledger line starts a planned trial.
        repo::mark_running(&state.pool, id).await?;
        state.slots.get::<UploadPlaces>().forget(t.brief_id);
    }
    Ok(id)
}

/// The trial an upload or ledger post to `brief_id` goes to: the one it names, else the one its
/// token is scoped to, else the brief's only trial. 404 without the brief; 422 naming the trials
/// when the brief has several and none was named; 403 when a trial token names another trial.
pub async fn place(
    state: &AppState,
    brief_id: BriefId,
    named: Option<TrialId>,
    token_trial: Option<TrialId>,
) -> Result<TrialId, AppError> {
    let trials = for_upload(state, brief_id).await?;
    choose(state, &trials, named, token_trial).await
}
