//! AIPerf's `mooncake_trace` sessions, read for `request.conversation.file` (docs/scenarios.md
//! "Sessions of an AIPerf mooncake_trace"): JSONL lines of `{"session_id": "...", "delay": ms,
//! "input_length": N, "output_length": M, "hash_ids": [...]}` and no `timestamp`. AIPerf groups
//! the lines by `session_id` (a line without one is a session of its own), keeps each session's
//! lines in file order as its turns, sends the first turn when a stream takes the session and
//! each later one `delay` ms after the previous turn's answer ended, with the session's history
//! (its default context mode for synthetic lines, `deltas_without_responses`: each turn's
//! `input_length` tokens, or its `text_input`, are the new user message, after the earlier
//! messages and answers).
//! A session's lines may instead each hold a whole request: `messages` (AIPerf's "pre-formatted
//! messages", its context mode `message_array_with_responses`), the line's whole context, sent
//! as given without the session's history, `delay` ms after the previous turn's answer, with
//! the line's `tools` in its body.
//! A `delay` on a session's first line is read and not waited (AIPerf waits a `delay` only
//! before a later turn).
//! Parsing is pure ([`parse`]); the texts are made when a turn is sent
//! ([`super::conversation`]).

use super::common::{bail, ensure, At, Invalid};
use super::file::RawMessage;
use super::trace::{hash_ids, length, MAX_TRACE_OUTPUT};
use crate::limits::{MAX_THINK_MS, MAX_TRACE_ENTRIES, MAX_TURNS};
use crate::synthetic_prompt::MAX_PROMPT_TOKENS;
use serde_json::{Map, Value};

/// One turn of a session: one line of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTurn {
    /// Its line in the file (1-based), for messages.
    pub line: usize,
    /// The turn's new user message, tokens (`input_length`; of a `text_input`, its words; of
    /// `messages`, the words of all of them).
    pub input_tokens: u32,
    /// The turn's user message as given (`text_input`, which AIPerf takes instead of
    /// `input_length`); `None`: synthetic.
    pub text: Option<String>,
    /// Its `max_tokens` (`output_length`; 0 in the file asks 1), and the length of the answer
    /// kept for it in the history of the turns after it; `None` (no `output_length`, which
    /// AIPerf allows): `request.max_tokens`.
    pub output_tokens: Option<u32>,
    /// The blocks of its user message (`hash_ids`; empty: its own text).
    pub hash_ids: Vec<u64>,
    /// The pause between the previous turn's answer's end and this turn, ms (`delay`, as in
    /// the file; a first turn's is not waited, as AIPerf does not).
    pub delay_ms: f64,
    /// The whole request's messages as given (`messages`: the turn is sent as them, without
    /// the session's history); `None`: a user message after the history.
    pub messages: Option<Vec<RawMessage>>,
    /// The line's `tools` (an array of OpenAI tool definitions), sent in the turn's body.
    pub tools: Option<Value>,
}

/// The longest session id shown in a message, characters.
const SHOWN_ID_CHARS: usize = 64;

/// A session id as messages show it: control characters escaped (a file's id cannot rewrite a
/// terminal or CI log line, or start a workflow command), at most [`SHOWN_ID_CHARS`] characters.
fn shown_id(id: &str) -> String {
    let escaped: String = id.chars().flat_map(char::escape_debug).collect();
    match escaped.char_indices().nth(SHOWN_ID_CHARS) {
        Some((cut, _)) => format!("{}...", &escaped[..cut]),
        None => escaped,
    }
}

/// A session: its id (as messages show it: [`shown_id`]) and its turns in file order.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// `session_id`, or `line N` for a line without one.
    pub id: String,
    pub turns: Vec<SessionTurn>,
}

/// The keys that tell a `mooncake_trace` line from the other conversation files' (ShareGPT's
/// `conversations`, LMSYS's `conversation`, AIPerf `multi_turn`'s `turns`).
const SHAPE_KEYS: [&str; 7] = [
    "session_id",
    "messages",
    "input_length",
    "output_length",
    "hash_ids",
    "delay",
    "text_input",
];

