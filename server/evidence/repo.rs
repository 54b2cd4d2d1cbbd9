//! SQL for evidence and idempotency keys. Free functions over any executor; no repository trait.

use chrono::{DateTime, Utc};
use serde_json::{value::RawValue, Value};
use sqlx::{types::Json, FromRow, PgExecutor};
use uuid::Uuid;

use super::model::Observation;
use crate::error::AppError;
use crate::evidence_store::StoredRaw;
use crate::ids::{BriefId, EvidenceId, TrialId};

/// Everything but the raw bytes.
#[derive(Debug, Clone, FromRow)]
pub struct EvidenceRow {
    pub id: EvidenceId,
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub kind: String,
    pub stage: i16,
    pub content_type: String,
    pub filename: Option<String>,
    pub sha256: String,
    pub size_bytes: i64,
    pub metrics: Json<Value>,
    pub warnings: Json<Vec<String>>,
    pub parse_status: String,
    pub parse_error: Option<String>,
    pub tool: Option<String>,
    pub tool_version: Option<String>,
    pub parser_version: String,
    pub labels: Json<Value>,
    pub collected_at: DateTime<Utc>,
    pub received_at: DateTime<Utc>,
    pub uploaded_by: Option<String>,
}

/// A row to insert. `collected_at` `None` means now.
pub struct NewEvidence<'a> {
    pub id: Uuid,
    pub brief_id: BriefId,
    pub trial_id: TrialId,
    pub kind: &'a str,
    pub stage: i16,
    pub content_type: &'a str,
    pub filename: Option<&'a str>,
    pub raw: &'a [u8],
    /// Set when the bytes went to the object store: then the row keeps this name, not the bytes.
    pub raw_object: Option<&'a str>,
    pub sha256: &'a str,
    pub metrics: &'a Value,
    /// [`super::model::metric_keys_digest`] of `metrics`.
    pub metric_keys_digest: Option<&'a [u8]>,
    pub warnings: &'a [String],
    pub parse_status: &'a str,
    pub parse_error: Option<&'a str>,
    pub tool: Option<&'a str>,
    pub tool_version: Option<&'a str>,
    pub parser_version: &'a str,
    pub labels: &'a Value,
    pub collected_at: Option<DateTime<Utc>>,
    pub uploaded_by: Option<&'a str>,
}

/// A write refused because its brief or trial is gone (deleted meanwhile) answers 404, as a
/// missing one does.
pub fn fk_to_not_found(e: sqlx::Error) -> AppError {
    match &e {
        sqlx::Error::Database(db)
            if matches!(db.constraint(), Some("evidence_brief_fk" | "idempotency_keys_brief_fk")) =>
        {
            AppError::NotFound("brief")
        }
        sqlx::Error::Database(db) if db.constraint() == Some("evidence_trial_fk") => AppError::NotFound("trial"),
        _ => e.into(),
    }
}

