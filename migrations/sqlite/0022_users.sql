-- Users, their one-time sign-in links, console sessions and failed sign-ins (decisions §21,
-- §24). A user belongs to a workspace, not a mode; an email is unique across the installation,
-- so that sign-in needs no workspace. Tokens and session ids are stored as their SHA-256 only.
CREATE TABLE users (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    email         TEXT NOT NULL UNIQUE,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    password_hash TEXT,
    created_at    INTEGER NOT NULL,
    last_login_at INTEGER
) WITHOUT ROWID;
CREATE INDEX users_workspace ON users (workspace_id, id);

CREATE TABLE sign_in_links (
    token_hash   TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sign_in_links_user ON sign_in_links (user_id);

CREATE TABLE sessions (
    id_hash      TEXT PRIMARY KEY,
    user_id      TEXT NOT NULL,
    workspace_id TEXT NOT NULL,
    mode         TEXT NOT NULL,
    csrf_token   TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX sessions_user ON sessions (user_id);

CREATE TABLE sign_in_failures (
    email   TEXT NOT NULL,
    address TEXT NOT NULL,
    at      INTEGER NOT NULL
);
CREATE INDEX sign_in_failures_email ON sign_in_failures (email, at);
