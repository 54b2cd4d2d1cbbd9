-- The accelerator merge per trial, resource and UTC day, kept beside ledger_accelerator_merged by
-- every import (in its transaction, under the lock on the brief row): the GPU-microseconds of the
-- day with overlapping lines counted once, at the largest GPU count covering each instant, as the
-- ledger's merge counts them. A commitment's months are whole UTC days, so a month's busy hours are
-- a sum of these rows instead of a merge of every line of the month (the portfolio at scale).
CREATE TABLE ledger_accelerator_daily (
    trial_id   uuid NOT NULL REFERENCES trials (id) ON DELETE CASCADE,
    resource   text NOT NULL,
    day        date NOT NULL,
    gpu_micros numeric NOT NULL,
    CONSTRAINT ledger_accelerator_daily_pkey PRIMARY KEY (trial_id, day, resource),
    CONSTRAINT ledger_accelerator_daily_micros_check CHECK (gpu_micros > 0)
);

-- The lines already stored, merged per day in SQL: each line cut at midnights UTC, then per trial,
-- resource and day every elementary piece of time between two consecutive line ends counts at the
-- largest GPU count of the pieces covering it.
SET LOCAL TimeZone = 'UTC';

CREATE TEMP TABLE daily_pieces ON COMMIT DROP AS
SELECT l.trial_id, l.resource, d.day::date AS day,
       greatest(l.starts_at, d.day) AS s, least(l.ends_at, d.day + interval '1 day') AS e, l.gpus
FROM ledger_lines l
CROSS JOIN LATERAL generate_series(date_trunc('day', l.starts_at), l.ends_at - interval '1 microsecond',
                                   interval '1 day') AS d (day)
WHERE l.category = 'accelerator';

CREATE INDEX ON daily_pieces (trial_id, resource, day, s);
ANALYZE daily_pieces;

INSERT INTO ledger_accelerator_daily (trial_id, resource, day, gpu_micros)
SELECT trial_id, resource, day, sum(round((extract(epoch FROM b) - extract(epoch FROM a)) * 1000000) * gpus)
FROM (
    SELECT x.trial_id, x.resource, x.day, x.a, x.b,
           (SELECT max(p.gpus) FROM daily_pieces p
            WHERE p.trial_id = x.trial_id AND p.resource = x.resource AND p.day = x.day
              AND p.s <= x.a AND p.e >= x.b) AS gpus
    FROM (
        SELECT trial_id, resource, day, t AS a,
               lead(t) OVER (PARTITION BY trial_id, resource, day ORDER BY t) AS b
        FROM (SELECT DISTINCT trial_id, resource, day, t
              FROM daily_pieces, LATERAL (VALUES (s), (e)) AS v (t)) AS bounds
    ) AS x
    WHERE x.b IS NOT NULL
) AS pieces
WHERE gpus IS NOT NULL
GROUP BY trial_id, resource, day;
