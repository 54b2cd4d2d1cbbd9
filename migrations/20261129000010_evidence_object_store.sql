-- Raw evidence may live in an object store instead of the row (RENTCHECK_EVIDENCE_STORE): then
-- `raw` is NULL and `raw_object` names the object (`sha256/<hex>` under the store's prefix).
-- Exactly one of the two holds the bytes; `size_bytes` is checked against `raw` when it is here.
-- The new checks are NOT VALID: rows written before this migration all have `raw` and no object,
-- and validating would scan the whole table under a lock.
ALTER TABLE evidence ALTER COLUMN raw DROP NOT NULL;
ALTER TABLE evidence ADD COLUMN raw_object text;
ALTER TABLE evidence DROP CONSTRAINT evidence_size_check;
ALTER TABLE evidence ADD CONSTRAINT evidence_size_check
    CHECK (raw IS NULL OR size_bytes = octet_length(raw)) NOT VALID;
ALTER TABLE evidence ADD CONSTRAINT evidence_raw_in_one_place_check
    CHECK ((raw IS NULL) <> (raw_object IS NULL)) NOT VALID;
