//! `request.prompt_set`: prompts read from a file in the repository (docs/scenarios.md "Prompt
//! sets"). Three formats: JSONL of prompts (`{"prompt": ...}`), JSONL of chat messages
//! (`{"messages": [...]}`) and ShareGPT conversations (a JSON array or JSONL of `{"id": ...,
//! "conversations": [{"from": "human", "value": ...}, ...]}`). Parsing is pure ([`parse`]);
//! [`load`] reads the file with its size bound. Which entry request k sends is [`PromptSet::pick`]:
//! a seeded order, the same in `bless` and `check`.

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
    /// JSONL, one `{"prompt": "...", "max_tokens": N?}` a line.
    Prompts,
    /// JSONL, one `{"messages": [{"role", "content"}...], "max_tokens": N?}` a line.
    Messages,
    /// ShareGPT: a JSON array, or JSONL, of `{"conversations": [{"from", "value"}...]}`.
    Sharegpt,
}

names!(PromptFormat { Prompts => "prompts", Messages => "messages", Sharegpt => "sharegpt" });

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
    /// ShareGPT conversations without a human turn (or with an empty one), left out.
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
                ", {} conversation(s) without a human turn left out",
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
    let (file, shown, text) = read_data_file(
        "request.prompt_set.file",
        raw.file.as_deref(),
        (dir, MAX_PROMPT_SET_BYTES),
        "the path of a JSONL or ShareGPT JSON file",
        "set",
    )?;
    let format = named(
        "request.prompt_set.format",
        raw.format.as_deref(),
        "prompts, messages or sharegpt (or leave it out to tell from the first entry)",
    )?;
    let order = named(
        "request.prompt_set.order",
        raw.order.as_deref(),
        "shuffled (the default) or file",
    )?;
    let order = order.unwrap_or(PromptOrder::Shuffled);
    let seed = raw.seed.unwrap_or(0);
    let parsed = parse(&text, &shown, format)?;
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
    /// ShareGPT conversations left out (no human turn, or an empty one).
    pub skipped: usize,
}

/// Parses a prompt-set file's text (`name` labels messages: `name:line: ...`). `format`:
/// the given one, or `None` to tell it from the first entry (a `[` opening the file, or a
/// `conversations` key: ShareGPT; a `messages` key; a `prompt` key).
///
/// Errors: the first bad entry, as `name:line: what is wrong; what to write`; no entries; more
/// than [`MAX_PROMPT_SET_ENTRIES`].
pub fn parse(text: &str, name: &str, format: Option<PromptFormat>) -> Result<Parsed, Invalid> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    // (line, value) of every entry
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
    let at = |line: usize, k: usize| {
        if line > 0 {
            format!("{name}:{line}")
        } else {
            format!("{name}: entry [{k}]")
        }
    };
    let format = match format {
        Some(f) => f,
        None => {
            let Some((line, first)) = items.first() else {
                bail!("{name}: holds no prompts; add one JSON object a line");
            };
            if first.get("conversations").is_some() {
                PromptFormat::Sharegpt
            } else if first.get("messages").is_some() {
                PromptFormat::Messages
            } else if first.get("prompt").is_some() {
                PromptFormat::Prompts
            } else {
                bail!(
                    "{}: an entry needs `prompt`, `messages` or `conversations` (ShareGPT); set request.prompt_set.format to say which",
                    at(*line, 0)
                );
            }
        }
    };
    let mut entries = Vec::with_capacity(items.len());
    let mut skipped = 0;
    for (k, (line, v)) in items.iter().enumerate() {
        let here = at(*line, k);
        ensure!(v.is_object(), "{here}: not a JSON object");
        let max_tokens = entry_max_tokens(v).at(&here)?;
        let ms = match format {
            PromptFormat::Prompts => match v.get("prompt") {
                Some(Value::String(s)) if !s.trim().is_empty() => Some(vec![user(s.clone())]),
                Some(Value::String(_)) => bail!("{here}: `prompt` is empty"),
                _ => bail!(
                    "{here}: needs `prompt`, a string (format prompts: {{\"prompt\": \"...\"}})"
                ),
            },
            PromptFormat::Messages => Some(messages(v).at(&here)?),
            PromptFormat::Sharegpt => sharegpt(v).at(&here)?,
        };
        match ms {
            Some(ms) => entries.push(Entry::new(ms, max_tokens)),
            None => skipped += 1,
        }
    }
    ensure!(
        !entries.is_empty(),
        "{name}: holds no usable prompts ({skipped} left out: no human turn); add entries"
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

/// An entry's own `max_tokens`, if it gives one.
fn entry_max_tokens(v: &Value) -> Result<Option<u32>, Invalid> {
    match v.get("max_tokens") {
        None | Some(Value::Null) => Ok(None),
        Some(x) => match x.as_u64() {
            Some(n) if (1..=MAX_ENTRY_MAX_TOKENS).contains(&n) => Ok(Some(n as u32)),
            _ => bail!("`max_tokens` is {x}: use a whole number in 1..={MAX_ENTRY_MAX_TOKENS}"),
        },
    }
}

/// `messages`: a non-empty array of `{role, content}` with a known role and string content.
fn messages(v: &Value) -> Result<Vec<RawMessage>, Invalid> {
    let Some(Value::Array(ms)) = v.get("messages") else {
        bail!("needs `messages`, an array of {{\"role\", \"content\"}}");
    };
    ensure!(!ms.is_empty(), "`messages` is empty");
    let mut out = Vec::with_capacity(ms.len());
    for (i, m) in ms.iter().enumerate() {
        let role = m.get("role").and_then(Value::as_str).unwrap_or("");
        ensure!(
            RawMessage::ROLES.contains(&role),
            "messages[{i}].role is not one of system, user, assistant, developer"
        );
        let Some(content) = m.get("content").and_then(Value::as_str) else {
            bail!("messages[{i}].content must be a string");
        };
        out.push(RawMessage::new(role, content.into()));
    }
    ensure!(
        out.iter().any(|m| m.role == "user"),
        "`messages` has no user message"
    );
    Ok(out)
}

/// A ShareGPT conversation's prompt: its system turns before the first human turn, and that
/// turn. `None`: no human turn, or an empty one (left out, as other benchmarks do).
fn sharegpt(v: &Value) -> Result<Option<Vec<RawMessage>>, Invalid> {
    let Some(Value::Array(turns)) = v.get("conversations") else {
        bail!("needs `conversations`, an array of {{\"from\", \"value\"}}");
    };
    let mut out = Vec::new();
    for (i, t) in turns.iter().enumerate() {
        let from = t.get("from").and_then(Value::as_str).unwrap_or("");
        let Some(value) = t.get("value").and_then(Value::as_str) else {
            bail!("conversations[{i}].value must be a string");
        };
        match from {
            "system" => out.push(RawMessage::new("system", value.into())),
            "human" | "user" => {
                if value.trim().is_empty() {
                    return Ok(None);
                }
                out.push(user(value.into()));
                return Ok(Some(out));
            }
            // a reply before any question: not a prompt
            _ => return Ok(None),
        }
    }
    Ok(None)
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
                "{\"text\": \"a\"}\n",
                "needs `prompt`, `messages` or `conversations`",
            ),
            (
                "{\"messages\": [{\"role\": \"bot\", \"content\": \"x\"}]}",
                "messages[0].role is not one of",
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
        let raw = |order: Option<&str>, seed: Option<u64>| RawPromptSet {
            file: Some("p.jsonl".into()),
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
                file: Some("missing.jsonl".into()),
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
