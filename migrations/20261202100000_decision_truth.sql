-- One truth for the verdict, the money and the reservation (issue 30).

-- The brief's traffic headroom and a managed API's prices per million tokens, input and output.
-- The older api_price_per_million_tokens stays: it means the output price with input free.
ALTER TABLE briefs
    ADD COLUMN headroom_pct double precision,
    ADD COLUMN api_price_input_per_million numeric(20, 6),
    ADD COLUMN api_price_output_per_million numeric(20, 6),
    ADD CONSTRAINT briefs_headroom_pct_check CHECK (headroom_pct IS NULL OR (headroom_pct >= 0 AND headroom_pct <= 1000)),
    ADD CONSTRAINT briefs_api_price_input_check CHECK (api_price_input_per_million IS NULL OR api_price_input_per_million >= 0),
    ADD CONSTRAINT briefs_api_price_output_check CHECK (api_price_output_per_million IS NULL OR api_price_output_per_million >= 0);

-- An approval records exactly the reservation the review computed: the whole object, beside the
-- columns older readers use (reservation_count holds its total GPUs).
ALTER TABLE approvals
    ADD COLUMN reservation jsonb,
    ADD CONSTRAINT approvals_reservation_object_check CHECK (reservation IS NULL OR jsonb_typeof(reservation) = 'object');

-- A price row is current per offer and currency: the newest row per (provider, gpu, gpu_count,
-- billing, region, currency), so a row in euros never hides the same offer's row in dollars.
CREATE INDEX prices_offer_currency_idx
    ON prices (provider, gpu, gpu_count, billing, region, currency, valid_from DESC, id DESC);
DROP INDEX prices_offer_idx;
