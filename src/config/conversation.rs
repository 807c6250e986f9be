//! `request.conversation`: multi-turn conversations (docs/scenarios.md "Conversations"). Every
//! conversation sends `turns` requests one after the other: a system prompt shared by every
//! conversation, then each turn's new user message after the history so far (the earlier user
//! messages and the answers kept for them), with a think time between an answer's end and the
//! next turn. What a serving team's prefix cache must reuse: the system prompt across
//! conversations, and each conversation's history turn after turn.
//!
//! The texts are synthetic ([`crate::synthetic_prompt::text_seeded`]), each from its own seed,
//! and the answer kept in the history is a fixed text of `answer_tokens`, not the model's own
//! answer: `bless` and `check` send the same requests turn for turn (the same prompt ids), and
//! the reuse a server can make is known (the whole prompt of the turn before). Pure: which text
//! a request sends is [`ConversationSpec::messages`].

use super::common::Slot;
use super::file::{RawConversation, RawMessage};
use super::values::parse_ms;
use crate::config::common::{ensure, within, At, Invalid};
use crate::seeded::SplitMix64;
use serde::Serialize;

/// The most turns a conversation may have.
pub const MAX_TURNS: u32 = 64;
/// The longest message part, tokens (system prompt, user message, kept answer).
pub const MAX_PART_TOKENS: u32 = 32_768;
/// The longest think time, ms.
pub const MAX_THINK_MS: f64 = 60_000.0;
/// The most cold-reference requests.
pub const MAX_REFERENCE: u32 = 200;
/// Cold-reference requests when `reference` is not given.
pub const DEFAULT_REFERENCE: u32 = 8;

/// The seed stream of unmeasured conversations (the warmup's): other texts than the measured
/// ones, so the warmup fills the cache with the shared system prompt only.
const UNMEASURED: u64 = 0x636f_6e76_7761_726d;

/// The validated `request.conversation`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversationSpec {
    /// Requests per conversation (2..=[`MAX_TURNS`]).
    pub turns: u32,
    /// The shared system prompt's length, tokens (about; 0 = none). `request.system`, when
    /// given, is the shared system prompt instead.
    pub system_tokens: u32,
    /// Each turn's new user message, tokens (about).
    pub user_tokens: u32,
    /// The answer kept in the history for each turn, tokens (about; default `max_tokens`).
    pub answer_tokens: u32,
    /// Pause between a turn's end and the next turn's request, ms.
    pub think_time_ms: f64,
    /// Seed of the texts.
    pub seed: u64,
    /// Cold-reference request pairs sent after the measured requests (0 = none): the same
    /// requests behind a cache-busting first line (cold), and that line alone (floor). Not in the
    /// fingerprint (it changes what is checked, not what is measured).
    #[serde(skip)]
    pub reference: u32,
}

/// Which conversation and turn a request is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Turn {
    /// The conversation (0-based in its phase's sequence; measured ones over the whole run).
    pub conversation: usize,
    /// The turn (0-based).
    pub turn: u32,
}

impl ConversationSpec {
    /// The conversation and turn of the request in `slot`: request g is turn `g mod turns` of
    /// conversation `g / turns`.
    pub fn turn_of(&self, slot: Slot) -> Turn {
        let g = match slot {
            Slot::Measured(g) | Slot::Unmeasured(g) => g,
        };
        let n = self.turns as usize;
        Turn {
            conversation: g / n,
            turn: (g % n) as u32,
        }
    }

    /// The messages of the request in `slot`: the shared system prompt (`system`, or
    /// `system_tokens` of filler words when `system` is `None`), then for every earlier turn its
    /// user message and kept answer, then this turn's user message. `per_word`: tokens per filler
    /// word (the server's, when fitted; 1.0 otherwise).
    pub fn messages(&self, slot: Slot, system: Option<&str>, per_word: f64) -> Vec<RawMessage> {
        let words = |tokens: u32| ((f64::from(tokens) / per_word.max(0.05)).round() as u32).max(1);
        let t = self.turn_of(slot);
        let stream = match slot {
            Slot::Measured(_) => self.seed,
            Slot::Unmeasured(_) => self.seed ^ UNMEASURED,
        };
        let text = |what: u64, turn: u32, tokens: u32| {
            let key = ((t.conversation as u64) << 8 | u64::from(turn)) << 2 | what;
            let seed = SplitMix64::for_item(stream, key).next_u64();
            crate::synthetic_prompt::text_seeded(words(tokens), seed)
        };
        let mut out = Vec::with_capacity(2 + 2 * t.turn as usize);
        match system {
            Some(s) => out.push(RawMessage::new("system", s.to_string())),
            None if self.system_tokens > 0 => {
                // one text for every conversation, measured or not: the prefix they share
                let seed = SplitMix64::for_item(self.seed, u64::MAX).next_u64();
                let text = crate::synthetic_prompt::text_seeded(words(self.system_tokens), seed);
                out.push(RawMessage::new("system", text));
            }
            None => {}
        }
        for k in 0..=t.turn {
            out.push(RawMessage::new("user", text(0, k, self.user_tokens)));
            if k < t.turn {
                out.push(RawMessage::new("assistant", text(1, k, self.answer_tokens)));
            }
        }
        out
    }

    /// `4 turns (system 400, user 32, kept answers 16 tokens; think time 200 ms)`.
    pub fn describe(&self, system_given: bool) -> String {
        let system = if system_given {
            "request.system".to_string()
        } else {
            format!("system {}", self.system_tokens)
        };
        format!(
            "{} turns ({system}, user {}, kept answers {} tokens; think time {} ms)",
            self.turns,
            self.user_tokens,
            self.answer_tokens,
            crate::units::Num(self.think_time_ms)
        )
    }
}

