//! The search statements' text per path, for a fixed small input, as reviewable snapshots
//! (`insta`; under `CI` a mismatch fails instead of writing a `.snap.new`), and how many
//! distinct statement texts a sweep of queries prepares per connection. No database.

use std::collections::BTreeSet;

use super::dense_plan::DensePlan;
use crate::names::Names;
use crate::search::lexical::MAX_PRUNED_TERMS;
use crate::search::{self, DenseSide, LexicalSide, Pruning, Ranked};

const USER: &str = "u";
const PRUNING: Pruning = Pruning {
    budget: 8192,
    lookup_cost: 5,
};
const UNIT: [f32; 3] = [0.6, 0.8, 0.0];

fn names() -> Names {
    Names::new("cortex").unwrap_or_else(|e| panic!("schema name: {e}"))
}

fn terms(k: usize) -> Vec<String> {
    (1..=k).map(|i| format!("t{i}")).collect()
}

fn lexical_sql(k: usize, top_k: usize, pruning: Pruning) -> String {
    match search::lexical(&names(), USER, &terms(k), top_k, pruning) {
        Some(built) => built.0,
        None => String::new(),
    }
}

/// A statement laid out one clause per line, indented by nesting, so that a change to it
/// shows in a diff as the lines it changed (the statements are one line of up to 18 KB).
fn pretty(sql: &str) -> String {
    let options = sqlformat::FormatOptions {
        indent: sqlformat::Indent::Spaces(2),
        lines_between_queries: 1,
        ..Default::default()
    };
    sqlformat::format(sql, &sqlformat::QueryParams::None, &options)
}

#[test]
fn the_layout_changes_only_whitespace() {
    // A snapshot must show every change to a statement: the layout may move whitespace,
    // never anything else.
    let visible = |s: &str| s.split_whitespace().collect::<String>();
    for k in [1, 2, 3, MAX_PRUNED_TERMS + 1] {
        let sql = lexical_sql(k, 5, PRUNING);
        assert_eq!(visible(&pretty(&sql)), visible(&sql), "{k} terms");
    }
}

macro_rules! snapshot {
    ($name:expr, $sql:expr) => {
        insta::with_settings!({
            snapshot_path => "snapshots",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!($name, pretty(&$sql));
        })
    };
}

#[test]
fn impact_ordered_one_term() {
    snapshot!("lexical_impact", lexical_sql(1, 5, PRUNING));
}

#[test]
fn two_terms_rarest_first() {
    snapshot!("lexical_two_terms", lexical_sql(2, 5, PRUNING));
}

#[test]
fn maxscore_and_rarest_first() {
    snapshot!("lexical_maxscore", lexical_sql(3, 5, PRUNING));
}

#[test]
fn unpruned() {
    let off = Pruning {
        budget: 0,
        lookup_cost: 5,
    };
    snapshot!("lexical_unpruned", lexical_sql(3, 5, off));
}

#[test]
fn long_query_scores_every_posting() {
    snapshot!(
        "lexical_long",
        lexical_sql(MAX_PRUNED_TERMS + 1, 5, PRUNING)
    );
}

#[test]
fn exact_dense() {
    let built = search::dense(&names(), DensePlan::Exact, USER, &UNIT, 5);
    snapshot!("dense_exact", built.0);
}

#[test]
fn hnsw_dense() {
    let built = search::dense(&names(), DensePlan::Hnsw { dimension: 3 }, USER, &UNIT, 5);
    snapshot!("dense_hnsw", built.0);
}

#[test]
fn fusion_of_ranked_sides() {
    let ranked = Ranked {
        seqs: vec![3, 1],
        ranks: vec![1, 2],
    };
    let lexical = LexicalSide {
        ranked: ranked.clone(),
        shares: vec![0.75, 0.5],
    };
    let built = search::fused(
        &names(),
        USER,
        5,
        &UNIT,
        DenseSide::Ranked(&ranked),
        &lexical,
    );
    snapshot!("fused_ranked", built.0);
}

#[test]
fn fusion_searching_the_dense_side() {
    let dense = DenseSide::Inline {
        plan: DensePlan::Exact,
        unit_query: &UNIT,
    };
    let built = search::fused(&names(), USER, 5, &UNIT, dense, &LexicalSide::default());
    snapshot!("fused_inline_exact", built.0);
}

/// Distinct statement texts over queries of 1 to 20 terms and `top_k` 1 to 50: what the
/// per-connection statement cache holds after such a sweep.
fn distinct_texts() -> (usize, usize, usize) {
    let mut lexical = BTreeSet::new();
    let mut dense = BTreeSet::new();
    let mut fused = BTreeSet::new();
    let ranked = Ranked::default();
    let bm25 = LexicalSide::default();
    for k in 1..=20 {
        for top_k in 1..=50 {
            lexical.insert(lexical_sql(k, top_k, PRUNING));
            if k == 1 {
                for plan in [DensePlan::Exact, DensePlan::Hnsw { dimension: 3 }] {
                    dense.insert(search::dense(&names(), plan, USER, &UNIT, top_k).0);
                    let inline = DenseSide::Inline {
                        plan,
                        unit_query: &UNIT,
                    };
                    fused.insert(search::fused(&names(), USER, top_k, &UNIT, inline, &bm25).0);
                }
                let side = DenseSide::Ranked(&ranked);
                fused.insert(search::fused(&names(), USER, top_k, &UNIT, side, &bm25).0);
            }
        }
    }
    (lexical.len(), dense.len(), fused.len())
}

/// Before the statements were shaped per power of two with every `top_k`-dependent count
/// bound, this sweep prepared 210 distinct BM25 statements (one per term count, and per
/// pool past `MIN_POOL` for every rarest-first shape); now one per power of two up to 32.
#[test]
fn statement_texts_are_bounded() {
    let (lexical, dense, fused) = distinct_texts();
    eprintln!("distinct statement texts: lexical {lexical}, dense {dense}, fused {fused}");
    assert_eq!((lexical, dense, fused), (6, 2, 3));
}
