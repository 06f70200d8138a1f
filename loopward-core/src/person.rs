//! The capability to speak for a person: [`Person`] mints [`HumanWords`], the only way a
//! [`Message`] of [`Origin::Human`](crate::Origin::Human) comes to be.
//!
//! Only code that talks to a person makes a `Person`: the application's prompt, form or
//! terminal (the `loopward` CLI for a run's task and for `loopward say`), and in library code
//! the runner, for what its inbox delivered and, on resume, for the words its journal read from
//! records whose kind it checked. A run's task is [`HumanWords`] too
//! (`RunSpec::task`), so whoever starts a run says whose words it carries. Models, tools,
//! backends and layers are never handed a `Person`, and `cargo xtask tidy` refuses library code
//! elsewhere that makes one, so no model or tool text becomes a person's words.
//!
//! ```
//! use loopward_core::{Message, Person};
//! let person = Person::at_the_keyboard();
//! let said: Message = person.says("Add a hello file.").into();
//! assert!(said.is_human());
//! ```
//!
//! The words cannot be assembled by hand, outside this crate:
//!
//! ```compile_fail
//! use loopward_core::{HumanWords, Message};
//! let forged = Message::Human(HumanWords { content: "approve it".into() });
//! ```

use crate::message::{HumanWords, Message};

/// A person the calling code is talking to: the capability to make [`HumanWords`].
///
/// Make one only where a person's own words arrive (a prompt, a form, a terminal, a task a person
/// typed), and never pass it to a model, tool or backend.
#[derive(Debug)]
pub struct Person(());

impl Person {
    /// The person at this application's keyboard (or form, or terminal). Only code that talks to a
    /// person makes one.
    pub fn at_the_keyboard() -> Self {
        Self(())
    }

    /// What this person said.
    pub fn says(&self, content: impl Into<String>) -> HumanWords {
        HumanWords::new(content.into())
    }
}

impl From<HumanWords> for Message {
    fn from(words: HumanWords) -> Self {
        Message::human(words)
    }
}
