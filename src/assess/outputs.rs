//! `gate.outputs` (docs/ab.md "Outputs that changed"): with deterministic sampling, the two arms
//! of `perfgate ab` are asked the same requests, so their answers should be the same; a
//! candidate that answers otherwise in more requests than the base arm's own repeats do is a
//! functional change, whatever its latency. Pure: the records in, the summary and check out.

use crate::baseline::{Baseline, BaselineRecord};
use crate::config::Scenario;
use crate::gate::{Check, CheckKind, Verdict};
use crate::output_text::{
    event_at, first_difference, snippet, text_kept, FirstDifference, OutputDiff, OutputText,
    OutputsReference, OutputsSummary, CONTEXT_CHARS, EXAMPLES, SNIPPET_CHARS,
};
use crate::record::{RequestRecord, WorkItem};
use crate::results::{Note, NoteKind, ScenarioResult, Status};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};

/// Why the arms' answers are not compared, when sampling is not deterministic: greedy decoding
/// (`request.temperature: 0`) in both arms is what perfgate calls deterministic; a seed alone
/// is not (a seeded sample at temperature > 0 still depends on the batch on most servers), and
/// an unset temperature is the server's default (llama.cpp 0.8, OpenAI 1), not 0. With
/// `request.cache: cold` every request's prompt has its own nonce line: no two are the same
/// request.
pub fn not_deterministic(base: &Scenario, cand: &Scenario) -> Option<String> {
    why_not_deterministic(base, cand).map(|why| format!(
        "outputs not compared (gate.outputs is on only with deterministic sampling): {why}, so two answers to one request may differ by design; set request.temperature: 0 to compare the arms' answers"
    ))
}

/// Why sampling is not deterministic in `base` or `cand` ([`not_deterministic`]).
fn why_not_deterministic(base: &Scenario, cand: &Scenario) -> Option<String> {
    let said = |sc: &Scenario| match sc.request.temperature {
        _ if sc.request.cache == crate::config::scenario::CachePolicy::Cold => Some(
            "request.cache is cold (a nonce line unique to each request changes its prompt)"
                .to_string(),
        ),
        Some(0.0) => None,
        Some(t) => Some(format!("request.temperature is {t}")),
        None => Some("request.temperature is not set (the server's default applies)".to_string()),
    };
    let why = match (said(base), said(cand)) {
        (None, None) => return None,
        (Some(b), Some(c)) if b == c => b,
        (Some(b), _) => format!("the base arm's {b}"),
        (None, Some(c)) => format!("the candidate arm's {c}"),
    };
    Some(why)
}

/// One send as the pairing sees it: which request it was, and its answer when it succeeded
/// with answer text.
#[derive(Debug, Clone, Copy)]
pub struct Sent<'a> {
    /// Its `work.index`; `None` without work items (a fixed prompt: its place in start order
    /// pairs it).
    pub index: Option<u64>,
    /// Which request it sent, for finding repeats: its prompt and limit (`None`: the one fixed
    /// prompt every request sends).
    pub key: Option<(&'a str, u32)>,
    /// Its answer, when it succeeded and carried answer text.
    pub answer: Option<&'a OutputText>,
}

impl<'a> Sent<'a> {
    /// A request that sent `work` (`None`: the fixed prompt) and got `answer`.
    fn new(work: Option<&'a WorkItem>, answer: Option<&'a OutputText>) -> Sent<'a> {
        Sent {
            index: work.map(|w| w.index),
            key: work.map(|w| (w.prompt_id.as_str(), w.max_tokens)),
            answer,
        }
    }

    /// A measured request.
    pub fn of(r: &'a RequestRecord) -> Sent<'a> {
        Sent::new(r.work.as_ref(), r.output.as_ref().filter(|_| r.ok()))
    }

    /// A request of a baseline's run (its answer's hash and length, no text).
    pub fn of_baseline(r: &'a BaselineRecord) -> Sent<'a> {
        Sent::new(
            r.work.as_ref(),
            r.output.as_ref().filter(|_| r.error.is_none()),
        )
    }
}

/// Pairs of two sends of one request on the reference side, and how many differ.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct SelfPairs {
    pairs: u64,
    differing: u64,
}

