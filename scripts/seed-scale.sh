#!/usr/bin/env bash
# Writes the data set of a team at scale into a migrated rentcheck database, through SQL, in
# minutes: by default 10,000 briefs, 30,000 trials, 2,000,000 evidence items (~2 KB each),
# 1,000,000 ledger lines and 2,000 commitments (COMMITMENTS, a fifth of the briefs), as
# docs/benchmarks.md measures the pages on.
#
#   DATABASE_URL=postgres://postgres@127.0.0.1:5432/rentcheck_scale scripts/seed-scale.sh
#   BRIEFS=100 scripts/seed-scale.sh          # a small copy of the same shape
#
# The database must exist and be migrated (`rentcheck migrate`). Every row is what the app itself
# would have written: evidence rows go through the evidence triggers (the metrics queue, the review
# summary marks) and the queue is compacted with the app's own function; ledger lines of one
# resource never overlap and each lies inside one UTC day, so the stored merges
# (`ledger_accelerator_merged`, and per day `ledger_accelerator_daily`) are their plain sums, as the
# app's merge computes them. Ids are derived from the row numbers (md5), so a second run with the
# same numbers fails on the first duplicate instead of doubling the data.
#
# Shape: each brief one of five catalogue models (8B, 70B, 32B, 72B, Mixtral), three trials (H100,
# A100, H200 offers), and per trial evidence across the stages (stage 3 serving figures that pass or
# miss the brief's targets, a DCGM diagnostic that fails on one brief in 17) and consecutive hourly
# accelerator lines with accepted outputs. About one brief in 40 has no evidence yet. The 40 owners
# are engineer accounts in four teams (Serving, Search, Agents, Batch) that their briefs are shared
# with, and one brief in ten has an approval that is now stale.
set -euo pipefail

: "${DATABASE_URL:?set DATABASE_URL to a migrated rentcheck database}"
BRIEFS=${BRIEFS:-10000}
TRIALS=${TRIALS:-3}
EVIDENCE=${EVIDENCE:-$((BRIEFS * 200))}
LEDGER=${LEDGER:-$((BRIEFS * 100))}
COMMITMENTS=${COMMITMENTS:-$((BRIEFS / 5))}
CHUNK=${CHUNK:-500}
[ "$TRIALS" -ge 1 ] && [ "$TRIALS" -le 3 ] || { echo "TRIALS must be 1 to 3" >&2; exit 2; }
# One brief in 40 has no evidence: the others carry the whole count (rounded up).
WITH_EVIDENCE=$(( BRIEFS - BRIEFS / 40 ))
PER_TRIAL_EVIDENCE=$(( (EVIDENCE + WITH_EVIDENCE * TRIALS - 1) / (WITH_EVIDENCE * TRIALS) ))
PER_TRIAL_LEDGER=$(( (LEDGER + BRIEFS * TRIALS - 1) / (BRIEFS * TRIALS) ))
[ "$PER_TRIAL_EVIDENCE" -ge 4 ] || { echo "EVIDENCE too small: at least 4 items per trial" >&2; exit 2; }
[ "$PER_TRIAL_LEDGER" -ge 1 ] || { echo "LEDGER too small: at least 1 line per trial" >&2; exit 2; }
[ "$COMMITMENTS" -ge 0 ] && [ "$COMMITMENTS" -le "$BRIEFS" ] || { echo "COMMITMENTS must be 0 to BRIEFS" >&2; exit 2; }

psql() { command psql -q -X -v ON_ERROR_STOP=1 "$DATABASE_URL" "$@"; }

echo "seeding $BRIEFS briefs × $TRIALS trials, $PER_TRIAL_EVIDENCE evidence items and $PER_TRIAL_LEDGER ledger lines per trial"
start=$(date +%s)
for ((lo = 1; lo <= BRIEFS; lo += CHUNK)); do
    hi=$(( lo + CHUNK - 1 < BRIEFS ? lo + CHUNK - 1 : BRIEFS ))
    psql -v lo="$lo" -v hi="$hi" -v trials="$TRIALS" -v ne="$PER_TRIAL_EVIDENCE" -v nl="$PER_TRIAL_LEDGER" <<'SQL'
