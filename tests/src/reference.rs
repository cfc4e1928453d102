//! A brute-force reference for hybrid recall, written straight from the contract with no
//! index, no inverted lists and no partial selection: what the engine must agree with.

use std::collections::{BTreeSet, HashMap};

use cortex_core::memory::Memory;
use cortex_core::tokenizer::tokenize;

const K1: f64 = 1.2;
const B: f64 = 0.3;
const RRF_K: f64 = 3.0;
const NEIGHBOUR_WEIGHT: f64 = 0.1;
const MIN_POOL: usize = 40;
// Fusion weights (docs/RETRIEVAL.md): a unit of lexical share against a unit of cosine gap,
// the least weight a list keeps, and what keeps two silent lists equal.
const LEXICAL_CONFIDENCE: f64 = 0.4;
const MIN_WEIGHT: f64 = 0.2;
const EPSILON: f64 = 1e-3;
// The current over the stale: how many fused firsts are compared, from which cosine two
// memories are one topic, and the words that ask for an earlier value (the engine's own
// lists: the reference re-derives the reordering, not the vocabulary).
const HEAD: usize = 10;
const SAME_TOPIC: f32 = cortex_core::current::SAME_TOPIC;
const PAST_CUES: [&str; 12] = cortex_core::current::PAST_CUES;

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let na: f64 = a.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    let nb: f64 = b.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (na * nb)
}

/// Ranks `(score, seq)` pairs: higher score first, ties (within float noise) by seq.
fn ranked(mut scored: Vec<(f64, i64, usize)>, pool: usize) -> Vec<usize> {
    scored.sort_by(|a, b| {
        if (a.0 - b.0).abs() <= 1e-9 * a.0.abs().max(b.0.abs()).max(1e-12) {
            a.1.cmp(&b.1)
        } else {
            b.0.total_cmp(&a.0)
        }
    });
    scored.into_iter().take(pool).map(|(_, _, i)| i).collect()
}

/// The ids `hybrid_retrieve` must return, in order, for `docs` (live memories with their
/// embeddings).
pub fn hybrid_ranking(
    docs: &[(Memory, Vec<f32>)],
    query: &str,
    query_embedding: &[f32],
    top_k: usize,
) -> Vec<uuid::Uuid> {
    hybrid_ranking_where(docs, query, query_embedding, top_k, |_| true)
}

