-- A load test's concurrency (the tool's `--max-concurrency`, GuideLLM's streams) was stored as
-- `serving.max_concurrency`, the key of the KV cache's concurrency in vLLM's start-up log. A trial's
-- newest value of a key wins whatever kind of item holds it, so a load test sent after the log put
-- the tool's figure in vLLM's place: on the KV check ("vLLM's log says it can keep 16.0 sequences")
-- and under a card's criterion on that key. Parser version 8 writes `serving.load_concurrency`;
-- stored load tests get the same name here (the top-level key; a sweep's `serving.by_run.*` keys
-- were never read as vLLM's, and the load points read either name). Their values leave the newest
-- values, the items of those trials that can hold either key are queued again so the compactor
-- folds the right ones back (the readers read the queue meanwhile; items set aside as too costly
-- to fold stay aside), and the briefs' reviews are marked changed.

CREATE TEMPORARY TABLE load_tests_renamed ON COMMIT DROP AS
    SELECT id, brief_id, trial_id
    FROM evidence
    WHERE kind = 'bench-serving' AND metrics ? 'serving.max_concurrency';

DELETE FROM evidence_metrics_latest l
USING load_tests_renamed r
WHERE l.evidence_id = r.id AND l.key = 'serving.max_concurrency';

UPDATE evidence e
SET metrics = (e.metrics - 'serving.max_concurrency')
              || jsonb_build_object('serving.load_concurrency', e.metrics -> 'serving.max_concurrency'),
    -- The digest stands for the item's keys, which changed: without one it is a group of its own.
    metric_keys_digest = NULL
FROM load_tests_renamed r
WHERE e.id = r.id;

INSERT INTO evidence_metrics_pending (brief_id, trial_id, evidence_id)
SELECT e.brief_id, e.trial_id, e.id
FROM evidence e
WHERE e.trial_id IN (SELECT trial_id FROM load_tests_renamed)
  AND e.kind IN ('vllm-log', 'bench-serving', 'metrics')
  AND (e.metrics ? 'serving.max_concurrency' OR e.metrics ? 'serving.load_concurrency')
  AND NOT EXISTS (SELECT 1 FROM evidence_metrics_set_aside s WHERE s.evidence_id = e.id)
ON CONFLICT DO NOTHING;

INSERT INTO review_changes (brief_id)
SELECT DISTINCT brief_id FROM load_tests_renamed
ON CONFLICT DO NOTHING;
