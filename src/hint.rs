//! The command a hint repeats: "run `perfgate bless --only t`" carries the user's own `-s` and
//! `--baselines` when they are not the defaults, so the suggested command works when pasted
//! (it read `perfgate bless --only t` after `perfgate check -s c.yaml --baselines bl`). A
//! [`Hint`] is made once from the parsed arguments and passed to what writes hints (the
//! baselines' loading and staleness, the missing-baseline message); the default names no flags.

use std::path::{Path, PathBuf};

/// The flags a suggested `perfgate bless` repeats (empty: the defaults).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Hint {
    flags: String,
}

impl Hint {
    /// The hint of a run with these scenario paths and baselines directory.
    pub fn new(scenarios: &[PathBuf], baselines: &Path) -> Hint {
        Hint {
            flags: flags(scenarios, baselines),
        }
    }

    /// `perfgate bless` with this run's flags.
    pub fn bless(&self) -> String {
        format!("perfgate bless{}", self.flags)
    }

    /// `perfgate bless ... --only NAME` with this run's flags.
    pub fn bless_only(&self, name: &str) -> String {
        format!("{} --only {}", self.bless(), quote(name))
    }
}

/// ` -s A -s B --baselines D` for what differs from the defaults (`scenarios`, `baselines`).
pub fn flags(scenarios: &[PathBuf], baselines: &Path) -> String {
    let mut out = String::new();
    if scenarios != [PathBuf::from("scenarios")] {
        for s in scenarios {
            out.push_str(&format!(" -s {}", quote(&s.to_string_lossy())));
        }
    }
    if baselines != Path::new("baselines") {
        out.push_str(&format!(
            " --baselines {}",
            quote(&baselines.to_string_lossy())
        ));
    }
    out
}

/// A word a POSIX shell reads back as itself: as is when it is plain, else in single quotes.
fn quote(w: &str) -> String {
    let plain = !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
    if plain {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', r"'\''"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_repeat_only_what_differs_from_the_defaults() {
        let d = |s: &[&str], b: &str| {
            flags(
                &s.iter().map(PathBuf::from).collect::<Vec<_>>(),
                Path::new(b),
            )
        };
        assert_eq!(d(&["scenarios"], "baselines"), "");
        assert_eq!(d(&["c.yaml"], "bl"), " -s c.yaml --baselines bl");
        assert_eq!(
            d(&["a.yaml", "my dir/b.yaml"], "baselines"),
            " -s a.yaml -s 'my dir/b.yaml'"
        );
        assert_eq!(d(&["scenarios"], "it's"), r" --baselines 'it'\''s'");
    }

    /// A value, not a process-global: two runs' hints live side by side (a `perfgate report`
    /// in the same process names no flags, whatever a check before it was given).
    #[test]
    fn each_hint_carries_its_own_flags() {
        let mine = Hint::new(&[PathBuf::from("c.yaml")], Path::new("bl"));
        assert_eq!(
            mine.bless_only("my t"),
            "perfgate bless -s c.yaml --baselines bl --only 'my t'"
        );
        assert_eq!(Hint::default().bless_only("t"), "perfgate bless --only t");
    }
}
