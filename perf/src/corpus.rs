//! Synthetic memories: clustered unit vectors and texts drawn from a Zipf-like vocabulary,
//! so BM25 sees realistic document frequencies and dense search realistic neighbourhoods.

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// Distinct words in the vocabulary.
const VOCABULARY: usize = 20_000;

#[derive(Debug)]
pub struct Corpus {
    pub texts: Vec<String>,
    /// Row-major, `texts.len() * dimension` values, each row unit length.
    pub vectors: Vec<f32>,
    pub dimension: usize,
}

impl Corpus {
    pub fn vector(&self, i: usize) -> &[f32] {
        &self.vectors[i * self.dimension..(i + 1) * self.dimension]
    }
}

fn word(rank: usize) -> String {
    // Pronounceable, distinct, and lowercase ASCII: the tokenizer keeps each whole.
    const SYLLABLES: [&str; 16] = [
        "ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "be", "da", "fu", "gi", "ho", "ju", "pe",
        "zo",
    ];
    let mut n = rank + 1;
    let mut w = String::new();
    while n > 0 {
        w.push_str(SYLLABLES[n % 16]);
        n /= 16;
    }
    w
}

/// Zipf(1) rank sampling by inverting the harmonic CDF approximately (ln-based).
fn zipf_rank(rng: &mut SmallRng) -> usize {
    let u: f64 = rng.random();
    let r = ((VOCABULARY as f64).ln() * u).exp() as usize;
    r.saturating_sub(1).min(VOCABULARY - 1)
}

pub fn text(rng: &mut SmallRng) -> String {
    let len = rng.random_range(8..40);
    (0..len)
        .map(|_| word(zipf_rank(rng)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// `n` memories of `dimension`, deterministic for a seed.
pub fn generate(n: usize, dimension: usize, seed: u64) -> Corpus {
    let mut rng = SmallRng::seed_from_u64(seed);
    let clusters = 64;
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| unit(&mut rng, dimension, None))
        .collect();
    let mut vectors = Vec::with_capacity(n * dimension);
    let mut texts = Vec::with_capacity(n);
    for _ in 0..n {
        let centre = &centres[rng.random_range(0..clusters)];
        vectors.extend(unit(&mut rng, dimension, Some(centre)));
        texts.push(text(&mut rng));
    }
    Corpus {
        texts,
        vectors,
        dimension,
    }
}

/// A random unit vector, pulled towards `centre` when given.
pub fn unit(rng: &mut SmallRng, dimension: usize, centre: Option<&[f32]>) -> Vec<f32> {
    let mut v: Vec<f32> = (0..dimension)
        .map(|_| rng.random::<f32>() * 2.0 - 1.0)
        .collect();
    if let Some(c) = centre {
        for (x, y) in v.iter_mut().zip(c) {
            *x = 0.5 * *x + 2.0 * y;
        }
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    v.iter_mut().for_each(|x| *x /= norm);
    v
}
