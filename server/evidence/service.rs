//! The evidence use cases: ingest an upload (parse it before any transaction, then commit the
//! evidence row, and the `Idempotency-Key` row with the answer, in one transaction), and read
//! evidence back. Answers are domain values; `api.rs` turns them into HTTP.

use serde_json::{json, Value};
use uuid::Uuid;

use super::{
    model::{analyse, resolve_kind, sha256_hex, Outcome, Upload, Window},
    parsers::{EvidenceKind, SloTargets, PARSER_VERSION},
    repo,
};
use crate::{briefs::service as briefs, error::AppError, state::AppState};

/// Inputs at least this large are parsed on the blocking pool, off the async workers.
const PARSE_INLINE_MAX: usize = 256 * 1024;

/// What an upload came to: a new evidence item, or the stored answer to an earlier request with
/// the same `Idempotency-Key` and body. Either way the value is the evidence's JSON answer.
#[derive(Debug)]
pub enum Ingested {
    Created(Value),
    Replayed(Value),
}

impl Ingested {
    pub fn body(&self) -> &Value {
        match self {
            Ingested::Created(b) | Ingested::Replayed(b) => b,
        }
    }
}

fn replay(stored: repo::StoredResponse, fingerprint: &str) -> Result<Ingested, AppError> {
    if stored.request_sha256 != fingerprint {
        return Err(AppError::Conflict(
            "this Idempotency-Key was already used with a different request body".into(),
        ));
    }
    Ok(Ingested::Replayed(stored.response_body.0))
}

fn fk_to_not_found(e: sqlx::Error) -> AppError {
    match &e {
        sqlx::Error::Database(db)
            if matches!(db.constraint(), Some("evidence_brief_fk" | "idempotency_keys_brief_fk")) =>
        {
            AppError::NotFound("brief")
        }
        _ => e.into(),
    }
}