/// One statement; `received_at` is the database's clock.
pub async fn insert(db: impl PgExecutor<'_>, e: &NewEvidence<'_>) -> Result<(), sqlx::Error> {
    let raw = if e.raw_object.is_some() { None } else { Some(e.raw) };
    let size_bytes = e.raw.len() as i64;
    sqlx::query!(
        "INSERT INTO evidence (id, brief_id, kind, stage, content_type, filename, raw, sha256, size_bytes, metrics, \
         warnings, parse_status, parse_error, tool, tool_version, parser_version, labels, collected_at, uploaded_by, \
         raw_object, trial_id, metric_keys_digest) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, \
         coalesce($18, now()), $19, $20, $21, $22)",
        e.id,
        e.brief_id.as_uuid(),
        e.kind,
        e.stage,
        e.content_type,
        e.filename,
        raw,
        e.sha256,
        size_bytes,
        e.metrics,
        // jsonb: the macro expects a `serde_json::Value`; a list of strings goes in as `Json`.
        Json(e.warnings) as _,
        e.parse_status,
        e.parse_error,
        e.tool,
        e.tool_version,
        e.parser_version,
        e.labels,
        e.collected_at,
        e.uploaded_by,
        e.raw_object,
        e.trial_id.as_uuid(),
        e.metric_keys_digest,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Several rows in one statement (a batch, or single uploads that arrived together): the same
/// columns as [`insert`], one array each. The arrays borrow from the rows: nothing is copied
/// before sqlx encodes it.
pub async fn insert_many(db: impl PgExecutor<'_>, rows: &[NewEvidence<'_>]) -> Result<(), sqlx::Error> {
    if rows.is_empty() {
        return Ok(());
    }
    fn col<'a, T>(rows: &'a [NewEvidence<'_>], f: impl Fn(&'a NewEvidence<'_>) -> T) -> Vec<T> {
        rows.iter().map(f).collect()
    }
    // Bytes kept in the row only when they did not go to the object store.
    let raws = col(rows, |e| e.raw_object.is_none().then_some(e.raw));
    sqlx::query!(
        "INSERT INTO evidence (id, brief_id, kind, stage, content_type, filename, raw, sha256, size_bytes, metrics, \
         warnings, parse_status, parse_error, tool, tool_version, parser_version, labels, collected_at, uploaded_by, \
         raw_object, trial_id, metric_keys_digest) \
         SELECT id, brief_id, kind, stage, content_type, filename, raw, sha256, size_bytes, metrics, warnings, \
           parse_status, parse_error, tool, tool_version, parser_version, labels, coalesce(collected_at, now()), \
           uploaded_by, raw_object, trial_id, metric_keys_digest \
         FROM UNNEST($1::uuid[], $2::uuid[], $3::text[], $4::int2[], $5::text[], $6::text[], $7::bytea[], \
           $8::text[], $9::int8[], $10::jsonb[], $11::jsonb[], $12::text[], $13::text[], $14::text[], $15::text[], \
           $16::text[], $17::jsonb[], $18::timestamptz[], $19::text[], $20::text[], $21::uuid[], $22::bytea[]) \
           AS r(id, brief_id, kind, stage, content_type, filename, raw, sha256, size_bytes, metrics, warnings, \
           parse_status, parse_error, tool, tool_version, parser_version, labels, collected_at, uploaded_by, \
           raw_object, trial_id, metric_keys_digest)",
        &col(rows, |e| e.id),
        &col(rows, |e| e.brief_id.as_uuid()),
        &col(rows, |e| e.kind) as _,
        &col(rows, |e| e.stage),
        &col(rows, |e| e.content_type) as _,
        &col(rows, |e| e.filename) as _,
        &raws as _,
        &col(rows, |e| e.sha256) as _,
        &col(rows, |e| e.raw.len() as i64),
        &col(rows, |e| e.metrics) as _,
        // jsonb: a list of strings goes in as `Json`.
        &col(rows, |e| Json(e.warnings)) as _,
        &col(rows, |e| e.parse_status) as _,
        &col(rows, |e| e.parse_error) as _,
        &col(rows, |e| e.tool) as _,
        &col(rows, |e| e.tool_version) as _,
        &col(rows, |e| e.parser_version) as _,
        &col(rows, |e| e.labels) as _,
        &col(rows, |e| e.collected_at) as _,
        &col(rows, |e| e.uploaded_by) as _,
        &col(rows, |e| e.raw_object) as _,
        &col(rows, |e| e.trial_id.as_uuid()),
        &col(rows, |e| e.metric_keys_digest) as _,
    )
    .execute(db)
    .await?;
    Ok(())
}

pub async fn get(db: impl PgExecutor<'_>, id: EvidenceId) -> Result<Option<EvidenceRow>, sqlx::Error> {
    sqlx::query_as!(
        EvidenceRow,
        r#"SELECT id, brief_id, trial_id, kind, stage, content_type, filename, sha256, size_bytes,
             metrics AS "metrics: Json<Value>", warnings AS "warnings: Json<Vec<String>>", parse_status, parse_error,
             tool, tool_version, parser_version, labels AS "labels: Json<Value>", collected_at, received_at,
             uploaded_by
           FROM evidence WHERE id = $1"#,
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await
}

/// When each of `trials` (pairs with their briefs) last received evidence, in one statement (the
/// newest item per trial through `evidence_trial_received_idx`); trials with none are left out.
pub async fn newest_received_of_trials(
    db: impl PgExecutor<'_>,
    briefs: &[BriefId],
    trials: &[TrialId],
) -> Result<Vec<(TrialId, DateTime<Utc>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT t.trial_id AS "trial_id!", newest.received_at AS "received_at!"
           FROM unnest($1::uuid[], $2::uuid[]) AS t (brief_id, trial_id)
           CROSS JOIN LATERAL (
               SELECT received_at FROM evidence e
               WHERE e.trial_id = t.trial_id AND e.brief_id = t.brief_id
               ORDER BY received_at DESC, id DESC LIMIT 1
           ) AS newest"#,
        briefs as _,
        trials as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.trial_id.into(), r.received_at)).collect())
}

