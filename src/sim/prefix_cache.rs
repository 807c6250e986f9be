//! The simulator's block prefix cache (`prefix_cache_block`), as vLLM's automatic prefix caching
//! works: a prompt's tokens are cut into full blocks of B tokens; block i's key hashes block
//! i-1's key and block i's own tokens, so a block matches only when everything before it
//! matches too. A request reuses its leading blocks whose keys are cached (B tokens each), then
//! every full block of it is cached. So a conversation's turn k+1, which repeats turn k's
//! prompt (system prompt and history) and adds to it, reuses turn k's full blocks.
//!
//! The simulator's tokens are the whitespace words it counts for `usage.prompt_tokens`
//! ([`super::lognormal::prompt_tokens`], one per word, one per token id), in the order a model
//! reads them: `instructions` (the Responses API's system prompt), every message of `messages`
//! or `input` in order, `input` when it is a string, then `prompt`. Each word is hashed with
//! its message's role (or the field's name), and the first word of each message is marked, so
//! the same words as a system and as a user message, or split between two messages
//! differently, are different tokens (as a chat template's role and separator tokens make them).
//!
//! Invariant: a [`PrefixCache`] holds at most its capacity of keys
//! ([`super::config::MAX_CACHED_BLOCKS`] in a server); beyond it, the least recently used half
//! is evicted, the later blocks of a prompt before its earlier ones (a later block is useless
//! without the blocks before it; vLLM frees a request's blocks tail first for the same reason).

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

use serde_json::{Map, Value};

/// Mixed into the first token of every message: the boundary a chat template marks.
const MESSAGE_START: u64 = 0x6d73_675f_7374_6172;

/// The key of the empty prefix, which block 0's key chains from.
const ROOT: u64 = 0;

/// The prompt's tokens as hashes, one per word counted in `usage.prompt_tokens`, in reading
/// order (see the module doc).
pub(super) fn prompt_words(obj: &Map<String, Value>) -> Vec<u64> {
    let mut out = Vec::new();
    if let Some(v) = obj.get("instructions") {
        push_message(v, "instructions", &mut out);
    }
    for k in ["messages", "input"] {
        match obj.get(k) {
            Some(Value::Array(ms)) => {
                for m in ms {
                    let role = m.get("role").and_then(Value::as_str).unwrap_or("");
                    if let Some(c) = m.get("content") {
                        push_message(c, role, &mut out);
                    }
                }
            }
            Some(s @ Value::String(_)) => push_message(s, k, &mut out),
            _ => {}
        }
    }
    if let Some(v) = obj.get("prompt") {
        push_message(v, "prompt", &mut out);
    }
    out
}

/// Appends the tokens of one message (or field) `v` under `tag`, its first one marked.
fn push_message(v: &Value, tag: &str, out: &mut Vec<u64>) {
    let start = out.len();
    push_words(v, tag, out);
    if let Some(first) = out.get_mut(start) {
        *first ^= MESSAGE_START;
    }
}

/// The words of `v` as [`super::lognormal::count_words`] counts them: a string's whitespace
/// words, an array's items, a part's `text`, a number (a token id) as one.
fn push_words(v: &Value, tag: &str, out: &mut Vec<u64>) {
    match v {
        Value::String(s) => out.extend(s.split_whitespace().map(|w| word_key(tag, w))),
        Value::Array(items) => items.iter().for_each(|i| push_words(i, tag, out)),
        Value::Object(part) => {
            if let Some(t) = part.get("text") {
                push_words(t, tag, out);
            }
        }
        Value::Number(n) => out.push(word_key(tag, &n.to_string())),
        _ => {}
    }
}

fn word_key(tag: &str, word: &str) -> u64 {
    let mut h = DefaultHasher::new();
    tag.hash(&mut h);
    word.hash(&mut h);
    h.finish()
}

/// The keys of the full blocks of `words`, `block` words each (a partial last block has none;
/// `block` 0 gives none): key i hashes key i-1 and block i's words.
pub(super) fn block_keys(words: &[u64], block: usize) -> Vec<u64> {
    if block == 0 {
        return Vec::new();
    }
    let mut prev = ROOT;
    words
        .chunks_exact(block)
        .map(|b| {
            let mut h = DefaultHasher::new();
            prev.hash(&mut h);
            b.hash(&mut h);
            prev = h.finish();
            prev
        })
        .collect()
}

