//! The resources' URIs: the ones the server lists, the templates it publishes, and what a
//! URI a client sends names.
//!
//! A URI names a memory by its full id only, never by a prefix: a prefix that is unique
//! today names another memory, or none, after the next write, and a URI a host keeps must
//! go on naming the same thing. Path segments and query values are percent-decoded (RFC
//! 6570 expansion encodes a space in an entity's name as `%20`); `+` is a plus sign, not a
//! space, since a datetime's offset is written with it.

use percent_encoding::percent_decode_str;

/// The entity graph: every entity and relation of the caller's.
pub const GRAPH: &str = "cortex://graph";
/// The caller's timeline, as `recall_timeline` returns it without arguments.
pub const TIMELINE: &str = "cortex://timeline";
/// One memory by its full id.
pub const MEMORY_TEMPLATE: &str = "cortex://memory/{id}";
/// One entity's dossier by name or alias, as `recall_about` returns it.
pub const ENTITY_TEMPLATE: &str = "cortex://entity/{name}{?limit}";
/// The timeline between two instants, as `recall_timeline` returns it.
pub const TIMELINE_TEMPLATE: &str = "cortex://timeline{?since,until,limit}";

const SCHEME: &str = "cortex://";

/// What a resource URI names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceUri {
    /// A memory, by the id as the URI spells it (checked to be a full id).
    Memory(String),
    Graph,
    Entity {
        name: String,
        limit: Option<i64>,
    },
    Timeline {
        since: Option<String>,
        until: Option<String>,
        limit: Option<i64>,
    },
}

/// Why a URI names nothing that can be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UriError {
    /// Not one of this server's URIs, or a memory id that is no id: answered as a
    /// resource that does not exist, so a malformed id tells nothing a missing one does not.
    #[error("Resource not found")]
    Unknown,
    /// A query parameter the resource does not take, given twice, or not of its form.
    #[error("{0}")]
    Parameter(String),
}

impl ResourceUri {
    pub fn parse(uri: &str) -> Result<Self, UriError> {
        let scheme = uri.get(..SCHEME.len()).ok_or(UriError::Unknown)?;
        if !scheme.eq_ignore_ascii_case(SCHEME) || uri.contains('#') {
            return Err(UriError::Unknown);
        }
        let rest = &uri[SCHEME.len()..];
        let (path, query) = rest.split_once('?').unwrap_or((rest, ""));
        let params = Query::parse(query)?;
        match path.split_once('/') {
            None if path == "graph" => {
                params.only(&[])?;
                Ok(ResourceUri::Graph)
            }
            None if path == "timeline" => {
                params.only(&["since", "until", "limit"])?;
                Ok(ResourceUri::Timeline {
                    since: params.get("since"),
                    until: params.get("until"),
                    limit: params.limit()?,
                })
            }
            Some(("memory", id)) => {
                params.only(&[])?;
                let id = decode(id).ok_or(UriError::Unknown)?;
                // Hyphenated and 36 characters: the form every id is written in, so one
                // memory has one URI.
                let full = id.len() == 36 && cortex_core::memory::MemoryId::parse_str(&id).is_ok();
                if !full {
                    return Err(UriError::Unknown);
                }
                Ok(ResourceUri::Memory(id.to_ascii_lowercase()))
            }
            Some(("entity", name)) => {
                params.only(&["limit"])?;
                let name = decode(name).ok_or(UriError::Unknown)?;
                if name.trim().is_empty() {
                    return Err(UriError::Unknown);
                }
                Ok(ResourceUri::Entity {
                    name,
                    limit: params.limit()?,
                })
            }
            _ => Err(UriError::Unknown),
        }
    }
}

