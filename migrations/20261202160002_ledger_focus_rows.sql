-- FOCUS billing exports into the ledger (issue 39). Re-importing the same export adds nothing: each
-- imported FOCUS row is remembered by its identity — the SHA-256 of its resource, charge period
-- (start and end, UTC) and charge description — once per trial. An import inserts the identities
-- with ON CONFLICT DO NOTHING, under the brief's row lock, and adds ledger lines only for the ones
-- that were new.
CREATE TABLE ledger_focus_rows (
    trial_id   uuid NOT NULL,
    brief_id   uuid NOT NULL,
    identity   bytea NOT NULL,
    -- The import that added the row's ledger line (ledger_lines.import_id).
    import_id  uuid NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT ledger_focus_rows_pkey PRIMARY KEY (trial_id, identity),
    CONSTRAINT ledger_focus_rows_trial_fk FOREIGN KEY (trial_id, brief_id)
        REFERENCES trials (id, brief_id) ON DELETE CASCADE,
    CONSTRAINT ledger_focus_rows_identity_check CHECK (length(identity) = 32)
);
