//! `request.prompt_set`: prompts read from a file in the repository (docs/scenarios.md "Prompt
//! sets"), in the shapes the field publishes them: JSONL of prompts (`{"prompt": ...}` as vLLM's
//! `custom` dataset and GuideLLM read it, `{"text": ...}` as AIPerf's `single_turn`), JSONL of
//! OpenAI chat requests (`{"messages": [...]}`, content as a string, an array of parts or null)
//! and conversations (ShareGPT's JSON array or JSONL of `{"conversations": [{"from", "value"}]}`,
//! LMSYS-Chat-1M's `{"conversation": [{"role", "content"}]}`, AIPerf's `multi_turn` `{"turns":
//! [{"text"}]}`), whose first human turn is the prompt. Parsing is pure ([`parse`],
//! [`dialogs`]); [`load`] reads the file with its size bound. Which entry request k sends is
//! [`PromptSet::pick`]: a seeded order, the same in `bless` and `check`.

use super::common::{bail, ensure, named, names, read_data_file, short_hash, At, Invalid, Slot};
use super::file::{RawMessage, RawPromptSet};
use crate::limits::{MAX_PROMPT_SET_BYTES, MAX_PROMPT_SET_ENTRIES};
use serde::Serialize;
use serde_json::Value;
use std::path::Path;
use std::sync::Arc;

/// Largest per-entry `max_tokens` accepted.
pub const MAX_ENTRY_MAX_TOKENS: u64 = 1_000_000;

/// The file's format (`request.prompt_set.format`; found from the first entry when not given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptFormat {
    /// JSONL, one `{"prompt": "...", "max_tokens": N?}` a line (or `text`, `texts`, `question`,
    /// `instruction`, `input`; the output length also as `output_tokens`, `output_length`,
    /// `output_tokens_count`).
    Prompts,
    /// JSONL, one `{"messages": [{"role", "content"}...], "max_tokens": N?}` a line.
    Messages,
    /// ShareGPT: a JSON array, or JSONL, of `{"conversations": [{"from", "value"}...]}`.
    Sharegpt,
    /// A JSON array, or JSONL, of `{"conversation": [{"role", "content"}...]}` (LMSYS-Chat-1M)
    /// or `{"turns": [{"text"}...]}` (AIPerf `multi_turn`).
    Conversation,
}

names!(PromptFormat { Prompts => "prompts", Messages => "messages", Sharegpt => "sharegpt", Conversation => "conversation" });

/// In which order the requests take the entries (`request.prompt_set.order`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PromptOrder {
    /// A permutation of the entries chosen by `seed` (the default): every look's first n
    /// requests are a random sample of the set, whatever order the file is in.
    Shuffled,
    /// The file's order.
    File,
}

names!(PromptOrder { Shuffled => "shuffled", File => "file" });

/// One prompt of the set.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// The chat messages (a system turn first when the entry has one).
    pub messages: Vec<RawMessage>,
    /// The text form (`openai-completions`): the messages' contents joined by newlines.
    pub prompt: String,
    /// The entry's own output length, when its line gives one (`max_tokens`).
    pub max_tokens: Option<u32>,
    /// sha256 (16 hex chars) of the messages: the request's id in records and baselines.
    pub id: String,
}

impl Entry {
    fn new(messages: Vec<RawMessage>, max_tokens: Option<u32>) -> Entry {
        let prompt = RawMessage::text(&messages);
        let id = short_hash(&serde_json::json!(messages).to_string());
        Entry {
            messages,
            prompt,
            max_tokens,
            id,
        }
    }
}

/// The validated prompt set: where it came from (in the fingerprint) and its entries (not).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PromptSet {
    /// The path as written in the scenario file (relative to it).
    pub file: String,
    pub format: PromptFormat,
    /// sha256 (16 hex chars) of the file's bytes: a changed file is another workload.
    pub sha256: String,
    /// Entries read.
    pub entries: usize,
    pub order: PromptOrder,
    pub seed: u64,
    /// Conversations without a non-empty human turn, left out.
    #[serde(skip)]
    pub skipped: usize,
    #[serde(skip)]
    list: Arc<Vec<Entry>>,
    /// Position -> entry index.
    #[serde(skip)]
    sequence: Arc<Vec<u32>>,
}

