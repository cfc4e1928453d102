//! API keys through [`KeyStore`]: what a hosted server checks each request against.

use std::sync::Arc;

use chrono::{DateTime, Duration, Utc};
use cortex_core::keys::{self, IssuedKey, KeyError, KeyStore, Scope};

use crate::support::user;
use crate::{StoreFactory, TestStorage};

async fn keys(storage: &dyn TestStorage) -> Arc<dyn KeyStore> {
    storage
        .connect_keys()
        .await
        .expect("the backend runs key_suite!, so it implements KeyStore")
}

fn at(text: &str) -> DateTime<Utc> {
    text.parse().unwrap()
}

fn issue(user: &str, scope: Scope, expires: Option<DateTime<Utc>>) -> IssuedKey {
    let now = at("2026-12-02T12:00:00.123456Z");
    keys::issue(user, scope, Some("a label, with \"quotes\""), expires, now).unwrap()
}

pub async fn keys_round_trip_and_list_per_user(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = keys(&*storage).await;
    let (ada, bea) = (user("keys-ada"), user("keys-bea"));
    let expires = at("2027-03-02T12:00:00.5Z");
    let issued = [
        issue(&ada, Scope::Write, None),
        issue(&bea, Scope::Read, Some(expires)),
        issue(&ada, Scope::Read, Some(expires)),
    ];
    for key in &issued {
        store.insert_key(&key.stored).await.unwrap();
    }
    for key in &issued {
        let found = store.find_key(&key.stored.id).await.unwrap();
        assert_eq!(found.as_ref(), Some(&key.stored), "every field round-trips");
        let caller = keys::verify(&key.token, found.as_ref(), key.stored.created_at).unwrap();
        assert_eq!(caller.user_id, key.stored.user_id);
        assert_eq!(caller.scope, key.stored.scope);
    }
    let of_ada = store.list_keys(Some(&ada)).await.unwrap();
    assert_eq!(
        of_ada,
        vec![issued[0].stored.clone(), issued[2].stored.clone()],
        "one user's keys, oldest first"
    );
    assert_eq!(store.list_keys(None).await.unwrap().len(), 3);
    assert!(store.list_keys(Some("nobody")).await.unwrap().is_empty());
    assert_eq!(store.find_key(&"0".repeat(16)).await.unwrap(), None);
    // A reopened store holds them too.
    let again = keys(&*storage).await;
    assert_eq!(
        again.find_key(&issued[1].stored.id).await.unwrap(),
        Some(issued[1].stored.clone())
    );
}

pub async fn keys_revoke_once_and_refuse_after(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = keys(&*storage).await;
    let key = issue(&user("keys-revoke"), Scope::Write, None);
    store.insert_key(&key.stored).await.unwrap();
    let first = at("2026-12-03T08:00:00Z");
    assert!(store.revoke_key(&key.stored.id, first).await.unwrap());
    assert!(
        !store
            .revoke_key(&key.stored.id, first + Duration::days(1))
            .await
            .unwrap(),
        "a second revocation changes nothing"
    );
    assert!(!store.revoke_key(&"f".repeat(16), first).await.unwrap());
    let found = store.find_key(&key.stored.id).await.unwrap().unwrap();
    assert_eq!(found.revoked_at, Some(first));
    assert_eq!(
        keys::verify(&key.token, Some(&found), first),
        Err(KeyError::Revoked)
    );
    // Revoking one key leaves the user's others working.
    let other = issue(&key.stored.user_id, Scope::Read, None);
    store.insert_key(&other.stored).await.unwrap();
    let found = store.find_key(&other.stored.id).await.unwrap();
    assert!(keys::verify(&other.token, found.as_ref(), first).is_ok());
}

pub async fn keys_refuse_a_duplicate_id(factory: &dyn StoreFactory) {
    let storage = factory.create().await;
    let store = keys(&*storage).await;
    let key = issue(&user("keys-dup"), Scope::Read, None);
    store.insert_key(&key.stored).await.unwrap();
    let mut clash = issue(&user("keys-dup-other"), Scope::Write, None).stored;
    clash.id = key.stored.id.clone();
    assert!(store.insert_key(&clash).await.is_err());
    assert_eq!(
        store.find_key(&key.stored.id).await.unwrap(),
        Some(key.stored.clone()),
        "the first key stays as it was"
    );
    assert_eq!(store.list_keys(None).await.unwrap().len(), 1);
}
