//! Children: each measurement runs in a process of its own (this binary again, or
//! the `nexmark` binary), started and read here.

use super::*;

pub(super) fn nexmark_query(workload: &str) -> Option<&str> {
    workload.strip_prefix("nexmark-q")
}

/// The command of a child running `setting`: this binary for the word counts, the
/// `nexmark` binary for Nexmark.
pub(super) fn child_command(
    args: &Args,
    setting: &Setting<'_>,
    validate: bool,
    input: Option<&Input>,
    events: u64,
    out: &Path,
) -> anyhow::Result<Command> {
    let options = setting.options(validate);
    let mut cmd;
    if let Some(q) = nexmark_query(setting.workload) {
        let bin = match &args.nexmark_bin {
            Some(b) => b.clone(),
            None => std::env::current_exe()?.with_file_name("nexmark"),
        };
        if !bin.exists() {
            bail!(
                "no nexmark binary at {}: build it with `cargo build{} -p tidewater-nexmark` or give --nexmark-bin",
                bin.display(),
                if cfg!(debug_assertions) { "" } else { " --release" }
            );
        }
        cmd = Command::new(bin);
        cmd.args(["--query", q, "--events", &events.to_string()]);
        if q == "12" {
            // Outputs compared between runners: the same panes on each.
            cmd.arg("--scripted-clock");
        }
    } else {
        let input = input.context("no input was generated")?;
        cmd = Command::new(std::env::current_exe()?);
        cmd.args(["--workload", setting.workload])
            .arg("--input")
            .arg(&input.text)
            .arg("--child-out")
            .arg(out);
    }
    if nexmark_query(setting.workload).is_some() {
        cmd.args(["--runner", &options.runner]);
        if options.no_validate {
            cmd.arg("--no-validate");
        }
        for (k, v) in &options.runner_options {
            cmd.arg("--runner-option").arg(format!("{k}={v}"));
        }
        if setting.state_backend == tidewater::StateBackendKind::Fjall {
            cmd.arg("--state-backend=fjall");
        }
        if options.runner != "direct" {
            cmd.arg(format!("--workers={}", setting.workers));
            if setting.processes > 1 {
                cmd.arg(format!("--local-cluster={}", setting.processes));
                tls_flags(&mut cmd, setting);
            }
        }
        if let (Some(ms), Some(dir)) = (setting.checkpoint_ms, &options.engine.checkpoint_dir) {
            let mut dir = dir.join(setting.workload);
            match setting.checkpoint_store {
                // Nothing of an earlier run there is restored.
                Some(_) => dir.push(fresh_name()),
                None => {
                    let _ = std::fs::remove_dir_all(&dir);
                }
            }
            let interval = if options.runner == "microbatch" {
                "--batch-interval"
            } else {
                "--checkpoint-interval"
            };
            cmd.arg(format!("{interval}={ms}ms"))
                .arg(format!("--checkpoint-dir={}", dir.display()));
            if setting.at_least_once {
                cmd.arg("--guarantee=at-least-once");
            }
        }
    } else {
        setting_flags(&mut cmd, setting, validate);
    }
    Ok(cmd)
}

/// The flags from which this binary's child builds `setting`'s options again.
pub(super) fn setting_flags(cmd: &mut Command, setting: &Setting<'_>, validate: bool) {
    if validate {
        cmd.arg("--validate");
    }
    cmd.args(["--runner", setting.runner]);
    cmd.args(["--workers", &setting.workers.to_string()]);
    cmd.args(["--processes", &setting.processes.to_string()]);
    for (k, v) in setting.runner_options {
        cmd.arg("--runner-option").arg(format!("{k}={v}"));
    }
    if setting.state_backend == tidewater::StateBackendKind::Fjall {
        cmd.arg("--state-backend=fjall");
    }
    if let Some(ms) = setting.checkpoint_ms {
        cmd.arg(format!("--checkpoint-ms={ms}"));
    }
    if setting.over_veth {
        cmd.arg("--over-veth");
    }
    if let Some(url) = setting.checkpoint_store {
        // A new prefix per child: nothing of an earlier run there is restored, and a
        // local cluster's processes (started with the child's flags) share it.
        cmd.arg(format!(
            "--checkpoint-store={}/{}",
            url.trim_end_matches('/'),
            fresh_name()
        ));
    }
    if setting.at_least_once {
        cmd.arg("--guarantee=at-least-once");
    }
    if let Some(n) = setting.state_value_bytes {
        cmd.arg(format!("--state-value-bytes={n}"));
    }
    if let Some(n) = setting.batch_records {
        cmd.arg(format!("--batch-records={n}"));
    }
    cmd.arg(format!(
        "--watermark-drift-ms={}",
        setting.watermark_drift_ms.unwrap_or(0)
    ));
    tls_flags(cmd, setting);
    if setting.status_poll {
        cmd.arg("--status-poll");
    }
}

