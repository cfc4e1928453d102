//! The peer a user would pick instead: sqlite-vec's brute-force KNN over the same vectors.

use rusqlite::{Connection, params};

use crate::corpus::Corpus;
use crate::stats::Samples;

/// Registers sqlite-vec with every connection opened afterwards.
#[allow(unsafe_code)]
fn register() {
    // SAFETY: sqlite3_vec_init has the signature SQLite's auto-extension API expects; the
    // transmute only erases it to the untyped entry-point type that API takes.
    unsafe {
        rusqlite::ffi::sqlite3_auto_extension(Some(std::mem::transmute::<
            *const (),
            unsafe extern "C" fn(
                *mut rusqlite::ffi::sqlite3,
                *mut *mut std::os::raw::c_char,
                *const rusqlite::ffi::sqlite3_api_routines,
            ) -> std::os::raw::c_int,
        >(
            sqlite_vec::sqlite3_vec_init as *const ()
        )));
    }
}

/// Loads `corpus` into a vec0 table and times `k`-NN queries for each of `queries`.
pub fn knn_latency(
    corpus: &Corpus,
    queries: &[Vec<f32>],
    k: usize,
) -> rusqlite::Result<(Samples, Vec<Vec<i64>>)> {
    register();
    let mut conn = Connection::open_in_memory()?;
    conn.execute_batch(&format!(
        "CREATE VIRTUAL TABLE items USING vec0(embedding float[{}] distance_metric=cosine)",
        corpus.dimension
    ))?;
    let tx = conn.transaction()?;
    {
        let mut insert = tx.prepare("INSERT INTO items (rowid, embedding) VALUES (?1, ?2)")?;
        for i in 0..corpus.texts.len() {
            let bytes: Vec<u8> = corpus
                .vector(i)
                .iter()
                .flat_map(|x| x.to_le_bytes())
                .collect();
            insert.execute(params![i as i64, bytes])?;
        }
    }
    tx.commit()?;
    let mut stmt = conn
        .prepare("SELECT rowid FROM items WHERE embedding MATCH ?1 AND k = ?2 ORDER BY distance")?;
    let mut samples = Samples::default();
    let mut results = Vec::new();
    for q in queries {
        let bytes: Vec<u8> = q.iter().flat_map(|x| x.to_le_bytes()).collect();
        let ids = samples.time(|| {
            stmt.query_map(params![bytes, k as i64], |r| r.get::<_, i64>(0))
                .and_then(|rows| rows.collect::<Result<Vec<_>, _>>())
        })?;
        results.push(ids);
    }
    Ok((samples, results))
}
