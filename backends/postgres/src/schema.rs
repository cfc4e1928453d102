//! The schema: names, the pgvector extension and versioned forward migrations.

use cortex_core::StoreError;
use sea_query::TableRef;
use tokio_postgres::Client;
use tokio_postgres::error::SqlState;

use crate::pg_err;
use crate::sql::get;

/// Each entry migrates from version `i` to `i + 1`. Append only: a shipped step never
/// changes. `{s}` stands for the quoted schema name.
///
/// The embedding column is `vector` without a dimension: the dimension is only known at the
/// first memorize (the signature is recorded lazily, inside that write's transaction), and
/// that write adds a CHECK constraint fixing it (see `meta::record_signature`). An HNSW
/// index, which needs a fixed dimension, is an expression index on `embedding::vector(D)`
/// built once the dimension is known (see `dense`).
const MIGRATIONS: &[&str] = &[
    // 1: memories with their postings and per-user statistics, and the enrichment tables.
    r#"
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
    "#,
    // 2: per-term BM25 statistics, so a search reads each query term's document frequency
    // as one row instead of counting its postings. Triggers on the postings keep them, so
    // every path that adds or removes postings (memorize, supersede, the cascade of a
    // delete, a restore) keeps them exact. max_tf and min_len only ever move outwards:
    // after removals they are still bounds, which is all the search asks of them. The
    // postings key carries tf and doc_len, so scoring reads the index alone.
    r#"
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
    "#,
    // 3: cortex_unit_dot as a loop: the same arithmetic in the same order (sum's
    // first-value start included, so even signed zeros match), 4x faster than the set-based
    // version, whose ordered aggregates sort. It re-scores near-tied dense candidates, which
    // on tightly clustered data was half of an HNSW search's time.
    r#"
    CREATE OR REPLACE FUNCTION {s}.cortex_unit_dot(e real[], q real[]) RETURNS real
    LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
    AS $fn$
    DECLARE
        n int := cardinality(e);
        whole int := (cardinality(e) / 8) * 8;
        tiny float8 := power(2::float8, -150::float8);
        norm float8;
        lanes float8[] := '{NULL,NULL,NULL,NULL,NULL,NULL,NULL,NULL}';
        a float8;
        v float8;
        t float8;
        k int;
    BEGIN
        FOR i IN 1..n LOOP
            a := e[i];
            norm := COALESCE(norm + a * a, a * a);
        END LOOP;
        norm := sqrt(norm);
        FOR i IN 1..n LOOP
            a := e[i]::float8 / norm;
            IF abs(a) <= tiny THEN a := 0; ELSE a := a::real::float8; END IF;
            v := a * q[i]::float8;
            IF i <= whole THEN
                k := (i - 1) % 8 + 1;
                lanes[k] := COALESCE(lanes[k] + v, v);
            ELSE
                IF i = whole + 1 THEN
                    FOR j IN 1..8 LOOP
                        IF lanes[j] IS NOT NULL THEN t := COALESCE(t + lanes[j], lanes[j]); END IF;
                    END LOOP;
                END IF;
                t := COALESCE(t + v, v);
            END IF;
        END LOOP;
        IF n = whole THEN
            FOR j IN 1..8 LOOP
                IF lanes[j] IS NOT NULL THEN t := COALESCE(t + lanes[j], lanes[j]); END IF;
            END LOOP;
        END IF;
        IF abs(t) <= tiny THEN RETURN 0::real; END IF;
        RETURN t::real;
    END
    $fn$;
    "#,
    // 4: the postings in impact order. Within one term and one tf a posting's BM25 score
    // falls as its memory grows longer, so (tf, doc_len, seq) walks each tf's postings
    // best first: a one-term search reads the few that can reach the pool instead of all
    // of them (a common term's list is a large share of the user's memories).
    r#"
    CREATE INDEX postings_impact ON {s}.postings (user_id, term, tf, doc_len, seq);
    "#,
    // 5: vectors of a re-embedding in progress, kept apart until the switch.
    r#"
    CREATE TABLE {s}.staged_embeddings (
        id        uuid   PRIMARY KEY REFERENCES {s}.memories (id) ON DELETE CASCADE,
        signature text   NOT NULL,
        embedding vector NOT NULL
    );
    "#,
];

