//! [`KeyStore`] on PostgreSQL: the `api_keys` table (`migrations/0006_api_keys.sql`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cortex_core::keys::{KeyStore, Scope, StoredKey};
use cortex_core::{error::StoreError, error::StoreResult};
use sea_query::{Expr, ExprTrait, Order, Query, SelectStatement};
use tokio_postgres::Row;

use crate::sql::{self, build, get_named, row_opt, rows, sea_err};
use crate::store::PostgresStore;
use crate::tables::ApiKeys;

/// The columns [`key_of`] reads.
const KEY_COLUMNS: [ApiKeys; 8] = [
    ApiKeys::Id,
    ApiKeys::UserId,
    ApiKeys::Scope,
    ApiKeys::Label,
    ApiKeys::Digest,
    ApiKeys::CreatedAt,
    ApiKeys::ExpiresAt,
    ApiKeys::RevokedAt,
];

fn key_of(row: &Row) -> StoreResult<StoredKey> {
    let scope: String = get_named(row, ApiKeys::Scope)?;
    Ok(StoredKey {
        id: get_named(row, ApiKeys::Id)?,
        user_id: get_named(row, ApiKeys::UserId)?,
        scope: Scope::parse(&scope)
            .ok_or_else(|| StoreError::Corrupt(format!("API key scope {scope:?}")))?,
        label: get_named(row, ApiKeys::Label)?,
        digest: get_named(row, ApiKeys::Digest)?,
        created_at: get_named(row, ApiKeys::CreatedAt)?,
        expires_at: get_named(row, ApiKeys::ExpiresAt)?,
        revoked_at: get_named(row, ApiKeys::RevokedAt)?,
    })
}

impl PostgresStore {
    fn select_keys(&self) -> SelectStatement {
        Query::select()
            .columns(KEY_COLUMNS)
            .from(self.names().table(ApiKeys::Table))
            .to_owned()
    }
}

#[async_trait]
impl KeyStore for PostgresStore {
    async fn insert_key(&self, key: &StoredKey) -> StoreResult<()> {
        self.bounded(async {
            let built = build(
                Query::insert()
                    .into_table(self.names().table(ApiKeys::Table))
                    .columns(KEY_COLUMNS)
                    .values([
                        key.id.clone().into(),
                        key.user_id.clone().into(),
                        key.scope.as_str().into(),
                        key.label.clone().into(),
                        key.digest.clone().into(),
                        key.created_at.into(),
                        key.expires_at.into(),
                        key.revoked_at.into(),
                    ])
                    .map_err(sea_err)?,
            );
            let client = self.client().await?;
            sql::execute(&client, &built).await?;
            Ok(())
        })
        .await
    }

    async fn find_key(&self, id: &str) -> StoreResult<Option<StoredKey>> {
        self.bounded(async {
            let built = build(self.select_keys().and_where(Expr::col(ApiKeys::Id).eq(id)));
            let client = self.client().await?;
            row_opt(&client, &built)
                .await?
                .map(|row| key_of(&row))
                .transpose()
        })
        .await
    }

    async fn list_keys(&self, user: Option<&str>) -> StoreResult<Vec<StoredKey>> {
        self.bounded(async {
            let mut query = self.select_keys();
            if let Some(user) = user {
                query.and_where(Expr::col(ApiKeys::UserId).eq(user));
            }
            query
                .order_by(ApiKeys::CreatedAt, Order::Asc)
                .order_by(ApiKeys::Seq, Order::Asc);
            let client = self.client().await?;
            rows(&client, &build(&query))
                .await?
                .iter()
                .map(key_of)
                .collect()
        })
        .await
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        self.bounded(async {
            let built = build(
                Query::update()
                    .table(self.names().table(ApiKeys::Table))
                    .value(ApiKeys::RevokedAt, at)
                    .and_where(Expr::col(ApiKeys::Id).eq(id))
                    .and_where(Expr::col(ApiKeys::RevokedAt).is_null()),
            );
            let client = self.client().await?;
            Ok(sql::execute(&client, &built).await? == 1)
        })
        .await
    }
}
