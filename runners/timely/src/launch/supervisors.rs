//! The supervising sides of an engine job: a local cluster's supervisor, a
//! coordinator across hosts, and a host's agent.

use super::{
    cluster_secret, invalid, parse_positive, restart_strategy, stderr_is_terminal, summary,
    EngineRunner, DEFAULT_WATCHDOG,
};
use crate::{cluster, Clock};
use std::time::Duration;
use tidewater::runner::PipelineResult;
use tidewater::{plan::Plan, Error, PipelineOptions, Result};

impl EngineRunner {
    /// Launches `n` processes of this binary on loopback and supervises them.
    pub(super) fn local_cluster(
        &self,
        n: usize,
        plan: &Plan,
        options: &PipelineOptions,
    ) -> Result<PipelineResult> {
        let e = &options.engine;
        if n < 1 || e.processes > 1 {
            return Err(invalid(
                format!("--local-cluster {n}"),
                "give the number of processes (at least 1), without --processes".into(),
            ));
        }
        // Bad options are refused here, once, rather than by every process.
        let config = self.config(options, Clock::Wall)?;
        let _logs = tracing::info_span!("local_cluster", processes = n).entered();
        let program = std::env::current_exe()
            .map_err(|err| Error::Internal(format!("cannot find this binary to launch: {err}")))?;
        let args = match &e.child_args {
            Some(a) => a.clone(),
            None => cluster::args_for_children(std::env::args().skip(1)),
        };
        // The supervisor serves the status of the job, across its restarts.
        let status = supervised_status(self.name, n, plan, &config, options)?;
        let watchdog = match options.runner_option("watchdog_ms") {
            None => (config.epoch_interval * 10).max(DEFAULT_WATCHDOG),
            Some(v) => Duration::from_millis(parse_positive("watchdog_ms", v)? as u64),
        };
        let result = cluster::Supervisor {
            processes: n,
            program,
            args,
            supervision: cluster::Supervision {
                checkpoint_dir: config.checkpoint_dir,
                restart: restart_strategy(options)?,
                watchdog,
                status: status.as_ref().map(|(s, _)| s.clone()),
            },
        }
        .run();
        self.ended(result, status, e.status_linger)
    }

    /// Coordinates the job across the hosts whose agents register at `address`
    /// ([`crate::agents`]).
    pub(super) fn coordinate(
        &self,
        address: &str,
        plan: &Plan,
        options: &PipelineOptions,
    ) -> Result<PipelineResult> {
        let e = &options.engine;
        let config = self.config(options, Clock::Wall)?;
        let _logs = tracing::info_span!("coordinator").entered();
        let secret = cluster_secret(e, &[address.to_string()])?;
        let watchdog = match options.runner_option("watchdog_ms") {
            None => (config.epoch_interval * 10).max(DEFAULT_WATCHDOG),
            Some(v) => Duration::from_millis(parse_positive("watchdog_ms", v)? as u64),
        };
        // The plan is checked here once (a bad one is refused before any host runs it).
        tidewater_runners_core::translate(plan)?;
        // The coordinator serves the status of the job (process 0's host hands it over),
        // across its restarts and hosts.
        let status = supervised_status(self.name, 0, plan, &config, options)?;
        let mut agents = crate::agents::Agents::listen(
            address,
            secret,
            e.expect_hosts as usize,
            e.min_hosts as usize,
            status.as_ref().map(|(s, _)| s.clone()),
        )?;
        let result = cluster::Supervision {
            checkpoint_dir: config.checkpoint_dir,
            restart: restart_strategy(options)?,
            watchdog,
            status: status.as_ref().map(|(s, _)| s.clone()),
        }
        .supervise(&mut agents);
        agents.finish(result.is_ok());
        self.ended(result, status, e.status_linger)
    }

    /// A supervisor's job ended with `result`: its status is served `linger` longer
    /// (`--status-linger`), then the summary goes to a terminal.
    fn ended(
        &self,
        result: Result<PipelineResult>,
        status: Option<SupervisedStatus>,
        linger: Option<Duration>,
    ) -> Result<PipelineResult> {
        if let (Some(linger), Some(_)) = (linger, &status) {
            std::thread::sleep(linger);
        }
        drop(status);
        let result = result?;
        if stderr_is_terminal() {
            eprintln!("{}", summary(self.name, &result.metrics));
        }
        Ok(result)
    }

    /// Serves the coordinator at `address` as this host's agent until the job is over.
    pub(super) fn agent(&self, address: &str, options: &PipelineOptions) -> Result<PipelineResult> {
        let e = &options.engine;
        let secret = cluster_secret(e, &[address.to_string()])?;
        let _logs = tracing::info_span!("agent").entered();
        let program = std::env::current_exe()
            .map_err(|err| Error::Internal(format!("cannot find this binary to launch: {err}")))?;
        let args = match &e.child_args {
            Some(a) => a.clone(),
            None => cluster::args_for_children(std::env::args().skip(1)),
        };
        crate::agents::agent::Agent {
            coordinator: address.to_string(),
            secret,
            program,
            args,
        }
        .run()?;
        Ok(PipelineResult {
            state: tidewater::runner::PipelineState::Done,
            metrics: Default::default(),
            captured: Default::default(),
            holds_captures: false,
        })
    }
}

/// The status a supervisor serves, and its server (served until dropped).
type SupervisedStatus = (
    std::sync::Arc<crate::status::supervised::Supervised>,
    crate::status::server::StatusServer,
);

/// A supervisor's status server (`--status-addr`), if asked for: the job's status as
/// its process 0 hands it over, with the restarts only the supervisor knows of, and
/// control of the job (a stop drains it, a savepoint goes to process 0).
fn supervised_status(
    runner: &str,
    processes: usize,
    plan: &Plan,
    config: &crate::EngineConfig,
    options: &PipelineOptions,
) -> Result<Option<SupervisedStatus>> {
    let e = &options.engine;
    let Some(addr) = &e.status_addr else {
        return Ok(None);
    };
    let supervised = std::sync::Arc::new(crate::status::supervised::Supervised::new(
        runner, processes,
    ));
    let graph = tidewater_runners_core::job_graph::job_graph(plan, config.lift_combiners)?;
    let control = crate::status::control::of(e, config, plan, true)?;
    let server = crate::status::server::serve(addr, supervised.clone(), graph, control)?;
    Ok(Some((supervised, server)))
}
