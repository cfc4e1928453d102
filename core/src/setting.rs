//! The words a switch setting accepts, in one place: every crate that reads a
//! `CORTEX_*` switch from the environment (the layers, the Postgres options, the provider
//! options) accepts the same ones, so `on` means the same everywhere.

/// What a message about a bad switch value offers instead.
pub const SWITCH_WORDS: &str = "1, true, yes or on to enable; 0, false, no or off to disable";

/// A switch's value: `1/true/yes/on` or `0/false/no/off`, any case, surrounding spaces
/// ignored; `None` for anything else (the caller names the variable in its own error).
pub fn parse_switch(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn switches_read_the_same_words_everywhere() {
        for on in ["1", "true", "YES", " on "] {
            assert_eq!(parse_switch(on), Some(true), "{on:?}");
        }
        for off in ["0", "False", "no", "OFF\n"] {
            assert_eq!(parse_switch(off), Some(false), "{off:?}");
        }
        for bad in ["", "2", "enabled", "y"] {
            assert_eq!(parse_switch(bad), None, "{bad:?}");
        }
    }
}
