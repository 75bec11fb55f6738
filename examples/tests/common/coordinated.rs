//! A job run by a coordinator across network namespaces (issue 37): agents on hosts
//! `0..n`, the coordinator and an S3 server (moto, `.ci/s3-server`) on a control host,
//! checkpoints in a bucket there, the crash job's output in a directory every host sees.

use super::netns::Hosts;
use super::Run;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

pub struct Coordinated<'h> {
    pub hosts: &'h Hosts,
    /// The control host.
    pub control: usize,
    pub run: Run,
    /// `http://ADDRESS:PORT` of the S3 server.
    pub endpoint: String,
    /// Where agents register.
    pub coordinator: String,
    secret: PathBuf,
    s3: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Coordinated<'_> {
    fn drop(&mut self) {
        let _ = self.s3.kill();
        let _ = self.s3.wait();
    }
}

impl<'h> Coordinated<'h> {
    /// The S3 server on host `control` (a bucket `bucket` made), and a run of the crash
    /// job of `records` records checkpointing there.
    pub fn new(hosts: &'h Hosts, control: usize, records: u64) -> Self {
        let address = hosts.address(control);
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.ci/s3-server");
        let s3 = hosts
            .command(control, script.to_str().unwrap())
            .arg("9000")
            .env("TIDEWATER_S3_HOST", &address)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let endpoint = format!("http://{address}:9000");
        let mut run = Run::new();
        run.records = records;
        run.ckpt = "s3://coordinated/checkpoints".into();
        run.env = vec![
            ("AWS_ENDPOINT", endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ];
        let dir = tempfile::tempdir().unwrap();
        let secret = super::secret_file(dir.path(), 0o600);
        let made = Coordinated {
            hosts,
            control,
            run,
            coordinator: format!("{address}:7100"),
            endpoint,
            secret,
            s3,
            _dir: dir,
        };
        made.bucket("coordinated");
        made
    }

    /// Makes bucket `name` on the S3 server (waiting for it to answer).
    pub fn bucket(&self, name: &str) {
        let script = format!(
            "import time, urllib.request as u\nfor _ in range(1200):\n    try:\n        u.urlopen(u.Request('{}/{name}', method='PUT')); break\n    except Exception: time.sleep(0.1)\nelse: raise SystemExit('no S3 server')",
            self.endpoint
        );
        let made = self
            .hosts
            .command(self.control, "python3")
            .args(["-c", &script])
            .status()
            .unwrap();
        assert!(
            made.success(),
            "the S3 server on the control host did not start"
        );
    }

    /// The crash job on host `k` with `extra` flags (after the run's), stderr piped.
    pub fn job(&self, k: usize, extra: &[&str]) -> Child {
        self.command(k, extra).spawn().unwrap()
    }

    /// [`Coordinated::job`]'s command.
    pub fn command(&self, k: usize, extra: &[&str]) -> Command {
        self.command_of(&self.run, k, extra)
    }

    /// The crash job of `run` (its flags, the S3 server's environment) on host `k`,
    /// with `extra` flags.
    pub fn command_of(&self, run: &Run, k: usize, extra: &[&str]) -> Command {
        let secret = format!("--cluster-secret-file={}", self.secret.display());
        let mut args = vec!["--workers=1", secret.as_str()];
        args.extend_from_slice(extra);
        let mut c = self.hosts.command(k, env!("CARGO_BIN_EXE_crash_job"));
        c.args(run.args(&args))
            .envs(run.env.iter().map(|(k, v)| (*k, v.as_str())))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    }

    /// The coordinator, on the control host.
    pub fn coordinator(&self, expect: usize, min: usize, extra: &[&str]) -> Child {
        let mut args = vec![
            format!("--coordinate={}", self.coordinator),
            format!("--expect-hosts={expect}"),
            format!("--min-hosts={min}"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.job(self.control, &args)
    }

    /// The agent of host `k`.
    pub fn agent(&self, k: usize, extra: &[&str]) -> Child {
        let mut args = vec![format!("--coordinator={}", self.coordinator)];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        self.job(k, &args)
    }

    /// The job's process on host `k` (the agent's child), if one runs.
    pub fn job_pid(&self, k: usize) -> Option<i32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.hosts.name(k)])
            .output()
            .ok()?;
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse::<i32>().ok())
            .find(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("--process-id="))
            })
    }

    /// An HTTP request (`GET`, or an empty `POST`) made from the control host (the
    /// test's own namespace reaches no host), with the bearer `token` if given: the
    /// status code (0 if there was no answer) and the body.
    pub fn http(&self, method: &str, url: &str, token: Option<&str>) -> (u16, String) {
        let script = "import sys, urllib.request as u, urllib.error as e\n\
r = u.Request(sys.argv[2], method=sys.argv[1], data=b'' if sys.argv[1] == 'POST' else None)\n\
if len(sys.argv) > 3: r.add_header('Authorization', 'Bearer ' + sys.argv[3])\n\
try:\n    a = u.urlopen(r, timeout=10); print(a.status); print(a.read().decode())\n\
except e.HTTPError as x:\n    print(x.code); print(x.read().decode())\n\
except Exception as x:\n    print(0); print(x)";
        let out = self
            .hosts
            .command(self.control, "python3")
            .args(["-c", script, method, url])
            .args(token)
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let (code, body) = text.split_once('\n').unwrap_or((text.as_str(), ""));
        (code.trim().parse().unwrap_or(0), body.to_string())
    }
}
