//! An 8-bit copy of the unit vectors that bounds every row's cosine, so an exact search
//! scores in full only the rows that could still reach the top.
//!
//! Each row `v` is stored as codes `q` (i8) with one scale `s` per row, `v = s q + e`;
//! the query `u` likewise as `u = t p + f`, with 16-bit codes `p` (the query is coded
//! once per search, so its finer codes cost nothing to keep). Then, exactly,
//!
//! `v · u = s t (q · p) + s (q · f) + e · u`,
//!
//! and by Cauchy-Schwarz the last two terms are at most `s |q| |f| + |e| |u|` in size.
//! `q · p` is an integer sum, so the scan reads a quarter of the bytes of the f32 rows
//! and does integer work, and the radius is exact arithmetic's, not an estimate: a row
//! whose upper bound is below the `pool`-th best lower bound cannot be in the top
//! `pool`, whatever the rounding of its exact score. With 8-bit query codes `|f|` was as
//! large as `|e|`; at 16 bits it is a hundredth of it, which halves the radius and so
//! the rows left to score exactly (docs/BENCHMARKS.md).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use pulp::{Arch, Simd, WithSimd};

/// Largest row code magnitude: symmetric, so `-q` is always a code too.
const LEVELS: f64 = 127.0;

/// Largest query code magnitude at `dimension`: as fine as an i16 holds, but no finer
/// than keeps `|q · p| <= d 127 levels` inside an i32 (22,017 at d = 768; below 127
/// only past d = 133,000).
fn query_levels(dimension: usize) -> f64 {
    let fits = (f64::from(i32::MAX) / (LEVELS * dimension.max(1) as f64)).floor();
    fits.clamp(1.0, f64::from(i16::MAX))
}

/// Added to every radius: covers the f64 arithmetic of the bound and the rounding of the
/// exact score to f32 (both below 1e-7 for unit vectors).
const SLACK: f64 = 1e-6;

/// Per-row constants, stored as f32 and rounded up where a bound uses them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct RowBound {
    /// `s`: what one code step is worth.
    pub(super) scale: f32,
    /// `s |q|`, rounded up.
    pub(super) code_norm: f32,
    /// `|e|`, rounded up.
    pub(super) error_norm: f32,
}

/// The codes of every row of a [`DenseMatrix`](super::dense::DenseMatrix), row for row.
#[derive(Debug, Clone, Default)]
pub(crate) struct CompactCodes {
    dimension: usize,
    codes: Vec<i8>,
    rows: Vec<RowBound>,
}

/// A query in the same form, with 16-bit codes: codes, their scale, and the norms of its
/// residual and of itself.
pub(crate) struct CompactQuery {
    codes: Vec<i16>,
    scale: f64,
    residual_norm: f64,
    norm: f64,
}

impl CompactCodes {
    pub(crate) fn new(dimension: usize) -> Self {
        Self {
            dimension,
            codes: Vec::new(),
            rows: Vec::new(),
        }
    }

    /// Codes and bounds as a snapshot wrote them; `None` when their lengths disagree with
    /// `dimension`.
    pub(super) fn from_parts(
        dimension: usize,
        codes: Vec<i8>,
        rows: Vec<RowBound>,
    ) -> Option<Self> {
        (codes.len() == rows.len().checked_mul(dimension)?).then_some(Self {
            dimension,
            codes,
            rows,
        })
    }

    /// The codes, row-major, and each row's bound constants (what a snapshot writes).
    pub(super) fn parts(&self) -> (&[i8], &[RowBound]) {
        (&self.codes, &self.rows)
    }

    /// Appends the codes of `row`, a vector as the matrix stores it.
    pub(crate) fn push(&mut self, row: &[f32]) {
        let (codes, scale, error_norm) = quantize(row, LEVELS, |c| c as i8);
        let code_norm = codes
            .iter()
            .map(|c| f64::from(*c) * f64::from(*c))
            .sum::<f64>()
            .sqrt()
            * f64::from(scale);
        self.codes.extend_from_slice(&codes);
        self.rows.push(RowBound {
            scale,
            code_norm: round_up(code_norm),
            error_norm: round_up(error_norm),
        });
    }

