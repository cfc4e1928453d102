//! [`KeyStore`] on SQLite: the `api_keys` table (`migrations/0003_api_keys.sql`).

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use cortex_core::keys::{KeyStore, Scope, StoredKey};
use cortex_core::{error::StoreError, error::StoreResult};
use rusqlite::{Row, params};

use crate::codec::{decode_time, encode_time, query_rows};
use crate::{SqliteStore, db_err};

/// The columns [`key_of`] reads.
const KEY_COLUMNS: &str = "id, user_id, scope, label, digest, created_at, expires_at, revoked_at";

fn key_of(r: &Row<'_>) -> StoreResult<StoredKey> {
    let text = |column: &str| -> StoreResult<String> { r.get(column).map_err(db_err) };
    let time = |column: &str| -> StoreResult<Option<DateTime<Utc>>> {
        let value: Option<String> = r.get(column).map_err(db_err)?;
        value.as_deref().map(decode_time).transpose()
    };
    let scope = text("scope")?;
    Ok(StoredKey {
        id: text("id")?,
        user_id: text("user_id")?,
        scope: Scope::parse(&scope)
            .ok_or_else(|| StoreError::Corrupt(format!("API key scope {scope:?}")))?,
        label: r.get("label").map_err(db_err)?,
        digest: text("digest")?,
        created_at: decode_time(&text("created_at")?)?,
        expires_at: time("expires_at")?,
        revoked_at: time("revoked_at")?,
    })
}

#[async_trait]
impl KeyStore for SqliteStore {
    async fn insert_key(&self, key: &StoredKey) -> StoreResult<()> {
        let key = key.clone();
        self.run(move |conn| {
            conn.execute(
                "INSERT INTO api_keys
                     (id, user_id, scope, label, digest, created_at, expires_at, revoked_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                params![
                    key.id,
                    key.user_id,
                    key.scope.as_str(),
                    key.label,
                    key.digest,
                    encode_time(&key.created_at),
                    key.expires_at.as_ref().map(encode_time),
                    key.revoked_at.as_ref().map(encode_time),
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
        .await
    }

    async fn find_key(&self, id: &str) -> StoreResult<Option<StoredKey>> {
        let id = id.to_owned();
        self.run(move |conn| {
            let sql = format!("SELECT {KEY_COLUMNS} FROM api_keys WHERE id = ?1");
            Ok(query_rows(conn, &sql, params![id], key_of)?.pop())
        })
        .await
    }

    async fn list_keys(&self, user: Option<&str>) -> StoreResult<Vec<StoredKey>> {
        let user = user.map(str::to_owned);
        self.run(move |conn| {
            let sql = format!(
                "SELECT {KEY_COLUMNS} FROM api_keys
                 WHERE ?1 IS NULL OR user_id = ?1
                 ORDER BY created_at, rowid"
            );
            query_rows(conn, &sql, params![user], key_of)
        })
        .await
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let (id, at) = (id.to_owned(), encode_time(&at));
        self.run(move |conn| {
            let changed = conn
                .execute(
                    "UPDATE api_keys SET revoked_at = ?2 WHERE id = ?1 AND revoked_at IS NULL",
                    params![id, at],
                )
                .map_err(db_err)?;
            Ok(changed == 1)
        })
        .await
    }
}
