-- Version 1: memories with their postings and per-user statistics, and the enrichment tables.

CREATE TABLE {s}.memories (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         uuid        NOT NULL UNIQUE,
    user_id    text        NOT NULL,
    content    text        NOT NULL,
    kind       text        NOT NULL,
    tags       text[]      NOT NULL,
    created_at timestamptz NOT NULL,
    doc_len    integer     NOT NULL,
    superseded boolean     NOT NULL DEFAULT false,
    embedding  vector      NOT NULL
);
CREATE INDEX memories_user_live ON {s}.memories (user_id, seq) WHERE NOT superseded;

-- One row per user: the change counter and the BM25 statistics over live memories.
-- Every write of a user updates this row first, so its row lock serialises the
-- user's writers and keeps the counts exact.
CREATE TABLE {s}.users (
    user_id    text   PRIMARY KEY,
    generation bigint NOT NULL DEFAULT 0,
    doc_count  bigint NOT NULL DEFAULT 0,
    total_len  bigint NOT NULL DEFAULT 0
);

-- Postings of live memories only: a superseded memory's rows are removed, so df is
-- a count over this table.
CREATE TABLE {s}.postings (
    user_id text    NOT NULL,
    term    text    COLLATE "C" NOT NULL,
    seq     bigint  NOT NULL REFERENCES {s}.memories (seq) ON DELETE CASCADE,
    tf      integer NOT NULL,
    doc_len integer NOT NULL,
    PRIMARY KEY (user_id, term, seq)
);
CREATE INDEX postings_seq ON {s}.postings (seq);

CREATE TABLE {s}.events (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    memory_id  uuid        NOT NULL REFERENCES {s}.memories (id) ON DELETE CASCADE,
    user_id    text        NOT NULL,
    event_time timestamptz NOT NULL,
    actor      text,
    location   text,
    event_type text
);
CREATE INDEX events_user_time ON {s}.events (user_id, event_time);
CREATE INDEX events_memory ON {s}.events (memory_id);

CREATE TABLE {s}.supersessions (
    seq        bigint      GENERATED ALWAYS AS IDENTITY,
    old_id     uuid        NOT NULL REFERENCES {s}.memories (id) ON DELETE CASCADE,
    new_id     uuid        NOT NULL REFERENCES {s}.memories (id) ON DELETE CASCADE,
    user_id    text        NOT NULL,
    reason     text        NOT NULL,
    created_at timestamptz NOT NULL,
    PRIMARY KEY (old_id, new_id)
);
CREATE INDEX supersessions_new ON {s}.supersessions (new_id);

CREATE TABLE {s}.entities (
    id              uuid        PRIMARY KEY,
    user_id         text        NOT NULL,
    name            text        NOT NULL,
    normalized_name text        NOT NULL,
    entity_type     text,
    aliases         text[]      NOT NULL,
    created_at      timestamptz NOT NULL,
    UNIQUE (user_id, normalized_name)
);
CREATE INDEX entities_aliases ON {s}.entities USING gin (aliases);

CREATE TABLE {s}.entity_edges (
    seq        bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id    text        NOT NULL,
    source     uuid        NOT NULL REFERENCES {s}.entities (id) ON DELETE CASCADE,
    target     uuid        NOT NULL REFERENCES {s}.entities (id) ON DELETE CASCADE,
    label      text        NOT NULL,
    memory_id  uuid        REFERENCES {s}.memories (id) ON DELETE CASCADE,
    created_at timestamptz NOT NULL,
    UNIQUE (source, target, label)
);
CREATE INDEX entity_edges_target ON {s}.entity_edges (target);
CREATE INDEX entity_edges_memory ON {s}.entity_edges (memory_id);

CREATE TABLE {s}.memory_entities (
    memory_id uuid NOT NULL REFERENCES {s}.memories (id) ON DELETE CASCADE,
    entity_id uuid NOT NULL REFERENCES {s}.entities (id) ON DELETE CASCADE,
    user_id   text NOT NULL,
    role      text NOT NULL,
    PRIMARY KEY (memory_id, entity_id, role)
);
CREATE INDEX memory_entities_entity ON {s}.memory_entities (entity_id);

-- The core's dense score, bit for bit: both vectors scaled to unit length in f64 and
-- rounded to f32 (the query arrives already scaled), then a dot product of the f32
-- components accumulated in f64 over eight lanes (component i into lane i mod 8, the
-- tail after the last whole group of eight added after the lanes), rounded to f32.
-- pgvector's `<=>` accumulates in f32, so its order can differ from the core's on
-- near-ties; the search uses it only to pick candidates and ranks them with this.
-- The CASEs keep Postgres's float4 cast from raising underflow where Rust's `as f32`
-- rounds to zero.
CREATE FUNCTION {s}.cortex_unit_dot(e real[], q real[]) RETURNS real
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
AS $fn$
    WITH x AS (
        SELECT t.i, t.a::float8 AS a, t.b::float8 AS b
        FROM unnest(e, q) WITH ORDINALITY AS t(a, b, i)
    ),
    n AS (
        SELECT sqrt(sum(x.a * x.a ORDER BY x.i)) AS norm, (count(*) / 8) * 8 AS whole
        FROM x
    ),
    u AS (SELECT x.i, x.a / n.norm AS a, x.b, n.whole FROM x, n),
    p AS (
        SELECT u.i, u.whole,
               (CASE WHEN abs(u.a) <= power(2::float8, -150::float8) THEN 0::real
                     ELSE u.a::real END)::float8 * u.b AS v
        FROM u
    ),
    parts AS (
        SELECT (p.i - 1) % 8 AS k, sum(p.v ORDER BY p.i) AS s FROM p
        WHERE p.i <= p.whole GROUP BY 1
        UNION ALL
        SELECT 8 + p.i - p.whole AS k, p.v AS s FROM p WHERE p.i > p.whole
    ),
    total AS (SELECT sum(parts.s ORDER BY parts.k) AS t FROM parts)
    SELECT CASE WHEN abs(total.t) <= power(2::float8, -150::float8) THEN 0::real
                ELSE total.t::real END
    FROM total
$fn$;
