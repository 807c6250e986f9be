//! The validated `request:` section: the prompt (text, messages or a synthetic prompt of N
//! tokens), the output length and the key that carries it, sampling settings, the extra body,
//! and the prefix-cache policy.

use crate::api::Api;
pub use crate::api::MaxTokensField;
use crate::config::common::{bail, ensure, named, names, short_hash, within, Invalid, Slot};
use crate::config::conversation::{self, ConversationSpec};
use crate::config::file::{RawMessage, RawRequest};
use crate::config::generate::{self, Drawn, GenerateSpec};
use crate::config::prompt_set::{self, Entry, PromptFormat, PromptSet};
use crate::synthetic_prompt::MAX_PROMPT_TOKENS;
use serde::Serialize;
use std::path::Path;

/// Prefix-cache policy (docs/design.md "Scenarios").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CachePolicy {
    /// The same prompt every time.
    Warm,
    /// A unique nonce line prepended to every request.
    Cold,
}

names!(CachePolicy { Warm => "warm", Cold => "cold" });

impl RequestSpec {
    /// Whether the server's prefix cache can serve a request a prompt sent before: not with
    /// `cache: cold` (a nonce line unique to each request) nor with llama.cpp's per-request
    /// switch `extra_body: {cache_prompt: false}` (vLLM and SGLang have no such body key).
    pub fn prefix_cache_reuses(&self) -> bool {
        self.cache == CachePolicy::Warm
            && self.extra_body.get("cache_prompt") != Some(&serde_json::Value::Bool(false))
    }

    /// The body key that carries `max_tokens` for `api`.
    pub fn max_tokens_key(&self, api: Api) -> &'static str {
        self.max_tokens_field
            .unwrap_or_else(|| api.default_max_tokens_field())
            .key()
    }
}

/// The validated `request:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RequestSpec {
    /// Chat messages (a `prompt` becomes one user message for chat APIs).
    pub messages: Vec<RawMessage>,
    /// Plain prompt text (used as-is by `openai-completions`).
    pub prompt: String,
    /// Anthropic `system` or an extra system message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Maximum output tokens.
    pub max_tokens: u32,
    /// `request.max_tokens_field`: the body key that carries `max_tokens`; `None` is the
    /// dialect's default ([`Api::default_max_tokens_field`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_tokens_field: Option<MaxTokensField>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub min_tokens: Option<u32>,
    /// Merged verbatim into the JSON body.
    pub extra_body: serde_json::Map<String, serde_json::Value>,
    /// Prefix-cache policy.
    pub cache: CachePolicy,
    /// `prompt_tokens: N`: `prompt` and `messages` hold a synthetic prompt, calibrated during
    /// the warmup to about N tokens by the server's own count (crate::synthetic_prompt).
    /// Part of the fingerprint (the text is not: the calibrated text follows the tokenizer).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_tokens: Option<u32>,
    /// `prompt_set`: prompts from a file, one entry per request (`prompt` and `messages` are
    /// then empty). In the fingerprint by its file's hash, format, order and seed; absent
    /// keys keep earlier fingerprints.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prompt_set: Option<PromptSet>,
    /// `generate`: input and output lengths drawn per request (`prompt` and `messages` are then
    /// empty). In the fingerprint by its distributions and seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub generate: Option<GenerateSpec>,
    /// `conversation`: multi-turn conversations (`prompt` and `messages` are then empty; each
    /// request's messages are its turn's, [`RequestSpec::for_turn`]). In the fingerprint by its
    /// turns, lengths, think time and seed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub conversation: Option<ConversationSpec>,
}

impl RequestSpec {
    /// sha256 (hex, 16 chars) of the prompt text: messages, prompt and system; for a
    /// synthetic prompt, of `prompt_tokens` and system (its text follows the tokenizer).
    pub fn prompt_hash(&self) -> String {
        if let Some(ps) = &self.prompt_set {
            return short_hash(
                &serde_json::json!({"prompt_set": ps.sha256, "system": self.system}).to_string(),
            );
        }
        if let Some(g) = &self.generate {
            return short_hash(
                &serde_json::json!({"generate": g, "system": self.system}).to_string(),
            );
        }
        if let Some(c) = &self.conversation {
            return short_hash(
                &serde_json::json!({"conversation": c, "system": self.system}).to_string(),
            );
        }
        let v = match self.prompt_tokens {
            Some(n) => serde_json::json!({"prompt_tokens": n, "system": self.system}),
            None => {
                serde_json::json!({"messages": self.messages, "prompt": self.prompt, "system": self.system})
            }
        };
        short_hash(&v.to_string())
    }
    /// True when the request asks for a fixed output length.
    pub fn fixed_length(&self) -> bool {
        self.ignore_eos == Some(true) || self.min_tokens.is_some_and(|m| m >= self.max_tokens)
    }

