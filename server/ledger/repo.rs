//! SQL for the ledger. Free functions over any executor; no repository trait.

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rust_decimal::{prelude::ToPrimitive, Decimal};
use serde::Serialize;
use sqlx::{PgConnection, PgExecutor};
use uuid::Uuid;

use super::model::{
    finish, gpu_micros_per_day, merge_spans, sort_spans, Category, CategoryTotals, LedgerLine, LedgerSummary, Merged,
    Outputs, OutputsPatch, Span,
};
use crate::{
    db::StoredText,
    ids::{BriefId, TrialId},
};

/// Rows per INSERT … SELECT FROM UNNEST statement.
const INSERT_CHUNK: usize = 10_000;

/// Lines as the columns an `UNNEST` of arrays takes, one array per field.
struct Columns {
    categories: Vec<String>,
    resources: Vec<String>,
    descriptions: Vec<String>,
    starts: Vec<Option<DateTime<Utc>>>,
    ends: Vec<Option<DateTime<Utc>>>,
    gpus: Vec<Option<i32>>,
    rates: Vec<Option<Decimal>>,
    amounts: Vec<Decimal>,
    currencies: Vec<String>,
}

impl Columns {
    fn of<'l>(lines: impl Iterator<Item = &'l LedgerLine>) -> Self {
        let mut c = Columns {
            categories: Vec::new(),
            resources: Vec::new(),
            descriptions: Vec::new(),
            starts: Vec::new(),
            ends: Vec::new(),
            gpus: Vec::new(),
            rates: Vec::new(),
            amounts: Vec::new(),
            currencies: Vec::new(),
        };
        for l in lines {
            c.categories.push(l.category.as_str().to_owned());
            c.resources.push(l.resource.clone());
            c.descriptions.push(l.description.clone());
            c.starts.push(l.starts_at);
            c.ends.push(l.ends_at);
            c.gpus.push(l.gpus);
            c.rates.push(l.rate_per_gpu_hour);
            c.amounts.push(l.amount);
            c.currencies.push(l.currency.clone());
        }
        c
    }
}

/// Inserts lines in file order, a few large UNNEST statements rather than one INSERT per line;
/// `trials[i]` is the trial of `lines[i]`. Run it inside the caller's transaction: an import is all
/// or nothing.
pub async fn insert_lines(
    conn: &mut PgConnection,
    brief_id: BriefId,
    import_id: Uuid,
    trials: &[TrialId],
    lines: &[LedgerLine],
) -> Result<u64, sqlx::Error> {
    let mut inserted = 0;
    for (chunk, trial_chunk) in lines.chunks(INSERT_CHUNK).zip(trials.chunks(INSERT_CHUNK)) {
        let ids: Vec<Uuid> = chunk.iter().map(|_| Uuid::now_v7()).collect();
        let c = Columns::of(chunk.iter());
        let done = sqlx::query!(
            "INSERT INTO ledger_lines (id, brief_id, import_id, category, resource, description, starts_at, \
             ends_at, gpus, rate_per_gpu_hour, amount, currency, trial_id) \
             SELECT t.id, $1, $2, t.category, t.resource, t.description, t.starts_at, t.ends_at, t.gpus, t.rate, \
             t.amount, t.currency, t.trial_id \
             FROM UNNEST($3::uuid[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[], \
             $9::int4[], $10::numeric[], $11::numeric[], $12::text[], $13::uuid[]) WITH ORDINALITY \
             AS t(id, category, resource, description, starts_at, ends_at, gpus, rate, amount, currency, trial_id, ord) \
             ORDER BY t.ord",
            brief_id.as_uuid(),
            import_id,
            &ids,
            &c.categories,
            &c.resources,
            &c.descriptions,
            // Arrays whose elements may be NULL: the macro infers `&[T]`; the type says `Option<T>`.
            &c.starts as &[Option<DateTime<Utc>>],
            &c.ends as &[Option<DateTime<Utc>>],
            &c.gpus as &[Option<i32>],
            &c.rates as &[Option<Decimal>],
            &c.amounts,
            &c.currencies,
            trial_chunk as _,
        )
        .execute(&mut *conn)
        .await?;
        inserted += done.rows_affected();
    }
    Ok(inserted)
}

