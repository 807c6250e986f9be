//! `request.prompt_tokens: N`: a deterministic synthetic prompt of about N tokens (pure).
//!
//! The text is common English words, one short and frequent word each, so that most
//! tokenizers (Llama, Gemma, Qwen, Mistral, GPT) spend about one token per word; the word
//! sequence is fixed (a linear congruential walk over the list from a fixed seed), so the same
//! N gives the same text on every run and machine. How many tokens the server really counts
//! (chat template included) is learned during the warmup from its own `usage.prompt_tokens`
//! ([`next_words`], driven by the runner), until it is within [`TOLERANCE`] of N.

/// The share of N the server's count may differ by once calibrated (issue 19: within 5 %).
pub const TOLERANCE: f64 = 0.05;
/// Calibration requests at most before measuring with the closest prompt found.
pub const MAX_TRIES: usize = 5;
/// The largest `prompt_tokens` accepted.
pub const MAX_PROMPT_TOKENS: u32 = 262_144;

/// Frequent words that are one token in the common tokenizers (with the leading space).
const WORDS: [&str; 64] = [
    "the", "time", "people", "year", "way", "day", "man", "thing", "woman", "life", "child",
    "world", "school", "state", "family", "student", "group", "country", "problem", "hand", "part",
    "place", "case", "week", "company", "system", "program", "question", "work", "number", "night",
    "point", "home", "water", "room", "mother", "area", "money", "story", "fact", "month", "lot",
    "right", "study", "book", "eye", "job", "word", "business", "issue", "side", "kind", "head",
    "house", "service", "friend", "father", "power", "hour", "game", "line", "end", "member",
    "law",
];

/// The instruction before the filler words (short, so that small N stay possible).
const HEAD: &str = "Read the following words and then write a long story.";
/// The words of [`HEAD`].
pub const HEAD_WORDS: u32 = 10;

/// The prompt with `words` filler words after [`HEAD`]: deterministic, a sentence break every
/// 16 words. `words` = 0 gives the head alone.
pub fn text(words: u32) -> String {
    text_from(words, 0x2545_f491)
}

/// [`text`] with another word sequence, chosen by `seed`: the same words (one token each in
/// common tokenizers) and sentence breaks, so the same count of tokens for the same `words`,
/// but prompts of different seeds share no prefix beyond [`HEAD`] (a generated-lengths
/// workload is not served from a prefix cache unless its requests repeat).
pub fn text_seeded(words: u32, seed: u64) -> String {
    text_from(words, start_state(seed))
}

/// The word walk's start for `seed`, mixed (SplitMix64) so that nearby seeds (a trace's
/// consecutive hash ids) start far apart: the LCG's high bits, which pick the words, barely
/// move between start states that differ in their low bits.
fn start_state(seed: u64) -> u32 {
    (crate::seeded::SplitMix64::new(seed).next_u64() >> 32) as u32
}

/// The synthetic prompt made of blocks, each `(seed, words)` filler words in the order of its
/// seed, after [`HEAD`]: prompts whose blocks share seeds share their text up to the first
/// block that differs (a trace's hash ids, so its prefix reuse is reproduced).
pub fn blocks_text(blocks: &[(u64, u32)]) -> String {
    let words: u32 = blocks.iter().map(|b| b.1).sum();
    let mut out = String::with_capacity(HEAD.len() + 8 * words as usize);
    out.push_str(HEAD);
    for &(seed, w) in blocks {
        push_words(&mut out, w, start_state(seed));
    }
    out
}

/// The filler words of each of `k` blocks (k >= 1) for a prompt of `words` words: every block
/// but the last `per_block` (so a block's text, chosen by its hash id, is the same in every
/// request that has it), the last the rest. When the rest is less than 1 (the last block is
/// shorter than the instruction and chat template), the words missing are taken from the ends
/// of the blocks before it, last first: the total stays `words` and the prompts still share
/// their text up to where they differ.
pub fn block_words(words: u32, k: usize, per_block: u32) -> Vec<u32> {
    if k == 0 {
        return Vec::new();
    }
    let mut counts = vec![per_block; k - 1];
    let rest = i64::from(words) - i64::from(per_block) * (k as i64 - 1);
    if rest >= 1 {
        counts.push(rest as u32);
        return counts;
    }
    counts.push(1);
    let mut deficit = 1 - rest;
    for c in counts[..k - 1].iter_mut().rev() {
        let take = deficit.min(i64::from(*c) - 1);
        *c -= take as u32;
        deficit -= take;
        if deficit == 0 {
            break;
        }
    }
    counts
}

fn text_from(words: u32, start: u32) -> String {
    let mut out = String::with_capacity(HEAD.len() + 8 * words as usize);
    out.push_str(HEAD);
    push_words(&mut out, words, start);
    out
}

/// `words` filler words from the walk starting at `start`, a period after every 16th.
fn push_words(out: &mut String, words: u32, start: u32) {
    let mut state: u32 = start;
    for i in 0..words {
        // Numerical Recipes' LCG; the high bits pick the word.
        state = state.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        let w = WORDS[(state >> 26) as usize];
        out.push(' ');
        out.push_str(w);
        if i % 16 == 15 {
            out.push('.');
        }
    }
}