/// The schema version this build writes.
pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Oldest pgvector with `hnsw.iterative_scan`.
const ITERATIVE_SCAN_VERSION: (u32, u32) = (0, 8);

/// Schema names are plain lowercase identifiers: letters, digits and `_`, not starting
/// with a digit, at most 63 bytes. They are also quoted wherever they are written, but
/// refusing anything else keeps them safe inside connection options too.
pub fn validate_schema_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    match ok {
        true => Ok(()),
        false => Err(StoreError::Config(format!(
            "schema name {name:?} must be 1-63 lowercase letters, digits or '_', not starting \
             with a digit or pg_"
        ))),
    }
}

/// `"name"`, with embedded quotes doubled.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The store's schema: table references for sea-query and quoted names for DDL.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    schema: String,
    quoted: String,
}

impl Names {
    pub(crate) fn new(schema: &str) -> Result<Self, StoreError> {
        validate_schema_name(schema)?;
        Ok(Self {
            schema: schema.to_owned(),
            quoted: quote_ident(schema),
        })
    }

    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    /// A schema-qualified table for sea-query.
    pub(crate) fn table(&self, table: &'static str) -> TableRef {
        (self.schema.clone(), table).into()
    }

    /// `"schema"."object"`, for DDL and custom expressions.
    pub(crate) fn q(&self, object: &str) -> String {
        format!("{}.{}", self.quoted, quote_ident(object))
    }
}

/// What the migration learnt about the server.
#[derive(Debug, Clone)]
pub(crate) struct ServerInfo {
    /// Where the `vector` type lives; it goes on every connection's search_path.
    pub extension_schema: String,
    /// Whether pgvector knows `hnsw.iterative_scan` (0.8.0 and later).
    pub iterative_scan: bool,
}

/// A stable 64-bit key for `pg_advisory_xact_lock` (FNV-1a).
pub(crate) fn lock_key(parts: &[&str]) -> i64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for b in part.bytes().chain([0u8]) {
            hash ^= u64::from(b);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    hash as i64
}

/// Brings the schema to [`SCHEMA_VERSION`] under an advisory lock, so two processes
/// starting at once migrate it exactly once; makes sure pgvector is installed.
pub(crate) async fn migrate(client: &mut Client, names: &Names) -> Result<ServerInfo, StoreError> {
    let tx = client.transaction().await.map_err(pg_err)?;
    tx.execute(
        "SELECT pg_advisory_xact_lock($1)",
        &[&lock_key(&["cortex-migrate", names.schema()])],
    )
    .await
    .map_err(pg_err)?;
    let info = ensure_extension(&tx).await?;
    let exists: bool = tx
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
            &[&names.schema()],
        )
        .await
        .map_err(pg_err)
        .and_then(|row| get(&row, 0))?;
    if !exists {
        tx.batch_execute(&format!("CREATE SCHEMA {}", quote_ident(names.schema())))
            .await
            .map_err(|e| StoreError::Schema(format!("cannot create schema: {e}")))?;
    }
    tx.batch_execute(&format!(
        "SET LOCAL search_path = {}, {};
         CREATE TABLE IF NOT EXISTS {} (key text PRIMARY KEY, value text NOT NULL);",
        quote_ident(names.schema()),
        quote_ident(&info.extension_schema),
        names.q("meta"),
    ))
    .await
    .map_err(|e| StoreError::Schema(e.to_string()))?;
    let current: Option<String> = tx
        .query_opt(
            &format!(
                "SELECT value FROM {} WHERE key = 'schema_version'",
                names.q("meta")
            ),
            &[],
        )
        .await
        .map_err(pg_err)?
        .map(|r| get(&r, 0))
        .transpose()?;
    let current = current
        .map(|v| v.parse::<i64>())
        .transpose()
        .map_err(|e| StoreError::Corrupt(format!("schema_version: {e}")))?
        .unwrap_or(0);
    if current > SCHEMA_VERSION {
        return Err(StoreError::Schema(format!(
            "the database is at schema version {current}, newer than this build's \
             {SCHEMA_VERSION}; upgrade Cortex"
        )));
    }
    let quoted = quote_ident(names.schema());
    for (i, step) in MIGRATIONS.iter().enumerate().skip(current as usize) {
        tx.batch_execute(&step.replace("{s}", &quoted))
            .await
            .map_err(|e| StoreError::Schema(format!("migration to version {}: {e}", i + 1)))?;
    }
    tx.execute(
        &format!(
            "INSERT INTO {} (key, value) VALUES ('schema_version', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            names.q("meta")
        ),
        &[&SCHEMA_VERSION.to_string()],
    )
    .await
    .map_err(pg_err)?;
    // Postings written by another analyser are re-derived before anyone searches them.
    crate::reanalyze::reanalyze(&tx, names).await?;
    tx.commit().await.map_err(pg_err)?;
    Ok(info)
}