/// Newest first, of one trial or of every trial; `after` is the (received_at, id) of the last item
/// already shown.
///
/// Two statements rather than one with `($2 IS NULL OR …)`, so the cursor is an index condition;
/// and planned for each call's values (`persistent(false)`): a plan cached while the table was
/// nearly empty (a bitmap scan of the brief's every row, then a sort) stayed in use as the table
/// grew, and took 0.3–1 s per page in `scripts/soak.sh`.
pub async fn list_for_brief(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    trial: Option<TrialId>,
    after: Option<(DateTime<Utc>, Uuid)>,
    limit: i64,
) -> Result<Vec<EvidenceRow>, sqlx::Error> {
    // Runtime query: the cursor and trial clauses are there or not (statements planned per call, so
    // each uses its own index: by brief, or by trial; see above).
    // The brief is always in the filter: a trial of another brief lists nothing under this one.
    let mut filter = "brief_id = $1".to_owned();
    let mut next = 3;
    if trial.is_some() {
        filter.push_str(&format!(" AND trial_id = ${next}"));
        next += 1;
    }
    if after.is_some() {
        filter.push_str(&format!(" AND (received_at, id) < (${next}, ${})", next + 1));
    }
    let sql = format!(
        "SELECT id, brief_id, trial_id, kind, stage, content_type, filename, sha256, size_bytes, metrics, \
         warnings, parse_status, parse_error, tool, tool_version, parser_version, labels, collected_at, \
         received_at, uploaded_by FROM evidence WHERE {filter} \
         ORDER BY received_at DESC, id DESC LIMIT $2"
    );
    let mut query = sqlx::query_as(&sql).bind(brief_id).bind(limit);
    if let Some(t) = trial {
        query = query.bind(t);
    }
    if let Some((at, id)) = after {
        query = query.bind(at).bind(id);
    }
    query.persistent(false).fetch_all(db).await
}

pub struct RawBytes {
    pub brief_id: BriefId,
    pub content_type: String,
    pub filename: Option<String>,
    pub stored: RawColumns,
}

/// The `raw` and `raw_object` columns (or a prefix of `raw` selected `AS raw`).
pub struct RawColumns {
    raw: Option<Vec<u8>>,
    raw_object: Option<String>,
}

impl From<RawColumns> for StoredRaw {
    /// The schema (migration 10) guarantees exactly one of the two is set.
    fn from(c: RawColumns) -> Self {
        match (c.raw, c.raw_object) {
            (Some(bytes), _) => StoredRaw::Inline(bytes),
            (None, Some(name)) => StoredRaw::Object(name),
            (None, None) => StoredRaw::Inline(Vec::new()),
        }
    }
}

