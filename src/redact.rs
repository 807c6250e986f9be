//! Secret redaction for every text perfgate writes that may carry server or user input.
//!
//! A server may echo the API key (or any `${ENV}` value sent in a header or URL) in an error
//! body, a header or a stream field. [`redact`] replaces each full occurrence with `<redacted>`,
//! and also a trailing fragment of at least [`MIN_FRAGMENT`] characters that starts a secret and
//! is cut by the end of the text or a `…` (text clipped for display). Pure function.

/// Shortest secret prefix treated as a leaked fragment, characters.
pub const MIN_FRAGMENT: usize = 6;

/// Replaces every secret (and a clipped leading fragment of one) in `text` with `<redacted>`.
/// Secrets shorter than 4 characters are ignored (they would redact ordinary words).
pub fn redact(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| s.chars().count() >= 4) {
        out = out.replace(s.as_str(), "<redacted>");
        // A fragment cut short: `...sk-abcd…` or at the very end of the text.
        let chars: Vec<char> = s.chars().collect();
        for k in (MIN_FRAGMENT..chars.len()).rev() {
            let frag: String = chars[..k].iter().collect();
            for tail in ["…", ""] {
                let pat = format!("{frag}{tail}");
                if tail.is_empty() {
                    if out.ends_with(&pat) {
                        let cut = out.len() - pat.len();
                        out = format!("{}<redacted>", &out[..cut]);
                    }
                } else if out.contains(&pat) {
                    out = out.replace(&pat, "<redacted>…");
                }
            }
        }
    }
    out
}

/// Redacts secrets inside a JSON value's strings (and keys), e.g. server `timings`.
pub fn redact_json(v: &serde_json::Value, secrets: &[String]) -> serde_json::Value {
    use serde_json::Value;
    if secrets.is_empty() {
        return v.clone();
    }
    match v {
        Value::String(s) => Value::String(redact(s, secrets)),
        Value::Array(a) => Value::Array(a.iter().map(|x| redact_json(x, secrets)).collect()),
        Value::Object(o) => Value::Object(
            o.iter()
                .map(|(k, x)| (redact(k, secrets), redact_json(x, secrets)))
                .collect(),
        ),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const KEY: &str = "sk-CANARYabcdefghijklmnop";

    #[test]
    fn full_and_clipped_secrets_are_removed() {
        let s = vec![KEY.to_string()];
        assert_eq!(
            redact(&format!("bad key {KEY}."), &s),
            "bad key <redacted>."
        );
        assert_eq!(redact("bad key sk-CANARYabc…", &s), "bad key <redacted>…");
        assert_eq!(redact("ends with sk-CANA", &s), "ends with <redacted>");
        assert_eq!(
            redact("sk-CA is too short to be a fragment", &s),
            "sk-CA is too short to be a fragment"
        );
        assert_eq!(redact("abc", &["ab".to_string()]), "abc");
    }

    proptest! {
        /// Wherever the text is clipped, no 6-character piece of the key's start survives.
        #[test]
        fn clipping_never_leaks_a_prefix(pre in "[a-z ]{0,40}", cut in 0usize..40) {
            let full = format!("{pre}{KEY} tail");
            let clipped: String = full.chars().take(cut + pre.len()).collect::<String>() + "…";
            let r = redact(&clipped, &[KEY.to_string()]);
            prop_assert!(!r.contains("sk-CANARY"), "{}", r);
        }
    }
}
