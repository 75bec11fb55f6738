//! A job across hosts without a shared supervisor process on each: a coordinator
//! (`--coordinate HOST:PORT`) that an agent on every host (`--coordinator HOST:PORT`, the
//! same binary and job arguments) registers with. The coordinator is the local
//! cluster's supervisor (`cluster::Supervision`) over another fleet: for each attempt it
//! takes the hosts whose agents are there, asks each for a free port, hands every one
//! the membership (`--processes N --process-id I --hosts ...`) and has it start the
//! job's process; it hears how each ends. A process that fails, or a host whose agent
//! says nothing for [`wire::LOST`] (or whose connection fails: keepalive and
//! TCP_USER_TIMEOUT, as between a cluster's processes), restarts the whole job from the
//! last checkpoint on the hosts still there: the job rescales down to them (at least
//! `--min-hosts`). A host that registers while the job runs rescales it up: the job
//! restarts from the last checkpoint on every host. The first attempt waits for
//! `--expect-hosts` hosts.
//!
//! Agents and coordinator prove they hold the job's secret (`--cluster-secret-file`,
//! the cluster's handshake) before a word is exchanged. The checkpoint directory must be
//! one every host reaches (an object store, or a shared filesystem): the coordinator
//! holds its lock and watches its manifests (the watchdog), each process writes its
//! parts there.

pub mod agent;
pub mod wire;

use crate::fleet::{Exit, Fleet, Member};
use crate::handshake::Secret;
use crate::status::supervised::Supervised;
use std::collections::{BTreeMap, BTreeSet};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};
use tidewater::{Error, Result};
use wire::{ToAgent, ToCoordinator};

/// What an agent reported of one attempt.
#[derive(Default)]
struct Inbox {
    ports: BTreeMap<u64, u16>,
    exits: BTreeMap<u64, (Exit, Vec<u8>)>,
}

/// A registered host's agent.
struct Agent {
    /// Registration order: a host's process index follows it.
    id: u64,
    host: String,
    writer: Mutex<TcpStream>,
    last_seen: Mutex<Instant>,
    inbox: Mutex<Inbox>,
    alive: AtomicBool,
    /// Rung when its inbox changes.
    news: Condvar,
    /// The status the coordinator serves, if any (the host of process 0 hands it over).
    status: Option<Arc<Supervised>>,
}

impl Agent {
    fn send(&self, message: &ToAgent) {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if wire::send(&mut *w, message).is_err() {
            self.alive.store(false, Ordering::SeqCst);
        }
    }

    fn lost(&self) -> bool {
        !self.alive.load(Ordering::SeqCst)
            || self
                .last_seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed()
                > wire::LOST
    }

