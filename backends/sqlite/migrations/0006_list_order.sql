-- Version 6: lists are newest first by the date a memory shows, `created_at` (fixed-width
-- UTC text, so text order is time order), ties going to the later stored (`seq`). This
-- index walks that order for one user, so a page reads its own rows, not every row.
CREATE INDEX memories_user_created ON memories (user_id, created_at, seq);