/// The places in `lines` of those their trial (`trials[i]`) already holds field for field: a line
/// with a resource and an interval sent again (the same file imported twice). One join per chunk of
/// the import against the stored lines, planned with what is stored (a check inside the INSERT was
/// planned against the empty table of a new trial and scanned it per row: 70 s for 100,000 lines).
/// Lines without a resource or an interval cannot be told from a second charge and are never
/// repeats; lines repeated inside one import are not compared with each other.
pub async fn repeats(
    conn: &mut PgConnection,
    brief_id: BriefId,
    trials: &[TrialId],
    lines: &[LedgerLine],
) -> Result<std::collections::HashSet<usize>, sqlx::Error> {
    let mut found = std::collections::HashSet::new();
    let checked: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].starts_at.is_some() && !lines[*i].resource.is_empty())
        .collect();
    for chunk in checked.chunks(INSERT_CHUNK) {
        let at: Vec<i64> = chunk.iter().map(|i| *i as i64).collect();
        let c = Columns::of(chunk.iter().map(|i| &lines[*i]));
        let line_trials: Vec<Uuid> = chunk.iter().map(|i| trials[*i].as_uuid()).collect();
        let places = sqlx::query_scalar!(
            "SELECT DISTINCT t.at AS \"at!\" FROM UNNEST($2::int8[], $3::text[], $4::text[], $5::text[], \
             $6::timestamptz[], $7::timestamptz[], $8::int4[], $9::numeric[], $10::numeric[], $11::text[], \
             $12::uuid[]) AS t(at, category, resource, description, starts_at, ends_at, gpus, rate, amount, currency, \
             trial_id) \
             JOIN ledger_lines l ON l.brief_id = $1 AND l.trial_id = t.trial_id AND l.category = t.category \
             AND l.resource = t.resource AND l.starts_at = t.starts_at AND l.ends_at = t.ends_at \
             AND l.description = t.description AND l.gpus IS NOT DISTINCT FROM t.gpus \
             AND l.rate_per_gpu_hour IS NOT DISTINCT FROM t.rate AND l.amount = t.amount \
             AND l.currency = t.currency",
            brief_id.as_uuid(),
            &at,
            &c.categories,
            &c.resources,
            &c.descriptions,
            &c.starts as &[Option<DateTime<Utc>>],
            &c.ends as &[Option<DateTime<Utc>>],
            &c.gpus as &[Option<i32>],
            &c.rates as &[Option<Decimal>],
            &c.amounts,
            &c.currencies,
            &line_trials,
        )
        .fetch_all(&mut *conn)
        .await?;
        found.extend(places.into_iter().filter_map(|p| usize::try_from(p).ok()));
    }
    Ok(found)
}

/// Sets the figures the patch names for one trial; the others keep their stored value.
pub async fn upsert_outputs(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    trial_id: TrialId,
    patch: &OutputsPatch,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ledger_outputs (brief_id, trial_id, accepted, rejected, retries, failed_jobs, idle_hours) \
         VALUES ($1, $7, COALESCE($2::int8, 0), COALESCE($3::int8, 0), COALESCE($4::int8, 0), COALESCE($5::int8, 0), $6) \
         ON CONFLICT (trial_id) DO UPDATE SET \
           accepted = COALESCE($2, ledger_outputs.accepted), \
           rejected = COALESCE($3, ledger_outputs.rejected), \
           retries = COALESCE($4, ledger_outputs.retries), \
           failed_jobs = COALESCE($5, ledger_outputs.failed_jobs), \
           idle_hours = COALESCE($6, ledger_outputs.idle_hours), \
           updated_at = now()",
        brief_id.as_uuid(),
        patch.accepted,
        patch.rejected,
        patch.retries,
        patch.failed_jobs,
        patch.idle_hours,
        trial_id.as_uuid(),
    )
    .execute(db)
    .await?;
    Ok(())
}

struct OutputsRow {
    accepted: i64,
    rejected: i64,
    retries: i64,
    failed_jobs: i64,
    idle_hours: Option<Decimal>,
}

pub async fn outputs(db: impl PgExecutor<'_>, trial_id: TrialId) -> Result<Outputs, sqlx::Error> {
    let row = sqlx::query_as!(
        OutputsRow,
        "SELECT accepted, rejected, retries, failed_jobs, idle_hours FROM ledger_outputs WHERE trial_id = $1",
        trial_id.as_uuid(),
    )
    .fetch_optional(db)
    .await?;
    Ok(row
        .map(|r| Outputs {
            accepted: r.accepted,
            rejected: r.rejected,
            retries: r.retries,
            failed_jobs: r.failed_jobs,
            idle_hours: r.idle_hours.map(|d| d.normalize()),
        })
        .unwrap_or_default())
}

