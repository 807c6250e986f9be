//! Units and rounding of the figures perfgate writes.

/// Rounds to 3 decimals (µs for ms values), so files diff cleanly.
pub fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// A byte count for a message: `64 MiB` for a whole number of MiB, else `70.2 MB`, or
/// `512 bytes` below 1 MB.
pub fn fmt_bytes(n: u64) -> String {
    if n >= 1 << 20 && n % (1 << 20) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1_000_000 {
        format!("{:.1} MB", n as f64 / 1e6)
    } else {
        format!("{n} bytes")
    }
}

/// A number from input, for a message: as written when short (`1.0001`, `0.5`, `20`), in
/// scientific notation otherwise (`1e300`, `1.235e-12`), never hundreds of digits (`{}` of
/// 1e300 prints 301).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Num(pub f64);

impl std::fmt::Display for Num {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        const SHORT: usize = 16;
        let x = self.0;
        let plain = format!("{x}");
        if plain.len() <= SHORT || !x.is_finite() {
            return f.pad(&plain);
        }
        let sci = format!("{x:e}");
        if sci.len() <= SHORT {
            f.pad(&sci)
        } else {
            let short = format!("{x:.3e}");
            let (mantissa, exp) = short.split_once('e').unwrap_or((&short, "0"));
            let mantissa = mantissa.trim_end_matches('0').trim_end_matches('.');
            f.pad(&format!("{mantissa}e{exp}"))
        }
    }
}

/// Milliseconds with sensible precision (`8.12 ms`, `214 ms`, `1.93 s`): the reports' columns.
/// An absurd value (from a hand-edited file) is a [`Num`] (`1e297 s`), never hundreds of digits.
pub fn fmt_ms(x: f64) -> String {
    if x.is_finite() && x >= 1e9 {
        format!("{} s", Num(x / 1000.0))
    } else if x.is_finite() && x >= 10_000.0 {
        format!("{:.2} s", x / 1000.0)
    } else {
        fmt_ms_whole(x)
    }
}

/// Milliseconds as [`fmt_ms`] but never in seconds (`12345 ms`): the gate's reasons.
pub fn fmt_ms_whole(x: f64) -> String {
    if !x.is_finite() {
        "inf".into()
    } else if x >= 1e9 {
        format!("{} ms", Num(x.round()))
    } else if x >= 100.0 {
        format!("{x:.0} ms")
    } else if x >= 10.0 {
        format!("{x:.1} ms")
    } else {
        format!("{x:.2} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_messages_are_short() {
        assert_eq!(Num(1.0001).to_string(), "1.0001");
        assert_eq!(Num(20.0).to_string(), "20");
        assert_eq!(Num(1e300).to_string(), "1e300");
        assert_eq!(Num(-1.2345678901e300).to_string(), "-1.235e300");
        assert_eq!(Num(1e-300).to_string(), "1e-300");
        assert_eq!(Num(1e300 / 100.0).to_string(), "1e298");
        assert_eq!(Num(f64::INFINITY).to_string(), "inf");
        // milliseconds too (a 1e300 ms night printed 298 digits of seconds)
        assert_eq!(fmt_ms(1e300), "1e297 s");
        assert_eq!(fmt_ms_whole(1e300), "1e300 ms");
        assert_eq!(fmt_ms(86_400_000.0), "86400.00 s");
        assert_eq!(fmt_ms(2e9), "2000000 s");
        assert_eq!(fmt_ms_whole(86_400_000.0), "86400000 ms");
        assert_eq!(fmt_bytes(64 << 20), "64 MiB");
        assert_eq!(fmt_bytes(70_200_000), "70.2 MB");
    }
}
