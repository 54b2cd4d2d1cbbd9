-- A manager's approval or rejection of a brief's computed decision, pinned to the inputs it saw.
CREATE TABLE approvals (
    id                       uuid PRIMARY KEY,
    brief_id                 uuid NOT NULL REFERENCES briefs (id) ON DELETE CASCADE,
    verdict                  text NOT NULL,
    decision                 text NOT NULL,
    inputs_digest            text NOT NULL,
    comment                  text NOT NULL DEFAULT '',
    decided_by               text NOT NULL,
    decided_at               timestamptz NOT NULL DEFAULT now(),
    reservation_gpu          text,
    reservation_count        integer,
    reservation_billing      text,
    reservation_term_months  integer,
    reservation_start        date,
    reservation_monthly_cost numeric(20, 6),
    -- What the decision read, so a stale approval can say what changed.
    inputs                   jsonb NOT NULL,
    CONSTRAINT approvals_verdict_check CHECK (verdict IN ('approve', 'reject')),
    CONSTRAINT approvals_decision_check CHECK (decision IN ('expand', 'reserve', 'dedicate', 'scale', 'stop')),
    CONSTRAINT approvals_reject_comment_check CHECK (verdict <> 'reject' OR length(trim(comment)) > 0),
    CONSTRAINT approvals_reservation_check CHECK (
        reservation_gpu IS NULL OR (reservation_count > 0 AND reservation_term_months > 0
            AND reservation_start IS NOT NULL AND reservation_monthly_cost >= 0))
);
CREATE INDEX approvals_brief_idx ON approvals (brief_id, decided_at DESC);
