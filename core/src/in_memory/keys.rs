//! [`KeyStore`] for the reference store.

use async_trait::async_trait;
use chrono::{DateTime, Utc};

use super::InMemoryStore;
use crate::error::StoreError;
use crate::error::StoreResult;
use crate::keys::{KeyStore, StoredKey};

#[async_trait]
impl KeyStore for InMemoryStore {
    async fn insert_key(&self, key: &StoredKey) -> StoreResult<()> {
        let mut state = self.state();
        if state.keys.iter().any(|k| k.id == key.id) {
            return Err(StoreError::InvalidRecord(format!(
                "API key {} exists already",
                key.id
            )));
        }
        state.keys.push(key.clone());
        Ok(())
    }

    async fn find_key(&self, id: &str) -> StoreResult<Option<StoredKey>> {
        Ok(self.state().keys.iter().find(|k| k.id == id).cloned())
    }

    async fn list_keys(&self, user: Option<&str>) -> StoreResult<Vec<StoredKey>> {
        Ok(self
            .state()
            .keys
            .iter()
            .filter(|k| user.is_none_or(|u| k.user_id == u))
            .cloned()
            .collect())
    }

    async fn revoke_key(&self, id: &str, at: DateTime<Utc>) -> StoreResult<bool> {
        let mut state = self.state();
        match state
            .keys
            .iter_mut()
            .find(|k| k.id == id && k.revoked_at.is_none())
        {
            Some(key) => {
                key.revoked_at = Some(at);
                Ok(true)
            }
            None => Ok(false),
        }
    }
}
