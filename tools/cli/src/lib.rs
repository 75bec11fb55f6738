//! The `tidewater` command (Flink's `flink savepoint|stop|cancel`, over a job's status
//! server instead of a JobManager): it speaks the JSON API a job serves with
//! `--status-addr`.
//!
//! ```text
//! tidewater status    --job http://127.0.0.1:8081
//! tidewater explain   --job URL                       # why hasn't my window fired?
//! tidewater savepoint --job URL [--token-file FILE]   # prints the savepoint's path
//! tidewater stop      --job URL [--token-file FILE]   # waits for the end; prints the final savepoint
//! tidewater cancel    --job URL [--token-file FILE]
//! tidewater state     --job URL --id ID --key KEY     # a key's state, as of the last checkpoint
//! tidewater savepoint inspect DIR [--uid ID] [--key K] [--format json|csv]
//! tidewater savepoint check DIR -- ./my_job --runner=native ...
//! ```
//!
//! `savepoint inspect` reads a savepoint (or checkpoint directory) offline: every
//! stateful step's state per key and window, without the pipeline's code (keys as text
//! where they are text, else hex; a stateful DoFn's cells as JSON; a grouping's
//! contents by size; a job binary's `--inspect-savepoint` shows them through the
//! pipeline's types). `savepoint check` runs the new version of the job, given after
//! `--`, with `--check-savepoint DIR`: only its binary knows its plan.
//!
//! The control commands present the job's token (`--token-file`, or the environment
//! variable `TIDEWATER_CONTROL_TOKEN`) as the job was started with
//! (`--control-token-file`). The library is the command: [`run`] takes its arguments
//! and returns what it prints.

use clap::{Parser, Subcommand};
use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The environment variable holding the token, as the job's.
pub const TOKEN_ENV: &str = "TIDEWATER_CONTROL_TOKEN";

/// `tidewater`'s arguments.
#[derive(Debug, Parser)]
#[command(
    name = "tidewater",
    about = "Watch and control a running Tidewater job"
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// What the job is doing: state, records, watermarks, checkpoints, restarts.
    Status(Target),
    /// Why a window has not fired: per grouping, its oldest open window and what its
    /// trigger waits for; per stateful DoFn, its earliest timers; which source holds
    /// the watermark back; what was dropped late.
    Explain(Target),
    /// Keep the job's next complete checkpoint as a savepoint and print its path; or,
    /// with `inspect` or `check`, read a savepoint offline.
    Savepoint(SavepointArgs),
    /// Stop the job (with a savepoint under its --savepoint-dir); waits for its end.
    Stop(Control),
    /// End the job at once (what it committed stays).
    Cancel(Control),
    /// The state a step holds for a key, as of the job's last completed checkpoint.
    State(StateQuery),
}

#[derive(Debug, clap::Args)]
struct StateQuery {
    #[command(flatten)]
    target: Target,
    /// The file holding the job's control token (else TIDEWATER_CONTROL_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// The step's state id (its name, or the uid pinned on it).
    #[arg(long)]
    id: String,
    /// The key, as the job shows it (a string key without its quotes).
    #[arg(long)]
    key: String,
}

#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
struct SavepointArgs {
    #[command(subcommand)]
    offline: Option<Offline>,
    /// The job's status server, e.g. http://127.0.0.1:8081 (its first line says).
    #[arg(long, env = "TIDEWATER_JOB")]
    job: Option<String>,
    /// The file holding the job's control token (else TIDEWATER_CONTROL_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// How long to wait for the savepoint.
    #[arg(long, default_value = "120", value_name = "SECONDS")]
    wait: u64,
}

