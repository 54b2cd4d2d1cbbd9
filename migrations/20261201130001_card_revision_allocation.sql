-- Issue 20: a saved card's allocation-dependent thresholds (gpu.count, the NCCL and topology floors)
-- were computed for the allocation under test when it was saved. Keep that allocation with the
-- revision, so a threshold the person left as generated follows a later allocation (the brief's GPU
-- under test changed), while one they typed stays and is reported stale. NULL for revisions saved
-- before this migration: their thresholds stay as saved.
ALTER TABLE card_revisions
    ADD COLUMN allocation_gpu text,
    ADD COLUMN allocation_count integer,
    ADD CONSTRAINT card_revisions_allocation_count_check CHECK (allocation_count IS NULL OR allocation_count >= 1),
    ADD CONSTRAINT card_revisions_allocation_pair_check CHECK ((allocation_gpu IS NULL) = (allocation_count IS NULL));