/// Fetches a running job's `/api/job` and `/metrics` every second until dropped.
struct StatusPoller {
    stop: std::sync::mpsc::Sender<()>,
}

impl StatusPoller {
    fn start(addr: &str) -> Self {
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let base = format!("http://{addr}");
        std::thread::spawn(move || loop {
            if stopped.recv_timeout(Duration::from_secs(1)).is_ok() {
                return;
            }
            for path in ["/api/job", "/metrics"] {
                // The server is up once the run has started; a refused fetch before
                // that is no error.
                if let Ok(mut r) = ureq::get(&format!("{base}{path}")).call() {
                    let _ = r.body_mut().read_to_string();
                }
            }
        });
        StatusPoller { stop }
    }
}

impl Drop for StatusPoller {
    fn drop(&mut self) {
        let _ = self.stop.send(());
    }
}

/// `--tls-cert`, `--tls-key` and `--tls-ca` of `setting`, if it has them.
fn tls_flags(cmd: &mut Command, setting: &Setting<'_>) {
    if let Some([cert, key, ca]) = setting.tls {
        cmd.arg("--tls-cert").arg(cert);
        cmd.arg("--tls-key").arg(key);
        cmd.arg("--tls-ca").arg(ca);
    }
}

/// Runs a child; its stdout on success, its stderr's last lines as the error otherwise.
pub(super) fn run_child(mut cmd: Command) -> anyhow::Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("cannot start {:?}", cmd.get_program()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
        // The child's error and its causes, else the last lines it printed.
        let from = lines
            .iter()
            .position(|l| l.starts_with("Error: "))
            .unwrap_or(lines.len().saturating_sub(6));
        let mut shown: Vec<&str> = lines[from..].iter().take(8).copied().collect();
        if let Some(first) = shown.first_mut() {
            *first = first.strip_prefix("Error: ").unwrap_or(first);
        }
        if lines.len() - from > shown.len() {
            shown.push("...");
        }
        bail!("{} ({})", shown.join("\n"), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// In the child: one run of one word-count setting.
pub(super) fn child(args: &Args, mode: ChildMode) -> anyhow::Result<()> {
    let [workload] = args.workload.as_slice() else {
        bail!("a child runs one workload");
    };
    let out = args
        .child_out
        .as_ref()
        .context("a child needs --child-out")?;
    let mut setting = Setting {
        workload,
        runner: &args.runner[0],
        workers: args.workers[0],
        processes: args.processes[0],
        cluster_process: args.process_id.zip(args.hosts.clone()),
        runner_options: &args.runner_options,
        checkpoint_ms: args.checkpoint_ms.first().copied().filter(|ms| *ms > 0),
        at_least_once: args.guarantee.first().is_some_and(|g| g == "at-least-once"),
        state_backend: args.state_backend,
        batch_records: args.batch_records,
        state_value_bytes: args.state_value_bytes,
        watermark_drift_ms: drift(args),
        tls: args.tls(),
        status_poll: args.status_poll,
        checkpoint_store: args.checkpoint_store.as_deref(),
        role: Role::Local,
        over_veth: args.over_veth,
    };
    // `--over-veth`: this child coordinates agents it starts on a network of
    // namespaces (kept until the run ends); an agent serves its coordinator and ends.
    let mut _network = None;
    if let Some(address) = &args.coordinator {
        setting.role = Role::Agent(address.clone());
    } else if args.over_veth && setting.processes > 1 && setting.cluster_process.is_none() {
        let mut network = super::veth::Network::make(setting.processes as usize)?;
        let address = network.coordinator_address()?;
        let secret: String = (0..32).map(|_| format!("{:02x}", rand_byte())).collect();
        // This process proves it holds it too (the runner reads it from there).
        std::env::set_var("TIDEWATER_CLUSTER_SECRET", &secret);
        let own: Vec<String> = std::env::args().skip(1).collect();
        network.start_agents(&own, &address, &secret)?;
        setting.role = Role::Coordinate(address);
        _network = Some(network);
    }
    match (mode, workload.as_str()) {
        (ChildMode::Recovery, _) => return recovery_child(args, &setting, out),
        (ChildMode::Time, "latency") => return latency_run(args, &setting, out),
        _ => {}
    }
    let prefix = args.input.as_ref().context("a child needs --input")?;
    let workload = WordCount::from_name(workload).context("not a word-count workload")?;
    let input = Input::open(prefix)?;
    let options = cluster_options(&setting, args.validate, out);
    let checkpoint_dir = options.engine.checkpoint_dir.clone();
    let p = Pipeline::new(options);
    let text = input.text.to_str().context("non-UTF-8 path")?;
    let stamped = input.stamped.to_str().context("non-UTF-8 path")?;
    workload.build_padded(
        &p,
        text,
        stamped,
        mode == ChildMode::Output,
        setting.state_value_bytes,
    );
    if let Role::Agent(_) = setting.role {
        p.run()?;
        return Ok(());
    }
    match mode {
        ChildMode::Output => {
            let result = p.run()?;
            if let Some(dir) = &checkpoint_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            let mut lines = result.captured_values::<String>(LINES)?;
            lines.push(String::new());
            std::fs::write(out, lines.join("\n"))?;
        }
        ChildMode::Time => {
            let before = tidewater_examples::committed_count();
            let start = RunStart::now();
            let poller = p
                .options()
                .engine
                .status_addr
                .as_ref()
                .map(|addr| StatusPoller::start(addr));
            let t = Instant::now();
            let result = p.run()?;
            drop(poller);
            let seconds = t.elapsed().as_secs_f64();
            let expected = workload.expected_outputs(&input.meta);
            // A local cluster's sinks commit in its processes, not here: its output
            // was checked on the small input (captured through process 0).
            let outputs = if setting.processes > 1 {
                expected
            } else {
                tidewater_examples::committed_count() - before
            };
            if outputs != expected {
                bail!("the sink received {outputs} records, {expected} expected");
            }
            let mut record = BenchRecord::measured(
                workload.name(),
                setting.runner,
                setting.workers,
                input.meta.words,
                seconds,
                outputs,
                start,
            );
            setting.describe(&mut record, args.validate, &result);
            record.batch_records = setting
                .batch_records
                .filter(|_| setting.runner == "microbatch");
            record.state_value_bytes = setting
                .state_value_bytes
                .filter(|_| workload == WordCount::Stateful);
            if let Some(dir) = &checkpoint_dir {
                let _ = std::fs::remove_dir_all(dir);
            }
            std::fs::write(out, record.to_json_line())?;
        }
        ChildMode::Recovery => unreachable!("a recovery child returned above"),
    }
    Ok(())
}

/// `setting`'s options in a child; the processes of a local cluster share one
/// checkpoint directory next to `out`, which the supervisor starts empty (the name is
/// reused by the next setting: a checkpoint left there would be restored, a finished
/// job running again as a no-op).
pub(super) fn cluster_options(
    setting: &Setting<'_>,
    validate: bool,
    out: &Path,
) -> PipelineOptions {
    let mut options = setting.options(validate);
    if setting.processes > 1 && options.engine.checkpoint_dir.is_some() {
        let dir = out.with_extension("checkpoints");
        // Under an object store: the same name, as a prefix there.
        let dir = match setting.checkpoint_store {
            Some(url) => PathBuf::from(format!("{}{}", url.trim_end_matches('/'), dir.display())),
            None => dir,
        };
        // (A store's URL is new for each child: see `setting_flags`.)
        if setting.cluster_process.is_none()
            && setting.checkpoint_store.is_none()
            && !matches!(setting.role, Role::Agent(_))
        {
            let _ = std::fs::remove_dir_all(&dir);
        }
        options.engine.checkpoint_dir = Some(dir);
    }
    options
}

/// A name no earlier run used: `run-` and the time in nanoseconds.
fn fresh_name() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("run-{nanos}")
}

/// A random byte (the cluster secret of an `--over-veth` run), from the OS.
fn rand_byte() -> u8 {
    use std::io::Read;
    let mut b = [0u8; 1];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .expect("/dev/urandom reads");
    b[0]
}
