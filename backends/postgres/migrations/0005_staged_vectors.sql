-- Version 5: vectors of a re-embedding in progress, kept apart until the switch.

CREATE TABLE {s}.staged_embeddings (
    id        uuid   PRIMARY KEY REFERENCES {s}.memories (id) ON DELETE CASCADE,
    signature text   NOT NULL,
    embedding vector NOT NULL
);