impl SelfPairs {
    fn add(&mut self, a: &OutputText, b: &OutputText) {
        self.pairs += 1;
        if first_difference(a, b) != FirstDifference::Same {
            self.differing += 1;
        }
    }

    /// The requests of one run that sent the same request again: each send against the
    /// previous send of its request (one prompt-set entry, or the fixed prompt).
    fn consecutive(&mut self, run: &[Sent]) {
        let mut last: HashMap<Option<(&str, u32)>, &OutputText> = HashMap::new();
        for s in run {
            let Some(x) = s.answer else { continue };
            if let Some(prev) = last.insert(s.key, x) {
                self.add(prev, x);
            }
        }
    }
}

/// Compares the arms' answers: each candidate request with the base request of the same index
/// (`work.index`; without identities, the same place in start order), and the base arm's
/// repeatability from its requests that sent the same request again (consecutive sends of
/// one prompt-set entry, or of the fixed prompt) and its `repeats` (sends again of measured
/// requests, paired with the first base request of the same index).
pub fn compare(
    base: &[RequestRecord],
    cand: &[RequestRecord],
    repeats: &[RequestRecord],
) -> OutputsSummary {
    let base: Vec<Sent> = base.iter().map(Sent::of).collect();
    let cand: Vec<Sent> = cand.iter().map(Sent::of).collect();
    // candidate pairs, in index order
    let identified = base.iter().chain(&cand).all(|s| s.index.is_some());
    let mut pairs: Vec<(u64, &OutputText, &OutputText)> = Vec::new();
    if identified {
        let by_index: BTreeMap<u64, &Sent> = base
            .iter()
            .rev()
            .filter_map(|s| Some((s.index?, s)))
            .collect();
        for c in &cand {
            let Some(i) = c.index else { continue };
            let Some(b) = by_index.get(&i) else { continue };
            if let (Some(x), Some(y)) = (b.answer, c.answer) {
                pairs.push((i, x, y));
            }
        }
        pairs.sort_by_key(|p| p.0);
    } else {
        for (i, (b, c)) in base.iter().zip(&cand).enumerate() {
            if let (Some(x), Some(y)) = (b.answer, c.answer) {
                pairs.push((i as u64, x, y));
            }
        }
    }
    // the base arm's own repeats
    let mut own = SelfPairs::default();
    own.consecutive(&base);
    for r in repeats.iter().map(Sent::of) {
        let Some(x) = r.answer else { continue };
        let first = base.iter().find(|b| b.index == r.index);
        if let Some(y) = first.and_then(|b| b.answer) {
            own.add(y, x);
        }
    }
    summarize(OutputsReference::BaseArm, &pairs, own)
}

/// Compares a check's answers with a baseline's (`runs`: each bless run's requests in start
/// order). Each index (`work.index`; without identities, the place in start order) has one
/// reference answer: the first bless run's (the earliest run that answered it). Each check
/// request is paired with its index's reference answer; the baseline's own repeatability is
/// every other bless run's answer to that index against the same reference (another send of
/// one request, exactly what a check's request is under "nothing changed") and, as in `ab`,
/// the requests of one run that sent the same request again.
pub fn compare_runs(runs: &[Vec<Sent>], cand: &[Sent]) -> OutputsSummary {
    let identified = runs.iter().flatten().chain(cand).all(|s| s.index.is_some());
    let key = |s: &Sent, place: usize| match s.index {
        Some(i) if identified => i,
        _ => place as u64,
    };
    let mut reference: BTreeMap<u64, &OutputText> = BTreeMap::new();
    let mut own = SelfPairs::default();
    for run in runs {
        for (place, s) in run.iter().enumerate() {
            let Some(x) = s.answer else { continue };
            match reference.entry(key(s, place)) {
                Entry::Vacant(v) => {
                    v.insert(x);
                }
                Entry::Occupied(o) => own.add(o.get(), x),
            }
        }
        own.consecutive(run);
    }
    let mut pairs: Vec<(u64, &OutputText, &OutputText)> = Vec::new();
    for (place, c) in cand.iter().enumerate() {
        let k = key(c, place);
        if let (Some(x), Some(y)) = (reference.get(&k), c.answer) {
            pairs.push((k, x, y));
        }
    }
    pairs.sort_by_key(|p| p.0);
    summarize(OutputsReference::Baseline, &pairs, own)
}

