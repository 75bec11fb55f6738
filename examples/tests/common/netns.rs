//! Test hosts in network namespaces (issue 37): a switch namespace holding a bridge,
//! and per host a namespace joined to it by a veth pair, with an address of its own
//! on a private subnet no one else uses. Processes run in a host with `ip netns exec`;
//! everything is removed when the [`Hosts`] drop. Where namespaces cannot be made (no
//! privileges), [`Hosts::make`] says why and the test skips.

use std::process::Command;

/// Hosts in network namespaces, joined by a bridge.
pub struct Hosts {
    prefix: String,
    count: usize,
}

fn ip(args: &[&str]) -> Result<(), String> {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl Hosts {
    /// `count` hosts, host `k` at [`Hosts::address`]`(k)`; `Err` says why they cannot
    /// be made here.
    pub fn make(count: usize) -> Result<Hosts, String> {
        let prefix = format!("tw{}", std::process::id());
        let hosts = Hosts { prefix, count };
        let switch = hosts.switch();
        ip(&["netns", "add", &switch])?;
        ip(&["-n", &switch, "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", &switch, "link", "set", "br0", "up"])?;
        for k in 0..count {
            let (ns, end, port) = (
                hosts.name(k),
                format!("{}-e{k}", hosts.prefix),
                format!("{}-s{k}", hosts.prefix),
            );
            ip(&["netns", "add", &ns])?;
            ip(&["link", "add", &end, "type", "veth", "peer", "name", &port])?;
            ip(&["link", "set", &end, "netns", &ns])?;
            ip(&["link", "set", &port, "netns", &switch])?;
            ip(&["-n", &switch, "link", "set", &port, "master", "br0"])?;
            ip(&["-n", &switch, "link", "set", &port, "up"])?;
            ip(&["-n", &ns, "link", "set", &end, "name", "eth0"])?;
            let address = format!("{}/24", hosts.address(k));
            ip(&["-n", &ns, "addr", "add", &address, "dev", "eth0"])?;
            ip(&["-n", &ns, "link", "set", "eth0", "up"])?;
            ip(&["-n", &ns, "link", "set", "lo", "up"])?;
        }
        Ok(hosts)
    }

    fn switch(&self) -> String {
        format!("{}-sw", self.prefix)
    }

    /// Host `k`'s namespace.
    pub fn name(&self, k: usize) -> String {
        format!("{}-h{k}", self.prefix)
    }

    /// Host `k`'s address.
    pub fn address(&self, k: usize) -> String {
        format!("10.77.{}.{}", std::process::id() % 250, k + 1)
    }

    /// A command that runs `program` on host `k`.
    pub fn command(&self, k: usize, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name(k), program]);
        c
    }

    /// Host `k` is lost without a word, as a host that crashes or is cut off: its link
    /// goes down first (so that nothing it sends on dying, no FIN nor RST, reaches the
    /// others), then every process in its namespace is killed.
    pub fn lose(&self, k: usize) {
        let ns = self.name(k);
        let _ = ip(&["-n", &ns, "link", "set", "eth0", "down"]);
        if let Ok(out) = Command::new("ip").args(["netns", "pids", &ns]).output() {
            for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
                let _ = Command::new("kill").args(["-KILL", pid]).status();
            }
        }
    }

    /// Host `k` comes back after [`Hosts::lose`]: its link up again (its processes are
    /// gone; the test starts new ones).
    pub fn returns(&self, k: usize) {
        let _ = ip(&["-n", &self.name(k), "link", "set", "eth0", "up"]);
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for k in 0..self.count {
            self.lose(k);
            let _ = ip(&["netns", "del", &self.name(k)]);
        }
        let _ = ip(&["netns", "del", &self.switch()]);
    }
}
