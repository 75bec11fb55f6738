//! The processes of one attempt of a supervised job, wherever they run: the
//! supervisor's loop (`cluster::Supervisor`) watches them, kills them, asks them to drain
//! or to keep a savepoint, and reads their outcomes through [`Member`], the same for a
//! local cluster's child processes ([`LocalFleet`]) and for processes that host agents
//! run for a coordinator across hosts (`coordinator::Agents`).

use crate::handshake::Secret;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use tidewater::{Error, Result};

/// The environment variable that makes a process a child of a local cluster (or of a
/// host's agent): the file it writes its outcome (`cluster::Outcome`) to.
pub const CHILD_ENV: &str = "TIDEWATER_CLUSTER_CHILD";

/// Copies a child's standard output to ours, without the lines timely prints while
/// the processes connect to each other.
pub(crate) fn pass_stdout(out: std::process::ChildStdout) {
    use std::io::{BufRead, Write};
    let stdout = std::io::stdout();
    for line in std::io::BufReader::new(out).lines() {
        let Ok(line) = line else { break };
        if line.starts_with("awaiting connections (at ")
            || (line.starts_with("worker ") && line.contains("error connecting to worker"))
        {
            continue;
        }
        let mut lock = stdout.lock();
        if writeln!(lock, "{line}").is_err() {
            break;
        }
    }
}

/// How a process of an attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code, if it exited (not if a signal ended it, or its host was lost).
    pub code: Option<i32>,
    /// How it ended, for messages ("exit status: 1", "its host was lost").
    pub shown: String,
}

impl Exit {
    /// It exited with 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// The exit of a local process.
    pub fn of(status: std::process::ExitStatus) -> Exit {
        Exit {
            code: status.code(),
            shown: status.to_string(),
        }
    }
}

/// One process of an attempt.
pub trait Member {
    /// How it ended, once it has.
    fn try_wait(&mut self) -> Option<Exit>;
    /// The outcome it handed back (`cluster::Outcome`, encoded), once it ended; empty if
    /// none.
    fn outcome(&mut self) -> Vec<u8>;
    /// Ends it (if it runs) and waits until it has.
    fn kill(&mut self);
    /// Asks it to drain (sources stop, windows fire, output is committed).
    fn drain(&mut self);
    /// Asks it to keep the next complete checkpoint as a savepoint (process 0).
    fn savepoint(&mut self);
    /// Its process id, where it runs on this host.
    fn pid(&self) -> Option<u32>;
}

/// Where an attempt's processes are started.
pub trait Fleet {
    /// Starts attempt `attempt`'s processes, process 0 first (how many is the fleet's
    /// to say).
    fn start(&mut self, attempt: usize) -> Result<Vec<Box<dyn Member>>>;
    /// Why the running attempt should end and start again on other processes (a host
    /// joined), if it should.
    fn changed(&mut self) -> Option<String> {
        None
    }
    /// What the fleet is, for messages ("local cluster").
    fn name(&self) -> String;
}

/// A local cluster: N processes of this binary on loopback, started with its arguments
/// and `--processes N --process-id I --hosts FILE`, the job's fresh secret in their
/// environment, and [`CHILD_ENV`] naming the file each writes its outcome to.
pub struct LocalFleet {
    /// Processes.
    pub processes: usize,
    /// The binary.
    pub program: PathBuf,
    /// Its arguments, without the cluster flags.
    pub args: Vec<String>,
    /// Where the hosts, outcome and status files go (this user's only).
    pub work: PathBuf,
    /// The job's secret.
    pub secret: Secret,
    /// The status the supervisor serves, if any: process 0 writes the job's there.
    pub status: Option<std::sync::Arc<crate::status::supervised::Supervised>>,
}

/// A local cluster's process.
pub struct LocalMember {
    child: Child,
    outcome: PathBuf,
    /// The write end of its standard input: written only to ask for a drain, closed
    /// when the supervisor ends however it ends, which ends the process
    /// (`cluster::exit_with_supervisor`).
    lifeline: Option<ChildStdin>,
}

impl Member for LocalMember {
    fn try_wait(&mut self) -> Option<Exit> {
        self.child.try_wait().ok().flatten().map(Exit::of)
    }

