-- How many evidence items each trial holds per stage, and when the first and newest of them were
-- collected and received, kept as totals instead of counted item by item: the watcher's summary
-- of a busy brief counted every item of its trials each round (hundreds of milliseconds once a
-- trial held a million), and so did the brief page's stage times.
--
-- Exact under concurrent writes without a hot row: each evidence statement's change mark carries
-- the counts of its own rows, per trial and stage (written in the same transaction as the rows,
-- so they commit or vanish together); the watcher adds the marks it takes to the totals in the
-- statement that deletes them (`review::summaries_repo::claim_dirty`); a reader adds the totals
-- and the marks still queued, in one snapshot. The totals belong to the review's kept summaries.

-- No evidence is written between the count below and the new trigger: a writer still open waits
-- for this migration, and one that started before it has committed (and is counted) first.
LOCK TABLE evidence IN SHARE MODE;

ALTER TABLE brief_signals_dirty
    ADD COLUMN trial_id uuid,
    ADD COLUMN stage smallint,
    ADD COLUMN uploads bigint,
    ADD COLUMN first_collected_at timestamptz,
    ADD COLUMN last_collected_at timestamptz,
    ADD COLUMN last_received_at timestamptz;

-- No foreign key to trials: the watcher must be able to add a mark for a trial deleted meanwhile
-- (a key would fail its statement on every round). A deleted trial's few rows are left behind.
CREATE TABLE trial_stage_totals (
    trial_id            uuid NOT NULL,
    stage               smallint NOT NULL,
    uploads             bigint NOT NULL,
    first_collected_at  timestamptz NOT NULL,
    last_collected_at   timestamptz NOT NULL,
    last_received_at    timestamptz NOT NULL,
    PRIMARY KEY (trial_id, stage)
);

-- Everything committed so far, counted once. Marks already queued carry no counts: their rows
-- are in this count.
INSERT INTO trial_stage_totals (trial_id, stage, uploads, first_collected_at, last_collected_at, last_received_at)
SELECT trial_id, stage, count(*), min(collected_at), max(collected_at), max(received_at)
FROM evidence GROUP BY trial_id, stage;

-- One mark per brief, trial and stage of the statement's rows, with their counts (the ledger's
-- trigger keeps `mark_brief_signals_dirty_rows`: one plain mark per brief).
CREATE FUNCTION mark_brief_signals_dirty_evidence_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO brief_signals_dirty (brief_id, trial_id, stage, uploads, first_collected_at,
                                     last_collected_at, last_received_at)
    SELECT brief_id, trial_id, stage, count(*), min(collected_at), max(collected_at), max(received_at)
    FROM new_rows GROUP BY brief_id, trial_id, stage;
    RETURN NULL;
END $$;

DROP TRIGGER evidence_signals ON evidence;
CREATE TRIGGER evidence_signals AFTER INSERT ON evidence
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION mark_brief_signals_dirty_evidence_rows();

-- A reader sums a brief's queued marks per trial (`brief_signals_dirty_brief_idx` finds them).