pub async fn raw(db: impl PgExecutor<'_>, id: EvidenceId) -> Result<Option<RawBytes>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT brief_id, content_type, filename, raw, raw_object FROM evidence WHERE id = $1",
        id.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| RawBytes {
        brief_id: r.brief_id.into(),
        content_type: r.content_type,
        filename: r.filename,
        stored: RawColumns {
            raw: r.raw,
            raw_object: r.raw_object,
        },
    }))
}

/// The first `limit` bytes, for showing on a page without loading a large file: the bytes when the
/// row has them, else the object's name (the caller reads the range from the store).
pub async fn raw_prefix(db: impl PgExecutor<'_>, id: EvidenceId, limit: i32) -> Result<Option<StoredRaw>, sqlx::Error> {
    // NULL when the bytes are in the object store.
    let row = sqlx::query_as!(
        RawColumns,
        r#"SELECT substring(raw FROM 1 FOR $2) AS "raw?", raw_object FROM evidence WHERE id = $1"#,
        id.as_uuid(),
        limit,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(StoredRaw::from))
}

/// The raw bytes of the newest `before` scrape of a vLLM window on a brief.
/// The `before` scrape of a window of `kind` in one trial (one window id may pair a vLLM scrape
/// and a dcgm-exporter scrape).
pub async fn window_before(
    db: impl PgExecutor<'_>,
    trial_id: TrialId,
    kind: &str,
    window: &str,
) -> Result<Option<StoredRaw>, sqlx::Error> {
    let row = sqlx::query_as!(
        RawColumns,
        "SELECT raw, raw_object FROM evidence WHERE trial_id = $1 AND kind = $3 \
         AND labels ->> 'phase' = 'before' AND labels ->> 'window' = $2 \
         ORDER BY received_at DESC, id DESC LIMIT 1",
        trial_id.as_uuid(),
        window,
        kind,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(StoredRaw::from))
}

/// A stored first answer to an idempotent request.
#[derive(Debug)]
pub struct StoredResponse {
    pub request_sha256: String,
    pub response_status: i16,
    pub response_body: Json<Value>,
}

/// The stored answer for `caller`'s `key`, unless it is older than a day (keys expire; see the
/// migration `teams_and_trust`). Another caller's key of the same text is another key. Keys of
/// rentcheck itself (`system:…`, the demo loader) never expire: a demo loaded again a week later
/// still finds its evidence there.
pub async fn find_idempotent(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    key: &str,
) -> Result<Option<StoredResponse>, sqlx::Error> {
    sqlx::query_as!(
        StoredResponse,
        r#"SELECT request_sha256, response_status, response_body AS "response_body: Json<Value>"
           FROM idempotency_keys WHERE brief_id = $1 AND caller = $2 AND key = $3
             AND (created_at > now() - interval '24 hours' OR caller LIKE 'system:%')"#,
        brief_id.as_uuid(),
        caller,
        key,
    )
    .fetch_optional(db)
    .await
}

/// [`find_idempotent`] for several keys of one caller at once (a batch): the stored answer of each
/// key that has one, by key.
pub async fn find_idempotent_many(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    keys: &[String],
) -> Result<Vec<(String, StoredResponse)>, sqlx::Error> {
    if keys.is_empty() {
        return Ok(Vec::new());
    }
    // A runtime query, checked by the batch idempotency tests (`evidence_batch.rs`).
    let rows: Vec<(String, String, i16, Json<Value>)> = sqlx::query_as(
        "SELECT key, request_sha256, response_status, response_body FROM idempotency_keys \
         WHERE brief_id = $1 AND caller = $2 AND key = ANY($3) \
           AND (created_at > now() - interval '24 hours' OR caller LIKE 'system:%')",
    )
    .bind(brief_id)
    .bind(caller)
    .bind(keys)
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(key, request_sha256, response_status, response_body)| {
            (
                key,
                StoredResponse {
                    request_sha256,
                    response_status,
                    response_body,
                },
            )
        })
        .collect())
}

/// A key to claim for one item of a batch: the key, the request's fingerprint, the answer, the
/// evidence it stands for.
pub struct KeyClaim<'a> {
    pub key: &'a str,
    pub request_sha256: &'a str,
    pub body: &'a RawValue,
    pub evidence_id: Uuid,
}

