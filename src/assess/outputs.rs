//! `gate.outputs` (docs/ab.md "Outputs that changed"): with deterministic sampling, the two arms
//! of `perfgate ab` are asked the same requests, so their answers should be the same; a
//! candidate that answers otherwise in more requests than the base arm's own repeats do is a
//! functional change, whatever its latency. Pure: the records in, the summary and check out.

use crate::config::Scenario;
use crate::gate::{Check, CheckKind, Verdict};
use crate::output_text::{
    event_at, first_difference, snippet, FirstDifference, OutputDiff, OutputText, OutputsSummary,
    CONTEXT_CHARS, EXAMPLES, SNIPPET_CHARS,
};
use crate::record::RequestRecord;
use crate::results::{Note, NoteKind, ScenarioResult, Status};

/// Why the arms' answers are not compared, when sampling is not deterministic: greedy decoding
/// (`request.temperature: 0`) in both arms is what perfgate calls deterministic; a seed alone
/// is not (a seeded sample at temperature > 0 still depends on the batch on most servers), and
/// an unset temperature is the server's default (llama.cpp 0.8, OpenAI 1), not 0. With
/// `request.cache: cold` every request's prompt has its own nonce line: no two are the same
/// request.
pub fn not_deterministic(base: &Scenario, cand: &Scenario) -> Option<String> {
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
    Some(format!(
        "outputs not compared (gate.outputs is on only with deterministic sampling): {why}, so two answers to one request may differ by design; set request.temperature: 0 to compare the arms' answers"
    ))
}

/// A record's answer, when the request succeeded and carried answer text.
fn answer(r: &RequestRecord) -> Option<&OutputText> {
    r.output.as_ref().filter(|_| r.ok())
}