BEGIN;
CREATE TEMP TABLE seed_briefs ON COMMIT DROP AS
SELECT g, md5('seed-brief-' || g)::uuid AS id,
       (ARRAY['meta-llama/Llama-3.1-8B-Instruct', 'meta-llama/Llama-3.1-70B-Instruct', 'Qwen/Qwen2.5-32B-Instruct',
              'Qwen/Qwen2.5-72B-Instruct', 'mistralai/Mixtral-8x7B-Instruct-v0.1'])[1 + g % 5] AS model,
       (ARRAY[8.03, 70.55, 32.76, 72.71, 46.70])[1 + g % 5] AS params,
       (ARRAY[1, 4, 2, 4, 2])[1 + g % 5] AS gpus
FROM generate_series(:lo, :hi) AS g;

INSERT INTO briefs (id, name, owner, workload_kind, model_name, catalog_model, params_b, precision, context_length,
                    concurrency, targets, data_boundary, persist, max_cost_per_job, currency, cost_unit,
                    allocation_boundary, created_at, updated_at)
SELECT id,
       format('%s %s', (ARRAY['Support chat', 'Search rerank', 'Summariser', 'Coding agent', 'Batch scoring'])[1 + (g / 5) % 5],
              lpad(g::text, 5, '0')),
       format('team-%s@example.com', g % 40), 'realtime-inference', model, model, params, 'bf16', 8192, 16,
       '{"ttft_p95_ms": 500, "itl_p95_ms": 50, "error_rate": 0.01}', 'private-network', '{weights}', 0.004, 'USD',
       'request', 'vm', now() - make_interval(mins => g), now() - make_interval(mins => g)
FROM seed_briefs;

INSERT INTO trials (id, brief_id, position, name, provider, gpu, gpu_count, billing, rate_per_gpu_hour, currency,
                    allocation_boundary, status, started_at)
SELECT md5('seed-trial-' || b.g || '-' || t)::uuid, b.id, t,
       (ARRAY['H100 on Cloud A', 'A100 on Cloud B', 'H200 on Cloud C'])[t],
       (ARRAY['Cloud A', 'Cloud B', 'Cloud C'])[t], (ARRAY['H100 SXM', 'A100 80GB SXM', 'H200 SXM'])[t], b.gpus,
       'on-demand', (ARRAY[2.99, 1.89, 3.79])[t], 'USD', 'vm', 'running', now() - interval '30 days'
FROM seed_briefs b CROSS JOIN generate_series(1, :trials) AS t;

-- Evidence: one brief in 40 has none yet. Stage by item: 1 a DCGM diagnostic, 2 NCCL bandwidth,
-- 3 serving figures, 4 a checkpoint restore; each item's bytes are its JSON padded to ~2 KB.
INSERT INTO evidence (id, brief_id, trial_id, kind, stage, content_type, raw, sha256, size_bytes, metrics,
                      parse_status, parser_version, labels, collected_at, received_at, uploaded_by)
SELECT id, brief_id, trial_id, 'metrics', stage, 'application/json', raw, encode(sha256(raw), 'hex'),
       octet_length(raw), metrics, 'ok', 'seed', '{}', at, at, 'seed-scale'
FROM (
    SELECT md5('seed-evidence-' || b.g || '-' || t || '-' || k)::uuid AS id, b.id AS brief_id,
           md5('seed-trial-' || b.g || '-' || t)::uuid AS trial_id, 1 + k % 4 AS stage, m.metrics,
           convert_to(rpad(jsonb_build_object('data', jsonb_build_object('metrics', m.metrics))::text, 2000), 'UTF8') AS raw,
           now() - interval '20 days' + make_interval(mins => k * 10) AS at
    FROM seed_briefs b
    CROSS JOIN generate_series(1, :trials) AS t
    CROSS JOIN generate_series(1, :ne) AS k
    CROSS JOIN LATERAL (SELECT CASE 1 + k % 4
        WHEN 1 THEN jsonb_build_object('dcgm.diag.passed', b.g % 17 <> 0)
        WHEN 2 THEN jsonb_build_object('nccl.busbw_gbps', 120 + (b.g * 7 + k) % 200)
        WHEN 3 THEN jsonb_build_object('serving.ttft_p95_ms', 250 + (b.g * 13 + t * 7 + k) % 400,
                                       'serving.itl_p95_ms', 15 + (b.g + k) % 50,
                                       'serving.error_rate', ((b.g + k) % 20) / 1000.0,
                                       'serving.throughput_rps', 5 + (b.g + t + k) % 40)
        ELSE jsonb_build_object('checkpoint.restore_ok', true, 'checkpoint.restore_seconds', 60 + (b.g + k) % 300)
        END AS metrics) AS m
    WHERE b.g % 40 <> 0
) AS e;

