//! The index snapshot beside the file: read when it describes the file, caught up when it
//! is behind, never read for other rows, and recall the same with it as without it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests may panic on a failed expectation

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cortex_core::{
    engine::CortexMemory, engine::MemorizeOptions, memory::MemoryKind, store::MemoryStore,
};
use cortex_providers::FakeProvider;
use cortex_sqlite::{SqliteConfig, SqliteStore};
use rusqlite::{Connection, params};

const USER: &str = "ada";
const D: usize = 64;
const QUERIES: [&str; 4] = [
    "garden tomatoes",
    "the river trip",
    "note 17 about topic 3",
    "nothing matches this",
];

fn engine(path: &Path, snapshots: bool) -> CortexMemory {
    let config = SqliteConfig {
        index_snapshots: snapshots,
        ..SqliteConfig::new(path)
    };
    let store: Arc<dyn MemoryStore> = Arc::new(SqliteStore::open_with(&config).unwrap());
    CortexMemory::new(store, Arc::new(FakeProvider::new(D)))
}

/// What recall returns for each query: ids, scores and the content as recalled.
async fn recalls(engine: &CortexMemory) -> Vec<Vec<(String, u64, String)>> {
    let mut out = Vec::new();
    for q in QUERIES {
        let hits = engine.recall(USER, q, 10).await.unwrap();
        out.push(
            hits.into_iter()
                .map(|h| (h.memory.id.to_string(), h.score.to_bits(), h.memory.content))
                .collect(),
        );
    }
    out
}

async fn fill(engine: &CortexMemory, from: usize, to: usize) {
    for i in from..to {
        let text = format!(
            "note {i} about topic {}: {}",
            i % 7,
            ["garden tomatoes", "a river trip", "the tax form"][i % 3]
        );
        engine
            .memorize(USER, &text, MemoryKind::Note, &[], &Default::default())
            .await
            .unwrap();
    }
}

fn snapshot_files(path: &Path) -> Vec<PathBuf> {
    let mut dir = path.as_os_str().to_owned();
    dir.push(".index");
    match std::fs::read_dir(PathBuf::from(dir)) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

/// Changes every memory's text behind the engine's back, without a generation bump: an
/// index read from a snapshot still shows the old text, one built from the rows the new.
fn rewrite_texts_in_place(path: &Path) {
    let conn = Connection::open(path).unwrap();
    conn.execute(
        "UPDATE memories SET content = content || ' (rewritten)'",
        [],
    )
    .unwrap();
}

fn rewritten(recalls: &[Vec<(String, u64, String)>]) -> bool {
    recalls
        .iter()
        .flatten()
        .any(|(_, _, text)| text.ends_with("(rewritten)"))
}

#[tokio::test]
async fn a_reopened_store_reads_its_index_from_the_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let first = engine(&path, true);
    fill(&first, 0, 60).await;
    let before = recalls(&first).await;
    drop(first);
    let files = snapshot_files(&path);
    assert_eq!(files.len(), 1, "{files:?}");
    let mode = std::fs::metadata(&files[0]).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let dir_mode = std::fs::metadata(files[0].parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700);

    rewrite_texts_in_place(&path);
    let read = recalls(&engine(&path, true)).await;
    assert_eq!(read, before, "the snapshot was not what recall read");
    // The same file without snapshots builds from the rows (and sees the rewrite), with
    // the same ids and scores.
    let built = recalls(&engine(&path, false)).await;
    assert!(rewritten(&built));
    let strip = |r: &[Vec<(String, u64, String)>]| -> Vec<Vec<(String, u64)>> {
        r.iter()
            .map(|q| q.iter().map(|(id, s, _)| (id.clone(), *s)).collect())
            .collect()
    };
    assert_eq!(strip(&built), strip(&before));
}

