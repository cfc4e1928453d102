-- Version 8: a memory may expire. From `expires_at` on it is never recalled and listed
-- only when asked; `cortex prune` deletes it. Until then it is live as ever (its postings
-- and its share of BM25's statistics stay). The index serves the search's probe: has any
-- of the user's live memories expired by now? With none, the search needs no condition
-- for expiry and keeps its unfiltered paths.
ALTER TABLE {s}.memories ADD COLUMN expires_at timestamptz;
CREATE INDEX memories_user_expiry ON {s}.memories (user_id, expires_at)
    WHERE expires_at IS NOT NULL AND NOT superseded;
