//! Passwords kept out of what is shown: a database URL as logs and `Debug` output print
//! it. A leaf: the settings of the primary and of the replicas both use it.

/// The URL with any password replaced by `***`, for logs and Debug output.
pub fn redact_url(url: &str) -> String {
    let mut out = url.to_owned();
    // URL form: scheme://user:password@host...
    if let Some(scheme_end) = out.find("://") {
        let rest_start = scheme_end + 3;
        let authority_end = out[rest_start..]
            .find(['/', '?'])
            .map_or(out.len(), |i| rest_start + i);
        if let Some(at) = out[rest_start..authority_end].rfind('@') {
            let userinfo = &out[rest_start..rest_start + at];
            if let Some(colon) = userinfo.find(':') {
                let start = rest_start + colon + 1;
                out.replace_range(start..rest_start + at, "***");
            }
        }
    }
    // `password=` as a URL query parameter or a key=value pair.
    let mut redacted = String::with_capacity(out.len());
    let mut rest = out.as_str();
    while let Some(pos) = rest.find("password=") {
        let boundary = pos == 0 || matches!(rest.as_bytes()[pos - 1], b'?' | b'&' | b' ');
        let value_start = pos + "password=".len();
        redacted.push_str(&rest[..value_start]);
        if boundary {
            let value_end = rest[value_start..]
                .find(['&', ' '])
                .map_or(rest.len(), |i| value_start + i);
            redacted.push_str("***");
            rest = &rest[value_end..];
        } else {
            rest = &rest[value_start..];
        }
    }
    redacted.push_str(rest);
    redacted
}
