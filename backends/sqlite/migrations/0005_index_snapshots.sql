-- Version 5: what an index snapshot beside the file is checked against.
-- `stamp` changes with every change of a user's generation, at random, so a file restored
-- from a copy and written to again cannot reach a generation a snapshot names with other
-- rows behind it. `index_epoch` names this file's vectors: it is new whenever vectors
-- change in place (a re-embed), so no snapshot of the old vectors is read.
ALTER TABLE user_generations ADD COLUMN stamp INTEGER NOT NULL DEFAULT 0;
INSERT INTO meta (key, value) VALUES ('index_epoch', lower(hex(randomblob(16))));
-- A snapshot behind the file is checked against the user's live (seq, id) pairs: with
-- `id` in the index they are read from it alone, not from every row's pages (where the
-- embedding makes a row kilobytes). It replaces the (user_id, seq) index it extends.
DROP INDEX memories_user_seq;
CREATE INDEX memories_user_seq_id ON memories (user_id, seq, id);
