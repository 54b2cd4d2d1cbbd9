//! The evidence use cases: ingest an upload (parse it before any transaction, then commit the
//! evidence row, and the `Idempotency-Key` row with the answer, in one transaction), and read
//! evidence back. Answers are domain values; `api.rs` turns them into HTTP.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::{json, value::RawValue, Value};
use utoipa::ToSchema;
use uuid::Uuid;

use super::{
    group_insert::{GroupInsert, QueuedRow},
    model::{analyse, metric_keys_digest, resolve_kind, sha256_hex, Outcome, Upload, Window},
    parsers::{EvidenceKind, SloTargets, PARSER_VERSION},
    repo,
};
use crate::ids::{BriefId, EvidenceId, TokenId, TrialId};
use crate::{briefs::service as briefs, error::AppError, outbox, state::AppState, trials::service as trials};

/// Inputs at least this large are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_MAX: usize = 256 * 1024;

/// An evidence item's URLs: its JSON, its raw bytes and its page.
#[derive(Serialize, ToSchema)]
#[schema(as = EvidenceLinks)]
pub struct Links {
    #[serde(rename = "self")]
    pub this: String,
    pub raw: String,
    pub page: String,
}

/// The committed evidence, as an upload answers it (and a replay of the upload answers it again:
/// the stored answer, as it was first sent).
// Borrows from the parse's outcome: it is serialized once, into the stored answer.
#[derive(Serialize, ToSchema)]
#[schema(as = EvidenceIngested)]
pub struct IngestedAnswer<'a> {
    #[schema(value_type = Uuid)]
    pub id: EvidenceId,
    #[schema(value_type = Uuid)]
    pub brief_id: BriefId,
    #[schema(value_type = Uuid)]
    pub trial_id: TrialId,
    pub kind: &'a str,
    pub stage: i16,
    /// ok, partial or failed
    pub parse_status: &'a str,
    pub parse_error: Option<&'a str>,
    /// The metrics read from the output, by the keys docs/evidence.md lists.
    #[schema(value_type = Object)]
    pub metrics: &'a Value,
    pub warnings: &'a [String],
    pub sha256: &'a str,
    pub size_bytes: usize,
    pub links: Links,
}

/// What an upload came to: a new evidence item, or the stored answer to an earlier request with
/// the same `Idempotency-Key` and body. Either way the value is the evidence's JSON answer: an
/// [`IngestedAnswer`] as it was first sent (a replay answers the stored answer again). Kept as the
/// JSON text it is sent as: serialized once, straight from the typed answer.
#[derive(Debug)]
pub enum Ingested {
    Created { id: EvidenceId, body: Box<RawValue> },
    Replayed(Box<RawValue>),
}

impl Ingested {
    pub fn body(&self) -> &RawValue {
        match self {
            Ingested::Created { body, .. } | Ingested::Replayed(body) => body,
        }
    }
}

fn replay(stored: repo::StoredResponse, fingerprint: &str) -> Result<Ingested, AppError> {
    if stored.request_sha256 != fingerprint {
        return Err(AppError::Conflict(
            "this Idempotency-Key was already used with a different request body".into(),
        ));
    }
    let body = serde_json::value::to_raw_value(&stored.response_body.0).map_err(|e| AppError::Internal(e.into()))?;
    Ok(Ingested::Replayed(body))
}

/// An upload parsed, ready to store; its answer is made from it when needed ([`Prepared::answer`]).
struct Prepared {
    id: EvidenceId,
    brief_id: BriefId,
    trial_id: TrialId,
    kind: EvidenceKind,
    upload: Upload,
    outcome: Outcome,
    sha256: String,
    /// The request's fingerprint, made on first need: only an upload with an `Idempotency-Key`
    /// stores or compares it.
    fingerprint: std::sync::OnceLock<String>,
    labels: Value,
    metric_keys_digest: Option<[u8; 16]>,
}