-- Ledger: consecutive hourly accelerator lines per trial (one resource, never overlapping), the
-- outputs they produced, and the merge the app keeps of them.
INSERT INTO ledger_lines (id, brief_id, trial_id, import_id, category, resource, description, starts_at, ends_at,
                          gpus, rate_per_gpu_hour, amount, currency)
SELECT md5('seed-line-' || b.g || '-' || t || '-' || k)::uuid, b.id, md5('seed-trial-' || b.g || '-' || t)::uuid,
       md5('seed-import-' || b.g || '-' || t)::uuid, 'accelerator', 'node-1', 'seeded hour',
       date_trunc('hour', now()) - make_interval(hours => :nl + 1 - k),
       date_trunc('hour', now()) - make_interval(hours => :nl - k),
       b.gpus, (ARRAY[2.99, 1.89, 3.79])[t], b.gpus * (ARRAY[2.99, 1.89, 3.79])[t], 'USD'
FROM seed_briefs b CROSS JOIN generate_series(1, :trials) AS t CROSS JOIN generate_series(1, :nl) AS k;

INSERT INTO ledger_accelerator_merged (brief_id, trial_id, resource, gpu_micros, cost, lines)
SELECT brief_id, trial_id, resource, sum(gpus::numeric * 3600000000), sum(amount), count(*)
FROM ledger_lines WHERE brief_id IN (SELECT id FROM seed_briefs) GROUP BY brief_id, trial_id, resource;

INSERT INTO ledger_accelerator_daily (trial_id, resource, day, gpu_micros)
SELECT trial_id, resource, (starts_at AT TIME ZONE 'UTC')::date, sum(gpus::numeric * 3600000000)
FROM ledger_lines WHERE brief_id IN (SELECT id FROM seed_briefs) GROUP BY 1, 2, 3;

INSERT INTO ledger_outputs (brief_id, trial_id, accepted, rejected, retries, failed_jobs)
SELECT b.id, md5('seed-trial-' || b.g || '-' || t)::uuid, 200000 + (b.g * 31 + t) % 500000, (b.g + t) % 900, 0, 0
FROM seed_briefs b CROSS JOIN generate_series(1, :trials) AS t;
COMMIT;

-- The metrics queue, moved as the compactor would.
DO $$ BEGIN
    WHILE evidence_metrics_compact(100000) > 0 LOOP NULL; END LOOP;
END $$;
SQL
    echo "  briefs $lo–$hi written ($(( $(date +%s) - start )) s)"
