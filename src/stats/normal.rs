//! Standard normal distribution helpers (quantile, CDF, survival function). The quantile is
//! Phi^-1(p) = -sqrt 2 * erfc^-1(2p) (statrs `erfc_inv`, agrees with scipy to ~1e-15); the tails use
//! P(Z >= z) = Q(1/2, z^2/2) / 2 for z >= 0 (A&S 6.5.17 and 7.1.2: erfc x = Q(1/2, x^2)), with statrs'
//! regularised upper incomplete gamma, because statrs' `erfc` is only accurate to ~1e-10 relative.

use statrs::function::erf::erfc_inv;
use statrs::function::gamma::checked_gamma_ur;

/// The standard normal quantile z_p = Phi^-1(p), e.g. `normal_quantile(0.95)` = 1.6448536269514722.
///
/// Returns -inf at p = 0, +inf at p = 1, and NaN when `p` is NaN or outside [0, 1] (never panics,
/// unlike `statrs::distribution::Normal::inverse_cdf`). Formula: -sqrt(2) * erfc^-1(2p).
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    -std::f64::consts::SQRT_2 * erfc_inv(2.0 * p)
}

/// The standard normal CDF Phi(z) = P(Z <= z) = `normal_sf(-z)`, in [0, 1].
///
/// Accurate to ~1e-14 relative in the lower tail (no cancellation). NaN in, NaN out; +-inf give 1 and 0.
pub fn normal_cdf(z: f64) -> f64 {
    normal_sf(-z)
}

/// The standard normal survival function P(Z >= z) = 1 - Phi(z), in [0, 1]: Q(1/2, z^2/2) / 2 for z >= 0,
/// and 1 minus that for z < 0.
///
/// Accurate to ~1e-14 relative in the upper tail (no cancellation), so it is the right call for one-sided
/// p-values. NaN in, NaN out; +inf gives 0 and -inf gives 1.
pub fn normal_sf(z: f64) -> f64 {
    if z.is_nan() {
        f64::NAN
    } else if z >= 0.0 {
        upper_tail(z)
    } else {
        1.0 - upper_tail(-z)
    }
}

/// P(Z >= z) for z >= 0.
fn upper_tail(z: f64) -> f64 {
    if z == 0.0 {
        return 0.5;
    }
    let x = z * z / 2.0;
    if !x.is_finite() {
        return 0.0;
    }
    checked_gamma_ur(0.5, x).map_or(f64::NAN, |q| 0.5 * q)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * b.abs().max(1e-300)
    }

    /// Reference values: `scipy.stats.norm.ppf(p)` with scipy 1.17.1 / numpy 2.4.6, printed with
    /// `repr(float(x))`, e.g. `python -c "from scipy import stats; print(repr(stats.norm.ppf(0.95)))"`.
    #[test]
    fn quantile_matches_scipy() {
        let cases = [
            (0.9, 1.2815515655446004),
            (0.95, 1.6448536269514722),
            (0.975, 1.959963984540054),
            (0.99, 2.3263478740408408),
            (0.999, 3.090232306167813),
            (1e-6, -4.753424308822899),
            (0.01, -2.3263478740408408),
        ];
        for (p, z) in cases {
            assert!(
                close(normal_quantile(p), z, 1e-13),
                "p={p}: {} vs {z}",
                normal_quantile(p)
            );
        }
        assert_eq!(normal_quantile(0.5), 0.0);
    }

    #[test]
    fn quantile_edges_do_not_panic() {
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert_eq!(normal_quantile(1.0), f64::INFINITY);
        assert!(normal_quantile(f64::NAN).is_nan());
        assert!(normal_quantile(-0.1).is_nan());
        assert!(normal_quantile(1.1).is_nan());
    }

    /// Reference: scipy 1.17.1 `repr(float(stats.norm.sf(z)))`.
    #[test]
    fn sf_matches_scipy() {
        let cases = [
            (-3.0, 0.9986501019683699),
            (-1.5, 0.9331927987311419),
            (-0.3, 0.6179114221889526),
            (0.2, 0.42074029056089696),
            (1.0, 0.15865525393145707),
            (1.6448536269514722, 0.050000000000000044),
            (2.5, 0.006209665325776132),
            (3.5, 0.00023262907903552502),
            (5.0, 2.866515718791933e-07),
            (8.0, 6.22096057427174e-16),
            (12.0, 1.776482112077653e-33),
            (20.0, 2.7536241186061556e-89),
        ];
        for (z, want) in cases {
            assert!(
                close(normal_sf(z), want, 1e-13),
                "z={z}: {} vs {want}",
                normal_sf(z)
            );
            assert!(close(normal_cdf(-z), want, 1e-13));
        }
        assert_eq!(normal_sf(0.0), 0.5);
        assert_eq!(normal_sf(1e300), 0.0);
        assert!(normal_sf(f64::NAN).is_nan());
    }

    #[test]
    fn cdf_sf_roundtrip() {
        for p in [1e-9, 0.01, 0.3, 0.5, 0.8, 0.99] {
            let z = normal_quantile(p);
            assert!(close(normal_cdf(z), p, 1e-12));
            assert!(close(normal_sf(z), 1.0 - p, 1e-12));
        }
        assert_eq!(normal_sf(f64::INFINITY), 0.0);
        assert_eq!(normal_sf(f64::NEG_INFINITY), 1.0);
    }
}
