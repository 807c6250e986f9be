//! Parsing of the scalar value forms used in scenario files: durations (`30s`, `250ms`),
//! fractions (`5%` or `0.05`), millisecond amounts (`20ms`, or a bare number of ms) and `${ENV}`
//! expansion. Pure functions, property-testable; each error ([`ValueError`]) quotes the value and
//! says what to write instead (the caller puts the key before it).

use super::file::RawNumber;
use crate::units::Num;
use std::time::Duration;

/// A scalar value of a scenario file that does not parse, or a `${VAR}` that cannot be expanded.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ValueError {
    /// Not a humantime duration.
    #[error("`{text}` is not a duration ({why}); write it like `30s`, `250ms` or `2m`")]
    Duration { text: String, why: String },
    /// A timeout of zero.
    #[error("`{text}` must be more than 0")]
    DurationZero { text: String },
    /// A timeout longer than [`MAX_TIMEOUT`]: a deadline that far out overflows a clock.
    #[error("`{text}` is longer than the maximum {}", humantime::format_duration(*max))]
    DurationTooLong { text: String, max: Duration },
    /// A bare number above 1 where a share is expected: almost always a percentage.
    #[error("`{}` would mean {}%: write a percentage like `{}%`, or a fraction like `{}`", Num(*x), Num((x * 100.0).round()), Num(*x), Num(x / 100.0))]
    BarePercent { x: f64 },
    /// `N%` where N is not a number.
    #[error("`{text}` is not a percentage; write it like `10%` or `0.10`")]
    Percentage { text: String },
    /// Neither a number nor a percentage.
    #[error("`{text}` is not a fraction; write it like `10%` or `0.10`")]
    Fraction { text: String },
    /// A share outside [0, 10].
    #[error("{} is out of range: use a share between 0% and 1000%", Num(*x))]
    ShareRange { x: f64 },
    /// Not a time (`20ms`, `1s`, a bare number of ms).
    #[error("`{text}` is not a time; write it like `20ms` or `1s`")]
    Time { text: String },
    /// A time that is negative or not finite.
    #[error("{} is not a valid time: it must be a finite number of ms >= 0", Num(*x))]
    TimeRange { x: f64 },
    /// `${` without its `}` (`text`: the whole value).
    #[error("unclosed `${{` in `{text}`: write `${{NAME}}`")]
    Unclosed { text: String },
    /// `${A:-${B}}`: a default holding another reference.
    #[error("`${{{inner}}}}}`: a default cannot hold another `${{...}}` (nesting is not supported); write the default literally or set {name}")]
    Nested { inner: String, name: String },
    /// `${...}` whose name is empty or not `[A-Za-z0-9_]`.
    #[error("`${{{inner}}}` is not a valid variable reference")]
    Reference { inner: String },
    /// A variable that is not set and has no default.
    #[error("environment variable {name} is not set; set it or write `${{{name}:-default}}`")]
    Unset { name: String },
}

/// Parses a humantime duration such as `30s`, `1m 30s`, `250ms`.
///
/// Errors: a message quoting the input and showing the accepted form.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    humantime::parse_duration(s.trim()).map_err(|e| ValueError::Duration {
        text: s.to_string(),
        why: e.to_string(),
    })
}

/// The longest timeout or wait a scenario may set (a day): every deadline is `now + timeout`,
/// which overflows a clock for durations near `u64::MAX` seconds, and no CI run waits longer.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(24 * 60 * 60);

/// Parses a timeout or wait (`30s`, `10m`): more than 0 and at most [`MAX_TIMEOUT`].
///
/// Errors: not a duration, zero, or longer than [`MAX_TIMEOUT`] (the message quotes the value
/// and the maximum; the caller puts the key before it).
pub fn parse_timeout(s: &str) -> Result<Duration, ValueError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(ValueError::DurationZero {
            text: s.to_string(),
        });
    }
    if d > MAX_TIMEOUT {
        return Err(ValueError::DurationTooLong {
            text: s.to_string(),
            max: MAX_TIMEOUT,
        });
    }
    Ok(d)
}

/// [`parse_timeout`] of `v`, or `default` when it is not given.
pub fn timeout_or(v: &Option<String>, default: Duration) -> Result<Duration, ValueError> {
    v.as_deref().map_or(Ok(default), parse_timeout)
}

/// Parses a relative tolerance: `5%` -> 0.05, `0.05` -> 0.05. Must be in [0, 10]. A bare number
/// above 1 (`warn: 5`) is an error: it almost always means a percentage, not 500 %.
pub fn parse_fraction(v: &RawNumber) -> Result<f64, ValueError> {
    let x = match v {
        RawNumber::Num(x) if *x > 1.0 => return Err(ValueError::BarePercent { x: *x }),
        RawNumber::Num(x) => *x,
        RawNumber::Text(t) => {
            let t = t.trim();
            match t.strip_suffix('%') {
                Some(p) => p.trim().parse::<f64>().map(|x| x / 100.0).map_err(|_| {
                    ValueError::Percentage {
                        text: t.to_string(),
                    }
                })?,
                None => t.parse::<f64>().map_err(|_| ValueError::Fraction {
                    text: t.to_string(),
                })?,
            }
        }
    };
    if !x.is_finite() || !(0.0..=10.0).contains(&x) {
        return Err(ValueError::ShareRange { x });
    }
    Ok(x)
}