#[tokio::test]
async fn a_snapshot_behind_the_file_is_caught_up_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let first = engine(&path, true);
    fill(&first, 0, 40).await;
    recalls(&first).await;
    drop(first);
    let written = std::fs::read(&snapshot_files(&path)[0]).unwrap();

    // Written by a process that keeps no snapshots: new memories, one forgotten, one
    // corrected, and a correction forgotten again (its original is live once more).
    let other = engine(&path, false);
    fill(&other, 40, 55).await;
    let listed = other.list_memories(USER, 100).await.unwrap();
    let (a, b, c) = (&listed[20], &listed[30], &listed[40]);
    other.forget(USER, &a.id.to_string()).await.unwrap();
    let options = |id: &cortex_core::memory::MemoryId| MemorizeOptions {
        replaces: Some(id.to_string()),
        ..MemorizeOptions::default()
    };
    other
        .memorize(
            USER,
            "garden tomatoes, corrected",
            MemoryKind::Note,
            &[],
            &options(&b.id),
        )
        .await
        .unwrap();
    let correction = other
        .memorize(
            USER,
            "a river trip, corrected",
            MemoryKind::Note,
            &[],
            &options(&c.id),
        )
        .await
        .unwrap();
    other
        .forget(USER, &correction.memory.id.to_string())
        .await
        .unwrap();
    let want = recalls(&other).await;
    drop(other);
    assert_eq!(std::fs::read(&snapshot_files(&path)[0]).unwrap(), written);

    let caught_up = recalls(&engine(&path, true)).await;
    assert_eq!(caught_up, want);
    // Rewritten at the file's generation: the next opening reads it as it is.
    assert_ne!(std::fs::read(&snapshot_files(&path)[0]).unwrap(), written);
    rewrite_texts_in_place(&path);
    assert_eq!(recalls(&engine(&path, true)).await, want);
}

#[tokio::test]
async fn a_snapshot_of_other_rows_is_never_read() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let copy = dir.path().join("copy.db");
    let first = engine(&path, true);
    fill(&first, 0, 30).await;
    drop(first);
    // A copy of the file as it was, to be put back later.
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute("VACUUM INTO ?1", params![copy.to_str().unwrap()])
            .unwrap();
    }
    let later = engine(&path, true);
    fill(&later, 30, 40).await;
    recalls(&later).await;
    drop(later);

    // The copy put back and written to as often: the generation the snapshot names, with
    // other memories behind it (the stamp differs).
    std::fs::copy(&copy, &path).unwrap();
    for suffix in ["-wal", "-shm"] {
        let mut side = path.as_os_str().to_owned();
        side.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(side));
    }
    let restored = engine(&path, false);
    for i in 0..10 {
        restored
            .memorize(
                USER,
                &format!("restored timeline {i}"),
                MemoryKind::Fact,
                &[],
                &Default::default(),
            )
            .await
            .unwrap();
    }
    let want = recalls(&restored).await;
    drop(restored);
    assert_eq!(recalls(&engine(&path, true)).await, want);

    // The vectors changed in place (as a re-embed does, which gives the file a new epoch):
    // the snapshot is not read even at the current generation.
    recalls(&engine(&path, true)).await;
    {
        let conn = Connection::open(&path).unwrap();
        conn.execute(
            "UPDATE meta SET value = 'another epoch' WHERE key = 'index_epoch'",
            [],
        )
        .unwrap();
    }
    rewrite_texts_in_place(&path);
    assert!(rewritten(&recalls(&engine(&path, true)).await));

    // A damaged snapshot is refused and written again.
    let file = &snapshot_files(&path)[0];
    let mut bytes = std::fs::read(file).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(file, &bytes).unwrap();
    let want = recalls(&engine(&path, false)).await;
    assert_eq!(recalls(&engine(&path, true)).await, want);
    assert_ne!(std::fs::read(file).unwrap(), bytes);
}

#[tokio::test]
async fn without_snapshots_nothing_is_written_beside_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let e = engine(&path, false);
    fill(&e, 0, 5).await;
    recalls(&e).await;
    assert!(snapshot_files(&path).is_empty());
}

