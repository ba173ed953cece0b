-- Merges (decisions §18, §24): a merged contact or company becomes a tombstone pointing at its
-- survivor. A tombstone keeps showing its email, which no longer counts for uniqueness, so the
-- unique index of emails leaves tombstones out. Enrollments are found by contact when a merge
-- moves them to the survivor.
ALTER TABLE contacts ADD COLUMN merged_into TEXT COLLATE "C";
ALTER TABLE companies ADD COLUMN merged_into TEXT COLLATE "C";
DROP INDEX contacts_email;
CREATE UNIQUE INDEX contacts_email ON contacts (workspace_id, mode, email) WHERE email IS NOT NULL AND merged_into IS NULL;
CREATE INDEX sequence_enrollments_by_contact ON sequence_enrollments (workspace_id, mode, contact_id);
