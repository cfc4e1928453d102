//! `--from chatgpt`: ChatGPT's data export, `conversations.json`.
//!
//! A JSON array of conversations, each a tree of messages (`mapping`: node id -> node with
//! its `message`, `parent` and `children`): editing a message or regenerating an answer
//! adds a sibling branch. The conversation as the user last saw it is the path from the
//! root to `current_node`, and only that path is imported: an edited-away message is not
//! something the user still says. Each of the user's messages on it becomes a memory
//! (docs/FORMAT.md, "Importing from other tools").

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use cortex_core::memory::MemoryKind;
use serde::Deserialize;

use crate::admin::import::source::{Draft, Scope, Source, Unit, from_unix};
use crate::admin::import::stream::{Conversations, conversation_unit};

const EXPECTING: &str = "a JSON array of conversations (ChatGPT's conversations.json)";

#[derive(Debug, Deserialize)]
struct Conversation {
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    conversation_id: Option<String>,
    #[serde(default)]
    create_time: Option<f64>,
    #[serde(default)]
    current_node: Option<String>,
    mapping: HashMap<String, Node>,
}

#[derive(Debug, Deserialize)]
struct Node {
    #[serde(default)]
    message: Option<Message>,
    #[serde(default)]
    parent: Option<String>,
    #[serde(default)]
    children: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    id: Option<String>,
    author: Author,
    #[serde(default)]
    create_time: Option<f64>,
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    metadata: Option<MessageMetadata>,
}

#[derive(Debug, Deserialize)]
struct Author {
    role: String,
}

#[derive(Debug, Deserialize)]
struct Content {
    #[serde(default)]
    parts: Option<Vec<serde_json::Value>>,
    #[serde(default)]
    text: Option<String>,
}

#[derive(Debug, Default, Deserialize)]
struct MessageMetadata {
    #[serde(default)]
    is_visually_hidden_from_conversation: Option<bool>,
}

/// The export, read from `reader`.
pub fn source<R: BufRead + Send + 'static>(reader: R) -> Box<dyn Source> {
    Box::new(Conversations {
        reader,
        expecting: EXPECTING,
        convert: unit_of,
    })
}

fn unit_of(scope: &Scope, number: usize, conv: Conversation) -> Result<Unit, String> {
    let id = conv
        .id
        .clone()
        .or_else(|| conv.conversation_id.clone())
        .ok_or("it has no `id`; is this ChatGPT's conversations.json?")?;
    let (mut unit, tags) = conversation_unit(scope, number, "chatgpt", &id, conv.title.as_deref());
    let Some(tags) = tags else {
        return Ok(unit);
    };
    let branch = current_branch(&conv)?;
    let user = scope.user_for(None);
    let started = conv.create_time.and_then(from_unix);
    let mut on_branch = 0;
    for node_id in &branch {
        let Some(message) = conv.mapping.get(*node_id).and_then(|n| n.message.as_ref()) else {
            continue;
        };
        on_branch += 1;
        let role = message.author.role.as_str();
        if role != "user" {
            unit.count(skipped_role(role));
            continue;
        }
        let hidden = message
            .metadata
            .as_ref()
            .and_then(|m| m.is_visually_hidden_from_conversation)
            .unwrap_or(false);
        if hidden {
            // The custom instructions and other context ChatGPT adds out of sight.
            unit.count("skipped hidden message");
            continue;
        }
        let text = message.content.as_ref().map(text_of).unwrap_or_default();
        let message_id = message.id.as_deref().unwrap_or(node_id);
        let created_at = message
            .create_time
            .and_then(from_unix)
            .or(started)
            .unwrap_or(scope.undated);
        unit.memory(
            scope,
            Draft {
                id: scope.id(&user, &[&id, message_id]),
                user: user.clone(),
                text,
                kind: MemoryKind::Note,
                tags: tags.clone(),
                created_at,
                expires_at: None,
            },
        );
    }
    let messages = conv
        .mapping
        .values()
        .filter(|n| n.message.is_some())
        .count();
    unit.count_n(
        "skipped message on another branch",
        messages.saturating_sub(on_branch) as u64,
    );
    Ok(unit)
}

fn skipped_role(role: &str) -> &'static str {
    match role {
        "assistant" => "skipped assistant message",
        "system" => "skipped system message",
        "tool" => "skipped tool message",
        _ => "skipped other message",
    }
}

/// The text parts of a message, in order; pictures and files are left out.
fn text_of(content: &Content) -> String {
    let parts: Vec<&str> = content
        .parts
        .iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .filter(|p| !p.trim().is_empty())
        .collect();
    match parts.is_empty() {
        true => content.text.clone().unwrap_or_default(),
        false => parts.join("\n"),
    }
}

/// The node ids from the root to `current_node`, following `parent` links. Without a
/// `current_node` (older exports), the branch ends where each node's last child, the most
/// recent edit, leads.
fn current_branch(conv: &Conversation) -> Result<Vec<&str>, String> {
    let leaf = match conv.current_node.as_deref() {
        Some(leaf) => leaf,
        None => match last_leaf(conv) {
            Some(leaf) => leaf,
            None => return Ok(Vec::new()),
        },
    };
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some(leaf);
    while let Some(id) = at {
        let node = conv
            .mapping
            .get(id)
            .ok_or_else(|| format!("its message tree names node {id:?}, which it does not hold"))?;
        if !seen.insert(id) {
            return Err("its message tree's parent links go round in a loop".into());
        }
        path.push(id);
        at = node.parent.as_deref();
    }
    path.reverse();
    Ok(path)
}

fn last_leaf(conv: &Conversation) -> Option<&str> {
    let mut at = conv
        .mapping
        .iter()
        .find(|(_, n)| {
            n.parent
                .as_ref()
                .is_none_or(|p| !conv.mapping.contains_key(p))
        })
        .map(|(id, _)| id.as_str())?;
    let mut steps = 0;
    while let Some(next) = conv.mapping.get(at).and_then(|n| n.children.last()) {
        steps += 1;
        if steps > conv.mapping.len() || !conv.mapping.contains_key(next) {
            break;
        }
        at = next;
    }
    Some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn conversation(current: Option<&str>) -> Conversation {
        let text = |role: &str, t: &str| serde_json::json!({"author": {"role": role}, "content": {"content_type": "text", "parts": [t]}});
        let value = serde_json::json!({
            "id": "c1",
            "current_node": current,
            "mapping": {
                "root": {"message": null, "parent": null, "children": ["a"]},
                "a": {"message": text("user", "first"), "parent": "root", "children": ["b1", "b2"]},
                "b1": {"message": text("assistant", "old answer"), "parent": "a", "children": []},
                "b2": {"message": text("assistant", "new answer"), "parent": "a", "children": []},
            }
        });
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn the_branch_runs_from_the_root_to_the_current_node_or_the_last_edit() {
        assert_eq!(
            current_branch(&conversation(Some("b1"))).unwrap(),
            ["root", "a", "b1"]
        );
        assert_eq!(
            current_branch(&conversation(None)).unwrap(),
            ["root", "a", "b2"]
        );
        let missing = current_branch(&conversation(Some("zz"))).unwrap_err();
        assert!(missing.contains("\"zz\""), "{missing}");
    }
}