/// Whether `text` is a `mooncake_trace` file: its first non-empty line a JSON object with one of
/// [`SHAPE_KEYS`] and no `turns`.
pub fn is_sessions(text: &str) -> bool {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Some(first) = text.lines().find(|l| !l.trim().is_empty()) else {
        return false;
    };
    match serde_json::from_str::<Value>(first.trim()) {
        Ok(Value::Object(o)) => {
            !o.contains_key("turns") && SHAPE_KEYS.iter().any(|k| o.contains_key(*k))
        }
        _ => false,
    }
}

/// Reads the sessions of a `mooncake_trace` file (`name` labels messages), `block_size` tokens a
/// hash id, in the order of their first lines.
///
/// Errors: the first bad line as `name:line: what is wrong and what to do`: a `timestamp` (an
/// arrival time, replayed by load.trace), a raw body (`payload`), `messages` beside
/// `input_length`, `text_input` or `hash_ids`, a session mixing `messages` lines and others,
/// `text_input` beside `input_length` or `hash_ids`, a
/// delay that is not 0..=[`MAX_THINK_MS`] ms, a session of more than [`MAX_TURNS`] turns; no
/// lines; more than [`MAX_TRACE_ENTRIES`].
pub fn parse(text: &str, name: &str, block_size: u32) -> Result<Vec<Session>, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut sessions: Vec<Session> = Vec::new();
    let mut by_id: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut lines = 0;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let at = format!("{name}:{}", i + 1);
        lines += 1;
        ensure!(
            lines <= MAX_TRACE_ENTRIES,
            "{name}: more than {MAX_TRACE_ENTRIES} lines; keep the sessions to replay"
        );
        let (id, turn) = session_line(line, i + 1, block_size).at(&at)?;
        let k = match id {
            Some(id) => *by_id.entry(id.clone()).or_insert_with(|| {
                sessions.push(Session {
                    id: shown_id(&id),
                    turns: Vec::new(),
                });
                sessions.len() - 1
            }),
            None => {
                sessions.push(Session {
                    id: format!("line {}", i + 1),
                    turns: Vec::new(),
                });
                sessions.len() - 1
            }
        };
        let s = &mut sessions[k];
        if let Some(first) = s.turns.first() {
            ensure!(
                first.messages.is_some() == turn.messages.is_some(),
                "{at}: session `{}` mixes lines with `messages` (whole requests as given) and lines without (user messages after the session's history; its line {} is {}): AIPerf refuses such sessions too; give every line of a session `messages`, or none",
                s.id,
                first.line,
                if first.messages.is_some() { "one with `messages`" } else { "one without" }
            );
        }
        ensure!(
            s.turns.len() < MAX_TURNS as usize,
            "{at}: session `{}` has more than {MAX_TURNS} turns: at most {MAX_TURNS} are replayed; split it into sessions of at most {MAX_TURNS} lines (another `session_id`) or keep its first {MAX_TURNS}",
            s.id
        );
        s.turns.push(turn);
    }
    ensure!(!sessions.is_empty(), "{name}: holds no session lines");
    Ok(sessions)
}

