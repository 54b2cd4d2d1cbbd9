-- Issue 37: one evidence item once held 1.4 million metric keys, and the compaction statement that
-- took it ran for 20 minutes, was rolled back by a restart and started again on the same item.
-- Items are now limited to 1,000 keys when uploaded, and the compactor bounds every statement with
-- a `statement_timeout`. A batch that hits it is retried one item at a time; an item that hits it
-- alone is poisoned (an item stored before the limits existed, or a database far slower than
-- expected): it is moved here, with a warning on the item, and never taken again. Its metrics are
-- then not on the card; the evidence itself (raw bytes, page) is untouched.

CREATE TABLE evidence_metrics_set_aside (
    evidence_id  uuid PRIMARY KEY,
    brief_id     uuid NOT NULL,
    trial_id     uuid NOT NULL,
    reason       text NOT NULL,
    set_aside_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT evidence_metrics_set_aside_evidence_fk FOREIGN KEY (evidence_id)
        REFERENCES evidence (id) ON DELETE CASCADE
);

-- The batch function again, decompressing each winning item's metrics once: it took each value with
-- `metrics -> key` on the stored document, which decompresses the whole of it once per key — for an item at the limits
-- (1,000 keys of 4 KiB strings, 4 MB) that was 4 GB of decompression and 4 s per item; now 0.2 s.
-- On 2,000 ordinary items of one trial (55 keys each) only the newest item's values are read.
CREATE OR REPLACE FUNCTION evidence_metrics_compact(batch integer) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending LIMIT batch
                                FOR UPDATE SKIP LOCKED))
        RETURNING evidence_id
    ), ranked AS (
        SELECT e.id, e.brief_id, e.trial_id, e.stage, e.collected_at, e.received_at,
               row_number() OVER (ORDER BY e.collected_at DESC, e.received_at DESC, e.id DESC) AS rank
        FROM taken t
        JOIN evidence e ON e.id = t.evidence_id
        -- An item whose trial is gone (deleted by hand) must not wedge the queue on the foreign key.
        JOIN trials tr ON tr.id = e.trial_id
    ), best AS (
        SELECT r.trial_id, r.stage, k.key, min(r.rank) AS rank
        FROM ranked r
        JOIN evidence e ON e.id = r.id
        CROSS JOIN LATERAL jsonb_object_keys(e.metrics) AS k(key)
        GROUP BY r.trial_id, r.stage, k.key
    ), winners AS MATERIALIZED (
        -- Each winning item's metrics decompressed once: `|| '{}'` makes an in-memory copy, which
        -- `-> key` below then reads per key without decompressing the stored document again.
        SELECT r.id, r.brief_id, r.rank, r.collected_at, r.received_at, e.metrics || '{}'::jsonb AS metrics
        FROM ranked r
        JOIN evidence e ON e.id = r.id
        WHERE r.rank IN (SELECT rank FROM best)
    ), upserted AS (
        INSERT INTO evidence_metrics_latest AS l
               (brief_id, trial_id, key, stage, value, evidence_id, collected_at, received_at)
        SELECT w.brief_id, b.trial_id, b.key, b.stage, w.metrics -> b.key, w.id, w.collected_at, w.received_at
        FROM best b
        JOIN winners w ON w.rank = b.rank
        ORDER BY b.trial_id, b.key, b.stage
        ON CONFLICT (trial_id, key, stage) DO UPDATE
            SET value = excluded.value, evidence_id = excluded.evidence_id,
                collected_at = excluded.collected_at, received_at = excluded.received_at
            WHERE (excluded.collected_at, excluded.received_at, excluded.evidence_id)
                > (l.collected_at, l.received_at, l.evidence_id)
        RETURNING 1
    )
    SELECT count(*)::integer FROM taken;
$$;

-- The same for the named pending items only: the compactor's one-at-a-time pass after a batch ran
-- out of time. Items another compactor holds are skipped, as there.
CREATE FUNCTION evidence_metrics_compact_items(ids uuid[]) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending WHERE evidence_id = ANY (ids)
                                FOR UPDATE SKIP LOCKED))
        RETURNING evidence_id
    ), ranked AS (
        SELECT e.id, e.brief_id, e.trial_id, e.stage, e.collected_at, e.received_at,
               row_number() OVER (ORDER BY e.collected_at DESC, e.received_at DESC, e.id DESC) AS rank
        FROM taken t
        JOIN evidence e ON e.id = t.evidence_id
        -- An item whose trial is gone (deleted by hand) must not wedge the queue on the foreign key.
        JOIN trials tr ON tr.id = e.trial_id
    ), best AS (
        SELECT r.trial_id, r.stage, k.key, min(r.rank) AS rank
        FROM ranked r
        JOIN evidence e ON e.id = r.id
        CROSS JOIN LATERAL jsonb_object_keys(e.metrics) AS k(key)
        GROUP BY r.trial_id, r.stage, k.key
    ), winners AS MATERIALIZED (
        -- Each winning item's metrics decompressed once: `|| '{}'` makes an in-memory copy, which
        -- `-> key` below then reads per key without decompressing the stored document again.
        SELECT r.id, r.brief_id, r.rank, r.collected_at, r.received_at, e.metrics || '{}'::jsonb AS metrics
        FROM ranked r
        JOIN evidence e ON e.id = r.id
        WHERE r.rank IN (SELECT rank FROM best)
    ), upserted AS (
        INSERT INTO evidence_metrics_latest AS l
               (brief_id, trial_id, key, stage, value, evidence_id, collected_at, received_at)
        SELECT w.brief_id, b.trial_id, b.key, b.stage, w.metrics -> b.key, w.id, w.collected_at, w.received_at
        FROM best b
        JOIN winners w ON w.rank = b.rank
        ORDER BY b.trial_id, b.key, b.stage
        ON CONFLICT (trial_id, key, stage) DO UPDATE
            SET value = excluded.value, evidence_id = excluded.evidence_id,
                collected_at = excluded.collected_at, received_at = excluded.received_at
            WHERE (excluded.collected_at, excluded.received_at, excluded.evidence_id)
                > (l.collected_at, l.received_at, l.evidence_id)
        RETURNING 1
    )
    SELECT count(*)::integer FROM taken;
$$;

-- Moves one pending item aside with `reason`, which is also added to the item's warnings so its
-- page says why its figures are not on the card. False when it was no longer pending.
CREATE FUNCTION evidence_metrics_set_aside_item(item uuid, why text) RETURNS boolean LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending WHERE evidence_id = item
        RETURNING brief_id, trial_id, evidence_id
    ), kept AS (
        INSERT INTO evidence_metrics_set_aside (evidence_id, brief_id, trial_id, reason)
        SELECT evidence_id, brief_id, trial_id, why FROM taken
        ON CONFLICT (evidence_id) DO NOTHING
        RETURNING evidence_id
    ), warned AS (
        UPDATE evidence e SET warnings = e.warnings || jsonb_build_array(why)
        FROM kept k WHERE e.id = k.evidence_id
        RETURNING 1
    )
    SELECT EXISTS (SELECT 1 FROM taken);
$$;
