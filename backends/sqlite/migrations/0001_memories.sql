-- Version 1: memories, meta, per-user change counters and the enrichment tables.

CREATE TABLE memories (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT    NOT NULL UNIQUE,
    user_id    TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    tags       TEXT    NOT NULL,
    created_at TEXT    NOT NULL,
    embedding  BLOB    NOT NULL
);
CREATE INDEX memories_user_seq ON memories (user_id, seq);

CREATE TABLE user_generations (
    user_id    TEXT    PRIMARY KEY,
    generation INTEGER NOT NULL
);

CREATE TABLE events (
    memory_id  TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    event_time TEXT NOT NULL,
    actor      TEXT,
    location   TEXT,
    event_type TEXT
);
CREATE INDEX events_user_time ON events (user_id, event_time);
CREATE INDEX events_memory ON events (memory_id);

CREATE TABLE supersessions (
    old_id     TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    new_id     TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    user_id    TEXT NOT NULL,
    reason     TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (old_id, new_id)
);
CREATE INDEX supersessions_new ON supersessions (new_id);

CREATE TABLE entities (
    id              TEXT PRIMARY KEY,
    user_id         TEXT NOT NULL,
    name            TEXT NOT NULL,
    normalized_name TEXT NOT NULL,
    entity_type     TEXT,
    aliases         TEXT NOT NULL,
    created_at      TEXT NOT NULL,
    UNIQUE (user_id, normalized_name)
);

CREATE TABLE entity_edges (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    user_id    TEXT NOT NULL,
    source     TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    target     TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    label      TEXT NOT NULL,
    memory_id  TEXT REFERENCES memories (id) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    UNIQUE (source, target, label)
);
CREATE INDEX entity_edges_target ON entity_edges (target);
CREATE INDEX entity_edges_memory ON entity_edges (memory_id);

CREATE TABLE memory_entities (
    memory_id TEXT NOT NULL REFERENCES memories (id) ON DELETE CASCADE,
    entity_id TEXT NOT NULL REFERENCES entities (id) ON DELETE CASCADE,
    user_id   TEXT NOT NULL,
    role      TEXT NOT NULL,
    PRIMARY KEY (memory_id, entity_id, role)
);
CREATE INDEX memory_entities_entity ON memory_entities (entity_id);