/// A URI's query parameters, decoded; an empty value counts as absent, as an empty
/// argument does for the tools.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(query: &str) -> Result<Self, UriError> {
        let mut pairs: Vec<(String, String)> = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
            let (Some(name), Some(value)) = (decode(name), decode(value)) else {
                return Err(UriError::Parameter(format!(
                    "the query parameter {pair:?} is not percent-encoded UTF-8"
                )));
            };
            if pairs.iter().any(|(seen, _)| *seen == name) {
                return Err(UriError::Parameter(format!(
                    "the query parameter {name:?} is given twice"
                )));
            }
            pairs.push((name, value));
        }
        Ok(Self(pairs))
    }

    /// Refuses a parameter outside `allowed`, naming the ones this resource takes.
    fn only(&self, allowed: &[&str]) -> Result<(), UriError> {
        match self
            .0
            .iter()
            .find(|(name, _)| !allowed.contains(&name.as_str()))
        {
            None => Ok(()),
            Some((name, _)) if allowed.is_empty() => Err(UriError::Parameter(format!(
                "this resource takes no query parameter, got {name:?}"
            ))),
            Some((name, _)) => Err(UriError::Parameter(format!(
                "unknown query parameter {name:?}; this resource takes {}",
                allowed.join(", ")
            ))),
        }
    }

    fn get(&self, name: &str) -> Option<String> {
        self.0
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    }

    fn limit(&self) -> Result<Option<i64>, UriError> {
        self.get("limit")
            .map(|v| {
                v.parse::<i64>().map_err(|_| {
                    UriError::Parameter(format!("limit must be a whole number, got {v:?}"))
                })
            })
            .transpose()
    }
}

fn decode(text: &str) -> Option<String> {
    percent_decode_str(text)
        .decode_utf8()
        .ok()
        .map(|t| t.into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "3f2a9c1e-0b4d-4e8f-9a7b-1c2d3e4f5a6b";

    #[test]
    fn each_uri_names_its_resource() {
        assert_eq!(ResourceUri::parse(GRAPH), Ok(ResourceUri::Graph));
        assert_eq!(
            ResourceUri::parse(TIMELINE),
            Ok(ResourceUri::Timeline {
                since: None,
                until: None,
                limit: None
            })
        );
        assert_eq!(
            ResourceUri::parse(&format!("cortex://memory/{}", ID.to_uppercase())),
            Ok(ResourceUri::Memory(ID.to_owned()))
        );
        assert_eq!(
            ResourceUri::parse("cortex://entity/Ana%20Silva?limit=3"),
            Ok(ResourceUri::Entity {
                name: "Ana Silva".into(),
                limit: Some(3)
            })
        );
        assert_eq!(
            ResourceUri::parse(
                "CORTEX://timeline?since=2026-01-01&until=2026-02-01T00:00:00%2B01:00&limit="
            ),
            Ok(ResourceUri::Timeline {
                since: Some("2026-01-01".into()),
                until: Some("2026-02-01T00:00:00+01:00".into()),
                limit: None
            })
        );
    }

    #[test]
    fn anything_else_is_not_found() {
        for uri in [
            "",
            "cortex://",
            "cortex://graph/",
            "cortex://memories",
            "file:///etc/passwd",
            "cortex://memory/",
            "cortex://memory/3f2a9c1e",
            "cortex://memory/3f2a9c1e0b4d4e8f9a7b1c2d3e4f5a6b",
            "cortex://memory/not-an-id",
            "cortex://entity/",
            "cortex://entity/%20",
            "cortex://entity/%FF",
            "cortex://graph#top",
        ] {
            assert_eq!(ResourceUri::parse(uri), Err(UriError::Unknown), "{uri}");
        }
    }

    #[test]
    fn bad_parameters_say_what_is_wrong() {
        for (uri, needle) in [
            ("cortex://graph?limit=3", "no query parameter"),
            ("cortex://timeline?from=2026-01-01", "since, until, limit"),
            ("cortex://timeline?limit=ten", "whole number"),
            ("cortex://timeline?limit=1&limit=2", "twice"),
            (&format!("cortex://memory/{ID}?x=1"), "no query parameter"),
        ] {
            match ResourceUri::parse(uri) {
                Err(UriError::Parameter(message)) => {
                    assert!(message.contains(needle), "{uri}: {message}");
                }
                other => panic!("{uri}: {other:?}"),
            }
        }
    }
}