/// Which request a record sent, for finding the base arm's repeats: its prompt and limit
/// (`None`: the one fixed prompt every request sends).
fn request_key(r: &RequestRecord) -> Option<(&str, u32)> {
    r.work
        .as_ref()
        .map(|w| (w.prompt_id.as_str(), w.max_tokens))
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
    // candidate pairs, in index order
    let mut pairs: Vec<(u64, &OutputText, &OutputText)> = Vec::new();
    let identified = base.iter().chain(cand).all(|r| r.work.is_some());
    if identified {
        let by_index: std::collections::BTreeMap<u64, &RequestRecord> = base
            .iter()
            .rev()
            .filter_map(|r| Some((r.work.as_ref()?.index, r)))
            .collect();
        for c in cand {
            let Some(w) = &c.work else { continue };
            let Some(b) = by_index.get(&w.index) else {
                continue;
            };
            if let (Some(x), Some(y)) = (answer(b), answer(c)) {
                pairs.push((w.index, x, y));
            }
        }
        pairs.sort_by_key(|p| p.0);
    } else {
        for (i, (b, c)) in base.iter().zip(cand).enumerate() {
            if let (Some(x), Some(y)) = (answer(b), answer(c)) {
                pairs.push((i as u64, x, y));
            }
        }
    }
    // the base arm's own repeats
    let mut self_pairs = 0u64;
    let mut self_differing = 0u64;
    let mut last: std::collections::HashMap<Option<(&str, u32)>, &OutputText> =
        std::collections::HashMap::new();
    let mut same = |a: &OutputText, b: &OutputText| {
        self_pairs += 1;
        if first_difference(a, b) != FirstDifference::Same {
            self_differing += 1;
        }
    };
    for b in base {
        let Some(x) = answer(b) else { continue };
        if let Some(prev) = last.insert(request_key(b), x) {
            same(prev, x);
        }
    }
    for r in repeats {
        let Some(x) = answer(r) else { continue };
        let first = base.iter().find(|b| match (&b.work, &r.work) {
            (Some(bw), Some(rw)) => bw.index == rw.index,
            (None, None) => true,
            _ => false,
        });
        if let Some(y) = first.and_then(answer) {
            same(y, x);
        }
    }
    let mut at: Vec<u64> = Vec::new();
    let mut examples = Vec::new();
    let mut differing = 0u64;
    for &(index, b, c) in &pairs {
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
                base: snippet(b, from, width),
                candidate: snippet(c, from, width),
            });
        }
    }
    at.sort_unstable();
    OutputsSummary {
        pairs: pairs.len() as u64,
        differing,
        self_pairs,
        self_differing,
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
    let said = format!(
        "answers differ in {d_c} of {n_c} paired requests ({}) against {d_s} of {n_s} ({}) between two sends of one request on the base arm",
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
            "no pair of answers to compare (no request succeeded with answer text on both arms)"
                .to_string(),
        )
    } else if p < alpha {
        (
            Verdict::Fail,
            format!(
                "{said}{where_}: more than the base's own repeatability (one-sided Fisher p {p:.2e} < alpha {alpha}): a functional change, not a speedup"
            ),
        )
    } else if d_c == 0 {
        (Verdict::Pass, format!("{said}: the same answers"))
    } else if p < SUGGESTIVE_P {
        let few = if n_s < n_c {
            format!(" (more repeats would tell: {n_s} against {n_c} pairs; a larger load.samples sends more of both)")
        } else {
            String::new()
        };
        (
            Verdict::Warn,
            format!(
                "{said}{where_}: more than the base's own repeatability, but not significantly at this many pairs (one-sided Fisher p {p:.3}, alpha {alpha}){few}"
            ),
        )
    } else if d_c * n_s <= d_s * n_c {
        (
            Verdict::Pass,
            format!("{said}{where_}: within the base's own repeatability"),
        )
    } else {
        (
            Verdict::Pass,
            format!(
                "{said}{where_}: no more than chance explains beside the base's repeats (one-sided Fisher p {p:.3})"
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

/// The answers of an A/B run's compared scenario judged: the summary, the `outputs` check and,
/// when it FAILs, the note that a latency IMPROVED is no improvement; with sampling that is not
/// deterministic, only the note saying why nothing was compared. `repeats`: the base arm's
/// extra sends.
pub fn judge(
    res: &mut ScenarioResult,
    base_sc: &Scenario,
    sc: &Scenario,
    base: &[RequestRecord],
    cand: &[RequestRecord],
    repeats: &[RequestRecord],
) {
    if res.status != Status::Compared {
        return;
    }
    if !sc.gate.outputs {
        return;
    }
    if let Some(why) = not_deterministic(base_sc, sc) {
        res.notes.push(Note::new(NoteKind::Arms, why));
        return;
    }
    let s = compare(base, cand, repeats);
    let c = check(&res.name, &s, sc.gate.alpha);
    if c.verdict == Verdict::Fail {
        let improved: Vec<String> = res
            .checks
            .iter()
            .filter(|x| x.verdict == Verdict::Improved)
            .map(crate::report::fmt_check_name)
            .collect();
        if !improved.is_empty() {
            res.notes.push(Note::new(
                NoteKind::Arms,
                format!(
                    "functional change: the candidate answers otherwise ({} of {} requests), so its faster {} is not an improvement",
                    s.differing,
                    s.pairs,
                    improved.join(" and ")
                ),
            ));
        }
    }
    if let Some(e) = s.examples.first() {
        let at = match (e.at_char, e.at_token) {
            (Some(ch), Some(t)) => format!("at character {ch} (the base's token event {t})"),
            (Some(ch), None) => format!("at character {ch}"),
            _ => "beyond the characters kept".to_string(),
        };
        res.notes.push(Note::new(
            NoteKind::Arms,
            format!(
                "outputs: {} of {} answers differ between the arms; the first, request {}, {at}: base {:?}, candidate {:?}",
                s.differing, s.pairs, e.index, e.base, e.candidate
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
        assert_eq!(s.examples[0].base, "dogs run");
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
}
