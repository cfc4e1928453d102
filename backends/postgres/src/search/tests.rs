//! The search statements' text per path, for a fixed small input, as reviewable snapshots
//! (`insta`; under `CI` a mismatch fails instead of writing a `.snap.new`), and how many
//! distinct statement texts a sweep of queries prepares per connection. No database.

use std::collections::BTreeSet;

use chrono::{DateTime, Utc};
use cortex_core::{filter::MemoryFilter, memory::MemoryKind};

use super::dense_plan::DensePlan;
use crate::names::Names;
use crate::search::lexical::MAX_PRUNED_TERMS;
use crate::search::{self, DenseRanks, LexicalSide, Pruning, Ranked};

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

const NO_FILTER: MemoryFilter = MemoryFilter {
    kinds: Vec::new(),
    tags: Vec::new(),
    tags_all: Vec::new(),
    created: cortex_core::records::TimeRange {
        since: None,
        until: None,
    },
    include_expired: false,
    alive_at: None,
};

/// A filter with every part set.
fn every_part() -> MemoryFilter {
    let at = |s: &str| {
        DateTime::parse_from_rfc3339(s)
            .unwrap_or_else(|e| panic!("{s}: {e}"))
            .with_timezone(&Utc)
    };
    MemoryFilter {
        alive_at: Some(at("2026-12-15T00:00:00Z")),
        ..MemoryFilter::new(
            &[MemoryKind::Fact, MemoryKind::Decision],
            &["ops".to_owned(), "billing".to_owned()],
            &["q3".to_owned()],
            Some(at("2026-11-01T00:00:00Z")),
            Some(at("2026-12-01T00:00:00Z")),
        )
        .unwrap_or_else(|e| panic!("filter: {e}"))
    }
}

fn lexical_sql(k: usize, top_k: usize, pruning: Pruning) -> String {
    lexical_sql_filtered(k, top_k, pruning, &NO_FILTER)
}

fn lexical_sql_filtered(k: usize, top_k: usize, pruning: Pruning, filter: &MemoryFilter) -> String {
    match search::lexical(&names(), USER, &terms(k), top_k, pruning, filter) {
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
    let built = search::dense(&names(), DensePlan::Exact, USER, &UNIT, 5, &NO_FILTER);
    snapshot!("dense_exact", built.0);
}

#[test]
fn hnsw_dense() {
    let built = search::dense(
        &names(),
        DensePlan::Index { dimension: 3 },
        USER,
        &UNIT,
        5,
        &NO_FILTER,
    );
    snapshot!("dense_hnsw", built.0);
}

#[test]
fn filtered_lexical_scores_every_passing_posting() {
    let filter = every_part();
    // Every term count takes the one filtered path, whatever the pruning.
    let one = lexical_sql_filtered(1, 5, PRUNING, &filter);
    assert!(!one.contains("i_seed"), "{one}");
    for k in [2, 3, MAX_PRUNED_TERMS + 1] {
        let sql = lexical_sql_filtered(k, 5, PRUNING, &filter);
        assert!(!sql.contains("r_gate") && !sql.contains("c_part"), "{sql}");
    }
    snapshot!(
        "lexical_filtered",
        lexical_sql_filtered(3, 5, PRUNING, &filter)
    );
}

#[test]
fn filtered_exact_dense() {
    let built = search::dense(&names(), DensePlan::Exact, USER, &UNIT, 5, &every_part());
    snapshot!("dense_exact_filtered", built.0);
}

#[test]
fn filtered_hnsw_dense() {
    let built = search::dense(
        &names(),
        DensePlan::Index { dimension: 3 },
        USER,
        &UNIT,
        5,
        &every_part(),
    );
    snapshot!("dense_hnsw_filtered", built.0);
}

#[test]
fn the_filter_count_stops_at_its_limit() {
    let kinds = MemoryFilter {
        kinds: vec![MemoryKind::Event],
        ..MemoryFilter::default()
    };
    let built = super::dense_plan::passing_count(&names(), USER, &kinds, 20_000);
    assert_eq!(
        built.0,
        "SELECT count(*) FROM (SELECT 1 FROM \"cortex\".\"memories\" AS \"m\" WHERE \"m\".\"user_id\" = $1 \
         AND (NOT m.superseded) AND (m.kind = ANY($2::text[])) LIMIT $3) AS \"z\""
    );
}

/// Each part of a filter is one condition with its value bound, never spliced.
#[test]
fn every_part_of_a_filter_is_bound() {
    let filter = every_part();
    let built = search::dense(&names(), DensePlan::Exact, USER, &UNIT, 5, &filter);
    for fragment in [
        "m.kind = ANY(",
        "m.tags && ",
        "m.tags @> ",
        "\"m\".\"created_at\" >= $",
        "\"m\".\"created_at\" < $",
        "\"m\".\"expires_at\" > $",
    ] {
        assert_eq!(
            built.0.matches(fragment).count(),
            1,
            "{fragment}: {}",
            built.0
        );
    }
    for value in ["ops", "q3", "fact", "2026"] {
        assert!(!built.0.contains(value), "{value} spliced: {}", built.0);
    }
}

/// The expiry probe: one EXISTS over the user's live memories, its values bound, in the
/// shape the partial index `memories_user_expiry` serves (`NOT superseded`, and
/// `expires_at <=`, which implies the index's `expires_at IS NOT NULL`).
#[test]
fn the_expiry_probe_reads_the_partial_index() {
    let at = DateTime::parse_from_rfc3339("2026-12-15T00:00:00.0000015Z")
        .unwrap_or_else(|e| panic!("{e}"))
        .with_timezone(&Utc);
    let built = crate::filter::any_expired(&names(), USER, at);
    assert_eq!(
        built.0,
        "SELECT EXISTS(SELECT 1 FROM \"cortex\".\"memories\" AS \"m\" WHERE \"m\".\"user_id\" \
         = $1 AND (NOT m.superseded) AND \"m\".\"expires_at\" <= $2)"
    );
    assert_eq!(built.1.0.len(), 2);
    // Compared as stored: to the microsecond, truncated.
    let bound = format!("{:?}", built.1.0[1].0);
    assert!(bound.contains("2026-12-15T00:00:00.000001Z"), "{bound}");
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
    let dense = DenseRanks {
        ranked,
        confidence: 0.25,
    };
    let built = search::fused(&names(), USER, 5, &dense, &lexical);
    snapshot!("fused_ranked", built.0);
}

/// Distinct statement texts over queries of 1 to 20 terms and `top_k` 1 to 50: what the
/// per-connection statement cache holds after such a sweep.
fn distinct_texts() -> (usize, usize, usize) {
    let mut lexical = BTreeSet::new();
    let mut dense = BTreeSet::new();
    let mut fused = BTreeSet::new();
    let ranked = DenseRanks::default();
    let bm25 = LexicalSide::default();
    for k in 1..=20 {
        for top_k in 1..=50 {
            lexical.insert(lexical_sql(k, top_k, PRUNING));
            if k == 1 {
                for plan in [DensePlan::Exact, DensePlan::Index { dimension: 3 }] {
                    dense.insert(search::dense(&names(), plan, USER, &UNIT, top_k, &NO_FILTER).0);
                }
                fused.insert(search::fused(&names(), USER, top_k, &ranked, &bm25).0);
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
    assert_eq!((lexical, dense, fused), (6, 2, 1));
}
