//! Running sea-query statements: built once per shape, prepared once per connection (the
//! pool's statement cache), every value bound as a parameter.

use std::fmt::Display;

use cortex_core::error::StoreError;
use deadpool_postgres::GenericClient;
use sea_query::{IdenStatic, PostgresQueryBuilder};
use sea_query_postgres::{PostgresBinder, PostgresValues};
use tokio_postgres::Row;
use tokio_postgres::row::RowIndex;
use tokio_postgres::types::FromSql;

use crate::pg_err;

/// A statement's text and its values.
pub(crate) type Built = (String, PostgresValues);

pub(crate) fn build(statement: &impl PostgresBinder) -> Built {
    statement.build_postgres(PostgresQueryBuilder)
}

pub(crate) async fn rows<C: GenericClient>(
    client: &C,
    built: &Built,
) -> Result<Vec<Row>, StoreError> {
    let statement = client.prepare_cached(&built.0).await.map_err(pg_err)?;
    client
        .query(&statement, &built.1.as_params())
        .await
        .map_err(pg_err)
}

pub(crate) async fn row_opt<C: GenericClient>(
    client: &C,
    built: &Built,
) -> Result<Option<Row>, StoreError> {
    Ok(rows(client, built).await?.into_iter().next())
}

pub(crate) async fn execute<C: GenericClient>(
    client: &C,
    built: &Built,
) -> Result<u64, StoreError> {
    let statement = client.prepare_cached(&built.0).await.map_err(pg_err)?;
    client
        .execute(&statement, &built.1.as_params())
        .await
        .map_err(pg_err)
}

/// Reads a column by position (the one column of a one-column row) or by the name the
/// server gave it, naming it when the row does not hold what the schema promises.
pub(crate) fn get<'a, T: FromSql<'a>>(
    row: &'a Row,
    index: impl RowIndex + Display,
) -> Result<T, StoreError> {
    row.try_get(&index)
        .map_err(|e| StoreError::Corrupt(format!("column {index}: {e}")))
}

/// Reads a column by name: a table's (see [`crate::tables`]) or a statement's alias.
pub(crate) fn get_named<'a, T: FromSql<'a>>(
    row: &'a Row,
    column: impl IdenStatic,
) -> Result<T, StoreError> {
    get(row, column.as_str())
}

/// Limits arrive as usize; LIMIT takes a bigint.
pub(crate) fn limit(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX).min(i64::MAX as u64)
}

/// A statement sea-query refused to build (a column/value count mismatch: a bug here).
pub(crate) fn sea_err(e: sea_query::error::Error) -> StoreError {
    StoreError::backend("postgres", e)
}

/// Whether a statement failed on a foreign key: a referenced memory was deleted between
/// our existence check and our insert, which callers report as a missing reference.
pub(crate) fn is_foreign_key_violation(e: &StoreError) -> bool {
    match e {
        StoreError::Backend { source, .. } => source
            .downcast_ref::<crate::PostgresError>()
            .and_then(crate::PostgresError::code)
            .is_some_and(|c| *c == tokio_postgres::error::SqlState::FOREIGN_KEY_VIOLATION),
        _ => false,
    }
}