    /// Waits (at most `limit`) until `ready` finds what it wants in the inbox.
    fn wait_for<T>(
        &self,
        limit: Duration,
        mut ready: impl FnMut(&mut Inbox) -> Option<T>,
    ) -> Option<T> {
        let until = Instant::now() + limit;
        let mut inbox = self.inbox.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(t) = ready(&mut inbox) {
                return Some(t);
            }
            let now = Instant::now();
            if now >= until || self.lost() {
                return None;
            }
            inbox = self
                .news
                .wait_timeout(inbox, (until - now).min(Duration::from_millis(200)))
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// The hosts' agents, as a coordinator's fleet.
pub struct Agents {
    agents: Arc<Mutex<Vec<Arc<Agent>>>>,
    /// The hosts the first attempt waits for.
    expect: usize,
    /// The fewest hosts an attempt runs on.
    min: usize,
    /// The agents of the running attempt.
    running: BTreeSet<u64>,
    address: String,
    status: Option<Arc<Supervised>>,
}

impl Agents {
    /// Listens for agents at `address`; they must prove they hold `secret`. With
    /// `status`, the job's status is handed over to it.
    pub fn listen(
        address: &str,
        secret: Secret,
        expect: usize,
        min: usize,
        status: Option<Arc<Supervised>>,
    ) -> Result<Agents> {
        let listener = TcpListener::bind(address).map_err(|e| Error::InvalidOption {
            option: format!("--coordinate {address}"),
            message: format!("cannot listen there: {e}"),
        })?;
        let bound = listener
            .local_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| address.to_string());
        tracing::info!(
            "coordinator listening at {bound}: waiting for {expect} host(s) to register (agents: the job's binary with --coordinator {bound})"
        );
        let agents: Arc<Mutex<Vec<Arc<Agent>>>> = Arc::default();
        let (registry, shown) = (agents.clone(), status.clone());
        std::thread::Builder::new()
            .name("coordinator-accept".into())
            .spawn(move || accept(listener, secret, registry, shown))
            .map_err(|e| Error::Internal(format!("cannot start the coordinator: {e}")))?;
        let beating = agents.clone();
        std::thread::Builder::new()
            .name("coordinator-beat".into())
            .spawn(move || loop {
                std::thread::sleep(wire::BEAT);
                let all = beating.lock().unwrap_or_else(|p| p.into_inner()).clone();
                for a in all.iter().filter(|a| !a.lost()) {
                    a.send(&ToAgent::Beat);
                }
            })
            .map_err(|e| Error::Internal(format!("cannot start the coordinator: {e}")))?;
        Ok(Agents {
            agents,
            expect: expect.max(1),
            min: min.max(1),
            running: BTreeSet::new(),
            address: bound,
            status,
        })
    }

    /// The agents there now, in registration order (lost ones forgotten).
    fn live(&self) -> Vec<Arc<Agent>> {
        let mut all = self.agents.lock().unwrap_or_else(|p| p.into_inner());
        all.retain(|a| !a.lost());
        all.clone()
    }

    /// Tells every agent the job is over.
    pub fn finish(&self, ok: bool) {
        for a in self.live() {
            a.send(&ToAgent::Done { ok });
        }
    }
}

/// Accepts agents: each proves it holds the secret, says its host, and is read from
/// on a thread of its own until its connection ends.
fn accept(
    listener: TcpListener,
    secret: Secret,
    agents: Arc<Mutex<Vec<Arc<Agent>>>>,
    status: Option<Arc<Supervised>>,
) {
    let mut next = 0u64;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_default();
        if let Err(e) = crate::handshake::accept(&mut stream, &secret, wire::COORDINATOR, |i| {
            i == wire::AGENT
        }) {
            tracing::warn!("coordinator: refused a connection from {peer}: {e}");
            continue;
        }
        let _ = stream.set_read_timeout(Some(wire::LOST));
        let host = match wire::recv::<ToCoordinator>(&mut stream) {
            Ok(ToCoordinator::Hello { host }) => host,
            other => {
                tracing::warn!("coordinator: {peer} did not say its host ({other:?})");
                continue;
            }
        };
        let Ok(writer) = stream.try_clone() else {
            continue;
        };
        let agent = Arc::new(Agent {
            id: next,
            host: host.clone(),
            writer: Mutex::new(writer),
            last_seen: Mutex::new(Instant::now()),
            inbox: Mutex::default(),
            alive: AtomicBool::new(true),
            news: Condvar::new(),
            status: status.clone(),
        });
        next += 1;
        tracing::info!("coordinator: host {host} registered (from {peer})");
        agents
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(agent.clone());
        let _ = std::thread::Builder::new()
            .name("coordinator-agent".into())
            .spawn(move || read_agent(stream, &agent));
    }
}

fn read_agent(mut stream: TcpStream, agent: &Agent) {
    loop {
        let message = wire::recv::<ToCoordinator>(&mut stream);
        *agent.last_seen.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
        let mut inbox = agent.inbox.lock().unwrap_or_else(|p| p.into_inner());
        match message {
            Ok(ToCoordinator::Port { attempt, port }) => {
                inbox.ports.insert(attempt, port);
            }
            Ok(ToCoordinator::Exited {
                attempt,
                code,
                shown,
                outcome,
            }) => {
                inbox.exits.insert(attempt, (Exit { code, shown }, outcome));
            }
            Ok(ToCoordinator::Status { attempt, json }) => {
                if let Some(status) = &agent.status {
                    status.offer(attempt, &json);
                }
            }
            Ok(ToCoordinator::Beat | ToCoordinator::Hello { .. }) => {}
            Err(e) => {
                tracing::warn!("coordinator: host {} is lost: {e}", agent.host);
                agent.alive.store(false, Ordering::SeqCst);
                agent.news.notify_all();
                return;
            }
        }
        agent.news.notify_all();
    }
}