impl Prepared {
    fn row<'a>(
        &'a self,
        brief_id: BriefId,
        trial_id: TrialId,
        raw_object: Option<&'a str>,
        uploaded_by: Option<&'a str>,
    ) -> repo::NewEvidence<'a> {
        repo::NewEvidence {
            id: self.id.as_uuid(),
            brief_id,
            trial_id,
            kind: self.kind.as_str(),
            stage: self.upload.stage,
            content_type: &self.upload.content_type,
            filename: self.upload.filename.as_deref(),
            raw: &self.upload.raw,
            raw_object,
            sha256: &self.sha256,
            metrics: &self.outcome.metrics,
            metric_keys_digest: self.metric_keys_digest.as_ref().map(|d| d.as_slice()),
            warnings: &self.outcome.warnings,
            parse_status: self.outcome.status.as_str(),
            parse_error: self.outcome.error.as_deref(),
            tool: self.outcome.tool.as_deref(),
            tool_version: self.outcome.tool_version.as_deref(),
            parser_version: PARSER_VERSION,
            labels: &self.labels,
            collected_at: self.upload.collected_at,
            uploaded_by,
        }
    }
}

/// The `before` scrapes met earlier in one batch, by trial, kind and window id: an `after` in the
/// same batch pairs with them, as it would with a stored one.
type BatchBefores = HashMap<(TrialId, &'static str, String), bytes::Bytes>;

impl Prepared {
    /// The upload's answer as the JSON text it is sent as. Made only where it is sent or kept for
    /// an `Idempotency-Key`: a batch item without a key answers its head alone ([`BatchStored`]),
    /// so its metrics are not written out a second time beside the row's `jsonb`.
    fn answer(&self) -> Result<Box<RawValue>, AppError> {
        let id = self.id;
        let answer = IngestedAnswer {
            id,
            brief_id: self.brief_id,
            trial_id: self.trial_id,
            kind: self.kind.as_str(),
            stage: self.upload.stage,
            parse_status: self.outcome.status.as_str(),
            parse_error: self.outcome.error.as_deref(),
            metrics: &self.outcome.metrics,
            warnings: &self.outcome.warnings,
            sha256: &self.sha256,
            size_bytes: self.upload.raw.len(),
            links: Links {
                this: evidence_path(id),
                raw: format!("/api/v1/evidence/{id}/raw"),
                page: format!("/evidence/{id}"),
            },
        };
        serde_json::value::to_raw_value(&answer).map_err(|e| AppError::Internal(e.into()))
    }

    fn fingerprint(&self) -> &str {
        self.fingerprint.get_or_init(|| self.upload.fingerprint())
    }

    fn failed(&self) -> bool {
        self.outcome.status.as_str() == "failed"
    }

    /// The `evidence.failed` event of an item that could not be read.
    fn failure_event<'a>(
        &self,
        brief_id: BriefId,
        trial_id: TrialId,
        brief_name: &'a str,
        uploaded_by: Option<&str>,
    ) -> outbox::Event<'a> {
        outbox::Event {
            kind: outbox::EVIDENCE_FAILED,
            brief_id,
            brief_name,
            trial_id: Some(trial_id),
            old: Value::Null,
            new: json!({
                "evidence": self.id,
                "kind": self.kind.as_str(),
                "stage": self.upload.stage,
                "parse_status": "failed",
                "parse_error": self.outcome.error,
                "uploaded_by": uploaded_by,
            }),
            text: format!(
                "Evidence {} (stage {}) on brief {brief_name} could not be read: {}",
                self.kind.as_str(),
                self.upload.stage,
                self.outcome.error.as_deref().unwrap_or("unknown error"),
            ),
        }
    }
}

/// Why an upload without a byte of content is refused (422).
pub const EMPTY_EVIDENCE: &str = "empty evidence: the command produced no output";

