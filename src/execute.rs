//! Measures one scenario end to end: starts the in-process simulator for `sim://` endpoints,
//! or the scenario's `server:` (shared with the scenarios that name the same block; stopped by
//! [`crate::server::stop_all`]), or waits for the endpoint (`endpoint.wait_ready`); runs the
//! scenario (in sequential looks when `max_samples` is set), scraping the started server's
//! `/metrics` around the measured requests; and stops the simulator.

use crate::config::{Scenario, Target};
use crate::runner::{Progress, RunOutput, Session};
use crate::sim::SimServer;
use std::sync::Arc;

/// Why a scenario could not be measured at all (request failures are recorded, not errors):
/// the message becomes the scenario's `status_detail` (status `unmeasurable`, exit 3).
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// The built-in simulator (`sim://`) could not start.
    #[error("cannot start the built-in simulator on 127.0.0.1: {0}")]
    Sim(#[source] std::io::Error),
    /// The HTTP client could not be built.
    #[error(transparent)]
    Client(#[from] crate::client::http::ClientError),
    /// The scenario's `server:` could not start or get ready, or `endpoint.wait_ready` ran out.
    #[error(transparent)]
    Server(#[from] crate::server::ServerError),
    /// Not measured: perfgate was interrupted before it started.
    #[error("not measured: interrupted")]
    Interrupted,
    /// `perfgate ab --design blocked`: an arm could not start for block `block` of `of`.
    #[error("block {block} of {of}: {source}")]
    InBlock {
        block: usize,
        of: usize,
        #[source]
        source: Box<MeasureError>,
    },
    /// Not measured because the other arm of `perfgate ab` could not start (`arm`: which).
    #[error("not measured: the {arm} arm could not start")]
    OtherArm { arm: &'static str },
}

/// Runs `sc` once with its fixed `samples`, reporting its requests to `progress` when given.
/// Errors: the simulator or the server could not start, the endpoint was not ready, or the
/// client could not be built ([`MeasureError`]).
pub async fn measure(
    sc: &Scenario,
    progress: Option<Arc<dyn Progress>>,
) -> Result<RunOutput, MeasureError> {
    measure_until(sc, progress, &mut |_| None).await
}

/// The endpoint of one measurement, ready to be measured: the simulator started for `sim://`,
/// the scenario's `server:` started (or shared), or `endpoint.wait_ready` waited for.
pub struct Opened {
    sim: Option<SimServer>,
    /// The URL requests go to (the simulator's own for `sim://`).
    pub base_url: String,
    server_side: Option<crate::server::ServerReport>,
    /// A client for the `/metrics` scrapes of a started server (or, in `perfgate ab`, of an
    /// endpoint it did not start: [`Opened::ask_endpoint`]).
    probe: Option<crate::client::http::StreamClient>,
    /// The `/metrics` URL those scrapes read.
    metrics_url: Option<String>,
    before: Option<crate::server::metrics::Scrape>,
}

/// Opens the endpoint of `sc` (see [`Opened`]); `others` says what happens to a server of
/// another `server:` block that is already running (`check`: stopped, one server at a time).
///
/// Errors: the simulator or the server could not start, or the endpoint was not ready (the
/// message says which).
pub async fn open(sc: &Scenario, others: crate::server::Others) -> Result<Opened, MeasureError> {
    let (sim, base_url) = match &sc.endpoint.target {
        Target::Sim(cfg) => {
            let s = SimServer::start(cfg.clone(), 0)
                .await
                .map_err(MeasureError::Sim)?;
            let url = s.base_url();
            (Some(s), url)
        }
        Target::Http { base_url } => (None, base_url.clone()),
    };
    let mut server_side = None;
    let models = crate::config::server::models_url(&base_url);
    let ready = async {
        if let Some(spec) = &sc.server {
            let probe = crate::client::http::StreamClient::new(&sc.endpoint, &base_url, 1)?;
            server_side = Some(crate::server::ensure_with(spec, &probe, &models, others).await?);
        } else if let Some(limit) = sc.endpoint.wait_ready {
            let probe = crate::client::http::StreamClient::new(&sc.endpoint, &base_url, 1)?;
            server_side = Some(crate::server::wait_endpoint(&probe, &models, limit).await?);
        }
        let probe = match &sc.server {
            Some(_) => Some(crate::client::http::StreamClient::new(
                &sc.endpoint,
                &base_url,
                1,
            )?),
            None => None,
        };
        Ok::<_, MeasureError>(probe)
    }
    .await;
    match ready {
        Ok(probe) => Ok(Opened {
            sim,
            base_url,
            server_side,
            probe,
            metrics_url: sc.server.as_ref().and_then(|s| s.metrics_url.clone()),
            before: None,
        }),
        Err(e) => {
            if let Some(s) = sim {
                s.shutdown();
            }
            Err(e)
        }
    }
}

impl Opened {
    /// `perfgate ab`: an HTTP endpoint perfgate did not start (`--no-server`, two URLs) is asked
    /// who it is (`/props`, `/version`, ... as a started server is, [`crate::server::identity`])
    /// and its `<origin>/metrics` is scraped around the measured requests, so the arms' identity
    /// difference and "where the time went" are said for it too. Best effort and bounded (each
    /// probe 5 s, each scrape 10 s): an endpoint that answers none of them is measured as before.
    pub async fn ask_endpoint(&mut self, sc: &Scenario) {
        let Target::Http { base_url } = &sc.endpoint.target else {
            return;
        };
        if sc.server.is_some() {
            return;
        }
        let Some(origin) = crate::config::server::origin_of(base_url) else {
            return;
        };
        let Ok(client) = crate::client::http::StreamClient::new(&sc.endpoint, base_url, 1) else {
            return;
        };
        let models = crate::config::server::models_url(base_url);
        let identity =
            crate::server::identity::probe(&client, &origin, &models, &sc.endpoint.secrets()).await;
        let rep = self
            .server_side
            .get_or_insert_with(crate::server::ServerReport::not_started);
        rep.identity = identity;
        self.metrics_url = Some(format!("{origin}/metrics"));
        self.probe = Some(client);
    }

    /// Scrapes the server's `/metrics` before the measured requests (after the warmup): a
    /// started server's, or an endpoint's that [`Opened::ask_endpoint`] asked.
    pub async fn scrape_before(&mut self) {
        if let (Some(url), Some(c)) = (&self.metrics_url, &self.probe) {
            self.before = crate::server::scrape(url, c).await;
        }
    }

    /// After the measured requests: the server-side figures since [`Opened::scrape_before`],
    /// whether the server exited meanwhile (then `out` is unreachable), the server report into
    /// `out`; stops the simulator.
    pub async fn close(mut self, sc: &Scenario, out: &mut RunOutput) {
        self.scrape_after(sc, out).await;
        self.finish(out);
    }

    /// The server-side figures since [`Opened::scrape_before`] and whether the server exited
    /// meanwhile (then `out` is unreachable), before anything else is sent.
    async fn scrape_after(&mut self, sc: &Scenario, out: &mut RunOutput) {
        if let (Some(url), Some(c), Some(rep)) =
            (&self.metrics_url, &self.probe, self.server_side.as_mut())
        {
            if let (Some(b), Some(a)) = (self.before.take(), crate::server::scrape(url, c).await) {
                let f = crate::server::metrics::figures(&b, &a);
                rep.metrics = f.values;
                out.metrics_dropped = f.dropped;
            }
        }
        if let (Some(spec), Some(rep)) = (&sc.server, self.server_side.as_mut()) {
            if let Some((status, why)) = crate::server::exited_during(spec, &sc.name).await {
                rep.exit = Some(status);
                out.unreachable = Some(why);
            }
        }
    }

    /// The server report into `out`; stops the simulator.
    fn finish(mut self, out: &mut RunOutput) {
        out.server_side = self.server_side.take();
        if let Some(rep) = out.server_side.as_mut().filter(|r| r.started_here) {
            rep.first_ttft_ms = crate::server::start::first_ttft(&out.warmup_records, &out.records)
                .map(crate::units::round3);
        }
        self.shutdown();
    }

    /// Stops the simulator, if one was started (a started server stays for the scenarios that
    /// share it; [`crate::server::stop_all`] stops it).
    pub fn shutdown(self) {
        if let Some(s) = self.sim {
            s.shutdown();
        }
    }
}

/// Runs `sc`, evaluating after each look of [`crate::config::scenario::LoadSpec::looks`];
/// `decide` returns `Some(reason)` to stop early. The run stops at the last look regardless.
/// Its requests are reported to `progress` when given.
pub async fn measure_until(
    sc: &Scenario,
    progress: Option<Arc<dyn Progress>>,
    decide: &mut dyn FnMut(&RunOutput) -> Option<String>,
) -> Result<RunOutput, MeasureError> {
    if sc.gate.cold_start.is_some() && sc.server.is_some() {
        // every run of a gated cold start is a start of its own (bless's runs, a check, each
        // gate.confirm re-run): not the process an earlier run or scenario left running
        crate::server::stop_all().await;
    }
    let mut opened = open(sc, crate::server::Others::Stop).await?;
    let session = Session::start_with(sc, &opened.base_url, progress).await;
    let mut session = match session {
        Ok(s) => s,
        Err(e) => {
            opened.shutdown();
            return Err(e.into());
        }
    };
    opened.scrape_before().await;
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
    // a conversation's cold reference: after the server-side figures of the measured requests
    // (its cold requests would lower the server's own hit rate), before the server stops
    opened.scrape_after(sc, &mut out).await;
    if out.unreachable.is_none() {
        session.cache_reference().await;
        out.cache_reference = session.reference().to_vec();
    }
    opened.finish(&mut out);
    Ok(out)
}