/// When a cached block was last used: the request's number (larger = more recent) and its
/// index in that prompt (smaller = kept longer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct LastUse {
    request: u64,
    index: usize,
}

/// The block keys served so far, bounded (see the module doc).
#[derive(Debug)]
pub(super) struct PrefixCache {
    blocks: HashMap<u64, LastUse>,
    /// Requests looked up so far.
    requests: u64,
    capacity: usize,
}

impl PrefixCache {
    /// An empty cache holding at most `capacity` keys (at least 1).
    pub(super) fn new(capacity: usize) -> PrefixCache {
        PrefixCache {
            blocks: HashMap::new(),
            requests: 0,
            capacity: capacity.max(1),
        }
    }

    /// The number of leading `keys` (a prompt's block keys, in order) already cached; then
    /// caches all of them as used now, evicting if the cache is over its capacity.
    pub(super) fn reuse(&mut self, keys: &[u64]) -> usize {
        let hits = keys
            .iter()
            .take_while(|k| self.blocks.contains_key(k))
            .count();
        self.requests += 1;
        for (index, &k) in keys.iter().enumerate() {
            let used = LastUse {
                request: self.requests,
                index,
            };
            self.blocks.insert(k, used);
        }
        if self.blocks.len() > self.capacity {
            self.evict();
        }
        hits
    }

