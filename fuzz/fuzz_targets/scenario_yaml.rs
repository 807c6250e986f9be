//! Scenario YAML parsing and validation on arbitrary UTF-8: `perfgate::config::parse_str` must
//! return Ok or a ConfigError, never panic (nor overflow: run with debug assertions, `-a`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // Some variables set (names of even length), some not, so ${ENV} expansion takes both paths.
    let env = |name: &str| (name.len() % 2 == 0).then(|| format!("v{}", name.len()));
    if let Err(e) = perfgate::config::parse_str(text, "fuzz.yaml", &env) {
        let _ = e.to_string();
    }
});
