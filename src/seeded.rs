//! A small seeded random stream (SplitMix64) for what must pick the same values on every run,
//! machine and perfgate build: the order of a prompt set's requests and the lengths of generated
//! ones. Written out here rather than taken from the `rand` crate, whose generators may change
//! their streams between versions: a changed stream would change every blessed workload (pure).

/// SplitMix64 (Steele, Lea, Flood 2014): a 64-bit state stepped by a constant, mixed on output.
#[derive(Debug, Clone)]
pub struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    /// The stream of `seed` for item `index` of a sequence (a request's own stream: item k's
    /// values do not depend on how many values item k - 1 drew).
    pub fn for_item(seed: u64, index: u64) -> SplitMix64 {
        let mut s = SplitMix64::new(seed ^ index.wrapping_mul(0xD1B5_4A32_D192_ED03));
        s.next_u64();
        s
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A uniform value in [0, 1) with 53 random bits.
    pub fn next_f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `0..n` (`n` > 0; Lemire's multiply-shift, bias below 2^-32 for
    /// the sizes used here).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// A standard normal value (Box-Muller).
    pub fn next_normal(&mut self) -> f64 {
        // u1 in (0, 1]: ln(u1) is finite
        let u1 = 1.0 - self.next_f64();
        let u2 = self.next_f64();
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }
}

/// A permutation of `0..n` chosen by `seed` (Fisher-Yates).
pub fn permutation(n: usize, seed: u64) -> Vec<u32> {
    let mut v: Vec<u32> = (0..n as u32).collect();
    let mut rng = SplitMix64::new(seed);
    for i in (1..n).rev() {
        let j = rng.below(i as u64 + 1) as usize;
        v.swap(i, j);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_fixed() {
        // SplitMix64's published first outputs for seed 0 (and a check that nothing drifts)
        let mut s = SplitMix64::new(0);
        assert_eq!(s.next_u64(), 0xE220_A839_7B1D_CDAF);
        assert_eq!(s.next_u64(), 0x6E78_9E6A_A1B9_65F4);
        assert_eq!(permutation(5, 7), permutation(5, 7));
        let mut p = permutation(1000, 3);
        assert_ne!(p, permutation(1000, 4));
        p.sort_unstable();
        assert_eq!(p, (0..1000).collect::<Vec<u32>>());
        assert!(permutation(0, 1).is_empty());
    }

    #[test]
    fn uniform_and_normal_have_their_moments() {
        let mut s = SplitMix64::new(11);
        let n = 100_000;
        let xs: Vec<f64> = (0..n).map(|_| s.next_normal()).collect();
        let mean = xs.iter().sum::<f64>() / n as f64;
        let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / n as f64;
        assert!(
            mean.abs() < 0.02 && (var - 1.0).abs() < 0.02,
            "{mean} {var}"
        );
        assert!((0..10_000).all(|_| s.below(3) < 3));
        assert!((0..10_000).all(|_| (0.0..1.0).contains(&s.next_f64())));
    }
}
