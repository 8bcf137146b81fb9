//! Asking the user: one question (a `confirm` call, or a whole plan) and its answer. The tool
//! layer implements [`Confirm`] with MCP elicitation (a server-initiated request on legacy
//! connections) or with a question that travels back as the `tools/call` result (2026-07-28:
//! multi-round-trip requests, or a task's input request).

/// What the user is asked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Prompt {
    /// The text shown to the user.
    pub message: String,
    /// The key the question travels under where questions are keyed (a 2026-07-28 input
    /// request): a plan's is `plan-<id>`; `None` lets the asker number it (`confirm-N`).
    pub key: Option<String>,
}

impl Prompt {
    /// A question numbered by whoever asks it.
    pub fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
            key: None,
        }
    }
}

/// The user's answer to a question.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    Accept,
    Decline,
    /// The user dismissed the question without choosing.
    Cancel,
}

impl Answer {
    /// The answer an elicitation result (`{"action": ...}`) gives, if it is one.
    pub fn from_elicit_result(value: &serde_json::Value) -> Option<Self> {
        match value.get("action")?.as_str()? {
            "accept" => Some(Answer::Accept),
            "decline" => Some(Answer::Decline),
            "cancel" => Some(Answer::Cancel),
            _ => None,
        }
    }
}

/// Why no answer came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// The question waited its time (`--confirm-wait-secs`) and was abandoned.
    #[error("{0}")]
    Expired(String),
    /// It could not be asked, or the request that asked is gone.
    #[error("{0}")]
    Failed(String),
}

/// Asks the user (MCP elicitation in the tool layer).
#[async_trait::async_trait]
pub trait Confirm: Send + Sync {
    async fn ask(&self, prompt: Prompt) -> Result<Answer, AskError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elicit_results_give_answers() {
        let answer = |v| Answer::from_elicit_result(&v);
        assert_eq!(
            answer(serde_json::json!({"action": "accept", "content": {}})),
            Some(Answer::Accept)
        );
        assert_eq!(
            answer(serde_json::json!({"action": "decline"})),
            Some(Answer::Decline)
        );
        assert_eq!(
            answer(serde_json::json!({"action": "cancel"})),
            Some(Answer::Cancel)
        );
        assert_eq!(answer(serde_json::json!({"action": "maybe"})), None);
        assert_eq!(answer(serde_json::json!({"role": "assistant"})), None);
    }
}