    /// Mirrors `Vec::swap_remove`, as the matrix does.
    pub(crate) fn swap_remove(&mut self, row: usize) {
        let d = self.dimension;
        let last = self.rows.len() - 1;
        if row != last {
            self.codes.copy_within(last * d..(last + 1) * d, row * d);
        }
        self.codes.truncate(last * d);
        self.rows.swap_remove(row);
    }

    pub(crate) fn len(&self) -> usize {
        self.rows.len()
    }

    pub(crate) fn dimension(&self) -> usize {
        self.dimension
    }

    pub(crate) fn shrink_to_fit(&mut self) {
        self.codes.shrink_to_fit();
        self.rows.shrink_to_fit();
    }

    pub(crate) fn bytes(&self) -> usize {
        self.codes.capacity() + self.rows.capacity() * std::mem::size_of::<RowBound>()
    }

    /// Every row among `rows` (all rows when `None`) whose cosine with `query` could be
    /// among the `pool` best of them, in ascending row order: a superset of the top
    /// `pool`, usually a few more rows than `pool`.
    pub(crate) fn candidates(
        &self,
        query: &CompactQuery,
        pool: usize,
        rows: Option<&[usize]>,
    ) -> Vec<usize> {
        let scan = Scan::new(self, query, pool, rows);
        let kept = scan.work();
        scan.finish([kept])
    }

    /// `row`'s cosine with `query` lies in the returned interval.
    #[inline(always)]
    fn bound(&self, query: &CompactQuery, row: usize) -> (f64, f64) {
        let d = self.dimension;
        let code = &self.codes[row * d..(row + 1) * d];
        let r = self.rows[row];
        let centre = f64::from(r.scale) * query.scale * f64::from(dot(code, &query.codes));
        let radius = f64::from(r.code_norm) * query.residual_norm
            + f64::from(r.error_norm) * query.norm
            + SLACK;
        (centre - radius, centre + radius)
    }
}

/// Rows a scan hands out at a time: large enough that taking one costs nothing beside
/// scoring it, small enough that two threads finish together.
const CHUNK: usize = 2048;

/// One search's pass over the codes, which any number of threads can share: each takes
/// chunks of rows until none is left ([`work`](Self::work)), then
/// [`finish`](Self::finish) keeps what could be in the top `pool`.
///
/// Each thread keeps the `pool` best lower bounds it has seen in a min-heap, whose top
/// is then a threshold: at least `pool` rows score that much. The threads share the
/// highest threshold any has reached, so a row whose upper bound is below it cannot be
/// in the top `pool` and is dropped at once; the rows kept are filtered again by the
/// final value.
pub(crate) struct Scan<'a> {
    codes: &'a CompactCodes,
    query: &'a CompactQuery,
    pool: usize,
    rows: Option<&'a [usize]>,
    next: AtomicUsize,
    threshold: Mutex<f64>,
    /// The widest SIMD the CPU has, found at run time: the chunk loop is compiled for
    /// it (AVX2 on most x86-64) while the binary stays built for the baseline.
    arch: Arch,
}

impl<'a> Scan<'a> {
    pub(crate) fn new(
        codes: &'a CompactCodes,
        query: &'a CompactQuery,
        pool: usize,
        rows: Option<&'a [usize]>,
    ) -> Self {
        Self {
            codes,
            query,
            pool,
            rows,
            next: AtomicUsize::new(0),
            threshold: Mutex::new(f64::NEG_INFINITY),
            arch: Arch::new(),
        }
    }

    /// The same scan on the given instruction set (tests compare them).
    #[cfg(test)]
    fn on(mut self, arch: Arch) -> Self {
        self.arch = arch;
        self
    }

    fn len(&self) -> usize {
        self.rows.map_or(self.codes.rows.len(), <[usize]>::len)
    }

