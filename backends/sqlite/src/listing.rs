//! One page of `list`: the user's live memories that pass a filter, newest first by
//! `(created_at, seq)` (`ListKey`), which the `memories_user_created` index walks.
//! Every condition is in the statement, so a selective filter reads only the rows it
//! returns plus those the index walk passes over.

use cortex_core::store::ListQuery;
use rusqlite::types::Value;

use crate::codec::{LIVE, MEMORY_COLUMNS, encode_time};

/// The statement and its parameters, in order.
pub(crate) fn list_statement(user: &str, query: &ListQuery) -> (String, Vec<Value>) {
    let mut sql = format!("SELECT {MEMORY_COLUMNS} FROM memories m WHERE m.user_id = ? AND {LIVE}");
    let mut values = vec![Value::Text(user.to_owned())];
    let filter = &query.filter;
    if let Some(key) = query.before {
        // Fixed-width UTC text: text order is time order.
        sql.push_str(" AND (m.created_at, m.seq) < (?, ?)");
        values.push(Value::Text(encode_time(&key.created_at)));
        values.push(Value::Integer(key.seq));
    }
    if !filter.kinds.is_empty() {
        sql.push_str(&format!(" AND m.kind IN ({})", marks(filter.kinds.len())));
        values.extend(
            filter
                .kinds
                .iter()
                .map(|k| Value::Text(k.as_str().to_owned())),
        );
    }
    // Tags are a JSON array of normalised tags (see `codec::encode_list`).
    if !filter.tags.is_empty() {
        sql.push_str(&format!(
            " AND EXISTS (SELECT 1 FROM json_each(m.tags) t WHERE t.value IN ({}))",
            marks(filter.tags.len())
        ));
        values.extend(filter.tags.iter().cloned().map(Value::Text));
    }
    for tag in &filter.tags_all {
        sql.push_str(" AND EXISTS (SELECT 1 FROM json_each(m.tags) t WHERE t.value = ?)");
        values.push(Value::Text(tag.clone()));
    }
    // Fixed-width UTC text: text order is time order.
    if let Some(since) = &filter.created.since {
        sql.push_str(" AND m.created_at >= ?");
        values.push(Value::Text(encode_time(since)));
    }
    if let Some(until) = &filter.created.until {
        sql.push_str(" AND m.created_at < ?");
        values.push(Value::Text(encode_time(until)));
    }
    if let Some(now) = &filter.alive_at {
        sql.push_str(" AND (m.expires_at IS NULL OR m.expires_at > ?)");
        values.push(Value::Text(encode_time(now)));
    }
    sql.push_str(" ORDER BY m.created_at DESC, m.seq DESC LIMIT ?");
    values.push(Value::Integer(
        i64::try_from(query.limit).unwrap_or(i64::MAX),
    ));
    (sql, values)
}

fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}
