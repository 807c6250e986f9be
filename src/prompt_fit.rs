//! Fits a synthetic prompt (`request.prompt_tokens: N`) to the server's own token count before
//! the warmup: a few unmeasured requests with `max_tokens: 1`, each reading the server's
//! `usage.prompt_tokens`, stepping the word count with [`synthetic_prompt::next_words`] until
//! the count is within 1 % of N ([`synthetic_prompt::on_target`]; the promise is
//! [`synthetic_prompt::TOLERANCE`], 5 %), keeping the closest. The request text is changed only
//! in the runner's copy of the scenario; the configuration (and its fingerprint) keeps N.

use crate::client::body;
use crate::client::http::StreamClient;
use crate::config::Scenario;
use crate::synthetic_prompt::{self, close_enough, next_words, on_target, MAX_TRIES};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// What the fitting found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptFit {
    /// N, as configured.
    pub target: u32,
    /// Filler words in the prompt measured.
    pub words: u32,
    /// The server's `usage.prompt_tokens` for that prompt; `None` when it reported none.
    pub server_tokens: Option<u64>,
    /// Fitting requests sent (not measured).
    pub requests: usize,
    /// Why the fitting stopped early: a fitting request that failed (its message).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl PromptFit {
    /// One line for the report's notes.
    pub fn note(&self) -> String {
        match self.server_tokens {
            Some(t) if close_enough(self.target, t) => format!(
                "synthetic prompt: {} filler words = {t} prompt tokens by the server's count (prompt_tokens {}, within {:.0} %; {} fitting request(s), not measured)",
                self.words,
                self.target,
                synthetic_prompt::TOLERANCE * 100.0,
                self.requests
            ),
            Some(t) => format!(
                "synthetic prompt: could not bring the server's count within {:.0} % of prompt_tokens {} in {} request(s); measured with the closest, {} filler words = {t} prompt tokens",
                synthetic_prompt::TOLERANCE * 100.0,
                self.target,
                self.requests,
                self.words
            ),
            None => format!(
                "synthetic prompt: {}, so the prompt was not fitted: {} filler words, about one token a word in common tokenizers (prompt_tokens {})",
                match &self.failure {
                    Some(e) => format!("the fitting request failed ({e})"),
                    None => "the server reported no usage.prompt_tokens".to_string(),
                },
                self.words,
                self.target
            ),
        }
    }
}

/// Sets the synthetic prompt of `words` filler words in `sc`'s request.
pub fn set_words(sc: &mut Scenario, words: u32) {
    let text = synthetic_prompt::text(words);
    for m in sc.request.messages.iter_mut().filter(|m| m.role == "user") {
        m.content = text.clone();
    }
    sc.request.prompt = text;
}

/// Fits `sc`'s synthetic prompt to `target` tokens with `client` and leaves the best prompt
/// found in `sc`. Stops at the first request that fails or reports no usage, and when perfgate
/// is interrupted.
pub async fn fit(client: &StreamClient, sc: &mut Scenario, target: u32) -> PromptFit {
    let mut tried: Vec<(u32, u64)> = Vec::new();
    let mut requests = 0;
    let mut failure = None;
    let mut words = next_words(target, &tried);
    while requests < MAX_TRIES && !crate::cancel::requested() {
        set_words(sc, words);
        let mut probe = sc.request.clone();
        probe.max_tokens = 1;
        probe.min_tokens = None;
        let b = body::build(
            sc.endpoint.api,
            &sc.endpoint.model,
            &probe,
            sc.endpoint.include_usage,
            None,
        );
        let sent = client.send(&b, Instant::now()).await;
        requests += 1;
        if let Some(e) = &sent.record.error {
            failure = Some(client.redact(&e.message));
            break;
        }
        let Some(t) = sent.record.prompt_tokens else {
            break;
        };
        tried.push((words, t));
        if on_target(target, t) {
            break;
        }
        words = next_words(target, &tried);
    }
    let best = tried
        .iter()
        .min_by_key(|(_, t)| t.abs_diff(target as u64))
        .copied();
    let (words, server_tokens) = match best {
        Some((w, t)) => (w, Some(t)),
        None => (synthetic_prompt::first_guess(target), None),
    };
    set_words(sc, words);
    PromptFit {
        target,
        words,
        server_tokens,
        requests,
        failure,
    }
}

/// `request.generate`: the synthetic prompt fitted at one or two prompt lengths, and the line
/// through them that scales every request's prompt ([`synthetic_prompt::Scale`]).
#[derive(Debug, Clone, PartialEq)]
pub struct LengthFit {
    /// One fit per length ([`crate::config::generate::GenerateSpec::fit_points`]).
    pub fits: Vec<PromptFit>,
    /// The line through them; `None` when the server reported no counts ([`synthetic_prompt::Scale::GUESS`] is used).
    pub scale: Option<synthetic_prompt::Scale>,
}

impl LengthFit {
    /// One line for the report's notes.
    pub fn note(&self) -> String {
        let at: Vec<String> = self
            .fits
            .iter()
            .map(|f| match f.server_tokens {
                Some(t) => format!("{} words = {t} tokens (for {})", f.words, f.target),
                None => format!("{} words (for {}, no count)", f.words, f.target),
            })
            .collect();
        let requests: usize = self.fits.iter().map(|f| f.requests).sum();
        match self.scale {
            Some(s) => format!(
                "prompt lengths: synthetic prompt fitted at {} ({requests} fitting request(s), not measured); each request's prompt has (tokens - {:.1}) / {:.3} filler words",
                at.join(" and "),
                s.overhead,
                s.per_word
            ),
            None => format!(
                "prompt lengths: the server reported no prompt token counts ({}), so each prompt has tokens - 16 filler words, about one token a word in common tokenizers",
                at.join(", ")
            ),
        }
    }
}

/// Fits the synthetic prompt at each of `lengths` (tokens) on a copy of `sc` and returns the
/// line through the fits. Stops like [`fit`] does.
pub async fn fit_scale(client: &StreamClient, sc: &Scenario, lengths: &[u32]) -> LengthFit {
    let mut scratch = sc.clone();
    scratch.request.messages = vec![crate::config::file::RawMessage {
        role: "user".into(),
        content: String::new(),
    }];
    scratch.request.generate = None;
    let mut fits = Vec::new();
    for &n in lengths {
        if crate::cancel::requested() {
            break;
        }
        let f = fit(client, &mut scratch, n).await;
        let failed = f.server_tokens.is_none();
        fits.push(f);
        if failed {
            break;
        }
    }
    let points: Vec<(u32, u64)> = fits
        .iter()
        .filter_map(|f| f.server_tokens.map(|t| (f.words, t)))
        .collect();
    LengthFit {
        scale: synthetic_prompt::Scale::through(&points),
        fits,
    }
}
