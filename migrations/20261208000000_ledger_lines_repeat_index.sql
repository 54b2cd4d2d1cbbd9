-- A ledger file sent again (a month-to-date export imported each week, a retry without an
-- Idempotency-Key, the brief's own ledger.csv) added every line a second time: accelerator time
-- merges, but host, storage, network, support and licence amounts are sums, so a re-import doubled
-- them (cost per job +26 % in the worked case, enough to cross a ceiling). A line with an interval
-- that the trial already holds field for field is now not added again; this index finds it. Lines
-- without an interval cannot be told from a second charge of the same kind and are always added.
CREATE INDEX ledger_lines_repeat_idx ON ledger_lines (brief_id, trial_id, category, resource, starts_at)
    WHERE starts_at IS NOT NULL;
