//! Stage 2: Holm over the gated family, for one run and for merged shards.

use super::*;

/// Stage 2: Holm over the gated family (the checks with a p-value), regression and improvement
/// p-values adjusted separately.
pub fn correct_family(checks: Vec<Evaluated>) -> Family {
    let gated = |e: &Evaluated| e.check.p_value.is_some();
    let reg: Vec<f64> = checks
        .iter()
        .filter(|e| gated(e))
        .map(|e| e.check.p_value.unwrap_or(1.0))
        .collect();
    let imp: Vec<f64> = checks
        .iter()
        .filter(|e| gated(e))
        .map(|e| e.p_improve.unwrap_or(1.0))
        .collect();
    let size = reg.len();
    let mut adjusted = stats::holm::holm_adjust(&reg)
        .into_iter()
        .zip(stats::holm::holm_adjust(&imp));
    let checks = checks
        .into_iter()
        .map(|e| Corrected {
            holm: if gated(&e) { adjusted.next() } else { None },
            evaluated: e,
        })
        .collect();
    Family { checks, size }
}

/// Holm over the union of merged shards (`perfgate report` with several results files): each
/// shard adjusted its p-values over its own family only, so a FAIL there may not survive the
/// larger family. Re-adjusts every check's `p_value` over all merged checks (the same family an
/// unsharded check would use), and turns a FAIL whose new Holm p-value is no longer below its
/// `alpha` into WARN, as [`Corrected::finish`] would have (a FAIL was significant before
/// adjustment and beyond its fail band, hence beyond its warn band). Checks without a recorded
/// `alpha` (older files) keep their verdict. IMPROVED is left as it is (its p-value is not saved;
/// it never changes the exit code).
pub fn correct_merged_family<'a>(checks: impl IntoIterator<Item = &'a mut Check>) {
    let mut gated: Vec<&mut Check> = checks
        .into_iter()
        .filter(|c| c.p_value.is_some() && c.kind != CheckKind::ChangePoint)
        .collect();
    let ps: Vec<f64> = gated.iter().filter_map(|c| c.p_value).collect();
    let adj = stats::holm::holm_adjust(&ps);
    for (c, &p) in gated.iter_mut().zip(adj.iter()) {
        c.p_holm = Some(p);
        if let (Verdict::Fail, Some(alpha)) = (c.verdict, c.alpha) {
            if p >= alpha {
                c.verdict = Verdict::Warn;
                c.reason = format!(
                    "slowdown beyond the {:.0}% fail tolerance, but not significant over the merged shards' Holm family (Holm p = {p:.3} >= alpha {alpha}): WARN, not FAIL",
                    c.fail * 100.0
                );
            }
        }
    }
}
