-- Price sheets (issue 19): what providers charge, imported by people as CSV. rentcheck ships no
-- prices (they change too fast to be facts). A sheet is kept as imported and never edited; the
-- newest row per (provider, gpu, gpu_count, billing, region) is the current price: the latest
-- `valid_from` not in the future, ties to the later import.

CREATE TABLE price_sheets (
    id          uuid PRIMARY KEY,
    imported_by text NOT NULL,
    imported_at timestamptz NOT NULL DEFAULT now(),
    filename    text,
    row_count   integer NOT NULL,
    CONSTRAINT price_sheets_row_count_check CHECK (row_count > 0)
);

CREATE TABLE prices (
    -- UUIDv7: creation order, so "the later import" is the larger id.
    id                uuid PRIMARY KEY,
    sheet_id          uuid NOT NULL REFERENCES price_sheets (id) ON DELETE RESTRICT,
    line              integer NOT NULL,
    provider          text NOT NULL,
    gpu               text NOT NULL,
    gpu_count         integer NOT NULL,
    billing           text NOT NULL,
    rate_per_gpu_hour numeric(20, 6) NOT NULL,
    currency          text NOT NULL,
    region            text NOT NULL DEFAULT '',
    valid_from        date NOT NULL,
    source            text NOT NULL,
    CONSTRAINT prices_sheet_line_key UNIQUE (sheet_id, line),
    CONSTRAINT prices_gpu_count_check CHECK (gpu_count BETWEEN 1 AND 4096),
    CONSTRAINT prices_billing_check CHECK (billing IN ('on-demand', 'spot', 'reserved', 'serverless')),
    CONSTRAINT prices_rate_check CHECK (rate_per_gpu_hour >= 0),
    CONSTRAINT prices_currency_check CHECK (currency ~ '^[A-Z]{3}$'),
    CONSTRAINT prices_provider_check CHECK (length(trim(provider)) BETWEEN 1 AND 200),
    CONSTRAINT prices_source_check CHECK (length(trim(source)) BETWEEN 1 AND 500)
);

-- The current row of each offer: one index scan per offer, newest first.
CREATE INDEX prices_offer_idx ON prices (provider, gpu, gpu_count, billing, region, valid_from DESC, id DESC);
CREATE INDEX prices_gpu_idx ON prices (gpu);

-- Kept as imported: a correction is a new sheet.
CREATE FUNCTION prices_are_kept() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'price sheets are kept as imported; import a new sheet instead'
        USING ERRCODE = 'restrict_violation';
END;
$$;
CREATE TRIGGER prices_are_kept BEFORE UPDATE OR DELETE ON prices
    FOR EACH ROW EXECUTE FUNCTION prices_are_kept();
CREATE TRIGGER price_sheets_are_kept BEFORE UPDATE OR DELETE ON price_sheets
    FOR EACH ROW EXECUTE FUNCTION prices_are_kept();
