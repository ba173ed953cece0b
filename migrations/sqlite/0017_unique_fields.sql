-- Unique custom fields (decisions §24, "Upsert, corrected"): a text, email, url or number field
-- registered `"unique": true` holds each value at most once per object, workspace and mode (merged
-- tombstones aside), checked by the writes under a lock of the value; upserts may match on it.
ALTER TABLE custom_fields ADD COLUMN is_unique INTEGER NOT NULL DEFAULT 0;
