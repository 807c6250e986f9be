//! The command a hint repeats: "run `perfgate bless --only t`" carries the user's own `-s` and
//! `--baselines` when they are not the defaults, so the suggested command works when pasted
//! (it read `perfgate bless --only t` after `perfgate check -s c.yaml --baselines bl`). The CLI
//! sets the flags once from its parsed arguments; unset, hints name no flags.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

static FLAGS: OnceLock<String> = OnceLock::new();

/// Remembers the scenario paths and baselines directory of this run for every later hint.
pub fn set(scenarios: &[PathBuf], baselines: &Path) {
    let _ = FLAGS.set(flags(scenarios, baselines));
}

/// `perfgate bless` with this run's flags.
pub fn bless() -> String {
    format!("perfgate bless{}", FLAGS.get().map_or("", String::as_str))
}

/// `perfgate bless ... --only NAME` with this run's flags.
pub fn bless_only(name: &str) -> String {
    format!("{} --only {}", bless(), quote(name))
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
}