    fn shared(&self) -> f64 {
        *self
            .threshold
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn publish(&self, threshold: f64) {
        let mut shared = self
            .threshold
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *shared = shared.max(threshold);
    }

    /// Scans chunks until every row has been taken; returns what this thread kept.
    pub(crate) fn work(&self) -> Part {
        let mut kept: Vec<(usize, f64)> = Vec::new();
        if self.pool == 0 {
            return Part {
                kept,
                lows: Vec::new(),
            };
        }
        let mut best_lows: BinaryHeap<Reverse<Total>> = BinaryHeap::with_capacity(self.pool + 1);
        let mut own = f64::NEG_INFINITY;
        loop {
            let start = self.next.fetch_add(CHUNK, Ordering::Relaxed);
            if start >= self.len() {
                let lows = best_lows.into_iter().map(|Reverse(Total(lo))| lo).collect();
                return Part { kept, lows };
            }
            let end = (start + CHUNK).min(self.len());
            let mut threshold = own.max(self.shared());
            // The same integer sums and the same f64 arithmetic whatever the SIMD (Rust
            // never fuses a multiply and an add unasked), so the bounds are bit-equal.
            self.arch.dispatch(Chunk {
                scan: self,
                rows: start..end,
                threshold: &mut threshold,
                own: &mut own,
                best_lows: &mut best_lows,
                kept: &mut kept,
            });
            self.publish(own);
        }
    }

    /// The rows every thread kept that the final threshold leaves, ascending. The final
    /// threshold is the `pool`-th best of all the threads' best lower bounds together: a
    /// row a thread skipped had its upper bound, so its lower bound, below a threshold no
    /// higher than this one, so the union holds the `pool` best lower bounds of all rows.
    pub(crate) fn finish(&self, parts: impl IntoIterator<Item = Part>) -> Vec<usize> {
        let parts: Vec<Part> = parts.into_iter().collect();
        let mut lows: Vec<f64> = parts.iter().flat_map(|p| p.lows.iter().copied()).collect();
        let mut threshold = self.shared();
        if self.pool > 0 && lows.len() >= self.pool {
            let (_, pool_th, _) = lows.select_nth_unstable_by(self.pool - 1, |a, b| b.total_cmp(a));
            threshold = threshold.max(*pool_th);
        }
        let mut rows: Vec<usize> = parts
            .into_iter()
            .flat_map(|p| p.kept)
            .filter(|&(_, hi)| hi >= threshold)
            .map(|(row, _)| row)
            .collect();
        rows.sort_unstable();
        rows
    }
}

/// One chunk of a scan's rows, run through [`Arch::dispatch`]: `with_simd` is compiled
/// once per instruction set, with [`CompactCodes::bound`] and [`dot`] inlined into it.
struct Chunk<'s, 'a> {
    scan: &'s Scan<'a>,
    rows: std::ops::Range<usize>,
    threshold: &'s mut f64,
    own: &'s mut f64,
    best_lows: &'s mut BinaryHeap<Reverse<Total>>,
    kept: &'s mut Vec<(usize, f64)>,
}

impl WithSimd for Chunk<'_, '_> {
    type Output = ();

