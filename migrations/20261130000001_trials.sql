-- Trials (issue 18): a brief is tested on one or more allocations. A trial is one allocation under
-- test against the brief's card, and the unit that gets evidence, ledger lines and a verdict.
--
-- Every existing brief gets its first trial from its `trial_gpu` / `trial_gpu_count`, and every
-- evidence item, ledger line, output count, merged accelerator figure, newest-metric value, token
-- scope and approval moves onto it, so nothing stored loses its meaning. The brief's two columns
-- move to the trial (the brief API still answers `trial_gpu` / `trial_gpu_count`: they now mean the
-- first trial). Rewriting evidence and ledger rows is a one-time cost, paid in this transaction.

CREATE TABLE trials (
    id                  uuid PRIMARY KEY,
    brief_id            uuid NOT NULL,
    -- Order within the brief; 1 is the first trial, the one `trial_gpu` describes.
    position            integer NOT NULL,
    name                text NOT NULL,
    provider            text NOT NULL DEFAULT '',
    region              text,
    -- NULL: the sizing's suggestion (the first fitting option), shown as suggested until confirmed.
    gpu                 text,
    gpu_count           integer,
    billing             text NOT NULL DEFAULT 'on-demand',
    rate_per_gpu_hour   numeric(20, 6),
    currency            text NOT NULL DEFAULT 'USD',
    allocation_boundary text NOT NULL,
    status              text NOT NULL DEFAULT 'planned',
    started_at          timestamptz,
    ended_at            timestamptz,
    notes               text,
    rerun_of            uuid,
    created_at          timestamptz NOT NULL DEFAULT now(),
    updated_at          timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT trials_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT trials_rerun_of_fk FOREIGN KEY (rerun_of) REFERENCES trials (id) ON DELETE SET NULL,
    -- Referenced by (trial_id, brief_id) from the tables below, so a row can never name a trial of
    -- another brief.
    CONSTRAINT trials_id_brief_key UNIQUE (id, brief_id),
    CONSTRAINT trials_brief_position_key UNIQUE (brief_id, position),
    CONSTRAINT trials_brief_name_key UNIQUE (brief_id, name),
    CONSTRAINT trials_position_check CHECK (position >= 1),
    CONSTRAINT trials_name_check CHECK (length(trim(name)) BETWEEN 1 AND 200),
    CONSTRAINT trials_gpu_count_check CHECK (gpu_count IS NULL OR gpu_count BETWEEN 1 AND 4096),
    CONSTRAINT trials_billing_check CHECK (billing IN ('on-demand', 'spot', 'reserved', 'serverless')),
    CONSTRAINT trials_rate_check CHECK (rate_per_gpu_hour IS NULL OR rate_per_gpu_hour >= 0),
    CONSTRAINT trials_allocation_boundary_check CHECK (allocation_boundary IN ('serverless', 'vm', 'dedicated-node', 'cluster')),
    CONSTRAINT trials_status_check CHECK (status IN ('planned', 'running', 'ended')),
    CONSTRAINT trials_ended_check CHECK (ended_at IS NULL OR started_at IS NULL OR ended_at >= started_at)
);

INSERT INTO trials (id, brief_id, position, name, gpu, gpu_count, currency, allocation_boundary, status, created_at)
SELECT gen_random_uuid(), b.id, 1, 'Trial 1', b.trial_gpu, b.trial_gpu_count, b.currency, b.allocation_boundary,
       CASE WHEN EXISTS (SELECT 1 FROM evidence e WHERE e.brief_id = b.id)
                 OR EXISTS (SELECT 1 FROM ledger_lines l WHERE l.brief_id = b.id)
            THEN 'running' ELSE 'planned' END,
       b.created_at
FROM briefs b;

ALTER TABLE briefs DROP COLUMN trial_gpu, DROP COLUMN trial_gpu_count;

-- Evidence -------------------------------------------------------------------------------------
ALTER TABLE evidence ADD COLUMN trial_id uuid;
UPDATE evidence e SET trial_id = t.id FROM trials t WHERE t.brief_id = e.brief_id AND t.position = 1;
ALTER TABLE evidence ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE evidence ADD CONSTRAINT evidence_trial_fk FOREIGN KEY (trial_id, brief_id)
    REFERENCES trials (id, brief_id) ON DELETE CASCADE;