/// Resolves the kind, reads the window's `before` when the kind has one (from `befores`, else
/// the newest stored one), and parses (large inputs on the blocking pool). Serving evidence is
/// judged against the brief's latency targets, read once into `targets` on first need.
async fn prepare(
    state: &AppState,
    brief_id: BriefId,
    trial_id: TrialId,
    upload: Upload,
    targets: &mut Option<SloTargets>,
    befores: &BatchBefores,
) -> Result<Prepared, AppError> {
    // A pipe from a tool that is missing or failed (`nvidia-smi -L | curl …`) posts nothing:
    // refused, so no empty "failed" item becomes the newest evidence.
    if upload.raw.is_empty() {
        return Err(AppError::Unprocessable(EMPTY_EVIDENCE.into()));
    }
    let (kind, kind_warning) = resolve_kind(upload.kind, &upload.raw);
    let window = match upload.window_after() {
        Some(w) if kind.has_window() => {
            let before = match befores.get(&(trial_id, kind.as_str(), w.to_owned())) {
                Some(bytes) => Some(bytes.to_vec()),
                None => match repo::window_before(&state.pool, trial_id, kind.as_str(), w).await? {
                    Some(stored) => Some(state.evidence_store.load(stored).await?),
                    None => None,
                },
            };
            Some((w.to_owned(), before))
        }
        _ => None,
    };
    let targets = if matches!(kind, EvidenceKind::BenchServing | EvidenceKind::VllmMetrics) {
        if targets.is_none() {
            let t = trials::load_brief(&state.pool, brief_id).await?.fields.targets;
            *targets = Some(SloTargets {
                ttft_ms: t.ttft_p95_ms,
                tpot_ms: t.itl_p95_ms,
                e2e_ms: t.e2e_p95_ms,
            });
        }
        targets.unwrap_or_default()
    } else {
        SloTargets::default()
    };
    let raw = upload.raw.clone();
    let run = move || {
        let w = match &window {
            None => Window::NotWindowed,
            Some((_, Some(before))) => Window::Before(before),
            Some((id, None)) => Window::Unmatched(id),
        };
        analyse(kind, &raw, w, kind_warning, &targets)
    };
    let outcome: Outcome = if upload.raw.len() < PARSE_INLINE_MAX {
        run()
    } else {
        tokio::task::spawn_blocking(run)
            .await
            .map_err(|e| AppError::Internal(anyhow::anyhow!("parser task failed: {e}")))?
    };

    let sha256 = sha256_hex(&upload.raw);
    let keys_digest = metric_keys_digest(&outcome.metrics);
    Ok(Prepared {
        id: EvidenceId::from(Uuid::now_v7()),
        brief_id,
        trial_id,
        kind,
        labels: Value::Object(upload.labels.clone()),
        upload,
        outcome,
        sha256,
        fingerprint: std::sync::OnceLock::new(),
        metric_keys_digest: keys_digest,
    })
}

