//! Measures one scenario end to end: starts the in-process simulator for `sim://` endpoints,
//! or the scenario's `server:` (shared with the scenarios that name the same block; stopped by
//! [`crate::server::stop_all`]), or waits for the endpoint (`endpoint.wait_ready`); runs the
//! scenario (in sequential looks when `max_samples` is set), scraping the started server's
//! `/metrics` around the measured requests; and stops the simulator.

use crate::config::{Scenario, Target};
use crate::runner::{RunOutput, Session};
use crate::sim::SimServer;

/// Runs `sc` once with its fixed `samples`. Errors: the simulator could not start or the
/// client could not be built (the message says which).
pub async fn measure(sc: &Scenario) -> Result<RunOutput, String> {
    measure_until(sc, &mut |_| None).await
}

/// Runs `sc`, evaluating after each look of [`crate::config::scenario::LoadSpec::looks`];
/// `decide` returns `Some(reason)` to stop early. The run stops at the last look regardless.
pub async fn measure_until(
    sc: &Scenario,
    decide: &mut dyn FnMut(&RunOutput) -> Option<String>,
) -> Result<RunOutput, String> {
    let (sim, base_url) = match &sc.endpoint.target {
        Target::Sim(cfg) => {
            let s = SimServer::start(cfg.clone(), 0)
                .await
                .map_err(|e| format!("cannot start the built-in simulator on 127.0.0.1: {e}"))?;
            let url = s.base_url();
            (Some(s), url)
        }
        Target::Http { base_url } => (None, base_url.clone()),
    };
    let mut server_side = None;
    let models = crate::config::server::models_url(&base_url);
    if let Some(spec) = &sc.server {
        let probe = crate::client::http::StreamClient::new(&sc.endpoint, &base_url, 1)?;
        server_side = Some(crate::server::ensure(spec, &probe, &models).await?);
    } else if let Some(limit) = sc.endpoint.wait_ready {
        let probe = crate::client::http::StreamClient::new(&sc.endpoint, &base_url, 1)?;
        server_side = Some(crate::server::wait_endpoint(&probe, &models, limit).await?);
    }
    let result = async {
        let mut session = Session::start(sc, &base_url).await?;
        let probe = match &sc.server {
            Some(_) => Some(crate::client::http::StreamClient::new(
                &sc.endpoint,
                &base_url,
                1,
            )?),
            None => None,
        };
        let before = match (&sc.server, &probe) {
            (Some(spec), Some(c)) => crate::server::scrape(spec, c).await,
            _ => None,
        };
        let looks = sc.load.looks();
        let mut done = Vec::new();
        let mut stop_reason = None;
        for (i, &n) in looks.iter().enumerate() {
            session
                .measure(n.saturating_sub(session.measured_count()))
                .await;
            done.push(n);
            if session.is_unreachable() {
                break;
            }
            if looks.len() > 1 {
                let mut out = session.output();
                out.looks = done.clone();
                if let Some(why) = decide(&out) {
                    stop_reason = Some(format!(
                        "stopped at look {} of {} (n = {n}): {why}",
                        i + 1,
                        looks.len()
                    ));
                    break;
                }
                if i + 1 == looks.len() {
                    stop_reason = Some(format!(
                        "reached max_samples ({n}) with checks still undecided"
                    ));
                }
            }
        }
        let mut out = session.output();
        out.looks = done;
        out.stop_reason = stop_reason;
        if let (Some(spec), Some(c), Some(rep)) = (&sc.server, &probe, server_side.as_mut()) {
            if let (Some(b), Some(a)) = (before, crate::server::scrape(spec, c).await) {
                rep.metrics = crate::server::metrics::figures(&b, &a);
            }
            if let Some((status, why)) = crate::server::exited_during(spec, &sc.name).await {
                rep.exit = Some(status);
                out.unreachable = Some(why);
            }
        }
        out.server_side = server_side;
        Ok(out)
    }
    .await;
    if let Some(s) = sim {
        s.shutdown();
    }
    result
}