    /// The request that sends prompt-set entry `e`: its messages and text, and its own
    /// `max_tokens` when it gives one (`min_tokens` then at most that).
    pub fn for_entry(&self, e: &Entry) -> RequestSpec {
        let max_tokens = e.max_tokens.unwrap_or(self.max_tokens);
        RequestSpec {
            messages: e.messages.clone(),
            prompt: e.prompt.clone(),
            max_tokens,
            min_tokens: self.min_tokens.map(|m| m.min(max_tokens)),
            ..self.clone()
        }
    }

    /// The request drawn `d` (`request.generate`): a synthetic prompt of `words` filler words
    /// in `d`'s own word order, and `d`'s output length when it has one.
    pub fn for_drawn(&self, d: &Drawn, words: u32) -> RequestSpec {
        let text = crate::synthetic_prompt::text_seeded(words, d.text_seed);
        let max_tokens = d.output_tokens.unwrap_or(self.max_tokens);
        RequestSpec {
            messages: vec![RawMessage::new("user", text.clone())],
            prompt: text,
            max_tokens,
            min_tokens: self.min_tokens.map(|m| m.min(max_tokens)),
            ..self.clone()
        }
    }

    /// The request of a conversation's turn (`request.conversation`): the messages of
    /// [`ConversationSpec::messages`] for `slot`, the shared system prompt among them (so a
    /// cold reference's first line can come before it), `per_word` tokens per filler word.
    pub fn for_turn(&self, c: &ConversationSpec, slot: Slot, per_word: f64) -> RequestSpec {
        let messages = c.messages(slot, self.system.as_deref(), per_word);
        // a session's turn asks its own `output_length`
        let max_tokens = c.max_tokens(slot).unwrap_or(self.max_tokens);
        // a session's `messages` line's `tools`, in its body as AIPerf sends them
        let mut extra_body = self.extra_body.clone();
        if let Some(t) = c.tools(slot) {
            extra_body.insert("tools".into(), t.clone());
        }
        RequestSpec {
            extra_body,
            prompt: RawMessage::text(&messages),
            messages,
            system: None,
            max_tokens,
            min_tokens: self.min_tokens.map(|m| m.min(max_tokens)),
            ..self.clone()
        }
    }

    /// The fewest output tokens a request asks for.
    pub fn min_output_tokens(&self) -> u32 {
        self.generate
            .as_ref()
            .and_then(|g| g.output_tokens)
            .map_or(self.max_tokens, |d| d.bounds().0)
    }
}

/// The prompt as chat messages and as plain text, from whichever of `prompt`, `messages` or
/// `prompt_tokens` (a synthetic prompt's first guess) is given: exactly one of them.
fn prompt_and_messages(r: &RawRequest, traced: bool) -> Result<(Vec<RawMessage>, String), Invalid> {
    let given = [
        r.prompt.is_some(),
        r.messages.is_some(),
        r.prompt_tokens.is_some(),
        r.prompt_set.is_some(),
        r.generate.is_some(),
        r.conversation.is_some(),
    ];
    let given = given.iter().filter(|g| **g).count();
    ensure!(given <= 1, "request: give one of `prompt`, `messages`, `prompt_tokens`, `prompt_set`, `generate` or `conversation`");
    if traced {
        ensure!(given == 0, "load.trace gives each request's prompt length: leave out request.prompt, messages, prompt_tokens, prompt_set, generate and conversation");
        return Ok((Vec::new(), String::new()));
    }
    if r.prompt_set.is_some() || r.generate.is_some() || r.conversation.is_some() {
        // each request takes its text from its entry (RequestSpec::for_entry, for_turn)
        return Ok((Vec::new(), String::new()));
    }
    let text = match (&r.prompt, &r.messages, r.prompt_tokens) {
        (None, None, None) => {
            bail!("request.prompt (or request.messages, request.prompt_tokens, request.prompt_set, request.generate or request.conversation) is required")
        }
        (_, _, Some(n)) => {
            within("request.prompt_tokens", n, 1..=MAX_PROMPT_TOKENS, "")?;
            // The first guess; the runner calibrates it against the server's count.
            crate::synthetic_prompt::text(crate::synthetic_prompt::first_guess(n))
        }
        (Some(p), _, _) => {
            ensure!(!p.is_empty(), "request.prompt is empty");
            p.clone()
        }
        (None, Some(ms), _) => {
            ensure!(
                !ms.is_empty(),
                "request.messages is empty: give at least one {{role, content}}"
            );
            if let Some(m) = ms
                .iter()
                .find(|m| !RawMessage::ROLES.contains(&m.role.as_str()))
            {
                bail!(
                    "request.messages: role `{}` is not one of system, user, assistant, developer",
                    m.role
                );
            }
            return Ok((ms.clone(), RawMessage::text(ms)));
        }
    };
    Ok((vec![RawMessage::new("user", text.clone())], text))
}