    fn outcome(&mut self) -> Vec<u8> {
        std::fs::read(&self.outcome).unwrap_or_default()
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    fn drain(&mut self) {
        crate::stop::ask_to_drain(self.lifeline.as_mut_slice());
    }

    fn savepoint(&mut self) {
        let _ = Command::new("kill")
            .args(["-USR1", &self.child.id().to_string()])
            .status();
    }

    fn pid(&self) -> Option<u32> {
        Some(self.child.id())
    }
}

/// A fresh directory with a random name, only this user's (0700), removed when dropped:
/// nobody can read the hosts and outcome files in it, or plant a symlink where they go
/// (a predictable name reused if it existed would let a local user have a launch
/// overwrite a file of theirs choosing). `what` names it in an error.
pub fn private_work_dir(prefix: &str, what: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .tempdir()
        .map_err(|e| Error::Io {
            what: format!("cannot create {what} in"),
            path: std::env::temp_dir(),
            cause: e,
        })
}

/// Process `id` of `processes` of a cluster: `program` with `args` and the membership
/// (`--processes`, `--process-id`, `--hosts hosts`), [`CHILD_ENV`] naming its `outcome`
/// file, the job's `secret` (if set) and `env` in its environment; its standard input
/// piped (the lifeline) and its standard output passed on to ours.
#[allow(clippy::too_many_arguments)]
pub fn start_process(
    program: &std::path::Path,
    args: &[String],
    processes: u64,
    id: u64,
    hosts: &std::path::Path,
    outcome: &std::path::Path,
    secret: &Secret,
    env: Option<(&str, &std::path::Path)>,
) -> std::io::Result<Child> {
    let mut child = Command::new(program)
        .args(args)
        .arg(format!("--processes={processes}"))
        .arg(format!("--process-id={id}"))
        .arg(format!("--hosts={}", hosts.display()))
        .env(CHILD_ENV, outcome)
        .envs(env)
        .envs(
            secret
                .is_set()
                .then(|| (crate::handshake::SECRET_ENV, secret.to_hex())),
        )
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    if let Some(out) = child.stdout.take() {
        std::thread::spawn(move || pass_stdout(out));
    }
    Ok(child)
}

/// Free loopback ports (bound, read and released: another process could take one in
/// between; the process that finds its port taken exits so that the supervisor
/// restarts the cluster on fresh ports: [`crate::connect::address_taken`]).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(|e| Error::Internal(format!("cannot find free loopback ports: {e}")))?;
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .map_err(|e| Error::Internal(format!("cannot find free loopback ports: {e}")))
        })
        .collect()
}

/// Kills every member and waits for each.
pub fn kill_all(members: &mut [Box<dyn Member>]) {
    for m in members.iter_mut() {
        m.kill();
    }
}

impl Fleet for LocalFleet {
    fn start(&mut self, attempt: usize) -> Result<Vec<Box<dyn Member>>> {
        let n = self.processes;
        let ports = free_ports(n)?;
        // Process 0 writes the job's status here for the supervisor to serve.
        let status_file = self.work.join(format!("status-{attempt}"));
        if let Some(status) = &self.status {
            status.attempt(Some(&status_file), attempt as u64, n);
        }
        let hosts = self.work.join(format!("hosts-{attempt}"));
        let listing: String = ports.iter().map(|p| format!("127.0.0.1:{p}\n")).collect();
        crate::private_file::write_private(&hosts, listing.as_bytes()).map_err(|e| Error::Io {
            what: "cannot write the hosts file".into(),
            path: hosts.clone(),
            cause: e,
        })?;
        let mut members: Vec<Box<dyn Member>> = Vec::new();
        for i in 0..n {
            let outcome = self.work.join(format!("outcome-{attempt}-{i}"));
            let status_env = self.status.as_ref().map(|_| {
                (
                    crate::status::supervised::STATUS_FILE_ENV,
                    status_file.as_path(),
                )
            });
            let child = start_process(
                &self.program,
                &self.args,
                n as u64,
                i as u64,
                &hosts,
                &outcome,
                &self.secret,
                status_env,
            );
            match child {
                Ok(mut c) => {
                    let lifeline = c.stdin.take();
                    members.push(Box::new(LocalMember {
                        child: c,
                        outcome,
                        lifeline,
                    }));
                }
                Err(e) => {
                    kill_all(&mut members);
                    return Err(Error::Internal(format!(
                        "cannot start process {i} of the local cluster ({}): {e}",
                        self.program.display()
                    )));
                }
            }
        }
        Ok(members)
    }

    fn name(&self) -> String {
        "local cluster".into()
    }
}