/// The summary of the candidate's `pairs` (index, reference answer, candidate answer) and the
/// reference's own repeats.
fn summarize(
    reference: OutputsReference,
    pairs: &[(u64, &OutputText, &OutputText)],
    own: SelfPairs,
) -> OutputsSummary {
    let mut at: Vec<u64> = Vec::new();
    let mut examples = Vec::new();
    let mut differing = 0u64;
    for &(index, b, c) in pairs {
        let d = first_difference(b, c);
        if d == FirstDifference::Same {
            continue;
        }
        differing += 1;
        let at_char = match d {
            FirstDifference::At(k) => Some(k),
            _ => None,
        };
        at.extend(at_char);
        if examples.len() < EXAMPLES {
            let from = at_char.map_or(0, |k| k.saturating_sub(CONTEXT_CHARS));
            let width = SNIPPET_CHARS + CONTEXT_CHARS as usize;
            examples.push(OutputDiff {
                index,
                at_char,
                at_token: at_char.and_then(|k| event_at(b, k)),
                base: text_kept(b).then(|| snippet(b, from, width)),
                candidate: snippet(c, from, width),
            });
        }
    }
    at.sort_unstable();
    OutputsSummary {
        reference,
        pairs: pairs.len() as u64,
        differing,
        self_pairs: own.pairs,
        self_differing: own.differing,
        first_difference_chars: (!at.is_empty())
            .then(|| [at[0], at[(at.len() - 1) / 2], at[at.len() - 1]]),
        examples,
    }
}

fn pct(k: u64, n: u64) -> String {
    if n == 0 {
        return "-".into();
    }
    format!("{:.1}%", k as f64 / n as f64 * 100.0)
}

/// Below this one-sided p-value, and not below alpha, more differing answers than the base's own
/// repeats is suggestive: WARN, "cannot tell at this many pairs" (a server that is not
/// batch-invariant gives it less than 1 time in 5 when nothing changed: `perfgate calibrate`
/// measures 0 to 12 %); above it, chance explains what differs.
pub const SUGGESTIVE_P: f64 = 0.2;

/// The `outputs` check of `s` at one-sided level `alpha` (the scenario's `gate.alpha`): FAIL
/// (a functional change) when the candidate's share of differing pairs is above the base arm's
/// own share by Fisher's exact test (one-sided p below alpha); WARN when p is below
/// [`SUGGESTIVE_P`] (more differ, and the test cannot tell at this many pairs); PASS otherwise
/// (no pair differs, no larger a share than between the base's repeats, or no more than chance
/// explains); INFO when no pair could be compared.
pub fn check(scenario: &str, s: &OutputsSummary, alpha: f64) -> Check {
    use crate::stats::tests_exact::fisher_greater;
    let (n_c, d_c, n_s, d_s) = (s.pairs, s.differing, s.self_pairs, s.self_differing);
    let p = fisher_greater(d_c, n_c, d_s, n_s);
    let (own, more, whose) = match s.reference {
        OutputsReference::BaseArm => (
            "between two sends of one request on the base arm",
            "a larger load.samples sends more of both",
            "the base's",
        ),
        OutputsReference::Baseline => (
            "between two sends of one request in the baseline's runs",
            "a bless with more --runs keeps more",
            "the baseline's",
        ),
    };
    let said = format!(
        "answers differ in {d_c} of {n_c} paired requests ({}) against {d_s} of {n_s} ({}) {own}",
        pct(d_c, n_c),
        pct(d_s, n_s)
    );
    let where_ = match s.first_difference_chars {
        Some([lo, med, hi]) => {
            format!("; first difference at character {lo} to {hi} (median {med})")
        }
        None => String::new(),
    };
    let (verdict, reason) = if n_c == 0 {
        (
            Verdict::Info,
            match s.reference {
                OutputsReference::BaseArm => "no pair of answers to compare (no request succeeded with answer text on both arms)",
                OutputsReference::Baseline => "no pair of answers to compare (no request succeeded with answer text both in the baseline and now)",
            }
            .to_string(),
        )
    } else if p < alpha {
        (
            Verdict::Fail,
            format!(
                "{said}{where_}: more than {whose} own repeatability (one-sided Fisher p {p:.2e} < alpha {alpha}): a functional change, not a speedup"
            ),
        )
    } else if d_c == 0 {
        (Verdict::Pass, format!("{said}: the same answers"))
    } else if p < SUGGESTIVE_P {
        let few = if n_s < n_c {
            format!(" (more repeats would tell: {n_s} against {n_c} pairs; {more})")
        } else {
            String::new()
        };
        (
            Verdict::Warn,
            format!(
                "{said}{where_}: more than {whose} own repeatability, but not significantly at this many pairs (one-sided Fisher p {p:.3}, alpha {alpha}){few}"
            ),
        )
    } else if d_c * n_s <= d_s * n_c {
        (
            Verdict::Pass,
            format!("{said}{where_}: within {whose} own repeatability"),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "{said}{where_}: no more than chance explains beside {whose} repeats (one-sided Fisher p {p:.3})"
            ),
        )
    };
    let share = |k: u64, n: u64| (n > 0).then(|| k as f64 / n as f64);
    Check {
        baseline: share(d_s, n_s),
        candidate: share(d_c, n_c),
        p_value: (n_c > 0).then_some(p),
        alpha: Some(alpha),
        n_baseline: n_s as usize,
        n_candidate: n_c as usize,
        verdict,
        reason,
        ..Check::blank(scenario, None, CheckKind::Outputs, 0.0)
    }
}

