-- Every instance type an imported SkyPilot catalogue priced, with its GPUs per instance. Only the
-- cheapest instance type of an offer (GPU, count, region, billing) becomes a price row, but a bill
-- names the instance it ran on: AWS g5.xlarge to g5.16xlarge all have one A10G, and a bill for a
-- g5.4xlarge must find its GPU too. Kept like the sheets: never changed, never deleted.
CREATE TABLE price_catalogue_instances (
    sheet_id      uuid NOT NULL REFERENCES price_sheets (id),
    instance_type text NOT NULL,
    gpu_count     integer NOT NULL,
    CONSTRAINT price_catalogue_instances_pkey PRIMARY KEY (sheet_id, instance_type),
    CONSTRAINT price_catalogue_instances_gpu_count_check CHECK (gpu_count > 0),
    CONSTRAINT price_catalogue_instances_instance_type_check CHECK (length(instance_type) BETWEEN 1 AND 200)
);

CREATE TRIGGER price_catalogue_instances_are_kept BEFORE UPDATE OR DELETE ON price_catalogue_instances
    FOR EACH ROW EXECUTE FUNCTION prices_are_kept();

-- The catalogues imported before: their price rows name their instance types.
INSERT INTO price_catalogue_instances (sheet_id, instance_type, gpu_count)
SELECT DISTINCT ON (sheet_id, substr(source, 10)) sheet_id, substr(source, 10), gpu_count
FROM prices
WHERE source LIKE 'skypilot:%' AND length(source) BETWEEN 10 AND 209 AND gpu_count > 0
ORDER BY sheet_id, substr(source, 10), gpu_count;
