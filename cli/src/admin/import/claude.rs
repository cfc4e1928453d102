//! `--from claude`: Claude's data export, `conversations.json`.
//!
//! A JSON array of conversations (`uuid`, `name`, `created_at`, `chat_messages`), each
//! message with its `sender` (`human` or `assistant`), its `text` and its `content` blocks.
//! Newer exports link each message to its `parent_message_uuid`, so an edited message
//! leaves a branch behind: as for ChatGPT, only the branch that ends at the conversation's
//! current leaf (`current_leaf_message_uuid`, else the last message written) is imported.
//! Each human message on it becomes a memory (docs/FORMAT.md).

use std::collections::{HashMap, HashSet};
use std::io::BufRead;

use cortex_core::memory::MemoryKind;
use serde::Deserialize;

use crate::admin::import::source::{Draft, Scope, Source, Unit, parse_time};
use crate::admin::import::stream::{Conversations, conversation_unit};

const EXPECTING: &str = "a JSON array of conversations (Claude's conversations.json)";

#[derive(Debug, Deserialize)]
struct Conversation {
    #[serde(default)]
    uuid: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    current_leaf_message_uuid: Option<String>,
    chat_messages: Option<Vec<ChatMessage>>,
}

#[derive(Debug, Deserialize)]
struct ChatMessage {
    #[serde(default)]
    uuid: Option<String>,
    sender: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    content: Option<Vec<Block>>,
    #[serde(default)]
    created_at: Option<String>,
    #[serde(default)]
    parent_message_uuid: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Block {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    text: Option<String>,
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
        .uuid
        .clone()
        .ok_or("it has no `uuid`; is this Claude's conversations.json?")?;
    let messages = conv
        .chat_messages
        .as_ref()
        .ok_or("it has no `chat_messages`; is this Claude's conversations.json?")?;
    let (mut unit, tags) = conversation_unit(scope, number, "claude", &id, conv.name.as_deref());
    let Some(tags) = tags else {
        return Ok(unit);
    };
    let branch = current_branch(messages, conv.current_leaf_message_uuid.as_deref())?;
    let user = scope.user_for(None);
    let started = conv.created_at.as_deref().and_then(parse_time);
    for &i in &branch {
        let Some(message) = messages.get(i) else {
            continue;
        };
        if message.sender != "human" {
            unit.count(match message.sender.as_str() {
                "assistant" => "skipped assistant message",
                _ => "skipped other message",
            });
            continue;
        }
        let position = i.to_string();
        let message_id = message.uuid.as_deref().unwrap_or(&position);
        let created_at = message
            .created_at
            .as_deref()
            .and_then(parse_time)
            .or(started)
            .unwrap_or(scope.undated);
        unit.memory(
            scope,
            Draft {
                id: scope.id(&user, &[&id, message_id]),
                user: user.clone(),
                text: text_of(message),
                kind: MemoryKind::Note,
                tags: tags.clone(),
                created_at,
                expires_at: None,
            },
        );
    }
    unit.count_n(
        "skipped message on another branch",
        messages.len().saturating_sub(branch.len()) as u64,
    );
    Ok(unit)
}

/// The message's text blocks, in order (thinking and tool blocks left out); its `text`
/// when it has none.
fn text_of(message: &ChatMessage) -> String {
    let blocks: Vec<&str> = message
        .content
        .iter()
        .flatten()
        .filter(|b| b.kind.as_deref() == Some("text"))
        .filter_map(|b| b.text.as_deref())
        .filter(|t| !t.trim().is_empty())
        .collect();
    match blocks.is_empty() {
        true => message.text.clone().unwrap_or_default(),
        false => blocks.join("\n\n"),
    }
}

/// Positions of the messages on the current branch, oldest first. An export whose messages
/// are not linked to their parents (the older, flat form) is one branch, in its order.
fn current_branch(messages: &[ChatMessage], leaf: Option<&str>) -> Result<Vec<usize>, String> {
    let by_id: HashMap<&str, usize> = messages
        .iter()
        .enumerate()
        .filter_map(|(i, m)| m.uuid.as_deref().map(|id| (id, i)))
        .collect();
    let parent = |m: &ChatMessage| {
        m.parent_message_uuid
            .as_deref()
            .and_then(|p| by_id.get(p).copied())
    };
    if !messages.iter().any(|m| parent(m).is_some()) {
        return Ok((0..messages.len()).collect());
    }
    let Some(start) = leaf
        .and_then(|l| by_id.get(l).copied())
        .or(messages.len().checked_sub(1))
    else {
        return Ok(Vec::new());
    };
    let mut path = Vec::new();
    let mut seen = HashSet::new();
    let mut at = Some(start);
    while let Some(i) = at {
        if !seen.insert(i) {
            return Err("its messages' parent links go round in a loop".into());
        }
        path.push(i);
        at = messages.get(i).and_then(parent);
    }
    path.reverse();
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(id: &str, parent: Option<&str>) -> ChatMessage {
        ChatMessage {
            uuid: Some(id.into()),
            sender: "human".into(),
            text: Some(id.into()),
            content: None,
            created_at: None,
            parent_message_uuid: parent.map(str::to_owned),
        }
    }

    #[test]
    fn linked_messages_follow_the_current_leaf_and_flat_ones_their_order() {
        let root = "00000000-0000-4000-8000-000000000000";
        let tree = [
            message("a", Some(root)),
            message("b1", Some("a")),
            message("b2", Some("a")),
        ];
        assert_eq!(current_branch(&tree, None).unwrap(), [0, 2]);
        assert_eq!(current_branch(&tree, Some("b1")).unwrap(), [0, 1]);
        let flat = [message("a", None), message("b", None)];
        assert_eq!(current_branch(&flat, None).unwrap(), [0, 1]);
    }
}