async fn extension_info(
    tx: &tokio_postgres::Transaction<'_>,
) -> Result<Option<(String, String)>, StoreError> {
    tx.query_opt(
        "SELECT n.nspname::text, e.extversion FROM pg_extension e
         JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'",
        &[],
    )
    .await
    .map_err(pg_err)?
    .map(|r| Ok((get(&r, 0)?, get(&r, 1)?)))
    .transpose()
}

async fn ensure_extension(tx: &tokio_postgres::Transaction<'_>) -> Result<ServerInfo, StoreError> {
    let found = match extension_info(tx).await? {
        Some(found) => found,
        None => {
            let available: bool = tx
                .query_one(
                    "SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'vector')",
                    &[],
                )
                .await
                .map_err(pg_err)
                .and_then(|row| get(&row, 0))?;
            if !available {
                return Err(StoreError::Schema(
                    "the pgvector extension is not installed on this PostgreSQL server; \
                     install pgvector (0.8 or later), e.g. use the pgvector/pgvector image"
                        .into(),
                ));
            }
            if let Err(e) = tx
                .batch_execute("CREATE EXTENSION IF NOT EXISTS vector")
                .await
            {
                return Err(match e.code() {
                    Some(code) if *code == SqlState::INSUFFICIENT_PRIVILEGE => StoreError::Schema(
                        "the pgvector extension is not enabled in this database and this \
                             role may not enable it; a superuser must run \
                             `CREATE EXTENSION vector;` in it once"
                            .into(),
                    ),
                    _ => StoreError::Schema(format!("CREATE EXTENSION vector: {e}")),
                });
            }
            extension_info(tx).await?.ok_or_else(|| {
                StoreError::Schema("CREATE EXTENSION vector left no extension".into())
            })?
        }
    };
    let (extension_schema, version) = found;
    if validate_schema_name(&extension_schema).is_err() && extension_schema != "public" {
        return Err(StoreError::Schema(format!(
            "pgvector lives in schema {extension_schema:?}, whose name Cortex cannot put on a \
             search_path; move it with ALTER EXTENSION vector SET SCHEMA public"
        )));
    }
    Ok(ServerInfo {
        extension_schema,
        iterative_scan: parse_version(&version) >= ITERATIVE_SCAN_VERSION,
    })
}

fn parse_version(v: &str) -> (u32, u32) {
    let mut parts = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["public", "cortex", "cortex_test_42", "_x"] {
            assert!(validate_schema_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Cortex",
            "1abc",
            "a-b",
            "a\"b",
            "pg_temp",
            &"a".repeat(64),
        ] {
            assert!(validate_schema_name(bad).is_err(), "{bad}");
        }
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(
            Names::new("cx").unwrap().q("memories"),
            "\"cx\".\"memories\""
        );
    }

    #[test]
    fn versions_and_lock_keys() {
        assert!(parse_version("0.8.0") >= ITERATIVE_SCAN_VERSION);
        assert!(parse_version("0.7.4") < ITERATIVE_SCAN_VERSION);
        assert_ne!(lock_key(&["a", "bc"]), lock_key(&["ab", "c"]));
    }
}
