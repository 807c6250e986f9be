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
    crate::stats::spread::spread_upper_of_medians(&meds, &within, 0.10).map(|t| (t, meds.len()))
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
    fn the_spread_of_steady_nights_is_small_and_of_drifting_nights_near_the_drift() {
        // nights alternating 8 ms * e^{+-0.05}: sample sd of the log medians ~0.051 (20 nights)
        let es: Vec<Entry> = (0..20)
            .map(|i| {
                let f = if i % 2 == 0 { 0.05f64 } else { -0.05 };
                entry("s", "t", 8.0 * f.exp())
            })
            .collect();
        let refs: Vec<&Entry> = es.iter().collect();
        let (tau, k) = spread(&refs, 0, SummaryKey::Tpot).unwrap();
        assert_eq!(k, 20);
        // upper 90 % bound: sqrt(19 * s^2 / chi2_19(0.10) - v_w); s^2 = 20/19 * 0.0025,
        // chi2_19(0.10) = 11.651, v_w = pi/2 * 0.05^2 / 20 = 0.000196
        let expect = (19.0 * (20.0 / 19.0 * 0.0025) / 11.651 - 0.000196f64).sqrt();
        assert!((tau - expect).abs() < 0.001, "tau {tau}, expected {expect}");
        // too few nights in the level: none
        assert_eq!(spread(&refs, 12, SummaryKey::Tpot), None);
    }
}
