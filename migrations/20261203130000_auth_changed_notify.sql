-- A server keeps a token's row for up to a second (server/auth/token_cache.rs) and forgets every row
-- it keeps when told on `rentcheck_auth_changed`: any change that can refuse a token notifies it,
-- once per statement. Changes of `last_used_at` alone (the once-a-minute note of use) do not.
CREATE FUNCTION notify_auth_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rentcheck_auth_changed', '');
    RETURN NULL;
END
$$;

-- Deletes include those cascaded from a deleted brief, trial or (SET NULL) person.
CREATE TRIGGER api_tokens_auth_changed
    AFTER UPDATE OF role, brief_id, trial_id, created_by, expires_at, revoked_at OR DELETE ON api_tokens
    FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();

CREATE TRIGGER users_auth_changed
    AFTER UPDATE OF role, disabled_at OR DELETE ON users
    FOR EACH STATEMENT EXECUTE FUNCTION notify_auth_changed();
