-- The chunks of import uploads and export files are written once and read once or twice, and
-- Postgres compressed each with its default TOAST method, pglz: 40 % of the database's CPU in an
-- export of 300,000 contacts (perf, docs/performance-history.md). lz4 compresses CSV nearly as
-- well for a small part of the cost. It applies to chunks written from now on. A server built
-- without lz4 (or older than Postgres 14) stores them uncompressed instead.
DO $$
BEGIN
    ALTER TABLE export_chunks ALTER COLUMN data SET COMPRESSION lz4;
    ALTER TABLE import_chunks ALTER COLUMN data SET COMPRESSION lz4;
EXCEPTION WHEN OTHERS THEN
    ALTER TABLE export_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
    ALTER TABLE import_chunks ALTER COLUMN data SET STORAGE EXTERNAL;
END
$$;
