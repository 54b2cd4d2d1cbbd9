-- People, their sessions, bearer tokens and the append-only audit log.

CREATE TABLE users (
    id            uuid PRIMARY KEY,
    email         text NOT NULL,
    role          text NOT NULL,
    password_hash text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT users_email_key UNIQUE (email),
    CONSTRAINT users_email_check CHECK (email = lower(email) AND position('@' in email) > 1),
    CONSTRAINT users_role_check CHECK (role IN ('engineer', 'manager', 'admin'))
);

-- A session row per signed-in browser. The cookie holds a random id; only its SHA-256 is stored,
-- so a copy of the table cannot be replayed as cookies.
CREATE TABLE sessions (
    id_hash      bytea PRIMARY KEY,
    user_id      uuid NOT NULL REFERENCES users (id) ON DELETE CASCADE,
    csrf_token   text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);
CREATE INDEX sessions_user_idx ON sessions (user_id);

-- One row per bearer token (JWT) by its jti: checked on every request, so a revoke is immediate.
CREATE TABLE api_tokens (
    jti          uuid PRIMARY KEY,
    name         text NOT NULL,
    subject      text NOT NULL,
    role         text NOT NULL,
    brief_id     uuid REFERENCES briefs (id) ON DELETE CASCADE,
    created_by   uuid REFERENCES users (id) ON DELETE SET NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    last_used_at timestamptz,
    revoked_at   timestamptz,
    CONSTRAINT api_tokens_role_check CHECK (role IN ('agent', 'engineer', 'manager', 'admin')),
    CONSTRAINT api_tokens_agent_scope_check CHECK (role <> 'agent' OR brief_id IS NOT NULL)
);
CREATE INDEX api_tokens_brief_idx ON api_tokens (brief_id, created_at DESC);

CREATE TABLE audit_log (
    id      uuid PRIMARY KEY,
    at      timestamptz NOT NULL DEFAULT now(),
    actor   text NOT NULL,
    action  text NOT NULL,
    target  text NOT NULL,
    details jsonb NOT NULL DEFAULT '{}'::jsonb
);
CREATE INDEX audit_log_target_idx ON audit_log (target, at DESC);
CREATE INDEX audit_log_action_target_idx ON audit_log (action, target, at DESC);

-- Append-only: the database itself refuses to change or remove history.
CREATE FUNCTION audit_log_is_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only';
END;
$$;
CREATE TRIGGER audit_log_no_update_or_delete
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_is_append_only();
