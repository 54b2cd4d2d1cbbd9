-- Evidence: raw tool output uploaded for a brief, kept byte for byte, with what the parsers read from it.
-- Enumerations are text + CHECK (not Postgres enums) so adding a value is a plain migration.
CREATE TABLE evidence (
    id              uuid PRIMARY KEY,
    brief_id        uuid NOT NULL,
    kind            text NOT NULL,
    stage           smallint NOT NULL,
    content_type    text NOT NULL,
    filename        text,
    raw             bytea NOT NULL,
    sha256          text NOT NULL,
    size_bytes      bigint NOT NULL,
    metrics         jsonb NOT NULL DEFAULT '{}'::jsonb,
    warnings        jsonb NOT NULL DEFAULT '[]'::jsonb,
    parse_status    text NOT NULL,
    parse_error     text,
    tool            text,
    tool_version    text,
    parser_version  text NOT NULL,
    labels          jsonb NOT NULL DEFAULT '{}'::jsonb,
    collected_at    timestamptz NOT NULL DEFAULT now(),
    received_at     timestamptz NOT NULL DEFAULT now(),
    -- Filled by authentication later (the token's subject or the person's email); NULL until then.
    uploaded_by     text,
    CONSTRAINT evidence_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT evidence_kind_check CHECK (kind IN ('nvidia-smi-list', 'nvidia-smi-topo', 'nvidia-smi-query',
        'dcgm-discovery', 'dcgm-diag', 'vllm-metrics', 'vllm-log', 'bench-serving', 'nccl-tests',
        'checkpoint-restore', 'probe', 'metrics', 'log')),
    CONSTRAINT evidence_stage_check CHECK (stage BETWEEN 1 AND 5),
    CONSTRAINT evidence_parse_status_check CHECK (parse_status IN ('ok', 'partial', 'failed')),
    CONSTRAINT evidence_failed_has_error_check CHECK ((parse_status = 'failed') = (parse_error IS NOT NULL)),
    CONSTRAINT evidence_size_check CHECK (size_bytes = octet_length(raw)),
    CONSTRAINT evidence_sha256_check CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    CONSTRAINT evidence_metrics_check CHECK (jsonb_typeof(metrics) = 'object'),
    CONSTRAINT evidence_warnings_check CHECK (jsonb_typeof(warnings) = 'array'),
    CONSTRAINT evidence_labels_check CHECK (jsonb_typeof(labels) = 'object')
);

-- The brief page and the cursor-paginated list: newest first, keyset on (received_at, id).
CREATE INDEX evidence_brief_received_idx ON evidence (brief_id, received_at DESC, id DESC);
-- vLLM windows: the newest `before` scrape of a window on a brief.
CREATE INDEX evidence_window_before_idx ON evidence (brief_id, (labels ->> 'window'), received_at DESC)
    WHERE kind = 'vllm-metrics' AND labels ->> 'phase' = 'before';

-- Idempotency-Key: the first answer to a request, written in the same transaction as its evidence.
-- Keyed by (brief_id, key) for now; authentication may add the caller to the key. `key` is any text the
-- client chose; `request_sha256` fingerprints the upload (see evidence::model::Upload::fingerprint).
CREATE TABLE idempotency_keys (
    brief_id        uuid NOT NULL,
    key             text NOT NULL,
    request_sha256  text NOT NULL,
    response_status smallint NOT NULL,
    response_body   jsonb NOT NULL,
    evidence_id     uuid,
    created_at      timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT idempotency_keys_pkey PRIMARY KEY (brief_id, key),
    CONSTRAINT idempotency_keys_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    -- The key row is written first (it is the lock), the evidence row after it in the same transaction.
    CONSTRAINT idempotency_keys_evidence_fk FOREIGN KEY (evidence_id) REFERENCES evidence (id)
        ON DELETE CASCADE DEFERRABLE INITIALLY DEFERRED,
    CONSTRAINT idempotency_keys_key_check CHECK (length(key) BETWEEN 1 AND 255)
);
