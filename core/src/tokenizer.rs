//! The one tokenizer, used at write time and query time by every backend.

use std::collections::BTreeMap;

/// Lowercases `text` and splits it on every character that is not a Unicode letter or
/// digit, keeping every non-empty token. No stemming, no stop words.
pub fn tokenize(text: &str) -> Vec<String> {
    split_lowercased(&text.to_lowercase())
        .map(str::to_owned)
        .collect()
}

/// The tokens of text that is already lowercased, borrowed from it.
pub fn split_lowercased(lowered: &str) -> impl Iterator<Item = &str> {
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
}

/// Term frequencies of `text`, ordered by term (byte order), and the document length in
/// tokens. The ordering is what backends sum BM25 contributions in, so every path adds the
/// same floating-point terms in the same order.
pub fn term_frequencies(text: &str) -> (BTreeMap<String, u32>, u32) {
    let lowered = text.to_lowercase();
    let (counts, len) = counted_terms(&lowered);
    let tf = counts.into_iter().map(|(t, n)| (t.to_owned(), n)).collect();
    (tf, len)
}

/// The distinct terms of already-lowercased text with their counts, in byte order, and the
/// number of tokens: the one counting rule every index and backend uses.
pub fn counted_terms(lowered: &str) -> (Vec<(&str, u32)>, u32) {
    let mut tokens: Vec<&str> = split_lowercased(lowered).collect();
    let len = tokens.len() as u32;
    tokens.sort_unstable();
    let counts = tokens
        .chunk_by(|a, b| a == b)
        .map(|group| (group[0], group.len() as u32))
        .collect();
    (counts, len)
}

/// The distinct query terms in byte order.
pub fn query_terms(text: &str) -> Vec<String> {
    let lowered = text.to_lowercase();
    let mut terms: Vec<&str> = split_lowercased(&lowered).collect();
    terms.sort_unstable();
    terms.dedup();
    terms.into_iter().map(str::to_owned).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_on_non_alphanumerics_and_lowercases() {
        assert_eq!(
            tokenize("Hello, WORLD! id=AB-12_x  "),
            ["hello", "world", "id", "ab", "12", "x"]
        );
    }

    #[test]
    fn keeps_unicode_letters_and_digits() {
        assert_eq!(tokenize("Café Zürich ١٢٣"), ["café", "zürich", "١٢٣"]);
        assert_eq!(
            tokenize("東京タワー と 🎉 שלום"),
            ["東京タワー", "と", "שלום"]
        );
        assert!(tokenize("🎉 -- !!").is_empty());
    }

    #[test]
    fn frequencies_and_query_terms() {
        let (tf, len) = term_frequencies("b a B c a a");
        assert_eq!(len, 6);
        assert_eq!(
            tf.into_iter().collect::<Vec<_>>(),
            [("a".into(), 3), ("b".into(), 2), ("c".into(), 1)]
        );
        assert_eq!(query_terms("the cat THE dog"), ["cat", "dog", "the"]);
    }
}
