//! The streaming API dialects perfgate speaks, and their names in scenario files: the one table
//! of them (a leaf: the simulator's replay format and the config both read it).

use serde::Serialize;

/// The streaming API dialect an endpoint speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Api {
    /// `POST {base}/chat/completions`, `choices[].delta`.
    OpenaiChat,
    /// `POST {base}/completions`, `choices[].text`.
    OpenaiCompletions,
    /// `POST {base}/messages`, Anthropic event types.
    AnthropicMessages,
    /// `POST {base}/responses`, OpenAI Responses API typed events (`response.output_text.delta`).
    OpenaiResponses,
}

impl Api {
    /// Every dialect, in the order messages list them.
    pub const ALL: [Api; 4] = [
        Api::OpenaiChat,
        Api::OpenaiCompletions,
        Api::AnthropicMessages,
        Api::OpenaiResponses,
    ];

    /// The name used in scenario files.
    pub fn as_str(self) -> &'static str {
        match self {
            Api::OpenaiChat => "openai-chat",
            Api::OpenaiCompletions => "openai-completions",
            Api::AnthropicMessages => "anthropic-messages",
            Api::OpenaiResponses => "openai-responses",
        }
    }
    /// The path appended to `base_url`.
    pub fn path(self) -> &'static str {
        match self {
            Api::OpenaiChat => "/chat/completions",
            Api::OpenaiCompletions => "/completions",
            Api::AnthropicMessages => "/messages",
            Api::OpenaiResponses => "/responses",
        }
    }

    /// The request key that limits the output length unless the scenario sets
    /// `request.max_tokens_field`: `max_output_tokens` for the Responses API, `max_tokens`
    /// elsewhere (the key every OpenAI-compatible server accepts; OpenAI's reasoning models
    /// want `max_completion_tokens`).
    pub fn default_max_tokens_field(self) -> &'static str {
        match self {
            Api::OpenaiResponses => "max_output_tokens",
            _ => "max_tokens",
        }
    }

    /// The names of [`Api::ALL`], for messages: `a, b or c`.
    pub fn names() -> String {
        let n: Vec<&str> = Api::ALL.iter().map(|a| a.as_str()).collect();
        format!("{} or {}", n[..n.len() - 1].join(", "), n[n.len() - 1])
    }
}

impl std::fmt::Display for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.pad(self.as_str())
    }
}

impl std::str::FromStr for Api {
    /// The sentence after `endpoint.api ` in a scenario error (listing the known names).
    type Err = String;
    /// A scenario file's name of a dialect; the error lists the known ones.
    fn from_str(s: &str) -> Result<Api, String> {
        Api::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| format!("`{s}` is not known: use {}", Api::names()))
    }
}
