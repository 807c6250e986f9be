//! An HTTP `endpoint.base_url` normalised the OpenAI SDK's way (the base with its version
//! segment; perfgate appends the API route), with warnings for what was most likely pasted.

use crate::api::Api;
use crate::config::common::{bail, ensure, Invalid};

/// Normalises an HTTP base URL (OpenAI-SDK convention, tests/cases/35-base-url-joining.yaml): the base includes
/// the version segment and perfgate appends the API route. Trailing slashes are removed, a
/// doubled `/v1/v1` is collapsed, and a pasted full URL ending in `api`'s own route is cut back
/// to its base; a route of another API is an error. No `/v1` is ever inserted: a URL without a
/// path gets a warning. Query strings are kept.
///
/// Returns the normalised URL and warnings for the user.
pub fn normalise_base_url(raw: &str, api: Api) -> Result<(String, Vec<String>), Invalid> {
    let mut url = url::Url::parse(raw).map_err(|e| {
        format!("base_url `{raw}` is not a URL ({e}); write it like `http://127.0.0.1:8000/v1`")
    })?;
    let s = url.scheme();
    ensure!(
        matches!(s, "http" | "https"),
        "base_url `{raw}` has scheme `{s}`: use http://, https:// or sim:// (the built-in simulator)"
    );
    ensure!(url.host_str().is_some(), "base_url `{raw}` has no host");
    let mut warnings = Vec::new();
    let mut path = url.path().trim_end_matches('/').to_string();
    for route in Api::ALL.map(Api::path) {
        if path.ends_with(route) {
            let base = path[..path.len() - route.len()].to_string();
            if route != api.path() {
                let mut b = url.clone();
                b.set_path(&base);
                bail!(
                    "base_url `{raw}` ends with the route `{route}`, but api is {api} (route `{}`): write the base only (`{}`)",
                    api.path(),
                    b.as_str().trim_end_matches('/')
                );
            }
            warnings.push(format!(
                "base_url ends with the API route `{route}`; perfgate uses it as given (the base is `{}`)",
                if base.is_empty() { "/" } else { &base }
            ));
            path = base;
            break;
        }
    }
    while path.contains("/v1/v1") {
        path = path.replace("/v1/v1", "/v1");
    }
    if path.is_empty() {
        warnings.push(format!(
            "base_url `{raw}` has no path, so requests go to `{}`; most OpenAI-compatible servers expect `/v1` at the end",
            api.path()
        ));
    }
    let tracking: Vec<String> = url
        .query_pairs()
        .map(|(k, _)| k.into_owned())
        .filter(|k| is_tracking_param(k))
        .collect();
    if !tracking.is_empty() {
        warnings.push(format!(
            "base_url carries tracking parameter{} `{}` (copied from a link?): they are sent with every request and change the scenario fingerprint; remove them",
            if tracking.len() == 1 { "" } else { "s" },
            tracking.join("`, `")
        ));
    }
    url.set_path(&path);
    let mut out = url.to_string();
    if path.is_empty() && url.query().is_none() {
        out = out.trim_end_matches('/').to_string();
    }
    Ok((out, warnings))
}

/// A well-known marketing/click tracking query parameter (`utm_*`, `gclid`, `fbclid`, ...):
/// never part of an API's URL, so a base_url carrying one was most likely pasted from a link.
fn is_tracking_param(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    k.starts_with("utm_")
        || [
            "gclid", "gbraid", "wbraid", "dclid", "fbclid", "msclkid", "yclid", "twclid", "igshid",
            "mc_cid", "mc_eid", "_ga", "_gl",
        ]
        .contains(&k.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_urls_are_normalised() {
        let n = |u: &str| normalise_base_url(u, Api::OpenaiChat);
        assert_eq!(
            n("http://127.0.0.1:8000/v1/").unwrap().0,
            "http://127.0.0.1:8000/v1"
        );
        assert_eq!(n("http://h:8000/v1//").unwrap().0, "http://h:8000/v1");
        assert_eq!(n("http://h/v1/v1").unwrap().0, "http://h/v1");
        assert_eq!(
            n("https://h/openai/v1?api-version=1").unwrap().0,
            "https://h/openai/v1?api-version=1"
        );
        assert_eq!(
            n("https://h/api/paas/v4").unwrap().0,
            "https://h/api/paas/v4"
        );
        // no /v1 inserted, with a warning
        let (u, w) = n("http://h:8000").unwrap();
        assert_eq!(u, "http://h:8000");
        assert!(w[0].contains("expect `/v1`"), "{w:?}");
        // a pasted full URL is cut back to its base, with a note
        let (u, w) = n("http://h:8000/v1/chat/completions").unwrap();
        assert_eq!(u, "http://h:8000/v1");
        assert_eq!(w.len(), 1);
        // ...but the route of another API is an error
        let e =
            normalise_base_url("http://h/v1/chat/completions", Api::AnthropicMessages).unwrap_err();
        assert!(e.to_string().contains("`http://h/v1`"), "{e}");
        // the Responses API's route too (it was appended again: .../responses/responses)
        let (u, w) = normalise_base_url("http://h/v1/responses", Api::OpenaiResponses).unwrap();
        assert_eq!((u.as_str(), w.len()), ("http://h/v1", 1));
        let e = n("http://h/v1/responses").unwrap_err();
        assert!(e.to_string().contains("api is openai-chat"), "{e}");
        assert!(n("ftp://h").is_err());
        assert!(n("not a url").is_err());
    }

    #[test]
    fn tracking_parameters_are_flagged() {
        let n = |u: &str| normalise_base_url(u, Api::OpenaiChat).unwrap();
        let (u, w) = n("https://h/v1?utm_source=x&api-version=1&UTM_Campaign=y&gclid=z");
        // kept as given (the query belongs to the user), but flagged once, naming each key
        assert_eq!(
            u,
            "https://h/v1?utm_source=x&api-version=1&UTM_Campaign=y&gclid=z"
        );
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].contains("tracking parameters `utm_source`, `UTM_Campaign`, `gclid`"),
            "{w:?}"
        );
        assert!(!w[0].contains("api-version"), "{w:?}");
        for key in ["utm_medium", "utm_term", "utm_content", "fbclid", "msclkid"] {
            let (_, w) = n(&format!("http://h:8000/v1?{key}=1"));
            assert!(
                w.len() == 1 && w[0].contains(&format!("tracking parameter `{key}`")),
                "{key}: {w:?}"
            );
        }
        // ordinary query parameters are not tracking
        for u in [
            "https://h/openai/v1?api-version=2024-10-21",
            "http://h/v1?utmost=1&source=x",
        ] {
            assert!(n(u).1.is_empty(), "{u}");
        }
    }
}