/// What `tidewater savepoint` does with a savepoint directory.
#[derive(Debug, Subcommand)]
enum Offline {
    /// Print the state a savepoint (or checkpoint directory) holds, per step, key and
    /// window.
    Inspect {
        /// The savepoint or checkpoint directory.
        dir: PathBuf,
        /// Only this step's state id (its name, or the uid pinned on it).
        #[arg(long, value_name = "ID")]
        uid: Option<String>,
        /// Only this key (as printed; a string key with or without its quotes).
        #[arg(long, value_name = "KEY")]
        key: Option<String>,
        /// json (one object per line) or csv.
        #[arg(long, default_value = "json", value_parser = ["json", "csv"])]
        format: String,
    },
    /// Say what restoring the savepoint into a job would do, per stateful step: runs
    /// the job's command, given after `--`, with `--check-savepoint DIR`.
    Check {
        /// The savepoint or checkpoint directory.
        dir: PathBuf,
        /// The job's command line (its binary and flags), after `--`.
        #[arg(last = true, required = true, value_name = "JOB")]
        command: Vec<std::ffi::OsString>,
    },
}

#[derive(Debug, clap::Args)]
struct Target {
    /// The job's status server, e.g. http://127.0.0.1:8081 (its first line says).
    #[arg(long, env = "TIDEWATER_JOB")]
    job: String,
}

#[derive(Debug, clap::Args)]
struct Control {
    #[command(flatten)]
    target: Target,
    /// The file holding the job's control token (else TIDEWATER_CONTROL_TOKEN).
    #[arg(long, value_name = "FILE")]
    token_file: Option<PathBuf>,
    /// How long to wait for the savepoint or the end.
    #[arg(long, default_value = "120", value_name = "SECONDS")]
    wait: u64,
}

/// A job's status server.
pub struct Job {
    base: String,
    agent: ureq::Agent,
}

impl Job {
    /// The job serving at `url` (`http://host:port`, with or without a trailing `/`).
    pub fn at(url: &str) -> Result<Job, String> {
        let base = url.trim_end_matches('/').to_string();
        if !base.starts_with("http://") && !base.starts_with("https://") {
            return Err(format!(
                "--job {url}: give the status server's URL, e.g. http://127.0.0.1:8081"
            ));
        }
        let agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(10)))
            .build()
            .into();
        Ok(Job { base, agent })
    }

    /// `GET /api/job`.
    pub fn status(&self) -> Result<Value, String> {
        let url = format!("{}/api/job", self.base);
        let mut response = self
            .agent
            .get(&url)
            .call()
            .map_err(|e| format!("cannot reach the job at {}: {e}", self.base))?;
        let status = response.status();
        let body = response
            .body_mut()
            .read_to_string()
            .map_err(|e| format!("reading {url}: {e}"))?;
        if !status.is_success() {
            return Err(format!("{url} answered {status}: {body}"));
        }
        serde_json::from_str(&body).map_err(|e| format!("{url} did not answer JSON: {e}"))
    }

    /// `GET /api/state?id=ID&key=KEY` with `token`: the state step `id` holds for `key`
    /// as of the job's last completed checkpoint, or why the job refused.
    pub fn state(&self, id: &str, key: &str, token: &str) -> Result<Value, String> {
        let url = format!("{}/api/state", self.base);
        let mut response = self
            .agent
            .get(&url)
            .query("id", id)
            .query("key", key)
            .header("Authorization", format!("Bearer {token}"))
            .call()
            .map_err(|e| format!("cannot reach the job at {}: {e}", self.base))?;
        let status = response.status();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        let value: Value = serde_json::from_str(&body).unwrap_or(Value::String(body));
        if status.is_success() {
            Ok(value)
        } else {
            let message = value["message"]
                .as_str()
                .map(str::to_string)
                .unwrap_or_else(|| value.to_string());
            Err(format!("the job refused ({status}): {message}"))
        }
    }

    /// `POST /api/<action>` with `token`; the job's answer, or why it refused.
    pub fn control(&self, action: &str, token: &str) -> Result<String, String> {
        let url = format!("{}/api/{action}", self.base);
        let mut response = self
            .agent
            .post(&url)
            .header("Authorization", format!("Bearer {token}"))
            .send_empty()
            .map_err(|e| format!("cannot reach the job at {}: {e}", self.base))?;
        let status = response.status();
        let body = response.body_mut().read_to_string().unwrap_or_default();
        let message = serde_json::from_str::<Value>(&body)
            .ok()
            .and_then(|v| v["message"].as_str().map(str::to_string))
            .unwrap_or(body);
        if status.is_success() {
            Ok(message)
        } else {
            Err(format!("the job refused ({status}): {message}"))
        }
    }
}

