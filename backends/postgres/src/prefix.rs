//! Prefix lookups of memory ids as a range scan.

/// Bounds of the ids whose hyphenated form starts with `prefix`, or `None` when no id can
/// (a character out of place), so the unique index on id serves the lookup.
pub(crate) fn prefix_bounds(prefix: &str) -> Option<(uuid::Uuid, uuid::Uuid)> {
    const TEMPLATE: &[u8] = b"xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx";
    if prefix.len() > TEMPLATE.len() {
        return None;
    }
    let (mut low, mut high) = (String::new(), String::new());
    for (i, t) in TEMPLATE.iter().enumerate() {
        match prefix.as_bytes().get(i) {
            Some(&c) if *t == b'-' && c == b'-' => {
                low.push('-');
                high.push('-');
            }
            Some(&c) if *t == b'x' && (c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) => {
                low.push(c as char);
                high.push(c as char);
            }
            Some(_) => return None,
            None if *t == b'-' => {
                low.push('-');
                high.push('-');
            }
            None => {
                low.push('0');
                high.push('f');
            }
        }
    }
    Some((
        uuid::Uuid::parse_str(&low).ok()?,
        uuid::Uuid::parse_str(&high).ok()?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_bounds_cover_exactly_the_prefix() {
        let (low, high) = prefix_bounds("abcd").unwrap();
        assert_eq!(low.to_string(), "abcd0000-0000-0000-0000-000000000000");
        assert_eq!(high.to_string(), "abcdffff-ffff-ffff-ffff-ffffffffffff");
        let (low, _) = prefix_bounds("12345678-9a").unwrap();
        assert_eq!(low.to_string(), "12345678-9a00-0000-0000-000000000000");
        assert!(prefix_bounds("1234567x").is_none());
        assert!(
            prefix_bounds("123456789").is_none(),
            "no hyphen where one belongs"
        );
        assert!(prefix_bounds(&"a".repeat(37)).is_none());
    }
}