/// Parses an absolute amount of time in milliseconds: `20ms`, `1.5ms`, `2s`, or a bare number (ms).
pub fn parse_ms(v: &RawNumber) -> Result<f64, ValueError> {
    let x = match v {
        RawNumber::Num(x) => *x,
        RawNumber::Text(t) => {
            let t = t.trim();
            let (num, scale) = if let Some(n) = t.strip_suffix("ms") {
                (n, 1.0)
            } else if let Some(n) = t.strip_suffix("us") {
                (n, 0.001)
            } else if let Some(n) = t.strip_suffix('s') {
                (n, 1000.0)
            } else {
                (t, 1.0)
            };
            num.trim()
                .parse::<f64>()
                .map(|x| x * scale)
                .map_err(|_| ValueError::Time {
                    text: t.to_string(),
                })?
        }
    };
    if !x.is_finite() || x < 0.0 {
        return Err(ValueError::TimeRange { x });
    }
    Ok(x)
}

/// Expands `${VAR}` and `${VAR:-default}` using `lookup`. `$$` is a literal `$`.
///
/// Errors: the name of the first variable that is unset (and has no default), or a malformed
/// reference.
pub fn expand_env(s: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<String, ValueError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(pos) = rest.find('$') {
        out.push_str(&rest[..pos]);
        let after = &rest[pos + 1..];
        if let Some(stripped) = after.strip_prefix('$') {
            out.push('$');
            rest = stripped;
        } else if let Some(body) = after.strip_prefix('{') {
            let end = body.find('}').ok_or_else(|| ValueError::Unclosed {
                text: s.to_string(),
            })?;
            let inner = &body[..end];
            let (name, default) = match inner.find(":-") {
                Some(i) => (&inner[..i], Some(&inner[i + 2..])),
                None => (inner, None),
            };
            // `${A:-${B}}` would read as the default `${B` and a stray `}`: refuse it.
            if default.is_some_and(|d| d.contains("${")) {
                return Err(ValueError::Nested {
                    inner: inner.to_string(),
                    name: name.to_string(),
                });
            }
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(ValueError::Reference {
                    inner: inner.to_string(),
                });
            }
            match (lookup(name), default) {
                (Some(v), _) if !v.is_empty() || default.is_none() => out.push_str(&v),
                (_, Some(d)) => out.push_str(d),
                (None, None) => {
                    return Err(ValueError::Unset {
                        name: name.to_string(),
                    })
                }
                (Some(v), None) => out.push_str(&v),
            }
            rest = &body[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    Ok(out)
}

/// `url` with its userinfo (`user:password@`, literal or from `${ENV}`) replaced by
/// `<redacted>@`, so credentials in a base_url are never printed or stored.
pub fn mask_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://").map(|i| i + 3) else {
        return url.to_string();
    };
    let authority_end = url[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |j| scheme_end + j);
    match url[scheme_end..authority_end].rfind('@') {
        Some(at) => format!(
            "{}<redacted>{}",
            &url[..scheme_end],
            &url[scheme_end + at..]
        ),
        None => url.to_string(),
    }
}

/// The password of a URL's userinfo, when there is one (a secret to redact wherever it shows).
pub fn userinfo_password(url: &str) -> Option<String> {
    let scheme_end = url.find("://")? + 3;
    let authority_end = url[scheme_end..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |j| scheme_end + j);
    let authority = &url[scheme_end..authority_end];
    let userinfo = &authority[..authority.rfind('@')?];
    let pw = userinfo.split_once(':').map_or(userinfo, |(_, p)| p);
    (!pw.is_empty()).then(|| pw.to_string())
}