impl PromptSet {
    /// The entry request `slot` sends, and its index in the file's order.
    ///
    /// Measured request g takes position `g mod n` of the order; unmeasured request i takes
    /// position `n - 1 - (i mod n)`, from the end: with `n >= warmup + samples` the warmup never
    /// sends a prompt that is measured (it would be in the server's prefix cache).
    pub fn pick(&self, slot: Slot) -> (usize, &Entry) {
        let n = self.sequence.len();
        let pos = match slot {
            Slot::Measured(g) => g % n,
            Slot::Unmeasured(i) => n - 1 - (i % n),
        };
        let e = self.sequence[pos] as usize;
        (e, &self.list[e])
    }

    /// A summary for `validate` and notes.
    pub fn describe(&self) -> String {
        let skipped = if self.skipped > 0 {
            format!(
                ", {} conversation(s) without a non-empty human turn left out",
                self.skipped
            )
        } else {
            String::new()
        };
        format!(
            "prompt set {} ({}, {} entries, sha256 {}, {} order, seed {}{skipped})",
            self.file,
            self.format.as_str(),
            self.entries,
            self.sha256,
            self.order.as_str(),
            self.seed
        )
    }
}

/// Reads and validates `request.prompt_set`; `dir` is the scenario file's directory (the path
/// is relative to it). Errors: the problem, starting with the key or with `file:line`.
pub fn load(raw: &RawPromptSet, dir: &Path) -> Result<PromptSet, Invalid> {
    // a file that cannot be read or is not a prompt set is reported at the `file:` key's line
    let line = raw
        .file
        .as_ref()
        .map_or(0, |f| f.referenced.line() as usize);
    let (file, shown, text) = read_data_file(
        "request.prompt_set.file",
        raw.file.as_ref().map(|f| f.value.as_str()),
        (dir, MAX_PROMPT_SET_BYTES),
        "the path of a JSONL or ShareGPT JSON file",
        "set",
    )
    .map_err(|e| e.on_line(line))?;
    let format = named(
        "request.prompt_set.format",
        raw.format.as_deref(),
        "prompts, messages, sharegpt or conversation (or leave it out to tell from the first entry)",
    )?;
    let order = named(
        "request.prompt_set.order",
        raw.order.as_deref(),
        "shuffled (the default) or file",
    )?;
    let order = order.unwrap_or(PromptOrder::Shuffled);
    let seed = raw.seed.unwrap_or(0);
    let parsed = parse(&text, &shown, format).map_err(|e| e.on_line(line))?;
    let sha256 = short_hash(&text);
    let n = parsed.entries.len();
    let sequence = match order {
        PromptOrder::Shuffled => crate::seeded::permutation(n, seed),
        PromptOrder::File => (0..n as u32).collect(),
    };
    Ok(PromptSet {
        file: file.to_string(),
        format: parsed.format,
        sha256,
        entries: n,
        order,
        seed,
        skipped: parsed.skipped,
        list: Arc::new(parsed.entries),
        sequence: Arc::new(sequence),
    })
}

/// What [`parse`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct Parsed {
    pub format: PromptFormat,
    pub entries: Vec<Entry>,
    /// Conversations left out: no non-empty human turn.
    pub skipped: usize,
}

/// The keys a prompt's text may have (vLLM `custom`, GuideLLM's columns, AIPerf
/// `single_turn`), in the order they are looked for.
const PROMPT_KEYS: [&str; 6] = [
    "prompt",
    "text",
    "texts",
    "question",
    "instruction",
    "input",
];

/// The keys an entry's output length may have: OpenAI's, vLLM `custom`'s, AIPerf's and
/// GuideLLM's (the first present is taken).
const OUTPUT_KEYS: [&str; 6] = [
    "max_tokens",
    "max_completion_tokens",
    "output_tokens",
    "output_length",
    "output_tokens_count",
    "completion_tokens_count",
];

/// The keys of a conversation's messages, and the format each tells.
const DIALOG_KEYS: [(&str, PromptFormat); 3] = [
    ("conversations", PromptFormat::Sharegpt),
    ("conversation", PromptFormat::Conversation),
    ("turns", PromptFormat::Conversation),
];