/// The token: from `file`, else from [`TOKEN_ENV`].
fn token(file: &Option<PathBuf>) -> Result<String, String> {
    match file {
        Some(f) => std::fs::read_to_string(f)
            .map(|t| t.trim().to_string())
            .map_err(|e| format!("--token-file {}: {e}", f.display())),
        None => std::env::var(TOKEN_ENV).map_err(|_| {
            format!("control needs the job's token: --token-file FILE or {TOKEN_ENV}")
        }),
    }
}

/// The savepoints a status lists.
fn savepoints(status: &Value) -> Vec<String> {
    status["savepoints"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["path"].as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Polls `job` until `done` says what to print (at most `wait`).
fn until(
    job: &Job,
    wait: Duration,
    what: &str,
    done: impl Fn(&Value) -> Option<Result<String, String>>,
) -> Result<String, String> {
    let started = Instant::now();
    loop {
        match job.status() {
            Ok(s) => {
                if let Some(r) = done(&s) {
                    return r;
                }
            }
            // The job's server goes with the job (unless it lingers).
            Err(e) if started.elapsed() > Duration::from_secs(1) => {
                return Err(format!("{what}: {e}"))
            }
            Err(_) => {}
        }
        if started.elapsed() > wait {
            return Err(format!("{what}: not within {wait:?}"));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Runs `tidewater` with `args` (the first is the program's name); what it prints.
pub fn run<I, T>(args: I) -> Result<String, String>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        // Asked for: printed, with success.
        Err(e)
            if matches!(
                e.kind(),
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(e.to_string())
        }
        Err(e) => return Err(e.to_string()),
    };
    match cli.command {
        Command::Status(t) => {
            let s = Job::at(&t.job)?.status()?;
            Ok(summary(&s))
        }
        Command::Explain(t) => {
            let s = Job::at(&t.job)?.status()?;
            let mut out = String::new();
            for w in s["why"].as_array().into_iter().flatten() {
                for l in w["lines"].as_array().into_iter().flatten() {
                    out.push_str(l.as_str().unwrap_or_default());
                    out.push('\n');
                }
                out.push('\n');
            }
            if out.is_empty() {
                out = "no grouping or stateful DoFn has reported yet (a job without any, or one that just started)\n".into();
            }
            Ok(out)
        }
        Command::State(q) => {
            let job = Job::at(&q.target.job)?;
            let token = token(&q.token_file)?;
            let v = job.state(&q.id, &q.key, &token)?;
            Ok(serde_json::to_string_pretty(&v).expect("JSON prints") + "\n")
        }
        Command::Savepoint(SavepointArgs {
            offline: Some(offline),
            ..
        }) => read_offline(offline),
        Command::Savepoint(c) => {
            let job = c.job.as_deref().ok_or(
                "give --job URL (the status server of the job to take a savepoint of), or inspect or check a savepoint directory",
            )?;
            let job = Job::at(job)?;
            let token = token(&c.token_file)?;
            let before = savepoints(&job.status()?);
            let accepted = job.control("savepoint", &token)?;
            let wait = Duration::from_secs(c.wait);
            let path = until(&job, wait, "the savepoint", |s| {
                let now = savepoints(s);
                if now.len() > before.len() {
                    return Some(Ok(now[before.len()].clone()));
                }
                (s["state"] != "running" && s["state"] != "restarting").then(|| {
                    Err(format!(
                        "the job ended ({}) before the savepoint was written",
                        s["state"]
                    ))
                })
            })?;
            Ok(format!("{accepted}\nsavepoint: {path}\n"))
        }
        Command::Stop(c) => {
            let job = Job::at(&c.target.job)?;
            let token = token(&c.token_file)?;
            let accepted = job.control("stop", &token)?;
            let wait = Duration::from_secs(c.wait);
            let end = until(&job, wait, "the stop", |s| match s["state"].as_str() {
                Some("finished") => Some(Ok(match savepoints(s).last() {
                    Some(p) => format!("stopped; savepoint: {p}\n"),
                    None => "stopped\n".to_string(),
                })),
                Some("failed") => Some(Err(format!(
                    "the job failed while stopping: {}",
                    s["error"].as_str().unwrap_or("?")
                ))),
                _ => None,
            })?;
            Ok(format!("{accepted}\n{end}"))
        }
        Command::Cancel(c) => {
            let job = Job::at(&c.target.job)?;
            let accepted = job.control("cancel", &token(&c.token_file)?)?;
            Ok(format!("{accepted}\n"))
        }
    }
}

/// `tidewater savepoint inspect|check`.
fn read_offline(offline: Offline) -> Result<String, String> {
    use tidewater_runners_core::savepoint::{render, Filter, Reader};
    match offline {
        Offline::Inspect {
            dir,
            uid,
            key,
            format,
        } => {
            let reader = Reader::open(&dir).map_err(|e| e.to_string())?;
            let entries = reader
                .entries(None, &Filter { id: uid, key })
                .map_err(|e| e.to_string())?;
            render(&entries, &format).map_err(|e| e.to_string())
        }
        Offline::Check { dir, command } => {
            let (program, args) = command.split_first().expect("clap requires the command");
            let mut flag = std::ffi::OsString::from("--check-savepoint=");
            flag.push(&dir);
            let out = std::process::Command::new(program)
                .args(args)
                .arg(flag)
                .output()
                .map_err(|e| format!("cannot run {}: {e}", program.to_string_lossy()))?;
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if out.status.success() {
                Ok(text)
            } else {
                Err(text)
            }
        }
    }
}

/// A few lines about the job.
fn summary(s: &Value) -> String {
    let mut out = format!(
        "job {} ({} runner): {}, up {:.1} s, {} process(es), {} worker(s)\n",
        s["job"].as_str().unwrap_or("?"),
        s["runner"].as_str().unwrap_or("?"),
        s["state"].as_str().unwrap_or("?"),
        s["uptime_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        s["processes"],
        s["workers"].as_array().map_or(0, |w| w.len()),
    );
    if let Some(e) = s["error"].as_str() {
        out.push_str(&format!("error: {e}\n"));
    }
    let workers = s["workers"].as_array().cloned().unwrap_or_default();
    let read: u64 = workers
        .iter()
        .filter_map(|w| w["records_read"].as_u64())
        .sum();
    out.push_str(&format!("records read: {read}\n"));
    if let Some(w0) = workers.iter().find(|w| w["worker"] == 0) {
        if let Some(c) = w0["checkpoints"].as_array().and_then(|c| c.last()) {
            out.push_str(&format!(
                "last checkpoint: epoch {} ({} ms, {} bytes); {} in all\n",
                c["epoch"], c["duration_ms"], c["bytes"], w0["checkpoints_completed"]
            ));
        }
    }
    if let Some(r) = s["restarts"].as_array().and_then(|r| r.last()) {
        out.push_str(&format!(
            "restarts: {} (the last: {})\n",
            s["restarts_total"],
            r["reason"].as_str().unwrap_or("?")
        ));
    }
    for p in savepoints(s) {
        out.push_str(&format!("savepoint: {p}\n"));
    }
    out
}