    #[inline(always)]
    fn with_simd<S: Simd>(self, _simd: S) {
        let Chunk {
            scan,
            rows,
            threshold,
            own,
            best_lows,
            kept,
        } = self;
        for at in rows {
            let row = scan.rows.map_or(at, |rows| rows[at]);
            let (lo, hi) = scan.codes.bound(scan.query, row);
            if hi < *threshold {
                continue;
            }
            if best_lows.len() < scan.pool {
                best_lows.push(Reverse(Total(lo)));
            } else if lo > *own {
                best_lows.pop();
                best_lows.push(Reverse(Total(lo)));
            }
            if best_lows.len() == scan.pool {
                *own = best_lows.peek().map_or(*own, |Reverse(Total(t))| *t);
                *threshold = threshold.max(*own);
            }
            kept.push((row, hi));
        }
    }
}

/// What one thread's share of a [`Scan`] kept: rows with their upper bounds, and the
/// best lower bounds it saw (at most `pool`).
pub(crate) struct Part {
    kept: Vec<(usize, f64)>,
    lows: Vec<f64>,
}

/// An f64 ordered by `total_cmp` (bounds are never NaN: every input is finite).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Total(f64);

impl Eq for Total {}

impl PartialOrd for Total {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Total {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        self.0.total_cmp(&other.0)
    }
}

impl CompactQuery {
    /// `query` as the matrix scores it (already unit length).
    pub(crate) fn new(query: &[f32]) -> Self {
        let (codes, scale, residual_norm) =
            quantize(query, query_levels(query.len()), |c| c as i16);
        let norm = query
            .iter()
            .map(|x| f64::from(*x) * f64::from(*x))
            .sum::<f64>()
            .sqrt();
        Self {
            codes,
            scale: f64::from(scale),
            residual_norm: residual_norm * (1.0 + 1e-9),
            norm: norm * (1.0 + 1e-9),
        }
    }
}

/// Codes (at most `levels` in size, made by `code` from an integral f64 in range), scale
/// and residual norm `|v - s q|` of `v`. The residual is computed against the f32 scale
/// that is stored, so the bound holds for what the scan multiplies by.
fn quantize<C: Copy + Default>(
    v: &[f32],
    levels: f64,
    code: impl Fn(f64) -> C,
) -> (Vec<C>, f32, f64) {
    let largest = v.iter().fold(0.0f64, |m, x| m.max(f64::from(x.abs())));
    let scale = (largest / levels) as f32;
    if scale == 0.0 || !scale.is_finite() {
        // All zero (or too small to scale): every code 0 and the whole vector residual.
        let norm = v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
        return (vec![C::default(); v.len()], 0.0, norm);
    }
    let step = f64::from(scale);
    let mut residual = 0.0f64;
    let codes = v
        .iter()
        .map(|x| {
            let x = f64::from(*x);
            let c = (x / step).round().clamp(-levels, levels);
            residual += (x - c * step).powi(2);
            code(c)
        })
        .collect();
    (codes, scale, residual.sqrt())
}

/// The next f32 at or above `x`, so a stored norm never understates.
fn round_up(x: f64) -> f32 {
    let y = x as f32;
    if f64::from(y) >= x { y } else { y.next_up() }
}

/// Integer dot product of row codes and query codes over 32 independent lanes, so the
/// compiler keeps them in SIMD registers (32 measured faster than 16 at d = 768); the
/// query's levels keep every sum inside an i32 ([`query_levels`]). Inlined into the
/// scan's loop, so it is compiled for the SIMD that loop is dispatched to.
#[inline(always)]
fn dot(a: &[i8], b: &[i16]) -> i32 {
    const LANES: usize = 32;
    let mut acc = [0i32; LANES];
    let (a_chunks, b_chunks) = (a.chunks_exact(LANES), b.chunks_exact(LANES));
    let (a_rest, b_rest) = (a_chunks.remainder(), b_chunks.remainder());
    for (x, y) in a_chunks.zip(b_chunks) {
        for i in 0..LANES {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut sum: i32 = acc.iter().sum();
    for (x, y) in a_rest.iter().zip(b_rest) {
        sum += i32::from(*x) * i32::from(*y);
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values in [-1, 1] from a xorshift generator started at `seed`.
    fn uniform(mut seed: u64) -> impl FnMut() -> f32 {
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % 20_001) as f32 / 10_000.0 - 1.0
        }
    }

    /// The bound holds for every row: the exact dot product lies between the two ends.
    #[test]
    fn the_bound_contains_the_exact_score() {
        let d = 37;
        let mut next = uniform(7);
        let mut codes = CompactCodes::new(d);
        let mut rows = Vec::new();
        for i in 0..300 {
            let mut v: Vec<f32> = (0..d).map(|_| next()).collect();
            if i % 7 == 0 {
                // One huge component: most others round to code 0.
                v[i % d] = 1e4;
            }
            let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
            let v: Vec<f32> = v.iter().map(|x| x / n).collect();
            codes.push(&v);
            rows.push(v);
        }
        let u: Vec<f32> = {
            let u: Vec<f32> = (0..d).map(|_| next()).collect();
            let n = u.iter().map(|x| x * x).sum::<f32>().sqrt();
            u.iter().map(|x| x / n).collect()
        };
        let q = CompactQuery::new(&u);
        for (row, v) in rows.iter().enumerate() {
            let exact: f64 = v
                .iter()
                .zip(&u)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            let r = codes.rows[row];
            let code = &codes.codes[row * d..(row + 1) * d];
            let centre = f64::from(r.scale) * q.scale * f64::from(dot(code, &q.codes));
            let radius =
                f64::from(r.code_norm) * q.residual_norm + f64::from(r.error_norm) * q.norm;
            assert!(
                (exact - centre).abs() <= radius,
                "row {row}: {exact} vs {centre} ± {radius}"
            );
        }
    }

    /// The scan dispatched to this CPU's SIMD keeps exactly what the baseline code keeps,
    /// bounds bit for bit (elsewhere every test runs on the dispatched one only).
    #[test]
    fn the_dispatched_scan_equals_the_baseline_scan() {
        let mut next = uniform(11);
        for d in [3, 67, 768] {
            let mut codes = CompactCodes::new(d);
            for i in 0..3000 {
                let mut v: Vec<f32> = (0..d).map(|_| next()).collect();
                if i % 5 == 0 {
                    v[i % d] *= 1e3;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                codes.push(&v.iter().map(|x| x / n).collect::<Vec<_>>());
            }
            let u: Vec<f32> = (0..d).map(|_| next()).collect();
            let n = u.iter().map(|x| x * x).sum::<f32>().sqrt();
            let query = CompactQuery::new(&u.iter().map(|x| x / n).collect::<Vec<_>>());
            let every_third: Vec<usize> = (0..3000).step_by(3).collect();
            for pool in [1, 10, 50] {
                for rows in [None, Some(&every_third[..])] {
                    let part = |arch| {
                        let Part { kept, lows } =
                            Scan::new(&codes, &query, pool, rows).on(arch).work();
                        let bits =
                            |v: Vec<f64>| -> Vec<u64> { v.into_iter().map(f64::to_bits).collect() };
                        let (rows, his): (Vec<usize>, Vec<f64>) = kept.into_iter().unzip();
                        (rows, bits(his), bits(lows))
                    };
                    let (dispatched, baseline) = (part(Arch::new()), part(Arch::Scalar));
                    assert!(!dispatched.0.is_empty());
                    assert_eq!(dispatched, baseline, "d {d}, pool {pool}");
                }
            }
        }
    }

    #[test]
    fn dot_matches_a_plain_sum_for_odd_lengths() {
        let a: Vec<i8> = (0..53).map(|i| (i * 37 % 255 - 127) as i8).collect();
        let b: Vec<i16> = (0..53)
            .map(|i| (i * 9_091 % 44_035 - 22_017) as i16)
            .collect();
        let plain: i32 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        assert_eq!(dot(&a, &b), plain);
    }

    /// The largest sum the query's levels allow fits an i32, up to HNSW's largest
    /// dimension and past it.
    #[test]
    fn the_largest_dot_product_fits() {
        for d in [1, 3, 768, 1536, 4000, 16_000, 200_000] {
            let levels = query_levels(d);
            assert!(levels >= 1.0 && levels <= f64::from(i16::MAX), "d {d}");
            let a = vec![-127i8; d];
            let b = vec![levels as i16; d];
            let wide = -127 * i64::from(levels as i16) * d as i64;
            assert_eq!(i64::from(dot(&a, &b)), wide, "d {d}");
        }
        assert_eq!(query_levels(768), 22_017.0);
    }

    #[test]
    fn swap_remove_keeps_codes_with_their_rows() {
        let mut codes = CompactCodes::new(2);
        codes.push(&[1.0, 0.0]);
        codes.push(&[0.0, 1.0]);
        codes.push(&[0.6, 0.8]);
        codes.swap_remove(0);
        let q = CompactQuery::new(&[0.0, 1.0]);
        // Row 0 is now (0.6, 0.8), row 1 (0, 1): the best one is row 1.
        assert_eq!(codes.candidates(&q, 1, None), vec![1]);
        assert_eq!(codes.candidates(&q, 2, None), vec![0, 1]);
    }
}
