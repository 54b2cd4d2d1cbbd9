-- FOCUS usage rows that name a CommitmentDiscountId (issue 52), kept per brief whoever's trial they
-- served (tagged or not): the commitment whose provider_commitment_id they name counts their hours
-- as busy, and shows the provider's own Used / Unused hours beside its figures. No cost is kept.
CREATE TABLE ledger_commitment_rows (
    brief_id               uuid NOT NULL,
    -- SHA-256 of the id, the status, the resource, the charge period and the description: a
    -- re-imported export adds nothing.
    identity               bytea NOT NULL,
    commitment_discount_id text NOT NULL,
    -- FOCUS's CommitmentDiscountStatus; NULL when the export does not say.
    status                 text,
    resource               text NOT NULL DEFAULT '',
    -- The row's time as a ledger line's: its consumed time from the charge period's start, else
    -- the charge period.
    starts_at              timestamptz NOT NULL,
    ends_at                timestamptz NOT NULL,
    -- GPUs of the resource when known (else the commitment's GPUs per node count).
    gpus                   integer,
    import_id              uuid NOT NULL,
    created_at             timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_commitment_rows_pkey PRIMARY KEY (brief_id, identity),
    CONSTRAINT ledger_commitment_rows_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT ledger_commitment_rows_identity_check CHECK (length(identity) = 32),
    CONSTRAINT ledger_commitment_rows_id_check CHECK (length(commitment_discount_id) BETWEEN 1 AND 1000),
    CONSTRAINT ledger_commitment_rows_status_check CHECK (status IS NULL OR status IN ('Used', 'Unused')),
    CONSTRAINT ledger_commitment_rows_time_check CHECK (ends_at > starts_at),
    CONSTRAINT ledger_commitment_rows_gpus_check CHECK (gpus IS NULL OR gpus > 0)
);
CREATE INDEX ledger_commitment_rows_id_idx ON ledger_commitment_rows (brief_id, commitment_discount_id, starts_at);
