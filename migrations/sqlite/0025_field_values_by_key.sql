-- A contact's update or delete removes its old custom-field values from contact_field_values by
-- their whole key. As 0010 wrote it, `(field_key, value) IN (<compound SELECT>)` was not used as
-- a key by the planner: the DELETE walked every value of the workspace and mode (a full scan of
-- three million rows per write at a million contacts with three fields). The same compound,
-- wrapped in one more SELECT, is: one primary-key lookup per old value.
DROP TRIGGER contact_field_values_au;
DROP TRIGGER contact_field_values_ad;

CREATE TRIGGER contact_field_values_au AFTER UPDATE OF custom_fields ON contacts
WHEN old.custom_fields IS NOT new.custom_fields BEGIN
    DELETE FROM contact_field_values
     WHERE workspace_id = old.workspace_id AND mode = old.mode AND contact_id = old.id
       AND (field_key, value) IN (SELECT k, v FROM (
           SELECT f.key AS k, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END AS v
             FROM json_each(old.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
           UNION ALL
           SELECT f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END
             FROM json_each(old.custom_fields) f, json_each(f.value) e
            WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null')));
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
       AND (field_key, value) IN (SELECT k, v FROM (
           SELECT f.key AS k, CASE WHEN f.type = 'text' THEN substr(f.value, 1, 200) ELSE f.value END AS v
             FROM json_each(old.custom_fields) f WHERE f.type NOT IN ('array', 'object', 'null')
           UNION ALL
           SELECT f.key, CASE WHEN e.type = 'text' THEN substr(e.value, 1, 200) ELSE e.value END
             FROM json_each(old.custom_fields) f, json_each(f.value) e
            WHERE f.type = 'array' AND e.type NOT IN ('array', 'object', 'null')));
END;