done
# People and teams: the 40 owners as engineer accounts (no password: they never sign in), four
# teams of ten, each brief owned by its owner's account and shared with the owner's team; one brief
# in ten approved on inputs that have since changed (its summary says stale).
psql <<'SQL'
BEGIN;
INSERT INTO users (id, email, role, password_hash)
SELECT md5('seed-user-' || g)::uuid, format('team-%s@example.com', g), 'engineer', '!'
FROM generate_series(0, 39) AS g ON CONFLICT DO NOTHING;
INSERT INTO teams (id, name)
SELECT md5('seed-team-' || i)::uuid, (ARRAY['Serving', 'Search', 'Agents', 'Batch'])[i]
FROM generate_series(1, 4) AS i ON CONFLICT DO NOTHING;
INSERT INTO team_members (team_id, user_id)
SELECT md5('seed-team-' || (1 + g % 4))::uuid, md5('seed-user-' || g)::uuid
FROM generate_series(0, 39) AS g ON CONFLICT DO NOTHING;
INSERT INTO brief_owners (brief_id, user_id)
SELECT b.id, u.id FROM briefs b JOIN users u ON u.email = b.owner ON CONFLICT DO NOTHING;
INSERT INTO brief_teams (brief_id, team_id)
SELECT o.brief_id, m.team_id FROM brief_owners o JOIN team_members m ON m.user_id = o.user_id
ON CONFLICT DO NOTHING;
INSERT INTO approvals (id, brief_id, verdict, decision, inputs_digest, comment, decided_by, decided_at, inputs)
SELECT md5('seed-approval-' || b.id)::uuid, b.id, 'approve', 'expand', 'seeded-before-the-latest-evidence',
       'Seeded approval', 'manager@example.com', now() - interval '10 days', '{}'
FROM (SELECT id, row_number() OVER (ORDER BY created_at) AS n FROM briefs) AS b
WHERE b.n % 10 = 0 ON CONFLICT DO NOTHING;
COMMIT;
SQL

# Commitments: one brief in five (spread evenly) has an approval that recorded a reservation of one
# of its trials (decision reserve, 12 months' worth of the trial's GPUs at 0.6 × its on-demand rate)
# and the commitment it opened, as review/service.rs writes them on an approval (the approval row
# with its reservation, the commitment, its `commitment.opened` audit row). Terms started 1 to 11
# months ago, so the trial's ledger lines (the last hours before now) fall inside every term that
# has not ended. States as the background task would judge them today (it looks again a minute
# after `checked_at`): of ten, five active, one revalidation-due (re-run every 7 days, the newest
# run ~20 days old), one renewal-due (the term ends within 60 days), one regressed (its reason
# kept; no run since the one it saw), one ended (a term shorter than its months so far), one
# released yesterday. One in three names a provider_commitment_id.
if [ "$COMMITMENTS" -gt 0 ]; then
psql -v briefs="$BRIEFS" -v trials="$TRIALS" -v commitments="$COMMITMENTS" <<'SQL'
BEGIN;
CREATE TEMP TABLE seed_commitments ON COMMIT DROP AS
SELECT s.n, md5('seed-commitment-' || s.n)::uuid AS id, md5('seed-commitment-approval-' || s.n)::uuid AS approval_id,
       tr.brief_id, tr.id AS trial_id, tr.provider, tr.gpu, tr.gpu_count AS gpus, tr.currency,
       tr.rate_per_gpu_hour AS on_demand_rate, round(tr.rate_per_gpu_hour * 0.6, 6) AS rate,
       round(tr.gpu_count * round(tr.rate_per_gpu_hour * 0.6, 6) * 730, 6) AS monthly_cost,
       s.k, s.term_months, s.start_date,
       (s.start_date + make_interval(months => s.term_months) - interval '1 day')::date AS end_date,
       ((s.start_date - 1) + time '12:00') AT TIME ZONE 'UTC' AS approved_at
FROM (
    SELECT n, g, t, k,
           CASE k WHEN 6 THEN m + 1 WHEN 8 THEN greatest(m - 1, 1) ELSE 24 + 12 * (n % 2) END AS term_months,
           (current_date - make_interval(months => m))::date AS start_date
    FROM (SELECT n, 1 + ((n - 1) * :briefs) / :commitments AS g, 1 + n % :trials AS t, 1 + n % 11 AS m, n % 10 AS k
          FROM generate_series(1, :commitments) AS n) AS x
) AS s
JOIN trials tr ON tr.id = md5('seed-trial-' || s.g || '-' || s.t)::uuid;

INSERT INTO approvals (id, brief_id, verdict, decision, inputs_digest, comment, decided_by, decided_at,
                       reservation_gpu, reservation_count, reservation_billing, reservation_term_months,
                       reservation_start, reservation_monthly_cost, inputs, trial_id, reservation_provider,
                       reservation_rate_per_gpu_hour, reservation)