/// Parses, then commits. `uploaded_by` names the caller for the record; `key_scope` is whose
/// `Idempotency-Key` this is (`Principal::idempotency_scope`): keys are per caller and expire.
#[allow(clippy::too_many_arguments)]
pub async fn ingest(
    state: &AppState,
    brief_id: BriefId,
    trial_id: TrialId,
    key: Option<String>,
    key_scope: &str,
    upload: Upload,
    uploaded_by: Option<&str>,
) -> Result<Ingested, AppError> {
    // A retry of a finished request is answered without parsing again.
    if let Some(key) = &key {
        if let Some(stored) = repo::find_idempotent(&state.pool, brief_id, key_scope, key).await? {
            return replay(stored, &upload.fingerprint());
        }
    }
    let p = prepare(state, brief_id, trial_id, upload, &mut None, &HashMap::new()).await?;
    let body = p.answer()?;

    // A parse failure is told to webhooks (`evidence.failed`), in the transaction of the row.
    let brief_name = if p.failed() {
        Some(briefs::name(&state.pool, brief_id).await?)
    } else {
        None
    };
    let failure = brief_name
        .as_deref()
        .map(|name| p.failure_event(brief_id, trial_id, name, uploaded_by));

    // With an object store the bytes are written first: a row that commits always has its bytes.
    let raw_object = state.evidence_store.put(&p.sha256, &p.upload.raw).await?;
    let p = if let Some(key) = &key {
        // The key's row and the evidence commit together, so a replay always finds the evidence.
        let mut tx = state.pool.begin().await?;
        let claimed =
            repo::claim_idempotency_key(&mut *tx, brief_id, key_scope, key, p.fingerprint(), 201, &body, p.id)
                .await
                .map_err(repo::fk_to_not_found)?;
        if !claimed {
            // Another request with this key committed while we parsed: answer as it did.
            tx.rollback().await?;
            return replay_stored(state, brief_id, key_scope, key, p.fingerprint()).await;
        }
        let new_evidence = p.row(brief_id, trial_id, raw_object.as_deref(), uploaded_by);
        repo::insert(&mut *tx, &new_evidence)
            .await
            .map_err(repo::fk_to_not_found)?;
        if let Some(event) = &failure {
            outbox::enqueue(&mut *tx, &state.config.public_url, event).await?;
        }
        tx.commit().await?;
        p
    } else if let Some(event) = &failure {
        let mut tx = state.pool.begin().await?;
        let new_evidence = p.row(brief_id, trial_id, raw_object.as_deref(), uploaded_by);
        repo::insert(&mut *tx, &new_evidence)
            .await
            .map_err(repo::fk_to_not_found)?;
        outbox::enqueue(&mut *tx, &state.config.public_url, event).await?;
        tx.commit().await?;
        p
    } else {
        // Without a key or an event the evidence row is the only write: it goes in one statement
        // with the other single uploads arriving at the same moment (group_insert.rs).
        let queued = QueuedUpload {
            prepared: p,
            brief_id,
            trial_id,
            raw_object,
            uploaded_by: uploaded_by.map(str::to_owned),
        };
        let written = state.slots.get::<GroupInsert<QueuedUpload>>();
        written.insert(&state.pool, queued).await?.prepared
    };
    state
        .metrics
        .observe_ingest(p.kind.as_str(), p.outcome.status.as_str(), p.upload.raw.len());
    Ok(Ingested::Created { id: p.id, body })
}

/// The path of an evidence item's JSON: its answer's `links.self` and a `Location`.
pub fn evidence_path(id: EvidenceId) -> String {
    format!("/api/v1/evidence/{id}")
}

/// A single upload waiting in the group writer's queue, with everything its row borrows.
struct QueuedUpload {
    prepared: Prepared,
    brief_id: BriefId,
    trial_id: TrialId,
    raw_object: Option<String>,
    uploaded_by: Option<String>,
}

impl QueuedRow for QueuedUpload {
    fn row(&self) -> repo::NewEvidence<'_> {
        self.prepared.row(
            self.brief_id,
            self.trial_id,
            self.raw_object.as_deref(),
            self.uploaded_by.as_deref(),
        )
    }
}

/// The stored answer of a key another request claimed first.
async fn replay_stored(
    state: &AppState,
    brief_id: BriefId,
    key_scope: &str,
    key: &str,
    fingerprint: &str,
) -> Result<Ingested, AppError> {
    let stored = repo::find_idempotent(&state.pool, brief_id, key_scope, key)
        .await?
        .ok_or_else(|| AppError::Internal(anyhow::anyhow!("idempotency row vanished")))?;
    replay(stored, fingerprint)
}

/// What a stored batch item answers: its upload's answer without the metrics (a batch has up to
/// 500 items; each item's own URL has them).
#[derive(Debug)]
pub struct BatchStored {
    /// Stored by this batch (201), or an earlier request's with the same key, answered again (200).
    pub created: bool,
    pub id: Uuid,
    pub parse_status: String,
    pub parse_error: Option<String>,
    /// How many warnings the parser gave.
    pub warnings: usize,
}

impl BatchStored {
    fn created(p: &Prepared) -> Self {
        BatchStored {
            created: true,
            id: p.id.as_uuid(),
            parse_status: p.outcome.status.as_str().to_owned(),
            parse_error: p.outcome.error.clone(),
            warnings: p.outcome.warnings.len(),
        }
    }

    /// The head of the answer stored for a key, answered again: read in place, its metrics
    /// skipped, not copied.
    fn replayed(ingested: Ingested) -> Result<Self, AppError> {
        #[derive(serde::Deserialize)]
        struct Head {
            id: Uuid,
            parse_status: String,
            parse_error: Option<String>,
            warnings: Vec<serde::de::IgnoredAny>,
        }
        let head: Head = serde_json::from_str(ingested.body().get()).map_err(|e| AppError::Internal(e.into()))?;
        Ok(BatchStored {
            created: false,
            id: head.id,
            parse_status: head.parse_status,
            parse_error: head.parse_error,
            warnings: head.warnings.len(),
        })
    }
}

