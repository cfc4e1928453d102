//! Where the store's objects live: the schema name, checked and quoted, and the
//! schema-qualified names of its tables. A leaf: every module that builds SQL reads it.

use cortex_core::error::StoreError;
use sea_query::{IdenStatic, TableRef};

/// Schema names are plain lowercase identifiers: letters, digits and `_`, not starting
/// with a digit, at most 63 bytes. They are also quoted wherever they are written, but
/// refusing anything else keeps them safe inside connection options too.
pub fn validate_schema_name(name: &str) -> Result<(), StoreError> {
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
        && !name.as_bytes()[0].is_ascii_digit()
        && !name.starts_with("pg_");
    match ok {
        true => Ok(()),
        false => Err(StoreError::Config(format!(
            "schema name {name:?} must be 1-63 lowercase letters, digits or '_', not starting \
             with a digit or pg_"
        ))),
    }
}

/// `"name"`, with embedded quotes doubled.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The store's schema: table references for sea-query and quoted names for DDL.
#[derive(Debug, Clone)]
pub(crate) struct Names {
    schema: String,
    quoted: String,
}

impl Names {
    pub(crate) fn new(schema: &str) -> Result<Self, StoreError> {
        validate_schema_name(schema)?;
        Ok(Self {
            schema: schema.to_owned(),
            quoted: quote_ident(schema),
        })
    }

    pub(crate) fn schema(&self) -> &str {
        &self.schema
    }

    /// A schema-qualified table for sea-query.
    pub(crate) fn table(&self, table: impl IdenStatic) -> TableRef {
        (self.schema.clone(), table).into()
    }

    /// `"schema"."table"`, for DDL and custom expressions.
    pub(crate) fn q(&self, table: impl IdenStatic) -> String {
        self.q_object(table.as_str())
    }

    /// `"schema"."object"` for an object that is no table (a function, an index), which
    /// has no enum in [`crate::tables`].
    pub(crate) fn q_object(&self, object: &str) -> String {
        format!("{}.{}", self.quoted, quote_ident(object))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tables::Memories;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for good in ["public", "cortex", "cortex_test_42", "_x"] {
            assert!(validate_schema_name(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "Cortex",
            "1abc",
            "a-b",
            "a\"b",
            "pg_temp",
            &"a".repeat(64),
        ] {
            assert!(validate_schema_name(bad).is_err(), "{bad}");
        }
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
        assert_eq!(
            Names::new("cx").unwrap().q(Memories::Table),
            "\"cx\".\"memories\""
        );
    }
}