/// [`claim_idempotency_key`] for every key of a batch in one statement (the keys are distinct);
/// answers the keys claimed. A key another request holds is not among them (a concurrent holder
/// makes this wait until it commits or rolls back, as for one key). Taken in key order, so two
/// batches claiming some of the same keys lock them in the same order.
pub async fn claim_idempotency_keys(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    status: i16,
    claims: &[KeyClaim<'_>],
) -> Result<Vec<String>, sqlx::Error> {
    if claims.is_empty() {
        return Ok(Vec::new());
    }
    let keys: Vec<&str> = claims.iter().map(|c| c.key).collect();
    let shas: Vec<&str> = claims.iter().map(|c| c.request_sha256).collect();
    let bodies: Vec<Json<&RawValue>> = claims.iter().map(|c| Json(c.body)).collect();
    let ids: Vec<Uuid> = claims.iter().map(|c| c.evidence_id).collect();
    sqlx::query_scalar(
        "INSERT INTO idempotency_keys (brief_id, key, request_sha256, response_status, response_body, evidence_id, caller) \
         SELECT $1, r.key, r.sha, $3, r.body, r.id, $2 \
         FROM unnest($4::text[], $5::text[], $6::jsonb[], $7::uuid[]) AS r(key, sha, body, id) ORDER BY r.key \
         ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE \
         SET request_sha256 = EXCLUDED.request_sha256, response_status = EXCLUDED.response_status, \
             response_body = EXCLUDED.response_body, evidence_id = EXCLUDED.evidence_id, created_at = now() \
         WHERE idempotency_keys.created_at <= now() - interval '24 hours' AND idempotency_keys.caller NOT LIKE 'system:%' \
         RETURNING key",
    )
    .bind(brief_id)
    .bind(caller)
    .bind(status)
    .bind(&keys)
    .bind(&shas)
    .bind(&bodies)
    .bind(&ids)
    .fetch_all(db)
    .await
}

/// Claims `key` for this request. `false` when another request holds it: a concurrent one in another
/// open transaction makes this statement wait until that one commits (then `false`) or rolls back
/// (then `true`), so two requests with one key can never both insert evidence.
#[allow(clippy::too_many_arguments)]
pub async fn claim_idempotency_key(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    key: &str,
    request_sha256: &str,
    status: i16,
    body: &RawValue,
    evidence_id: EvidenceId,
) -> Result<bool, sqlx::Error> {
    let inserted = sqlx::query_scalar!(
        "INSERT INTO idempotency_keys (brief_id, key, request_sha256, response_status, response_body, evidence_id, caller) \
         VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT ON CONSTRAINT idempotency_keys_pkey DO UPDATE \
         SET request_sha256 = EXCLUDED.request_sha256, response_status = EXCLUDED.response_status, \
             response_body = EXCLUDED.response_body, evidence_id = EXCLUDED.evidence_id, created_at = now() \
         WHERE idempotency_keys.created_at <= now() - interval '24 hours' AND idempotency_keys.caller NOT LIKE 'system:%' \
         RETURNING 1 AS one",
        brief_id.as_uuid(),
        key,
        request_sha256,
        status,
        Json(body) as _,
        evidence_id.as_uuid(),
        caller,
    )
    .fetch_optional(db)
    .await?;
    Ok(inserted.is_some())
}

/// The newest upload of each brief in `briefs`: when it arrived and who sent it.
pub struct LatestUpload {
    pub brief_id: BriefId,
    pub received_at: DateTime<Utc>,
    pub uploaded_by: Option<String>,
}

/// The newest upload of each of `briefs` (one index probe per brief).
pub async fn latest_per_brief(db: impl PgExecutor<'_>, briefs: &[BriefId]) -> Result<Vec<LatestUpload>, sqlx::Error> {
    sqlx::query_as!(
        LatestUpload,
        // One probe of the newest entry per brief, where `DISTINCT ON` read every item of every
        // brief (8 ms against 0.6 ms for 25 briefs of ~200 items each).
        r#"SELECT b.id AS "brief_id!", e.received_at AS "received_at!", e.uploaded_by
           FROM unnest($1::uuid[]) AS b(id)
           CROSS JOIN LATERAL (SELECT received_at, uploaded_by FROM evidence WHERE brief_id = b.id
                               ORDER BY received_at DESC, id DESC LIMIT 1) AS e"#,
        briefs as _,
    )
    .fetch_all(db)
    .await
}

/// What a trial holds of a test plan's steps: per `plan_step` label, the uploads that parsed (in
/// whole or in part) and the newest of them, and how many failed to parse and when the newest did.
pub struct HeldStep {
    pub step: String,
    pub parsed: Vec<Uuid>,
    /// The evidence kinds among the uploads that parsed.
    pub kinds_parsed: Vec<String>,
    pub newest_parsed: Option<DateTime<Utc>>,
    pub failed: i64,
    pub newest_failed: Option<DateTime<Utc>>,
}

impl HeldStep {
    /// A step is held by uploads that parsed, one of them of the step's own `kind`, and arrived
    /// after every failed one: a failed upload leaves its step to run again (a batch's items arrive
    /// at one moment, so one failed item of a load point's batch leaves the whole point to run
    /// again), and so does an output the server never stored (a load test's result refused as too
    /// large, beside its scrapes that were stored).
    pub fn is_held(&self, kind: &str) -> bool {
        if !self.kinds_parsed.iter().any(|k| k == kind) {
            return false;
        }
        match (self.newest_parsed, self.newest_failed) {
            (Some(_), None) => true,
            (Some(parsed), Some(failed)) => parsed > failed,
            (None, _) => false,
        }
    }
}

/// The test-plan steps a trial has uploads of (its `plan_step` labels), so a re-run of
/// `collect --plan` skips those it holds. Reads the trial's rows through `evidence_trial_received_idx`.
pub async fn plan_steps_held(db: impl PgExecutor<'_>, trial_id: TrialId) -> Result<Vec<HeldStep>, sqlx::Error> {
    sqlx::query_as!(
        HeldStep,
        r#"SELECT labels ->> 'plan_step' AS "step!",
                  coalesce(array_agg(id ORDER BY received_at, id) FILTER (WHERE parse_status <> 'failed'),
                           '{}') AS "parsed!",
                  coalesce(array_agg(DISTINCT kind) FILTER (WHERE parse_status <> 'failed'),
                           '{}') AS "kinds_parsed!",
                  max(received_at) FILTER (WHERE parse_status <> 'failed') AS newest_parsed,
                  count(*) FILTER (WHERE parse_status = 'failed') AS "failed!",
                  max(received_at) FILTER (WHERE parse_status = 'failed') AS newest_failed
           FROM evidence WHERE trial_id = $1 AND labels ->> 'plan_step' IS NOT NULL
           GROUP BY 1 ORDER BY 1"#,
        trial_id.as_uuid(),
    )
    .fetch_all(db)
    .await
}

struct ObservationRow {
    key: String,
    stage: i16,
    value: Json<Value>,
    evidence_id: Uuid,
    collected_at: DateTime<Utc>,
    received_at: DateTime<Utc>,
}

/// The newest value of each of `keys` per stage in one trial, in one query: `newest_trial_metrics`
/// (the trials migration) reads the compacted newest values and the items not yet compacted, newest
/// by `collected_at`, then `received_at`, then id (UUIDv7: upload order).
pub async fn newest_metrics(
    db: impl PgExecutor<'_>,
    trial: TrialId,
    keys: &[String],
) -> Result<Vec<Observation>, sqlx::Error> {
    // A function's result columns have no table behind them, so the macro takes them as nullable.
    // None can be NULL: both branches of `newest_trial_metrics` read NOT NULL columns, and the
    // pending branch takes `e.metrics -> k.key` only for keys that `e.metrics ? k.key` found.
    let rows = sqlx::query_as!(
        ObservationRow,
        r#"SELECT key AS "key!", stage AS "stage!", value AS "value!: Json<Value>", evidence_id AS "evidence_id!",
                  collected_at AS "collected_at!", received_at AS "received_at!"
           FROM newest_trial_metrics($1, $2)"#,
        trial.as_uuid(),
        keys,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| Observation {
            key: r.key,
            stage: u8::try_from(r.stage).unwrap_or(0),
            value: r.value.0,
            evidence_id: r.evidence_id,
            collected_at: r.collected_at,
            received_at: r.received_at,
        })
        .collect())
}

