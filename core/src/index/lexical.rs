//! Okapi BM25 over an inverted index, with the exact arithmetic every backend must reproduce.

use rustc_hash::FxHashMap;

/// Term-frequency saturation (Lucene's default).
pub const BM25_K1: f64 = 1.2;
/// Length normalisation. Memories are short and of similar length (a turn, a fact); the
/// usual 0.75 penalised a memory for a few more words than its neighbours
/// (docs/RETRIEVAL.md has the sweep).
pub const BM25_B: f64 = 0.3;

/// Inverse document frequency: `ln(1 + (N - df + 0.5) / (df + 0.5))`.
pub fn bm25_idf(live_docs: u64, doc_freq: u64) -> f64 {
    let (n, df) = (live_docs as f64, doc_freq as f64);
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// One term's contribution to a document's score. A document's score is the sum of its
/// matched terms' contributions, added in the terms' byte order (floating-point addition
/// is not associative, so the order is part of the contract).
pub fn bm25_term_score(idf: f64, tf: u32, doc_len: u32, avg_doc_len: f64) -> f64 {
    let (tf, dl) = (f64::from(tf), f64::from(doc_len));
    idf * (tf * (BM25_K1 + 1.0) / (tf + BM25_K1 * (1.0 - BM25_B + BM25_B * dl / avg_doc_len)))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Posting {
    pub(super) row: u32,
    pub(super) tf: u32,
}

/// Postings keyed by index row. Rows move when a document is removed (swap-remove); the
/// terms whose postings to re-point are found by analysing the row's text again, not
/// kept per row (they were a sixth of the index's bytes, and a snapshot would have to
/// write or rebuild them).
#[derive(Debug, Clone, Default)]
pub(crate) struct LexicalIndex {
    /// Term ids; Fx hashing, since terms are not attacker-chosen keys of a shared table
    /// and SipHash dominated index builds.
    term_ids: FxHashMap<String, u32>,
    postings: Vec<Vec<Posting>>,
    /// Each row's number of terms: also the sum of the term frequencies of its postings.
    doc_len: Vec<u32>,
    total_len: u64,
}

impl LexicalIndex {
    pub(crate) fn push(&mut self, text: &str) {
        let row = self.doc_len.len() as u32;
        // Count on one lowercased copy; terms borrow from it unless stemming changed
        // them, and only a term new to the index allocates its own string.
        let lowered = text.to_lowercase();
        let (counts, len) = crate::tokenizer::counted_terms(&lowered);
        for (term, tf) in counts {
            let id = self.intern(&term);
            self.postings[id as usize].push(Posting { row, tf });
        }
        self.doc_len.push(len);
        self.total_len += u64::from(len);
    }

    /// Every term (in id order) with its postings, and each row's length: what a
    /// snapshot writes. The rest is derived from these on reading.
    pub(super) fn parts(&self) -> (Vec<(&str, &[Posting])>, &[u32]) {
        let mut terms: Vec<(&str, &[Posting])> = vec![("", &[]); self.postings.len()];
        for (term, &id) in &self.term_ids {
            terms[id as usize] = (term.as_str(), &self.postings[id as usize]);
        }
        (terms, &self.doc_len)
    }

    /// The index [`parts`](Self::parts) describes; `None` when they are inconsistent (a
    /// repeated term, a posting of a row out of range, a row's frequencies not adding up
    /// to its length).
    pub(super) fn from_parts(
        terms: Vec<(String, Vec<Posting>)>,
        doc_len: Vec<u32>,
    ) -> Option<Self> {
        let mut per_row = vec![0u64; doc_len.len()];
        let mut term_ids = FxHashMap::default();
        term_ids.reserve(terms.len());
        let mut postings = Vec::with_capacity(terms.len());
        for (id, (term, list)) in terms.into_iter().enumerate() {
            for p in &list {
                *per_row.get_mut(p.row as usize)? += u64::from(p.tf);
            }
            if term_ids.insert(term, u32::try_from(id).ok()?).is_some() {
                return None;
            }
            postings.push(list);
        }
        // With every row's frequencies adding up to its length, a removal finds all of a
        // row's postings (see `each_posting_of`).
        if per_row
            .iter()
            .zip(&doc_len)
            .any(|(&sum, &len)| sum != u64::from(len))
        {
            return None;
        }
        let total_len = doc_len.iter().map(|&l| u64::from(l)).sum();
        Some(Self {
            term_ids,
            postings,
            doc_len,
            total_len,
        })
    }

    fn intern(&mut self, term: &str) -> u32 {
        if let Some(&id) = self.term_ids.get(term) {
            return id;
        }
        let id = self.postings.len() as u32;
        self.term_ids.insert(term.to_owned(), id);
        self.postings.push(Vec::new());
        id
    }

    /// Removes `row`, whose text is `text`, moving the last row (whose text is
    /// `last_text`) into its place, as the dense matrix does.
    pub(crate) fn swap_remove(&mut self, row: usize, text: &str, last_text: &str) {
        let last = self.doc_len.len() - 1;
        self.each_posting_of(row, text, |list, at| {
            list.swap_remove(at);
        });
        if row != last {
            self.each_posting_of(last, last_text, |list, at| list[at].row = row as u32);
        }
        self.total_len -= u64::from(self.doc_len[row]);
        self.doc_len.swap_remove(row);
    }

    /// Calls `f` with each posting of `row` (its list and its place in the list), found
    /// through the terms of `text` analysed again. Their frequencies must add up to the
    /// row's length; if they do not (the analysis changed since the row was indexed),
    /// every list is searched instead, so a row never keeps a posting it should lose.
    fn each_posting_of(
        &mut self,
        row: usize,
        text: &str,
        mut f: impl FnMut(&mut Vec<Posting>, usize),
    ) {
        let lowered = text.to_lowercase();
        let (counts, _) = crate::tokenizer::counted_terms(&lowered);
        let mut plan: Vec<(usize, usize)> = Vec::with_capacity(counts.len());
        let mut found = 0u64;
        for (term, _) in &counts {
            let Some(&id) = self.term_ids.get(term.as_ref()) else {
                continue;
            };
            let list = &self.postings[id as usize];
            if let Some(at) = list.iter().position(|p| p.row as usize == row) {
                found += u64::from(list[at].tf);
                plan.push((id as usize, at));
            }
        }
        if found != u64::from(self.doc_len[row]) {
            plan.clear();
            for (id, list) in self.postings.iter().enumerate() {
                if let Some(at) = list.iter().position(|p| p.row as usize == row) {
                    plan.push((id, at));
                }
            }
        }
        for (id, at) in plan {
            f(&mut self.postings[id], at);
        }
    }

    /// Gives back what the lists grew into and do not use (a list of one posting had
    /// room for four).
    pub(crate) fn shrink_to_fit(&mut self) {
        self.postings.iter_mut().for_each(Vec::shrink_to_fit);
        self.postings.shrink_to_fit();
        self.doc_len.shrink_to_fit();
        self.term_ids.shrink_to_fit();
    }

    pub(crate) fn bytes(&self) -> usize {
        let postings: usize = self.postings.iter().map(|p| p.capacity() * 8 + 24).sum();
        let terms: usize = self.term_ids.keys().map(|k| k.capacity() + 24 + 4).sum();
        postings + terms + self.doc_len.capacity() * 4
    }

    /// The idf of each of `terms` (distinct, byte-ordered) over the live rows; a term no
    /// live row holds has document frequency 0.
    pub(crate) fn idfs(&self, terms: &[String]) -> Vec<f64> {
        let live = self.doc_len.len() as u64;
        terms
            .iter()
            .map(|t| {
                let df = self
                    .term_ids
                    .get(t)
                    .map_or(0, |&id| self.postings[id as usize].len() as u64);
                bm25_idf(live, df)
            })
            .collect()
    }

    /// BM25 scores of every row containing at least one of `terms` (distinct, byte-ordered).
    pub(crate) fn scores(&self, terms: &[String]) -> Vec<(usize, f64)> {
        let live = self.doc_len.len() as u64;
        if live == 0 {
            return Vec::new();
        }
        let avg_len = self.total_len as f64 / live as f64;
        let mut score = vec![0.0f64; self.doc_len.len()];
        let mut touched = Vec::new();
        for term in terms {
            let Some(&id) = self.term_ids.get(term) else {
                continue;
            };
            let list = &self.postings[id as usize];
            if list.is_empty() {
                continue;
            }
            let idf = bm25_idf(live, list.len() as u64);
            for p in list {
                let row = p.row as usize;
                if score[row] == 0.0 {
                    touched.push(row);
                }
                score[row] += bm25_term_score(idf, p.tf, self.doc_len[row], avg_len);
            }
        }
        touched.into_iter().map(|row| (row, score[row])).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idf_and_term_score_follow_the_formula() {
        // N = 3, df = 1: ln(1 + 2.5 / 1.5)
        assert!((bm25_idf(3, 1) - (1.0f64 + 2.5 / 1.5).ln()).abs() < 1e-15);
        // A term in every document still scores above zero.
        assert!(bm25_idf(3, 3) > 0.0);
        // At the average length the normalisation is 1: idf * tf * (k1 + 1) / (tf + k1).
        let s = bm25_term_score(1.0, 2, 4, 4.0);
        assert!((s - 2.0 * 2.2 / (2.0 + 1.2)).abs() < 1e-15);
        // Twice the average length: k1 * (1 - b + 2b) = 1.2 * 1.3.
        let s = bm25_term_score(1.0, 1, 8, 4.0);
        assert!((s - 2.2 / (1.0 + 1.2 * 1.3)).abs() < 1e-15);
    }

    #[test]
    fn removal_keeps_scores_equal_to_a_fresh_build() {
        let docs = [
            "apple pie",
            "banana split",
            "apple banana",
            "cherry apple apple",
        ];
        let mut inc = LexicalIndex::default();
        for d in docs {
            inc.push(d);
        }
        inc.swap_remove(1, docs[1], docs[3]);
        // After swap_remove(1) the rows are: 0, 3, 2.
        let mut fresh = LexicalIndex::default();
        for d in [docs[0], docs[3], docs[2]] {
            fresh.push(d);
        }
        let q = crate::tokenizer::query_terms("apple banana");
        let mut a = inc.scores(&q);
        // A text that no longer analyses to the row's terms (the analysis changed since it
        // was indexed) still takes every posting of the row with it.
        let mut drifted = LexicalIndex::default();
        for d in docs {
            drifted.push(d);
        }
        drifted.swap_remove(1, "nothing like it", docs[3]);
        drifted.swap_remove(0, docs[0], "other words");
        let mut fresh2 = LexicalIndex::default();
        for d in [docs[2], docs[3]] {
            fresh2.push(d);
        }
        let mut c = drifted.scores(&q);
        let mut d = fresh2.scores(&q);
        c.sort_by_key(|x| x.0);
        d.sort_by_key(|x| x.0);
        assert_eq!(c, d);
        let mut b = fresh.scores(&q);
        a.sort_by_key(|x| x.0);
        b.sort_by_key(|x| x.0);
        assert_eq!(a, b);
        assert_eq!(a.len(), 3);
    }
}
