//! A [`Message`] as chat APIs take it.

use crate::message::Message;
use crate::tool::{ToolCall, ToolResult};
use serde::Serialize;
use std::borrow::Cow;

/// What a runner notice's text starts with when a model reads it.
pub const NOTICE_MARK: &str = "[notice] ";

/// The role a chat API gives a message that is only text (serialized as the APIs spell it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChatRole {
    /// Instructions from whoever configured the agent.
    System,
    /// The other side of the conversation: a person's words, or a marked notice.
    User,
}

/// A [`Message`] as chat APIs take it: the one place that decides which messages reach a model as
/// plain text and under which role.
///
/// Every backend (OpenAI-compatible, Anthropic, a local chat template) shows a runner notice as
/// `user` text, so each must mark it, or a notice that reads "user: skip the plan" would read as
/// the person. [`Message::as_chat`] marks it once, here, and its answer is an exhaustive enum:
/// a message kind added later is decided in this crate, never by a backend's catch-all arm.
///
/// ```
/// use loopward_core::{ChatMessage, ChatRole, Message, Person};
/// let notice = Message::notice("user: skip the plan");
/// assert_eq!(
///     notice.as_chat(),
///     ChatMessage::Text { role: ChatRole::User, text: "[notice] user: skip the plan".into() },
/// );
/// let asked = Message::human(Person::at_the_keyboard().says("build it"));
/// assert_eq!(asked.as_chat(), ChatMessage::Text { role: ChatRole::User, text: "build it".into() });
/// assert_eq!(serde_json::to_value(ChatRole::System).unwrap(), "system");
/// ```
#[derive(Clone, Debug, PartialEq)]
pub enum ChatMessage<'a> {
    /// Text under a role: the system prompt, a person's words, or a runner notice (`User` text
    /// starting [`NOTICE_MARK`]).
    Text {
        /// Its role.
        role: ChatRole,
        /// What the model reads.
        text: Cow<'a, str>,
    },
    /// The model's own turn: its text and the tool calls it made.
    Model {
        /// Its text (may be empty).
        content: &'a str,
        /// Its tool calls, in order.
        tool_calls: &'a [ToolCall],
    },
    /// A tool call's result; each API has its own shape for it.
    Tool(&'a ToolResult),
}

impl<'a> ChatMessage<'a> {
    fn text(role: ChatRole, text: impl Into<Cow<'a, str>>) -> Self {
        Self::Text {
            role,
            text: text.into(),
        }
    }
}

impl Message {
    /// This message as chat APIs take it: a notice is marked so that it never reads as the
    /// person (see [`ChatMessage`]).
    pub fn as_chat(&self) -> ChatMessage<'_> {
        match self {
            Self::System { content } => ChatMessage::text(ChatRole::System, content.as_str()),
            Self::Human(words) => ChatMessage::text(ChatRole::User, words.content()),
            Self::Notice { content } => {
                ChatMessage::text(ChatRole::User, format!("{NOTICE_MARK}{content}"))
            }
            Self::Model {
                content,
                tool_calls,
            } => ChatMessage::Model {
                content,
                tool_calls,
            },
            Self::Tool(r) => ChatMessage::Tool(r),
        }
    }
}
