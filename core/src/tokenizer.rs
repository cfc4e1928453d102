//! The one lexical analyser, used at write time and query time by every backend.
//!
//! Text is lowercased and split on every character that is not a Unicode letter or digit;
//! English function words are dropped; every other word is reduced to its Snowball
//! (Porter 2) English stem, so "hiking", "hiked" and "hikes" meet. docs/RETRIEVAL.md has
//! the measurements behind each step.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};

/// Names the analysis below. A store that keeps derived terms (the Postgres postings)
/// records it and re-derives them when it changes.
pub const ANALYZER: &str = "en-stop-snowball/1";

/// English function words, as the words the splitter produces: NLTK's English list with
/// its apostrophe forms split the same way ("don't" -> "don", "t"). "won" is kept: it is
/// far more often the verb than a piece of "won't". Sorted, for binary search.
pub const STOPWORDS: [&str; 152] = [
    "a",
    "about",
    "above",
    "after",
    "again",
    "against",
    "ain",
    "all",
    "am",
    "an",
    "and",
    "any",
    "are",
    "aren",
    "as",
    "at",
    "be",
    "because",
    "been",
    "before",
    "being",
    "below",
    "between",
    "both",
    "but",
    "by",
    "can",
    "couldn",
    "d",
    "did",
    "didn",
    "do",
    "does",
    "doesn",
    "doing",
    "don",
    "down",
    "during",
    "each",
    "few",
    "for",
    "from",
    "further",
    "had",
    "hadn",
    "has",
    "hasn",
    "have",
    "haven",
    "having",
    "he",
    "her",
    "here",
    "hers",
    "herself",
    "him",
    "himself",
    "his",
    "how",
    "i",
    "if",
    "in",
    "into",
    "is",
    "isn",
    "it",
    "its",
    "itself",
    "just",
    "ll",
    "m",
    "ma",
    "me",
    "mightn",
    "more",
    "most",
    "mustn",
    "my",
    "myself",
    "needn",
    "no",
    "nor",
    "not",
    "now",
    "o",
    "of",
    "off",
    "on",
    "once",
    "only",
    "or",
    "other",
    "our",
    "ours",
    "ourselves",
    "out",
    "over",
    "own",
    "re",
    "s",
    "same",
    "shan",
    "she",
    "should",
    "shouldn",
    "so",
    "some",
    "such",
    "t",
    "than",
    "that",
    "the",
    "their",
    "theirs",
    "them",
    "themselves",
    "then",
    "there",
    "these",
    "they",
    "this",
    "those",
    "through",
    "to",
    "too",
    "under",
    "until",
    "up",
    "ve",
    "very",
    "was",
    "wasn",
    "we",
    "were",
    "weren",
    "what",
    "when",
    "where",
    "which",
    "while",
    "who",
    "whom",
    "why",
    "will",
    "with",
    "wouldn",
    "y",
    "you",
    "your",
    "yours",
    "yourself",
    "yourselves",
];

static STEMMER: LazyLock<Stemmer> = LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Whether a lowercased word is a function word the index leaves out.
pub fn is_stopword(word: &str) -> bool {
    STOPWORDS.binary_search(&word).is_ok()
}

/// The words of already-lowercased text, before analysis, borrowed from it.
pub fn split_lowercased(lowered: &str) -> impl Iterator<Item = &str> {
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
}

/// The index terms of already-lowercased text, in text order: function words dropped,
/// the rest stemmed (borrowed when the stem is the word itself).
pub fn analysed(lowered: &str) -> impl Iterator<Item = Cow<'_, str>> {
    split_lowercased(lowered)
        .filter(|w| !is_stopword(w))
        .map(|w| STEMMER.stem(w))
}

/// The lowercased words of `text`, unanalysed (what a reader would call its words).
pub fn words(text: &str) -> Vec<String> {
    split_lowercased(&text.to_lowercase())
        .map(str::to_owned)
        .collect()
}

/// The index terms of `text`, in text order.
pub fn tokenize(text: &str) -> Vec<String> {
    analysed(&text.to_lowercase())
        .map(Cow::into_owned)
        .collect()
}

/// Term frequencies of `text`, ordered by term (byte order), and the document length in
/// terms. The ordering is what backends sum BM25 contributions in, so every path adds the
/// same floating-point terms in the same order.
pub fn term_frequencies(text: &str) -> (BTreeMap<String, u32>, u32) {
    let lowered = text.to_lowercase();
    let (counts, len) = counted_terms(&lowered);
    let tf = counts
        .into_iter()
        .map(|(t, n)| (t.into_owned(), n))
        .collect();
    (tf, len)
}

/// The distinct terms of already-lowercased text with their counts, in byte order, and the
/// number of terms: the one counting rule every index and backend uses.
pub fn counted_terms(lowered: &str) -> (Vec<(Cow<'_, str>, u32)>, u32) {
    let mut terms: Vec<Cow<'_, str>> = analysed(lowered).collect();
    let len = terms.len() as u32;
    terms.sort_unstable();
    let counts = terms
        .chunk_by(|a, b| a == b)
        .map(|group| (group[0].clone(), group.len() as u32))
        .collect();
    (counts, len)
}

/// The distinct query terms in byte order.
pub fn query_terms(text: &str) -> Vec<String> {
    let mut terms = tokenize(text);
    terms.sort_unstable();
    terms.dedup();
    terms
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stopwords_are_sorted_and_distinct() {
        assert!(
            STOPWORDS.windows(2).all(|w| w[0] < w[1]),
            "sorted, no duplicates"
        );
        assert!(is_stopword("the") && is_stopword("did") && is_stopword("my"));
        assert!(!is_stopword("won") && !is_stopword("cello") && !is_stopword("2023"));
    }

    #[test]
    fn splits_lowercases_drops_function_words_and_stems() {
        assert_eq!(
            tokenize("Hello, WORLD! id=AB-12_x  "),
            ["hello", "world", "id", "ab", "12", "x"]
        );
        assert_eq!(
            tokenize("What did the team choose for observability tools?"),
            ["team", "choos", "observ", "tool"]
        );
        assert_eq!(tokenize("hiking hiked hikes"), ["hike", "hike", "hike"]);
        // Possessives and contractions leave their function-word pieces behind.
        assert_eq!(tokenize("Ann's dog didn't bark"), ["ann", "dog", "bark"]);
        assert_eq!(words("Ann's dog"), ["ann", "s", "dog"]);
        assert!(tokenize("Who are you and where were we?").is_empty());
    }

    #[test]
    fn numbers_and_other_scripts_pass_through() {
        assert_eq!(
            tokenize("7 May 2023, 10:30"),
            ["7", "may", "2023", "10", "30"]
        );
        assert_eq!(
            tokenize("東京タワー と 🎉 שלום"),
            ["東京タワー", "と", "שלום"]
        );
        assert!(tokenize("🎉 -- !!").is_empty());
    }

    #[test]
    fn frequencies_and_query_terms() {
        let (tf, len) = term_frequencies("b a B c a a the");
        assert_eq!(len, 3, "'a' and 'the' are function words");
        assert_eq!(
            tf.into_iter().collect::<Vec<_>>(),
            [("b".into(), 2), ("c".into(), 1)]
        );
        assert_eq!(query_terms("the cats THE dogs cat"), ["cat", "dog"]);
    }
}