/// Re-merges the accelerator lines of one trial's given resources (one sorted pass per resource over
/// `ledger_lines_accelerator_idx`, in byte order so PostgreSQL's order is Rust's) and stores each
/// resource's GPU-microseconds and cost in `ledger_accelerator_merged`. Call it in the import's
/// transaction after `briefs::service::lock`, with every resource the import added lines for.
pub async fn remerge(
    conn: &mut PgConnection,
    brief_id: BriefId,
    trial_id: TrialId,
    resources: &[&str],
) -> Result<(), sqlx::Error> {
    if resources.is_empty() {
        return Ok(());
    }
    let resources: Vec<String> = resources.iter().map(|r| (*r).to_owned()).collect();
    // Accelerator lines always have an interval and a GPU count (a CHECK in migration 4).
    let rows = sqlx::query!(
        r#"SELECT resource, starts_at AS "starts_at!", ends_at AS "ends_at!", gpus AS "gpus!", amount
           FROM ledger_lines
           WHERE trial_id = $1 AND category = 'accelerator' AND resource = ANY($2)
           ORDER BY resource COLLATE "C", starts_at, ends_at"#,
        trial_id.as_uuid(),
        &resources,
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut spans: Vec<Span<'_>> = rows
        .iter()
        .map(|r| Span {
            resource: &r.resource,
            start: r.starts_at,
            end: r.ends_at,
            gpus: r.gpus,
            amount: r.amount,
        })
        .collect();
    sort_spans(&mut spans); // a check only: the index order is already the merge order
    let mut names: Vec<String> = Vec::new();
    let mut micros: Vec<Decimal> = Vec::new();
    let mut costs: Vec<Decimal> = Vec::new();
    let mut counts: Vec<i64> = Vec::new();
    let mut daily = Daily::default();
    for group in spans.chunk_by(|a, b| a.resource == b.resource) {
        let merged = merge_spans(group.iter().copied());
        names.push(group[0].resource.to_owned());
        micros.push(Decimal::from_i128_with_scale(merged.gpu_micros, 0));
        costs.push(merged.cost);
        counts.push(group.len() as i64);
        for (day, m) in gpu_micros_per_day(group) {
            daily.resources.push(group[0].resource.to_owned());
            daily.days.push(day);
            daily.micros.push(Decimal::from_i128_with_scale(m, 0));
        }
    }
    store_daily(&mut *conn, trial_id, &resources, &daily).await?;
    sqlx::query!(
        "INSERT INTO ledger_accelerator_merged (brief_id, trial_id, resource, gpu_micros, cost, lines) \
         SELECT $1, $6, * FROM UNNEST($2::text[], $3::numeric[], $4::numeric[], $5::int8[]) \
         ON CONFLICT (trial_id, resource) DO UPDATE SET \
           gpu_micros = EXCLUDED.gpu_micros, cost = EXCLUDED.cost, lines = EXCLUDED.lines",
        brief_id.as_uuid(),
        &names,
        &micros,
        &costs,
        &counts,
        trial_id.as_uuid(),
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The merged GPU-microseconds of one trial's resources per day, as columns.
#[derive(Default)]
struct Daily {
    resources: Vec<String>,
    days: Vec<chrono::NaiveDate>,
    micros: Vec<Decimal>,
}

/// Replaces the per-day merge of the trial's `resources` with `daily` (`ledger_accelerator_daily`).
async fn store_daily(
    conn: &mut PgConnection,
    trial_id: TrialId,
    resources: &[String],
    daily: &Daily,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "DELETE FROM ledger_accelerator_daily WHERE trial_id = $1 AND resource = ANY($2)",
        trial_id.as_uuid(),
        resources,
    )
    .execute(&mut *conn)
    .await?;
    sqlx::query!(
        "INSERT INTO ledger_accelerator_daily (trial_id, resource, day, gpu_micros) \
         SELECT $1, * FROM UNNEST($2::text[], $3::date[], $4::numeric[])",
        trial_id.as_uuid(),
        &daily.resources,
        &daily.days,
        &daily.micros,
    )
    .execute(&mut *conn)
    .await?;
    Ok(())
}

/// The summary: sums per category in SQL (an index-only scan of `ledger_lines_brief_category_idx`)
/// and the accelerator figures from `ledger_accelerator_merged`, one row per resource, which every
/// import keeps current with the one-pass merge (`remerge`). The same figures as
/// `model::summarize` over every line.
pub async fn summary(conn: &mut PgConnection, trial_id: TrialId, currency: &str) -> Result<LedgerSummary, sqlx::Error> {
    let sums = sqlx::query!(
        r#"SELECT category AS "category: StoredText<Category>", sum(amount) AS "sum!" FROM ledger_lines WHERE trial_id = $1
           AND category IN ('host', 'storage', 'network', 'support', 'license') GROUP BY category"#,
        trial_id.as_uuid(),
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut totals = CategoryTotals::default();
    for row in sums {
        totals.add(row.category.0, row.sum);
    }
    let accelerator = sqlx::query!(
        "SELECT sum(gpu_micros) AS micros, sum(cost) AS cost FROM ledger_accelerator_merged WHERE trial_id = $1",
        trial_id.as_uuid(),
    )
    .fetch_one(&mut *conn)
    .await?;
    let merged = Merged {
        gpu_micros: accelerator.micros.and_then(|m| m.to_i128()).unwrap_or(0),
        cost: accelerator.cost.unwrap_or_default().normalize(),
    };
    let outputs = outputs(&mut *conn, trial_id).await?;
    Ok(finish(totals, &merged, &outputs, currency))
}

/// [`summary`] of many trials at once, each in its currency: three statements whatever their
/// number; the answers in the order of `keys`.
pub async fn summaries(conn: &mut PgConnection, keys: &[(TrialId, &str)]) -> Result<Vec<LedgerSummary>, sqlx::Error> {
    let ids: Vec<Uuid> = keys.iter().map(|(t, _)| t.as_uuid()).collect();
    let sums = sqlx::query!(
        r#"SELECT trial_id, category AS "category: StoredText<Category>", sum(amount) AS "sum!" FROM ledger_lines
           WHERE trial_id = ANY($1)
           AND category IN ('host', 'storage', 'network', 'support', 'license') GROUP BY trial_id, category"#,
        &ids[..],
    )
    .fetch_all(&mut *conn)
    .await?;
    let mut by_trial: HashMap<Uuid, Vec<(Category, Decimal)>> = HashMap::new();
    for row in sums {
        by_trial
            .entry(row.trial_id)
            .or_default()
            .push((row.category.0, row.sum));
    }
    let merged: HashMap<Uuid, Merged> = sqlx::query!(
        r#"SELECT trial_id, sum(gpu_micros) AS micros, sum(cost) AS cost FROM ledger_accelerator_merged
           WHERE trial_id = ANY($1) GROUP BY trial_id"#,
        &ids[..],
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| {
        let merged = Merged {
            gpu_micros: r.micros.and_then(|m| m.to_i128()).unwrap_or(0),
            cost: r.cost.unwrap_or_default().normalize(),
        };
        (r.trial_id, merged)
    })
    .collect();
    let outputs: HashMap<Uuid, Outputs> = sqlx::query!(
        "SELECT trial_id, accepted, rejected, retries, failed_jobs, idle_hours FROM ledger_outputs WHERE trial_id = ANY($1)",
        &ids[..],
    )
    .fetch_all(&mut *conn)
    .await?
    .into_iter()
    .map(|r| {
        let outputs = Outputs {
            accepted: r.accepted,
            rejected: r.rejected,
            retries: r.retries,
            failed_jobs: r.failed_jobs,
            idle_hours: r.idle_hours.map(|d| d.normalize()),
        };
        (r.trial_id, outputs)
    })
    .collect();
    Ok(keys
        .iter()
        .map(|(trial, currency)| {
            let id = trial.as_uuid();
            let mut totals = CategoryTotals::default();
            for (c, sum) in by_trial.get(&id).into_iter().flatten() {
                totals.add(*c, *sum);
            }
            let merged = merged.get(&id).cloned().unwrap_or_default();
            let outputs = outputs.get(&id).cloned().unwrap_or_default();
            finish(totals, &merged, &outputs, currency)
        })
        .collect())
}

/// A stored line: the line plus its id and position.
#[derive(Debug, Clone, Serialize, utoipa::ToSchema)]
pub struct StoredLine {
    pub id: Uuid,
    pub seq: i64,
    #[serde(flatten)]
    pub line: LedgerLine,
    pub created_at: DateTime<Utc>,
}

struct LineRow {
    id: Uuid,
    seq: i64,
    category: StoredText<Category>,
    resource: String,
    description: String,
    starts_at: Option<DateTime<Utc>>,
    ends_at: Option<DateTime<Utc>>,
    gpus: Option<i32>,
    rate_per_gpu_hour: Option<Decimal>,
    amount: Decimal,
    currency: String,
    trial_id: TrialId,
    created_at: DateTime<Utc>,
}

impl From<LineRow> for StoredLine {
    fn from(r: LineRow) -> Self {
        StoredLine {
            id: r.id,
            seq: r.seq,
            line: LedgerLine {
                category: r.category.0,
                resource: r.resource,
                description: r.description,
                starts_at: r.starts_at,
                ends_at: r.ends_at,
                gpus: r.gpus,
                rate_per_gpu_hour: r.rate_per_gpu_hour.map(|d| d.normalize()),
                amount: r.amount.normalize(),
                currency: r.currency,
                trial: Some(r.trial_id.to_string()),
            },
            created_at: r.created_at,
        }
    }
}

/// One trial's lines, newest first, `limit` lines with `seq` below `before` (a cursor from the
/// previous page).
pub async fn newest_lines(
    db: impl PgExecutor<'_>,
    trial_id: TrialId,
    before: Option<i64>,
    limit: i64,
) -> Result<Vec<StoredLine>, sqlx::Error> {
    let rows = sqlx::query_as!(
        LineRow,
        r#"SELECT id, seq, category AS "category: StoredText<Category>", resource, description, starts_at, ends_at,
             gpus, rate_per_gpu_hour, amount, currency, trial_id, created_at FROM ledger_lines
           WHERE trial_id = $1 AND seq < $2 ORDER BY seq DESC LIMIT $3"#,
        trial_id.as_uuid(),
        before.unwrap_or(i64::MAX),
        limit,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(StoredLine::from).collect())
}

/// Every line of a brief, each with its trial, in insertion (file) order, for the CSV export.
/// Each line's trial is named by the trial's name (`trial_names`: the brief's trials, id and name),
/// so an exported file reads well and imports into another brief whose trials have the same names.
pub async fn all_lines(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    trial_names: &[(TrialId, String)],
) -> Result<Vec<LedgerLine>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT id, seq, category AS "category: StoredText<Category>", resource, description, starts_at, ends_at,
             gpus, rate_per_gpu_hour, amount, currency, trial_id, created_at FROM ledger_lines
           WHERE brief_id = $1 ORDER BY seq"#,
        brief_id.as_uuid(),
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let row = LineRow {
                id: r.id,
                seq: r.seq,
                category: r.category,
                resource: r.resource,
                description: r.description,
                starts_at: r.starts_at,
                ends_at: r.ends_at,
                gpus: r.gpus,
                rate_per_gpu_hour: r.rate_per_gpu_hour,
                amount: r.amount,
                currency: r.currency,
                trial_id: r.trial_id.into(),
                created_at: r.created_at,
            };
            let trial = trial_names
                .iter()
                .find(|(id, _)| id.as_uuid() == r.trial_id)
                .map(|(_, name)| name.clone());
            LedgerLine {
                trial,
                ..StoredLine::from(row).line
            }
        })
        .collect())
}