    /// Keys cached now.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.blocks.len()
    }

    /// Keeps the `capacity / 2` keys used last (ties: earlier blocks of a prompt first).
    fn evict(&mut self) {
        let keep = self.capacity / 2;
        let mut by_use: Vec<(std::cmp::Reverse<u64>, usize, u64)> = self
            .blocks
            .iter()
            .map(|(&k, u)| (std::cmp::Reverse(u.request), u.index, k))
            .collect();
        if keep < by_use.len() {
            by_use.select_nth_unstable(keep);
        }
        for &(_, _, k) in by_use.get(keep..).unwrap_or_default() {
            self.blocks.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The block keys of a chat request with `messages` and block size `b`.
    fn keys(messages: Value, b: usize) -> Vec<u64> {
        let body = json!({ "messages": messages });
        block_keys(&prompt_words(body.as_object().unwrap()), b)
    }

    /// `n` distinct words `w{from}`, ..., `w{from + n - 1}`.
    fn words(from: usize, n: usize) -> String {
        (from..from + n)
            .map(|i| format!("w{i}"))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn one_token_per_counted_word() {
        for body in [
            json!({"messages": [{"role": "system", "content": "a b  c"}, {"role": "user", "content": [{"type": "text", "text": "d e"}]}]}),
            json!({"prompt": [1, 2, 3, 4]}),
            json!({"prompt": ["a b", "c"]}),
            json!({"input": [{"role": "user", "content": "x y"}], "instructions": "be brief"}),
            json!({"input": "x y z", "instructions": "be brief"}),
        ] {
            let o = body.as_object().unwrap();
            assert_eq!(
                prompt_words(o).len() as u64,
                super::super::lognormal::prompt_tokens(o),
                "{body}"
            );
        }
    }

    #[test]
    fn roles_and_message_boundaries_are_part_of_the_tokens() {
        let sys = prompt_words(
            json!({"messages": [{"role": "system", "content": "a b"}]})
                .as_object()
                .unwrap(),
        );
        let user = prompt_words(
            json!({"messages": [{"role": "user", "content": "a b"}]})
                .as_object()
                .unwrap(),
        );
        assert_eq!((sys.len(), user.len()), (2, 2));
        assert_ne!(sys[0], user[0]);
        assert_ne!(sys[1], user[1]);
        let one = prompt_words(
            json!({"messages": [{"role": "user", "content": "a b c"}]})
                .as_object()
                .unwrap(),
        );
        let two = prompt_words(
            json!({"messages": [{"role": "user", "content": "a b"}, {"role": "user", "content": "c"}]})
                .as_object()
                .unwrap(),
        );
        assert_eq!(one[..2], two[..2]);
        assert_ne!(one[2], two[2]);
    }

    #[test]
    fn full_blocks_only_chained() {
        let w: Vec<u64> = (0..10).collect();
        assert_eq!(block_keys(&w, 4).len(), 2); // 10 words: blocks [0..4], [4..8]; 2 left over
        assert_eq!(block_keys(&w, 11).len(), 0);
        assert_eq!(block_keys(&w, 0).len(), 0);
        // block 1 of [0..8] and of [9, 9, 9, 9, 4..8] hold the same words, different prefixes
        let mut v = w.clone();
        v[..4].copy_from_slice(&[9, 9, 9, 9]);
        let (a, b) = (block_keys(&w, 4), block_keys(&v, 4));
        assert_ne!(a[0], b[0]);
        assert_ne!(a[1], b[1]);
        assert_eq!(block_keys(&w[..8], 4), a, "the same prefix, the same keys");
    }

    /// Block 4: a 12-word prompt has blocks [w0..w3], [w4..w7], [w8..w11].
    #[test]
    fn reuse_counts_the_leading_cached_blocks() {
        let b = 4;
        let mut c = PrefixCache::new(100);
        let first = keys(json!([{"role": "user", "content": words(0, 12)}]), b);
        assert_eq!(first.len(), 3);
        assert_eq!(c.reuse(&first), 0, "cold");
        assert_eq!(c.len(), 3);
        // shares the first 2 of 3 blocks (w9 changed to x9): 2 blocks, 8 tokens
        let mut text = words(0, 9);
        text.push_str(" x9 w10 w11");
        let second = keys(json!([{"role": "user", "content": text}]), b);
        assert_eq!(c.reuse(&second), 2);
        assert_eq!(c.len(), 4, "its third block is new");
        // a changed word in block 1 (w1 -> x1): nothing before the change matches a full block
        let mut text = String::from("w0 x1 ");
        text.push_str(&words(2, 10));
        let changed = keys(json!([{"role": "user", "content": text}]), b);
        assert_eq!(c.reuse(&changed), 0);
        // a prefix of a cached prompt (its first 10 words): its 2 full blocks
        let shorter = keys(json!([{"role": "user", "content": words(0, 10)}]), b);
        assert_eq!(shorter.len(), 2);
        assert_eq!(c.reuse(&shorter), 2);
        // the same words as a system message: other tokens
        let sys = keys(json!([{"role": "system", "content": words(0, 12)}]), b);
        assert_eq!(c.reuse(&sys), 0);
        // an exact repeat: all 3 blocks
        assert_eq!(c.reuse(&first), 3);
    }

    #[test]
    fn a_later_block_never_matches_without_the_ones_before() {
        let mut c = PrefixCache::new(100);
        let a = block_keys(&[1, 2, 3, 4, 5, 6], 2);
        c.reuse(&a);
        // the same last block after a different first one
        assert_eq!(c.reuse(&block_keys(&[0, 0, 3, 4, 5, 6], 2)), 0);
        // a cached key in the middle does not count once one before it missed
        let mut mixed = a.clone();
        mixed[0] = 42;
        assert_eq!(c.reuse(&mixed), 0);
    }

    #[test]
    fn eviction_keeps_the_cache_bounded_and_the_most_recent_prefixes() {
        // capacity 6: two 4-block prompts are 8 keys, so the second's lookup evicts down to 3
        let mut c = PrefixCache::new(6);
        let a = block_keys(&[1, 2, 3, 4], 1);
        let b = block_keys(&[5, 6, 7, 8], 1);
        assert_eq!(c.reuse(&a), 0);
        assert_eq!(c.reuse(&b), 0);
        assert_eq!(c.len(), 3);
        // kept: b's first 3 blocks (used last, earlier blocks first); a is gone
        assert_eq!(c.reuse(&a), 0);
        assert_eq!(c.len(), 3, "7 keys > 6 evicted down to a's first 3");
        assert_eq!(c.reuse(&b), 0, "b was evicted by a");
        assert_eq!(c.len(), 3);
        // one prompt longer than the capacity keeps its first half-capacity blocks
        let long = block_keys(&(0..20).collect::<Vec<u64>>(), 1);
        c.reuse(&long);
        assert_eq!(c.len(), 3);
        assert_eq!(c.reuse(&long), 3);
        for _ in 0..100 {
            c.reuse(&block_keys(&[9, 9, 9, 9, 9], 1));
            assert!(c.len() <= 6);
        }
    }
}
