//! `perfgate validate`: scenario files checked offline (keys, values, env vars), one line per
//! scenario.

use crate::config::args::{load_scenarios, ScenarioArgs};
use crate::exit::{self, Error};

/// Runs `perfgate validate`: prints each selected scenario (and its warnings), or the error of
/// the first file that does not read.
pub fn cmd_validate(a: ScenarioArgs) -> Result<i32, Error> {
    let scs = load_scenarios(&a)?;
    for s in &scs {
        for w in s.warnings() {
            eprintln!("perfgate: {}: warning: {w}", s.source);
        }
        println!(
            "ok  {:<24} {}  {} {} model {}, max_tokens {}, concurrency {}, samples {}",
            s.name,
            s.source,
            s.endpoint.api.as_str(),
            s.endpoint.shown_url(),
            s.endpoint.model,
            s.request.max_tokens,
            s.load.concurrency,
            s.load.samples
        );
        if let Some(ps) = &s.request.prompt_set {
            println!("    {}", ps.describe());
        }
        if let Some(g) = &s.request.generate {
            println!("    {}", g.describe());
        }
        if let Some(c) = &s.request.conversation {
            println!(
                "    conversations of {}; {} conversation(s) measured, cold reference of {} request pair(s)",
                c.describe(s.request.system.is_some()),
                s.load.samples / c.turns,
                c.reference.min(s.load.samples)
            );
        }
        if let Some(t) = &s.load.trace {
            println!(
                "    {}; mean rate {:.2} requests/s",
                t.describe(),
                s.load.rate.unwrap_or(0.0)
            );
        }
    }
    println!("{} scenario(s) valid", scs.len());
    Ok(exit::OK)
}
