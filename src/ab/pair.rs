//! The arms of each scenario of an A/B run, paired: the scenario as written with its base and
//! candidate readings, refused (before anything is measured) when nothing sets two arms, when
//! both arms would measure one server, or when the design cannot run it.

use super::{unsupported, AbScenario, DesignChoice};
use crate::config::server::ServerSpec;
use crate::config::{Scenario, Target};

/// Scenarios an A/B run cannot run, each with why and what to do instead; nothing was measured.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error(
    "perfgate ab cannot run as given ({} problem(s); nothing was measured):\n  - {}",
    .0.len(),
    .0.join("\n  - ")
)]
pub struct Refused(pub Vec<String>);

/// The server an arm starts, its log file aside: a `server.log` shared by both arms is renamed
/// per arm (`config::arm::arm_log`), which does not make two arms.
fn started(arm: &Scenario) -> Option<ServerSpec> {
    arm.server.clone().map(|s| ServerSpec {
        log: None,
        key: String::new(),
        ..s
    })
}

/// Whether both arms run on this machine, where their requests in flight at once would slow
/// each other: each arm starts its server (perfgate starts it here), is the built-in simulator,
/// or is a loopback endpoint (`localhost`, 127.0.0.0/8, `[::1]`). Pure.
pub fn one_host(base: &Scenario, cand: &Scenario) -> bool {
    on_this_machine(base) && on_this_machine(cand)
}

fn on_this_machine(arm: &Scenario) -> bool {
    if arm.server.is_some() {
        return true;
    }
    match &arm.endpoint.target {
        Target::Sim(_) => true,
        Target::Http { base_url } => url::Url::parse(base_url).is_ok_and(|u| match u.host() {
            Some(url::Host::Domain(d)) => d.trim_end_matches('.').eq_ignore_ascii_case("localhost"),
            Some(url::Host::Ipv4(a)) => a.is_loopback(),
            Some(url::Host::Ipv6(a)) => a.is_loopback(),
            None => false,
        }),
    }
}

/// Pairs each scenario as `written` with its `base` and `cand` readings (the three lists in the
/// same order); `flags_given` is whether a command-line flag set an arm (`--no-server` sets none).
pub fn pair(
    written: Vec<Scenario>,
    base: Vec<Scenario>,
    cand: Vec<Scenario>,
    flags_given: bool,
    design: DesignChoice,
) -> Result<Vec<AbScenario>, Refused> {
    let mut scs = Vec::with_capacity(written.len());
    let mut refused = Vec::new();
    let place = |s: &Scenario| crate::config::arm::endpoint_place(&s.endpoint.shown_url());
    for ((w, b), c) in written.into_iter().zip(base).zip(cand) {
        // localhost, 127.0.0.1 and [::1] are one endpoint (config::arm::endpoint_place)
        let same_endpoint = place(&b) == place(&c);
        let same_server = started(&b) == started(&c);
        let arms_differ = !same_server || !same_endpoint || b.endpoint.model != c.endpoint.model;
        if !flags_given && !arms_differ {
            refused.push(format!(
                "scenario {}: perfgate ab needs two arms, and nothing sets them: give --base-url and --candidate-url (two endpoints), --base-server-cmd and --candidate-server-cmd (two servers), or server.base and server.candidate in the scenario file (--no-server sets neither arm: it only starts no server)",
                w.name
            ));
            continue;
        }
        // One arm starts a server and the other points at the same endpoint: both arms would
        // measure that one server, an A/A run that reads as an A/B.
        if same_endpoint && b.server.is_some() != c.server.is_some() {
            let (with, without) = if b.server.is_some() {
                ("base", "candidate")
            } else {
                ("candidate", "base")
            };
            refused.push(format!(
                "scenario {}: only the {with} arm starts a server, and both arms are the endpoint {}: the {without} arm would measure the {with} arm's server (an A/A run, not an A/B); give the {without} arm its own server (--{without}-server-cmd, or server.{without} in the scenario file) or its own endpoint (--{without}-url)",
                w.name,
                c.endpoint.shown_url()
            ));
            continue;
        }
        // An arm whose server listens on another port than its URL would wait for, or measure,
        // another server (a port already in use reads as "never ready").
        let mismatched: Vec<String> = [("base", &b), ("candidate", &c)]
            .into_iter()
            .filter_map(|(label, arm)| {
                let srv = arm.server.as_ref()?;
                let url = arm.endpoint.shown_url();
                let (said, at) = crate::config::arm::port_mismatch(&srv.command, &url)?;
                Some(format!(
                    "scenario {}: the {label} arm's server command listens on --port {said}, but the {label} arm measures {url} (port {at}): make them agree (--{label}-url or the command's --port), or, to measure servers you started yourself, pass --no-server",
                    w.name
                ))
            })
            .collect();
        if !mismatched.is_empty() {
            refused.extend(mismatched);
            continue;
        }
        let mut notes = Vec::new();
        if same_endpoint && b.endpoint.model == c.endpoint.model && same_server {
            let shown = if b.endpoint.shown_url() == c.endpoint.shown_url() {
                c.endpoint.shown_url()
            } else {
                format!("{} and {}", b.endpoint.shown_url(), c.endpoint.shown_url())
            };
            notes.push(format!(
                "both arms are the same endpoint ({shown}, model {}) and server: an A/A run, which measures the noise of this setup",
                c.endpoint.model
            ));
        }
        let ab = AbScenario {
            one_host: one_host(&b, &c),
            written: w,
            base: b,
            candidate: c,
            notes,
        };
        match unsupported(&ab, design) {
            Some(why) => refused.push(why),
            None => scs.push(ab),
        }
    }
    if refused.is_empty() {
        Ok(scs)
    } else {
        Err(Refused(refused))
    }
}