/// Validates `request.conversation`; `max_tokens` is the default kept-answer length.
pub fn build(raw: &RawConversation, max_tokens: u32) -> Result<ConversationSpec, Invalid> {
    let turns = raw.turns.ok_or(
        "request.conversation.turns is required: the requests of one conversation (2 or more)",
    )?;
    let key = |k: &str| format!("request.conversation.{k}");
    within(
        &key("turns"),
        turns,
        2..=MAX_TURNS,
        " (one turn is a plain request: use request.prompt_tokens)",
    )?;
    let part = |k: &str, v: Option<u32>, default: u32, min: u32| {
        within(
            &key(k),
            v.unwrap_or(default),
            min..=MAX_PART_TOKENS,
            " tokens",
        )
    };
    let user_tokens = part("user_tokens", raw.user_tokens, 32, 1)?;
    let system_tokens = part("system_tokens", raw.system_tokens, 0, 0)?;
    let answer_tokens = part(
        "answer_tokens",
        raw.answer_tokens,
        max_tokens.min(MAX_PART_TOKENS),
        1,
    )?;
    let think_time_ms = raw
        .think_time
        .as_ref()
        .map(parse_ms)
        .transpose()
        .at(key("think_time"))?;
    let think_time_ms = think_time_ms.unwrap_or(0.0);
    ensure!(
        (0.0..=MAX_THINK_MS).contains(&think_time_ms),
        "request.conversation.think_time is {}: use 0 to {} s",
        crate::units::fmt_ms(think_time_ms),
        MAX_THINK_MS / 1000.0
    );
    let reference = raw.reference.unwrap_or(DEFAULT_REFERENCE);
    within(
        &key("reference"),
        reference,
        0..=MAX_REFERENCE,
        " request pairs",
    )?;
    Ok(ConversationSpec {
        turns,
        system_tokens,
        user_tokens,
        answer_tokens,
        think_time_ms,
        seed: raw.seed.unwrap_or(0),
        reference,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec() -> ConversationSpec {
        build(
            &RawConversation {
                turns: Some(3),
                system_tokens: Some(40),
                user_tokens: Some(8),
                answer_tokens: Some(5),
                ..Default::default()
            },
            16,
        )
        .unwrap()
    }

    fn words(m: &RawMessage) -> usize {
        m.content.split_whitespace().count()
    }

    #[test]
    fn each_turn_sends_the_history_so_far_after_the_shared_system_prompt() {
        let c = spec();
        // request 5 is conversation 1's third turn
        assert_eq!(
            c.turn_of(Slot::Measured(5)),
            Turn {
                conversation: 1,
                turn: 2
            }
        );
        let t1 = c.messages(Slot::Measured(3), None, 1.0);
        let t2 = c.messages(Slot::Measured(4), None, 1.0);
        let t3 = c.messages(Slot::Measured(5), None, 1.0);
        let roles = |m: &[RawMessage]| m.iter().map(|m| m.role.clone()).collect::<Vec<_>>();
        assert_eq!(roles(&t1), ["system", "user"]);
        assert_eq!(
            roles(&t3),
            ["system", "user", "assistant", "user", "assistant", "user"]
        );
        // every turn's prompt starts with the one before it: a prefix cache can reuse it all
        assert_eq!(t2[..2], t1[..]);
        assert_eq!(t3[..4], t2[..]);
        // lengths: the head's 10 words plus the filler words asked for
        assert_eq!(words(&t1[0]), 10 + 40);
        assert_eq!(words(&t1[1]), 10 + 8);
        assert_eq!(words(&t2[2]), 10 + 5);
        // another conversation shares the system prompt only
        let other = c.messages(Slot::Measured(0), None, 1.0);
        assert_eq!(other[0], t1[0]);
        assert_ne!(other[1], t1[1]);
        // the warmup's conversations too, with texts no measured one sends
        let warm = c.messages(Slot::Unmeasured(3), None, 1.0);
        assert_eq!(warm[0], t1[0]);
        assert_ne!(warm[1], t1[1]);
        // the same slot, the same text: bless and check send the same requests
        assert_eq!(c.messages(Slot::Measured(5), None, 1.0), t3);
        // request.system replaces the synthetic system prompt; 2 tokens a word halves the words
        let s = c.messages(Slot::Measured(3), Some("Be brief."), 2.0);
        assert_eq!(s[0].content, "Be brief.");
        assert_eq!(words(&s[1]), 10 + 4);
    }

    #[test]
    fn bad_values_are_refused_with_the_key() {
        let raw = |f: &dyn Fn(&mut RawConversation)| {
            let mut r = RawConversation {
                turns: Some(4),
                ..Default::default()
            };
            f(&mut r);
            build(&r, 16)
        };
        assert_eq!(raw(&|_| {}).unwrap().answer_tokens, 16);
        for (f, key) in [
            (
                &(|r: &mut RawConversation| r.turns = Some(1)) as &dyn Fn(&mut RawConversation),
                "turns is 1",
            ),
            (&|r| r.turns = None, "turns is required"),
            (&|r| r.user_tokens = Some(0), "user_tokens is 0"),
            (
                &|r| r.think_time = Some(crate::config::file::RawNumber::Text("120s".into())),
                "think_time is 120.00 s: use 0 to 60 s",
            ),
            (&|r| r.reference = Some(1000), "reference is 1000"),
        ] {
            let e = raw(f).unwrap_err();
            assert!(e.to_string().contains(key), "{e}");
        }
    }
}
