//! The store's bookkeeping rows: the embedding signature in `meta`, and each user's change
//! counter in `users`.

use cortex_core::{error::StoreError, signature::EmbeddingSignature, store::Generation};
use deadpool_postgres::GenericClient;
use sea_query::{Expr, ExprTrait, LockType, OnConflict, Query};

use crate::names::Names;
use crate::pg_err;
use crate::sql::{build, get, row_opt, sea_err};
use crate::tables::{Memories, Meta, Users};

pub(crate) const SIGNATURE_KEY: &str = "embedding_signature";

pub(crate) async fn read_signature<C: GenericClient>(
    client: &C,
    names: &Names,
) -> Result<Option<EmbeddingSignature>, StoreError> {
    read_signature_locked(client, names, None).await
}

/// The signature read with a row lock: writers take `Share` (a re-embedding's switch, which
/// takes `Update` first, then waits for them, and they for it, so no memory is written with
/// the old model's vector after the switch).
pub(crate) async fn read_signature_locked<C: GenericClient>(
    client: &C,
    names: &Names,
    lock: Option<LockType>,
) -> Result<Option<EmbeddingSignature>, StoreError> {
    let mut select = Query::select();
    select
        .column(Meta::Value)
        .from(names.table(Meta::Table))
        .and_where(Expr::col(Meta::Key).eq(SIGNATURE_KEY));
    if let Some(lock) = lock {
        select.lock(lock);
    }
    let built = build(&select);
    let Some(row) = row_opt(client, &built).await? else {
        return Ok(None);
    };
    let text: String = get(&row, 0)?;
    EmbeddingSignature::decode(&text)
        .map(Some)
        .ok_or_else(|| StoreError::Corrupt(format!("embedding signature {text:?}")))
}

/// Records the first signature, inside the first write's transaction, and fixes the
/// embedding column's dimension with a CHECK constraint. Two first writers at once: the
/// second waits on the first's meta row, then finds it and compares.
pub(crate) async fn record_signature<C: GenericClient>(
    client: &C,
    names: &Names,
    signature: &EmbeddingSignature,
) -> Result<(), StoreError> {
    let built = build(
        Query::insert()
            .into_table(names.table(Meta::Table))
            .columns([Meta::Key, Meta::Value])
            .values([SIGNATURE_KEY.into(), signature.encode().into()])
            .map_err(sea_err)?
            .on_conflict(OnConflict::column(Meta::Key).do_nothing().to_owned())
            .returning_col(Meta::Key),
    );
    if row_opt(client, &built).await?.is_some() {
        // DDL cannot bind parameters; the dimension is an integer we hold.
        client
            .batch_execute(&format!(
                "ALTER TABLE {} ADD CONSTRAINT memories_embedding_dim \
                 CHECK (vector_dims(embedding) = {})",
                names.q(Memories::Table),
                signature.dimension
            ))
            .await
            .map_err(pg_err)?;
        return Ok(());
    }
    match read_signature(client, names).await? {
        Some(stored) if &stored != signature => Err(StoreError::SignatureMismatch {
            stored,
            got: signature.clone(),
        }),
        _ => Ok(()),
    }
}

pub(crate) fn generation_of(row: Option<tokio_postgres::Row>) -> Result<Generation, StoreError> {
    let value: i64 = match row {
        Some(row) => get(&row, 0)?,
        None => return Err(StoreError::Corrupt("no generation returned".into())),
    };
    Ok(Generation(value as u64))
}

pub(crate) async fn read_generation<C: GenericClient>(
    client: &C,
    names: &Names,
    user: &str,
) -> Result<Generation, StoreError> {
    let built = build(
        Query::select()
            .column(Users::Generation)
            .from(names.table(Users::Table))
            .and_where(Expr::col(Users::UserId).eq(user)),
    );
    Ok(match row_opt(client, &built).await? {
        Some(row) => Generation(get::<i64>(&row, 0)? as u64),
        None => Generation(0),
    })
}
