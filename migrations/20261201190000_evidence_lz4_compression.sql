-- Evidence bytes and parsed metrics are compressed with lz4 instead of PostgreSQL's default pglz.
-- A 2 KB item sits just over the TOAST threshold, so every insert tries to compress it: under batch
-- ingest pglz_compress alone took 9 % of the machine's CPU (scripts/profile-ingest.sh), and reads
-- of metrics by the compactor another 2 % in pglz_decompress. lz4 compresses several times faster
-- at a similar ratio on JSON and text. Only new values are written with it; old ones stay readable.
-- A server built without lz4 keeps pglz (the statement fails there with feature_not_supported).
DO $$
BEGIN
    ALTER TABLE evidence ALTER COLUMN raw SET COMPRESSION lz4, ALTER COLUMN metrics SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'this PostgreSQL has no lz4: evidence stays compressed with pglz';
END
$$;
