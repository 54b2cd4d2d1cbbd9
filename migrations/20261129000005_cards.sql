-- Acceptance cards: every save is a new revision (kept; the current card is the highest revision).
-- A brief without a row here answers its generated default card (revision 0, never stored).
CREATE TABLE card_revisions (
    id          uuid PRIMARY KEY,
    brief_id    uuid NOT NULL,
    revision    integer NOT NULL,
    -- [{ key, op, threshold, unit, stage, required, why? }], validated by acceptance::model.
    criteria    jsonb NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT card_revisions_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT card_revisions_brief_revision_key UNIQUE (brief_id, revision),
    CONSTRAINT card_revisions_revision_check CHECK (revision >= 1),
    CONSTRAINT card_revisions_criteria_check CHECK (jsonb_typeof(criteria) = 'array')
);

-- The readiness checklist (product.md §7): each confirmation by a named person, with a time and an
-- optional link. Append-only; the newest row per (brief, item) is the one shown.
CREATE TABLE readiness_confirmations (
    id            uuid PRIMARY KEY,
    brief_id      uuid NOT NULL,
    item          text NOT NULL,
    confirmed_by  text NOT NULL,
    confirmed_at  timestamptz NOT NULL DEFAULT now(),
    link          text,
    CONSTRAINT readiness_confirmations_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT readiness_confirmations_item_check CHECK (item IN ('brief_complete', 'allocation_fits',
        'image_restores', 'load_test_recorded', 'health_alerts_owner', 'shutdown_rule', 'cost_view',
        'fallback_path')),
    CONSTRAINT readiness_confirmations_link_check CHECK (link IS NULL OR length(link) BETWEEN 1 AND 2000)
);
CREATE INDEX readiness_confirmations_brief_idx ON readiness_confirmations (brief_id, item, confirmed_at DESC);

-- Evaluation reads the newest value per (metric key, stage) of one brief in one query.
CREATE INDEX evidence_brief_stage_collected_idx ON evidence (brief_id, stage, collected_at DESC, received_at DESC);