/// Validates the `request:` section; `dir` is the scenario file's directory (a prompt set's
/// path is relative to it).
/// `traced`: `load.trace` gives each request's lengths (no prompt here, `max_tokens` optional).
pub(super) fn build_request(
    r: &RawRequest,
    api: Api,
    dir: &Path,
    traced: bool,
) -> Result<RequestSpec, Invalid> {
    let (messages, prompt) = prompt_and_messages(r, traced)?;
    let chat = api.takes_messages();
    ensure!(
        chat || r.messages.is_none(),
        "request.messages needs a chat API; openai-completions takes `prompt`"
    );
    let prompt_set = r
        .prompt_set
        .as_ref()
        .map(|raw| prompt_set::load(raw, dir))
        .transpose()?;
    if let Some(ps) = prompt_set
        .as_ref()
        .filter(|ps| !chat && ps.format != PromptFormat::Prompts)
    {
        bail!("request.prompt_set: a {} file holds chat messages, which need a chat API; openai-completions takes a `prompts` file", ps.format.as_str());
    }
    let generate = r.generate.as_ref().map(generate::build).transpose()?;
    // drawn output lengths: each request's max_tokens; request.max_tokens, when set, bounds
    // them (and defaults to the most)
    let drawn_max = generate
        .as_ref()
        .and_then(|g| g.output_tokens)
        .map(|d| d.bounds().1);
    if let (Some(m), Some(most)) = (r.max_tokens, drawn_max) {
        ensure!(most <= m, "request.generate.output_tokens draws up to {most} tokens, above request.max_tokens {m}: lower output_tokens.max or raise max_tokens (or leave it out)");
    }
    // a trace's requests ask their own output lengths (config::scenario::build sets the most)
    let drawn_max = drawn_max.or(traced.then_some(1));
    let max_tokens = drawn_max.or(r.max_tokens).ok_or(
        "request.max_tokens is required (a fixed output length makes TPOT comparable), or request.generate.output_tokens",
    )?;
    ensure!(max_tokens > 0, "request.max_tokens must be at least 1");
    let conversation = r
        .conversation
        .as_ref()
        .map(|c| conversation::build(c, max_tokens, dir))
        .transpose()?;
    if conversation.is_some() {
        ensure!(chat, "request.conversation sends chat messages, which need a chat API; openai-completions takes one prompt");
        ensure!(r.cache.as_deref() != Some("cold"), "request.conversation with request.cache: cold would make every turn miss the prefix cache it exists to check; leave request.cache out (a conversation's cold reference busts the cache by itself)");
    }
    let max_tokens_field = r
        .max_tokens_field
        .as_deref()
        .map(|k| max_tokens_field(k, api))
        .transpose()?;
    if let Some(t) = r.temperature {
        ensure!(
            (0.0..=2.0).contains(&t),
            "request.temperature {t} is outside 0..=2"
        );
    }
    let cache = named("request.cache", r.cache.as_deref(), "`warm` or `cold`")?;
    let body = r.extra_body.clone().unwrap_or_default();
    if let Some(n) = body.get("n") {
        ensure!(n.as_u64() == Some(1), "request.extra_body.n is {n}: perfgate measures one choice per request (n: 1); run more samples instead");
    }
    if let Some(key) = ["stream", "model"]
        .into_iter()
        .find(|k| body.contains_key(*k))
    {
        bail!("request.extra_body must not set `{key}`: perfgate sets it");
    }
    // A limit in extra_body would silently replace request.max_tokens (and the bound perfgate
    // checks usage against).
    if let Some(key) = MaxTokensField::ALL
        .map(MaxTokensField::key)
        .into_iter()
        .find(|k| body.contains_key(*k))
    {
        bail!("request.extra_body must not set `{key}`: set the output limit with request.max_tokens (and the body key that carries it with request.max_tokens_field)");
    }
    Ok(RequestSpec {
        messages,
        prompt,
        system: r.system.clone(),
        max_tokens,
        max_tokens_field,
        temperature: r.temperature,
        seed: r.seed,
        ignore_eos: r.ignore_eos,
        min_tokens: r.min_tokens,
        extra_body: body,
        cache: cache.unwrap_or(CachePolicy::Warm),
        prompt_tokens: r.prompt_tokens,
        prompt_set,
        generate,
        conversation,
    })
}

