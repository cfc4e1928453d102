-- Version 2: vectors of a re-embedding in progress, kept apart until the switch.

CREATE TABLE staged_embeddings (
    id        TEXT NOT NULL PRIMARY KEY REFERENCES memories (id) ON DELETE CASCADE,
    signature TEXT NOT NULL,
    embedding BLOB NOT NULL
);
