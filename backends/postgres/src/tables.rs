//! The store's tables and their columns as sea-query identifiers, one enum per table whose
//! `Table` is the table itself: a misspelt table or column is a compile error, not a
//! statement the server refuses at run time. The names are those of `migrations/*.sql`
//! (and of `meta`, which `schema` creates before the first migration). A leaf: every
//! module that builds SQL reads it.

use sea_query::IdenStatic;

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Memories {
    Table,
    Seq,
    Id,
    UserId,
    Content,
    Kind,
    Tags,
    CreatedAt,
    DocLen,
    Superseded,
    Embedding,
    /// `migrations/0008_expiry.sql`.
    ExpiresAt,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Users {
    Table,
    UserId,
    Generation,
    DocCount,
    TotalLen,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Postings {
    Table,
    UserId,
    Term,
    Seq,
    Tf,
    DocLen,
}

/// Kept by the postings' triggers (`migrations/0002_term_statistics.sql`).
#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Terms {
    Table,
    #[allow(
        dead_code,
        reason = "read only in raw SQL (the search's term statistics)"
    )]
    UserId,
    #[allow(
        dead_code,
        reason = "read only in raw SQL (the search's term statistics)"
    )]
    Term,
    Df,
    MaxTf,
    #[allow(dead_code, reason = "read only in raw SQL (the search's score bounds)")]
    MinLen,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Events {
    Table,
    Seq,
    MemoryId,
    UserId,
    EventTime,
    Actor,
    Location,
    EventType,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Supersessions {
    Table,
    Seq,
    OldId,
    NewId,
    UserId,
    Reason,
    CreatedAt,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Entities {
    Table,
    Id,
    UserId,
    Name,
    NormalizedName,
    EntityType,
    Aliases,
    CreatedAt,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum EntityEdges {
    Table,
    Seq,
    UserId,
    Source,
    Target,
    Label,
    MemoryId,
    CreatedAt,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum MemoryEntities {
    Table,
    MemoryId,
    EntityId,
    UserId,
    Role,
}

/// The store's settings, keyed: the schema version, the analyser, the embedding signature.
#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum Meta {
    Table,
    Key,
    Value,
}

#[derive(Clone, Copy, Debug, IdenStatic)]
#[allow(
    dead_code,
    reason = "its columns are written and read only in raw SQL (`reembed`)"
)]
pub(crate) enum StagedEmbeddings {
    Table,
    Id,
    Signature,
    Embedding,
}

/// API keys (`migrations/0006_api_keys.sql`); `seq` orders keys made in one microsecond.
#[derive(Clone, Copy, Debug, IdenStatic)]
pub(crate) enum ApiKeys {
    Table,
    Id,
    UserId,
    Scope,
    Label,
    Digest,
    CreatedAt,
    ExpiresAt,
    RevokedAt,
    Seq,
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};
    use std::path::Path;

    use super::*;

    /// Each `CREATE TABLE`'s columns in `sql`, the table named by the word before `(`
    /// without its schema (`{s}.memories`: `memories`).
    fn created_tables(sql: &str, tables: &mut BTreeMap<String, BTreeSet<String>>) {
        for (at, _) in sql.match_indices("CREATE TABLE ") {
            let rest = &sql[at..];
            let open = rest
                .find('(')
                .unwrap_or_else(|| panic!("no column list: {rest}"));
            let name = rest[..open].split_whitespace().last().unwrap_or_default();
            let name = name.rsplit('.').next().unwrap_or_default().to_owned();
            let mut depth = 0;
            let mut columns = BTreeSet::new();
            let mut part = String::new();
            for c in rest[open + 1..].chars() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => break,
                    ')' => depth -= 1,
                    ',' if depth == 0 => {
                        columns.extend(column_of(&part));
                        part.clear();
                        continue;
                    }
                    _ => {}
                }
                part.push(c);
            }
            columns.extend(column_of(&part));
            tables.insert(name, columns);
        }
    }

    /// Each `ALTER TABLE ... ADD COLUMN`'s column in `sql`, added to its table's.
    fn added_columns(sql: &str, tables: &mut BTreeMap<String, BTreeSet<String>>) {
        for (at, _) in sql.match_indices("ALTER TABLE ") {
            let statement = sql[at..].split(';').next().unwrap_or_default();
            let mut words = statement.split_whitespace().skip(2);
            let name = words.next().unwrap_or_default();
            let name = name.rsplit('.').next().unwrap_or_default().to_owned();
            let words: Vec<&str> = words.collect();
            for w in words.windows(3) {
                if w[0] == "ADD" && w[1] == "COLUMN" {
                    let column = w[2].trim_end_matches(',').to_owned();
                    tables
                        .get_mut(&name)
                        .unwrap_or_else(|| panic!("a column added to no table: {statement}"))
                        .insert(column);
                }
            }
        }
    }

    /// A column definition's name; none for a table constraint.
    fn column_of(definition: &str) -> Option<String> {
        let word = definition.split_whitespace().next()?;
        let constraint = [
            "PRIMARY",
            "UNIQUE",
            "CONSTRAINT",
            "CHECK",
            "FOREIGN",
            "EXCLUDE",
        ];
        (!constraint.contains(&word)).then(|| word.to_owned())
    }

    /// The tables the migrations create (with the columns later ones add), and `meta`,
    /// which `schema` creates.
    fn schema_tables() -> BTreeMap<String, BTreeSet<String>> {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let mut tables = BTreeMap::new();
        let mut paths: Vec<_> = std::fs::read_dir(root.join("migrations"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .collect();
        // In order: a column is added to a table an earlier migration created.
        paths.sort();
        for path in paths {
            let sql = std::fs::read_to_string(path).unwrap();
            created_tables(&sql, &mut tables);
            added_columns(&sql, &mut tables);
        }
        let schema = std::fs::read_to_string(root.join("src/schema.rs")).unwrap();
        let mut meta = BTreeMap::new();
        created_tables(&schema, &mut meta);
        let columns = meta.into_values().next().unwrap();
        tables.insert(Meta::Table.as_str().to_owned(), columns);
        tables
    }

    /// Checks a table's enum against its DDL. The match is exhaustive, so a variant added
    /// to the enum must be listed here too.
    macro_rules! same_columns {
        ($tables:expr, $table:ident: $($column:ident),* $(,)?) => {{
            let _every_variant = |c: $table| match c {
                $table::Table $(| $table::$column)* => (),
            };
            let listed: BTreeSet<String> =
                [$($table::$column.as_str().to_owned()),*].into_iter().collect();
            assert_eq!(
                $tables.remove($table::Table.as_str()).as_ref(),
                Some(&listed),
                "{}",
                stringify!($table)
            );
        }};
    }

    #[test]
    fn the_enums_are_the_tables_of_the_migrations() {
        let mut tables = schema_tables();
        same_columns! {
            tables, Memories: Seq, Id, UserId, Content, Kind, Tags, CreatedAt, DocLen, Superseded,
            Embedding, ExpiresAt
        }
        same_columns! { tables, Users: UserId, Generation, DocCount, TotalLen }
        same_columns! { tables, Postings: UserId, Term, Seq, Tf, DocLen }
        same_columns! { tables, Terms: UserId, Term, Df, MaxTf, MinLen }
        same_columns! {
            tables, Events: Seq, MemoryId, UserId, EventTime, Actor, Location, EventType
        }
        same_columns! { tables, Supersessions: Seq, OldId, NewId, UserId, Reason, CreatedAt }
        same_columns! {
            tables, Entities: Id, UserId, Name, NormalizedName, EntityType, Aliases, CreatedAt
        }
        same_columns! {
            tables, EntityEdges: Seq, UserId, Source, Target, Label, MemoryId, CreatedAt
        }
        same_columns! { tables, MemoryEntities: MemoryId, EntityId, UserId, Role }
        same_columns! { tables, Meta: Key, Value }
        same_columns! { tables, StagedEmbeddings: Id, Signature, Embedding }
        same_columns! {
            tables, ApiKeys: Id, UserId, Scope, Label, Digest, CreatedAt, ExpiresAt, RevokedAt,
            Seq
        }
        // Every table has its enum.
        assert_eq!(tables.keys().collect::<Vec<_>>(), Vec::<&String>::new());
    }
}
