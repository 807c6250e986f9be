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
//! the reuse a server can make is known (the whole prompt of the turn before). Or, with
//! `file`, the conversations of a file as published (ShareGPT, LMSYS-Chat-1M, AIPerf
//! `multi_turn`; read by [`super::prompt_set::dialogs`]): each turn its human message after
//! the history so far, the file's own replies kept in it; or AIPerf `mooncake_trace` sessions
//! ([`super::sessions`]): each turn a synthetic user message of its line's `input_length`
//! tokens (its `hash_ids` blocks shared with every line that has them), after the session's
//! earlier turns and a kept answer of each one's `output_length`, sent `delay` ms after the
//! previous answer. Pure: which text a request sends is [`ConversationSpec::messages`], after
//! how long [`ConversationSpec::think_ms`].

use super::common::{read_data_file, short_hash, Slot};
use super::file::{RawConversation, RawMessage};
use super::prompt_set::Turns;
use super::sessions::Session;
use super::values::parse_ms;
use crate::config::common::{ensure, within, At, Invalid};
use crate::limits::{MAX_THINK_MS, MAX_TURNS};
use crate::seeded::SplitMix64;
use serde::Serialize;
use std::path::Path;
use std::sync::Arc;

/// The longest message part, tokens (system prompt, user message, kept answer).
pub const MAX_PART_TOKENS: u32 = 32_768;
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
    /// Requests per conversation (2..=[`MAX_TURNS`]); AIPerf sessions replayed whole
    /// (`turns` not given): the longest session's turns, each session its own.
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
    /// `file`: the conversations replayed (absent: synthetic texts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub file: Option<ConversationFile>,
}

/// The conversations of `request.conversation.file`: where they came from (in the
/// fingerprint) and the ones with at least `turns` human turns (not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConversationFile {
    /// The path as written (relative to the scenario file).
    pub file: String,
    /// sha256 (16 hex chars) of the file's bytes.
    pub sha256: String,
    /// Conversations replayed: those with `turns` human turns or more.
    pub conversations: usize,
    /// Conversations left out: fewer than `turns` non-empty human turns.
    #[serde(skip)]
    pub short: usize,
    /// AIPerf `mooncake_trace` sessions: tokens per hash id (absent for the other files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub block_size: Option<u32>,
    /// AIPerf sessions replayed whole (`turns` not given): each session all its lines.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub whole: bool,
    #[serde(skip)]
    list: Dialogs,
    /// Sessions replayed whole: where each conversation starts in a phase's requests.
    #[serde(skip)]
    layout: Option<Layout>,
}

/// Where the conversations of sessions of different lengths start in a phase's requests: the
/// prefix sums of their turn counts (n + 1 of them, from 0), in the order measured requests
/// replay them (the file's) and in the warmup's (from the end). Request g of a phase is in
/// the pass `g / total` over the sessions (the last sum), at its place `g mod total`.
#[derive(Debug, Clone, PartialEq)]
struct Layout {
    forward: Arc<Vec<usize>>,
    backward: Arc<Vec<usize>>,
}

impl Layout {
    /// The layout of conversations of `lens` turns (each at least 1; at least one).
    fn of(lens: &[usize]) -> Layout {
        let sums = |it: &mut dyn Iterator<Item = usize>| -> Vec<usize> {
            std::iter::once(0)
                .chain(it.scan(0, |acc, l| {
                    *acc += l;
                    Some(*acc)
                }))
                .collect()
        };
        Layout {
            forward: Arc::new(sums(&mut lens.iter().copied())),
            backward: Arc::new(sums(&mut lens.iter().rev().copied())),
        }
    }

    /// The fewest turns of a session.
    fn fewest(&self) -> usize {
        self.forward
            .windows(2)
            .map(|w| w[1] - w[0])
            .min()
            .unwrap_or(0)
    }

    fn starts(&self, slot: Slot) -> &[usize] {
        match slot {
            Slot::Measured(_) => &self.forward,
            Slot::Unmeasured(_) => &self.backward,
        }
    }

    /// The conversation (over the whole phase) and turn of request `g`.
    fn locate(starts: &[usize], g: usize) -> Turn {
        let n = starts.len() - 1;
        let total = starts[n].max(1);
        let (pass, r) = (g / total, g % total);
        let p = starts.partition_point(|&x| x <= r).saturating_sub(1);
        Turn {
            conversation: pass * n + p,
            turn: (r - starts[p]) as u32,
        }
    }

    /// Where conversation `c` (over the whole phase) starts, and its turns.
    fn span(starts: &[usize], c: usize) -> (usize, usize) {
        let n = (starts.len() - 1).max(1);
        let total = starts[starts.len() - 1];
        let (pass, p) = (c / n, c % n);
        (pass * total + starts[p], starts[p + 1] - starts[p])
    }
}

