-- Commitments (issue 52): an approval that records a reservation (reserve, dedicate, scale) opens
-- one, so what was bought is measured month by month, re-validated and renewed. The term runs from
-- start_date to end_date, both days included (end_date = start_date + term_months − 1 day).
CREATE TABLE commitments (
    id                          uuid PRIMARY KEY,
    brief_id                    uuid NOT NULL,
    trial_id                    uuid NOT NULL,
    -- The approval that recorded the reservation: one commitment per approval.
    approval_id                 uuid NOT NULL,
    -- When it was approved, and the committed trial's criteria as the approval read them: a run
    -- after this is a re-validation, judged against these.
    approved_at                 timestamptz NOT NULL,
    approved_criteria           jsonb NOT NULL DEFAULT '[]'::jsonb,
    provider                    text NOT NULL DEFAULT '',
    gpu                         text NOT NULL,
    gpus_per_node               integer NOT NULL,
    gpus                        integer NOT NULL,
    billing                     text NOT NULL,
    rate_per_gpu_hour           numeric(20, 6) NOT NULL,
    -- The on-demand rate of the same offer when the approval was recorded: what the busy hours
    -- would have cost by the hour. NULL when no on-demand price was known.
    on_demand_rate_per_gpu_hour numeric(20, 6),
    currency                    text NOT NULL,
    term_months                 integer NOT NULL,
    start_date                  date NOT NULL,
    end_date                    date NOT NULL,
    monthly_cost                numeric(20, 6) NOT NULL,
    provider_commitment_id      text,
    revalidate_every_days       integer NOT NULL DEFAULT 30,
    state                       text NOT NULL DEFAULT 'active',
    -- Why the state is what it is ("no run since …", "ttft_p95 failed: 180 ms → 260 ms"), for people.
    state_reason                text NOT NULL DEFAULT '',
    state_changed_at            timestamptz NOT NULL DEFAULT now(),
    -- When the background task last judged it (NULL: not yet): it looks again after new evidence
    -- of the trial, and at least hourly for the clock's states.
    checked_at                  timestamptz,
    -- The newest run (evidence) of the trial since the approval that the task saw.
    last_run_at                 timestamptz,
    -- The day a manager gave it back before its end (state released).
    released_on                 date,
    -- The commitment this one renews.
    renews                      uuid,
    created_at                  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT commitments_brief_fk FOREIGN KEY (brief_id) REFERENCES briefs (id) ON DELETE CASCADE,
    CONSTRAINT commitments_trial_fk FOREIGN KEY (trial_id, brief_id) REFERENCES trials (id, brief_id) ON DELETE CASCADE,
    CONSTRAINT commitments_approval_fk FOREIGN KEY (approval_id) REFERENCES approvals (id) ON DELETE CASCADE,
    CONSTRAINT commitments_renews_fk FOREIGN KEY (renews) REFERENCES commitments (id) ON DELETE SET NULL,
    CONSTRAINT commitments_approval_key UNIQUE (approval_id),
    CONSTRAINT commitments_state_check CHECK (state IN ('active', 'revalidation-due', 'regressed', 'renewal-due', 'ended', 'released')),
    CONSTRAINT commitments_gpus_check CHECK (gpus_per_node > 0 AND gpus > 0),
    CONSTRAINT commitments_rate_check CHECK (rate_per_gpu_hour >= 0 AND (on_demand_rate_per_gpu_hour IS NULL OR on_demand_rate_per_gpu_hour >= 0)),
    CONSTRAINT commitments_monthly_cost_check CHECK (monthly_cost >= 0),
    CONSTRAINT commitments_term_check CHECK (term_months BETWEEN 1 AND 120 AND end_date >= start_date),
    CONSTRAINT commitments_revalidate_check CHECK (revalidate_every_days BETWEEN 1 AND 365),
    CONSTRAINT commitments_provider_id_check CHECK (provider_commitment_id IS NULL OR length(provider_commitment_id) BETWEEN 1 AND 200),
    CONSTRAINT commitments_released_check CHECK ((state = 'released') = (released_on IS NOT NULL)),
    CONSTRAINT commitments_not_self_check CHECK (renews IS NULL OR renews <> id),
    CONSTRAINT commitments_approved_criteria_check CHECK (jsonb_typeof(approved_criteria) = 'array')
);
CREATE INDEX commitments_brief_idx ON commitments (brief_id, start_date);
CREATE INDEX commitments_state_idx ON commitments (state, end_date);

-- Commitments for approvals already recorded: every approval of reserve, dedicate or scale with
-- its reservation and trial, from the whole reservation when it was kept, else from the columns
-- older approvals have (their rate from the monthly cost when it was not kept: monthly ÷ GPUs ÷ 730).
INSERT INTO commitments (id, brief_id, trial_id, approval_id, approved_at, approved_criteria, provider, gpu, gpus_per_node, gpus, billing,
                         rate_per_gpu_hour, on_demand_rate_per_gpu_hour, currency, term_months, start_date, end_date,
                         monthly_cost, created_at)
SELECT gen_random_uuid(), a.brief_id, a.trial_id, a.id, a.decided_at,
       -- One trial's inputs, or every trial's by id.
       CASE WHEN jsonb_typeof(a.inputs -> (a.trial_id::text) -> 'criteria') = 'array' THEN a.inputs -> (a.trial_id::text) -> 'criteria'
            WHEN jsonb_typeof(a.inputs -> 'criteria') = 'array' THEN a.inputs -> 'criteria'
            ELSE '[]'::jsonb END,
       COALESCE(a.reservation_provider, t.provider, ''),
       a.reservation_gpu,
       COALESCE((a.reservation ->> 'gpus_per_node')::integer, t.gpu_count, a.reservation_count),
       a.reservation_count,
       COALESCE(a.reservation_billing, 'reserved'),
       COALESCE(a.reservation_rate_per_gpu_hour,
                round(a.reservation_monthly_cost / (a.reservation_count * 730), 6)),
       -- A reservation kept at the trial's own on-demand rate knows it; a reserved one did not keep it.
       CASE WHEN a.reservation_billing = 'on-demand' THEN a.reservation_rate_per_gpu_hour END,
       COALESCE(a.reservation ->> 'currency', b.currency),
       a.reservation_term_months,
       a.reservation_start,
       (a.reservation_start + make_interval(months => a.reservation_term_months) - interval '1 day')::date,
       a.reservation_monthly_cost,
       a.decided_at
FROM approvals a
JOIN briefs b ON b.id = a.brief_id
JOIN trials t ON t.id = a.trial_id AND t.brief_id = a.brief_id
WHERE a.verdict = 'approve'
  AND a.decision IN ('reserve', 'dedicate', 'scale')
  AND a.reservation_gpu IS NOT NULL
ORDER BY a.decided_at;

INSERT INTO audit_log (id, actor, action, target, details)
SELECT gen_random_uuid(), 'migration', 'commitment.opened', 'brief:' || c.brief_id,
       jsonb_build_object('commitment', c.id, 'approval', c.approval_id, 'trial', c.trial_id,
                          'start_date', c.start_date, 'end_date', c.end_date, 'opened_by', 'the commitments migration')
FROM commitments c;
