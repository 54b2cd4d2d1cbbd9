-- Ingest speed (issue 4). Until now every evidence row fanned out, inside the upload's own statement,
-- to one evidence_metrics row per metric key (about 55 for a 2 KB metrics upload): 55 heap tuples,
-- 55 entries in a wide index and 55 foreign-key checks, which capped ingest near 2,400 inserts/s on
-- this machine whatever the application did. Readers only ever ask for the NEWEST value of a key per
-- (brief, stage). So keep exactly that, and move the work off the upload:
--
--   * an upload adds one row to evidence_metrics_pending (same transaction, via trigger);
--   * a compactor (the server runs it in the background; `evidence_metrics_compact`) takes pending
--     rows in batches and upserts the newest value per (brief, key, stage) into evidence_metrics_latest
--     — a batch of many uploads of the same keys becomes one upsert per key;
--   * readers call `newest_evidence_metrics`, which looks at evidence_metrics_latest AND at the items
--     still pending, so an answer never depends on whether the compactor has run yet.

DROP TRIGGER evidence_metrics_fill ON evidence;
DROP FUNCTION evidence_metrics_fill();

CREATE TABLE evidence_metrics_latest (
    brief_id     uuid NOT NULL,
    key          text NOT NULL,
    stage        smallint NOT NULL,
    value        jsonb NOT NULL,
    evidence_id  uuid NOT NULL,
    collected_at timestamptz NOT NULL,
    received_at  timestamptz NOT NULL,
    CONSTRAINT evidence_metrics_latest_pkey PRIMARY KEY (brief_id, key, stage),
    CONSTRAINT evidence_metrics_latest_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE
);

INSERT INTO evidence_metrics_latest (brief_id, key, stage, value, evidence_id, collected_at, received_at)
SELECT DISTINCT ON (brief_id, key, stage) brief_id, key, stage, value, evidence_id, collected_at, received_at
FROM evidence_metrics
ORDER BY brief_id, key, stage, collected_at DESC, received_at DESC, evidence_id DESC;

DROP TABLE evidence_metrics;

-- Evidence whose metrics are not yet in evidence_metrics_latest. No foreign keys: the row lives only
-- until the next compaction, and its evidence row is inserted in the same transaction.
CREATE TABLE evidence_metrics_pending (
    brief_id    uuid NOT NULL,
    evidence_id uuid NOT NULL,
    CONSTRAINT evidence_metrics_pending_pkey PRIMARY KEY (brief_id, evidence_id)
)
-- A queue: every row is deleted soon after it is written. The compactor vacuums it as it goes;
-- these settings are the fallback when no server is compacting.
WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);

CREATE FUNCTION evidence_metrics_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.metrics <> '{}'::jsonb THEN
        INSERT INTO evidence_metrics_pending (brief_id, evidence_id) VALUES (NEW.brief_id, NEW.id);
    END IF;
    RETURN NULL;
END;
$$;
CREATE TRIGGER evidence_metrics_enqueue AFTER INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION evidence_metrics_enqueue();

-- Moves up to `batch` pending items into evidence_metrics_latest; returns how many it took.
-- The items are ranked newest first (2,000 rows to sort), each (brief, stage, key) keeps its best
-- rank by hashing (no sort of every key of every item: that was 7x slower), and only the winners'
-- values are read. Concurrent compactors (two app instances) take disjoint batches (SKIP LOCKED)
-- and upsert in one key order, so they cannot deadlock; an upsert only replaces an older value.
CREATE FUNCTION evidence_metrics_compact(batch integer) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending LIMIT batch FOR UPDATE SKIP LOCKED))
        RETURNING evidence_id
    ), ranked AS (
        SELECT e.id, e.brief_id, e.stage, e.collected_at, e.received_at,
               row_number() OVER (ORDER BY e.collected_at DESC, e.received_at DESC, e.id DESC) AS rank
        FROM taken t JOIN evidence e ON e.id = t.evidence_id
    ), best AS (
        SELECT r.brief_id, r.stage, k.key, min(r.rank) AS rank
        FROM ranked r
        JOIN evidence e ON e.id = r.id
        CROSS JOIN LATERAL jsonb_object_keys(e.metrics) AS k(key)
        GROUP BY r.brief_id, r.stage, k.key
    ), upserted AS (
        INSERT INTO evidence_metrics_latest AS l
               (brief_id, key, stage, value, evidence_id, collected_at, received_at)
        SELECT b.brief_id, b.key, b.stage, e.metrics -> b.key, r.id, r.collected_at, r.received_at
        FROM best b
        JOIN ranked r ON r.rank = b.rank
        JOIN evidence e ON e.id = r.id
        ORDER BY b.brief_id, b.key, b.stage
        ON CONFLICT (brief_id, key, stage) DO UPDATE
            SET value = excluded.value, evidence_id = excluded.evidence_id,
                collected_at = excluded.collected_at, received_at = excluded.received_at
            WHERE (excluded.collected_at, excluded.received_at, excluded.evidence_id)
                > (l.collected_at, l.received_at, l.evidence_id)
        RETURNING 1
    )
    SELECT count(*)::integer FROM taken;
$$;

-- The newest value of each of `keys` per stage on a brief: newest by collected_at, then received_at,
-- then id (UUIDv7: upload order). Compacted values are one primary-key probe per key; items still
-- pending are read directly (few: the compactor runs continuously).
CREATE FUNCTION newest_evidence_metrics(brief uuid, keys text[])
RETURNS TABLE (key text, stage smallint, value jsonb, evidence_id uuid, collected_at timestamptz,
               received_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (c.key, c.stage) c.key, c.stage, c.value, c.evidence_id, c.collected_at, c.received_at
    FROM (
        SELECT l.key, l.stage, l.value, l.evidence_id, l.collected_at, l.received_at
        FROM evidence_metrics_latest l
        WHERE l.brief_id = brief AND l.key = ANY (keys)
        UNION ALL
        SELECT m.key, e.stage, m.value, e.id, e.collected_at, e.received_at
        FROM evidence_metrics_pending p
        JOIN evidence e ON e.id = p.evidence_id
        CROSS JOIN LATERAL jsonb_each(e.metrics) AS m
        WHERE p.brief_id = brief AND m.key = ANY (keys)
    ) AS c
    ORDER BY c.key, c.stage, c.collected_at DESC, c.received_at DESC, c.evidence_id DESC;
$$;

-- Card evaluation reads the tables above; the one query left that looks at evidence by stage is
-- "the newest stage-3 load test", which a partial index answers without taxing other uploads.
DROP INDEX evidence_brief_stage_collected_idx;
CREATE INDEX evidence_load_tests_idx ON evidence (brief_id, received_at DESC, id DESC)
    WHERE stage = 3 AND kind IN ('bench-serving', 'vllm-metrics');
