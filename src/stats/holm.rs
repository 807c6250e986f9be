//! Holm's step-down multiple-testing adjustment (Holm 1979, Scand. J. Statist. 6:65), controlling the
//! family-wise error rate over all gated checks of one run (docs/gate.md).

/// Holm-adjusted p-values, in the input order: with the m p-values sorted ascending p_(1) <= ... <= p_(m),
/// adj_(i) = min(1, max_{j <= i} (m - j + 1) p_(j)). Rejecting where adj < alpha is Holm's procedure.
///
/// The result is monotone in the raw p-values, never below the raw value and never above 1. NaN is treated
/// as 1 (no evidence) and values are clamped to [0, 1] first; ties keep their input order (stable sort).
/// Empty input gives an empty vector. O(m log m).
pub fn holm_adjust(p: &[f64]) -> Vec<f64> {
    let m = p.len();
    let clean: Vec<f64> = p
        .iter()
        .map(|&x| if x.is_nan() { 1.0 } else { x.clamp(0.0, 1.0) })
        .collect();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|&a, &b| clean[a].total_cmp(&clean[b]));
    let mut out = vec![1.0; m];
    let mut running = 0.0f64;
    for (rank, &i) in order.iter().enumerate() {
        let scaled = ((m - rank) as f64 * clean[i]).min(1.0);
        running = running.max(scaled);
        out[i] = running;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Computed by hand. Input [0.01, 0.04, 0.03, 0.005], m = 4; sorted: 0.005 (idx 3), 0.01 (idx 0),
    /// 0.03 (idx 2), 0.04 (idx 1). Scaled: 4*0.005 = 0.02, 3*0.01 = 0.03, 2*0.03 = 0.06, 1*0.04 = 0.04;
    /// running max: 0.02, 0.03, 0.06, 0.06. Back in input order: [0.03, 0.06, 0.06, 0.02].
    #[test]
    fn hand_computed_example() {
        let got = holm_adjust(&[0.01, 0.04, 0.03, 0.005]);
        let want = [0.03, 0.06, 0.06, 0.02];
        for (g, w) in got.iter().zip(want) {
            assert!((g - w).abs() < 1e-15, "{got:?}");
        }
    }

    /// By hand: [0.5, 0.2, NaN] -> NaN read as 1; sorted 0.2 (x3 = 0.6), 0.5 (x2 = 1.0), 1 (x1 = 1);
    /// capped and monotone: [1.0, 0.6, 1.0].
    #[test]
    fn caps_at_one_and_handles_nan() {
        assert_eq!(
            holm_adjust(&[0.5, 0.2, f64::NAN]),
            vec![1.0, 0.6000000000000001, 1.0]
        );
        assert_eq!(holm_adjust(&[]), Vec::<f64>::new());
        assert_eq!(holm_adjust(&[0.03]), vec![0.03]);
        assert_eq!(holm_adjust(&[-0.1, 2.0]), vec![0.0, 1.0]);
    }

    proptest! {
        #[test]
        fn adjusted_between_raw_and_one(p in prop::collection::vec(0.0f64..=1.0, 0..40)) {
            let adj = holm_adjust(&p);
            prop_assert_eq!(adj.len(), p.len());
            for (a, r) in adj.iter().zip(&p) {
                prop_assert!(*a >= *r && *a <= 1.0, "raw {} adjusted {}", r, a);
            }
            // Monotone: a smaller raw p-value never gets a larger adjusted one.
            for i in 0..p.len() {
                for j in 0..p.len() {
                    if p[i] < p[j] {
                        prop_assert!(adj[i] <= adj[j]);
                    }
                }
            }
        }
    }
}
