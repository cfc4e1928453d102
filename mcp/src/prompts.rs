//! The prompt `recall_context`: the memories that bear on a task, as a user message a host
//! can put before its model's work on the task.
//!
//! It is `recall` (one embed call, the same ranking) run for the task's words, as the
//! calling user, with the result written as text for a model to read rather than as JSON:
//! a prompt's message goes into the conversation as it is.

use std::fmt::Write as _;

use cortex_core::hybrid::ScoredMemory;
use rmcp::model::{
    GetPromptRequestParams, GetPromptResult, ListPromptsResult, Prompt, PromptArgument,
    PromptMessage, Role,
};
use serde_json::Value;

use crate::args::clamp_limit;
use crate::dates::format_instant;
use crate::engine::Engine;
use crate::error::Tool;
use crate::read_error::ReadError;

/// The prompt's name.
pub const RECALL_CONTEXT: &str = "recall_context";

/// What `prompts/get` asked for, checked before the engine is built.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextRequest {
    pub task: String,
    pub limit: Option<i64>,
}

/// The prompts `prompts/list` names.
pub fn list() -> ListPromptsResult {
    let prompt = Prompt::new(
        RECALL_CONTEXT,
        Some(
            "The memories relevant to a task, most relevant first, as one user message to \
             start the task with: what Cortex recalls for the task's words (recall), with \
             each memory's kind, date and id.",
        ),
        Some(vec![
            PromptArgument::new("task")
                .with_description(
                    "The task or question to fetch context for, in plain words, e.g. \
                     \"plan the Lisbon offsite\".",
                )
                .with_required(true),
            PromptArgument::new("limit")
                .with_description(
                    "How many memories at most, 1-1000 (default: the server's CORTEX_TOP_K).",
                )
                .with_required(false),
        ]),
    )
    .with_title("Recall context for a task");
    ListPromptsResult::with_all_items(vec![prompt])
}

/// The prompt and arguments a `prompts/get` names. Arguments are strings, as MCP sends
/// them; an unknown one is refused, as the tools refuse one, since a caller who sent it
/// believes it asked for something.
pub fn request_of(params: &GetPromptRequestParams) -> Result<ContextRequest, ReadError> {
    if params.name != RECALL_CONTEXT {
        return Err(ReadError::UnknownPrompt(params.name.clone()));
    }
    let arguments = params.arguments.clone().unwrap_or_default();
    if let Some(stray) = arguments.keys().find(|k| *k != "task" && *k != "limit") {
        return Err(ReadError::Invalid(format!(
            "unknown argument {stray:?}; {RECALL_CONTEXT} takes task and limit"
        )));
    }
    let text = |name: &str| match arguments.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.trim().to_owned()).filter(|s| !s.is_empty())),
        Some(Value::Number(n)) => Ok(Some(n.to_string())),
        Some(other) => Err(ReadError::Invalid(format!(
            "argument {name} must be a string, got {other}"
        ))),
    };
    let task = text("task")?.ok_or_else(|| {
        ReadError::Invalid(format!(
            "{RECALL_CONTEXT} needs the argument task: the task to fetch context for"
        ))
    })?;
    let limit = text("limit")?
        .map(|v| {
            v.parse::<i64>()
                .map_err(|_| ReadError::Invalid(format!("limit must be a whole number, got {v:?}")))
        })
        .transpose()?;
    Ok(ContextRequest { task, limit })
}

/// Runs recall for the task as `user` and writes the message.
pub async fn recall_context(
    engine: &Engine,
    user: &str,
    request: &ContextRequest,
) -> Result<GetPromptResult, ReadError> {
    let limit = clamp_limit(request.limit, engine.top_k);
    let found = engine
        .memory
        .recall(user, &request.task, limit)
        .await
        .map_err(|e| ReadError::argument(Tool::Recall, e))?;
    let text = message(&request.task, &found);
    Ok(
        GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
            .with_description(format!("Context from Cortex for: {}", request.task)),
    )
}

/// The user message: the memories, then the task.
fn message(task: &str, found: &[ScoredMemory]) -> String {
    let mut text = String::new();
    if found.is_empty() {
        text.push_str("Cortex (long-term memory) holds no memories that bear on this task.\n");
    } else {
        text.push_str(
            "What Cortex (long-term memory) holds that may bear on this task, most relevant \
             first. Use what applies; to correct a memory, memorize the corrected statement \
             with `replaces` set to its id.\n\n",
        );
        for scored in found {
            let m = &scored.memory;
            let tags = if m.tags.is_empty() {
                String::new()
            } else {
                format!(", tags {}", m.tags.join(", "))
            };
            // Writing to a String cannot fail.
            let _ = writeln!(
                text,
                "- [{}, {}{tags}, id {}] {}",
                m.kind.as_str(),
                format_instant(m.created_at),
                m.id,
                m.content
            );
        }
    }
    let _ = write!(text, "\nTask: {task}");
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn params(name: &str, arguments: Value) -> GetPromptRequestParams {
        let Value::Object(arguments) = arguments else {
            panic!("an object")
        };
        GetPromptRequestParams::new(name).with_arguments(arguments)
    }

    #[test]
    fn arguments_are_checked() {
        let ok = request_of(&params(
            RECALL_CONTEXT,
            json!({"task": " plan ", "limit": "3"}),
        ));
        assert_eq!(
            ok.unwrap(),
            ContextRequest {
                task: "plan".into(),
                limit: Some(3)
            }
        );
        for (name, arguments, needle) in [
            ("recall", json!({"task": "x"}), "unknown prompt"),
            (RECALL_CONTEXT, json!({}), "needs the argument task"),
            (
                RECALL_CONTEXT,
                json!({"task": "  "}),
                "needs the argument task",
            ),
            (
                RECALL_CONTEXT,
                json!({"task": "x", "user": "bea"}),
                "unknown argument",
            ),
            (
                RECALL_CONTEXT,
                json!({"task": "x", "limit": "ten"}),
                "whole number",
            ),
            (RECALL_CONTEXT, json!({"task": ["x"]}), "must be a string"),
        ] {
            let err = request_of(&params(name, arguments))
                .unwrap_err()
                .to_string();
            assert!(err.contains(needle), "{name}: {err}");
        }
    }

    #[test]
    fn the_listed_prompt_requires_its_task() {
        let listed = list();
        let prompt = &listed.prompts[0];
        assert_eq!(prompt.name, RECALL_CONTEXT);
        let arguments = prompt.arguments.as_deref().unwrap();
        assert_eq!(arguments[0].name, "task");
        assert_eq!(arguments[0].required, Some(true));
    }
}
