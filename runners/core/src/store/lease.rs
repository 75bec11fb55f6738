//! One job per checkpoint store on an object store, where no file lock exists: a lease.
//!
//! The holder writes object `lock` (`{"holder": ..., "until_ms": ...}`) only where
//! none is (a conditional put), then renews it every [`RENEW`] with a put that
//! succeeds only over its own last version, each time until [`LEASE`] from now. A second
//! job finds a lease still valid and is refused, naming its holder; one that has run
//! out (its holder died without a word) is taken over, again by a put over the version
//! read, so that of two jobs taking it at once only one wins. The holder lets it go
//! when dropped. A holder whose renewal finds another's lease has lost it (it was
//! stalled past its lease): it says so; its manifests are then written only where
//! none is, so it cannot replace the new holder's checkpoints.
//!
//! A lease whose holder was a process of this very host (same host name and boot) that
//! is gone is taken over at once: a job restarted where it crashed does not wait.
//!
//! Hosts' clocks must agree to within a few seconds (as NTP keeps them).

use super::blobs::{Objects, Version};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tidewater::{Error, Result};

/// How long a lease lasts without renewal: how long a job restarted after its holder
/// died without a word waits for it.
pub const LEASE: Duration = Duration::from_secs(15);

/// How often the holder renews it.
pub const RENEW: Duration = Duration::from_secs(5);

const KEY: &str = "lock";

/// How long a lease lasts and how often it is renewed ([`LEASE`] and [`RENEW`]; tests
/// use shorter ones).
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// How long a lease lasts without renewal.
    pub lease: Duration,
    /// How often its holder renews it.
    pub renew: Duration,
}

impl Timing {
    /// A job's: [`LEASE`] and [`RENEW`].
    pub const JOB: Timing = Timing {
        lease: LEASE,
        renew: RENEW,
    };

    /// A holder renewing every `renew` always leaves more than this; less means it
    /// missed a renewal (it died, or is cut off).
    fn stale(&self) -> Duration {
        self.lease
            .saturating_sub(self.renew + Duration::from_secs(1))
    }
}

#[derive(Serialize, Deserialize)]
struct Body {
    holder: String,
    until_ms: u64,
    /// The holder's host name, boot and process id: a lease whose holder is a process
    /// of this host's current boot that is gone is taken over at once (a job restarted
    /// on the host where it crashed need not wait for it to run out).
    #[serde(default)]
    host: String,
    #[serde(default)]
    boot: String,
    #[serde(default)]
    pid: u32,
}

/// This process: host name, boot id, process id.
fn me() -> (String, String, u32) {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    (
        read("/proc/sys/kernel/hostname"),
        read("/proc/sys/kernel/random/boot_id"),
        std::process::id(),
    )
}