/// The entries of a file's text: (line, value); line 0 for the elements of a JSON array.
fn items(text: &str, name: &str) -> Result<Vec<(usize, Value)>, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let items: Vec<(usize, Value)> = if text.trim_start().starts_with('[') {
        let v: Vec<Value> = serde_json::from_str(text).map_err(|e| {
            format!(
                "{name}:{}: not a JSON array of conversations ({e}); a ShareGPT file is `[{{\"conversations\": [...]}}, ...]`",
                e.line()
            )
        })?;
        v.into_iter().map(|x| (0, x)).collect()
    } else {
        let mut out = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            ensure!(out.len() < MAX_PROMPT_SET_ENTRIES, "{}", too_many(name));
            let v: Value = serde_json::from_str(line).map_err(|e| {
                format!(
                    "{name}:{}: not a JSON object ({e}); a JSONL prompt set has one JSON object a line",
                    i + 1
                )
            })?;
            out.push((i + 1, v));
        }
        out
    };
    ensure!(items.len() <= MAX_PROMPT_SET_ENTRIES, "{}", too_many(name));
    Ok(items)
}

/// Where entry `k` (at `line`, 0 in a JSON array) is, for messages.
fn place(name: &str, line: usize, k: usize) -> String {
    if line > 0 {
        format!("{name}:{line}")
    } else {
        format!("{name}: entry [{k}]")
    }
}

/// The format the first entry's keys tell.
fn format_of(v: &Value) -> Option<PromptFormat> {
    let has = |k: &str| v.get(k).is_some();
    DIALOG_KEYS
        .iter()
        .find(|(k, _)| has(k))
        .map(|(_, f)| *f)
        .or_else(|| has("messages").then_some(PromptFormat::Messages))
        .or_else(|| {
            PROMPT_KEYS
                .iter()
                .any(|k| has(k))
                .then_some(PromptFormat::Prompts)
        })
}

/// Parses a prompt-set file's text (`name` labels messages: `name:line: ...`). `format`:
/// the given one, or `None` to tell it from the first entry (a `conversations` key: ShareGPT;
/// `conversation` or `turns`: conversation; `messages`; a prompt key).
///
/// Errors: the first bad entry, as `name:line: what is wrong; what to write`; no entries; more
/// than [`MAX_PROMPT_SET_ENTRIES`].
pub fn parse(text: &str, name: &str, format: Option<PromptFormat>) -> Result<Parsed, Invalid> {
    let items = items(text, name)?;
    let format = match format {
        Some(f) => f,
        None => {
            let Some((line, first)) = items.first() else {
                bail!("{name}: holds no prompts; add one JSON object a line");
            };
            format_of(first).ok_or_else(|| {
                format!(
                    "{}: an entry needs `prompt` (or `text`), `messages`, `conversations` (ShareGPT) or `conversation`; set request.prompt_set.format to say which",
                    place(name, *line, 0)
                )
            })?
        }
    };
    let mut entries = Vec::with_capacity(items.len());
    let mut skipped = 0;
    for (k, (line, v)) in items.iter().enumerate() {
        let here = place(name, *line, k);
        ensure!(v.is_object(), "{here}: not a JSON object");
        let max_tokens = entry_max_tokens(v).at(&here)?;
        let ms = match format {
            PromptFormat::Prompts => Some(prompt(v).at(&here)?),
            PromptFormat::Messages => Some(messages(v).at(&here)?),
            PromptFormat::Sharegpt | PromptFormat::Conversation => {
                first_prompt(dialog(v).at(&here)?)
            }
        };
        match ms {
            Some(ms) => entries.push(Entry::new(ms, max_tokens)),
            None => skipped += 1,
        }
    }
    ensure!(
        !entries.is_empty(),
        "{name}: holds no usable prompts ({skipped} left out: no non-empty human turn); add entries"
    );
    Ok(Parsed {
        format,
        entries,
        skipped,
    })
}

fn too_many(name: &str) -> String {
    format!("{name}: more than {MAX_PROMPT_SET_ENTRIES} entries; keep a sample (e.g. `head -n {MAX_PROMPT_SET_ENTRIES}`)")
}

fn user(content: String) -> RawMessage {
    RawMessage::new("user", content)
}

/// An entry's own output length, if it gives one (under any of [`OUTPUT_KEYS`]).
fn entry_max_tokens(v: &Value) -> Result<Option<u32>, Invalid> {
    let Some((key, x)) = OUTPUT_KEYS
        .iter()
        .find_map(|k| v.get(*k).filter(|x| !x.is_null()).map(|x| (*k, x)))
    else {
        return Ok(None);
    };
    match x.as_u64() {
        Some(n) if (1..=MAX_ENTRY_MAX_TOKENS).contains(&n) => Ok(Some(n as u32)),
        _ => bail!("`{key}` is {x}: use a whole number in 1..={MAX_ENTRY_MAX_TOKENS}"),
    }
}