/// The values of `${VAR}` references in a URL template that sit in its query string or its
/// userinfo (`user:${PASS}@host`): places where keys go. They must be redacted wherever the URL
/// is shown.
pub fn url_secret_values(template: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Vec<String> {
    let query_at = template.find('?');
    let authority_end = template
        .find("://")
        .map(|i| i + 3)
        .and_then(|start| template[start..].find('/').map(|j| start + j))
        .unwrap_or(template.len());
    let at_sign = template[..authority_end].rfind('@');
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(i) = template[rest..].find("${") {
        let pos = rest + i;
        let Some(end) = template[pos..].find('}') else {
            break;
        };
        let inner = &template[pos + 2..pos + end];
        let name = inner.split(":-").next().unwrap_or("");
        let in_query = query_at.is_some_and(|q| pos > q);
        let in_userinfo = at_sign.is_some_and(|a| pos < a);
        if in_query || in_userinfo {
            if let Some(v) = lookup(name).filter(|v| !v.is_empty()) {
                out.push(v);
            }
        }
        rest = pos + end + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "HOST" => Some("example.test".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_and_defaults() {
        assert_eq!(
            expand_env("https://${HOST}/v1", &env).unwrap(),
            "https://example.test/v1"
        );
        assert_eq!(
            expand_env("${NOPE:-x}-${HOST}", &env).unwrap(),
            "x-example.test"
        );
        assert_eq!(expand_env("${EMPTY:-d}", &env).unwrap(), "d");
        assert_eq!(expand_env("a$$b$c", &env).unwrap(), "a$b$c");
        let e = expand_env("${NOPE}", &env).unwrap_err().to_string();
        assert!(e.contains("NOPE is not set"), "{e}");
        assert!(expand_env("${HOST", &env)
            .unwrap_err()
            .to_string()
            .contains("unclosed"));
        assert!(expand_env("${A B}", &env).is_err());
    }

    #[test]
    fn nested_defaults_are_refused_and_userinfo_is_masked() {
        // before: `${NOPE:-${HOST}}` silently became the literal `${HOST}`
        let e = expand_env("https://${NOPE:-${HOST}}/v1", &env)
            .unwrap_err()
            .to_string();
        assert!(e.contains("nesting is not supported"), "{e}");
        assert_eq!(
            mask_userinfo("https://user:pw@example.test:8443/v1?x=a@b"),
            "https://<redacted>@example.test:8443/v1?x=a@b"
        );
        assert_eq!(
            mask_userinfo("http://127.0.0.1:8000/v1"),
            "http://127.0.0.1:8000/v1"
        );
        assert_eq!(
            userinfo_password("https://user:s3cret@h/v1").as_deref(),
            Some("s3cret")
        );
        assert_eq!(userinfo_password("https://h/v1?u=a@b"), None);
    }

    #[test]
    fn url_secrets_are_the_query_and_userinfo_values() {
        let env = |n: &str| Some(format!("v-{n}"));
        assert_eq!(
            url_secret_values("https://${HOST}/v1?key=${KEY}&x=1", &env),
            vec!["v-KEY".to_string()]
        );
        assert_eq!(
            url_secret_values("https://u:${PASS}@${HOST}/v1", &env),
            vec!["v-PASS".to_string()]
        );
        assert!(url_secret_values("https://${HOST}:${PORT}/v1", &env).is_empty());
    }

    #[test]
    fn parses_fractions_and_times() {
        assert_eq!(parse_fraction(&RawNumber::Text("5%".into())).unwrap(), 0.05);
        assert_eq!(parse_fraction(&RawNumber::Num(0.1)).unwrap(), 0.1);
        assert!(parse_fraction(&RawNumber::Text("five".into())).is_err());
        assert!(parse_fraction(&RawNumber::Num(-0.1)).is_err());
        let e = parse_fraction(&RawNumber::Num(5.0))
            .unwrap_err()
            .to_string();
        assert!(e.contains("would mean 500%") && e.contains("`5%`"), "{e}");
        assert_eq!(
            parse_fraction(&RawNumber::Text("150%".into())).unwrap(),
            1.5
        );
        // Issue 26: numbers in messages are bounded (`{}` of 1e300 is 301 digits).
        let e = parse_fraction(&RawNumber::Num(1e300))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "`1e300` would mean 1e302%: write a percentage like `1e300%`, or a fraction like `1e298`"
        );
        let e = parse_fraction(&RawNumber::Text("1e300%".into()))
            .unwrap_err()
            .to_string();
        assert_eq!(e, "1e298 is out of range: use a share between 0% and 1000%");
        let e = parse_ms(&RawNumber::Num(-1e300)).unwrap_err().to_string();
        assert_eq!(
            e,
            "-1e300 is not a valid time: it must be a finite number of ms >= 0"
        );
        assert_eq!(parse_ms(&RawNumber::Text("20ms".into())).unwrap(), 20.0);
        assert_eq!(parse_ms(&RawNumber::Text("2s".into())).unwrap(), 2000.0);
        assert_eq!(parse_ms(&RawNumber::Num(3.5)).unwrap(), 3.5);
        assert!(parse_ms(&RawNumber::Text("-1ms".into())).is_err());
        assert_eq!(parse_duration("250ms").unwrap(), Duration::from_millis(250));
        assert!(parse_duration("soon")
            .unwrap_err()
            .to_string()
            .contains("`soon`"));
    }

    #[test]
    fn timeouts_are_bounded() {
        assert_eq!(parse_timeout("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse_timeout("24h").unwrap(), MAX_TIMEOUT);
        assert_eq!(
            parse_timeout("18446744073709551615s")
                .unwrap_err()
                .to_string(),
            "`18446744073709551615s` is longer than the maximum 1day"
        );
        assert_eq!(
            parse_timeout("0s").unwrap_err().to_string(),
            "`0s` must be more than 0"
        );
    }
}