/// Lines of one trial.
pub async fn count_lines(db: impl PgExecutor<'_>, trial_id: TrialId) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT count(*) AS "count!" FROM ledger_lines WHERE trial_id = $1"#,
        trial_id.as_uuid()
    )
    .fetch_one(db)
    .await
}

/// Whether any trial of the brief has a ledger line.
pub async fn brief_has_lines(db: impl PgExecutor<'_>, brief_id: BriefId) -> Result<bool, sqlx::Error> {
    sqlx::query_scalar!(
        r#"SELECT EXISTS (SELECT 1 FROM ledger_lines WHERE brief_id = $1) AS "exists!""#,
        brief_id.as_uuid()
    )
    .fetch_one(db)
    .await
}

/// The first answer to a caller's `Idempotency-Key` on this brief, if it is less than a day old:
/// (fingerprint of the request, the answer's body).
pub async fn find_idempotent(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    key: &str,
) -> Result<Option<(String, serde_json::Value)>, sqlx::Error> {
    let row = sqlx::query!(
        "SELECT request_sha256, response_body FROM ledger_idempotency_keys \
         WHERE brief_id = $1 AND caller = $2 AND key = $3 AND created_at > now() - interval '24 hours'",
        brief_id.as_uuid(),
        caller,
        key,
    )
    .fetch_optional(db)
    .await?;
    Ok(row.map(|r| (r.request_sha256, r.response_body)))
}

