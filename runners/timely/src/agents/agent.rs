//! A host's agent (`--coordinator HOST:PORT`): registers with the coordinator, proving
//! it holds the job's secret, and runs the job's process on this host when told to
//! (this binary with its own arguments, minus the agent's flags, plus the membership the
//! coordinator hands out), as a local cluster's supervisor runs its processes: the
//! process ends when the agent does (its standard input closes), writes its outcome to
//! a file the agent sends back, and takes the job's secret from the environment. A
//! coordinator that goes silent for twice [`wire::LOST`] (or whose connection fails) is
//! lost: the agent ends its process and registers again once it answers. The agent ends
//! when the coordinator says the job is over.

use super::wire::{self, ToAgent, ToCoordinator};
use crate::fleet::{private_work_dir, start_process};
use crate::handshake::Secret;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command};
use std::sync::mpsc;
use std::time::{Duration, Instant};
use tidewater::{Error, Result};

/// How an agent runs its host's process.
pub struct Agent {
    /// The coordinator's address.
    pub coordinator: String,
    /// The job's secret.
    pub secret: Secret,
    /// The binary.
    pub program: PathBuf,
    /// Its arguments, without the agent's flags.
    pub args: Vec<String>,
}

/// The process of the current attempt.
struct Running {
    attempt: u64,
    child: Child,
    outcome: PathBuf,
    lifeline: Option<ChildStdin>,
    /// The file process 0 writes the job's status to, and when it was last sent on.
    status: Option<(PathBuf, Option<std::time::SystemTime>)>,
}

impl Running {
    /// The status file, if it changed since it was last sent.
    fn new_status(&mut self) -> Option<Vec<u8>> {
        let (file, sent) = self.status.as_mut()?;
        let modified = std::fs::metadata(&*file).and_then(|m| m.modified()).ok()?;
        if *sent == Some(modified) {
            return None;
        }
        use std::io::Read;
        let mut json = Vec::new();
        std::fs::File::open(&*file)
            .ok()?
            .take(crate::status::supervised::MAX_STATUS_FILE)
            .read_to_end(&mut json)
            .ok()?;
        *sent = Some(modified);
        Some(json)
    }

    /// Sends the status file to the coordinator, if it changed since it was last sent.
    fn send_status(&mut self, stream: &mut TcpStream) -> std::io::Result<()> {
        match self.new_status() {
            Some(json) => wire::send(
                stream,
                &ToCoordinator::Status {
                    attempt: self.attempt,
                    json,
                },
            ),
            None => Ok(()),
        }
    }
}

enum Session {
    /// The job is over; whether it succeeded.
    Done(bool),
    /// The coordinator is gone (why).
    Lost(String),
}

impl Agent {
    /// Serves the coordinator until the job is over: `Ok` if it succeeded.
    pub fn run(&self) -> Result<()> {
        let work = private_work_dir("tidewater-agent-", "the agent's work directory")?;
        let mut said = Instant::now() - Duration::from_secs(60);
        loop {
            let session = match TcpStream::connect(&self.coordinator) {
                Ok(stream) => self.session(stream, work.path()),
                Err(e) => Session::Lost(format!("cannot reach it: {e}")),
            };
            match session {
                Session::Done(true) => return Ok(()),
                Session::Done(false) => {
                    return Err(Error::Internal(
                        "the coordinator says the job failed (its log says why)".into(),
                    ))
                }
                Session::Lost(why) => {
                    if said.elapsed() >= Duration::from_secs(5) {
                        tracing::warn!(
                            "agent: the coordinator at {} is lost ({why}); registering again once it answers",
                            self.coordinator
                        );
                        said = Instant::now();
                    }
                    std::thread::sleep(Duration::from_millis(500));
                }
            }
        }
    }

