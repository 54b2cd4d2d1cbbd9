-- A release dated ahead, while the term runs, takes effect on its day: until then the commitment
-- keeps its state and carries its release date. A released commitment still has its date.
ALTER TABLE commitments DROP CONSTRAINT commitments_released_check;
ALTER TABLE commitments ADD CONSTRAINT commitments_released_check
    CHECK (state <> 'released' OR released_on IS NOT NULL);