/// Records the answer to a caller's key (replacing an expired one), in the import's transaction.
pub async fn save_idempotent(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    caller: &str,
    key: &str,
    request_sha256: &str,
    body: &serde_json::Value,
) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "INSERT INTO ledger_idempotency_keys (brief_id, caller, key, request_sha256, response_status, response_body) \
         VALUES ($1, $2, $3, $4, 201, $5) \
         ON CONFLICT (brief_id, caller, key) DO UPDATE SET request_sha256 = EXCLUDED.request_sha256, \
             response_body = EXCLUDED.response_body, created_at = now()",
        brief_id.as_uuid(),
        caller,
        key,
        request_sha256,
        body,
    )
    .execute(db)
    .await?;
    Ok(())
}

/// Records the FOCUS rows an import brings for one trial (their identities) and answers the ones
/// that were new: a row imported before adds nothing. Run it in the import's transaction, after
/// `briefs::service::lock`.
pub async fn claim_focus_rows(
    conn: &mut PgConnection,
    brief_id: BriefId,
    trial_id: TrialId,
    import_id: Uuid,
    identities: &[Vec<u8>],
) -> Result<Vec<Vec<u8>>, sqlx::Error> {
    sqlx::query_scalar!(
        "INSERT INTO ledger_focus_rows (trial_id, brief_id, identity, import_id) \
         SELECT $1, $2, t.identity, $3 FROM UNNEST($4::bytea[]) AS t(identity) \
         ON CONFLICT (trial_id, identity) DO NOTHING RETURNING identity",
        trial_id.as_uuid(),
        brief_id.as_uuid(),
        import_id,
        identities,
    )
    .fetch_all(&mut *conn)
    .await
}

