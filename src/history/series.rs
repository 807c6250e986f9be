//! A scenario's nights as series: the comparable nights (same configuration fingerprint and
//! metric definitions as tonight's), per metric the nightly medians the change-point rule
//! follows, and the night-to-night spread a committed baseline's tolerance learns from.

use super::entry::Entry;
use crate::summary::SummaryKey;

/// Nights of one level needed before the history's spread replaces bless's (docs/history.md
/// "A tolerance learned from real nights"): below it, the upper bound from few nights is wider
/// than what bless's runs give.
pub const MIN_NIGHTS_FOR_SPREAD: usize = 10;

/// Most recent nights of one level the spread is estimated from.
pub const SPREAD_WINDOW: usize = 30;

/// The nights comparable with a run of `fingerprint` and `metrics_version`: the last unbroken
/// run of entries with both (a configuration change starts a new series), oldest first, and how
/// many older entries were left out because of such a change.
pub fn comparable<'a>(
    entries: &'a [Entry],
    fingerprint: &str,
    metrics_version: u32,
) -> (&'a [Entry], usize) {
    let same = |e: &Entry| e.fingerprint == fingerprint && e.metrics_version == metrics_version;
    let start = entries.iter().rposition(|e| !same(e)).map_or(0, |i| i + 1);
    (&entries[start..], start)
}

/// The nightly medians of `key`, ms, one per night (NaN where the night has no value).
pub fn medians(nights: &[&Entry], key: SummaryKey) -> Vec<f64> {
    nights
        .iter()
        .map(|e| e.metrics.get(&key).map_or(f64::NAN, |p| p.p50))
        .collect()
}

/// The night-to-night spread tau of `key` (upper 90 % bound, log scale) over the last
/// [`SPREAD_WINDOW`] nights from `level_start` (the current level: nights before a change point
/// would count the step as noise), with the number of nights; `None` with fewer than
/// [`MIN_NIGHTS_FOR_SPREAD`] nights that have the metric.
pub fn spread(nights: &[&Entry], level_start: usize, key: SummaryKey) -> Option<(f64, usize)> {
    let level = &nights[level_start.min(nights.len())..];
    let from = level.len().saturating_sub(SPREAD_WINDOW);
    let (meds, within): (Vec<f64>, Vec<f64>) = level[from..]
        .iter()
        .filter_map(|e| e.metrics.get(&key))
        .filter(|p| p.n >= 2 && p.p50 > 0.0)
        .map(|p| {
            (
                p.p50.ln(),
                std::f64::consts::FRAC_PI_2 * p.log_sd.powi(2) / p.n as f64,
            )
        })
        .unzip();
    if meds.len() < MIN_NIGHTS_FOR_SPREAD {
        return None;
    }
    crate::stats::spread::spread_upper_of_series(&meds, &within).map(|t| (t, meds.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::entry::tests_support::entry;

    #[test]
    fn a_configuration_change_starts_a_new_series() {
        let mut es: Vec<Entry> = (0..5).map(|i| entry("s", &format!("n{i}"), 8.0)).collect();
        es[1].fingerprint = "old".into();
        let (nights, dropped) = comparable(&es, "f1", 1);
        assert_eq!((nights.len(), dropped), (3, 2));
    }

    #[test]
    fn the_spread_of_steady_nights_comes_from_the_smaller_of_two_robust_scales() {
        // 12 nights at 8 ms * e^{o_i}: |differences| sorted 0.02, 0.03 x2, 0.04 x3, 0.05 x4,
        // 0.09; median 0.04 -> s = 0.04 / (sqrt 2 * 0.67449) = 0.041934; around the median
        // 0.005: |o - 0.005| 0.005 x4, 0.015 x2, 0.025 x2, 0.035 x2, 0.045 x2: MAD 0.02 -> s =
        // 0.02 / 0.67449 = 0.029652, the smaller; bound (0.6 + 5 / sqrt 11) s = 0.062493;
        // minus v_w = pi/2 * 0.05^2 / 20 = 0.00019635 (each night's log-sd 0.05 over 20
        // requests): tau = sqrt(0.062493^2 - 0.00019635) = 0.060902
        let o = [
            0.0, 0.04, 0.01, -0.03, 0.02, -0.01, 0.03, -0.02, 0.0, 0.05, -0.04, 0.01f64,
        ];
        let es: Vec<Entry> = o.iter().map(|f| entry("s", "t", 8.0 * f.exp())).collect();
        let refs: Vec<&Entry> = es.iter().collect();
        let (tau, k) = spread(&refs, 0, SummaryKey::Tpot).unwrap();
        assert_eq!(k, 12);
        assert!((tau - 0.060902).abs() < 1e-5, "tau {tau}");
        // the same nights with tonight's level doubled on the last two: a step is not noise
        let mut stepped = es.clone();
        for e in stepped.iter_mut().skip(10) {
            *e = entry("s", "t", 16.0 * (e.metrics[&SummaryKey::Tpot].p50 / 8.0));
        }
        let refs: Vec<&Entry> = stepped.iter().collect();
        let (t2, _) = spread(&refs, 0, SummaryKey::Tpot).unwrap();
        assert!(t2 < 0.09, "tau {t2} with a step");
        // too few nights in the level: none
        assert_eq!(spread(&refs, 5, SummaryKey::Tpot), None);
    }
}