#[tokio::test]
async fn forgetting_a_memory_removes_its_users_snapshots_and_no_one_elses() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let e = engine(&path, true);
    fill(&e, 0, 6).await;
    let secret = e
        .memorize(
            USER,
            "the alarm code is 4711",
            MemoryKind::Fact,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    e.memorize(
        "bob",
        "bob's garden tomatoes",
        MemoryKind::Note,
        &[],
        &Default::default(),
    )
    .await
    .unwrap();
    recalls(&e).await;
    e.recall("bob", "garden", 5).await.unwrap();
    let holds_secret = |file: &PathBuf| {
        let bytes = std::fs::read(file).unwrap();
        bytes.windows(4).any(|w| w == b"4711")
    };
    let files = snapshot_files(&path);
    assert_eq!(files.len(), 2);
    assert_eq!(files.iter().filter(|f| holds_secret(f)).count(), 1);

    e.forget(USER, &secret.memory.id.to_string()).await.unwrap();
    let left = snapshot_files(&path);
    assert_eq!(left.len(), 1, "bob's snapshot stays, ada's goes");
    assert!(!holds_secret(&left[0]));

    // The next opening builds ada's index from the rows, without the forgotten memory.
    let want = recalls(&engine(&path, false)).await;
    assert_eq!(recalls(&engine(&path, true)).await, want);
    let files = snapshot_files(&path);
    assert_eq!(files.len(), 2);
    assert!(files.iter().all(|f| !holds_secret(f)));
}

/// What the engine wrote since its index was built is kept at shutdown
/// (`CortexMemory::keep_indexes`): the next opening reads the whole index from the
/// snapshot, reading no row, not even the rows written since; keeping it again writes
/// nothing.
#[tokio::test]
async fn an_index_kept_at_shutdown_is_read_back_without_a_row() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let first = engine(&path, true);
    fill(&first, 0, 40).await;
    recalls(&first).await;
    // Applied to the cached index; the snapshot on disk stays at 40 memories.
    fill(&first, 40, 60).await;
    let before = recalls(&first).await;
    let late = first
        .recall(USER, "note 45 about topic 3", 1)
        .await
        .unwrap();
    assert!(late[0].memory.content.starts_with("note 45 "));
    assert_eq!(first.keep_indexes().await, 1);
    let file = snapshot_files(&path).remove(0);
    let modified = std::fs::metadata(&file).unwrap().modified().unwrap();
    assert_eq!(first.keep_indexes().await, 1);
    assert_eq!(
        std::fs::metadata(&file).unwrap().modified().unwrap(),
        modified,
        "a snapshot already on disk was written again"
    );
    drop(first);

    // Rows read back (the 20 written after the snapshot, had it been caught up) would
    // show the rewrite.
    rewrite_texts_in_place(&path);
    let second = engine(&path, true);
    assert_eq!(recalls(&second).await, before);
    let again = second
        .recall(USER, "note 45 about topic 3", 1)
        .await
        .unwrap();
    assert_eq!(again[0].memory.content, late[0].memory.content);
}

/// An index behind the file (another process wrote since) is not kept: a snapshot of it
/// under the file's generation would hide the other process's memory at the next opening.
#[tokio::test]
async fn an_index_behind_the_file_is_not_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("memory.db");
    let first = engine(&path, true);
    fill(&first, 0, 30).await;
    recalls(&first).await;
    let other = engine(&path, false);
    other
        .memorize(
            USER,
            "a heron on the weir at dawn",
            MemoryKind::Note,
            &[],
            &Default::default(),
        )
        .await
        .unwrap();
    drop(other);
    first.keep_indexes().await;
    drop(first);
    let hits = engine(&path, true)
        .recall(USER, "a heron on the weir at dawn", 1)
        .await
        .unwrap();
    assert_eq!(hits[0].memory.content, "a heron on the weir at dawn");
}