/// [`hybrid_ranking`] with only the memories for which `passes` holds as candidates of
/// either list; the statistics, the bound and the neighbours stay those of every memory.
pub fn hybrid_ranking_where(
    docs: &[(Memory, Vec<f32>)],
    query: &str,
    query_embedding: &[f32],
    top_k: usize,
    passes: impl Fn(&Memory) -> bool,
) -> Vec<uuid::Uuid> {
    let pool = top_k.max(MIN_POOL);
    let n = docs.len() as f64;

    let dense = ranked(
        docs.iter()
            .enumerate()
            .filter(|(_, (m, _))| passes(m))
            .map(|(i, (m, v))| (cosine(v, query_embedding), m.seq, i))
            .collect(),
        pool,
    );

    let tokens: Vec<Vec<String>> = docs.iter().map(|(m, _)| tokenize(&m.content)).collect();
    let avgdl = tokens.iter().map(Vec::len).sum::<usize>() as f64 / n;
    let terms: BTreeSet<String> = tokenize(query).into_iter().collect();
    let mut lexical_scores = Vec::new();
    for (i, doc) in tokens.iter().enumerate() {
        let mut score = 0.0;
        let mut matched = false;
        for term in &terms {
            let tf = doc.iter().filter(|t| *t == term).count() as f64;
            if tf == 0.0 {
                continue;
            }
            matched = true;
            let df = tokens.iter().filter(|d| d.contains(term)).count() as f64;
            let idf = (1.0 + (n - df + 0.5) / (df + 0.5)).ln();
            let dl = doc.len() as f64;
            score += idf * tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * dl / avgdl));
        }
        if matched && passes(&docs[i].0) {
            lexical_scores.push((score, docs[i].0.seq, i));
        }
    }
    let score_of: HashMap<usize, f64> = lexical_scores.iter().map(|&(s, _, i)| (i, s)).collect();
    let lexical = ranked(lexical_scores, pool);

    // The query's bound: every query term's idf, held by a memory or not.
    let bound: f64 = terms
        .iter()
        .map(|term| {
            let df = tokens.iter().filter(|d| d.contains(term)).count() as f64;
            (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
        })
        .sum();
    let share = |i: usize| {
        if bound > 0.0 {
            (score_of[&i] / bound).min(1.0)
        } else {
            0.0
        }
    };
    // Each list's weight: BM25's by its first memory's share, dense's by how far its
    // first cosine stands above its second.
    let lexical_confidence = lexical.first().map_or(0.0, |&i| share(i));
    let dense_confidence = match dense.as_slice() {
        [first, second, ..] => {
            cosine(&docs[*first].1, query_embedding) - cosine(&docs[*second].1, query_embedding)
        }
        _ => 0.0,
    };
    let l = LEXICAL_CONFIDENCE * lexical_confidence + EPSILON;
    let d = dense_confidence.max(0.0) + EPSILON;
    let lexical_weight = MIN_WEIGHT + (1.0 - 2.0 * MIN_WEIGHT) * l / (l + d);
    let (wd, wl) = (2.0 * (1.0 - lexical_weight), 2.0 * lexical_weight);

    let mut fused: HashMap<usize, f64> = HashMap::new();
    for (rank, i) in dense.iter().enumerate() {
        *fused.entry(*i).or_default() += wd / (RRF_K + rank as f64 + 1.0);
    }
    for (rank, i) in lexical.iter().enumerate() {
        *fused.entry(*i).or_default() += wl * share(*i) / (RRF_K + rank as f64 + 1.0);
    }
    // A candidate adds a tenth of the better fused score of the live memories written just
    // before and just after it (zero when that one is no candidate).
    let mut by_seq: Vec<(i64, usize)> = docs
        .iter()
        .enumerate()
        .map(|(i, (m, _))| (m.seq, i))
        .collect();
    by_seq.sort();
    let neighbour_score = |i: usize| {
        let at = by_seq.iter().position(|&(_, j)| j == i).unwrap_or(0);
        let around = [at.checked_sub(1), Some(at + 1)];
        around
            .into_iter()
            .flatten()
            .filter_map(|p| by_seq.get(p))
            .map(|&(_, j)| fused.get(&j).copied().unwrap_or(0.0))
            .fold(0.0, f64::max)
    };
    let smoothed: Vec<(f64, i64, usize)> = fused
        .iter()
        .map(|(&i, &s)| (s + NEIGHBOUR_WEIGHT * neighbour_score(i), docs[i].0.seq, i))
        .collect();
    let order = ranked(smoothed.clone(), top_k.max(HEAD));
    let score: HashMap<usize, f64> = smoothed.iter().map(|&(s, _, i)| (i, s)).collect();
    let order = current_first(docs, query, order, &score);
    order
        .into_iter()
        .take(top_k)
        .map(|i| docs[i].0.id)
        .collect()
}

/// The current over the stale (docs/RETRIEVAL.md): among the first `HEAD` of `order`,
/// unless the query asks for the past, a memory that later-written ones of the head sit
/// within `SAME_TOPIC` of (cosine of their own vectors) goes just below the lowest of
/// them, when it stood above it.
fn current_first(
    docs: &[(Memory, Vec<f32>)],
    query: &str,
    mut order: Vec<usize>,
    score: &HashMap<usize, f64>,
) -> Vec<usize> {
    let past = query
        .split(|c: char| !c.is_alphanumeric())
        .any(|w| PAST_CUES.contains(&w.to_lowercase().as_str()));
    if past {
        return order;
    }
    let head = order.len().min(HEAD);
    let seq = |i: usize| docs[i].0.seq;
    // Newest first, so each memory's later relatives already have their final key.
    let mut newest_first: Vec<usize> = order[..head].to_vec();
    newest_first.sort_by_key(|&i| std::cmp::Reverse(seq(i)));
    // (score, how many places below it) per memory: "just below" without float steps.
    let mut key: HashMap<usize, (f64, u32)> =
        order[..head].iter().map(|&i| (i, (score[&i], 0))).collect();
    for &i in &newest_first {
        let lowest = order[..head]
            .iter()
            .copied()
            .filter(|&j| seq(j) > seq(i))
            .filter(|&j| cosine(&docs[i].1, &docs[j].1) >= f64::from(SAME_TOPIC))
            .min_by(|&a, &b| {
                let (ka, kb) = (key[&a], key[&b]);
                ka.0.total_cmp(&kb.0).then(kb.1.cmp(&ka.1))
            });
        if let Some(j) = lowest {
            let (kj, ki) = (key[&j], key[&i]);
            let above = ki.0 > kj.0 || (ki.0 == kj.0 && ki.1 <= kj.1);
            if above {
                key.insert(i, (kj.0, kj.1 + 1));
            }
        }
    }
    order[..head].sort_by(|&a, &b| {
        let (ka, kb) = (key[&a], key[&b]);
        kb.0.total_cmp(&ka.0)
            .then(ka.1.cmp(&kb.1))
            .then(seq(a).cmp(&seq(b)))
    });
    order
}
