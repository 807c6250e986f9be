//! The streaming API dialects perfgate speaks, and their names in scenario files: the one table
//! of them (a leaf: the simulator's replay format and the config both read it). One exhaustive
//! `match` per growth axis (route, max-tokens keys, auth, fixed headers, messages or prompt, the
//! simulator), so a new dialect is named by the compiler wherever it must be decided.

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

    /// The body keys that limit the output length, the default (`request.max_tokens_field`
    /// unset) first: `max_tokens` is the key every OpenAI-compatible server and Anthropic accept
    /// (OpenAI's reasoning models want `max_completion_tokens`), `max_output_tokens` the
    /// Responses API's.
    pub fn max_tokens_fields(self) -> &'static [MaxTokensField] {
        match self {
            Api::OpenaiChat => &[
                MaxTokensField::MaxTokens,
                MaxTokensField::MaxCompletionTokens,
            ],
            Api::OpenaiCompletions | Api::AnthropicMessages => &[MaxTokensField::MaxTokens],
            Api::OpenaiResponses => &[MaxTokensField::MaxOutputTokens],
        }
    }

    /// The key that limits the output length unless the scenario sets
    /// `request.max_tokens_field`: the first of [`Api::max_tokens_fields`].
    pub fn default_max_tokens_field(self) -> MaxTokensField {
        self.max_tokens_fields()[0]
    }

    /// The header that carries the API key, and its value.
    pub fn auth_header(self, key: &str) -> (&'static str, String) {
        match self {
            Api::AnthropicMessages => ("x-api-key", key.to_string()),
            Api::OpenaiChat | Api::OpenaiCompletions | Api::OpenaiResponses => {
                ("authorization", format!("Bearer {key}"))
            }
        }
    }

    /// Headers every request of this dialect carries (name, value).
    pub fn fixed_headers(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Api::AnthropicMessages => &[("anthropic-version", "2023-06-01")],
            Api::OpenaiChat | Api::OpenaiCompletions | Api::OpenaiResponses => &[],
        }
    }

    /// Whether the request carries chat messages (roles); `false`: one prompt text.
    pub fn takes_messages(self) -> bool {
        match self {
            Api::OpenaiCompletions => false,
            Api::OpenaiChat | Api::AnthropicMessages | Api::OpenaiResponses => true,
        }
    }

    /// What ends a complete stream of this dialect.
    pub fn stream_end(self) -> StreamEnd {
        match self {
            Api::OpenaiChat | Api::OpenaiCompletions | Api::AnthropicMessages => {
                StreamEnd::FinishOrDone
            }
            Api::OpenaiResponses => StreamEnd::Completed,
        }
    }

    /// Whether the built-in simulator (`sim://`) serves this dialect.
    pub fn simulated(self) -> bool {
        match self {
            Api::OpenaiChat | Api::OpenaiCompletions | Api::OpenaiResponses => true,
            Api::AnthropicMessages => false,
        }
    }

    /// The dialects the built-in simulator serves, in [`Api::ALL`]'s order.
    pub fn simulated_all() -> Vec<Api> {
        Api::ALL.into_iter().filter(|a| a.simulated()).collect()
    }

    /// The names of [`Api::ALL`], for messages: `a, b or c`.
    pub fn names() -> String {
        let n: Vec<&str> = Api::ALL.iter().map(|a| a.as_str()).collect();
        format!("{} or {}", n[..n.len() - 1].join(", "), n[n.len() - 1])
    }
}

/// A dialect's end-of-stream rule: what a stream must carry not to count as truncated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamEnd {
    /// A finish reason (`finish_reason`, Anthropic's `stop_reason`) or the end event (`[DONE]`,
    /// `message_stop`).
    FinishOrDone,
    /// The completion event only (`response.completed` or `response.incomplete`): a Responses
    /// stream has no `[DONE]` and no `finish_reason`.
    Completed,
}

/// The body key that limits the output length (`request.max_tokens_field`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MaxTokensField {
    /// `max_tokens`: every OpenAI-compatible server and Anthropic.
    MaxTokens,
    /// `max_completion_tokens`: OpenAI's reasoning models (o-series, gpt-5) reject `max_tokens`.
    MaxCompletionTokens,
    /// `max_output_tokens`: the Responses API.
    MaxOutputTokens,
}

impl MaxTokensField {
    /// Every key, in the order messages list them.
    pub const ALL: [MaxTokensField; 3] = [
        MaxTokensField::MaxTokens,
        MaxTokensField::MaxCompletionTokens,
        MaxTokensField::MaxOutputTokens,
    ];

    /// The JSON key.
    pub fn key(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
            MaxTokensField::MaxOutputTokens => "max_output_tokens",
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_axis_has_a_row_per_dialect() {
        assert_eq!(
            Api::simulated_all(),
            [
                Api::OpenaiChat,
                Api::OpenaiCompletions,
                Api::OpenaiResponses
            ]
        );
        let defaults = Api::ALL.map(|a| a.default_max_tokens_field().key());
        assert_eq!(
            defaults,
            [
                "max_tokens",
                "max_tokens",
                "max_tokens",
                "max_output_tokens"
            ]
        );
        assert_eq!(
            Api::AnthropicMessages.auth_header("k"),
            ("x-api-key", "k".to_string())
        );
        assert_eq!(
            Api::OpenaiResponses.auth_header("k"),
            ("authorization", "Bearer k".to_string())
        );
        let with_headers: Vec<Api> = Api::ALL
            .into_iter()
            .filter(|a| !a.fixed_headers().is_empty())
            .collect();
        assert_eq!(with_headers, [Api::AnthropicMessages]);
        let completed: Vec<Api> = Api::ALL
            .into_iter()
            .filter(|a| a.stream_end() == StreamEnd::Completed)
            .collect();
        assert_eq!(completed, [Api::OpenaiResponses]);
    }
}