SELECT approval_id, brief_id, 'approve', 'reserve', 'seeded-reservation', 'Seeded reservation', 'manager@example.com',
       approved_at, gpu, gpus, 'reserved', term_months, start_date, monthly_cost, '{}', trial_id, provider, rate,
       jsonb_build_object('trial', trial_id, 'provider', provider, 'gpu', gpu, 'gpus_per_node', gpus, 'replicas', 1,
                          'gpus', gpus, 'billing', 'reserved', 'rate_per_gpu_hour', rate::text, 'currency', currency,
                          'term_months', term_months, 'monthly_cost', monthly_cost::text, 'start_date', start_date,
                          'note', 'seeded reservation at 0.6 × the on-demand rate')
FROM seed_commitments;

INSERT INTO commitments (id, brief_id, trial_id, approval_id, approved_at, approved_criteria, provider, gpu,
                         gpus_per_node, gpus, billing, rate_per_gpu_hour, on_demand_rate_per_gpu_hour, currency,
                         term_months, start_date, end_date, monthly_cost, provider_commitment_id,
                         revalidate_every_days, state, state_reason, state_changed_at, checked_at, last_run_at,
                         released_on, created_at)
SELECT c.id, c.brief_id, c.trial_id, c.approval_id, c.approved_at, '[]', c.provider, c.gpu, c.gpus, c.gpus, 'reserved',
       c.rate, c.on_demand_rate, c.currency, c.term_months, c.start_date, c.end_date, c.monthly_cost,
       CASE WHEN c.n % 3 = 0 THEN 'seed-cud-' || lpad(c.n::text, 5, '0') END,
       CASE WHEN c.k = 5 THEN 7 ELSE 30 END,
       CASE c.k WHEN 5 THEN 'revalidation-due' WHEN 6 THEN 'renewal-due' WHEN 7 THEN 'regressed'
                WHEN 8 THEN 'ended' WHEN 9 THEN 'released' ELSE 'active' END,
       CASE c.k
           WHEN 5 THEN format('no run of the trial since %s (a re-run is due every 7 days)',
                              coalesce((r.last_run AT TIME ZONE 'UTC')::date::text, 'the approval'))
           WHEN 6 THEN format('the term ends on %s: renew, resize or release it', c.end_date)
           WHEN 7 THEN 'serving.ttft_p95_ms (stage 3) failed the re-run: 300 when approved, 420 now'
           WHEN 8 THEN format('the term ended on %s', c.end_date)
           ELSE '' END,
       now() - interval '1 day', now(), r.last_run,
       CASE WHEN c.k = 9 THEN current_date - 1 END, c.approved_at
FROM seed_commitments c
CROSS JOIN LATERAL (SELECT max(received_at) AS last_run FROM evidence e
                    WHERE e.trial_id = c.trial_id AND e.received_at > c.approved_at) AS r;

INSERT INTO audit_log (id, at, actor, action, target, details)
SELECT md5('seed-commitment-opened-' || n)::uuid, approved_at, 'manager@example.com', 'commitment.opened',
       'brief:' || brief_id,
       jsonb_build_object('commitment', id, 'approval', approval_id, 'trial', trial_id, 'gpus', gpus,
                          'rate_per_gpu_hour', rate::text, 'currency', currency, 'start_date', start_date,
                          'end_date', end_date, 'renews', NULL)
FROM seed_commitments;
COMMIT;
SQL
fi

# Every row written queued a change for its brief (as the app's writes do); one per brief says the
# same and spares the watcher millions of rows.
psql -c "DELETE FROM review_changes" -c "INSERT INTO review_changes (brief_id) SELECT id FROM briefs"
psql -c "VACUUM ANALYZE"
psql -At -c "SELECT format('briefs %s, trials %s, evidence %s, ledger lines %s, commitments %s, database %s',
    (SELECT count(*) FROM briefs), (SELECT count(*) FROM trials), (SELECT count(*) FROM evidence),
    (SELECT count(*) FROM ledger_lines), (SELECT count(*) FROM commitments), pg_size_pretty(pg_database_size(current_database())))"
echo "done in $(( $(date +%s) - start )) s; the review summaries are marked dirty and fill in as the server runs"
