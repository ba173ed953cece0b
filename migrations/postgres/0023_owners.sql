-- Owners (decisions §24): a contact, company or deal may name the user of its workspace who owns
-- it. Lists filter on it and a user's deletion clears it, so each table has an index of the
-- owned rows by owner, in id order within a tenant as the lists page.
ALTER TABLE contacts ADD COLUMN owner_id TEXT COLLATE "C";
ALTER TABLE companies ADD COLUMN owner_id TEXT COLLATE "C";
ALTER TABLE deals ADD COLUMN owner_id TEXT COLLATE "C";
CREATE INDEX contacts_owner ON contacts (workspace_id, mode, owner_id, id) WHERE owner_id IS NOT NULL;
CREATE INDEX companies_owner ON companies (workspace_id, mode, owner_id, id) WHERE owner_id IS NOT NULL;
CREATE INDEX deals_owner ON deals (workspace_id, mode, owner_id, id) WHERE owner_id IS NOT NULL;
