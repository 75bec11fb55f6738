//! `--over-veth`: a cluster run's processes on hosts of a network rather than on
//! loopback. Each process gets a network namespace of its own (as a host has), joined to
//! the others by a bridge and veth pairs; this namespace joins the bridge too, where the
//! run's coordinator (`--coordinate`) listens, with an agent (`--coordinator`) in each
//! host's namespace. The checkpoint directory stays where every namespace sees it (the
//! filesystem is shared), so that what is measured against loopback is the network:
//! shuffles, the checkpoint barriers and the cluster's connections. Needs root.

use anyhow::{bail, Context};
use std::process::{Child, Command, Stdio};

/// The namespaces, bridge and agents of one run; removed when dropped.
pub(super) struct Network {
    prefix: String,
    count: usize,
    agents: Vec<Child>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .context("cannot run `ip` (iproute2)")?;
    if !out.status.success() {
        bail!(
            "--over-veth needs root: `ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(())
}

impl Network {
    /// `count` hosts and this namespace's link to them.
    pub(super) fn make(count: usize) -> anyhow::Result<Network> {
        let net = Network {
            prefix: format!("twb{}", std::process::id()),
            count,
            agents: Vec::new(),
        };
        let switch = net.switch();
        ip(&["netns", "add", &switch])?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        let attach = |ns: Option<&str>, end: &str, port: &str, address: &str| {
            ip(&["link", "add", end, "type", "veth", "peer", "name", port])?;
            ip(&["link", "set", port, "netns", &switch])?;
            ip(&["-n", &switch, "link", "set", port, "master", "br0"])?;
            ip(&["-n", &switch, "link", "set", port, "up"])?;
            let here = |args: &[&str]| match ns {
                Some(ns) => ip(&[&["-n", ns], args].concat()),
                None => ip(args),
            };
            if let Some(ns) = ns {
                ip(&["link", "set", end, "netns", ns])?;
                here(&["link", "set", "lo", "up"])?;
            }
            here(&["addr", "add", &format!("{address}/24"), "dev", end])?;
            here(&["link", "set", end, "up"])
        };
        for k in 0..count {
            let ns = net.host(k);
            ip(&["netns", "add", &ns])?;
            attach(
                Some(&ns),
                &format!("{}-e{k}", net.prefix),
                &format!("{}-s{k}", net.prefix),
                &net.address(k),
            )?;
        }
        attach(
            None,
            &format!("{}-r", net.prefix),
            &format!("{}-sr", net.prefix),
            &net.root_address(),
        )?;
        Ok(net)
    }

    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    fn host(&self, k: usize) -> String {
        format!("{}-h{k}", self.prefix)
    }

    fn address(&self, k: usize) -> String {
        format!("10.78.{}.{}", std::process::id() % 250, k + 1)
    }

    /// This namespace's address on the bridge.
    pub(super) fn root_address(&self) -> String {
        format!("10.78.{}.254", std::process::id() % 250)
    }

    /// A free port at [`Network::root_address`]: where the coordinator listens.
    pub(super) fn coordinator_address(&self) -> anyhow::Result<String> {
        let l = std::net::TcpListener::bind((self.root_address().as_str(), 0))
            .context("no free port on the bridge")?;
        Ok(l.local_addr()?.to_string())
    }

    /// Starts an agent in each host's namespace: this binary with `args` and
    /// `--coordinator coordinator`, the cluster's secret in its environment.
    pub(super) fn start_agents(
        &mut self,
        args: &[String],
        coordinator: &str,
        secret: &str,
    ) -> anyhow::Result<()> {
        let program = std::env::current_exe()?;
        for k in 0..self.count {
            let agent = Command::new("ip")
                .args(["netns", "exec", &self.host(k)])
                .arg(&program)
                .args(args)
                .arg(format!("--coordinator={coordinator}"))
                .env("TIDEWATER_CLUSTER_SECRET", secret)
                .stdout(Stdio::null())
                .spawn()
                .context("cannot start an agent")?;
            self.agents.push(agent);
        }
        Ok(())
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        for a in &mut self.agents {
            let _ = a.kill();
            let _ = a.wait();
        }
        for k in 0..self.count {
            let _ = ip(&["netns", "del", &self.host(k)]);
        }
        // The switch's ends go with it, and with them their peers (this namespace's).
        let _ = ip(&["netns", "del", &self.switch()]);
    }
}