/// A `prompts` entry: its text (the first of [`PROMPT_KEYS`] it has), after its system prompt
/// when it has one (GuideLLM's `system_prompt`, `system` or `prefix` column).
fn prompt(v: &Value) -> Result<Vec<RawMessage>, Invalid> {
    let Some((key, x)) = PROMPT_KEYS.iter().find_map(|k| v.get(*k).map(|x| (*k, x))) else {
        bail!("needs `prompt` (or `text`), a string (format prompts: {{\"prompt\": \"...\"}})");
    };
    let text = match (key, x) {
        (_, Value::String(s)) => s.clone(),
        ("texts", Value::Array(_)) => content(x)?,
        _ => bail!("needs `{key}`, a string (format prompts: {{\"{key}\": \"...\"}})"),
    };
    ensure!(!text.trim().is_empty(), "`{key}` is empty");
    let system = ["system_prompt", "system", "prefix"]
        .iter()
        .find_map(|k| v.get(*k).and_then(Value::as_str))
        .filter(|s| !s.trim().is_empty());
    let mut out: Vec<RawMessage> = system
        .map(|s| RawMessage::new("system", s.to_string()))
        .into_iter()
        .collect();
    out.push(user(text));
    Ok(out)
}

/// A message's text: a string; an array of parts (strings, or `{"type": "text", "text"}`
/// objects; other parts, such as images, are not text and left out) joined by newlines; null
/// or absent: empty.
fn content(c: &Value) -> Result<String, Invalid> {
    match c {
        Value::Null => Ok(String::new()),
        Value::String(s) => Ok(s.clone()),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| p.as_str().or_else(|| p.get("text").and_then(Value::as_str)))
                .collect();
            Ok(texts.join("\n"))
        }
        _ => bail!("must be a string, an array of parts or null, not {c}"),
    }
}

/// The role a message's `role` (or ShareGPT's `from`) names: `user` for human/user;
/// `assistant` for gpt/chatgpt/bing/bard/model/assistant; `system`; `developer`. `None`: a
/// tool's or function's message, which a replayed request leaves out (it answers a tool call
/// the server did not make). `default`: the role of a message without one (AIPerf's turns).
fn role(m: &Value, default: Option<&str>) -> Result<Option<&'static str>, Invalid> {
    let r = m
        .get("role")
        .or_else(|| m.get("from"))
        .and_then(Value::as_str);
    Ok(match r.or(default).map(str::to_ascii_lowercase).as_deref() {
        Some("user" | "human") => Some("user"),
        Some("assistant" | "gpt" | "chatgpt" | "bing" | "bard" | "model") => Some("assistant"),
        Some("system") => Some("system"),
        Some("developer") => Some("developer"),
        Some("tool" | "function" | "ipython") => None,
        _ => bail!(
            "role {} is not one of user/human, assistant/gpt/chatgpt/bing/bard/model, system, developer, tool",
            r.map_or("(none)".to_string(), |r| format!("`{r}`"))
        ),
    })
}

/// One message of a request or conversation: `{role, content}` (OpenAI, LMSYS), `{from,
/// value}` (ShareGPT) or `{text}` / `{texts}` (AIPerf turns, role `user` unless given).
/// `None`: a tool's message, or an assistant's without text (a tool call).
fn message(m: &Value, default_role: Option<&str>) -> Result<Option<RawMessage>, Invalid> {
    ensure!(m.is_object(), "not an object");
    let Some(role) = role(m, default_role)? else {
        return Ok(None);
    };
    let c = ["content", "value", "text", "texts"]
        .iter()
        .find_map(|k| m.get(*k))
        .unwrap_or(&Value::Null);
    let text = content(c).map_err(|e| format!("content {e}"))?;
    if role == "assistant" && text.trim().is_empty() {
        return Ok(None);
    }
    Ok(Some(RawMessage::new(role, text)))
}

/// `messages`: a non-empty array of OpenAI chat messages, in every shape the API accepts (see
/// [`message`]), with a user message.
pub(super) fn messages(v: &Value) -> Result<Vec<RawMessage>, Invalid> {
    let Some(Value::Array(ms)) = v.get("messages") else {
        bail!("needs `messages`, an array of {{\"role\", \"content\"}}");
    };
    ensure!(!ms.is_empty(), "`messages` is empty");
    let mut out = Vec::with_capacity(ms.len());
    for (i, m) in ms.iter().enumerate() {
        if let Some(m) = message(m, None).map_err(|e| format!("messages[{i}]: {e}"))? {
            out.push(m);
        }
    }
    ensure!(
        out.iter()
            .any(|m| m.role == "user" && !m.content.trim().is_empty()),
        "`messages` has no user message with text"
    );
    Ok(out)
}