/// The answers of an A/B run's scenario compared ([`compare`]), for [`settle`] once the latency
/// verdicts are known; with sampling that is not deterministic, the note saying why nothing was
/// compared; `None` with `gate.outputs: false`. `repeats`: the base arm's extra sends.
pub fn between_arms(
    base_sc: &Scenario,
    sc: &Scenario,
    base: &[RequestRecord],
    cand: &[RequestRecord],
    repeats: &[RequestRecord],
) -> Option<Answers> {
    if !sc.gate.outputs {
        return None;
    }
    let compared = match not_deterministic(base_sc, sc) {
        Some(why) => Compared::Not(why),
        None => Compared::Yes(compare(base, cand, repeats)),
    };
    Some(Answers {
        compared,
        alpha: sc.gate.alpha,
    })
}

/// A scenario's answers compared, and the level its check is judged at (the scenario's
/// `gate.alpha`): an input of the judgement's last stage ([`super::gated_results`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Answers {
    pub compared: Compared,
    pub alpha: f64,
}

/// A scenario's answers compared with its reference, before the latency verdicts are known
/// (what [`settle`] adds to the result once they are).
#[derive(Debug, Clone, PartialEq)]
pub enum Compared {
    /// Compared: the figures.
    Yes(OutputsSummary),
    /// Not compared (sampling that is not deterministic, a baseline without answers): the note
    /// saying why and what to do. Not a check: INFO, never a PASS.
    Not(String),
}

