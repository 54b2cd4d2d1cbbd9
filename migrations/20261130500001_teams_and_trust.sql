-- Teams and trust (issue 24): brief ownership and teams, account lifecycle, a race-free sign-in
-- lockout, and idempotency keys that expire and belong to one caller.

-- A disabled person cannot sign in; their sessions are deleted and their tokens refused.
ALTER TABLE users ADD COLUMN disabled_at timestamptz;

-- Teams, managed by admins. A brief shared with a team may be edited by its members.
CREATE TABLE teams (
    id         uuid PRIMARY KEY,
    name       text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT teams_name_key UNIQUE (name),
    CONSTRAINT teams_name_check CHECK (length(name) BETWEEN 1 AND 100 AND name = btrim(name))
);

CREATE TABLE team_members (
    team_id  uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    user_id  uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    added_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (team_id, user_id)
);
CREATE INDEX team_members_user_idx ON team_members (user_id);

-- Who owns a brief: the person who created it (or whom an admin assigned). Briefs created before
-- this migration have no row: they stay editable by every engineer until an admin assigns an
-- owner or shares them with a team (docs/security.md).
CREATE TABLE brief_owners (
    brief_id    uuid PRIMARY KEY REFERENCES briefs (id) ON DELETE CASCADE,
    user_id     uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    assigned_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX brief_owners_user_idx ON brief_owners (user_id);

CREATE TABLE brief_teams (
    brief_id  uuid NOT NULL REFERENCES briefs (id) ON DELETE CASCADE,
    team_id   uuid NOT NULL REFERENCES teams (id) ON DELETE CASCADE,
    shared_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (brief_id, team_id)
);
CREATE INDEX brief_teams_team_idx ON brief_teams (team_id);

-- Sign-in attempts, for the lockout. A row is written (as 'pending') before the password is
-- checked, under a per-email advisory lock, so parallel guesses cannot all pass the count.
-- Not the audit log: a pending row is later marked 'failed' or 'ok', and old rows are removed.
CREATE TABLE login_attempts (
    id      uuid PRIMARY KEY,
    email   text NOT NULL,
    client  text NOT NULL,
    at      timestamptz NOT NULL DEFAULT now(),
    outcome text NOT NULL DEFAULT 'pending',
    CONSTRAINT login_attempts_outcome_check CHECK (outcome IN ('pending', 'failed', 'ok'))
);
CREATE INDEX login_attempts_email_idx ON login_attempts (email, client, at DESC);
CREATE INDEX login_attempts_client_idx ON login_attempts (client, at DESC);
CREATE INDEX login_attempts_at_idx ON login_attempts (at);

-- Evidence Idempotency-Keys belong to one caller (a token's jti or a person), so two agents of a
-- brief cannot read each other's answers by guessing keys; rows older than a day are ignored.
ALTER TABLE idempotency_keys ADD COLUMN caller text NOT NULL DEFAULT '';
ALTER TABLE idempotency_keys DROP CONSTRAINT idempotency_keys_pkey;
ALTER TABLE idempotency_keys ADD CONSTRAINT idempotency_keys_pkey PRIMARY KEY (brief_id, caller, key);
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
-- The demo loader's keys are rentcheck's own ('system:' keys never expire): keep `rentcheck demo`
-- idempotent across the upgrade.
UPDATE idempotency_keys SET caller = 'system:demo' WHERE key LIKE 'demo-%';

-- The same for ledger posts: a retried POST …/ledger with the same key and body answers as the
-- first did instead of adding its lines twice.
CREATE TABLE ledger_idempotency_keys (
    brief_id        uuid NOT NULL REFERENCES briefs (id) ON DELETE CASCADE,
    caller          text NOT NULL,
    key             text NOT NULL,
    request_sha256  text NOT NULL,
    response_status smallint NOT NULL,
    response_body   jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (brief_id, caller, key),
    CONSTRAINT ledger_idempotency_keys_key_check CHECK (length(key) BETWEEN 1 AND 255)
);
CREATE INDEX ledger_idempotency_keys_created_idx ON ledger_idempotency_keys (created_at);
