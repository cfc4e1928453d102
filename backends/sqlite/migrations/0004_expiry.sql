-- Version 4: a memory may expire. From `expires_at` on (fixed-width UTC text, like every
-- time here) it is never recalled and listed only when asked; `cortex prune` deletes it.
ALTER TABLE memories ADD COLUMN expires_at TEXT;
