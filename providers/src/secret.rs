//! An API key that cannot leak through `Debug`, logs or error messages.

use std::fmt;

/// A credential read from the environment. `Debug` prints `***` and there is no
/// `Display`, so a key never reaches a log line or a `{:?}` of a config by accident.
#[derive(Clone, PartialEq, Eq)]
pub struct ApiKey(String);

impl ApiKey {
    pub fn new(key: impl Into<String>) -> Self {
        Self(key.into())
    }

    /// The key itself, for the one place that puts it in a request header.
    pub(crate) fn expose(&self) -> &str {
        &self.0
    }

    /// `text` with every occurrence of the key replaced by `***`: providers sometimes
    /// echo the key they were sent in their error messages.
    pub(crate) fn redact(&self, text: &str) -> String {
        // An empty key would "occur" between every character.
        if self.0.is_empty() {
            text.to_owned()
        } else {
            text.replace(&self.0, "***")
        }
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// Redacts `text` with an optional key.
pub(crate) fn redact(key: Option<&ApiKey>, text: &str) -> String {
    match key {
        Some(key) => key.redact(text),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_prints_the_key() {
        let key = ApiKey::new("sk-live-123456");
        assert_eq!(format!("{key:?}"), "***");
        assert_eq!(format!("{:?}", Some(key.clone())), "Some(***)");
        assert!(!format!("{key:#?}").contains("123456"));
    }

    #[test]
    fn redact_removes_every_occurrence() {
        let key = ApiKey::new("abc123");
        assert_eq!(key.redact("bad key abc123 (abc123)"), "bad key *** (***)");
        assert_eq!(ApiKey::new("").redact("text"), "text");
        assert_eq!(redact(None, "abc123"), "abc123");
    }
}
