-- An agent sends the same metric keys again and again (a scrape, a query every few seconds), and
-- the compactor read the keys of every queued item only to find that the newest of them held them
-- all: per round, ~55 keys of each of up to 2,000 items expanded and grouped, a third of the
-- database's time under ingest. Each item now carries a digest of its sorted metric keys (the first
-- 16 bytes of their SHA-256, written by the server; NULL for rows stored before, and for rows
-- written by other means): items of one trial and stage with the same digest hold the same keys,
-- so only the newest of them can win any key, and only its keys are read. A NULL digest is a group
-- of its own item, as before.
ALTER TABLE evidence ADD COLUMN metric_keys_digest bytea;

-- One fold of taken items into the newest values, shared by the two ways items are taken off the
-- queue (a batch, or named items one at a time): it returns how many items it was given.
CREATE FUNCTION evidence_metrics_fold(taken uuid[]) RETURNS integer LANGUAGE sql AS $$
    WITH ranked AS (
        SELECT e.id, e.brief_id, e.trial_id, e.stage, e.collected_at, e.received_at,
               coalesce(e.metric_keys_digest, uuid_send(e.id)) AS key_set,
               row_number() OVER (ORDER BY e.collected_at DESC, e.received_at DESC, e.id DESC) AS rank
        FROM unnest(taken) AS t(evidence_id)
        JOIN evidence e ON e.id = t.evidence_id
        -- An item whose trial is gone (deleted by hand) must not wedge the queue on the foreign key.
        JOIN trials tr ON tr.id = e.trial_id
    ), newest_of_key_set AS (
        -- Of the items holding the same keys in one trial and stage, the newest.
        SELECT DISTINCT ON (r.trial_id, r.stage, r.key_set) r.id, r.trial_id, r.stage, r.rank
        FROM ranked r
        ORDER BY r.trial_id, r.stage, r.key_set, r.rank
    ), best AS (
        SELECT r.trial_id, r.stage, k.key, min(r.rank) AS rank
        FROM newest_of_key_set r
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
    SELECT coalesce(cardinality(taken), 0);
$$;

CREATE OR REPLACE FUNCTION evidence_metrics_compact(batch integer) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending LIMIT batch
                                FOR UPDATE SKIP LOCKED))
        RETURNING evidence_id
    )
    SELECT evidence_metrics_fold(ARRAY(SELECT evidence_id FROM taken));
$$;

CREATE OR REPLACE FUNCTION evidence_metrics_compact_items(ids uuid[]) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending WHERE evidence_id = ANY (ids)
                                FOR UPDATE SKIP LOCKED))
        RETURNING evidence_id
    )
    SELECT evidence_metrics_fold(ARRAY(SELECT evidence_id FROM taken));
$$;

-- The newest values of a trial's metrics read the items still queued too. That branch made one row
-- per queued item and asked key, sorted them all for the newest per key and stage, and decompressed
-- each item's stored `metrics` again for every key: under batch ingest, with thousands of items
-- queued, one call took ~0.8 s. Now only the newest queued item of each key set (per stage) is read,
-- decompressed once (`|| '{}'` makes an in-memory copy), and the newest holding each key per stage
-- is found by its rank (a hash aggregate, no sort of every pair). Same rows as before.
CREATE OR REPLACE FUNCTION newest_trial_metrics(trial uuid, keys text[])
RETURNS TABLE (key text, stage smallint, value jsonb, evidence_id uuid, collected_at timestamptz,
               received_at timestamptz)
LANGUAGE sql STABLE AS $$
    WITH queued AS (
        SELECT e.id, e.stage, e.collected_at, e.received_at,
               coalesce(e.metric_keys_digest, uuid_send(e.id)) AS key_set,
               row_number() OVER (ORDER BY e.collected_at DESC, e.received_at DESC, e.id DESC) AS rank
        FROM evidence_metrics_pending p
        JOIN evidence e ON e.id = p.evidence_id
        WHERE p.trial_id = trial
    ), newest_of_key_set AS MATERIALIZED (
        SELECT q.id, q.stage, q.collected_at, q.received_at, q.rank, e.metrics || '{}'::jsonb AS metrics
        FROM (SELECT DISTINCT ON (stage, key_set) * FROM queued ORDER BY stage, key_set, rank) AS q
        JOIN evidence e ON e.id = q.id
    ), newest_queued AS (
        SELECT k.key, q.stage, min(q.rank) AS rank
        FROM newest_of_key_set q
        CROSS JOIN LATERAL unnest(keys) AS k(key)
        WHERE q.metrics ? k.key
        GROUP BY k.key, q.stage
    )
    SELECT DISTINCT ON (c.key, c.stage) c.key, c.stage, c.value, c.evidence_id, c.collected_at, c.received_at
    FROM (
        SELECT l.key, l.stage, l.value, l.evidence_id, l.collected_at, l.received_at
        FROM evidence_metrics_latest l
        WHERE l.trial_id = trial AND l.key = ANY (keys)
        UNION ALL
        SELECT n.key, q.stage, q.metrics -> n.key, q.id, q.collected_at, q.received_at
        FROM newest_queued n
        JOIN newest_of_key_set q ON q.rank = n.rank
    ) AS c
    ORDER BY c.key, c.stage, c.collected_at DESC, c.received_at DESC, c.evidence_id DESC;
$$;
