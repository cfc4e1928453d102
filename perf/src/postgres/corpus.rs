//! The Postgres bench's synthetic corpus and queries: 384-dimension unit vectors in 64
//! Gaussian clusters of varying spread, texts drawn Zipf-like from a 400-word vocabulary,
//! and hybrid and dense-only queries near stored vectors. Seeded, so a kept schema holds
//! what a later run generates.

use cortex_core::store::SearchRequest;
use cortex_core::tokenizer::query_terms;

use super::{DIM, TOP_K};

const CLUSTERS: usize = 64;

/// SplitMix64: the same corpus and queries on every run and machine.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub(crate) fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
    pub(crate) fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn zipf(&mut self, n: usize) -> usize {
        ((n as f64).powf(self.unit()) - 1.0) as usize % n
    }
    fn normal(&mut self) -> f32 {
        ((0..6).map(|_| self.unit()).sum::<f64>() - 3.0) as f32 / 0.7
    }
}

fn unit(v: Vec<f32>) -> Vec<f32> {
    let n = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    v.into_iter().map(|x| (f64::from(x) / n) as f32).collect()
}

fn vocabulary() -> Vec<String> {
    let base = "the a to of and in is for on with at by from my our team project deploy \
        release build test server database api user customer meeting call email report budget \
        plan review design code bug fix issue ticket sprint week month year monday friday \
        morning evening night today tomorrow alice bob carol dana erik fatima berlin lisbon \
        tokyo paris office home remote coffee tea lunch dinner birthday holiday vacation flight \
        hotel train doctor dentist invoice payment refund contract vendor security key rotate \
        backup restore migrate postgres rust python kubernetes docker cluster latency error \
        timeout retry cache index search vector embedding model prompt token cost price";
    let mut words: Vec<String> = base.split_whitespace().map(str::to_owned).collect();
    let mut i = 0;
    while words.len() < 400 {
        words.push(format!("{}{}", words[i % 60], i / 60 + 2));
        i += 1;
    }
    words
}

pub(crate) struct Corpus {
    pub(crate) texts: Vec<String>,
    pub(crate) vectors: Vec<Vec<f32>>,
}

/// `n` memories, drawn from `rng`.
pub(crate) fn generate(n: usize, rng: &mut Rng) -> Corpus {
    let words = vocabulary();
    let centers: Vec<Vec<f32>> = (0..CLUSTERS)
        .map(|_| unit((0..DIM).map(|_| rng.normal()).collect()))
        .collect();
    let spread: Vec<f32> = (0..CLUSTERS)
        .map(|_| 0.02 + 0.06 * rng.unit() as f32)
        .collect();
    let mut texts = Vec::with_capacity(n);
    let mut vectors = Vec::with_capacity(n);
    for _ in 0..n {
        let len = 4 + rng.below(21);
        texts.push(
            (0..len)
                .map(|_| words[rng.zipf(words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" "),
        );
        let c = rng.below(CLUSTERS);
        vectors.push(unit(
            centers[c]
                .iter()
                .map(|x| x + spread[c] * rng.normal())
                .collect(),
        ));
    }
    Corpus { texts, vectors }
}

/// `count` hybrid queries (a stored vector plus noise, 1-3 words) and the same queries
/// without their words (dense-only).
pub(crate) fn requests(
    corpus: &Corpus,
    rng: &mut Rng,
    count: usize,
) -> (Vec<SearchRequest>, Vec<SearchRequest>) {
    let words = vocabulary();
    let hybrid: Vec<SearchRequest> = (0..count)
        .map(|_| {
            let near = &corpus.vectors[rng.below(corpus.vectors.len())];
            let embedding = unit(near.iter().map(|x| x + 0.03 * rng.normal()).collect());
            let text = (0..1 + rng.below(3))
                .map(|_| words[rng.zipf(words.len())].as_str())
                .collect::<Vec<_>>()
                .join(" ");
            SearchRequest {
                terms: query_terms(&text),
                query: text,
                embedding,
                top_k: TOP_K,
                filter: Default::default(),
            }
        })
        .collect();
    let dense_only = hybrid
        .iter()
        .map(|r| SearchRequest {
            terms: Vec::new(),
            ..r.clone()
        })
        .collect();
    (hybrid, dense_only)
}