/// One item of a batch, decoded by the API: its upload and trial, or why it was refused.
pub struct BatchItem {
    pub decoded: Result<(TrialId, Upload), AppError>,
    pub key: Option<String>,
}

/// Uploads several items at once (`POST /briefs/{id}/evidence/batch`): each is checked, replayed
/// or parsed on its own, the same rules as one upload, then every new item commits in one
/// transaction, with its `idempotency_key`. A refused item does not stop the others; a database
/// or object store that fails stops the whole batch, and nothing of it is stored.
// Long, and reads better whole: prepare every item, then store them all in one transaction; the
// order is the contract.
pub async fn ingest_batch(
    state: &AppState,
    brief_id: BriefId,
    items: Vec<BatchItem>,
    key_scope: &str,
    uploaded_by: Option<&str>,
) -> Result<Vec<Result<BatchStored, AppError>>, AppError> {
    let mut answers: Vec<Option<Result<BatchStored, AppError>>> = Vec::with_capacity(items.len());
    let mut pending: Vec<(usize, TrialId, Option<String>, Prepared)> = Vec::new();
    let mut targets = None;
    let mut keys_seen = HashMap::new();
    let mut befores = BatchBefores::new();
    // Every key's stored answer in one statement, not one per item.
    let keys: Vec<String> = items
        .iter()
        .filter(|item| item.decoded.is_ok())
        .filter_map(|item| item.key.clone())
        .collect();
    let mut stored: HashMap<String, repo::StoredResponse> =
        repo::find_idempotent_many(&state.pool, brief_id, key_scope, &keys)
            .await?
            .into_iter()
            .collect();
    for (i, item) in items.into_iter().enumerate() {
        let (trial_id, upload) = match item.decoded {
            Ok(d) => d,
            Err(e) => {
                answers.push(Some(Err(e)));
                continue;
            }
        };
        if let Some(key) = &item.key {
            if let Some(first) = keys_seen.insert(key.clone(), i) {
                answers.push(Some(Err(AppError::Validation(vec![
                    crate::validation::FieldError::new(
                        "idempotency_key",
                        format!("is also the key of item {first} of this batch"),
                    ),
                ]))));
                continue;
            }
            if let Some(stored) = stored.remove(key) {
                answers.push(Some(
                    replay(stored, &upload.fingerprint()).and_then(BatchStored::replayed),
                ));
                continue;
            }
        }
        match prepare(state, brief_id, trial_id, upload, &mut targets, &befores).await {
            Ok(p) => {
                if let Some(w) = p.upload.window_before().filter(|_| p.kind.has_window()) {
                    befores.insert((trial_id, p.kind.as_str(), w.to_owned()), p.upload.raw.clone());
                }
                answers.push(None);
                pending.push((i, trial_id, item.key, p));
            }
            Err(e @ (AppError::DatabaseUnavailable | AppError::StorageUnavailable)) => return Err(e),
            Err(e) => answers.push(Some(Err(e))),
        }
    }

    // Bytes first, as for one upload: a row that commits always has its bytes.
    let mut objects = Vec::with_capacity(pending.len());
    for (_, _, _, p) in &pending {
        objects.push(state.evidence_store.put(&p.sha256, &p.upload.raw).await?);
    }
    let brief_name = if pending.iter().any(|(_, _, _, p)| p.failed()) {
        Some(briefs::name(&state.pool, brief_id).await?)
    } else {
        None
    };
    let mut raced = Vec::new();
    let mut rows = Vec::with_capacity(pending.len());
    if pending.iter().all(|(_, _, key, p)| key.is_none() && !p.failed()) {
        // No key to claim and no event to enqueue: the rows are the only write, one autocommitted
        // statement without a transaction's two extra round trips.
        for ((_, trial_id, _, p), object) in pending.iter().zip(&objects) {
            rows.push(p.row(brief_id, *trial_id, object.as_deref(), uploaded_by));
        }
        repo::insert_many(&state.pool, &rows)
            .await
            .map_err(repo::fk_to_not_found)?;
    } else {
        // The full answer of each keyed item, kept with its key for a retry.
        let answers_kept = pending
            .iter()
            .filter(|(_, _, key, _)| key.is_some())
            .map(|(_, _, _, p)| p.answer())
            .collect::<Result<Vec<_>, _>>()?;
        let mut tx = state.pool.begin().await?;
        // Every key claimed in one statement, then every row inserted in one.
        let claims: Vec<repo::KeyClaim<'_>> = pending
            .iter()
            .filter_map(|(_, _, key, p)| key.as_deref().map(|key| (key, p)))
            .zip(&answers_kept)
            .map(|((key, p), body)| repo::KeyClaim {
                key,
                request_sha256: p.fingerprint(),
                body,
                evidence_id: p.id.as_uuid(),
            })
            .collect();
        let claimed: std::collections::HashSet<String> =
            repo::claim_idempotency_keys(&mut *tx, brief_id, key_scope, 201, &claims)
                .await
                .map_err(repo::fk_to_not_found)?
                .into_iter()
                .collect();
        for ((i, trial_id, key, p), object) in pending.iter().zip(&objects) {
            if let Some(key) = key {
                if !claimed.contains(key) {
                    // Another request committed this key while we parsed: answered as it was, below.
                    raced.push(*i);
                    continue;
                }
            }
            rows.push(p.row(brief_id, *trial_id, object.as_deref(), uploaded_by));
            if let (true, Some(name)) = (p.failed(), brief_name.as_deref()) {
                let event = p.failure_event(brief_id, *trial_id, name, uploaded_by);
                outbox::enqueue(&mut *tx, &state.config.public_url, &event).await?;
            }
        }
        // Every new row in one statement.
        repo::insert_many(&mut *tx, &rows)
            .await
            .map_err(repo::fk_to_not_found)?;
        tx.commit().await?;
    }
    for (i, _, key, p) in pending {
        answers[i] = Some(if raced.contains(&i) {
            replay_stored(
                state,
                brief_id,
                key_scope,
                key.as_deref().unwrap_or_default(),
                p.fingerprint(),
            )
            .await
            .and_then(BatchStored::replayed)
        } else {
            state
                .metrics
                .observe_ingest(p.kind.as_str(), p.outcome.status.as_str(), p.upload.raw.len());
            Ok(BatchStored::created(&p))
        });
    }
    Ok(answers
        .into_iter()
        .map(|a| a.unwrap_or_else(|| Err(AppError::Internal(anyhow::anyhow!("batch item left unanswered")))))
        .collect())
}