/// A conversation's messages, from `conversations` (ShareGPT), `conversation` (LMSYS) or
/// `turns` (AIPerf), after the entry's own `system` string when it has one; tools' messages
/// left out.
fn dialog(v: &Value) -> Result<Vec<RawMessage>, Invalid> {
    let Some((key, Value::Array(turns))) = DIALOG_KEYS
        .iter()
        .find_map(|(k, _)| v.get(*k).map(|x| (*k, x)))
    else {
        bail!("needs `conversations` (an array of {{\"from\", \"value\"}}), `conversation` or `turns`");
    };
    let default = (key == "turns").then_some("user");
    let mut out = Vec::with_capacity(turns.len() + 1);
    // a conversation-level system prompt, as ShareGPT variants write it (`"system": "..."`)
    if let Some(s) = v.get("system").and_then(Value::as_str) {
        out.push(RawMessage::new("system", s.to_string()));
    }
    for (i, t) in turns.iter().enumerate() {
        if let Some(m) = message(t, default).map_err(|e| format!("{key}[{i}]: {e}"))? {
            out.push(m);
        }
    }
    Ok(out)
}

/// A conversation's prompt: its system messages before the first non-empty human turn, and
/// that turn (replies before it, as in conversations the ShareGPT split cut, and empty human
/// turns are passed over). `None`: no non-empty human turn (left out, as other benchmarks do).
fn first_prompt(d: Vec<RawMessage>) -> Option<Vec<RawMessage>> {
    let turns = Turns::of(d)?;
    let mut out = turns.system;
    out.push(turns.turns.into_iter().next()?.0);
    Some(out)
}

/// A conversation as turns to replay: its system messages (those before the first human
/// turn), then each non-empty human turn with the reply after it (the assistant's messages up
/// to the next human turn, joined; `None` when there is none).
#[derive(Debug, Clone, PartialEq)]
pub struct Turns {
    pub system: Vec<RawMessage>,
    pub turns: Vec<(RawMessage, Option<RawMessage>)>,
}

impl Turns {
    /// `None`: no non-empty human turn. Replies before the first human turn and system
    /// messages after it are left out.
    fn of(d: Vec<RawMessage>) -> Option<Turns> {
        let mut system = Vec::new();
        let mut turns: Vec<(RawMessage, Option<RawMessage>)> = Vec::new();
        for m in d {
            match (m.role.as_str(), turns.last_mut()) {
                ("user", _) if m.content.trim().is_empty() => {}
                ("user", _) => turns.push((m, None)),
                ("system" | "developer", None) => system.push(m),
                ("assistant", Some((_, reply))) => match reply {
                    Some(r) => {
                        r.content.push('\n');
                        r.content.push_str(&m.content);
                    }
                    None => *reply = Some(m),
                },
                _ => {}
            }
        }
        (!turns.is_empty()).then_some(Turns { system, turns })
    }
}