/// Parses, then commits. `uploaded_by` names the caller for the record; `key_scope` is whose
/// `Idempotency-Key` this is (`Principal::idempotency_scope`): keys are per caller and expire.
#[allow(clippy::too_many_arguments)]
pub async fn ingest(
    state: &AppState,
    brief_id: Uuid,
    trial_id: Uuid,
    key: Option<String>,
    key_scope: &str,
    upload: Upload,
    uploaded_by: Option<&str>,
) -> Result<Ingested, AppError> {
    let fingerprint = upload.fingerprint();
    // A retry of a finished request is answered without parsing again.
    if let Some(key) = &key {
        if let Some(stored) = repo::find_idempotent(&state.pool, brief_id, key_scope, key).await? {
            return replay(stored, &fingerprint);
        }
    }

    let (kind, kind_warning) = resolve_kind(upload.kind, &upload.raw);
    let window = match upload.window_after() {
        Some(w) if kind.has_window() => {
            let before = match repo::window_before(&state.pool, trial_id, kind.as_str(), w).await? {
                Some(stored) => Some(state.evidence_store.load(stored).await?),
                None => None,
            };
            Some((w.to_owned(), before))
        }
        _ => None,
    };
    // Serving evidence is judged against the brief's latency targets (SLO attainment).
    let targets = if matches!(kind, EvidenceKind::BenchServing | EvidenceKind::VllmMetrics) {
        let t = briefs::load(&state.pool, brief_id).await?.fields.targets;
        SloTargets {
            ttft_ms: t.ttft_p95_ms,
            tpot_ms: t.itl_p95_ms,
            e2e_ms: t.e2e_p95_ms,
        }
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

    let id = Uuid::now_v7();
    let sha256 = sha256_hex(&upload.raw);
    let labels = Value::Object(upload.labels.clone());
    let body = json!({
        "id": id,
        "brief_id": brief_id,
        "trial_id": trial_id,
        "kind": kind.as_str(),
        "stage": upload.stage,
        "parse_status": outcome.status.as_str(),
        "parse_error": outcome.error,
        "metrics": outcome.metrics,
        "warnings": outcome.warnings,
        "sha256": sha256,
        "size_bytes": upload.raw.len(),
        "links": {
            "self": format!("/api/v1/evidence/{id}"),
            "raw": format!("/api/v1/evidence/{id}/raw"),
            "page": format!("/evidence/{id}"),
        },
    });

    // With an object store the bytes are written first: a row that commits always has its bytes.
    let raw_object = state.evidence_store.put(&sha256, &upload.raw).await?;
    let new_evidence = repo::NewEvidence {
        id,
        brief_id,
        trial_id,
        kind: kind.as_str(),
        stage: upload.stage,
        content_type: &upload.content_type,
        filename: upload.filename.as_deref(),
        raw: &upload.raw,
        raw_object: raw_object.as_deref(),
        sha256: &sha256,
        metrics: &outcome.metrics,
        warnings: &outcome.warnings,
        parse_status: outcome.status.as_str(),
        parse_error: outcome.error.as_deref(),
        tool: outcome.tool.as_deref(),
        tool_version: outcome.tool_version.as_deref(),
        parser_version: PARSER_VERSION,
        labels: &labels,
        collected_at: upload.collected_at,
        uploaded_by,
    };
    if let Some(key) = &key {
        // The key's row and the evidence commit together, so a replay always finds the evidence.
        let mut tx = state.pool.begin().await?;
        let claimed = repo::claim_idempotency_key(&mut *tx, brief_id, key_scope, key, &fingerprint, 201, &body, id)
            .await
            .map_err(fk_to_not_found)?;
        if !claimed {
            // Another request with this key committed while we parsed: answer as it did.
            tx.rollback().await?;
            let stored = repo::find_idempotent(&state.pool, brief_id, key_scope, key)
                .await?
                .ok_or_else(|| AppError::Internal(anyhow::anyhow!("idempotency row vanished")))?;
            return replay(stored, &fingerprint);
        }
        repo::insert(&mut *tx, &new_evidence).await.map_err(fk_to_not_found)?;
        tx.commit().await?;
    } else {
        // Without a key the evidence row is the only write: one autocommitted statement.
        repo::insert(&state.pool, &new_evidence)
            .await
            .map_err(fk_to_not_found)?;
    }
    state
        .metrics
        .observe_ingest(kind.as_str(), outcome.status.as_str(), upload.raw.len());
    Ok(Ingested::Created(body))
}

/// 404 unless the brief exists. A caller whose token is scoped to the brief has proved it already
/// (the token's row references the brief, cascading), so this costs a query only for others.
pub async fn require_brief(state: &AppState, brief_id: Uuid, proved: bool) -> Result<(), AppError> {
    if proved || repo::brief_exists(&state.pool, brief_id).await? {
        Ok(())
    } else {
        Err(AppError::NotFound("brief"))
    }
}

/// One page of a brief's evidence (of one trial, or of all), newest first, and the cursor of the
/// next page.
pub async fn list_page(
    state: &AppState,
    brief_id: Uuid,
    trial: Option<Uuid>,
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

/// One item, or 404.
pub async fn get(state: &AppState, id: Uuid) -> Result<repo::EvidenceRow, AppError> {
    repo::get(&state.pool, id).await?.ok_or(AppError::NotFound("evidence"))
}

/// An item's exact bytes, wherever they are kept, with what describes them.
pub struct RawEvidence {
    pub brief_id: Uuid,
    pub content_type: String,
    pub filename: Option<String>,
    pub bytes: Vec<u8>,
}

pub async fn raw(state: &AppState, id: Uuid) -> Result<RawEvidence, AppError> {
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

pub use super::repo::StageTimes;

/// Per stage of one trial: how many uploads, and when the first and newest were taken.
pub async fn stage_times(state: &AppState, trial: Uuid) -> Result<Vec<StageTimes>, AppError> {
    Ok(repo::stage_times(&state.pool, trial).await?)
}

/// The newest upload of each brief, its sender named as people named their tokens: brief id →
/// (when it arrived, who sent it).
pub async fn latest_per_brief(
    state: &AppState,
    brief_ids: &[Uuid],
) -> Result<std::collections::HashMap<Uuid, (chrono::DateTime<chrono::Utc>, String)>, AppError> {
    let rows = repo::latest_per_brief(&state.pool, brief_ids).await?;
    let jtis: Vec<Uuid> = rows
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
