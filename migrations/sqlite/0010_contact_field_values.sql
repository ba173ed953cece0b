-- Custom-field filters on the contact list (`GET /contacts?custom_fields.<key>=<value>`).
-- One row per contact and scalar custom-field value (a multiselect gives one row per element),
-- keyed so that the contacts holding one value are read newest first straight off the key and the
-- list stops at its limit, however common or rare the value. JSON types are kept (no column
-- affinity), so 5 and 5.0 compare equal and "5" does not. Text is keyed by its first 200
-- characters; the list re-checks longer filter values against the record.
-- Triggers keep it in step inside each write's own transaction, bulk loads included.
CREATE TABLE contact_field_values (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    field_key    TEXT NOT NULL,
    value        NOT NULL,
    contact_id   TEXT NOT NULL,
    PRIMARY KEY (workspace_id, mode, field_key, value, contact_id)
) WITHOUT ROWID;

CREATE TRIGGER contact_field_values_ai AFTER INSERT ON contacts BEGIN
    INSERT OR IGNORE INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
    SELECT new.workspace_id, new.mode, f.key, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END, new.id
      FROM json_each(new.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
    UNION ALL
    SELECT new.workspace_id, new.mode, f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END, new.id
      FROM json_each(new.custom_fields) f, json_each(f.value) e
     WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null');
END;

-- Every UPDATE statement of the store sets custom_fields; the WHEN skips the work when it did not
-- change (a stage move, a soft delete).
CREATE TRIGGER contact_field_values_au AFTER UPDATE OF custom_fields ON contacts
WHEN old.custom_fields IS NOT new.custom_fields BEGIN
    DELETE FROM contact_field_values
     WHERE workspace_id = old.workspace_id AND mode = old.mode AND contact_id = old.id
       AND (field_key, value) IN (
           SELECT f.key, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END
             FROM json_each(old.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
           UNION ALL
           SELECT f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END
             FROM json_each(old.custom_fields) f, json_each(f.value) e
            WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null'));
    INSERT OR IGNORE INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
    SELECT new.workspace_id, new.mode, f.key, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END, new.id
      FROM json_each(new.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
    UNION ALL
    SELECT new.workspace_id, new.mode, f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END, new.id
      FROM json_each(new.custom_fields) f, json_each(f.value) e
     WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null');
END;

CREATE TRIGGER contact_field_values_ad AFTER DELETE ON contacts BEGIN
    DELETE FROM contact_field_values
     WHERE workspace_id = old.workspace_id AND mode = old.mode AND contact_id = old.id
       AND (field_key, value) IN (
           SELECT f.key, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END
             FROM json_each(old.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
           UNION ALL
           SELECT f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END
             FROM json_each(old.custom_fields) f, json_each(f.value) e
            WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null'));
END;

INSERT OR IGNORE INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
SELECT c.workspace_id, c.mode, f.key, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END, c.id
  FROM contacts c, json_each(c.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
UNION ALL
SELECT c.workspace_id, c.mode, f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END, c.id
  FROM contacts c, json_each(c.custom_fields) f, json_each(f.value) e
 WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null');