/// One line: its `session_id` (`None`: none) and its turn.
fn session_line(
    line: &str,
    number: usize,
    block_size: u32,
) -> Result<(Option<String>, SessionTurn), Invalid> {
    let v: Value = serde_json::from_str(line).map_err(|e| {
        format!("not a JSON object ({e}); a session line is {{\"session_id\": \"...\", \"delay\": ms, \"input_length\": N, \"output_length\": M, \"hash_ids\": [...]}}")
    })?;
    let Some(o) = v.as_object() else {
        bail!("not a JSON object; a session line is {{\"session_id\": \"...\", \"delay\": ms, \"input_length\": N, \"output_length\": M}}");
    };
    let has = |k: &str| o.get(k).is_some_and(|x| !x.is_null());
    ensure!(!has("timestamp"), "a `timestamp` on a session line: request.conversation replays sessions closed loop, each turn `delay` ms after the previous turn's answer, not at arrival times; remove the timestamps, or replay the file at its timestamps with load.trace (session_id and delay are then not read)");
    ensure!(!has("payload"), "a session line with `payload`: a raw request body is not replayed here (perfgate builds each body from its messages for request.api); give the line `messages` (the request's messages, sent as given), `input_length` or `text_input` instead");
    let id = session_id(o)?;
    let delay_ms = delay(o)?;
    if has("messages") {
        if let Some(k) = ["input_length", "text_input", "hash_ids"]
            .into_iter()
            .find(|k| has(k))
        {
            bail!("`messages` with `{k}`: a `messages` line is its whole request as given (AIPerf takes one of them); keep one");
        }
        match o.get("message_mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(m)) if m == "history" => {}
            Some(m) => bail!("`message_mode` {m}: only \"history\" (each line's `messages` its whole context, AIPerf's default) is replayed; AIPerf's \"delta\" threads the server's live answers between the lines, which perfgate does not (bless and check must send the same requests); write each line's whole context"),
        }
        let messages = super::prompt_set::messages(&v)?;
        let words: usize = messages
            .iter()
            .map(|m| m.content.split_whitespace().count())
            .sum();
        let output = output_length(o)?;
        let tools = match o.get("tools") {
            None | Some(Value::Null) => None,
            Some(t @ Value::Array(_)) => Some(t.clone()),
            Some(x) => bail!("`tools` must be an array of tool definitions or null, not {x}"),
        };
        return Ok((
            id,
            SessionTurn {
                line: number,
                input_tokens: (words.max(1)).min(u32::MAX as usize) as u32,
                text: None,
                output_tokens: output,
                hash_ids: Vec::new(),
                delay_ms,
                messages: Some(messages),
                tools,
            },
        ));
    }
    let text = match o.get("text_input") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => {
            ensure!(!has("input_length") && !has("hash_ids"), "`text_input` with `input_length` or `hash_ids`: AIPerf takes one of them (they are mutually exclusive); keep one");
            ensure!(
                !t.trim().is_empty(),
                "`text_input` is empty: a turn needs a user message"
            );
            Some(t.clone())
        }
        Some(x) => bail!("`text_input` must be a string, not {x}"),
    };
    let input = match &text {
        // about its tokens (its words), for the bounds
        Some(t) => t.split_whitespace().count().max(1) as u64,
        None => length(
            o.get("input_length"),
            "input_length",
            u64::from(MAX_PROMPT_TOKENS),
        )?,
    };
    ensure!(
        input > 0,
        "`input_length` is 0: a turn needs a user message"
    );
    let output = output_length(o)?;
    let hash_ids = hash_ids(
        &v,
        input,
        block_size,
        "set request.conversation.block_size to the file's, AIPerf's --isl-block-size; 512 when not given",
    )?;
    Ok((
        id,
        SessionTurn {
            line: number,
            input_tokens: input.min(u64::from(u32::MAX)) as u32,
            text,
            output_tokens: output,
            hash_ids,
            delay_ms,
            messages: None,
            tools: None,
        },
    ))
}

/// `output_length`: the turn's `max_tokens` (0 asks 1); `None`: absent or null.
fn output_length(o: &Map<String, Value>) -> Result<Option<u32>, Invalid> {
    Ok(match o.get("output_length") {
        None | Some(Value::Null) => None,
        v => Some(length(v, "output_length", MAX_TRACE_OUTPUT)?.max(1) as u32),
    })
}

/// `delay`: ms in 0..=[`MAX_THINK_MS`]; absent or null: 0.
fn delay(o: &Map<String, Value>) -> Result<f64, Invalid> {
    Ok(match o.get("delay") {
        None | Some(Value::Null) => 0.0,
        Some(d) => match d.as_f64() {
            Some(ms) if (0.0..=MAX_THINK_MS).contains(&ms) => ms,
            _ => bail!(
                "`delay` must be a number of ms in 0..={MAX_THINK_MS} (the pause after the previous turn's answer), not {d}"
            ),
        },
    })
}