/// A process an agent runs for an attempt.
struct Remote {
    agent: Arc<Agent>,
    attempt: u64,
}

impl Member for Remote {
    fn try_wait(&mut self) -> Option<Exit> {
        let inbox = self.agent.inbox.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((exit, _)) = inbox.exits.get(&self.attempt) {
            return Some(exit.clone());
        }
        drop(inbox);
        self.agent.lost().then(|| Exit {
            code: None,
            shown: format!(
                "its host {} lost (no word from its agent for {:?})",
                self.agent.host,
                wire::LOST
            ),
        })
    }

    fn outcome(&mut self) -> Vec<u8> {
        let inbox = self.agent.inbox.lock().unwrap_or_else(|p| p.into_inner());
        inbox
            .exits
            .get(&self.attempt)
            .map(|(_, o)| o.clone())
            .unwrap_or_default()
    }

    fn kill(&mut self) {
        if self.agent.lost() {
            return;
        }
        self.agent.send(&ToAgent::Kill {
            attempt: self.attempt,
        });
        let attempt = self.attempt;
        self.agent
            .wait_for(wire::LOST, |i| i.exits.contains_key(&attempt).then_some(()));
    }

    fn drain(&mut self) {
        self.agent.send(&ToAgent::Drain);
    }

    fn savepoint(&mut self) {
        self.agent.send(&ToAgent::Savepoint);
    }

    fn pid(&self) -> Option<u32> {
        None
    }
}

impl Fleet for Agents {
    fn start(&mut self, attempt: usize) -> Result<Vec<Box<dyn Member>>> {
        let attempt = attempt as u64;
        let wanted = if attempt == 0 { self.expect } else { self.min };
        let mut said = Instant::now();
        loop {
            let live = self.live();
            if live.len() >= wanted {
                // Every host's port, for this attempt.
                for a in &live {
                    a.send(&ToAgent::Port { attempt });
                }
                let mut hosts = Vec::new();
                let mut answered = Vec::new();
                for a in &live {
                    match a.wait_for(wire::LOST, |i| i.ports.get(&attempt).copied()) {
                        Some(port) => {
                            hosts.push(format!("{}:{port}", a.host));
                            answered.push(a.clone());
                        }
                        None => a.alive.store(false, Ordering::SeqCst),
                    }
                }
                if answered.len() != live.len() {
                    continue;
                }
                let n = answered.len() as u64;
                tracing::info!(
                    "coordinator: attempt {attempt} on {n} host(s): {}",
                    hosts.join(", ")
                );
                if let Some(status) = &self.status {
                    status.attempt(None, attempt, n as usize);
                }
                let mut members: Vec<Box<dyn Member>> = Vec::new();
                for (id, a) in answered.iter().enumerate() {
                    a.send(&ToAgent::Start {
                        attempt,
                        processes: n,
                        id: id as u64,
                        hosts: hosts.clone(),
                        status: self.status.is_some(),
                    });
                    members.push(Box::new(Remote {
                        agent: a.clone(),
                        attempt,
                    }));
                }
                self.running = answered.iter().map(|a| a.id).collect();
                return Ok(members);
            }
            if said.elapsed() >= Duration::from_secs(5) {
                tracing::info!(
                    "coordinator at {}: {} of the {wanted} host(s) needed are registered; waiting",
                    self.address,
                    live.len()
                );
                said = Instant::now();
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn changed(&mut self) -> Option<String> {
        let live = self.live();
        let joined: Vec<&str> = live
            .iter()
            .filter(|a| !self.running.contains(&a.id))
            .map(|a| a.host.as_str())
            .collect();
        (!joined.is_empty()).then(|| {
            format!(
                "host(s) {} registered: rescaling to {} hosts",
                joined.join(", "),
                live.len()
            )
        })
    }

    fn name(&self) -> String {
        format!("coordinator at {}", self.address)
    }
}
