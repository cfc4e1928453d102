//! Re-deriving the BM25 side when the core's analyser changes.
//!
//! The postings, the per-term statistics, each memory's `doc_len` and each user's
//! `total_len` are all derived from the content by the core's analyser
//! ([`cortex_core::tokenizer::ANALYZER`]). The store records which analyser wrote them in
//! `meta.analyzer`; on open, under the migration's lock and inside its transaction, a
//! store written by another analyser (or before one was recorded) has them rebuilt from
//! every memory's content. Content, vectors and every other record are untouched, and a
//! crash midway rolls the whole rebuild back, to be redone at the next open.

use cortex_core::error::StoreError;
use cortex_core::tokenizer::ANALYZER;
use tokio_postgres::Transaction;

use crate::names::Names;
use crate::pg_err;
use crate::postings::DocTerms;
use crate::sql::get_named;
use crate::tables::{self, Memories, Meta, Terms, Users};

/// Memories re-analysed per round trip.
const BATCH: i64 = 2_000;

/// Rebuilds the derived BM25 data unless the store's analyser is this build's; returns
/// how many memories were re-analysed.
pub(crate) async fn reanalyze(tx: &Transaction<'_>, names: &Names) -> Result<u64, StoreError> {
    let meta = names.q(Meta::Table);
    let recorded: Option<String> = tx
        .query_opt(
            &format!("SELECT value FROM {meta} WHERE key = 'analyzer'"),
            &[],
        )
        .await
        .map_err(pg_err)?
        .map(|row| get_named(&row, Meta::Value))
        .transpose()?;
    if recorded.as_deref() == Some(ANALYZER) {
        return Ok(0);
    }
    let (memories, postings, terms) = (
        names.q(Memories::Table),
        names.q(tables::Postings::Table),
        names.q(Terms::Table),
    );
    // TRUNCATE fires no row or statement DELETE trigger, so `terms` is emptied with it
    // and then rebuilt by the insert trigger, batch by batch.
    tx.batch_execute(&format!("TRUNCATE {postings}, {terms}"))
        .await
        .map_err(pg_err)?;
    let select = format!(
        "SELECT seq, user_id, content, superseded FROM {memories}
         WHERE seq > $1 ORDER BY seq LIMIT $2"
    );
    let set_len = format!(
        "UPDATE {memories} m SET doc_len = v.len
         FROM unnest($1::int8[], $2::int4[]) AS v(seq, len) WHERE m.seq = v.seq"
    );
    let insert = format!(
        "INSERT INTO {postings} (user_id, term, seq, tf, doc_len)
         SELECT * FROM unnest($1::text[], $2::text[], $3::int8[], $4::int4[], $5::int4[])"
    );
    let mut after = 0i64;
    let mut done = 0u64;
    loop {
        let rows = tx.query(&select, &[&after, &BATCH]).await.map_err(pg_err)?;
        let Some(last) = rows.last() else {
            break;
        };
        after = get_named(last, Memories::Seq)?;
        let mut batch = Batch::default();
        for row in &rows {
            batch.add(row)?;
        }
        tx.execute(&set_len, &[&batch.seqs, &batch.lens])
            .await
            .map_err(pg_err)?;
        let p = &batch.postings;
        if !p.terms.is_empty() {
            tx.execute(&insert, &[&p.users, &p.terms, &p.seqs, &p.tfs, &p.lens])
                .await
                .map_err(pg_err)?;
        }
        done += rows.len() as u64;
    }
    record_totals(tx, names).await?;
    if done > 0 {
        tracing::info!(
            memories = done,
            from = recorded.as_deref().unwrap_or("(unrecorded)"),
            to = ANALYZER,
            "re-derived the BM25 postings for a new analyser"
        );
    }
    Ok(done)
}

/// One round trip's memories, re-analysed: every memory's new length, and the postings
/// of the live ones, as the columns the insert binds.
#[derive(Default)]
struct Batch {
    seqs: Vec<i64>,
    lens: Vec<i32>,
    postings: Postings,
}

#[derive(Default)]
struct Postings {
    users: Vec<String>,
    terms: Vec<String>,
    seqs: Vec<i64>,
    tfs: Vec<i32>,
    lens: Vec<i32>,
}

impl Batch {
    fn add(&mut self, row: &tokio_postgres::Row) -> Result<(), StoreError> {
        let seq: i64 = get_named(row, Memories::Seq)?;
        let user: String = get_named(row, Memories::UserId)?;
        let content: String = get_named(row, Memories::Content)?;
        let superseded: bool = get_named(row, Memories::Superseded)?;
        let doc = DocTerms::of(&content)?;
        self.seqs.push(seq);
        self.lens.push(doc.len);
        // Only live memories have postings; a restore re-derives a superseded one's.
        if !superseded {
            let p = &mut self.postings;
            for (term, tf) in doc.terms.into_iter().zip(doc.tfs) {
                p.users.push(user.clone());
                p.terms.push(term);
                p.seqs.push(seq);
                p.tfs.push(tf);
                p.lens.push(doc.len);
            }
        }
        Ok(())
    }
}

/// After a rebuild: each user's total length from the new lengths, the generation moved
/// so that any cache keyed on it is rebuilt, and this build's analyser recorded.
async fn record_totals(tx: &Transaction<'_>, names: &Names) -> Result<(), StoreError> {
    let (memories, users, meta) = (
        names.q(Memories::Table),
        names.q(Users::Table),
        names.q(Meta::Table),
    );
    tx.execute(
        &format!(
            "UPDATE {users} u SET generation = u.generation + 1,
                 total_len = COALESCE((SELECT sum(m.doc_len) FROM {memories} m
                                       WHERE m.user_id = u.user_id AND NOT m.superseded), 0)"
        ),
        &[],
    )
    .await
    .map_err(pg_err)?;
    tx.execute(
        &format!(
            "INSERT INTO {meta} (key, value) VALUES ('analyzer', $1)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ),
        &[&ANALYZER],
    )
    .await
    .map_err(pg_err)?;
    Ok(())
}
