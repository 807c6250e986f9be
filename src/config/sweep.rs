//! `load.concurrency: [1, 4, 16]` and `load.rate: [...]`: one scenario per level (pure).
//!
//! A scenario whose merged `load:` lists levels becomes one scenario per level, named
//! `<name>-c<N>` (concurrency) and `<name>-r<R>` (rate; both when both list), each with its own
//! baseline file, fingerprint and checks; they keep the written name as their `family`, which
//! the HTML report draws as one latency-versus-throughput plot.

use super::file::{OneOrMany, RawScenario};

/// Why a list of levels is refused (`what`: `concurrency` or `rate`).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LevelsError {
    /// `[]`.
    #[error("load.{what} is an empty list: give one level or several, e.g. [1, 4, 16]")]
    Empty { what: &'static str },
    /// More than [`MAX_LEVELS`].
    #[error("load.{what} lists {n} levels: at most {MAX_LEVELS} (each level is a scenario with its own baseline)")]
    TooMany { what: &'static str, n: usize },
    /// A level listed twice (`level`: as written).
    #[error("load.{what} lists {level} twice: each level is one scenario")]
    Twice { what: &'static str, level: String },
    /// Two levels that would make scenarios of the same name.
    #[error("load.{what} levels {a} and {b} would both be named `{name}`: list levels that differ in their name")]
    SameName {
        what: &'static str,
        a: String,
        b: String,
        name: String,
    },
}

/// Levels one list may hold.
pub const MAX_LEVELS: usize = 16;

/// The scenarios `raw` stands for, each with its family (`None` when nothing was listed).
pub fn expand(raw: RawScenario) -> Result<Vec<(RawScenario, Option<String>)>, LevelsError> {
    let conc = levels(
        raw.load.concurrency.as_ref(),
        "concurrency",
        |c| format!("c{c}"),
        |c| c.to_string(),
    )?;
    let rate = levels(
        raw.load.rate.as_ref(),
        "rate",
        |r| format!("r{}", fmt_rate(*r)),
        |r| crate::units::Num(*r).to_string(),
    )?;
    if conc.is_none() && rate.is_none() {
        return Ok(vec![(raw, None)]);
    }
    let name = raw.name.clone().unwrap_or_default();
    let conc = conc.unwrap_or_else(|| vec![(raw.load.concurrency.clone(), String::new())]);
    let rate = rate.unwrap_or_else(|| vec![(raw.load.rate.clone(), String::new())]);
    let mut out = Vec::with_capacity(conc.len() * rate.len());
    for (c, cs) in &conc {
        for (r, rs) in &rate {
            let mut s = raw.clone();
            s.load.concurrency = c.clone();
            s.load.rate = r.clone();
            let suffix: Vec<&str> = [cs.as_str(), rs.as_str()]
                .into_iter()
                .filter(|x| !x.is_empty())
                .collect();
            s.name = Some(format!("{name}-{}", suffix.join("-")));
            out.push((s, Some(name.clone())));
        }
    }
    Ok(out)
}

/// A list's levels as single values with their name suffix; `None` for a single value or none.
/// `show` writes a level for a message.
#[allow(clippy::type_complexity)]
fn levels<T: Copy + PartialEq>(
    v: Option<&OneOrMany<T>>,
    what: &'static str,
    suffix: impl Fn(&T) -> String,
    show: impl Fn(&T) -> String,
) -> Result<Option<Vec<(Option<OneOrMany<T>>, String)>>, LevelsError> {
    let Some(OneOrMany::Many(list)) = v else {
        return Ok(None);
    };
    if list.is_empty() {
        return Err(LevelsError::Empty { what });
    }
    if list.len() > MAX_LEVELS {
        return Err(LevelsError::TooMany {
            what,
            n: list.len(),
        });
    }
    for (i, x) in list.iter().enumerate() {
        if list[..i].contains(x) {
            return Err(LevelsError::Twice {
                what,
                level: show(x),
            });
        }
        if let Some(y) = list[..i].iter().find(|y| suffix(y) == suffix(x)) {
            return Err(LevelsError::SameName {
                what,
                a: show(y),
                b: show(x),
                name: suffix(x),
            });
        }
    }
    Ok(Some(
        list.iter()
            .map(|x| (Some(OneOrMany::One(*x)), suffix(x)))
            .collect(),
    ))
}

/// A rate for a scenario name: `2`, `0.5`, `12.25`, `1.0001`: the shortest decimal that reads
/// back as the rate (no exponent, no trailing zeros), so distinct rates get distinct names (3
/// decimals named 1.0001 and 1.0002 both `r1`); a rate validation refuses anyway (below
/// 0.01 or above 10,000 requests per second) keeps at most 16 digits.
fn fmt_rate(r: f64) -> String {
    let s = format!("{r}");
    if s.len() <= 24 {
        s
    } else {
        format!("{r:.3}")
            .trim_end_matches('0')
            .trim_end_matches('.')
            .to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::file::RawLoad;

    fn raw(conc: Option<OneOrMany<u32>>, rate: Option<OneOrMany<f64>>) -> RawScenario {
        RawScenario {
            name: Some("chat".into()),
            load: RawLoad {
                concurrency: conc,
                rate,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn names(v: &[(RawScenario, Option<String>)]) -> Vec<String> {
        v.iter().map(|(s, _)| s.name.clone().unwrap()).collect()
    }

    #[test]
    fn a_single_level_is_left_alone() {
        let v = expand(raw(Some(OneOrMany::One(4)), None)).unwrap();
        assert_eq!(names(&v), ["chat"]);
        assert_eq!(v[0].1, None);
        assert_eq!(v[0].0.load.concurrency, Some(OneOrMany::One(4)));
    }

    #[test]
    fn lists_become_one_scenario_per_level() {
        let v = expand(raw(Some(OneOrMany::Many(vec![1, 4, 16])), None)).unwrap();
        assert_eq!(names(&v), ["chat-c1", "chat-c4", "chat-c16"]);
        assert!(v.iter().all(|(_, f)| f.as_deref() == Some("chat")));
        assert_eq!(v[2].0.load.concurrency, Some(OneOrMany::One(16)));
        let v = expand(raw(
            Some(OneOrMany::One(8)),
            Some(OneOrMany::Many(vec![0.5, 2.0])),
        ))
        .unwrap();
        assert_eq!(names(&v), ["chat-r0.5", "chat-r2"]);
        assert_eq!(v[0].0.load.concurrency, Some(OneOrMany::One(8)));
        let v = expand(raw(
            Some(OneOrMany::Many(vec![1, 2])),
            Some(OneOrMany::Many(vec![1.25, 3.0])),
        ))
        .unwrap();
        assert_eq!(
            names(&v),
            ["chat-c1-r1.25", "chat-c1-r3", "chat-c2-r1.25", "chat-c2-r3"]
        );
    }

    #[test]
    fn bad_lists_say_why() {
        let e = expand(raw(Some(OneOrMany::Many(vec![])), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("empty list"), "{e}");
        let e = expand(raw(Some(OneOrMany::Many(vec![1, 4, 1])), None))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "load.concurrency lists 1 twice: each level is one scenario"
        );
        let e = expand(raw(Some(OneOrMany::Many((1..=17).collect())), None))
            .unwrap_err()
            .to_string();
        assert!(e.contains("17 levels: at most 16"), "{e}");
    }

    /// Issue 26: `rate: [1.0001, 1.0002]` made two scenarios named `chat-r1` ("name used
    /// twice"); each level now keeps its own digits.
    #[test]
    fn close_rates_get_distinct_names() {
        let v = expand(raw(None, Some(OneOrMany::Many(vec![1.0001, 1.0002, 0.1])))).unwrap();
        assert_eq!(names(&v), ["chat-r1.0001", "chat-r1.0002", "chat-r0.1"]);
        let e = expand(raw(None, Some(OneOrMany::Many(vec![1e300, 1e300]))))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "load.rate lists 1e300 twice: each level is one scenario");
        let e = expand(raw(None, Some(OneOrMany::Many(vec![1e-300, 2e-300]))))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "load.rate levels 1e-300 and 2e-300 would both be named `r0`: list levels that differ in their name"
        );
    }
}
