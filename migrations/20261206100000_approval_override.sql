-- An approval of an action other than the computed one (decision.md, "Override"): what the rules
-- computed, what the manager approved, and why, as { computed, approved, reason }. NULL when the
-- approval is of the computed decision (and on every verdict recorded before overrides existed).
ALTER TABLE approvals ADD COLUMN decision_override jsonb;
-- Approving a trial whose evidence names another GPU model than the trial's asks the manager to
-- acknowledge it: the model the evidence named, as acknowledged; NULL when there was none.
ALTER TABLE approvals ADD COLUMN mismatch_acknowledged text;