CREATE INDEX evidence_trial_received_idx ON evidence (trial_id, received_at DESC, id DESC);
DROP INDEX evidence_window_before_idx;
CREATE INDEX evidence_window_before_idx ON evidence (trial_id, (labels ->> 'window'), received_at DESC)
    WHERE kind = 'vllm-metrics' AND labels ->> 'phase' = 'before';
CREATE INDEX evidence_trial_load_tests_idx ON evidence (trial_id, received_at DESC, id DESC)
    WHERE stage = 3 AND kind IN ('bench-serving', 'vllm-metrics');

-- Newest metric values, per trial --------------------------------------------------------------
ALTER TABLE evidence_metrics_latest ADD COLUMN trial_id uuid;
UPDATE evidence_metrics_latest l SET trial_id = e.trial_id FROM evidence e WHERE e.id = l.evidence_id;
-- A value whose evidence row is gone (deleted by hand) has nothing to point at.
DELETE FROM evidence_metrics_latest WHERE trial_id IS NULL;
ALTER TABLE evidence_metrics_latest ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE evidence_metrics_latest DROP CONSTRAINT evidence_metrics_latest_pkey;
ALTER TABLE evidence_metrics_latest ADD CONSTRAINT evidence_metrics_latest_pkey PRIMARY KEY (trial_id, key, stage);
ALTER TABLE evidence_metrics_latest ADD CONSTRAINT evidence_metrics_latest_trial_fk FOREIGN KEY (trial_id)
    REFERENCES trials (id) ON DELETE CASCADE;

ALTER TABLE evidence_metrics_pending ADD COLUMN trial_id uuid;
UPDATE evidence_metrics_pending p SET trial_id = e.trial_id FROM evidence e WHERE e.id = p.evidence_id;
DELETE FROM evidence_metrics_pending WHERE trial_id IS NULL;
ALTER TABLE evidence_metrics_pending ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE evidence_metrics_pending DROP CONSTRAINT evidence_metrics_pending_pkey;
ALTER TABLE evidence_metrics_pending ADD CONSTRAINT evidence_metrics_pending_pkey PRIMARY KEY (trial_id, evidence_id);

CREATE OR REPLACE FUNCTION evidence_metrics_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.metrics <> '{}'::jsonb THEN
        INSERT INTO evidence_metrics_pending (brief_id, trial_id, evidence_id) VALUES (NEW.brief_id, NEW.trial_id, NEW.id);
    END IF;
    RETURN NULL;
END;
$$;

