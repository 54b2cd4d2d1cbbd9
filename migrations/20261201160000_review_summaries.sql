-- A review summary per brief, kept current for the dashboard and lists: the decision, cost per
-- completed job, required criteria passing, approval state and evidence counts, so a list of
-- briefs never computes a full review per row.
--
-- Every write that can change a review marks its brief dirty in the same transaction (the
-- triggers below); `review::summaries` recomputes dirty briefs in the background and, for the
-- briefs a reader is about to show, before it reads (readers never wait for the background task).
-- A price import can change every brief's money figures, so it marks every brief.

CREATE TABLE review_summaries (
    brief_id          uuid PRIMARY KEY REFERENCES briefs (id) ON DELETE CASCADE,
    -- The trial the brief-level decision is taken from.
    trial_id          uuid,
    decision          text NOT NULL,
    accepted          boolean NOT NULL,
    cost_per_job      numeric,
    criteria_passed   integer NOT NULL,
    criteria_required integer NOT NULL,
    -- A required criterion fails.
    failing           boolean NOT NULL,
    evidence_count    bigint NOT NULL,
    last_evidence_at  timestamptz,
    approval_verdict  text,
    approval_decision text,
    -- awaiting-evidence | needs-approval | stale | approved | rejected
    state             text NOT NULL CHECK (state IN ('awaiting-evidence', 'needs-approval', 'stale', 'approved', 'rejected')),
    -- Per trial: { trial, name, decision, accepted, cost_per_job, criteria_passed, criteria_required }.
    trials            jsonb NOT NULL DEFAULT '[]' CHECK (jsonb_typeof(trials) = 'array'),
    computed_at       timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX review_summaries_state_idx ON review_summaries (state);
CREATE INDEX review_summaries_failing_idx ON review_summaries (brief_id) WHERE failing;

CREATE TABLE review_summaries_dirty (
    brief_id uuid PRIMARY KEY REFERENCES briefs (id) ON DELETE CASCADE,
    since    timestamptz NOT NULL DEFAULT now()
);

-- Rows of tables keyed by brief_id. ON CONFLICT DO NOTHING takes no row lock on an existing mark,
-- so concurrent uploads to one brief do not queue behind each other here.
CREATE FUNCTION review_summary_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        -- A brief being deleted cascades here; its mark would have nothing to point at.
        INSERT INTO review_summaries_dirty (brief_id)
        SELECT OLD.brief_id WHERE EXISTS (SELECT 1 FROM briefs WHERE id = OLD.brief_id)
        ON CONFLICT DO NOTHING;
        RETURN OLD;
    END IF;
    INSERT INTO review_summaries_dirty (brief_id) VALUES (NEW.brief_id) ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE FUNCTION review_summary_mark_brief() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO review_summaries_dirty (brief_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    RETURN NEW;
END $$;

CREATE FUNCTION review_summary_mark_all() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO review_summaries_dirty (brief_id) SELECT id FROM briefs ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;

CREATE TRIGGER review_summary_brief AFTER INSERT OR UPDATE ON briefs
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark_brief();
CREATE TRIGGER review_summary_trials AFTER INSERT OR UPDATE OR DELETE ON trials
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_evidence AFTER INSERT OR UPDATE OR DELETE ON evidence
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_ledger_lines AFTER INSERT OR UPDATE OR DELETE ON ledger_lines
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_ledger_outputs AFTER INSERT OR UPDATE OR DELETE ON ledger_outputs
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_cards AFTER INSERT OR UPDATE OR DELETE ON card_revisions
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_approvals AFTER INSERT OR UPDATE OR DELETE ON approvals
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_readiness AFTER INSERT OR UPDATE OR DELETE ON readiness_confirmations
    FOR EACH ROW EXECUTE FUNCTION review_summary_mark();
CREATE TRIGGER review_summary_prices AFTER INSERT ON prices
    FOR EACH STATEMENT EXECUTE FUNCTION review_summary_mark_all();

-- Every brief that exists now starts dirty.
INSERT INTO review_summaries_dirty (brief_id) SELECT id FROM briefs;
