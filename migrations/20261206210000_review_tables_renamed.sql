-- The review's kept summaries and their change queue under names that say what they hold: each
-- brief's review summary (`review_summaries`, was `brief_signals`), its trials' (`review_summary_trials`,
-- was `brief_signal_trials`), the marks of writes that may have changed a review
-- (`review_changes`, was `brief_signals_dirty`) and the count of marks taken off it
-- (`review_changes_taken`, was `brief_changes_taken`). Their indexes, constraints, trigger
-- functions and triggers follow. The trigger functions name the queue in their bodies, which
-- PL/pgSQL resolves when they run, so each is replaced with the new name before it is renamed; the
-- triggers call them by oid and keep working throughout (one transaction).

ALTER TABLE brief_signals RENAME TO review_summaries;
ALTER TABLE review_summaries RENAME CONSTRAINT brief_signals_pkey TO review_summaries_pkey;
ALTER TABLE review_summaries RENAME CONSTRAINT brief_signals_brief_id_fkey TO review_summaries_brief_id_fkey;
ALTER TABLE review_summaries RENAME CONSTRAINT brief_signals_state_check TO review_summaries_state_check;
ALTER INDEX brief_signals_state_idx RENAME TO review_summaries_state_idx;
ALTER INDEX brief_signals_failing_idx RENAME TO review_summaries_failing_idx;

ALTER TABLE brief_signal_trials RENAME TO review_summary_trials;
ALTER TABLE review_summary_trials RENAME CONSTRAINT brief_signal_trials_pkey TO review_summary_trials_pkey;
ALTER TABLE review_summary_trials RENAME CONSTRAINT brief_signal_trials_brief_id_fkey
    TO review_summary_trials_brief_id_fkey;

ALTER TABLE brief_signals_dirty RENAME TO review_changes;
ALTER INDEX brief_signals_dirty_brief_idx RENAME TO review_changes_brief_idx;
ALTER INDEX brief_signals_dirty_marked_idx RENAME TO review_changes_marked_idx;

ALTER TABLE brief_changes_taken RENAME TO review_changes_taken;
ALTER TABLE review_changes_taken RENAME CONSTRAINT brief_changes_taken_pkey TO review_changes_taken_pkey;

CREATE OR REPLACE FUNCTION mark_all_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO review_changes (brief_id) SELECT id FROM briefs;
    RETURN NULL;
END $$;
ALTER FUNCTION mark_all_brief_signals_dirty() RENAME TO mark_all_reviews_changed;

CREATE OR REPLACE FUNCTION mark_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'briefs' THEN
        INSERT INTO review_changes (brief_id) VALUES (NEW.id);
    ELSE
        INSERT INTO review_changes (brief_id) VALUES (NEW.brief_id);
    END IF;
    RETURN NULL;
END $$;
ALTER FUNCTION mark_brief_signals_dirty() RENAME TO mark_review_changed;

CREATE OR REPLACE FUNCTION mark_brief_signals_dirty_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO review_changes (brief_id) SELECT DISTINCT brief_id FROM new_rows;
    RETURN NULL;
END $$;
ALTER FUNCTION mark_brief_signals_dirty_rows() RENAME TO mark_review_changed_rows;

CREATE OR REPLACE FUNCTION mark_brief_signals_dirty_evidence_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO review_changes (brief_id, trial_id, stage, uploads, first_collected_at,
                                last_collected_at, last_received_at)
    SELECT brief_id, trial_id, stage, count(*), min(collected_at), max(collected_at), max(received_at)
    FROM new_rows GROUP BY brief_id, trial_id, stage;
    RETURN NULL;
END $$;
ALTER FUNCTION mark_brief_signals_dirty_evidence_rows() RENAME TO mark_review_changed_evidence_rows;

ALTER TRIGGER briefs_signals ON briefs RENAME TO briefs_review_changed;
ALTER TRIGGER trials_signals ON trials RENAME TO trials_review_changed;
ALTER TRIGGER ledger_outputs_signals ON ledger_outputs RENAME TO ledger_outputs_review_changed;
ALTER TRIGGER ledger_lines_signals ON ledger_lines RENAME TO ledger_lines_review_changed;
ALTER TRIGGER card_revisions_signals ON card_revisions RENAME TO card_revisions_review_changed;
ALTER TRIGGER readiness_confirmations_signals ON readiness_confirmations RENAME TO readiness_confirmations_review_changed;
ALTER TRIGGER approvals_signals ON approvals RENAME TO approvals_review_changed;
ALTER TRIGGER evidence_signals ON evidence RENAME TO evidence_review_changed;
ALTER TRIGGER prices_signals ON prices RENAME TO prices_review_changed;
