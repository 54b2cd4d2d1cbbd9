-- The audit log is append-only: UPDATE and DELETE were refused row by row, but TRUNCATE fires no
-- row trigger and emptied it in one statement. A statement trigger refuses it too.
CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_is_append_only();
