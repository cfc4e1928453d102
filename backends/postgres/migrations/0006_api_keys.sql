-- Version 6: API keys that name a user (a hosted server's credentials). Only the secret's
-- SHA-256 is kept; `id` is the key's public part.

CREATE TABLE {s}.api_keys (
    id         text        PRIMARY KEY,
    user_id    text        NOT NULL,
    scope      text        NOT NULL CHECK (scope IN ('read', 'write')),
    label      text,
    digest     text        NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz,
    seq        bigserial   NOT NULL
);
CREATE INDEX api_keys_user ON {s}.api_keys (user_id, created_at, seq);