/// Keeps the usage rows of an export that name a commitment discount (once per identity).
/// Answers how many it kept that no earlier import had.
pub async fn insert_commitment_use(
    conn: &mut PgConnection,
    brief_id: BriefId,
    import_id: Uuid,
    rows: &[super::focus::CommitmentUse],
) -> Result<u64, sqlx::Error> {
    let identities: Vec<Vec<u8>> = rows.iter().map(|r| r.identity.to_vec()).collect();
    let ids: Vec<String> = rows.iter().map(|r| r.commitment_discount_id.clone()).collect();
    let statuses: Vec<Option<String>> = rows.iter().map(|r| r.status.map(|s| s.as_str().to_owned())).collect();
    let resources: Vec<String> = rows.iter().map(|r| r.resource.clone()).collect();
    let starts: Vec<chrono::DateTime<chrono::Utc>> = rows.iter().map(|r| r.starts_at).collect();
    let ends: Vec<chrono::DateTime<chrono::Utc>> = rows.iter().map(|r| r.ends_at).collect();
    let gpus: Vec<Option<i32>> = rows.iter().map(|r| r.gpus).collect();
    let done = sqlx::query!(
        "INSERT INTO ledger_commitment_rows (brief_id, identity, commitment_discount_id, status, resource, starts_at,
             ends_at, gpus, import_id)
         SELECT $1, t.identity, t.cid, t.status, t.resource, t.starts_at, t.ends_at, t.gpus, $2
         FROM UNNEST($3::bytea[], $4::text[], $5::text[], $6::text[], $7::timestamptz[], $8::timestamptz[], $9::int4[])
              AS t(identity, cid, status, resource, starts_at, ends_at, gpus)
         ON CONFLICT (brief_id, identity) DO NOTHING",
        brief_id.as_uuid(),
        import_id,
        &identities,
        &ids,
        &statuses as &[Option<String>],
        &resources,
        &starts,
        &ends,
        &gpus as &[Option<i32>],
    )
    .execute(&mut *conn)
    .await?;
    Ok(done.rows_affected())
}

/// A kept FOCUS row of a commitment discount, as its commitment reads it.
pub struct CommitmentUseRow {
    /// `Used`, `Unused`, or `None` when the export did not say.
    pub status: Option<String>,
    pub resource: String,
    pub starts_at: chrono::DateTime<chrono::Utc>,
    pub ends_at: chrono::DateTime<chrono::Utc>,
    pub gpus: Option<i32>,
}