/// `session_id`: a string or a whole number (`None`: absent).
fn session_id(o: &Map<String, Value>) -> Result<Option<String>, Invalid> {
    match o.get("session_id") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Number(n)) if n.is_u64() || n.is_i64() => Ok(Some(n.to_string())),
        Some(x) => bail!("`session_id` must be a string, not {x}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sessions_by_hand() {
        let text = std::fs::read_to_string("tests/fixtures/traces/aiperf_sessions.jsonl").unwrap();
        assert!(is_sessions(&text));
        let s = parse(&text, "s.jsonl", 512).unwrap();
        // three sessions in the order of their first lines; "chat-b"'s lines interleave with
        // "chat-a"'s; the line without a session_id is a session of its own
        let ids: Vec<&str> = s.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["chat-a", "chat-b", "line 7"]);
        let shape = |k: usize| -> Vec<(usize, u32, Option<u32>, usize, f64)> {
            s[k].turns
                .iter()
                .map(|t| {
                    (
                        t.line,
                        t.input_tokens,
                        t.output_tokens,
                        t.hash_ids.len(),
                        t.delay_ms,
                    )
                })
                .collect()
        };
        // 600 tokens: 2 blocks of 512; 100: 1; output_length 0 asks 1
        assert_eq!(
            shape(0),
            [
                (1, 600, Some(20), 2, 0.0),
                (3, 100, Some(10), 1, 500.0),
                (5, 40, Some(1), 0, 255.0)
            ]
        );
        assert_eq!(
            shape(1),
            [(2, 300, Some(16), 1, 0.0), (4, 80, Some(12), 1, 400.0)]
        );
        // no output_length (AIPerf then asks its default): request.max_tokens
        assert_eq!(shape(2), [(7, 50, None, 0, 0.0)]);
        // a `text_input` turn: the text as given, its words for the bounds
        let t = parse(
            "{\"session_id\": \"t\", \"text_input\": \"What is ML?\"}\n{\"session_id\": \"t\", \"delay\": 3, \"text_input\": \"An example, please.\", \"output_length\": 7}\n",
            "t.jsonl",
            512,
        )
        .unwrap();
        let got: Vec<(Option<&str>, u32, Option<u32>, f64)> = t[0]
            .turns
            .iter()
            .map(|x| {
                (
                    x.text.as_deref(),
                    x.input_tokens,
                    x.output_tokens,
                    x.delay_ms,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (Some("What is ML?"), 3, None, 0.0),
                (Some("An example, please."), 3, Some(7), 3.0)
            ]
        );
        // the sessions share the first block's text (hash id 0)
        assert_eq!(s[0].turns[0].hash_ids[0], s[1].turns[0].hash_ids[0]);
    }

    /// Rows in the shape of Hugging Face Green-Lab/customer-service-agent-traces: `session_id`,
    /// `messages` (the whole context), `output_length`, `tools` (or null), `delay` (null on a
    /// first row).
    #[test]
    fn message_sessions_by_hand() {
        let text = std::fs::read_to_string("tests/fixtures/traces/aiperf_messages_sessions.jsonl")
            .unwrap();
        assert!(is_sessions(&text));
        let s = parse(&text, "m.jsonl", 512).unwrap();
        let ids: Vec<&str> = s.iter().map(|s| s.id.as_str()).collect();
        assert_eq!(ids, ["cs-1", "cs-2"]);
        // (line, messages kept, words, output, delay, tools): the tool call (an assistant
        // message without text) and the tool's answer are left out of cs-1's later lines;
        // words by hand in conversation.rs's test (13, 24, 31; 13, 23)
        let shape = |k: usize| -> Vec<(usize, usize, u32, Option<u32>, f64, bool)> {
            s[k].turns
                .iter()
                .map(|t| {
                    (
                        t.line,
                        t.messages.as_ref().map_or(0, Vec::len),
                        t.input_tokens,
                        t.output_tokens,
                        t.delay_ms,
                        t.tools.is_some(),
                    )
                })
                .collect()
        };
        assert_eq!(
            shape(0),
            [
                (1, 2, 13, Some(12), 0.0, true),
                (3, 4, 24, Some(10), 150.0, true),
                (5, 6, 31, Some(4), 120.0, true)
            ]
        );
        assert_eq!(
            shape(1),
            [
                (2, 2, 13, Some(8), 0.0, false),
                (4, 4, 23, Some(6), 100.0, false)
            ]
        );
        let m = s[0].turns[1].messages.as_ref().unwrap();
        assert_eq!(
            m[2],
            RawMessage::new(
                "assistant",
                "It shipped yesterday and arrives Friday.".into()
            )
        );
        // a first line's delay is read (the replay does not wait it)
        let d = parse(
            "{\"session_id\": \"a\", \"delay\": 200, \"input_length\": 5}\n{\"delay\": 2, \"input_length\": 5}\n",
            "d",
            512,
        )
        .unwrap();
        assert_eq!(
            (d[0].turns[0].delay_ms, d[1].turns[0].delay_ms),
            (200.0, 2.0)
        );
    }

    #[test]
    fn other_conversation_files_are_not_sessions() {
        for t in [
            "[{\"id\": 1, \"conversations\": []}]",
            "{\"conversations\": [{\"from\": \"human\", \"value\": \"hi\"}]}",
            "{\"session_id\": \"a\", \"turns\": [{\"text\": \"hi\", \"delay\": 5}]}",
            "",
        ] {
            assert!(!is_sessions(t), "{t}");
        }
        assert!(is_sessions(
            "\n{\"session_id\": \"a\", \"input_length\": 3}\n"
        ));
        assert!(is_sessions(
            "{\"session_id\": \"a\", \"text_input\": \"hi\"}"
        ));
    }

    /// A file's session id reaches messages escaped and clipped: an id of ESC codes, CR and LF
    /// (which wrote `FAKE: PASS` as a log line of its own) and one of 200 characters.
    #[test]
    fn a_session_id_is_shown_escaped_and_clipped() {
        let line = |id: &str, n: usize| {
            format!(
                "{{\"session_id\": {}, \"input_length\": 5, \"output_length\": 1}}\n",
                serde_json::json!(id)
            )
            .repeat(n)
        };
        let hostile = "\u{1b}[31mRED\u{1b}[0m\r\n::FAKE: PASS";
        let e = parse(&line(hostile, 65), "s", 512).unwrap_err().to_string();
        assert!(
            e.starts_with(
                "s:65: session `\\u{1b}[31mRED\\u{1b}[0m\\r\\n::FAKE: PASS` has more than 64 turns"
            ),
            "{e}"
        );
        assert!(!e.contains(['\u{1b}', '\r', '\n']), "{e}");
        let long = "x".repeat(200);
        let e = parse(&line(&long, 65), "s", 512).unwrap_err().to_string();
        assert!(
            e.contains(&format!("session `{}...` has more", "x".repeat(64))),
            "{e}"
        );
    }

    /// Each refusal names `file:line`, what is wrong and what to do.
    #[test]
    fn bad_sessions_name_file_and_line() {
        let e = |t: &str| parse(t, "s", 512).unwrap_err().to_string();
        let a = "{\"session_id\": \"a\", \"input_length\": 5, \"output_length\": 1}\n";
        for (t, starts, then) in [
            (
                format!("{a}{{\"session_id\": \"a\", \"timestamp\": 500, \"input_length\": 5, \"output_length\": 1}}\n"),
                "s:2: a `timestamp` on a session line",
                "replay the file at its timestamps with load.trace",
            ),
            (
                format!("{a}{{\"session_id\": \"a\", \"delay\": -5, \"input_length\": 5, \"output_length\": 1}}\n"),
                "s:2: `delay` must be a number of ms in 0..=60000",
                "not -5",
            ),
            (
                format!("{a}{{\"session_id\": \"a\", \"delay\": 3600000, \"input_length\": 5, \"output_length\": 1}}\n"),
                "s:2: `delay` must be a number of ms in 0..=60000",
                "not 3600000",
            ),
            (
                format!("{a}{{\"session_id\": \"a\", \"delay\": \"5\", \"input_length\": 5, \"output_length\": 1}}\n"),
                "s:2: `delay` must be a number",
                "not \"5\"",
            ),
            (
                "{\"session_id\": \"a\", \"payload\": {\"messages\": []}, \"output_length\": 1}\n".to_string(),
                "s:1: a session line with `payload`: a raw request body is not replayed here",
                "give the line `messages`",
            ),
            (
                format!("{a}{{\"session_id\": \"a\", \"delay\": 5, \"messages\": [{{\"role\": \"user\", \"content\": \"hi\"}}]}}\n"),
                "s:2: session `a` mixes lines with `messages`",
                "its line 1 is one without",
            ),
            (
                "{\"session_id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"input_length\": 5}\n".to_string(),
                "s:1: `messages` with `input_length`",
                "keep one",
            ),
            (
                "{\"session_id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"message_mode\": \"delta\"}\n".to_string(),
                "s:1: `message_mode` \"delta\": only \"history\"",
                "write each line's whole context",
            ),
            (
                "{\"session_id\": \"a\", \"messages\": [{\"role\": \"assistant\", \"content\": \"hi\"}]}\n".to_string(),
                "s:1: `messages` has no user message with text",
                "",
            ),
            (
                "{\"session_id\": \"a\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"tools\": {\"x\": 1}}\n".to_string(),
                "s:1: `tools` must be an array of tool definitions or null",
                "",
            ),
            (
                "{\"session_id\": \"a\", \"text_input\": \"hi\", \"input_length\": 5, \"output_length\": 1}\n".to_string(),
                "s:1: `text_input` with `input_length` or `hash_ids`",
                "mutually exclusive",
            ),
            (
                "{\"session_id\": \"a\", \"text_input\": 5}\n".to_string(),
                "s:1: `text_input` must be a string, not 5",
                "",
            ),
            (
                "{\"session_id\": \"a\", \"text_input\": \"  \"}\n".to_string(),
                "s:1: `text_input` is empty",
                "",
            ),
            (
                "{\"session_id\": \"a\", \"input_length\": 5, \"output_length\": 2.5}\n".to_string(),
                "s:1: `output_length` must be a whole number",
                "not 2.5",
            ),
            (
                "{\"session_id\": \"a\", \"output_length\": 5}\n".to_string(),
                "s:1: `input_length` must be a whole number",
                "nothing",
            ),
            (
                "{\"session_id\": \"a\", \"input_length\": 600, \"output_length\": 1, \"hash_ids\": [1]}\n".to_string(),
                "s:1: 1 hash_ids for input_length 600: blocks of 512 tokens need 2",
                "--isl-block-size",
            ),
            (
                "{\"session_id\": [1], \"input_length\": 5, \"output_length\": 1}\n".to_string(),
                "s:1: `session_id` must be a string",
                "[1]",
            ),
            ("\n\n".to_string(), "s: holds no session lines", ""),
        ] {
            let m = e(&t);
            assert!(m.starts_with(starts) && m.contains(then), "{t}: {m}");
        }
        // 65 turns of one session: the 65th line is refused; 64 are read
        let turns = |n: usize| -> String {
            std::iter::once(a.to_string())
                .chain((1..n).map(|_| {
                    "{\"session_id\": \"a\", \"delay\": 1, \"input_length\": 5, \"output_length\": 1}\n"
                        .to_string()
                }))
                .collect()
        };
        let m = e(&turns(65));
        assert!(
            m.starts_with("s:65: session `a` has more than 64 turns")
                && m.contains("split it into sessions of at most 64 lines"),
            "{m}"
        );
        assert_eq!(parse(&turns(64), "s", 512).unwrap()[0].turns.len(), 64);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,300}") {
            let _ = is_sessions(&s);
            let _ = parse(&s, "x", 512);
            let _ = parse(&format!("{{\"session_id\": \"a\", {s}"), "x", 1);
        }
    }
}
