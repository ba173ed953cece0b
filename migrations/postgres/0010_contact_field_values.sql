-- Custom-field filters on the contact list (`GET /contacts?custom_fields.<key>=<value>`).
-- One row per contact and scalar custom-field value (a multiselect gives one row per element),
-- keyed so that the contacts holding one value are read newest first straight off the key and the
-- list stops at its limit, however common or rare the value: a GIN index on custom_fields would
-- find the rows but not in id order, so a common value would mean sorting a fifth of the tenant.
-- Values are JSONB (5 = 5.0, "5" <> 5). Text is keyed by its first 200 characters (B-tree entries
-- are bounded); the list re-checks longer filter values against the record.
-- Triggers keep it in step inside each write's own transaction, bulk loads (COPY) included.
CREATE TABLE contact_field_values (
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    field_key    TEXT NOT NULL,
    value        JSONB NOT NULL,
    contact_id   TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (workspace_id, mode, field_key, value, contact_id)
);

-- The (field_key, value) entries of one custom_fields document.
CREATE FUNCTION contact_field_entries(doc JSONB) RETURNS TABLE (field_key TEXT, value JSONB)
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT DISTINCT f.key,
           CASE WHEN jsonb_typeof(e.value) = 'string' THEN to_jsonb(left(e.value #>> '{}', 200)) ELSE e.value END
      FROM jsonb_each(doc) f
     CROSS JOIN LATERAL jsonb_array_elements(CASE WHEN jsonb_typeof(f.value) = 'array' THEN f.value ELSE jsonb_build_array(f.value) END) e
     WHERE jsonb_typeof(e.value) IN ('string', 'number', 'boolean')
$$;

-- Statement level: a COPY or multi-row INSERT fills the table in one statement.
CREATE FUNCTION contact_field_values_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
    SELECT n.workspace_id, n.mode, e.field_key, e.value, n.id
      FROM new_contacts n CROSS JOIN LATERAL contact_field_entries(n.custom_fields) e;
    RETURN NULL;
END $$;

CREATE TRIGGER contact_field_values_ai AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS new_contacts FOR EACH STATEMENT EXECUTE FUNCTION contact_field_values_inserted();

CREATE FUNCTION contact_field_values_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM contact_field_values v USING contact_field_entries(OLD.custom_fields) e
     WHERE v.workspace_id = OLD.workspace_id AND v.mode = OLD.mode AND v.field_key = e.field_key
       AND v.value = e.value AND v.contact_id = OLD.id;
    IF TG_OP = 'UPDATE' THEN
        INSERT INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
        SELECT NEW.workspace_id, NEW.mode, e.field_key, e.value, NEW.id FROM contact_field_entries(NEW.custom_fields) e;
    END IF;
    RETURN NULL;
END $$;

-- Every UPDATE statement of the store sets custom_fields; the WHEN skips the work (and the
-- function call) when it did not change: a stage move, a soft delete.
CREATE TRIGGER contact_field_values_au AFTER UPDATE OF custom_fields ON contacts
    FOR EACH ROW WHEN (OLD.custom_fields IS DISTINCT FROM NEW.custom_fields) EXECUTE FUNCTION contact_field_values_changed();
CREATE TRIGGER contact_field_values_ad AFTER DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION contact_field_values_changed();

INSERT INTO contact_field_values (workspace_id, mode, field_key, value, contact_id)
SELECT c.workspace_id, c.mode, e.field_key, e.value, c.id FROM contacts c CROSS JOIN LATERAL contact_field_entries(c.custom_fields) e;
