-- The kept review summaries say which rules made them. At start-up the watcher used to queue every
-- brief, so each deploy remade every review; now it queues only the briefs whose summary was made
-- by older rules than the running server's (`review::summaries::RULES_VERSION`), or that have none.
-- Summaries kept before this column existed count as made by rules 0: the first start of a server
-- with this migration remakes them all once, as before.
ALTER TABLE brief_signals ADD COLUMN rules_version integer NOT NULL DEFAULT 0;