/// The conversations of a file (ShareGPT, LMSYS-Chat-1M, AIPerf `multi_turn`, or OpenAI
/// `messages` lines) as turns to replay; `name` labels messages. Conversations without a
/// non-empty human turn are left out (counted in the second value).
///
/// Errors: the first bad entry as `name:line: what is wrong`; more than
/// [`MAX_PROMPT_SET_ENTRIES`].
pub fn dialogs(text: &str, name: &str) -> Result<(Vec<Turns>, usize), Invalid> {
    let mut out = Vec::new();
    let mut skipped = 0;
    for (k, (line, v)) in items(text, name)?.iter().enumerate() {
        let here = place(name, *line, k);
        let d = match format_of(v) {
            Some(PromptFormat::Messages) => messages(v).at(&here)?,
            Some(PromptFormat::Sharegpt | PromptFormat::Conversation) => dialog(v).at(&here)?,
            _ => bail!("{here}: a conversation needs `conversations` (ShareGPT), `conversation` (role/content), `turns` (AIPerf multi_turn) or `messages`"),
        };
        match Turns::of(d) {
            Some(t) => out.push(t),
            None => skipped += 1,
        }
    }
    Ok((out, skipped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_formats_by_hand() {
        let p = parse(
            "{\"prompt\": \"a b\"}\n\n{\"prompt\": \"c\", \"max_tokens\": 7, \"id\": 3}\n",
            "p.jsonl",
            None,
        )
        .unwrap();
        assert_eq!(p.format, PromptFormat::Prompts);
        assert_eq!(p.entries.len(), 2);
        assert_eq!(p.entries[0].prompt, "a b");
        assert_eq!(p.entries[1].max_tokens, Some(7));
        assert_ne!(p.entries[0].id, p.entries[1].id);
        let m = parse(
            r#"{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]}"#,
            "m.jsonl",
            None,
        )
        .unwrap();
        assert_eq!(m.format, PromptFormat::Messages);
        assert_eq!(m.entries[0].messages.len(), 2);
        assert_eq!(m.entries[0].prompt, "be brief\nhi");
        let sg = r#"[
 {"id": "a", "conversations": [{"from": "system", "value": "s"}, {"from": "human", "value": "q1"}, {"from": "gpt", "value": "r1"}, {"from": "human", "value": "q2"}]},
 {"id": "b", "conversations": [{"from": "gpt", "value": "r"}]},
 {"id": "c", "conversations": [{"from": "human", "value": "  "}]},
 {"id": "d", "conversations": [{"from": "human", "value": "q"}]}
]"#;
        let s = parse(sg, "sg.json", None).unwrap();
        assert_eq!(s.format, PromptFormat::Sharegpt);
        // b: a reply and no human turn; c: an empty human turn only
        assert_eq!((s.entries.len(), s.skipped), (2, 2));
        assert_eq!(
            s.entries[0].messages,
            vec![
                RawMessage {
                    role: "system".into(),
                    content: "s".into()
                },
                user("q1".into())
            ]
        );
        // the same conversations as JSONL
        let jl = "{\"conversations\": [{\"from\": \"human\", \"value\": \"q\"}]}\n";
        assert_eq!(parse(jl, "sg.jsonl", None).unwrap().entries[0].prompt, "q");
    }

    /// ShareGPT_V3_unfiltered_cleaned_split.json as published: conversations that start with
    /// a reply (the split cut them), `from` values beyond human/gpt (system, user, chatgpt,
    /// bing), empty values, empty conversations.
    #[test]
    fn sharegpt_v3_as_published() {
        let sg = r#"[
 {"id": "a", "conversations": [{"from": "gpt", "value": "continued"}, {"from": "human", "value": "Go on."}, {"from": "gpt", "value": "Four."}]},
 {"id": "b", "conversations": [{"from": "system", "value": "Be kind."}, {"from": "user", "value": "Name a river."}, {"from": "chatgpt", "value": "Danube."}, {"from": "user", "value": "Another?"}, {"from": "bing", "value": "Rhine."}]},
 {"id": "c", "conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": "Empty?"}, {"from": "human", "value": "What is a haiku?"}]},
 {"id": "d", "conversations": [{"from": "human", "value": ""}, {"from": "gpt", "value": ""}]},
 {"id": "e", "conversations": []},
 {"id": "f", "markdown": null, "conversations": [{"from": "gpt", "value": "Here is the rest."}]}
]"#;
        let s = parse(sg, "sg.json", None).unwrap();
        let prompts: Vec<&str> = s.entries.iter().map(|e| e.prompt.as_str()).collect();
        assert_eq!(
            prompts,
            ["Go on.", "Be kind.\nName a river.", "What is a haiku?"]
        );
        assert_eq!(s.skipped, 3);
        // a ShareGPT variant's conversation-level system prompt
        let v = r#"{"system": "Be brief.", "conversations": [{"from": "human", "value": "Hi"}]}"#;
        assert_eq!(
            parse(v, "s.jsonl", None).unwrap().entries[0].prompt,
            "Be brief.\nHi"
        );
        // the whole conversations, turn by turn with their replies
        let (d, skipped) = dialogs(sg, "sg.json").unwrap();
        assert_eq!((d.len(), skipped), (3, 3));
        assert_eq!(d[1].system, [RawMessage::new("system", "Be kind.".into())]);
        assert_eq!(
            d[1].turns,
            [
                (
                    user("Name a river.".into()),
                    Some(RawMessage::new("assistant", "Danube.".into()))
                ),
                (
                    user("Another?".into()),
                    Some(RawMessage::new("assistant", "Rhine.".into()))
                ),
            ]
        );
        assert_eq!(d[2].turns.len(), 1);
        assert_eq!(d[2].turns[0].1, None);
    }

    /// LMSYS-Chat-1M rows, OpenAI chat requests in the API's other shapes, and the JSONL of
    /// vLLM's `custom` dataset, AIPerf's `single_turn` and GuideLLM, each with its output length.
    #[test]
    fn published_prompt_shapes() {
        let lmsys = r#"{"conversation_id": "33f0", "model": "vicuna-13b", "conversation": [{"content": "Write a haiku.", "role": "user"}, {"content": "Soft rain", "role": "assistant"}], "turn": 1, "language": "English", "openai_moderation": [], "redacted": false}"#;
        let p = parse(lmsys, "l.jsonl", None).unwrap();
        assert_eq!(p.format, PromptFormat::Conversation);
        assert_eq!(p.entries[0].messages, [user("Write a haiku.".into())]);
        let openai = r#"{"messages": [{"role": "developer", "content": "In French."}, {"role": "user", "content": [{"type": "text", "text": "Capital"}, {"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "of Italy?"}]}]}
{"messages": [{"role": "user", "name": "ana", "content": "Weather?"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c1"}]}, {"role": "tool", "tool_call_id": "c1", "content": "4 C"}, {"role": "user", "content": "Tomorrow?"}], "max_completion_tokens": 5}"#;
        let p = parse(openai, "o.jsonl", None).unwrap();
        assert_eq!(p.format, PromptFormat::Messages);
        assert_eq!(
            p.entries[0].messages,
            [
                RawMessage::new("developer", "In French.".into()),
                user("Capital\nof Italy?".into())
            ]
        );
        assert_eq!(
            p.entries[1].messages,
            [user("Weather?".into()), user("Tomorrow?".into())]
        );
        assert_eq!(p.entries[1].max_tokens, Some(5));
        for (text, want) in [
            (
                "{\"prompt\": \"What is X?\", \"output_tokens\": 152}",
                ("What is X?", Some(152)),
            ),
            (
                "{\"text\": \"A haiku.\", \"output_length\": 50}",
                ("A haiku.", Some(50)),
            ),
            (
                "{\"texts\": [\"One.\", \"Two.\"], \"output_length\": 20}",
                ("One.\nTwo.", Some(20)),
            ),
            (
                "{\"prompt\": \"Hi\", \"prompt_tokens_count\": 9, \"output_tokens_count\": 6}",
                ("Hi", Some(6)),
            ),
            (
                "{\"question\": \"Why?\", \"system_prompt\": \"Be brief.\"}",
                ("Be brief.\nWhy?", None),
            ),
        ] {
            let p = parse(text, "p.jsonl", None).unwrap();
            assert_eq!(p.format, PromptFormat::Prompts, "{text}");
            assert_eq!(
                (p.entries[0].prompt.as_str(), p.entries[0].max_tokens),
                want,
                "{text}"
            );
        }
        // AIPerf multi_turn: a leading system turn, then the user's turns (no replies)
        let aiperf = r#"{"session_id": "c2", "turns": [{"role": "system", "text": "Be terse."}, {"text": "Explain nets."}, {"text": "And CNNs?", "output_length": 30}]}"#;
        let (d, _) = dialogs(aiperf, "a.jsonl").unwrap();
        assert_eq!(d[0].system, [RawMessage::new("system", "Be terse.".into())]);
        assert_eq!(
            d[0].turns,
            [
                (user("Explain nets.".into()), None),
                (user("And CNNs?".into()), None)
            ]
        );
    }

    #[test]
    fn bad_entries_name_file_and_line() {
        let e = |t: &str| parse(t, "p.jsonl", None).unwrap_err().to_string();
        for (t, starts) in [
            (
                "{\"prompt\": \"a\"}\n{\"prompt\": 3}\n",
                "p.jsonl:2: needs `prompt`",
            ),
            (
                "{\"prompt\": \"a\"}\nnot json\n",
                "p.jsonl:2: not a JSON object",
            ),
            (
                "[{\"conversations\": 3}]",
                "p.jsonl: entry [0]: needs `conversations`",
            ),
            ("[1, 2", "p.jsonl:1: not a JSON array"),
        ] {
            assert!(e(t).starts_with(starts), "{t}: {}", e(t));
        }
        for (t, has) in [
            (
                "{\"prompt\": \"a\", \"max_tokens\": 0}\n",
                "p.jsonl:1: `max_tokens` is 0",
            ),
            ("", "holds no prompts"),
            (
                "{\"txt\": \"a\"}\n",
                "needs `prompt` (or `text`), `messages`, `conversations` (ShareGPT) or `conversation`",
            ),
            (
                "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}",
                "p.jsonl:1: messages[0]: role `bot` is not one of",
            ),
            (
                "{\"messages\": [{\"role\": \"user\", \"content\": 3}]}",
                "p.jsonl:1: messages[0]: content must be a string, an array of parts or null, not 3",
            ),
            (
                "[{\"conversations\": [{\"from\": \"human\", \"value\": {}}]}]",
                "p.jsonl: entry [0]: conversations[0]: content must be",
            ),
            (
                "{\"prompt\": \"a\", \"output_tokens\": -1}\n",
                "p.jsonl:1: `output_tokens` is -1: use a whole number in 1..=",
            ),
        ] {
            assert!(e(t).contains(has), "{t}: {}", e(t));
        }
        let many = "{\"prompt\": \"a\"}\n".repeat(MAX_PROMPT_SET_ENTRIES + 1);
        assert!(e(&many).contains("more than 100000 entries"));
    }

    #[test]
    fn the_order_is_seeded_and_the_warmup_takes_from_the_end() {
        let dir = tempfile::tempdir().unwrap();
        let text: String = (0..10)
            .map(|i| format!("{{\"prompt\": \"p{i}\"}}\n"))
            .collect();
        std::fs::write(dir.path().join("p.jsonl"), &text).unwrap();
        let unknown = serde_saphyr::Location::UNKNOWN;
        let spanned = |f: &str| serde_saphyr::Spanned::new(f.to_string(), unknown, unknown);
        let raw = |order: Option<&str>, seed: Option<u64>| RawPromptSet {
            file: Some(spanned("p.jsonl")),
            format: None,
            order: order.map(str::to_string),
            seed,
        };
        let s = load(&raw(None, Some(3)), dir.path()).unwrap();
        let again = load(&raw(None, Some(3)), dir.path()).unwrap();
        let measured = |s: &PromptSet| -> Vec<usize> {
            (0..20).map(|g| s.pick(Slot::Measured(g)).0).collect()
        };
        assert_eq!(measured(&s), measured(&again));
        assert_ne!(
            measured(&s),
            measured(&load(&raw(None, Some(4)), dir.path()).unwrap())
        );
        // every entry once per cycle of 10
        let mut first: Vec<usize> = measured(&s)[..10].to_vec();
        assert_eq!(measured(&s)[..10], measured(&s)[10..]);
        first.sort_unstable();
        assert_eq!(first, (0..10).collect::<Vec<_>>());
        // warmup i takes position n - 1 - i: disjoint from the first 8 measured requests
        let file = load(&raw(Some("file"), None), dir.path()).unwrap();
        assert_eq!(file.pick(Slot::Measured(3)).1.prompt, "p3");
        assert_eq!(file.pick(Slot::Unmeasured(0)).1.prompt, "p9");
        assert_eq!(file.pick(Slot::Unmeasured(1)).1.prompt, "p8");
        assert_eq!(file.pick(Slot::Unmeasured(10)).1.prompt, "p9");
        assert_eq!(s.sha256.len(), 16);
        let e = load(&raw(Some("random"), None), dir.path()).unwrap_err();
        assert!(
            e.to_string().contains("use shuffled (the default) or file"),
            "{e}"
        );
        let e = load(
            &RawPromptSet {
                file: Some(spanned("missing.jsonl")),
                ..raw(None, None)
            },
            dir.path(),
        )
        .unwrap_err();
        assert!(
            e.to_string()
                .contains("missing.jsonl: cannot read (no such file)"),
            "{e}"
        );
    }

    // Hostile input: any bytes give a set or an error, never a panic.
    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in ".{0,400}") {
            let _ = parse(&s, "x", None);
            for f in [PromptFormat::Prompts, PromptFormat::Messages, PromptFormat::Sharegpt] {
                let _ = parse(&s, "x", Some(f));
            }
        }

        #[test]
        fn parse_never_panics_on_near_json(
            key in proptest::sample::select(vec!["prompt", "messages", "conversations", "max_tokens", "role", "from", "value", "content"]),
            val in proptest::sample::select(vec!["1", "-1", "null", "\"\"", "\"x\"", "[]", "{}", "[{}]", "[{\"from\":\"human\",\"value\":1}]", "[{\"role\":\"user\",\"content\":[]}]", "1e999"]),
        ) {
            let line = format!("{{\"{key}\": {val}}}");
            let _ = parse(&line, "x", None);
            let _ = parse(&format!("[{line}]"), "x", None);
        }
    }
}
