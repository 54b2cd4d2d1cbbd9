-- One row per (evidence item, metric key), so "the newest value of key K on brief B" is an index
-- lookup instead of a scan of every item's metrics object. Filled by a trigger, so every insert
-- path (the API, the demo loader, a restore) keeps it in step.
CREATE TABLE evidence_metrics (
    evidence_id  uuid NOT NULL REFERENCES evidence (id) ON DELETE CASCADE,
    brief_id     uuid NOT NULL,
    stage        smallint NOT NULL,
    key          text NOT NULL,
    value        jsonb NOT NULL,
    collected_at timestamptz NOT NULL,
    received_at  timestamptz NOT NULL,
    CONSTRAINT evidence_metrics_pkey PRIMARY KEY (evidence_id, key)
);
-- "Newest value of key K at stage S on brief B" is one probe of this index (LIMIT 1).
CREATE INDEX evidence_metrics_newest_idx
    ON evidence_metrics (brief_id, key, stage, collected_at DESC, received_at DESC, evidence_id DESC);

CREATE FUNCTION evidence_metrics_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO evidence_metrics (evidence_id, brief_id, stage, key, value, collected_at, received_at)
    SELECT NEW.id, NEW.brief_id, NEW.stage, m.key, m.value, NEW.collected_at, NEW.received_at
    FROM jsonb_each(NEW.metrics) AS m;
    RETURN NULL;
END;
$$;
CREATE TRIGGER evidence_metrics_fill AFTER INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION evidence_metrics_fill();

INSERT INTO evidence_metrics (evidence_id, brief_id, stage, key, value, collected_at, received_at)
SELECT e.id, e.brief_id, e.stage, m.key, m.value, e.collected_at, e.received_at
FROM evidence e, jsonb_each(e.metrics) AS m;
