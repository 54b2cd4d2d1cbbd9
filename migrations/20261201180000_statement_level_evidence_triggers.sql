-- A batch upload inserts up to 500 evidence rows in one statement; its two row triggers ran a
-- PL/pgSQL call and a one-row INSERT per row (the metrics compactor's queue, the review summaries'
-- change queue). Statement triggers with a transition table do each with one INSERT … SELECT per
-- statement. The change queue needs one row per brief and write, not per evidence row: it is a
-- "this brief changed" mark (and `brief_changes_taken` counts marks, which still move with every
-- committed write). Same names, so the triggers read as before.

CREATE FUNCTION evidence_metrics_enqueue_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evidence_metrics_pending (brief_id, trial_id, evidence_id)
    SELECT brief_id, trial_id, id FROM new_rows WHERE metrics <> '{}'::jsonb;
    RETURN NULL;
END $$;

CREATE FUNCTION mark_brief_signals_dirty_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO brief_signals_dirty (brief_id) SELECT DISTINCT brief_id FROM new_rows;
    RETURN NULL;
END $$;

DROP TRIGGER evidence_metrics_enqueue ON evidence;
CREATE TRIGGER evidence_metrics_enqueue AFTER INSERT ON evidence
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION evidence_metrics_enqueue_rows();

DROP TRIGGER evidence_signals ON evidence;
CREATE TRIGGER evidence_signals AFTER INSERT ON evidence
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mark_brief_signals_dirty_rows();

DROP TRIGGER ledger_lines_signals ON ledger_lines;
CREATE TRIGGER ledger_lines_signals AFTER INSERT ON ledger_lines
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mark_brief_signals_dirty_rows();