    fn session(&self, mut stream: TcpStream, work: &std::path::Path) -> Session {
        if let Err(e) =
            crate::handshake::connect(&mut stream, &self.secret, wire::AGENT, wire::COORDINATOR)
        {
            return Session::Lost(e.to_string());
        }
        let host = match stream.local_addr() {
            Ok(a) => a.ip().to_string(),
            Err(e) => return Session::Lost(e.to_string()),
        };
        if let Err(e) = wire::send(&mut stream, &ToCoordinator::Hello { host: host.clone() }) {
            return Session::Lost(e.to_string());
        }
        tracing::info!(
            "agent: registered with the coordinator at {} as host {host}",
            self.coordinator
        );
        let Ok(mut reader) = stream.try_clone() else {
            return Session::Lost("cannot read the connection".into());
        };
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || loop {
            let m = wire::recv::<ToAgent>(&mut reader);
            let end = m.is_err();
            if tx.send(m).is_err() || end {
                return;
            }
        });
        let mut running: Option<Running> = None;
        let mut heard = Instant::now();
        let mut beat = Instant::now();
        let mut looked = Instant::now();
        let end = loop {
            if looked.elapsed() >= wire::BEAT {
                looked = Instant::now();
                if let Some(r) = &mut running {
                    if let Err(e) = r.send_status(&mut stream) {
                        break Session::Lost(e.to_string());
                    }
                }
            }
            if let Some(r) = &mut running {
                if let Ok(Some(status)) = r.child.try_wait() {
                    // The status it wrote last, before how it ended.
                    if let Err(e) = r.send_status(&mut stream) {
                        break Session::Lost(e.to_string());
                    }
                    let exited = ToCoordinator::Exited {
                        attempt: r.attempt,
                        code: status.code(),
                        shown: status.to_string(),
                        outcome: std::fs::read(&r.outcome).unwrap_or_default(),
                    };
                    running = None;
                    if let Err(e) = wire::send(&mut stream, &exited) {
                        break Session::Lost(e.to_string());
                    }
                }
            }
            if beat.elapsed() >= wire::BEAT {
                beat = Instant::now();
                if let Err(e) = wire::send(&mut stream, &ToCoordinator::Beat) {
                    break Session::Lost(e.to_string());
                }
            }
            if heard.elapsed() > wire::LOST * 2 {
                break Session::Lost(format!("no word for {:?}", wire::LOST * 2));
            }
            let message = match rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Ok(m)) => m,
                Ok(Err(e)) => break Session::Lost(e.to_string()),
                Err(mpsc::RecvTimeoutError::Timeout) => continue,
                Err(mpsc::RecvTimeoutError::Disconnected) => break Session::Lost("closed".into()),
            };
            heard = Instant::now();
            let answer = match message {
                ToAgent::Beat => None,
                ToAgent::Port { attempt } => match std::net::TcpListener::bind((host.as_str(), 0))
                    .and_then(|l| l.local_addr())
                {
                    Ok(a) => Some(ToCoordinator::Port {
                        attempt,
                        port: a.port(),
                    }),
                    Err(e) => {
                        tracing::error!("agent: no free port on {host}: {e}");
                        None
                    }
                },
                ToAgent::Start {
                    attempt,
                    processes,
                    id,
                    hosts,
                    status,
                } => {
                    if let Some(mut old) = running.take() {
                        let _ = old.child.kill();
                        let _ = old.child.wait();
                    }
                    match self.start(work, attempt, processes, id, &hosts, status) {
                        Ok(r) => {
                            running = Some(r);
                            None
                        }
                        Err(e) => Some(ToCoordinator::Exited {
                            attempt,
                            code: None,
                            shown: format!("it did not start: {e}"),
                            outcome: Vec::new(),
                        }),
                    }
                }
                ToAgent::Kill { attempt } => match running.take() {
                    Some(mut r) if r.attempt == attempt => {
                        let _ = r.child.kill();
                        let status = r.child.wait();
                        Some(ToCoordinator::Exited {
                            attempt,
                            code: None,
                            shown: status.map_or_else(|e| e.to_string(), |s| s.to_string()),
                            outcome: Vec::new(),
                        })
                    }
                    other => {
                        running = other;
                        Some(ToCoordinator::Exited {
                            attempt,
                            code: None,
                            shown: "not running".into(),
                            outcome: Vec::new(),
                        })
                    }
                },
                ToAgent::Drain => {
                    if let Some(r) = &mut running {
                        crate::stop::ask_to_drain(r.lifeline.as_mut_slice());
                    }
                    None
                }
                ToAgent::Savepoint => {
                    if let Some(r) = &running {
                        let _ = Command::new("kill")
                            .args(["-USR1", &r.child.id().to_string()])
                            .status();
                    }
                    None
                }
                ToAgent::Done { ok } => break Session::Done(ok),
            };
            if let Some(a) = answer {
                if let Err(e) = wire::send(&mut stream, &a) {
                    break Session::Lost(e.to_string());
                }
            }
        };
        if let Some(mut r) = running {
            let _ = r.child.kill();
            let _ = r.child.wait();
        }
        end
    }

    fn start(
        &self,
        work: &std::path::Path,
        attempt: u64,
        processes: u64,
        id: u64,
        hosts: &[String],
        status: bool,
    ) -> Result<Running> {
        let file = work.join(format!("hosts-{attempt}"));
        let listing: String = hosts.iter().map(|h| format!("{h}\n")).collect();
        crate::private_file::write_private(&file, listing.as_bytes()).map_err(|e| Error::Io {
            what: "cannot write the hosts file".into(),
            path: file.clone(),
            cause: e,
        })?;
        let outcome = work.join(format!("outcome-{attempt}"));
        let status = status.then(|| work.join(format!("status-{attempt}")));
        let mut child = start_process(
            &self.program,
            &self.args,
            processes,
            id,
            &file,
            &outcome,
            &self.secret,
            status
                .as_deref()
                .map(|f| (crate::status::supervised::STATUS_FILE_ENV, f)),
        )
        .map_err(|e| Error::Internal(format!("cannot start {}: {e}", self.program.display())))?;
        let lifeline = child.stdin.take();
        Ok(Running {
            attempt,
            child,
            outcome,
            lifeline,
            // Every process is told of the file (each gathers its figures for
            // process 0), which alone writes it.
            status: status.filter(|_| id == 0).map(|f| (f, None)),
        })
    }
}
