//! The BM25 side of a write: postings written with the core tokenizer and the per-user
//! statistics (live document count and total length), kept exact inside each write's
//! transaction.
//!
//! Only live memories have postings and count in the statistics: superseding a memory
//! removes its postings and takes it out of the counts; a delete that makes a superseded
//! memory live again re-tokenizes its content and puts them back. So df is a count over
//! the postings table and N and the average length come from one row, all read by the
//! search statement in one snapshot.

use cortex_core::error::StoreError;
use cortex_core::tokenizer::term_frequencies;
use sea_query::{Expr, ExprTrait, IdenStatic, OnConflict, Query};

use crate::names::Names;
use crate::sql::{Built, build, sea_err};
use crate::tables::{Memories, Postings, Users};

/// A document's distinct terms (byte order) with their frequencies, and its length.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct DocTerms {
    pub terms: Vec<String>,
    pub tfs: Vec<i32>,
    pub len: i32,
}

impl DocTerms {
    pub(crate) fn of(content: &str) -> Result<Self, StoreError> {
        let (tf, len) = term_frequencies(content);
        let too_long = || StoreError::Corrupt("a document of more than 2^31 tokens".into());
        let mut terms = Vec::with_capacity(tf.len());
        let mut tfs = Vec::with_capacity(tf.len());
        for (term, count) in tf {
            terms.push(term);
            tfs.push(i32::try_from(count).map_err(|_| too_long())?);
        }
        Ok(Self {
            terms,
            tfs,
            len: i32::try_from(len).map_err(|_| too_long())?,
        })
    }
}

/// Bumps the user's change counter and moves the statistics by `docs` documents of
/// `len` tokens in all, returning the new generation. Every write transaction of a user
/// runs this first: the row lock it takes serialises the user's writers, and each later
/// statement of the transaction then sees everything they committed.
pub(crate) fn bump_user(
    names: &Names,
    user: &str,
    docs: i64,
    len: i64,
) -> Result<Built, StoreError> {
    // The conflicting row goes by the table's unqualified name.
    let users = Users::Table.as_str();
    Ok(build(
        Query::insert()
            .into_table(names.table(Users::Table))
            .columns([
                Users::UserId,
                Users::Generation,
                Users::DocCount,
                Users::TotalLen,
            ])
            .values([user.into(), 1i64.into(), docs.into(), len.into()])
            .map_err(sea_err)?
            .on_conflict(
                OnConflict::column(Users::UserId)
                    .value(
                        Users::Generation,
                        Expr::cust(format!("{users}.generation + 1")),
                    )
                    .value(
                        Users::DocCount,
                        Expr::cust(format!("{users}.doc_count + excluded.doc_count")),
                    )
                    .value(
                        Users::TotalLen,
                        Expr::cust(format!("{users}.total_len + excluded.total_len")),
                    )
                    .to_owned(),
            )
            .returning_col(Users::Generation),
    ))
}

/// Moves the statistics without touching the generation (the transaction bumped it).
pub(crate) fn adjust_stats(names: &Names, user: &str, docs: i64, len: i64) -> Built {
    build(
        Query::update()
            .table(names.table(Users::Table))
            .value(
                Users::DocCount,
                Expr::cust_with_values("doc_count + $1::int8", [docs]),
            )
            .value(
                Users::TotalLen,
                Expr::cust_with_values("total_len + $1::int8", [len]),
            )
            .and_where(Expr::col(Users::UserId).eq(user)),
    )
}

/// The postings of the memory `id`, from its terms. The two arrays unnest in lockstep.
pub(crate) fn insert_postings(
    names: &Names,
    id: uuid::Uuid,
    doc: &DocTerms,
) -> Result<Built, StoreError> {
    let select = Query::select()
        .column(("m", Memories::UserId))
        .expr(Expr::cust_with_values(
            "unnest($1::text[])",
            [doc.terms.clone()],
        ))
        .column(("m", Memories::Seq))
        .expr(Expr::cust_with_values(
            "unnest($1::int4[])",
            [doc.tfs.clone()],
        ))
        .column(("m", Memories::DocLen))
        .from_as(names.table(Memories::Table), "m")
        .and_where(Expr::col(("m", Memories::Id)).eq(id))
        .to_owned();
    Ok(build(
        Query::insert()
            .into_table(names.table(Postings::Table))
            .columns([
                Postings::UserId,
                Postings::Term,
                Postings::Seq,
                Postings::Tf,
                Postings::DocLen,
            ])
            .select_from(select)
            .map_err(sea_err)?,
    ))
}

/// Drops the postings of the memory at `seq`.
pub(crate) fn delete_postings(names: &Names, seq: i64) -> Built {
    build(
        Query::delete()
            .from_table(names.table(Postings::Table))
            .and_where(Expr::col(Postings::Seq).eq(seq)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_come_from_the_core_tokenizer_in_byte_order() {
        // "the" is a function word; "cats" stems to "cat".
        let doc = DocTerms::of("b cats B c cat the, é").unwrap();
        assert_eq!(doc.terms, ["b", "c", "cat", "é"]);
        assert_eq!(doc.tfs, [2, 1, 2, 1]);
        assert_eq!(doc.len, 6);
        let names = Names::new("cx").unwrap();
        let (sql, values) = insert_postings(&names, uuid::Uuid::nil(), &doc).unwrap();
        assert!(sql.contains("unnest($1::text[])"), "{sql}");
        assert_eq!(values.0.len(), 3);
    }
}
