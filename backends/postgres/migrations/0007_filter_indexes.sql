-- Version 7: indexes for filtered recall and list. Without them a selective filter (a rare
-- tag, a narrow date window, one kind) reads the user's whole heap, vectors inline, to
-- find the few rows it names: the HNSW path's count of passing memories and the exact
-- search it falls back to both did. Live rows only, as every read is.
CREATE INDEX memories_tags ON {s}.memories USING gin (tags) WHERE NOT superseded;
CREATE INDEX memories_user_created ON {s}.memories (user_id, created_at) WHERE NOT superseded;
CREATE INDEX memories_user_kind ON {s}.memories (user_id, kind) WHERE NOT superseded;