/// A trial's newest load tests (stage 3, `bench-serving`, read), with only their `serving.*`
/// metrics, for its load points. Reads `evidence_trial_load_tests_idx`; `limit` bounds a trial with
/// very many.
pub async fn load_tests(
    db: impl PgExecutor<'_>,
    trial_id: TrialId,
    limit: i64,
) -> Result<Vec<(Uuid, serde_json::Map<String, Value>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id,
                  (SELECT COALESCE(jsonb_object_agg(m.key, m.value), '{}'::jsonb)
                     FROM jsonb_each(metrics) AS m
                    WHERE m.key LIKE 'serving.%') AS "metrics!: Json<serde_json::Map<String, Value>>"
             FROM evidence
            WHERE trial_id = $1 AND stage = 3 AND kind = 'bench-serving' AND parse_status <> 'failed'
            ORDER BY received_at DESC, id DESC
            LIMIT $2"#,
        trial_id.as_uuid(),
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.metrics.0)).collect())
}

/// The load tests of the trial's newest run received after `since` (a re-validation after an
/// approval): those labelled with the same `revalidation` run as the newest one (`collect --plan
/// --rerun` labels every upload with the UTC day it started, so a run across midnight stays one),
/// else those received on the newest one's UTC day. Newest first, at most `limit`.
pub async fn newest_run_load_tests(
    db: impl PgExecutor<'_>,
    trial_id: TrialId,
    since: chrono::DateTime<chrono::Utc>,
    limit: i64,
) -> Result<Vec<(Uuid, serde_json::Map<String, Value>)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"WITH tests AS (
               SELECT id, received_at, labels ->> 'revalidation' AS run, metrics FROM evidence
                WHERE trial_id = $1 AND stage = 3 AND kind = 'bench-serving' AND parse_status <> 'failed'
                  AND received_at > $3
           ), newest AS (
               SELECT received_at, run FROM tests ORDER BY received_at DESC, id DESC LIMIT 1
           )
           SELECT t.id AS "id!",
                  (SELECT COALESCE(jsonb_object_agg(m.key, m.value), '{}'::jsonb)
                     FROM jsonb_each(t.metrics) AS m
                    WHERE m.key LIKE 'serving.%') AS "metrics!: Json<serde_json::Map<String, Value>>"
             FROM tests t, newest n
            WHERE CASE WHEN n.run IS NOT NULL THEN t.run = n.run
                       ELSE t.received_at >= date_trunc('day', n.received_at, 'UTC') END
            ORDER BY t.received_at DESC, t.id DESC
            LIMIT $2"#,
        trial_id.as_uuid(),
        limit,
        since,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (r.id, r.metrics.0)).collect())
}

/// The newest stage-3 load-test evidence (bench-serving or vllm-metrics), if any.
pub async fn load_test_evidence(db: impl PgExecutor<'_>, brief: BriefId) -> Result<Option<Uuid>, sqlx::Error> {
    sqlx::query_scalar!(
        "SELECT id FROM evidence WHERE brief_id = $1 AND stage = 3 AND kind IN ('bench-serving', 'vllm-metrics') \
         ORDER BY received_at DESC, id DESC LIMIT 1",
        brief.as_uuid(),
    )
    .fetch_optional(db)
    .await
}