impl Body {
    /// Its holder is a process of this host's current boot that is gone.
    fn holder_gone(&self) -> bool {
        let (host, boot, _) = me();
        self.pid != 0
            && !boot.is_empty()
            && self.host == host
            && self.boot == boot
            && !std::path::Path::new(&format!("/proc/{}", self.pid)).exists()
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

fn body(holder: &str, lease: Duration) -> Vec<u8> {
    let (host, boot, pid) = me();
    serde_json::to_vec(&Body {
        holder: holder.to_string(),
        until_ms: now_ms() + lease.as_millis() as u64,
        host,
        boot,
        pid,
    })
    .expect("a lease encodes")
}

/// A held lease, renewed until dropped.
#[derive(Debug)]
pub struct Lease {
    stop: Arc<(Mutex<bool>, Condvar)>,
    renewer: Option<std::thread::JoinHandle<()>>,
}

/// Why a lease is not taken: held by another, until when.
#[derive(Debug)]
pub struct Held {
    /// Who holds it, as it wrote itself.
    pub holder: String,
    /// For how long still, unless renewed.
    pub left: Duration,
}

impl Lease {
    /// Takes the lease of the object store at `location` for `holder`, waiting for a
    /// holder that stopped renewing it (a job restarted on another host after its
    /// holder died): a lease that shows a missed renewal is waited out; one that looks
    /// fresh is looked at again a renewal later, and refused (`Ok(Err(..))`, naming
    /// its holder) if it was renewed. So a second job is refused within some
    /// [`RENEW`] + 2 s; a dead holder's lease is taken within [`LEASE`].
    pub fn acquire(location: &str, holder: &str) -> Result<std::result::Result<Lease, Held>> {
        Lease::acquire_with(location, holder, Timing::JOB)
    }

    /// [`Lease::acquire`] with `timing`.
    pub fn acquire_with(
        location: &str,
        holder: &str,
        timing: Timing,
    ) -> Result<std::result::Result<Lease, Held>> {
        let mut looked_again = false;
        loop {
            match Lease::take_with(location, holder, timing)? {
                Ok(lease) => return Ok(Ok(lease)),
                Err(held) if held.left < timing.stale() => {
                    tracing::info!(
                        "the lease of {location} is held by {}, who stopped renewing it: waiting {} ms for it to run out",
                        held.holder,
                        held.left.as_millis()
                    );
                    std::thread::sleep(held.left + Duration::from_millis(100));
                }
                Err(_) if !looked_again => {
                    looked_again = true;
                    std::thread::sleep(timing.renew + Duration::from_secs(2));
                }
                Err(held) => return Ok(Err(held)),
            }
        }
    }

    /// Takes the lease of the object store at `location` for `holder`; `Ok(Err(..))`
    /// names who holds it.
    pub fn take(location: &str, holder: &str) -> Result<std::result::Result<Lease, Held>> {
        Lease::take_with(location, holder, Timing::JOB)
    }

    /// [`Lease::take`] with `timing`.
    pub fn take_with(
        location: &str,
        holder: &str,
        timing: Timing,
    ) -> Result<std::result::Result<Lease, Held>> {
        let objects = Arc::new(Objects::open(location)?);
        let mut version = None;
        for _ in 0..3 {
            let over = match objects.get_versioned(KEY)? {
                None => None,
                Some((bytes, v)) => {
                    if let Ok(b) = serde_json::from_slice::<Body>(&bytes) {
                        let now = now_ms();
                        if b.until_ms > now && !b.holder_gone() {
                            return Ok(Err(Held {
                                holder: b.holder,
                                left: Duration::from_millis(b.until_ms - now),
                            }));
                        }
                    }
                    // Run out (or unreadable): taken over from its version.
                    Some(v)
                }
            };
            version = objects.put_versioned(KEY, &body(holder, timing.lease), over.as_ref())?;
            if version.is_some() {
                break;
            }
        }
        let Some(version) = version else {
            return Err(Error::Checkpoint {
                message: format!(
                    "cannot take the lease {}: other jobs keep taking it",
                    objects.name(KEY)
                ),
            });
        };
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let renewer = {
            let (stop, holder) = (stop.clone(), holder.to_string());
            std::thread::Builder::new()
                .name("tidewater-lease".into())
                .spawn(move || renew(&objects, &holder, version, timing, &stop))
                .map_err(|e| Error::Internal(format!("cannot start the lease's renewer: {e}")))?
        };
        Ok(Ok(Lease {
            stop,
            renewer: Some(renewer),
        }))
    }
}

/// Renews the lease every [`RENEW`] until told to stop; then lets it go.
fn renew(
    objects: &Objects,
    holder: &str,
    mut version: Version,
    timing: Timing,
    stop: &(Mutex<bool>, Condvar),
) {
    let mut stopped = stop.0.lock().unwrap_or_else(|p| p.into_inner());
    loop {
        // Told to stop before it waited (a lease dropped at once) is seen here too.
        stopped = stop
            .1
            .wait_timeout_while(stopped, timing.renew, |stopped| !*stopped)
            .unwrap_or_else(|p| p.into_inner())
            .0;
        if *stopped {
            // Let go only if it is still ours.
            if matches!(objects.get_versioned(KEY), Ok(Some((_, v))) if v == version) {
                let _ = objects.remove(KEY);
            }
            return;
        }
        match objects.put_versioned(KEY, &body(holder, timing.lease), Some(&version)) {
            Ok(Some(v)) => version = v,
            Ok(None) => {
                tracing::error!(
                    "the lease {} was taken by another job while this one held it (this one stalled past its {:?}): this job's manifests will not replace that one's",
                    objects.name(KEY),
                    timing.lease
                );
                return;
            }
            Err(e) => tracing::warn!("cannot renew the lease {}: {e}", objects.name(KEY)),
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        *self.stop.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.stop.1.notify_all();
        if let Some(t) = self.renewer.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    /// Short leases: 4 s, renewed every second (a lease shows a missed renewal below
    /// 2 s left).
    const QUICK: Timing = Timing {
        lease: Duration::from_secs(4),
        renew: Duration::from_secs(1),
    };

    /// Writes a lease of another host's process, `left` from running out.
    fn plant(location: &str, left: Duration) {
        let objects = Objects::open(location).unwrap();
        let b = Body {
            holder: "process 7 on elsewhere".into(),
            until_ms: now_ms() + left.as_millis() as u64,
            host: "elsewhere".into(),
            boot: "another-boot".into(),
            pid: 7,
        };
        objects
            .put_versioned(KEY, &serde_json::to_vec(&b).unwrap(), None)
            .unwrap()
            .unwrap();
    }

    #[test]
    fn the_jobs_timing_leaves_a_renewal_to_miss() {
        assert_eq!(Timing::JOB.stale(), Duration::from_secs(9));
        // A live holder, renewing on time, always shows more than `stale` left.
        assert!(Timing::JOB.lease - Timing::JOB.renew > Timing::JOB.stale());
    }

    #[test]
    fn a_lease_its_holder_stopped_renewing_is_waited_out_and_taken() {
        let location = "memory:///lease-tests/stale";
        plant(location, Duration::from_secs(1));
        let started = Instant::now();
        let lease = Lease::acquire_with(location, "the new one", QUICK).unwrap();
        assert!(lease.is_ok(), "{:?}", lease.err());
        let waited = started.elapsed();
        assert!(
            waited >= Duration::from_millis(900) && waited < Duration::from_secs(3),
            "{waited:?}"
        );
    }

    #[test]
    fn a_lease_that_is_renewed_refuses_a_second_job_naming_its_holder() {
        let location = "memory:///lease-tests/renewed";
        let first = Lease::take_with(location, "the first job", QUICK)
            .unwrap()
            .unwrap();
        let started = Instant::now();
        let held = Lease::acquire_with(location, "a second job", QUICK)
            .unwrap()
            .unwrap_err();
        assert_eq!(held.holder, "the first job");
        assert!(held.left > QUICK.stale(), "{:?}", held.left);
        // Looked at again a renewal later, then refused.
        assert!(started.elapsed() >= QUICK.renew, "{:?}", started.elapsed());
        drop(first);
        // Let go: the next one takes it at once.
        let started = Instant::now();
        assert!(Lease::acquire_with(location, "a third job", QUICK)
            .unwrap()
            .is_ok());
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn a_lease_that_looks_fresh_but_is_not_renewed_is_taken_when_it_runs_out() {
        let location = "memory:///lease-tests/fresh-dead";
        plant(location, QUICK.lease);
        let started = Instant::now();
        assert!(Lease::acquire_with(location, "the new one", QUICK)
            .unwrap()
            .is_ok());
        let waited = started.elapsed();
        assert!(
            waited >= QUICK.lease - Duration::from_millis(500)
                && waited < QUICK.lease + Duration::from_secs(3),
            "{waited:?}"
        );
    }
}
