//! A scenario's name, checked once where it is read: it names the baseline file.

use crate::config::common::{bail, ensure, Invalid};
use serde::Serialize;
use std::fmt;

/// Checks a scenario name: `[A-Za-z0-9._-]`, 1..=64 chars, not only dots.
pub fn check_name(name: &str) -> Result<(), Invalid> {
    ensure!(
        (1..=64).contains(&name.len()),
        "scenario name `{name}` must be 1 to 64 characters"
    );
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        bail!("scenario name `{name}` contains {c:?}: use only letters, digits, `.`, `_` and `-` (it names a file)");
    }
    ensure!(
        !name.starts_with('.'),
        "scenario name `{name}` must not start with `.` (it names a file)"
    );
    Ok(())
}

/// A scenario's name, checked once where it is read ([`ScenarioName::new`], [`check_name`]):
/// `[A-Za-z0-9._-]`, 1 to 64 characters, not starting with `.`, so it can name a file
/// (`baselines/<name>.json`). Written as the plain string.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(transparent)]
pub struct ScenarioName(String);

impl ScenarioName {
    /// Checks `name` ([`check_name`]); the error is the message for the user.
    pub fn new(name: impl Into<String>) -> Result<ScenarioName, Invalid> {
        let name = name.into();
        check_name(&name)?;
        Ok(ScenarioName(name))
    }
    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl<'de> serde::Deserialize<'de> for ScenarioName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        ScenarioName::new(String::deserialize(d)?).map_err(serde::de::Error::custom)
    }
}

impl fmt::Display for ScenarioName {
    /// The name, honouring width and alignment (`{:<24}` in aligned listings).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&self.0)
    }
}

impl std::ops::Deref for ScenarioName {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for ScenarioName {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for ScenarioName {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for ScenarioName {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<&str> for ScenarioName {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

impl PartialEq<String> for ScenarioName {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl From<ScenarioName> for String {
    fn from(n: ScenarioName) -> String {
        n.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("short-prompt_v1.2").is_ok());
        assert!(check_name("../x").unwrap_err().to_string().contains("'/'"));
        assert!(check_name("..").is_err());
        assert!(check_name("").is_err());
        assert!(check_name(&"a".repeat(65)).is_err());
        // aligned listings (`validate`, `bless`) pad a name like a string
        let n = ScenarioName::new("alpha").unwrap();
        assert_eq!(format!("{n:<8}|{n}|"), "alpha   |alpha|");
        assert!(check_name("a b").is_err());
    }
}
