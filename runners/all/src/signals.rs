//! The signals a job's program answers, as the example binaries and a local cluster's
//! supervisor do: Ctrl-C drains (twice: ends at once), `SIGUSR1` keeps a savepoint.

/// Calls `handle` with the count of earlier deliveries each time `signal` arrives, on
/// a thread of its own; if the signal cannot be caught, warns that `otherwise`.
fn on_signal(signal: i32, otherwise: &str, mut handle: impl FnMut(usize) + Send + 'static) {
    let mut signals = match signal_hook::iterator::Signals::new([signal]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("warning: {otherwise}: {e}");
            return;
        }
    };
    std::thread::spawn(move || {
        for (earlier, _) in signals.forever().enumerate() {
            handle(earlier);
        }
    });
}

/// On the first Ctrl-C the running pipeline drains (stops reading its sources, fires
/// its windows, commits its output; with `--savepoint-dir` its sources stop where
/// they are and its state is kept there) and `run` returns; a second Ctrl-C ends the
/// program at once.
pub fn drain_on_ctrl_c() {
    on_signal(
        signal_hook::consts::SIGINT,
        "Ctrl-C will stop the program without draining",
        |presses| {
            if presses == 0 {
                eprintln!(
                    "draining: windows fire and output is committed; Ctrl-C again stops at once"
                );
                tidewater::runner::request_drain();
            } else {
                std::process::exit(130);
            }
        },
    );
}

/// On `SIGUSR1` the running pipeline keeps a savepoint and goes on (with
/// `--savepoint-dir DIR`, in `DIR/savepoint-<epoch>`: Flink's `flink savepoint`); under
/// `--local-cluster`, signal the supervisor.
pub fn savepoints_on_sigusr1() {
    on_signal(
        signal_hook::consts::SIGUSR1,
        "SIGUSR1 will not take a savepoint",
        |_| tidewater::runner::request_savepoint(),
    );
}