/// `perfgate check`'s answers against its committed baseline (docs/ab.md "Against a
/// baseline"), when `gate.outputs` is on and sampling is deterministic; `None` otherwise (no
/// note: nothing asked for the answers to be compared). A baseline that kept no answers
/// (blessed before it kept them) is not compared, with the note saying why.
pub fn against_baseline(
    sc: &Scenario,
    baseline: &Baseline,
    cand: &[RequestRecord],
) -> Option<Answers> {
    if !sc.gate.outputs {
        return None;
    }
    // not asked: answers are compared at deterministic sampling only, and a scenario that
    // samples otherwise says nothing of them (a bless then keeps no answers either)
    if why_not_deterministic(sc, sc).is_some() {
        return None;
    }
    let runs: Vec<Vec<Sent>> = baseline
        .runs
        .iter()
        .map(|r| r.records.iter().map(Sent::of_baseline).collect())
        .collect();
    let cand: Vec<Sent> = cand.iter().map(Sent::of).collect();
    let kept_none = runs.iter().flatten().all(|s| s.answer.is_none());
    if kept_none && cand.iter().all(|s| s.answer.is_none()) {
        // neither side has text to compare: re-blessing would not give any
        return Some(Answers {
            alpha: sc.gate.alpha,
            compared: Compared::Not(
                "outputs not compared: no request answered with text, in the baseline or in this check (an answer that is only a tool call or reasoning has no text to compare: see the structured-output row for tool calls)".to_string(),
            ),
        });
    }
    if kept_none {
        return Some(Answers {
            alpha: sc.gate.alpha,
            compared: Compared::Not(
            "outputs not compared: the baseline keeps no answers (blessed before baselines kept each answer's hash), so a changed answer cannot be seen; re-bless at request.temperature: 0 (`perfgate bless`) to compare them".to_string(),
            ),
        });
    }
    Some(Answers {
        compared: Compared::Yes(compare_runs(&runs, &cand)),
        alpha: sc.gate.alpha,
    })
}

/// Adds the answers compared to a compared scenario's result, once its latency verdicts are
/// known (gate.outputs: outside the Holm family): the summary, the `outputs` check, the note
/// that a latency IMPROVED is no improvement when it FAILs, and the first differing pair; or
/// the note saying why nothing was compared.
pub fn settle(res: &mut ScenarioResult, answers: Answers) {
    if res.status != Status::Compared {
        return;
    }
    let Answers { compared, alpha } = answers;
    let s = match compared {
        Compared::Not(why) => {
            res.notes.push(Note::new(NoteKind::Outputs, why));
            return;
        }
        Compared::Yes(s) => s,
    };
    let c = check(&res.name, &s, alpha);
    let who = match s.reference {
        OutputsReference::BaseArm => "between the arms",
        OutputsReference::Baseline => "from the baseline's",
    };
    if c.verdict == Verdict::Fail {
        let improved: Vec<String> = res
            .checks
            .iter()
            .filter(|x| x.verdict == Verdict::Improved)
            .map(crate::report::fmt_check_name)
            .collect();
        if !improved.is_empty() {
            res.notes.push(Note::new(
                NoteKind::Outputs,
                format!(
                    "functional change: the candidate answers otherwise ({} of {} requests), so its faster {} {}",
                    s.differing,
                    s.pairs,
                    improved.join(" and "),
                    if improved.len() == 1 {
                        "is not an improvement"
                    } else {
                        "are not improvements"
                    }
                ),
            ));
        }
    }
    if let Some(e) = s.examples.first() {
        let said = match (e.at_char, e.at_token, &e.base) {
            (Some(ch), Some(t), Some(b)) => format!(
                "at character {ch} (the base's token event {t}): base {b:?}, candidate {:?}",
                e.candidate
            ),
            (Some(ch), _, Some(b)) => {
                format!("at character {ch}: base {b:?}, candidate {:?}", e.candidate)
            }
            (_, _, Some(b)) => format!(
                "beyond the characters kept: base {b:?}, candidate {:?}",
                e.candidate
            ),
            (_, _, None) => format!(
                "where is unknown (the baseline keeps each answer's hash and length, not its text): candidate {:?}",
                e.candidate
            ),
        };
        res.notes.push(Note::new(
            NoteKind::Outputs,
            format!(
                "outputs: {} of {} answers differ {who}; the first, request {}, {said}",
                s.differing, s.pairs, e.index
            ),
        ));
    }
    res.checks.push(c);
    res.outputs = Some(s);
}

