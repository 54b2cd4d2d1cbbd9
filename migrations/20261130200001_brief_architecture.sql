-- Issue 15: a brief keeps the model's config.json and the architecture fields that change the
-- memory formula (MLA, sliding windows, chunked attention, experts), plus two trial inputs.
-- The eleven architecture fields live in one jsonb object like `targets`: they are read and
-- written together, only the sizing engine interprets them, and one column keeps the brief's
-- INSERT/UPDATE small. The trial inputs are columns because money is exact numeric.
ALTER TABLE briefs
    ADD COLUMN model_config jsonb,
    ADD COLUMN architecture jsonb NOT NULL DEFAULT '{}'::jsonb,
    ADD COLUMN expected_peak_rps double precision,
    ADD COLUMN api_price_per_million_tokens numeric(20, 6),
    ADD CONSTRAINT briefs_model_config_object_check CHECK (model_config IS NULL OR jsonb_typeof(model_config) = 'object'),
    ADD CONSTRAINT briefs_architecture_object_check CHECK (jsonb_typeof(architecture) = 'object'),
    ADD CONSTRAINT briefs_expected_peak_rps_check CHECK (expected_peak_rps IS NULL OR expected_peak_rps > 0),
    ADD CONSTRAINT briefs_api_price_check CHECK (api_price_per_million_tokens IS NULL OR api_price_per_million_tokens >= 0);
