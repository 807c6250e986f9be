//! `--shard I/N`: which scenarios one CI job of a matrix runs (pure).
//!
//! The scenarios sorted by name, the k-th (from 0) goes to shard k mod N + 1, so the N shards
//! cover every scenario exactly once and differ in size by at most one. Stable for a given set of
//! names (adding or renaming a scenario may move others to another shard, which does not matter:
//! each shard still checks against the committed baselines). Input order is kept within a shard.

pub use super::common::{Shard, MAX_SHARDS};
use super::scenario::Scenario;
use std::collections::BTreeSet;

/// A shard that received no scenario (more shards than scenarios).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--shard {}/{}: no scenario falls in this shard ({total} scenario(s)): use at most {total} shards", shard.index, shard.count)]
pub struct EmptyShard {
    pub shard: Shard,
    pub total: usize,
}

impl Shard {
    /// The scenarios of this shard (see the module comment); an empty shard is an error, since a
    /// job that measures nothing must not pass.
    pub fn select(self, scs: Vec<Scenario>) -> Result<Vec<Scenario>, EmptyShard> {
        let total = scs.len();
        let mine = self.names(scs.iter().map(|s| s.name.as_str()));
        let out: Vec<Scenario> = scs
            .into_iter()
            .filter(|s| mine.contains(s.name.as_str()))
            .collect();
        if out.is_empty() {
            return Err(EmptyShard { shard: self, total });
        }
        Ok(out)
    }

    /// Which of `names` fall in this shard.
    fn names<'a>(self, names: impl Iterator<Item = &'a str>) -> BTreeSet<String> {
        let mut sorted: Vec<&str> = names.collect();
        sorted.sort_unstable();
        sorted
            .iter()
            .enumerate()
            .filter(|(k, _)| k % self.count + 1 == self.index)
            .map(|(_, n)| n.to_string())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_i_of_n_and_refuses_the_rest() {
        assert_eq!("2/4".parse::<Shard>(), Ok(Shard { index: 2, count: 4 }));
        assert_eq!(" 1 / 1 ".parse::<Shard>(), Ok(Shard { index: 1, count: 1 }));
        for bad in ["0/4", "5/4", "1/0", "1/1001", "2", "a/b", ""] {
            let e = bad.parse::<Shard>().unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("`{bad}`: use I/N with 1 <= I <= N <= 1000, e.g. 1/4")
            );
        }
    }

    #[test]
    fn shards_partition_the_sorted_names() {
        let names = ["e", "a", "d", "b", "c"];
        let of = |i| {
            Shard { index: i, count: 2 }
                .names(names.iter().copied())
                .into_iter()
                .collect::<Vec<_>>()
        };
        // sorted a b c d e: k = 0, 2, 4 -> shard 1; k = 1, 3 -> shard 2
        assert_eq!(of(1), ["a", "c", "e"]);
        assert_eq!(of(2), ["b", "d"]);
    }
}
