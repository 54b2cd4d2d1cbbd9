-- Search by name or model (`?q=` on the dashboard and GET /api/v1/briefs) is a case-insensitive
-- substring match (ILIKE '%words%'), which a b-tree cannot serve: a rare word walked every brief
-- (33 ms over 10,000 briefs). Trigram indexes answer it from the index (0.3 ms); a common word
-- still walks the newest briefs first, which the planner keeps choosing where it is cheaper.
-- pg_trgm ships with PostgreSQL and is a trusted extension (the database owner may create it).
-- Where it cannot be created, search keeps working without these indexes.
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX briefs_name_trgm_idx ON briefs USING gin (name gin_trgm_ops);
    CREATE INDEX briefs_model_name_trgm_idx ON briefs USING gin (model_name gin_trgm_ops);
    CREATE INDEX briefs_catalog_model_trgm_idx ON briefs USING gin (catalog_model gin_trgm_ops);
EXCEPTION WHEN undefined_file OR insufficient_privilege OR feature_not_supported THEN
    RAISE NOTICE 'pg_trgm is not available (%): searching briefs reads them all', SQLERRM;
END
$$;