/// How many tokens a server counts for a synthetic prompt of `words` filler words, as a line
/// through two fitted prompts: `overhead + per_word x words` (the head and the chat template,
/// then each word). Every filler word is one common English word, and a period follows every
/// 16th, so the count is close to linear in the words for any tokenizer that keeps these
/// words whole; what a run measured against the drawn lengths is in its notes.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Scale {
    /// Tokens of the head and the template (may be negative on a tokenizer that merges words).
    pub overhead: f64,
    /// Tokens per filler word.
    pub per_word: f64,
}

impl Scale {
    /// Before any fit: one token a word and 16 for the head and the template (as
    /// [`first_guess`]).
    pub const GUESS: Scale = Scale {
        overhead: 16.0,
        per_word: 1.0,
    };

    /// The line through two fitted prompts `(words, tokens)`; with one point (or two of one
    /// word count), the line through it at one token a word. `None` without a point or with a
    /// slope that is not positive.
    pub fn through(points: &[(u32, u64)]) -> Option<Scale> {
        let s = match points {
            [] => return None,
            [.., (w1, t1), (w2, t2)] if w1 != w2 => {
                let per_word = (*t2 as f64 - *t1 as f64) / (f64::from(*w2) - f64::from(*w1));
                Scale {
                    overhead: *t1 as f64 - per_word * f64::from(*w1),
                    per_word,
                }
            }
            [.., (w, t)] => Scale {
                overhead: *t as f64 - f64::from(*w),
                per_word: 1.0,
            },
        };
        (s.per_word > 0.0 && s.per_word.is_finite() && s.overhead.is_finite()).then_some(s)
    }

    /// The filler words for about `tokens` tokens (at least 1, at most 4 x `tokens`).
    pub fn words_for(&self, tokens: u32) -> u32 {
        let w = ((f64::from(tokens) - self.overhead) / self.per_word).round();
        let cap = f64::from(tokens.saturating_mul(4).max(1));
        w.clamp(1.0, cap) as u32
    }
}

/// The first guess: one word per token, less a small allowance for the head and template.
pub fn first_guess(target: u32) -> u32 {
    target.saturating_sub(16).max(1)
}

/// True when the fitting can stop: the server's count `reported` is within 1 % (or 1 token)
/// of `target`. Fitting aims there, well inside [`TOLERANCE`], so that a count that moves a
/// little with the chat template does not end near the edge.
pub fn on_target(target: u32, reported: u64) -> bool {
    reported.abs_diff(target as u64) <= (target as u64 / 100).max(1)
}

/// True when the server's count `reported` is within [`TOLERANCE`] of `target`.
pub fn close_enough(target: u32, reported: u64) -> bool {
    (reported as f64 - target as f64).abs() <= TOLERANCE * target as f64
}

/// The next word count from what was tried: `(words, reported tokens)` pairs, oldest first.
/// With two different tries, the secant through the last two (the server's count is close to
/// a constant template overhead plus tokens per word); with one, proportional. Never 0, at most
/// `4 * target` words (a tokenizer that packs several words per token is not chased further).
pub fn next_words(target: u32, tried: &[(u32, u64)]) -> u32 {
    let cap = target.saturating_mul(4).max(1);
    let guess = match tried {
        [] => first_guess(target) as f64,
        [.., (w1, t1), (w2, t2)] if w1 != w2 && t1 != t2 => {
            let slope = (*t2 as f64 - *t1 as f64) / (*w2 as f64 - *w1 as f64);
            if slope > 0.0 {
                *w2 as f64 + (target as f64 - *t2 as f64) / slope
            } else {
                proportional(target, *w2, *t2)
            }
        }
        [.., (w, t)] => proportional(target, *w, *t),
    };
    (guess.round().max(1.0) as u32).min(cap)
}