/// 404 unless the brief exists. A caller whose token is scoped to the brief has proved it already
/// (the token's row references the brief, cascading), so this costs a query only for others.
pub async fn require_brief(state: &AppState, brief_id: BriefId, proved: bool) -> Result<(), AppError> {
    if proved || briefs::exists(&state.pool, brief_id).await? {
        Ok(())
    } else {
        Err(AppError::NotFound("brief"))
    }
}

/// One page of a brief's evidence (of one trial, or of all), newest first, and the cursor of the
/// next page.
pub async fn list_page(
    state: &AppState,
    brief_id: BriefId,
    trial: Option<TrialId>,
    after: Option<(chrono::DateTime<chrono::Utc>, Uuid)>,
    limit: i64,
) -> Result<(Vec<repo::EvidenceRow>, Option<String>), AppError> {
    let mut rows = repo::list_for_brief(&state.pool, brief_id, trial, after, limit + 1).await?;
    let next_cursor = if rows.len() as i64 > limit {
        rows.truncate(limit as usize);
        rows.last().map(|r| super::model::encode_cursor(r.received_at, r.id))
    } else {
        None
    };
    Ok((rows, next_cursor))
}

/// When each of `trials` (with their briefs) last received evidence; trials with none are left out.
pub async fn newest_received_of_trials(
    state: &AppState,
    trials: &[(BriefId, TrialId)],
) -> Result<std::collections::HashMap<TrialId, chrono::DateTime<chrono::Utc>>, AppError> {
    let (briefs, ids): (Vec<BriefId>, Vec<TrialId>) = trials.iter().copied().unzip();
    Ok(repo::newest_received_of_trials(&state.pool, &briefs, &ids)
        .await?
        .into_iter()
        .collect())
}