/// The conversations of a file.
#[derive(Debug, Clone, PartialEq)]
enum Dialogs {
    /// Texts (ShareGPT, LMSYS-Chat-1M, AIPerf `multi_turn`).
    Texts(Arc<Vec<Turns>>),
    /// AIPerf `mooncake_trace` sessions: lengths, blocks and delays.
    Sessions(Arc<Vec<Session>>),
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
    /// conversation `g / turns`; of sessions replayed whole, the turn of the session its place
    /// in the sessions' turns falls in (`Layout`).
    pub fn turn_of(&self, slot: Slot) -> Turn {
        let g = match slot {
            Slot::Measured(g) | Slot::Unmeasured(g) => g,
        };
        if let Some(l) = self.layout() {
            return Layout::locate(l.starts(slot), g);
        }
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
        if let Some(f) = &self.file {
            return f.messages(slot, t, system, per_word, self.answer_tokens);
        }
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

    fn layout(&self) -> Option<&Layout> {
        self.file.as_ref()?.layout.as_ref()
    }

    /// Where conversation `c` of a phase (`measured` or the warmup) starts in its requests,
    /// and its turns.
    pub fn span(&self, measured: bool, c: usize) -> (usize, usize) {
        let slot = match measured {
            true => Slot::Measured(0),
            false => Slot::Unmeasured(0),
        };
        match self.layout() {
            Some(l) => Layout::span(l.starts(slot), c),
            None => (c * self.turns as usize, self.turns as usize),
        }
    }

    /// How many whole conversations the first `requests` measured requests hold, and, when they
    /// end inside one, the request counts that would not (fewer, more).
    pub fn whole(&self, requests: usize) -> (usize, Option<(usize, usize)>) {
        if requests == 0 {
            return (0, None);
        }
        let t = self.turn_of(Slot::Measured(requests - 1));
        let (start, len) = self.span(true, t.conversation);
        match start + len == requests {
            true => (t.conversation + 1, None),
            false => (t.conversation, Some((start, start + len))),
        }
    }

    /// The pause before the request in `slot`, after the previous turn's answer ended, ms: the
    /// think time, or a session's turn's `delay` (0 before a first turn).
    pub fn think_ms(&self, slot: Slot) -> f64 {
        let t = self.turn_of(slot);
        if t.turn == 0 {
            return 0.0;
        }
        match self.file.as_ref().and_then(|f| f.session_turn(slot, t)) {
            Some(turn) => turn.delay_ms,
            None => self.think_time_ms,
        }
    }

    /// The `max_tokens` of the request in `slot` when its turn sets it (a session's
    /// `output_length`); `None`: `request.max_tokens`.
    pub fn max_tokens(&self, slot: Slot) -> Option<u32> {
        let t = self.turn_of(slot);
        let f = self.file.as_ref()?;
        f.session_turn(slot, t).and_then(|turn| turn.output_tokens)
    }

    /// The answer kept for a session's turn, tokens: its `output_length` (else the default
    /// kept answer, `request.max_tokens`), at most [`MAX_PART_TOKENS`].
    fn kept_answer(&self, t: &super::sessions::SessionTurn) -> u32 {
        t.output_tokens
            .unwrap_or(self.answer_tokens)
            .min(MAX_PART_TOKENS)
    }

    /// The first line of the file with `tools` (a session's `messages` line), for the API
    /// check; `None`: none.
    pub fn tools_line(&self) -> Option<usize> {
        let Dialogs::Sessions(l) = &self.file.as_ref()?.list else {
            return None;
        };
        l.iter()
            .flat_map(|s| s.turns.iter())
            .filter(|t| t.tools.is_some())
            .map(|t| t.line)
            .min()
    }

    /// The `tools` of the request in `slot` (a session's `messages` line's), for its body.
    pub fn tools(&self, slot: Slot) -> Option<&serde_json::Value> {
        let t = self.turn_of(slot);
        let f = self.file.as_ref()?;
        f.session_turn(slot, t).and_then(|turn| turn.tools.as_ref())
    }

    /// AIPerf sessions: the prompt lengths to fit the synthetic words at (the server's tokens
    /// per word, [`crate::prompt_fit::fit_scale`]): the sessions' user messages' `input_length`
    /// at their 10th and 90th percentiles; `None` for the other conversations.
    pub fn fit_points(&self) -> Option<Vec<u32>> {
        let Dialogs::Sessions(l) = &self.file.as_ref()?.list else {
            return None;
        };
        let mut v: Vec<u32> = l
            .iter()
            .flat_map(|s| {
                s.turns
                    .iter()
                    .filter(|t| t.text.is_none() && t.messages.is_none())
            })
            .map(|t| t.input_tokens)
            .collect();
        v.sort_unstable();
        let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
        // (a file of given texts only: nothing to fit)
        (!v.is_empty()).then(|| super::common::fit_points(at(0.1), at(0.9)))
    }

    /// AIPerf sessions: the longest last-turn prompt, tokens (about: its turns' `input_length`
    /// and the kept answers' `output_length`, at most [`MAX_PART_TOKENS`] each) and the
    /// session's id; `None` for the other conversations.
    pub fn longest_session_prompt(&self) -> Option<(u64, String)> {
        let Dialogs::Sessions(l) = &self.file.as_ref()?.list else {
            return None;
        };
        let n = self.turns as usize;
        l.iter()
            .map(|s| {
                // (sessions replayed whole: `turns` is the longest's)
                let turns = &s.turns[..n.min(s.turns.len())];
                if turns.iter().any(|t| t.messages.is_some()) {
                    // each turn its own whole request: the longest of them
                    let longest = turns.iter().map(|t| u64::from(t.input_tokens)).max();
                    return (longest.unwrap_or(0), s.id.clone());
                }
                let answers: u64 = turns
                    .iter()
                    .take(turns.len().saturating_sub(1))
                    .map(|t| u64::from(self.kept_answer(t)))
                    .sum();
                let users: u64 = turns.iter().map(|t| u64::from(t.input_tokens)).sum();
                (users + answers, s.id.clone())
            })
            .max_by_key(|(t, _)| *t)
    }

    /// `4 turns (system 400, user 32, kept answers 16 tokens; think time 200 ms)`, or `2 turns
    /// of conversations/sharegpt.json (3 conversations, sha256 ..., 2 with fewer than 2 human
    /// turns left out; think time 0 ms)`.
    pub fn describe(&self, system_given: bool) -> String {
        if let Some(
            f @ ConversationFile {
                block_size: Some(b),
                whole: true,
                ..
            },
        ) = &self.file
        {
            let fewest = f.layout.as_ref().map_or(1, Layout::fewest) as u32;
            let turns = if fewest == self.turns {
                format!("{fewest}")
            } else {
                format!("{fewest} to {}", self.turns)
            };
            return format!(
                "sessions of {} replayed whole (AIPerf mooncake_trace sessions: {} sessions of {turns} turns, sha256 {}; blocks of {b} tokens; think times: each turn's `delay`{})",
                f.file,
                f.conversations,
                f.sha256,
                f.session_notes(),
            );
        }
        if let Some(
            f @ ConversationFile {
                block_size: Some(b),
                ..
            },
        ) = &self.file
        {
            return format!(
                "{} turns of {} (AIPerf mooncake_trace sessions: {} sessions, sha256 {}, {} with fewer than {} turns left out; blocks of {b} tokens; think times: each turn's `delay`{})",
                self.turns,
                f.file,
                f.conversations,
                f.sha256,
                f.short,
                self.turns,
                f.session_notes(),
            );
        }
        if let Some(f) = &self.file {
            return format!(
                "{} turns of {} ({} conversations, sha256 {}, {} with fewer than {} human turns left out; think time {} ms)",
                self.turns,
                f.file,
                f.conversations,
                f.sha256,
                f.short,
                self.turns,
                crate::units::Num(self.think_time_ms)
            );
        }
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

impl ConversationFile {
    /// Which of the file's conversations turn `t` (in `slot`'s phase) is in: measured
    /// conversation c replays the file's conversation `c mod n`, unmeasured (the warmup's) ones
    /// take them from the end, as a prompt set's warmup does.
    fn pick(&self, slot: Slot, t: Turn) -> usize {
        let n = match &self.list {
            Dialogs::Texts(l) => l.len(),
            Dialogs::Sessions(l) => l.len(),
        }
        .max(1);
        match slot {
            Slot::Measured(_) => t.conversation % n,
            Slot::Unmeasured(_) => n - 1 - t.conversation % n,
        }
    }

    /// What `validate` says of the sessions beyond their counts: how many are `messages`
    /// lines sent as given, how many first turns' `delay` is not waited (empty: none).
    fn session_notes(&self) -> String {
        let Dialogs::Sessions(l) = &self.list else {
            return String::new();
        };
        let given = l
            .iter()
            .filter(|s| s.turns.iter().any(|t| t.messages.is_some()))
            .count();
        let delayed = l
            .iter()
            .filter(|s| s.turns.first().is_some_and(|t| t.delay_ms > 0.0))
            .count();
        let mut out = String::new();
        if given > 0 {
            out.push_str(&format!(
                "; {given} sessions of `messages` lines: each turn sent as given, without the session's history"
            ));
        }
        if delayed > 0 {
            out.push_str(&format!(
                "; {delayed} first turns' `delay` not waited (AIPerf waits a `delay` only after a previous turn)"
            ));
        }
        out
    }

    /// The most turns a conversation replayed has (sessions replayed whole), at least 1.
    fn longest_turns(&self) -> u32 {
        match &self.list {
            Dialogs::Sessions(l) => l.iter().map(|s| s.turns.len()).max().unwrap_or(1) as u32,
            Dialogs::Texts(_) => 1,
        }
        .max(1)
    }

    /// The session line of turn `t` (in `slot`'s phase); `None` for the other files.
    fn session_turn(&self, slot: Slot, t: Turn) -> Option<&super::sessions::SessionTurn> {
        match &self.list {
            Dialogs::Sessions(l) => l.get(self.pick(slot, t))?.turns.get(t.turn as usize),
            Dialogs::Texts(_) => None,
        }
    }

    /// The messages of turn `t` (in `slot`'s phase): `system` (`request.system`) first when
    /// given, then the conversation's history and the turn's message.
    fn messages(
        &self,
        slot: Slot,
        t: Turn,
        system: Option<&str>,
        per_word: f64,
        answer_tokens: u32,
    ) -> Vec<RawMessage> {
        let k = self.pick(slot, t);
        let mut out: Vec<RawMessage> = system
            .map(|s| RawMessage::new("system", s.to_string()))
            .into_iter()
            .collect();
        let list = match &self.list {
            Dialogs::Texts(l) => l,
            Dialogs::Sessions(l) => {
                if let (Some(s), Some(b)) = (l.get(k), self.block_size) {
                    out.extend(session_messages(s, t.turn, (b, answer_tokens), per_word));
                }
                return out;
            }
        };
        let Some(c) = list.get(k) else {
            return out;
        };
        out.extend(c.system.iter().cloned());
        for (j, (question, reply)) in c.turns.iter().enumerate().take(t.turn as usize + 1) {
            out.push(question.clone());
            if j < t.turn as usize {
                out.extend(reply.iter().cloned());
            }
        }
        out
    }
}

/// A session's turn `turn` (0-based) and the history before it, each message the synthetic
/// prompt's instruction and filler words, as many in all as its tokens at `per_word` (so at
/// one token a word, turn k's prompt is the tokens AIPerf counts for it: the earlier turns'
/// `input_length` and answers, then its own): for every earlier turn its
/// user message and an answer of its `output_length` tokens (none: `answer_tokens`, the default
/// kept answer; capped at [`MAX_PART_TOKENS`]),
/// then this turn's user message. A user message of `input_length` tokens is its `hash_ids`
/// blocks' texts (as load.trace's, [`crate::synthetic_prompt::blocks_text`]: a hash id is the
/// same text in every line and session that has it) or, without hash ids, its own text (seeded
/// by its line); the answers' texts by their lines. `per_word`: tokens per filler word.
fn session_messages(
    s: &Session,
    turn: u32,
    (block_size, answer_tokens): (u32, u32),
    per_word: f64,
) -> Vec<RawMessage> {
    let per_word = per_word.max(0.05);
    // the filler words after the instruction: the message is `tokens` long, instruction included
    let head = crate::synthetic_prompt::HEAD_WORDS;
    let words = |tokens: u32| {
        ((f64::from(tokens) / per_word).round() as u32)
            .saturating_sub(head)
            .max(1)
    };
    let seeded = |line: usize, what: u64| {
        SplitMix64::for_item(SESSION_TEXTS, (line as u64) << 1 | what).next_u64()
    };
    // a `messages` line: its whole context as given, no history (AIPerf's
    // message_array_with_responses)
    if let Some(m) = s.turns.get(turn as usize).and_then(|x| x.messages.as_ref()) {
        return m.clone();
    }
    let mut out = Vec::with_capacity(2 * turn as usize + 1);
    for (k, x) in s.turns.iter().enumerate().take(turn as usize + 1) {
        let w = words(x.input_tokens);
        let user = if let Some(t) = &x.text {
            t.clone()
        } else if x.hash_ids.is_empty() {
            crate::synthetic_prompt::text_seeded(w, seeded(x.line, 0))
        } else {
            let per_block = ((f64::from(block_size) / per_word).round() as u32).max(1);
            let counts = crate::synthetic_prompt::block_words(w, x.hash_ids.len(), per_block);
            let blocks: Vec<(u64, u32)> = x.hash_ids.iter().copied().zip(counts).collect();
            crate::synthetic_prompt::blocks_text(&blocks)
        };
        out.push(RawMessage::new("user", user));
        if k < turn as usize {
            let answer = words(
                x.output_tokens
                    .unwrap_or(answer_tokens)
                    .min(MAX_PART_TOKENS),
            );
            out.push(RawMessage::new(
                "assistant",
                crate::synthetic_prompt::text_seeded(answer, seeded(x.line, 1)),
            ));
        }
    }
    out
}

/// The seed stream of a session file's own texts (user messages without hash ids, answers).
const SESSION_TEXTS: u64 = 0x7365_7373_696f_6e73;

/// Reads `request.conversation.file` (relative to `dir`): its conversations with at least
/// `turns` human turns (AIPerf `mooncake_trace` sessions: turns). Errors: the key or
/// `file:line`, and what to do.
fn load_file(
    file: &str,
    dir: &Path,
    turns: Option<u32>,
    block_size: Option<u32>,
) -> Result<ConversationFile, Invalid> {
    let (file, shown, text) = read_data_file(
        "request.conversation.file",
        Some(file),
        (dir, crate::limits::MAX_PROMPT_SET_BYTES),
        "a ShareGPT, LMSYS-Chat-1M, AIPerf multi_turn or AIPerf mooncake_trace file of conversations",
        "file",
    )?;
    if super::sessions::is_sessions(&text) {
        let block = block_size.unwrap_or(super::trace::DEFAULT_BLOCK_SIZE);
        let all = super::sessions::parse(&text, &shown, block)?;
        let read = all.len();
        let list: Vec<Session> = all
            .into_iter()
            .filter(|s| s.turns.len() >= turns.unwrap_or(1) as usize)
            .collect();
        let layout = match turns {
            None => Some(Layout::of(
                &list.iter().map(|s| s.turns.len()).collect::<Vec<_>>(),
            )),
            Some(_) => None,
        };
        let turns = turns.unwrap_or(1);
        ensure!(
            !list.is_empty(),
            "request.conversation.file {shown}: none of its {read} sessions has {turns} turns; lower request.conversation.turns"
        );
        return Ok(ConversationFile {
            file: file.to_string(),
            sha256: short_hash(&text),
            conversations: list.len(),
            short: read - list.len(),
            block_size: Some(block),
            whole: layout.is_some(),
            list: Dialogs::Sessions(Arc::new(list)),
            layout,
        });
    }
    ensure!(
        block_size.is_none(),
        "request.conversation.block_size is the tokens of an AIPerf mooncake_trace session's hash id; {shown} is not such a file: leave it out"
    );
    let turns = turns.ok_or_else(|| format!("request.conversation.turns is required with {shown}: the human turns replayed of each conversation (2 or more; only AIPerf mooncake_trace sessions are replayed whole without it)"))?;
    let (all, no_human) = super::prompt_set::dialogs(&text, &shown)?;
    let read = all.len() + no_human;
    let list: Vec<Turns> = all
        .into_iter()
        .filter(|c| c.turns.len() >= turns as usize)
        .collect();
    ensure!(
        !list.is_empty(),
        "request.conversation.file {shown}: none of its {read} conversations has {turns} non-empty human turns; lower request.conversation.turns"
    );
    Ok(ConversationFile {
        file: file.to_string(),
        sha256: short_hash(&text),
        conversations: list.len(),
        short: read - list.len(),
        block_size: None,
        whole: false,
        list: Dialogs::Texts(Arc::new(list)),
        layout: None,
    })
}

/// Validates `request.conversation`; `max_tokens` is the default kept-answer length, `dir`
/// the scenario file's directory (`file` is relative to it).
pub fn build(
    raw: &RawConversation,
    max_tokens: u32,
    dir: &Path,
) -> Result<ConversationSpec, Invalid> {
    ensure!(
        raw.turns.is_some() || raw.file.is_some(),
        "request.conversation.turns is required: the requests of one conversation (2 or more)"
    );
    let key = |k: &str| format!("request.conversation.{k}");
    if let Some(turns) = raw.turns {
        within(
            &key("turns"),
            turns,
            2..=MAX_TURNS,
            " (one turn is a plain request: use request.prompt_tokens)",
        )?;
    }
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
    let file = match &raw.file {
        None => {
            ensure!(
                raw.block_size.is_none(),
                "request.conversation.block_size is the tokens of an AIPerf mooncake_trace session's hash id: give the sessions' file, or leave it out"
            );
            None
        }
        Some(f) => {
            let synthetic = raw.system_tokens.is_some()
                || raw.user_tokens.is_some()
                || raw.answer_tokens.is_some();
            ensure!(!synthetic, "request.conversation.file gives the texts: leave out system_tokens, user_tokens and answer_tokens");
            if let Some(b) = raw.block_size {
                within(&key("block_size"), b, 1..=65_536, " tokens")?;
            }
            let f = load_file(f, dir, raw.turns, raw.block_size)?;
            ensure!(
                f.block_size.is_none() || raw.think_time.is_none(),
                "request.conversation.file {} is AIPerf mooncake_trace sessions, whose lines give the think times (each turn's `delay`, ms after the previous answer): leave out think_time",
                f.file
            );
            Some(f)
        }
    };
    let reference = raw.reference.unwrap_or(DEFAULT_REFERENCE);
    within(
        &key("reference"),
        reference,
        0..=MAX_REFERENCE,
        " request pairs",
    )?;
    // sessions replayed whole: the longest session's turns
    let turns = match (&file, raw.turns) {
        (_, Some(t)) => t,
        (Some(f), None) => f.longest_turns(),
        (None, None) => 2,
    };
    Ok(ConversationSpec {
        turns,
        system_tokens,
        user_tokens,
        answer_tokens,
        think_time_ms,
        seed: raw.seed.unwrap_or(0),
        reference,
        file,
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
            Path::new("."),
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

    /// AIPerf mooncake_trace sessions (tests/fixtures/traces/aiperf_sessions.jsonl): each
    /// session a conversation of its lines in file order, each turn its synthetic user message
    /// after the history (the earlier messages and an answer of each one's `output_length`),
    /// asking its own `output_length`, after its own `delay`.
    #[test]
    fn aiperf_sessions_are_conversations_of_their_lines() {
        let dir = Path::new("tests/fixtures/traces");
        let raw = |turns: u32| RawConversation {
            file: Some("aiperf_sessions.jsonl".into()),
            turns: Some(turns),
            ..Default::default()
        };
        let c = build(&raw(2), 16, dir).unwrap();
        let f = c.file.as_ref().unwrap();
        // chat-a (3 lines) and chat-b (2); the one-line session left out
        assert_eq!((f.conversations, f.short, f.block_size), (2, 1, Some(512)));
        assert!(
            c.describe(false).starts_with("2 turns of aiperf_sessions.jsonl (AIPerf mooncake_trace sessions: 2 sessions, sha256 "),
            "{}",
            c.describe(false)
        );
        let m = |slot: Slot| c.messages(slot, None, 1.0);
        let roles = |v: &[RawMessage]| v.iter().map(|m| m.role.clone()).collect::<Vec<_>>();
        // request 0: chat-a's first turn, 600 tokens: the 10-word head and blocks 0 and 1 (512
        // + 78 words); no pause; max_tokens its output_length 20
        let a1 = m(Slot::Measured(0));
        assert_eq!(roles(&a1), ["user"]);
        assert_eq!(words(&a1[0]), 600);
        assert_eq!(c.think_ms(Slot::Measured(0)), 0.0);
        assert_eq!(c.max_tokens(Slot::Measured(0)), Some(20));
        // request 1: its second turn after the first and a kept answer of 20 tokens, 500 ms
        // after the answer, asking 10
        let a2 = m(Slot::Measured(1));
        assert_eq!(roles(&a2), ["user", "assistant", "user"]);
        assert_eq!(a2[0], a1[0]);
        assert_eq!((words(&a2[1]), words(&a2[2])), (20, 100));
        assert_eq!(c.think_ms(Slot::Measured(1)), 500.0);
        assert_eq!(c.max_tokens(Slot::Measured(1)), Some(10));
        // request 2: chat-b's first turn: the head and hash id 0 alone, 290 words: the first
        // 290 words of chat-a's block 0, so chat-a's first message starts with it
        let b1 = m(Slot::Measured(2));
        assert_eq!(words(&b1[0]), 300);
        assert!(a1[0].content.starts_with(&b1[0].content));
        assert_eq!(
            (
                c.think_ms(Slot::Measured(3)),
                c.max_tokens(Slot::Measured(3))
            ),
            (400.0, Some(12))
        );
        // request 4 replays chat-a again; the warmup's take the sessions from the end (chat-b);
        // the same slot, the same text (bless and check send the same requests)
        assert_eq!(m(Slot::Measured(4)), a1);
        assert_eq!(m(Slot::Unmeasured(0)), b1);
        // 2 tokens a word: half the words (the head, then 256 + 34 in blocks of 256)
        assert_eq!(words(&c.messages(Slot::Measured(0), None, 2.0)[0]), 300);
        // 3 turns: chat-a alone; its third turn has no hash ids (its own text), 255 ms after
        // the answer, output_length 0 asking 1
        let c3 = build(&raw(3), 16, dir).unwrap();
        assert_eq!(
            c3.file.as_ref().map(|f| (f.conversations, f.short)),
            Some((1, 2))
        );
        let a3 = c3.messages(Slot::Measured(2), None, 1.0);
        assert_eq!(roles(&a3).len(), 5);
        assert_eq!(a3[..3], a2[..]);
        // (an answer of 10 tokens: the 10-word head and the one filler word a message has at
        // least)
        assert_eq!((words(&a3[3]), words(&a3[4])), (11, 40));
        assert_eq!(
            (
                c3.think_ms(Slot::Measured(2)),
                c3.max_tokens(Slot::Measured(2))
            ),
            (255.0, Some(1))
        );
        // the think times are the file's; a session file's sessions must have the turns
        let mut r = raw(2);
        r.think_time = Some(crate::config::file::RawNumber::Text("1s".into()));
        let e = build(&r, 16, dir).unwrap_err().to_string();
        assert!(
            e.contains("whose lines give the think times") && e.contains("leave out think_time"),
            "{e}"
        );
        let e = build(&raw(4), 16, dir).unwrap_err().to_string();
        assert!(
            e.contains("none of its 3 sessions has 4 turns; lower request.conversation.turns"),
            "{e}"
        );
        // the fit points: the 10th and 90th percentiles of 40, 80, 100, 300, 600 (the two
        // sessions replayed): indexes round(0.4) = 0 and round(3.6) = 4
        assert_eq!(c.fit_points(), Some(vec![40, 600]));
        assert_eq!(spec().fit_points(), None);
        // chat-a's 3 turns: 600 + 100 + 40 user tokens and answers of 20 and 10
        assert_eq!(
            c3.longest_session_prompt(),
            Some((770, "chat-a".to_string()))
        );
        assert_eq!(spec().longest_session_prompt(), None);
        // no output_length (AIPerf's default output length): request.max_tokens (16 here),
        // and the kept answer request.max_tokens too
        let tmp = tempfile::tempdir().unwrap();
        // `request.conversation: {file: name, turns: 2}` of a file holding `text`
        let from = |name: &str, text: &str| {
            std::fs::write(tmp.path().join(name), text).unwrap();
            let mut r = raw(2);
            r.file = Some(name.into());
            r
        };
        let d = build(
            &from(
                "s.jsonl",
                "{\"session_id\": 7, \"input_length\": 30}\n{\"session_id\": 7, \"delay\": 5, \"input_length\": 20}\n",
            ),
            16,
            tmp.path(),
        )
        .unwrap();
        assert_eq!(d.max_tokens(Slot::Measured(1)), None);
        let m = d.messages(Slot::Measured(1), None, 1.0);
        assert_eq!(m.iter().map(words).collect::<Vec<_>>(), [30, 16, 20]);
        // blocks of another size: request.conversation.block_size (AIPerf's --isl-block-size)
        let mut r = from(
            "b.jsonl",
            "{\"session_id\": \"b\", \"input_length\": 300, \"output_length\": 1, \"hash_ids\": [1, 2]}\n{\"session_id\": \"b\", \"input_length\": 9, \"output_length\": 1, \"hash_ids\": [3]}\n",
        );
        let e = build(&r, 16, tmp.path()).unwrap_err().to_string();
        assert!(
            e.contains("b.jsonl:1: 2 hash_ids for input_length 300: blocks of 512 tokens need 1 (set request.conversation.block_size to the file's"),
            "{e}"
        );
        r.block_size = Some(256);
        let b = build(&r, 16, tmp.path()).unwrap();
        assert_eq!(b.file.as_ref().and_then(|f| f.block_size), Some(256));
        // 300 words: the head, then 256 + 34 in blocks of 256
        assert_eq!(words(&b.messages(Slot::Measured(0), None, 1.0)[0]), 300);
        r.block_size = Some(0);
        let e = build(&r, 16, tmp.path()).unwrap_err().to_string();
        assert!(e.contains("block_size is 0"), "{e}");
        r.block_size = Some(256);
        r.file = None;
        r.turns = Some(2);
        let e = build(&r, 16, tmp.path()).unwrap_err().to_string();
        assert!(
            e.contains("give the sessions' file, or leave it out"),
            "{e}"
        );
        // `text_input` turns: the texts as given, the kept answer synthetic
        let r = from(
            "t.jsonl",
            "{\"session_id\": \"t\", \"text_input\": \"What is ML?\", \"output_length\": 12}\n{\"session_id\": \"t\", \"delay\": 3, \"text_input\": \"An example, please.\"}\n",
        );
        let t = build(&r, 16, tmp.path()).unwrap();
        let m = t.messages(Slot::Measured(1), None, 1.0);
        assert_eq!(
            (m[0].content.as_str(), words(&m[1]), m[2].content.as_str()),
            ("What is ML?", 12, "An example, please.")
        );
        // nothing to fit: no synthetic message
        assert_eq!(t.fit_points(), None);
        // synthetic and text conversations keep request.max_tokens and think_time
        assert_eq!(spec().span(true, 3), (9, 3));
        assert_eq!(spec().whole(7), (2, Some((6, 9))));
        assert_eq!(spec().max_tokens(Slot::Measured(1)), None);
    }

    /// AIPerf sessions without `turns`: each session replayed whole, its own number of turns,
    /// in file order (the warmup's from the end): chat-a 3 turns, chat-b 2, the one-line
    /// session 1; 6 requests a pass over them.
    #[test]
    fn aiperf_message_sessions_send_each_turn_as_given() {
        let raw = RawConversation {
            file: Some("aiperf_messages_sessions.jsonl".into()),
            ..Default::default()
        };
        let c = build(&raw, 16, Path::new("tests/fixtures/traces")).unwrap();
        let d = c.describe(false);
        assert!(
            d.starts_with("sessions of aiperf_messages_sessions.jsonl replayed whole (AIPerf mooncake_trace sessions: 2 sessions of 2 to 3 turns, sha256 ")
                && d.ends_with("; 2 sessions of `messages` lines: each turn sent as given, without the session's history)"),
            "{d}"
        );
        // cs-1's 3 turns, then cs-2's 2: (messages sent, roles, words, max_tokens, think ms,
        // tools). Words by hand: system 7 + user 6 = 13; cs-1's second line 13 + answer 6 +
        // user 5 = 24 (its tool call and the tool's answer left out); its third 24 + 6 + 1 =
        // 31; cs-2's second 13 + 7 + 3 = 23. Never the history before: each line as given.
        let want: [(usize, &str, usize, u32, f64, bool); 5] = [
            (2, "system user", 13, 12, 0.0, true),
            (4, "system user assistant user", 24, 10, 150.0, true),
            (
                6,
                "system user assistant user assistant user",
                31,
                4,
                120.0,
                true,
            ),
            (2, "system user", 13, 8, 0.0, false),
            (4, "system user assistant user", 23, 6, 100.0, false),
        ];
        for (g, (n, roles, w, out, think, tools)) in want.into_iter().enumerate() {
            let slot = Slot::Measured(g);
            let m = c.messages(slot, None, 1.0);
            let r: Vec<&str> = m.iter().map(|x| x.role.as_str()).collect();
            let got: usize = m.iter().map(words).sum();
            assert_eq!(
                (m.len(), r.join(" "), got),
                (n, roles.to_string(), w),
                "{g}"
            );
            assert_eq!(c.max_tokens(slot), Some(out), "{g}");
            assert_eq!(c.think_ms(slot), think, "{g}");
            assert_eq!(c.tools(slot).is_some(), tools, "{g}");
        }
        assert_eq!(
            c.messages(Slot::Measured(1), None, 1.0)[3].content,
            "Can I change the address?"
        );
        assert_eq!(
            c.tools(Slot::Measured(0)).unwrap()[0]["function"]["name"],
            "lookup_order"
        );
        // nothing to fit; the longest prompt is cs-1's last line
        assert_eq!(c.fit_points(), None);
        assert_eq!(c.longest_session_prompt(), Some((31, "cs-1".to_string())));
        // a first line's `delay`: read, not waited, and said
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("d.jsonl"),
            "{\"session_id\": \"a\", \"delay\": 400, \"input_length\": 5}\n{\"session_id\": \"a\", \"delay\": 30, \"input_length\": 5}\n",
        )
        .unwrap();
        let mut r = raw.clone();
        r.file = Some("d.jsonl".into());
        let c = build(&r, 16, tmp.path()).unwrap();
        assert_eq!(
            (c.think_ms(Slot::Measured(0)), c.think_ms(Slot::Measured(1))),
            (0.0, 30.0)
        );
        let d = c.describe(false);
        // sessions all of one length say it once
        assert!(
            d.contains("(AIPerf mooncake_trace sessions: 1 sessions of 2 turns, sha256 "),
            "{d}"
        );
        assert!(
            d.ends_with("; 1 first turns' `delay` not waited (AIPerf waits a `delay` only after a previous turn))"),
            "{d}"
        );
    }

    #[test]
    fn aiperf_sessions_without_turns_are_replayed_whole() {
        let raw = RawConversation {
            file: Some("aiperf_sessions.jsonl".into()),
            ..Default::default()
        };
        let c = build(&raw, 16, Path::new("tests/fixtures/traces")).unwrap();
        let f = c.file.as_ref().unwrap();
        assert_eq!(
            (f.conversations, f.short, f.whole, c.turns),
            (3, 0, true, 3)
        );
        assert!(
            c.describe(false).starts_with("sessions of aiperf_sessions.jsonl replayed whole (AIPerf mooncake_trace sessions: 3 sessions of 1 to 3 turns, sha256 "),
            "{}",
            c.describe(false)
        );
        let at = |slot: Slot| {
            let t = c.turn_of(slot);
            (t.conversation, t.turn)
        };
        let measured: Vec<(usize, u32)> = (0..8).map(|g| at(Slot::Measured(g))).collect();
        assert_eq!(
            measured,
            [
                (0, 0),
                (0, 1),
                (0, 2),
                (1, 0),
                (1, 1),
                (2, 0),
                (3, 0),
                (3, 1)
            ]
        );
        // the warmup's from the end: the one-line session, chat-b, chat-a
        let warm: Vec<(usize, u32)> = (0..4).map(|g| at(Slot::Unmeasured(g))).collect();
        assert_eq!(warm, [(0, 0), (1, 0), (1, 1), (2, 0)]);
        assert_eq!(c.span(true, 1), (3, 2));
        assert_eq!(c.span(true, 4), (9, 2));
        assert_eq!(c.span(false, 1), (1, 2));
        // chat-a's third turn: 255 ms after, asking 1; the one-line session asks
        // request.max_tokens (no output_length)
        assert_eq!(c.think_ms(Slot::Measured(2)), 255.0);
        assert_eq!(c.max_tokens(Slot::Measured(2)), Some(1));
        assert_eq!(c.max_tokens(Slot::Measured(5)), None);
        let m = c.messages(Slot::Measured(5), None, 1.0);
        assert_eq!((m.len(), words(&m[0])), (1, 50));
        assert_eq!(c.messages(Slot::Unmeasured(0), None, 1.0), m);
        // whole sessions in the first n requests, and the counts around a cut one
        assert_eq!(c.whole(6), (3, None));
        assert_eq!(c.whole(12), (6, None));
        assert_eq!(c.whole(4), (1, Some((3, 5))));
        assert_eq!(c.whole(20), (9, Some((18, 21))));
        // the longest last prompt: chat-a's 600 + 100 + 40 and answers 20 + 10
        assert_eq!(
            c.longest_session_prompt(),
            Some((770, "chat-a".to_string()))
        );
        // the other files still need turns
        let tmp = tempfile::tempdir().unwrap();
        std::fs::write(
            tmp.path().join("c.json"),
            "[{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]}]",
        )
        .unwrap();
        let mut r = raw.clone();
        r.file = Some("c.json".into());
        let e = build(&r, 16, tmp.path()).unwrap_err().to_string();
        assert!(
            e.starts_with("request.conversation.turns is required with ")
                && e.contains("c.json: the human turns replayed of each conversation"),
            "{e}"
        );
    }

    /// A file's conversations replayed turn by turn: each turn's human message after the
    /// history so far, the file's own replies kept in it; conversations with fewer human turns
    /// than `turns` left out and counted.
    #[test]
    fn a_file_s_conversations_are_replayed_turn_by_turn() {
        let dir = tempfile::tempdir().unwrap();
        let sg = r#"[
 {"id": "a", "conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "q1"}, {"from": "gpt", "value": "r1"}, {"from": "human", "value": "q2"}, {"from": "gpt", "value": "r2"}]},
 {"id": "b", "conversations": [{"from": "human", "value": "only one"}, {"from": "gpt", "value": "r"}]},
 {"id": "c", "conversations": [{"from": "gpt", "value": "cut"}, {"from": "human", "value": "p1"}, {"from": "human", "value": ""}, {"from": "chatgpt", "value": "s1"}, {"from": "user", "value": "p2"}]}
]"#;
        std::fs::write(dir.path().join("c.json"), sg).unwrap();
        let raw = RawConversation {
            file: Some("c.json".into()),
            turns: Some(2),
            ..Default::default()
        };
        let c = build(&raw, 16, dir.path()).unwrap();
        let f = c.file.as_ref().unwrap();
        assert_eq!((f.conversations, f.short), (2, 1));
        let m = |slot: Slot| -> Vec<(String, String)> {
            c.messages(slot, None, 1.0)
                .into_iter()
                .map(|m| (m.role, m.content))
                .collect()
        };
        let pair = |r: &str, t: &str| (r.to_string(), t.to_string());
        assert_eq!(
            m(Slot::Measured(0)),
            [pair("system", "S"), pair("user", "q1")]
        );
        assert_eq!(
            m(Slot::Measured(1)),
            [
                pair("system", "S"),
                pair("user", "q1"),
                pair("assistant", "r1"),
                pair("user", "q2")
            ]
        );
        // conversation 1 is the file's third: the reply before its first question left out
        assert_eq!(
            m(Slot::Measured(3)),
            [
                pair("user", "p1"),
                pair("assistant", "s1"),
                pair("user", "p2")
            ]
        );
        // conversation 2 replays the first again; the warmup's take them from the end
        assert_eq!(m(Slot::Measured(4)), m(Slot::Measured(0)));
        assert_eq!(m(Slot::Unmeasured(0)), [pair("user", "p1")]);
        // request.system first
        assert_eq!(
            c.messages(Slot::Measured(0), Some("X"), 1.0)[0].content,
            "X"
        );
        assert!(c
            .describe(false)
            .starts_with("2 turns of c.json (2 conversations, sha256 "));
        assert!(c
            .describe(false)
            .ends_with(", 1 with fewer than 2 human turns left out; think time 0 ms)"));
        let e = build(
            &RawConversation {
                turns: Some(3),
                ..raw.clone()
            },
            16,
            dir.path(),
        )
        .unwrap_err();
        assert!(e.to_string().ends_with("none of its 3 conversations has 3 non-empty human turns; lower request.conversation.turns"), "{e}");
        let e = build(
            &RawConversation {
                user_tokens: Some(3),
                ..raw
            },
            16,
            dir.path(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("leave out system_tokens, user_tokens and answer_tokens"),
            "{e}"
        );
    }

    #[test]
    fn bad_values_are_refused_with_the_key() {
        let raw = |f: &dyn Fn(&mut RawConversation)| {
            let mut r = RawConversation {
                turns: Some(4),
                ..Default::default()
            };
            f(&mut r);
            build(&r, 16, Path::new("."))
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
