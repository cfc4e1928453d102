-- Version 2: per-term BM25 statistics, so a search reads each query term's document frequency
-- as one row instead of counting its postings. Triggers on the postings keep them, so
-- every path that adds or removes postings (memorize, supersede, the cascade of a
-- delete, a restore) keeps them exact. max_tf and min_len only ever move outwards:
-- after removals they are still bounds, which is all the search asks of them. The
-- postings key carries tf and doc_len, so scoring reads the index alone.

CREATE TABLE {s}.terms (
    user_id text    NOT NULL,
    term    text    COLLATE "C" NOT NULL,
    df      bigint  NOT NULL,
    max_tf  integer NOT NULL,
    min_len integer NOT NULL,
    PRIMARY KEY (user_id, term)
);
INSERT INTO {s}.terms (user_id, term, df, max_tf, min_len)
SELECT user_id, term, count(*), max(tf), min(doc_len) FROM {s}.postings
GROUP BY user_id, term;

CREATE FUNCTION {s}.cortex_postings_added() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO {s}.terms AS t (user_id, term, df, max_tf, min_len)
    SELECT a.user_id, a.term, count(*), max(a.tf), min(a.doc_len) FROM added a
    GROUP BY a.user_id, a.term
    ORDER BY a.user_id, a.term
    ON CONFLICT (user_id, term) DO UPDATE
    SET df = t.df + excluded.df,
        max_tf = greatest(t.max_tf, excluded.max_tf),
        min_len = least(t.min_len, excluded.min_len);
    RETURN NULL;
END
$fn$;

CREATE FUNCTION {s}.cortex_postings_removed() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    UPDATE {s}.terms t SET df = t.df - r.n
    FROM (SELECT user_id, term, count(*) AS n FROM removed GROUP BY user_id, term) r
    WHERE t.user_id = r.user_id AND t.term = r.term;
    DELETE FROM {s}.terms t USING (SELECT DISTINCT user_id, term FROM removed) r
    WHERE t.user_id = r.user_id AND t.term = r.term AND t.df <= 0;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER postings_added AFTER INSERT ON {s}.postings
REFERENCING NEW TABLE AS added
FOR EACH STATEMENT EXECUTE FUNCTION {s}.cortex_postings_added();
CREATE TRIGGER postings_removed AFTER DELETE ON {s}.postings
REFERENCING OLD TABLE AS removed
FOR EACH STATEMENT EXECUTE FUNCTION {s}.cortex_postings_removed();

ALTER TABLE {s}.postings DROP CONSTRAINT postings_pkey,
    ADD PRIMARY KEY (user_id, term, seq) INCLUDE (tf, doc_len);
