//! What several sections of a scenario share, in one leaf file the others import (it imports
//! none of them): the short hash of fingerprints and ids, which request an entry is picked for
//! ([`Slot`]), a secret value, the prompt lengths a synthetic prompt is fitted at, the accepted
//! arrival rates, the names of gated metrics and quantiles, and what building a scenario needs.

use super::metric::Metric;
use super::scenario::quantile::Quantile;
use sha2::{Digest, Sha256};
use std::fmt;
use std::str::FromStr;

/// First 16 hex chars of sha256(s).
pub fn short_hash(s: &str) -> String {
    let d = Sha256::digest(s.as_bytes());
    d.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Which request an entry is picked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Slot {
    /// The measured request of this global index (0-based over the whole run, every look).
    Measured(usize),
    /// The i-th unmeasured request of a phase (warmup, steady-state ramp-up and drain).
    Unmeasured(usize),
}

/// A secret value (API key, header from env). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret.
    pub fn new(s: String) -> Self {
        Secret(s)
    }
    /// The value, for sending it where it belongs. Never log this.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Two prompt lengths to fit the synthetic prompt at, `lo` and `hi`, so that the line through
/// them has the server's tokens per word (a trace's blocks need it); when they are equal (one
/// length), half of it and it.
pub fn fit_points(lo: u32, hi: u32) -> Vec<u32> {
    if lo == hi {
        vec![(lo / 2).max(1), lo]
    } else {
        vec![lo, hi]
    }
}

/// Lowest accepted `load.rate`, requests/s (a run of 20 requests then lasts about 33 minutes).
pub const MIN_RATE: f64 = 0.01;
/// Highest accepted `load.rate`, requests/s.
pub const MAX_RATE: f64 = 100_000.0;

pub fn parse_metric(s: &str) -> Result<Metric, Invalid> {
    Metric::parse(s).ok_or_else(|| {
        Invalid::Rule(format!(
            "gate.metrics: `{s}` is not a metric: use {} or itl",
            Metric::ALL.map(Metric::as_str).join(", ")
        ))
    })
}

pub fn parse_quantile(s: &str) -> Result<Quantile, Invalid> {
    Quantile::parse(s).ok_or_else(|| {
        Invalid::Rule(format!(
            "gate.quantiles: `{s}` is not a quantile: use p50, p90 or p99"
        ))
    })
}

/// Everything needed to validate one scenario.
pub struct BuildCtx<'a> {
    /// Looks up environment variables.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// `file:line` of the scenario entry, for messages.
    pub at: String,
    /// The scenario file's directory: paths in it (`request.prompt_set.file`) are relative to
    /// it.
    pub dir: std::path::PathBuf,
}

/// A data file a scenario names (`request.prompt_set.file`, `load.trace.file`: `key`), relative
/// to the scenario file's directory `dir`, read within `limit` bytes. Returns the path as
/// written, as shown in messages, and the file's text. Errors: no path (`what` says what to
/// give), a file larger than `limit` (take a part of the `part`) or one that cannot be read.
pub fn read_data_file<'a>(
    key: &str,
    file: Option<&'a str>,
    (dir, limit): (&std::path::Path, u64),
    what: &str,
    part: &str,
) -> Result<(&'a str, String, String), Invalid> {
    use crate::limits::ReadError;
    let Some(file) = file.filter(|f| !f.is_empty()) else {
        bail!("{key} is required: {what}, relative to the scenario file");
    };
    let shown = dir.join(file).display().to_string();
    match crate::limits::read_repo_file(&dir.join(file), limit) {
        Ok(text) => Ok((file, shown, text)),
        Err(ReadError::TooLarge(_)) => {
            bail!(
                "{key} {shown}: larger than {} MiB: take a part of the {part}",
                limit >> 20
            )
        }
        Err(e) => bail!("{key} {shown}: cannot read ({e})"),
    }
}

/// Most shards accepted.
pub const MAX_SHARDS: usize = 1000;

/// Shard `index` (1-based) of `count`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    pub index: usize,
    pub count: usize,
}

/// `--shard` text that is not `I/N` with 1 <= I <= N <= 1000.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{0}`: use I/N with 1 <= I <= N <= 1000, e.g. 1/4")]
pub struct BadShard(String);

impl FromStr for Shard {
    type Err = BadShard;
    fn from_str(s: &str) -> Result<Shard, BadShard> {
        let bad = || BadShard(s.to_string());
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        Shard::new(index, count).ok_or_else(bad)
    }
}

impl Shard {
    /// Shard `index` of `count`, when 1 <= `index` <= `count` <= [`MAX_SHARDS`].
    pub fn new(index: usize, count: usize) -> Option<Shard> {
        (1 <= index && index <= count && count <= MAX_SHARDS).then_some(Shard { index, count })
    }
}

