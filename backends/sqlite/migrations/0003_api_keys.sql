-- Version 3: API keys that name a user (a hosted server's credentials). Only the secret's
-- SHA-256 is kept; `id` is the key's public part.

CREATE TABLE api_keys (
    id         TEXT NOT NULL PRIMARY KEY,
    user_id    TEXT NOT NULL,
    scope      TEXT NOT NULL CHECK (scope IN ('read', 'write')),
    label      TEXT,
    digest     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT
);
CREATE INDEX api_keys_user ON api_keys (user_id, created_at);