/// The brief's kept rows of the commitment discount `id` that overlap `[from, to)`.
pub async fn commitment_use(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    id: &str,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<CommitmentUseRow>, sqlx::Error> {
    sqlx::query_as!(
        CommitmentUseRow,
        "SELECT status, resource, starts_at, ends_at, gpus FROM ledger_commitment_rows
         WHERE brief_id = $1 AND commitment_discount_id = $2 AND starts_at < $4 AND ends_at > $3
         ORDER BY starts_at, resource",
        brief_id.as_uuid(),
        id,
        from,
        to,
    )
    .fetch_all(db)
    .await
}

/// Which of the given (brief, CommitmentDiscountId) pairs have any FOCUS commitment row.
pub async fn commitment_ids_with_rows(
    db: impl PgExecutor<'_>,
    briefs: &[BriefId],
    ids: &[String],
) -> Result<Vec<(BriefId, String)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT k.brief_id AS "brief_id!", k.id AS "id!" FROM unnest($1::uuid[], $2::text[]) AS k (brief_id, id)
           WHERE EXISTS (SELECT 1 FROM ledger_commitment_rows r
                         WHERE r.brief_id = k.brief_id AND r.commitment_discount_id = k.id)"#,
        briefs as _,
        ids,
    )
    .fetch_all(db)
    .await?;
    Ok(rows.into_iter().map(|r| (BriefId::from(r.brief_id), r.id)).collect())
}

/// Per window `[froms[i], tos[i])` (whole UTC days) of brief `briefs[i]`, the merged
/// GPU-microseconds of each of the brief's trials there, from `ledger_accelerator_daily`, in one
/// statement for every window: (the window's index in the windows given, the trial, the sum). The
/// briefs' trials come as pairs (`trial_briefs[j]`, `trial_ids[j]`), from the trials domain that
/// owns them.
pub async fn accelerator_micros_by_days(
    db: impl PgExecutor<'_>,
    briefs: &[BriefId],
    froms: &[chrono::NaiveDate],
    tos: &[chrono::NaiveDate],
    (trial_briefs, trial_ids): (&[BriefId], &[TrialId]),
) -> Result<Vec<(usize, TrialId, i128)>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT w.k AS "k!", t.id AS "trial_id!", sum(d.gpu_micros) AS "micros!"
           FROM unnest($1::uuid[], $2::date[], $3::date[]) WITH ORDINALITY AS w (brief_id, from_day, to_day, k)
           JOIN unnest($4::uuid[], $5::uuid[]) AS t (brief_id, id) ON t.brief_id = w.brief_id
           JOIN ledger_accelerator_daily d ON d.trial_id = t.id AND d.day >= w.from_day AND d.day < w.to_day
           GROUP BY w.k, t.id"#,
        briefs as _,
        froms,
        tos,
        trial_briefs as _,
        trial_ids as _,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            (
                usize::try_from(r.k - 1).unwrap_or(usize::MAX),
                r.trial_id.into(),
                r.micros.to_i128().unwrap_or(0),
            )
        })
        .collect())
}

/// One accelerator line's span, as commitments measure their use from it.
pub struct AcceleratorSpan {
    pub trial_id: TrialId,
    pub resource: String,
    pub starts_at: chrono::DateTime<chrono::Utc>,
    pub ends_at: chrono::DateTime<chrono::Utc>,
    pub gpus: i32,
}

/// The accelerator lines of every trial of a brief that overlap `[from, to)`.
pub async fn accelerator_spans(
    db: impl PgExecutor<'_>,
    brief_id: BriefId,
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<AcceleratorSpan>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"SELECT trial_id, resource, starts_at AS "starts_at!", ends_at AS "ends_at!", gpus AS "gpus!"
           FROM ledger_lines
           WHERE brief_id = $1 AND category = 'accelerator' AND starts_at < $3 AND ends_at > $2"#,
        brief_id.as_uuid(),
        from,
        to,
    )
    .fetch_all(db)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| AcceleratorSpan {
            trial_id: r.trial_id.into(),
            resource: r.resource,
            starts_at: r.starts_at,
            ends_at: r.ends_at,
            gpus: r.gpus,
        })
        .collect())
}