/// What is wrong with a value of a scenario: the key and what to write instead. The text of a
/// [`super::scenario::ScenarioError`]'s problem.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Invalid {
    /// A value that does not parse or expand, after its key (`endpoint.idle_timeout: ...`).
    #[error("{key}: {source}")]
    Value {
        key: String,
        #[source]
        source: Box<super::values::ValueError>,
    },
    /// A rule of the scenario's values, in the words of the section that checks it, starting
    /// with the key (`load.samples is 5: at least 20 ...`).
    #[error("{0}")]
    Rule(String),
    /// A problem with a value whose own line of the scenario file is known
    /// (`request.prompt_set.file`): reported at that line, not at the scenario's `- name:`.
    #[error("{problem}")]
    OnLine { line: usize, problem: Box<Invalid> },
}

impl Invalid {
    /// This problem reported at `line` of the scenario file (unchanged when `line` is 0,
    /// unknown).
    pub fn on_line(self, line: usize) -> Invalid {
        match line {
            0 => self,
            line => Invalid::OnLine {
                line,
                problem: Box::new(self),
            },
        }
    }

    /// The line of the scenario file the problem is at, when it is known ([`Invalid::on_line`]).
    pub fn line(&self) -> Option<usize> {
        match self {
            Invalid::OnLine { line, .. } => Some(*line),
            _ => None,
        }
    }
}

/// Returns `Err(Invalid::Rule(format!(...)))` from the function: a rule of the scenario's
/// values, in the words of the section that checks it, starting with the key.
macro_rules! bail {
    ($($msg:tt)+) => {
        return Err($crate::config::common::Invalid::Rule(format!($($msg)+)).into())
    };
}

/// [`bail!`] unless `cond` holds: `ensure!(n > 0, "key is {n}: use ...")`.
macro_rules! ensure {
    ($cond:expr, $($msg:tt)+) => {
        if $cond {
        } else {
            $crate::config::common::bail!($($msg)+)
        }
    };
}

/// Gives a fieldless enum its names in scenario files: `as_str` and [`Named`].
macro_rules! names {
    ($ty:ident { $($v:ident => $n:literal),+ $(,)? }) => {
        impl $ty {
            /// Its name in scenario files.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($ty::$v => $n),+
                }
            }
        }
        impl $crate::config::common::Named for $ty {
            const ALL: &'static [$ty] = &[$($ty::$v),+];
            fn name(self) -> &'static str {
                self.as_str()
            }
        }
    };
}

pub(crate) use {bail, ensure, names};

/// A closed set of values a scenario file writes by name ([`names!`]).
pub trait Named: Copy + 'static {
    /// Every value.
    const ALL: &'static [Self];
    /// Its name in scenario files.
    fn name(self) -> &'static str;
    /// The value named `s`, if one is.
    fn parse(s: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|v| v.name() == s)
    }
}

/// The value of `key` named `given` (`None`: not given); another name is "`{key} `{given}`:
/// use {hint}`".
pub fn named<T: Named>(key: &str, given: Option<&str>, hint: &str) -> Result<Option<T>, Invalid> {
    given
        .map(|g| T::parse(g).ok_or_else(|| Invalid::Rule(format!("{key} `{g}`: use {hint}"))))
        .transpose()
}

/// `v` when within `range`; else "`{key} is {v}: use {lo}..={hi}{then}`".
pub fn within<T>(
    key: &str,
    v: T,
    range: std::ops::RangeInclusive<T>,
    then: &str,
) -> Result<T, Invalid>
where
    T: PartialOrd + fmt::Display + Copy,
{
    ensure!(
        range.contains(&v),
        "{key} is {v}: use {}..={}{then}",
        range.start(),
        range.end()
    );
    Ok(v)
}

/// A value's error with its key (or `file:line`) put before it: `key: error`.
pub trait At<T> {
    fn at(self, key: impl fmt::Display) -> Result<T, Invalid>;
}

impl<T> At<T> for Result<T, super::values::ValueError> {
    fn at(self, key: impl fmt::Display) -> Result<T, Invalid> {
        self.map_err(|source| Invalid::Value {
            key: key.to_string(),
            source: Box::new(source),
        })
    }
}

impl<T> At<T> for Result<T, Invalid> {
    fn at(self, key: impl fmt::Display) -> Result<T, Invalid> {
        self.map_err(|e| Invalid::Rule(format!("{key}: {e}")))
    }
}

impl From<String> for Invalid {
    fn from(s: String) -> Self {
        Invalid::Rule(s)
    }
}

impl From<&str> for Invalid {
    fn from(s: &str) -> Self {
        Invalid::Rule(s.to_string())
    }
}
