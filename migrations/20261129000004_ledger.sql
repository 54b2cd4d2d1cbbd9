-- The cost ledger: billed lines per brief and one row of output counts per brief.
-- Money is numeric (exact); timestamps are timestamptz.
CREATE TABLE ledger_lines (
    id                uuid PRIMARY KEY,
    -- Insertion order (file order for imports): "newest lines" and the CSV export follow it.
    seq               bigint GENERATED ALWAYS AS IDENTITY,
    brief_id          uuid NOT NULL REFERENCES briefs (id) ON DELETE CASCADE,
    import_id         uuid NOT NULL,
    category          text NOT NULL,
    resource          text NOT NULL DEFAULT '',
    description       text NOT NULL DEFAULT '',
    starts_at         timestamptz,
    ends_at           timestamptz,
    gpus              integer,
    rate_per_gpu_hour numeric,
    amount            numeric NOT NULL,
    currency          text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_lines_category_check CHECK (category IN ('accelerator', 'host', 'storage', 'network', 'support', 'license')),
    CONSTRAINT ledger_lines_amount_check CHECK (amount >= 0),
    CONSTRAINT ledger_lines_rate_check CHECK (rate_per_gpu_hour IS NULL OR rate_per_gpu_hour >= 0),
    CONSTRAINT ledger_lines_gpus_check CHECK (gpus IS NULL OR gpus > 0),
    CONSTRAINT ledger_lines_interval_check CHECK ((starts_at IS NULL) = (ends_at IS NULL) AND (ends_at IS NULL OR ends_at > starts_at)),
    CONSTRAINT ledger_lines_accelerator_check CHECK (category <> 'accelerator' OR (resource <> '' AND starts_at IS NOT NULL AND gpus IS NOT NULL))
);

-- Newest lines of a brief, and the export in file order.
CREATE INDEX ledger_lines_brief_seq_idx ON ledger_lines (brief_id, seq);
-- The summary: sums per category …
CREATE INDEX ledger_lines_brief_category_idx ON ledger_lines (brief_id, category) INCLUDE (amount);
-- … and the accelerator spans in merge order, read from the index alone. Byte order (COLLATE "C")
-- so PostgreSQL's order is Rust's `str` order and the merge never has to re-sort.
CREATE INDEX ledger_lines_accelerator_idx ON ledger_lines (brief_id, resource COLLATE "C", starts_at, ends_at)
    INCLUDE (gpus, amount) WHERE category = 'accelerator';

CREATE TABLE ledger_outputs (
    brief_id    uuid PRIMARY KEY REFERENCES briefs (id) ON DELETE CASCADE,
    accepted    bigint NOT NULL DEFAULT 0,
    rejected    bigint NOT NULL DEFAULT 0,
    retries     bigint NOT NULL DEFAULT 0,
    failed_jobs bigint NOT NULL DEFAULT 0,
    idle_hours  numeric,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_outputs_counts_check CHECK (accepted >= 0 AND rejected >= 0 AND retries >= 0 AND failed_jobs >= 0),
    CONSTRAINT ledger_outputs_idle_check CHECK (idle_hours IS NULL OR idle_hours >= 0)
);

-- The accelerator merge per resource, kept current by every import (in its transaction, under a lock
-- on the brief row): GPU-microseconds and cost with overlaps counted once. Lines are append-only, so
-- an import re-merges only the resources it touched; the summary then reads one row per resource
-- instead of every line.
CREATE TABLE ledger_accelerator_merged (
    brief_id   uuid NOT NULL REFERENCES briefs (id) ON DELETE CASCADE,
    resource   text NOT NULL,
    gpu_micros numeric NOT NULL,
    cost       numeric NOT NULL,
    lines      bigint NOT NULL,
    CONSTRAINT ledger_accelerator_merged_pkey PRIMARY KEY (brief_id, resource)
);