/// One item, or 404.
pub async fn get(state: &AppState, id: EvidenceId) -> Result<repo::EvidenceRow, AppError> {
    repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("evidence"))
}

/// An item's exact bytes, wherever they are kept, with what describes them.
pub struct RawEvidence {
    pub brief_id: BriefId,
    pub content_type: String,
    pub filename: Option<String>,
    pub bytes: Vec<u8>,
}

pub async fn raw(state: &AppState, id: EvidenceId) -> Result<RawEvidence, AppError> {
    let r = repo::raw(&state.pool, id)
        .await?
        .ok_or(AppError::NotFound("evidence"))?;
    let bytes = state.evidence_store.load(r.stored.into()).await?;
    Ok(RawEvidence {
        brief_id: r.brief_id,
        content_type: r.content_type,
        filename: r.filename,
        bytes,
    })
}

/// The newest value of each of `keys` per stage in one trial, in one query (newest by
/// `collected_at`, then `received_at`, then id): the one reader of newest metric values, for the
/// cards and the review.
pub async fn newest_metrics(
    db: impl sqlx::PgExecutor<'_>,
    trial: TrialId,
    keys: &[String],
) -> Result<Vec<super::model::Observation>, sqlx::Error> {
    repo::newest_metrics(db, trial, keys).await
}

/// A trial's newest load tests (stage 3, `bench-serving`, read) with only their `serving.*`
/// metrics, at most `limit`: what the card's load points are made of.
pub async fn load_tests(
    db: impl sqlx::PgExecutor<'_>,
    trial: TrialId,
    limit: i64,
) -> Result<Vec<(Uuid, serde_json::Map<String, Value>)>, sqlx::Error> {
    repo::load_tests(db, trial, limit).await
}

/// The load tests of the trial's newest run after `since` ([`repo::newest_run_load_tests`]).
pub async fn newest_run_load_tests(
    db: impl sqlx::PgExecutor<'_>,
    trial: TrialId,
    since: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, serde_json::Map<String, Value>)>, sqlx::Error> {
    repo::newest_run_load_tests(db, trial, since, limit).await
}

/// The brief's newest stage-3 load-test evidence (bench-serving or vllm-metrics), if any.
pub async fn load_test_evidence(db: impl sqlx::PgExecutor<'_>, brief: BriefId) -> Result<Option<Uuid>, sqlx::Error> {
    repo::load_test_evidence(db, brief).await
}

pub use super::repo::HeldStep;

/// The test-plan steps one trial already holds evidence of (uploads labelled `plan_step`).
pub async fn plan_steps_held(state: &AppState, trial: TrialId) -> Result<Vec<HeldStep>, AppError> {
    Ok(repo::plan_steps_held(&state.pool, trial).await?)
}

/// The newest upload of each brief, its sender named as people named their tokens: brief id →
/// (when it arrived, who sent it).
pub async fn latest_per_brief(
    state: &AppState,
    brief_ids: &[BriefId],
) -> Result<std::collections::HashMap<BriefId, (chrono::DateTime<chrono::Utc>, String)>, AppError> {
    let rows = repo::latest_per_brief(&state.pool, brief_ids).await?;
    let jtis: Vec<TokenId> = rows
        .iter()
        .filter_map(|r| r.uploaded_by.as_deref().and_then(crate::auth::token::jti_in_label))
        .collect();
    let names = crate::auth::token::names(&state.pool, &jtis).await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let by = r
                .uploaded_by
                .as_deref()
                .map(|b| crate::auth::token::label_with_name(b, &names))
                .unwrap_or_else(|| "—".to_owned());
            (r.brief_id, (r.received_at, by))
        })
        .collect())
}
