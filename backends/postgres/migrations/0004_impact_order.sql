-- Version 4: the postings in impact order. Within one term and one tf a posting's BM25 score
-- falls as its memory grows longer, so (tf, doc_len, seq) walks each tf's postings
-- best first: a one-term search reads the few that can reach the pool instead of all
-- of them (a common term's list is a large share of the user's memories).

CREATE INDEX postings_impact ON {s}.postings (user_id, term, tf, doc_len, seq);
