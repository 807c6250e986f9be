//! Measures one scenario end to end: starts the in-process simulator for `sim://` endpoints,
//! runs the scenario, and stops the simulator.

use crate::config::{Scenario, Target};
use crate::runner::{self, RunOutput};
use crate::sim::SimServer;

/// Runs `sc` once and returns what it measured. Errors: the simulator could not start or the
/// client could not be built (the message says which).
pub async fn measure(sc: &Scenario) -> Result<RunOutput, String> {
    match &sc.endpoint.target {
        Target::Http { base_url } => runner::run(sc, base_url).await,
        Target::Sim(cfg) => {
            let sim = SimServer::start(cfg.clone(), 0)
                .await
                .map_err(|e| format!("cannot start the built-in simulator on 127.0.0.1: {e}"))?;
            let out = runner::run(sc, &sim.base_url()).await;
            sim.shutdown();
            out
        }
    }
}