-- As migration 9's, keyed by trial instead of brief.
CREATE OR REPLACE FUNCTION evidence_metrics_compact(batch integer) RETURNS integer LANGUAGE sql AS $$
    WITH taken AS (
        DELETE FROM evidence_metrics_pending
        WHERE ctid = ANY (ARRAY(SELECT ctid FROM evidence_metrics_pending LIMIT batch FOR UPDATE SKIP LOCKED))
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
    ), upserted AS (
        INSERT INTO evidence_metrics_latest AS l
               (brief_id, trial_id, key, stage, value, evidence_id, collected_at, received_at)
        SELECT r.brief_id, b.trial_id, b.key, b.stage, e.metrics -> b.key, r.id, r.collected_at, r.received_at
        FROM best b
        JOIN ranked r ON r.rank = b.rank
        JOIN evidence e ON e.id = r.id
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

DROP FUNCTION newest_evidence_metrics(uuid, text[]);

-- The newest value of each of `keys` per stage in one trial: newest by collected_at, then
-- received_at, then id (UUIDv7: upload order). Compacted values are one primary-key probe per key;
-- items still pending are read directly (few: the compactor runs continuously).
CREATE FUNCTION newest_trial_metrics(trial uuid, keys text[])
RETURNS TABLE (key text, stage smallint, value jsonb, evidence_id uuid, collected_at timestamptz,
               received_at timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT DISTINCT ON (c.key, c.stage) c.key, c.stage, c.value, c.evidence_id, c.collected_at, c.received_at
    FROM (
        SELECT l.key, l.stage, l.value, l.evidence_id, l.collected_at, l.received_at
        FROM evidence_metrics_latest l
        WHERE l.trial_id = trial AND l.key = ANY (keys)
        UNION ALL
        SELECT k.key, e.stage, e.metrics -> k.key, e.id, e.collected_at, e.received_at
        FROM evidence_metrics_pending p
        JOIN evidence e ON e.id = p.evidence_id
        CROSS JOIN LATERAL unnest(keys) AS k(key)
        WHERE p.trial_id = trial AND e.metrics ? k.key
    ) AS c
    ORDER BY c.key, c.stage, c.collected_at DESC, c.received_at DESC, c.evidence_id DESC;
$$;

-- Ledger ---------------------------------------------------------------------------------------
ALTER TABLE ledger_lines ADD COLUMN trial_id uuid;
UPDATE ledger_lines l SET trial_id = t.id FROM trials t WHERE t.brief_id = l.brief_id AND t.position = 1;
ALTER TABLE ledger_lines ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE ledger_lines ADD CONSTRAINT ledger_lines_trial_fk FOREIGN KEY (trial_id, brief_id)
    REFERENCES trials (id, brief_id) ON DELETE CASCADE;
DROP INDEX ledger_lines_brief_category_idx;
DROP INDEX ledger_lines_accelerator_idx;
CREATE INDEX ledger_lines_trial_seq_idx ON ledger_lines (trial_id, seq);
CREATE INDEX ledger_lines_trial_category_idx ON ledger_lines (trial_id, category) INCLUDE (amount);
CREATE INDEX ledger_lines_accelerator_idx ON ledger_lines (trial_id, resource COLLATE "C", starts_at, ends_at)
    INCLUDE (gpus, amount) WHERE category = 'accelerator';

ALTER TABLE ledger_outputs ADD COLUMN trial_id uuid;
UPDATE ledger_outputs o SET trial_id = t.id FROM trials t WHERE t.brief_id = o.brief_id AND t.position = 1;
ALTER TABLE ledger_outputs ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE ledger_outputs DROP CONSTRAINT ledger_outputs_pkey;
ALTER TABLE ledger_outputs ADD CONSTRAINT ledger_outputs_pkey PRIMARY KEY (trial_id);
ALTER TABLE ledger_outputs ADD CONSTRAINT ledger_outputs_trial_fk FOREIGN KEY (trial_id, brief_id)
    REFERENCES trials (id, brief_id) ON DELETE CASCADE;

ALTER TABLE ledger_accelerator_merged ADD COLUMN trial_id uuid;
UPDATE ledger_accelerator_merged m SET trial_id = t.id FROM trials t WHERE t.brief_id = m.brief_id AND t.position = 1;
ALTER TABLE ledger_accelerator_merged ALTER COLUMN trial_id SET NOT NULL;
ALTER TABLE ledger_accelerator_merged DROP CONSTRAINT ledger_accelerator_merged_pkey;
ALTER TABLE ledger_accelerator_merged ADD CONSTRAINT ledger_accelerator_merged_pkey PRIMARY KEY (trial_id, resource);
ALTER TABLE ledger_accelerator_merged ADD CONSTRAINT ledger_accelerator_merged_trial_fk FOREIGN KEY (trial_id, brief_id)
    REFERENCES trials (id, brief_id) ON DELETE CASCADE;

-- Tokens for one trial ---------------------------------------------------------------------------
ALTER TABLE api_tokens ADD COLUMN trial_id uuid;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_trial_fk FOREIGN KEY (trial_id, brief_id)
    REFERENCES trials (id, brief_id) ON DELETE CASCADE;

-- Approvals name the trial they reserve ----------------------------------------------------------
ALTER TABLE approvals ADD COLUMN trial_id uuid REFERENCES trials (id) ON DELETE SET NULL;
ALTER TABLE approvals ADD COLUMN reservation_provider text;
ALTER TABLE approvals ADD COLUMN reservation_rate_per_gpu_hour numeric(20, 6);
UPDATE approvals a SET trial_id = t.id FROM trials t WHERE t.brief_id = a.brief_id AND t.position = 1;