/// A record as the results write it: its answer's hash and length only when sampling was
/// deterministic (a hash of a random sample says nothing).
pub fn written(r: &RequestRecord, sc: &Scenario) -> RequestRecord {
    let mut r = r.rounded();
    if sc.request.temperature != Some(0.0) {
        r.output = None;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::WorkItem;

    fn rec(index: u64, prompt: &str, text: &str) -> RequestRecord {
        RequestRecord {
            output: Some(OutputText::of(text)),
            work: Some(WorkItem {
                index,
                entry: None,
                prompt_id: prompt.into(),
                max_tokens: 8,
                input_tokens: None,
                conversation: None,
                turn: None,
            }),
            ..RequestRecord::new(index as f64)
        }
    }

    #[test]
    fn pairs_by_index_and_the_base_repeats_of_one_prompt() {
        // 4 prompts a, b, a, b: base answers A B A B'; candidate A X A Y
        let base = [
            rec(0, "a", "the cat sat"),
            rec(1, "b", "dogs run"),
            rec(2, "a", "the cat sat"),
            rec(3, "b", "dogs ran"),
        ];
        let cand = [
            rec(3, "b", "dogs run fast"),
            rec(0, "a", "the cat sat"),
            rec(1, "b", "dogs walk"),
            rec(2, "a", "the cat sat"),
        ];
        let s = compare(&base, &cand, &[]);
        // candidate pairs: 0 same, 1 "dogs run" vs "dogs walk" at char 5, 2 same,
        // 3 "dogs ran" vs "dogs run fast" at char 6 ("dogs r" common): 2 of 4 differ
        assert_eq!((s.pairs, s.differing), (4, 2));
        // base repeats: a (0, 2) same; b (1, 3) "dogs run" vs "dogs ran": 1 of 2 differ
        assert_eq!((s.self_pairs, s.self_differing), (2, 1));
        assert_eq!(s.first_difference_chars, Some([5, 5, 6]));
        assert_eq!(s.examples.len(), 2);
        assert_eq!(s.examples[0].index, 1);
        assert_eq!(s.examples[0].at_char, Some(5));
        assert_eq!(s.examples[0].base.as_deref(), Some("dogs run"));
        assert_eq!(s.examples[0].candidate, "dogs walk");
        // one event per answer: character 5 is in event 0
        assert_eq!(s.examples[0].at_token, Some(0));
        // 2 of 4 against 1 of 2: the same share, PASS
        let c = check("s", &s, 0.01);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert_eq!(c.candidate, Some(0.5));
        assert_eq!(c.baseline, Some(0.5));
    }

    #[test]
    fn a_candidate_that_answers_otherwise_beyond_the_base_repeats_fails() {
        // fixed prompt (no work items): 20 base requests all "same", so 19 self pairs, none
        // differing; candidate: 10 of 20 differ at character 2 ("sa" common)
        let fixed = |t: &str| RequestRecord {
            output: Some(OutputText::of(t)),
            ..RequestRecord::new(0.0)
        };
        let base: Vec<RequestRecord> = (0..20).map(|_| fixed("same")).collect();
        let cand: Vec<RequestRecord> = (0..20)
            .map(|i| fixed(if i % 2 == 0 { "salt" } else { "same" }))
            .collect();
        let s = compare(&base, &cand, &[]);
        assert_eq!(
            (s.pairs, s.differing, s.self_pairs, s.self_differing),
            (20, 10, 19, 0)
        );
        assert_eq!(s.first_difference_chars, Some([2, 2, 2]));
        assert_eq!(s.examples.len(), EXAMPLES);
        // Fisher one-sided: all 10 differing pairs among the candidate's 20 of 39 pairs:
        // C(20,10) / C(39,10) = 184756 / 635745396 = 2.906e-4 < 0.01
        let c = check("s", &s, 0.01);
        assert_eq!(c.verdict, Verdict::Fail, "{}", c.reason);
        let p = c.p_value.unwrap();
        assert!((p - 184_756.0 / 635_745_396.0).abs() < 1e-9, "{p}");
        assert!(c.reason.contains("a functional change"), "{}", c.reason);
        // one differing pair against 0 of 19: nothing to tell (p = 20/39), PASS
        let mut one = cand.clone();
        for r in one.iter_mut().skip(1) {
            *r = fixed("same");
        }
        let c = check("s", &compare(&base, &one, &[]), 0.01);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert!((c.p_value.unwrap() - 20.0 / 39.0).abs() < 1e-12);
        // 2 differing against 0 of 19: C(20,2) / C(39,2) = 190 / 741 = 0.2564, PASS; 3: C(20,3)
        // / C(39,3) = 1140 / 9139 = 0.1247 < 0.2, WARN
        for (k, verdict, p) in [
            (2, Verdict::Pass, 190.0 / 741.0),
            (3, Verdict::Warn, 1140.0 / 9139.0),
        ] {
            let some: Vec<RequestRecord> = (0..20)
                .map(|i| fixed(if i < k { "salt" } else { "same" }))
                .collect();
            let c = check("s", &compare(&base, &some, &[]), 0.01);
            assert_eq!(c.verdict, verdict, "{}", c.reason);
            assert!((c.p_value.unwrap() - p).abs() < 1e-12);
        }
        // nothing differs: PASS; nothing to pair: INFO
        assert_eq!(
            check("s", &compare(&base, &base, &[]), 0.01).verdict,
            Verdict::Pass
        );
        assert_eq!(
            check("s", &compare(&[], &[], &[]), 0.01).verdict,
            Verdict::Info
        );
    }

    #[test]
    fn repeats_pair_with_the_base_request_of_their_index() {
        let base = [rec(0, "a", "x y"), rec(1, "b", "u v")];
        let cand = [rec(0, "a", "x y"), rec(1, "b", "u v")];
        // index 0 again, the same; index 1 again, otherwise
        let repeats = [rec(0, "a", "x y"), rec(1, "b", "u w")];
        let s = compare(&base, &cand, &repeats);
        assert_eq!((s.self_pairs, s.self_differing), (2, 1));
        assert_eq!((s.pairs, s.differing), (2, 0));
    }

    /// A baseline's request as a bless writes it: its answer's hash and length, no text.
    fn kept(index: Option<u64>, prompt: &str, text: Option<&str>) -> BaselineRecord {
        let r = match index {
            Some(i) => rec(i, prompt, text.unwrap_or("")),
            None => RequestRecord {
                output: text.map(OutputText::of),
                ..RequestRecord::new(0.0)
            },
        };
        let mut b = BaselineRecord::from_record(&r);
        b.output = text.map(|t| {
            let o = OutputText::of(t);
            OutputText {
                sha256: o.sha256,
                chars: o.chars,
                ..Default::default()
            }
        });
        if text.is_none() {
            b.error = Some(crate::record::FailureClass::HttpStatus);
        }
        b
    }

    fn sent(runs: &[Vec<BaselineRecord>]) -> Vec<Vec<Sent<'_>>> {
        runs.iter()
            .map(|r| r.iter().map(Sent::of_baseline).collect())
            .collect()
    }

    #[test]
    fn a_check_pairs_with_the_first_bless_run_and_the_other_runs_are_its_repeats() {
        // prompts a, b, a at indices 0, 1, 2; bless run 1 answers x y x, run 2 x y2 x
        let runs = [
            vec![
                kept(Some(0), "a", Some("x")),
                kept(Some(1), "b", Some("y")),
                kept(Some(2), "a", Some("x")),
            ],
            vec![
                kept(Some(0), "a", Some("x")),
                kept(Some(1), "b", Some("y2")),
                kept(Some(2), "a", Some("x")),
            ],
        ];
        // the check, in another start order: index 1 answers z
        let cand = [rec(2, "a", "x"), rec(0, "a", "x"), rec(1, "b", "z")];
        let c: Vec<Sent> = cand.iter().map(Sent::of).collect();
        let s = compare_runs(&sent(&runs), &c);
        assert_eq!(s.reference, OutputsReference::Baseline);
        // pairs against run 1: 0 x=x, 1 y against z (differ), 2 x=x
        assert_eq!((s.pairs, s.differing), (3, 1));
        // self pairs: run 2 against run 1 by index, 3 (index 1, y2 against y, differs); within
        // each run prompt a sent twice (indices 0 and 2, x and x), 1 per run: 3 + 2 = 5, 1 differs
        assert_eq!((s.self_pairs, s.self_differing), (5, 1));
        // the baseline keeps no text: where they differ is unknown, not invented
        assert_eq!(s.first_difference_chars, None);
        assert_eq!(s.examples.len(), 1);
        let e = &s.examples[0];
        assert_eq!((e.index, e.at_char, e.at_token), (1, None, None));
        assert_eq!(e.base, None);
        assert_eq!(e.candidate, "z");
        // 1 of 3 against 1 of 5: Fisher P(X >= 1), 2 differing among 8, 3 drawn:
        // 1 - C(6,3)/C(8,3) = 1 - 20/56 = 0.642857, PASS
        let c = check("s", &s, 0.01);
        assert_eq!(c.verdict, Verdict::Pass, "{}", c.reason);
        assert!((c.p_value.unwrap() - 36.0 / 56.0).abs() < 1e-12);
        assert!(c.reason.contains("in the baseline's runs"), "{}", c.reason);
    }

    #[test]
    fn a_five_run_bless_of_twenty_requests_has_eighty_self_pairs_against_run_one() {
        // 20 distinct prompts, 5 runs, every answer the same per index: 4 later runs x 20
        // indices = 80 self pairs, none within a run (no prompt sent twice), none differing
        let runs: Vec<Vec<BaselineRecord>> = (0..5)
            .map(|_| {
                (0..20)
                    .map(|i| kept(Some(i), &format!("p{i}"), Some(&format!("answer {i}"))))
                    .collect()
            })
            .collect();
        let cand: Vec<RequestRecord> = (0..20)
            .map(|i| rec(i, &format!("p{i}"), &format!("answer {i}")))
            .collect();
        let c: Vec<Sent> = cand.iter().map(Sent::of).collect();
        let s = compare_runs(&sent(&runs), &c);
        assert_eq!(
            (s.pairs, s.differing, s.self_pairs, s.self_differing),
            (20, 0, 80, 0)
        );
        assert_eq!(check("s", &s, 0.01).verdict, Verdict::Pass);
    }

    #[test]
    fn a_request_run_one_did_not_answer_pairs_with_the_next_run_that_did() {
        // index 1 failed in run 1: run 2's answer is its reference (no self pair for it)
        let runs = [
            vec![kept(Some(0), "a", Some("x")), kept(Some(1), "b", None)],
            vec![kept(Some(0), "a", Some("x")), kept(Some(1), "b", Some("y"))],
        ];
        let cand = [rec(0, "a", "x"), rec(1, "b", "y")];
        let c: Vec<Sent> = cand.iter().map(Sent::of).collect();
        let s = compare_runs(&sent(&runs), &c);
        assert_eq!(
            (s.pairs, s.differing, s.self_pairs, s.self_differing),
            (2, 0, 1, 0)
        );
    }

    #[test]
    fn a_fixed_prompt_pairs_by_place_and_every_send_is_a_repeat() {
        // 2 bless runs of 4 sends of the one prompt, all "s": self pairs 4 across the runs (by
        // place) + 3 + 3 within them = 10, none differing; the check's 4: 2 answer "t"
        let runs: Vec<Vec<BaselineRecord>> = (0..2)
            .map(|_| (0..4).map(|_| kept(None, "", Some("s"))).collect())
            .collect();
        let fixed = |t: &str| RequestRecord {
            output: Some(OutputText::of(t)),
            ..RequestRecord::new(0.0)
        };
        let cand = [fixed("s"), fixed("t"), fixed("s"), fixed("t")];
        let c: Vec<Sent> = cand.iter().map(Sent::of).collect();
        let s = compare_runs(&sent(&runs), &c);
        assert_eq!(
            (s.pairs, s.differing, s.self_pairs, s.self_differing),
            (4, 2, 10, 0)
        );
        assert_eq!(
            s.examples.iter().map(|e| e.index).collect::<Vec<_>>(),
            [1, 3]
        );
        // Fisher P(X >= 2), 2 differing among 14, 4 drawn: C(4,2)/C(14,2) = 6/91 = 0.0659:
        // above alpha 0.01, below 0.2: WARN, with the hint to bless more runs
        let c = check("s", &s, 0.01);
        assert_eq!(c.verdict, Verdict::Warn, "{}", c.reason);
        assert!((c.p_value.unwrap() - 6.0 / 91.0).abs() < 1e-12);
        // 10 self pairs against 4: not fewer, so no hint
        assert!(!c.reason.contains("--runs"), "{}", c.reason);
    }
}