fn proportional(target: u32, words: u32, reported: u64) -> f64 {
    if reported == 0 {
        return words as f64 * 2.0;
    }
    words as f64 * target as f64 / reported as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_text_is_fixed_and_has_the_asked_number_of_words() {
        let a = text(40);
        assert_eq!(a, text(40));
        let head_words = HEAD.split_whitespace().count();
        assert_eq!(head_words, HEAD_WORDS as usize);
        assert_eq!(a.split_whitespace().count(), head_words + 40);
        assert_eq!(a.matches('.').count(), 1 + 2); // the head's, and after words 16 and 32
        assert!(text(41).starts_with(&a));
        assert_eq!(text(0), HEAD);
        // not one word repeated: the walk covers the list
        let long = text(2000);
        let distinct: std::collections::HashSet<&str> = long.split_whitespace().collect();
        assert!(distinct.len() > 60, "{}", distinct.len());
    }

    /// A server whose tokenizer spends `per_word` tokens a word and `overhead` on the head and
    /// the chat template.
    fn server(overhead: f64, per_word: f64) -> impl Fn(u32) -> u64 {
        move |w| (overhead + per_word * w as f64).round() as u64
    }

    fn calibrate(target: u32, count: &dyn Fn(u32) -> u64) -> (u32, u64, usize) {
        let mut tried = Vec::new();
        loop {
            let w = next_words(target, &tried);
            let t = count(w);
            tried.push((w, t));
            if on_target(target, t) || tried.len() == MAX_TRIES {
                return (w, t, tried.len());
            }
        }
    }

    #[test]
    fn calibration_reaches_five_percent_for_common_tokenizers() {
        // one token a word, 25 template tokens; 1.3 tokens a word (words split); 0.8 (merged);
        // a 100-token system template
        for (overhead, per_word) in [(25.0, 1.0), (40.0, 1.3), (12.0, 0.8), (100.0, 1.1)] {
            let count = server(overhead, per_word);
            for target in [128u32, 1024, 4096] {
                let (w, t, tries) = calibrate(target, &count);
                assert!(
                    close_enough(target, t),
                    "target {target}, {overhead}+{per_word}/word: {w} words -> {t} tokens"
                );
                assert!(tries <= 4, "{tries} tries for {target}");
            }
        }
        // A template longer than N cannot be met: the fitting stops at one word, not zero.
        let (w, t, tries) = calibrate(128, &server(200.0, 1.1));
        assert_eq!((w, t, tries), (1, 201, MAX_TRIES));
    }

    #[test]
    fn a_seeded_text_has_the_words_of_the_unseeded_one_and_its_own_order() {
        let a = text_seeded(40, 1);
        let b = text_seeded(40, 2);
        assert_eq!(a, text_seeded(40, 1));
        assert_ne!(a, b);
        assert_eq!(
            a.split_whitespace().count(),
            text(40).split_whitespace().count()
        );
        assert_eq!(a.matches('.').count(), text(40).matches('.').count());
        assert!(a.starts_with(HEAD) && !text_seeded(41, 2).starts_with(&a));
    }

    #[test]
    fn blocks_share_text_where_their_seeds_agree() {
        let a = blocks_text(&[(46, 20), (47, 20), (2353, 7)]);
        let b = blocks_text(&[(46, 20), (47, 20), (2366, 5)]);
        let words = |t: &str| t.split_whitespace().count();
        assert_eq!(words(&a), words(HEAD) + 47);
        assert_eq!(words(&b), words(HEAD) + 45);
        // the first 40 filler words (two blocks) are the same text, the third block is not
        let shared: usize = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
        let two_blocks = blocks_text(&[(46, 20), (47, 20)]);
        assert!(
            shared >= two_blocks.len(),
            "{shared} < {}",
            two_blocks.len()
        );
        assert!(a.starts_with(&two_blocks) && b.starts_with(&two_blocks));
        assert_ne!(a[two_blocks.len()..], b[two_blocks.len()..]);
        // consecutive seeds (hash ids 100, 101, ...) give unrelated text: about 1 word in 64
        // the same at a position, not the same text shifted
        for seed in 100..120u64 {
            let x = blocks_text(&[(seed, 512)]);
            let y = blocks_text(&[(seed + 1, 512)]);
            let same = x
                .split_whitespace()
                .zip(y.split_whitespace())
                .skip(HEAD.split_whitespace().count())
                .filter(|(p, q)| p == q)
                .count();
            assert!(
                same < 40,
                "seeds {seed} and {}: {same} of 512 words alike",
                seed + 1
            );
            let shared = x.chars().zip(y.chars()).take_while(|(p, q)| p == q).count();
            assert!(shared < HEAD.len() + 40, "{shared}");
        }
    }

    #[test]
    fn the_scale_through_two_fits_by_hand() {
        // 100 words -> 130 tokens, 300 words -> 390: 1.3 a word, no overhead
        let s = Scale::through(&[(100, 130), (300, 390)]).unwrap();
        assert!((s.per_word - 1.3).abs() < 1e-12 && s.overhead.abs() < 1e-9);
        assert_eq!(s.words_for(260), 200);
        // one point: one token a word through it (10 words of head and template)
        let s = Scale::through(&[(90, 100)]).unwrap();
        assert_eq!((s.overhead, s.per_word), (10.0, 1.0));
        assert_eq!(s.words_for(512), 502);
        assert_eq!(s.words_for(5), 1);
        assert_eq!(Scale::through(&[]), None);
        assert_eq!(Scale::through(&[(100, 130), (300, 100)]), None);
        assert_eq!(Scale::GUESS.words_for(128), first_guess(128));
    }

    #[test]
    fn next_words_by_hand() {
        assert_eq!(next_words(128, &[]), 112);
        // 112 words gave 150 tokens: 112 * 128 / 150 = 95.57 -> 96
        assert_eq!(next_words(128, &[(112, 150)]), 96);
        // then 96 -> 130: slope (130 - 150) / (96 - 112) = 1.25; 96 + (128 - 130) / 1.25 = 94.4
        assert_eq!(next_words(128, &[(112, 150), (96, 130)]), 94);
        // no usage (0 tokens): double; never above 4 N
        assert_eq!(next_words(100, &[(84, 0)]), 168);
        assert_eq!(next_words(10, &[(30, 1)]), 40);
    }
}
