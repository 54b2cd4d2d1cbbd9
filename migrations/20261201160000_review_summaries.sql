-- Each brief's signal snapshot (`brief_signals`, the signals migration) becomes its review summary
-- too: what the dashboard and lists show and filter on (cost per completed job, required criteria
-- passing, a failing required criterion, evidence count, approval state), so a list never computes
-- a full review per row. `signals::service::refresh` writes all of it from one review.
ALTER TABLE brief_signals
    ADD COLUMN cost_per_job      numeric,
    ADD COLUMN criteria_passed   integer NOT NULL DEFAULT 0,
    ADD COLUMN criteria_required integer NOT NULL DEFAULT 0,
    ADD COLUMN failing           boolean NOT NULL DEFAULT false,
    ADD COLUMN evidence_count    bigint NOT NULL DEFAULT 0,
    ADD COLUMN last_evidence_at  timestamptz,
    ADD COLUMN approval_verdict  text,
    ADD COLUMN approval_decision text,
    -- awaiting-evidence | needs-approval | stale | approved | rejected
    ADD COLUMN state             text NOT NULL DEFAULT 'awaiting-evidence'
        CHECK (state IN ('awaiting-evidence', 'needs-approval', 'stale', 'approved', 'rejected'));
CREATE INDEX brief_signals_state_idx ON brief_signals (state);
CREATE INDEX brief_signals_failing_idx ON brief_signals (brief_id) WHERE failing;

-- The change marks become a queue: one row per write, no unique key. With a unique mark, a write
-- whose trigger found a mark already there (and so wrote nothing) could commit after the watcher
-- had taken that mark and read the brief: the change went unseen. A queued row of a transaction
-- still open is invisible to the watcher's take and stays for the next round; and a write never
-- waits on a mark another transaction holds.
ALTER TABLE brief_signals_dirty DROP CONSTRAINT brief_signals_dirty_pkey;
CREATE INDEX brief_signals_dirty_brief_idx ON brief_signals_dirty (brief_id);
CREATE INDEX brief_signals_dirty_marked_idx ON brief_signals_dirty (marked_at);

CREATE OR REPLACE FUNCTION mark_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'briefs' THEN
        INSERT INTO brief_signals_dirty (brief_id) VALUES (NEW.id);
    ELSE
        INSERT INTO brief_signals_dirty (brief_id) VALUES (NEW.brief_id);
    END IF;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION mark_all_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO brief_signals_dirty (brief_id) SELECT id FROM briefs;
    RETURN NULL;
END $$;

-- Confirmed readiness items are read by the review too.
CREATE TRIGGER readiness_confirmations_signals AFTER INSERT ON readiness_confirmations
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();

-- Every snapshot is made again, with the new columns.
INSERT INTO brief_signals_dirty (brief_id) SELECT id FROM briefs;
