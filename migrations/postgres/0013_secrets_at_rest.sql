-- Secrets at rest (decisions §22, §24): webhook secrets (`webhooks.secret`) and email provider
-- keys (`connections.api_key`) are stored sealed (AEAD, `crm-secrets`), bound to their row. SQL
-- cannot encrypt, so the rows written before this migration are sealed by the server right after
-- the migrations, at its first start with keys (`crm_app::secrets::prepare_secrets`), which in
-- the same transaction stores the check value below. A check value present means every stored
-- secret is sealed; `serve` refuses to start when the configured keys cannot open it.
CREATE TABLE secret_check (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value TEXT NOT NULL
);
