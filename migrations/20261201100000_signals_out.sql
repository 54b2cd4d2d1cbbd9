-- Signals out (issue 21): webhooks with an outbox written in the transaction of the change that
-- causes an event, one delivery per (webhook, event) with every attempt kept; and the signal
-- snapshot, each brief's last known decision per trial, which the signals watcher compares with a
-- fresh review to notice `decision.changed` and `approval.stale`, and which `/metrics/briefs` reads.

CREATE TABLE webhooks (
    id          uuid PRIMARY KEY,
    url         text NOT NULL CHECK (length(url) BETWEEN 1 AND 2048),
    events      text[] NOT NULL CHECK (cardinality(events) > 0),
    -- Kept as given because signing needs it; never logged and never answered after creation.
    secret      text NOT NULL,
    created_by  text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

-- The outbox. An event is written only while some webhook listens to its kind (so nothing piles
-- up unheard), and with its deliveries in the same statement.
CREATE TABLE webhook_events (
    id          uuid PRIMARY KEY,
    event       text NOT NULL,
    -- No foreign keys: an event records something that happened, whatever becomes of the brief.
    brief_id    uuid NOT NULL,
    trial_id    uuid,
    payload     jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE webhook_deliveries (
    id               uuid PRIMARY KEY,
    webhook_id       uuid NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event_id         uuid NOT NULL REFERENCES webhook_events (id) ON DELETE CASCADE,
    state            text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts         integer NOT NULL DEFAULT 0,
    -- When a worker may next claim it: a retry's time, or the end of a claim's lease.
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    finished_at      timestamptz,
    CONSTRAINT webhook_deliveries_once UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_webhook_idx ON webhook_deliveries (webhook_id, created_at DESC);

CREATE TABLE webhook_attempts (
    id            uuid PRIMARY KEY,
    delivery_id   uuid NOT NULL REFERENCES webhook_deliveries (id) ON DELETE CASCADE,
    attempted_at  timestamptz NOT NULL DEFAULT now(),
    status_code   integer,
    error         text,
    duration_ms   integer NOT NULL
);
CREATE INDEX webhook_attempts_delivery_idx ON webhook_attempts (delivery_id, attempted_at DESC);

-- Each brief's last known review, per trial.
CREATE TABLE brief_signals (
    brief_id        uuid PRIMARY KEY REFERENCES briefs (id) ON DELETE CASCADE,
    -- The trial the brief-level decision is taken from (the recommended one, else the first).
    trial_id        uuid NOT NULL,
    decision        text NOT NULL,
    accepted        boolean NOT NULL,
    approval_id     uuid,
    approval_stale  boolean NOT NULL DEFAULT false,
    -- When the review this row holds began to be computed: an older computation never overwrites it.
    computed_at     timestamptz NOT NULL
);

CREATE TABLE brief_signal_trials (
    brief_id           uuid NOT NULL REFERENCES brief_signals (brief_id) ON DELETE CASCADE,
    trial_id           uuid NOT NULL,
    decision           text NOT NULL,
    accepted           boolean NOT NULL,
    cost_per_job       numeric,
    utilization        numeric,
    criteria_passed    integer NOT NULL,
    criteria_required  integer NOT NULL,
    last_evidence_at   timestamptz,
    PRIMARY KEY (brief_id, trial_id)
);

-- Briefs whose inputs changed since the watcher last looked. A trigger marks a brief on every write
-- a review reads; a mark already there costs one index probe and no write.
CREATE TABLE brief_signals_dirty (
    brief_id   uuid PRIMARY KEY,
    marked_at  timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION mark_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_TABLE_NAME = 'briefs' THEN
        INSERT INTO brief_signals_dirty (brief_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    ELSE
        INSERT INTO brief_signals_dirty (brief_id) VALUES (NEW.brief_id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER briefs_signals AFTER INSERT OR UPDATE ON briefs
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER trials_signals AFTER INSERT OR UPDATE ON trials
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER evidence_signals AFTER INSERT ON evidence
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER ledger_lines_signals AFTER INSERT ON ledger_lines
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER ledger_outputs_signals AFTER INSERT OR UPDATE ON ledger_outputs
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER card_revisions_signals AFTER INSERT ON card_revisions
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();
CREATE TRIGGER approvals_signals AFTER INSERT ON approvals
    FOR EACH ROW EXECUTE FUNCTION mark_brief_signals_dirty();

-- A price sheet feeds every brief's money figures: one mark per brief per import statement.
CREATE FUNCTION mark_all_brief_signals_dirty() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO brief_signals_dirty (brief_id) SELECT id FROM briefs ON CONFLICT DO NOTHING;
    RETURN NULL;
END $$;
CREATE TRIGGER prices_signals AFTER INSERT ON prices
    FOR EACH STATEMENT EXECUTE FUNCTION mark_all_brief_signals_dirty();

-- Briefs already there get their first snapshot from the watcher's first round.
INSERT INTO brief_signals_dirty (brief_id) SELECT id FROM briefs;
