//! EXPLAIN ANALYZE of a statement as a search runs it, with its generic plan.

use std::sync::atomic::{AtomicU64, Ordering};

use cortex_core::error::StoreError;
use deadpool_postgres::Object;
use tokio_postgres::{Row, Statement};

use crate::pg_err;
use crate::sql;

/// EXPLAIN ANALYZE of `built` (prepared as `statement`) as the search runs it, with its
/// generic plan: EXPLAIN of a statement with bound values would plan it for them, so it is
/// prepared by name with the types the server inferred and executed with the values as
/// literals.
pub(super) async fn explain_generic(
    client: &Object,
    statement: &Statement,
    built: &sql::Built,
) -> Result<Vec<Row>, StoreError> {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let name = format!("cortex_explain_{}", NEXT.fetch_add(1, Ordering::Relaxed));
    let types: Vec<&str> = statement.params().iter().map(|t| t.name()).collect();
    let values: Vec<String> = built
        .1
        .0
        .iter()
        .map(|v| sea_query::QueryBuilder::value_to_string(&sea_query::PostgresQueryBuilder, &v.0))
        .collect();
    client
        .batch_execute(&format!(
            "PREPARE {name} ({}) AS {}",
            types.join(", "),
            built.0
        ))
        .await
        .map_err(pg_err)?;
    let plans = client
        .query(
            &format!(
                "EXPLAIN (ANALYZE, BUFFERS) EXECUTE {name} ({})",
                values.join(", ")
            ),
            &[],
        )
        .await
        .map_err(pg_err)?;
    // (After a failure the transaction is aborted and the caller rolls it back; the
    // name, never reused, stays prepared on that connection.)
    client
        .batch_execute(&format!("DEALLOCATE {name}"))
        .await
        .map_err(pg_err)?;
    Ok(plans)
}
