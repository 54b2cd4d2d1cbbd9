-- Sign-in throttling per account across addresses (auth/lockout.rs): an account's failed sign-ins
-- from browsers that never signed in to it, counted until a success, with a lock only an admin
-- lifts. Keyed by the email as typed (lower-cased), known or not, so answers never tell whether an
-- account exists.
CREATE TABLE sign_in_accounts (
    email               text PRIMARY KEY,
    failures            integer NOT NULL DEFAULT 0,
    last_failure_at     timestamptz,
    last_failure_client text,
    locked_at           timestamptz,
    CONSTRAINT sign_in_accounts_failures_check CHECK (failures >= 0)
);
-- Failures are forgotten after a while without one (auth::lockout::FORGET_DAYS).
CREATE INDEX sign_in_accounts_last_failure_idx ON sign_in_accounts (last_failure_at) WHERE locked_at IS NULL;

-- Browsers that signed in to an account ("device cookies"): the cookie is random, only its
-- SHA-256 is kept. Such a browser is not held by the account's lock or an address's limit.
CREATE TABLE sign_in_devices (
    id_hash      bytea PRIMARY KEY,
    email        text NOT NULL,
    failures     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sign_in_devices_last_used_idx ON sign_in_devices (last_used_at);
