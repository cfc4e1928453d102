//! What a failure says: the server it tried (host, port, database; never the password)
//! and the cause, where the driver alone says "error connecting to server" or "db error".
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use cortex_core::{
    error::StoreError, memory::MemoryKind, new_memory::NewMemory, signature::EmbeddingSignature,
    store::MemoryStore,
};
use cortex_postgres::error::Cause;
use cortex_postgres::{DenseMode, PostgresConfig, PostgresError, PostgresStore};
use support::TestSchema;

/// The classified error inside a store error.
fn classified(e: &StoreError) -> &PostgresError {
    match e {
        StoreError::Backend { source, .. } => source
            .downcast_ref::<PostgresError>()
            .unwrap_or_else(|| panic!("not a classified Postgres error: {e:?}")),
        other => panic!("not a backend error: {other:?}"),
    }
}

/// Host, port and database of the test server.
async fn server() -> (String, u16, String) {
    let url = support::database().await.unwrap();
    let config: tokio_postgres::Config = url.split('?').next().unwrap().parse().unwrap();
    let host = match &config.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[cfg(unix)]
        tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config.get_dbname().unwrap_or("postgres").to_owned();
    (host, port, db)
}

/// Nothing listens on the port: the error names the address, the database and the
/// refusal, and never the password. Needs no database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_port_is_refused_and_named() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let url = format!("postgres://cortex:s3cret-pw@127.0.0.1:{port}/memories?sslmode=disable");
    let e = PostgresStore::connect(PostgresConfig::new(url))
        .await
        .unwrap_err();
    let message = e.to_string();
    eprintln!("{message}");
    for part in ["127.0.0.1", &format!(":{port}"), "\"memories\"", "refused"] {
        assert!(message.contains(part), "{part:?} missing from: {message}");
    }
    assert!(!message.contains("s3cret-pw"), "{message}");
    assert!(!format!("{e:?}").contains("s3cret-pw"), "{e:?}");
    assert_eq!(classified(&e).cause(), Some(&Cause::Refused));
}

/// A role the server does not know: authentication (28000 under trust, 28P01 where
/// passwords are checked), with the role named and the password not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_role_fails_authentication() {
    if !support::require_database().await {
        return;
    }
    let (host, port, db) = server().await;
    let role = format!("cortex_no_such_role_{}", std::process::id());
    let url = format!("postgres://{role}:wrong-pw-771@{host}:{port}/{db}?sslmode=disable");
    let e = PostgresStore::connect(PostgresConfig::new(url))
        .await
        .unwrap_err();
    let message = e.to_string();
    eprintln!("{message}");
    assert!(message.contains("authentication failed"), "{message}");
    assert!(message.contains(&role), "{message}");
    assert!(message.contains(&format!("{host}:{port}")), "{message}");
    assert!(!message.contains("wrong-pw-771"), "{message}");
    let code = classified(&e).code().map(|c| c.code().to_owned());
    assert!(
        matches!(code.as_deref(), Some("28000" | "28P01")),
        "{code:?}: {message}"
    );
    assert!(
        matches!(classified(&e).cause(), Some(Cause::Authentication { .. })),
        "{message}"
    );
}

/// A session terminated under a call (what every client sees when the server shuts
/// down): the call's error names the shutdown, and the store's next call reconnects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_terminated_session_names_the_shutdown() {
    if !support::require_database().await {
        return;
    }
    let schema = TestSchema::new("terminated", true, DenseMode::Exact).await;
    let app = format!("cortex_terminated_{}", std::process::id());
    let separator = if schema.url.contains('?') { '&' } else { '?' };
    let url = format!("{}{separator}application_name={app}", schema.url);
    let store = Arc::new(
        PostgresStore::connect(PostgresConfig {
            pool_size: 1,
            ..support::config(&url, &schema.schema, true, DenseMode::Exact)
        })
        .await
        .unwrap(),
    );
    let sig = EmbeddingSignature::new("m", 3);
    let memory = |text: &str| NewMemory::new("u", text, MemoryKind::Note, &[], 1 << 16).unwrap();
    store
        .add(&memory("first"), &[1.0, 0.0, 0.0], &sig)
        .await
        .unwrap();

    // Another session holds the user's row, so the store's next write waits on it, inside
    // a statement, until its backend is terminated.
    let (admin, connection) = tokio_postgres::connect(&schema.url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(connection);
    admin
        .batch_execute(&format!(
            "BEGIN; SELECT 1 FROM \"{}\".users WHERE user_id = 'u' FOR UPDATE",
            schema.schema
        ))
        .await
        .unwrap();
    let write = {
        let (store, sig) = (store.clone(), sig.clone());
        let m = memory("second");
        tokio::spawn(async move { store.add(&m, &[0.0, 1.0, 0.0], &sig).await })
    };
    let waiting = "SELECT pid FROM pg_stat_activity WHERE application_name = $1 \
                   AND wait_event_type = 'Lock'";
    let mut terminated = false;
    for _ in 0..200 {
        let rows = admin.query(waiting, &[&app]).await.unwrap();
        if let Some(row) = rows.first() {
            let pid: i32 = row.get(0);
            admin
                .execute("SELECT pg_terminate_backend($1)", &[&pid])
                .await
                .unwrap();
            terminated = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(terminated, "the store's write never waited on the lock");
    let e = tokio::time::timeout(Duration::from_secs(30), write)
        .await
        .expect("the terminated write returned")
        .unwrap()
        .unwrap_err();
    admin.batch_execute("ROLLBACK").await.unwrap();
    let message = e.to_string();
    eprintln!("{message}");
    assert!(message.contains("shutting down"), "{message}");
    assert!(message.contains("57P01"), "{message}");
    assert!(
        matches!(classified(&e).cause(), Some(Cause::ShuttingDown { .. })),
        "{message}"
    );
    // The pool drops the dead connection and opens a new one by itself.
    store
        .add(&memory("third"), &[0.0, 0.0, 1.0], &sig)
        .await
        .unwrap();
    assert_eq!(store.count("u").await.unwrap(), 2);
}