/// `request.max_tokens_field` `k`: a key of `api`.
fn max_tokens_field(k: &str, api: Api) -> Result<MaxTokensField, Invalid> {
    let f = MaxTokensField::ALL.into_iter().find(|f| f.key() == k).ok_or_else(|| {
        format!("request.max_tokens_field `{k}`: use max_tokens, max_completion_tokens or max_output_tokens")
    })?;
    let ok = api.max_tokens_fields();
    let names: Vec<&str> = ok.iter().map(|f| f.key()).collect();
    ensure!(
        ok.contains(&f),
        "request.max_tokens_field `{k}` is not a key of {api}: use {}",
        names.join(" or ")
    );
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_tokens_field_is_checked_per_api() {
        let parse = |api: &str, field: &str| {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: m, api: {api}}}\n    request: {{prompt: hi, max_tokens: 4{field}}}\n");
            crate::config::parse_str(&y, "t.yaml", &|_| None).map(|v| v[0].request.clone())
        };
        let r = parse("openai-chat", ", max_tokens_field: max_completion_tokens").unwrap();
        assert_eq!(r.max_tokens_key(Api::OpenaiChat), "max_completion_tokens");
        let r = parse("openai-responses", "").unwrap();
        assert_eq!(r.max_tokens_key(Api::OpenaiResponses), "max_output_tokens");
        let e = parse(
            "anthropic-messages",
            ", max_tokens_field: max_completion_tokens",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("use max_tokens"), "{e}");
        let e = parse("openai-chat", ", max_tokens_field: max_new_tokens")
            .unwrap_err()
            .to_string();
        assert!(e.contains("max_completion_tokens"), "{e}");
    }

    // Issue 45: a session's `messages` line's `tools` go into its turn's body (the extra body,
    // merged into it), beside the scenario's own extra body; a line without tools has none.
    #[test]
    fn a_message_line_s_tools_are_in_its_turn_s_body() {
        let y = "scenarios:\n  - name: a\n    endpoint: {base_url: 'http://127.0.0.1:1/v1', model: m}\n    request: {max_tokens: 5, extra_body: {top_k: 1}, conversation: {file: tests/fixtures/traces/aiperf_messages_sessions.jsonl}}\n";
        let r = crate::config::parse_str(y, "t.yaml", &|_| None).unwrap()[0]
            .request
            .clone();
        let c = r.conversation.as_ref().unwrap();
        let first = r.for_turn(c, Slot::Measured(0), 1.0);
        assert_eq!(
            first.extra_body["tools"][0]["function"]["name"],
            "lookup_order"
        );
        assert_eq!(first.extra_body["top_k"], 1);
        assert_eq!((first.messages.len(), first.max_tokens), (2, 12));
        // cs-2's first line: tools null; its output_length 8, not request.max_tokens 5
        let other = r.for_turn(c, Slot::Measured(3), 1.0);
        assert_eq!(other.extra_body.get("tools"), None);
        assert_eq!(other.max_tokens, 8);
    }

    // Issue 28: `extra_body: {max_output_tokens: 100}` silently replaced max_tokens 8 (merged
    // last into the body); each limit key is refused there, naming the setting to use.
    #[test]
    fn an_output_limit_in_extra_body_is_refused() {
        for (api, key) in [
            ("openai-responses", "max_output_tokens"),
            ("openai-chat", "max_tokens"),
            ("openai-chat", "max_completion_tokens"),
        ] {
            let y = format!("scenarios:\n  - name: a\n    endpoint: {{base_url: 'http://127.0.0.1:1/v1', model: m, api: {api}}}\n    request: {{prompt: hi, max_tokens: 8, extra_body: {{{key}: 100}}}}\n");
            let e = crate::config::parse_str(&y, "t.yaml", &|_| None)
                .map(|_| ())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains(&format!("request.extra_body must not set `{key}`"))
                    && e.contains("request.max_tokens")
                    && e.contains("request.max_tokens_field"),
                "{e}"
            );
        }
    }
}
