//! Re-embedding on PostgreSQL: new vectors staged beside the current ones, then switched
//! in one transaction, so recall reads the old vectors until the commit that replaces them
//! all.

use cortex_core::{
    error::StoreError, error::StoreResult, memory::Memory, memory::MemoryId,
    signature::EmbeddingSignature, transfer::Switch,
};
use deadpool_postgres::GenericClient;
use pgvector::Vector;
use sea_query::{Expr, ExprTrait, LockType, Order, Query};

use crate::codec::{memory_columns, memory_of};
use crate::meta::{SIGNATURE_KEY, read_signature, read_signature_locked};
use crate::names::Names;
use crate::pg_err;
use crate::search::dense_plan::{HNSW_INDEX, LEGACY_HNSW_INDEX};
use crate::sql::{build, get, limit, row_opt, rows};
use crate::tables::{Memories, Meta, StagedEmbeddings, Users};

pub(crate) async fn unstaged<C: GenericClient>(
    client: &C,
    names: &Names,
    signature: &EmbeddingSignature,
    after: i64,
    max: usize,
) -> StoreResult<Vec<Memory>> {
    let built = build(
        Query::select()
            .columns(memory_columns("m"))
            .from_as(names.table(Memories::Table), "m")
            .and_where(Expr::col(("m", Memories::Seq)).gt(after))
            .and_where(Expr::cust_with_values(
                format!(
                    "NOT EXISTS (SELECT 1 FROM {} s WHERE s.id = m.id AND s.signature = $1)",
                    names.q(StagedEmbeddings::Table)
                ),
                [signature.encode()],
            ))
            .order_by(("m", Memories::Seq), Order::Asc)
            .limit(limit(max)),
    );
    rows(client, &built).await?.iter().map(memory_of).collect()
}

pub(crate) async fn stage<C: GenericClient>(
    tx: &C,
    names: &Names,
    signature: &EmbeddingSignature,
    vectors: &[(MemoryId, Vec<f32>)],
) -> StoreResult<()> {
    let encoded = signature.encode();
    tx.execute(
        &format!(
            "DELETE FROM {} WHERE signature <> $1",
            names.q(StagedEmbeddings::Table)
        ),
        &[&encoded],
    )
    .await
    .map_err(pg_err)?;
    let insert = tx
        .prepare_cached(&format!(
            "INSERT INTO {} (id, signature, embedding) VALUES ($1, $2, $3)
             ON CONFLICT (id) DO UPDATE SET signature = EXCLUDED.signature,
                                            embedding = EXCLUDED.embedding",
            names.q(StagedEmbeddings::Table)
        ))
        .await
        .map_err(pg_err)?;
    // A memory forgotten since it was read needs no vector: skipped. FOR SHARE keeps the
    // others from going before the commit.
    let ids: Vec<MemoryId> = vectors.iter().map(|(id, _)| *id).collect();
    let present: std::collections::HashSet<MemoryId> = tx
        .query(
            &format!(
                "SELECT id FROM {} WHERE id = ANY($1) FOR SHARE",
                names.q(Memories::Table)
            ),
            &[&ids],
        )
        .await
        .map_err(pg_err)?
        .iter()
        .map(|r| get(r, 0))
        .collect::<Result<_, _>>()?;
    for (id, vector) in vectors {
        if !present.contains(id) {
            continue;
        }
        if vector.len() != signature.dimension {
            return Err(StoreError::Config(format!(
                "a staged vector of {id} has {} dimensions; {signature} has {}",
                vector.len(),
                signature.dimension
            )));
        }
        let value = Vector::from(vector.clone());
        tx.execute(&insert, &[id, &encoded, &value])
            .await
            .map_err(pg_err)?;
    }
    Ok(())
}

/// The switch, inside the caller's transaction.
pub(crate) async fn switch<C: GenericClient>(
    tx: &C,
    names: &Names,
    signature: &EmbeddingSignature,
) -> StoreResult<Switch> {
    let (memories, staged) = (names.q(Memories::Table), names.q(StagedEmbeddings::Table));
    // Locks in the writers' order, so the switch and a writer never wait on each other:
    // the signature row (`add` reads it FOR SHARE: a memory already past that check is
    // waited for, a later one finds the new signature and is refused if it carries the old
    // model's vector), then every user's counter (delete and supersede take theirs first),
    // then the table (no write at all between the count and the update).
    read_signature_locked(tx, names, Some(LockType::Update)).await?;
    tx.batch_execute(&format!(
        "SELECT 1 FROM {} ORDER BY user_id FOR UPDATE; LOCK TABLE {memories} IN SHARE MODE;",
        names.q(Users::Table)
    ))
    .await
    .map_err(pg_err)?;
    let encoded = signature.encode();
    let missing = build(
        Query::select()
            .expr(Expr::cust("count(*)"))
            .from_as(names.table(Memories::Table), "m")
            .and_where(Expr::cust_with_values(
                format!(
                    "NOT EXISTS (SELECT 1 FROM {staged} s WHERE s.id = m.id AND s.signature = $1)"
                ),
                [encoded.clone()],
            )),
    );
    let missing: i64 = match row_opt(tx, &missing).await? {
        Some(row) => get(&row, 0)?,
        None => 0,
    };
    if missing > 0 {
        return Ok(Switch::Missing {
            memories: missing as u64,
        });
    }
    let old = read_signature(tx, names).await?;
    let resized = old
        .as_ref()
        .is_some_and(|o| o.dimension != signature.dimension);
    if resized {
        // The HNSW index and the dimension check are built for the old dimension; the
        // index comes back at the next search that wants it.
        tx.batch_execute(&format!(
            "DROP INDEX IF EXISTS {}; DROP INDEX IF EXISTS {};
             ALTER TABLE {memories} DROP CONSTRAINT IF EXISTS memories_embedding_dim;",
            names.q_object(HNSW_INDEX),
            names.q_object(LEGACY_HNSW_INDEX),
        ))
        .await
        .map_err(pg_err)?;
    }
    let updated = tx
        .execute(
            &format!(
                "UPDATE {memories} m SET embedding = s.embedding FROM {staged} s WHERE s.id = m.id"
            ),
            &[],
        )
        .await
        .map_err(pg_err)?;
    if resized {
        // DDL cannot bind parameters; the dimension is an integer we hold.
        tx.batch_execute(&format!(
            "ALTER TABLE {memories} ADD CONSTRAINT memories_embedding_dim \
             CHECK (vector_dims(embedding) = {})",
            signature.dimension
        ))
        .await
        .map_err(pg_err)?;
    }
    tx.execute(
        &format!(
            "INSERT INTO {} (key, value) VALUES ($1, $2)
             ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            names.q(Meta::Table)
        ),
        &[&SIGNATURE_KEY, &encoded],
    )
    .await
    .map_err(pg_err)?;
    // Every cached index was built from the old vectors.
    tx.batch_execute(&format!(
        "UPDATE {} SET generation = generation + 1; DELETE FROM {staged};",
        names.q(Users::Table)
    ))
    .await
    .map_err(pg_err)?;
    Ok(Switch::Switched { memories: updated })
}
