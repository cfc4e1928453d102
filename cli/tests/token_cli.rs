//! `cortex token`: keys made, listed and revoked through the binary, on SQLite and on
//! Postgres, checked against the store as the server will check them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod admin_support;

use std::sync::Arc;

use admin_support::*;
use chrono::Utc;
use cortex_core::keys::KeyStore;
use cortex_core::keys::{self, KeyError, Scope};

/// Runs the key lifecycle through the binary against `env`'s store, reading it back
/// through `store`.
async fn lifecycle(env: &Env, store: Arc<dyn KeyStore>) {
    let made = json(&ok(
        env,
        &[
            "token",
            "create",
            "--user",
            "ada",
            "--scope",
            "read",
            "--expires",
            "90d",
            "--label",
            "ada's laptop",
            "--json",
        ],
    ));
    let token = made["token"].as_str().unwrap().to_owned();
    let id = made["key"]["id"].as_str().unwrap().to_owned();
    assert!(token.starts_with(&format!("cx_{id}_")), "{made}");
    assert_eq!(made["key"]["scope"], "read");
    assert!(made["key"].get("digest").is_none(), "{made}");

    let found = store.find_key(&id).await.unwrap();
    let caller = keys::verify(&token, found.as_ref(), Utc::now()).unwrap();
    assert_eq!(
        (caller.user_id.as_str(), caller.scope),
        ("ada", Scope::Read)
    );
    assert!(found.unwrap().expires_at.unwrap() > Utc::now() + chrono::Duration::days(89));

    // The plain form prints the key alone on stdout, for `$(cortex token create ...)`.
    let plain = ok(env, &["token", "create", "--user", "bea"]);
    let bea = plain.trim();
    assert!(keys::parse_token(bea).is_ok(), "{plain:?}");

    let listed = ok(env, &["token", "list"]);
    assert!(
        listed.contains(&id) && listed.contains("ada's laptop"),
        "{listed}"
    );
    assert!(
        !listed.contains(&token[20..]) && !listed.contains(&bea[20..]),
        "{listed}"
    );
    let of_bea = json(&ok(env, &["token", "list", "--user", "bea", "--json"]));
    assert_eq!(of_bea.as_array().unwrap().len(), 1, "{of_bea}");
    assert_eq!(of_bea[0]["scope"], "write", "write is the default");

    assert!(ok(env, &["token", "revoke", &id]).contains("revoked"));
    let found = store.find_key(&id).await.unwrap();
    assert_eq!(
        keys::verify(&token, found.as_ref(), Utc::now()),
        Err(KeyError::Revoked)
    );
    assert!(ok(env, &["token", "list"]).contains("revoked"));
    assert!(ok(env, &["token", "revoke", &id]).contains("already"));
    let err = refused(env, &["token", "revoke", "0123456789abcdef"]);
    assert!(err.contains("no key"), "{err}");

    // Bad input is refused and writes nothing.
    for args in [
        ["token", "create", "--user", "", "--json"].as_slice(),
        &["token", "create", "--user", "ada", "--expires", "soon"],
        &[
            "token",
            "create",
            "--user",
            "ada",
            "--expires",
            "2001-01-01T00:00:00Z",
        ],
        &["token", "create", "--user", "ada", "--scope", "admin"],
    ] {
        refused(env, args);
    }
    assert_eq!(store.list_keys(None).await.unwrap().len(), 2);
}

#[tokio::test]
async fn keys_are_made_listed_and_revoked_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("keys.db");
    let env = sqlite_env(&db);
    let store = Arc::new(cortex_sqlite::SqliteStore::open(&db).unwrap());
    lifecycle(&env, store).await;
}

#[tokio::test]
async fn keys_are_made_listed_and_revoked_on_postgres() {
    let Some(url) = database_url() else { return };
    let schema = unique_schema("keys");
    let env = postgres_env(&url, &schema);
    let mut config = cortex_postgres::PostgresConfig::new(&url);
    config.schema = Some(schema.clone());
    let store = Arc::new(
        cortex_postgres::PostgresStore::connect(config)
            .await
            .unwrap(),
    );
    lifecycle(&env, store).await;
    drop_schema(&url, &schema).await;
}
