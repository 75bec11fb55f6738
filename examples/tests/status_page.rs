//! The status page in a real browser (issue 35): headless Chromium (Debian's
//! `chromium`, found on the PATH or in `TIDEWATER_CHROMIUM`; `.ci/chromium` installs
//! it) loads the page of a running local cluster twice, a second apart, and the test
//! reads what the page drew (its DOM after the script ran):
//!
//! - the job graph shows the pipeline's tasks;
//! - each load shows records per second; the records in and the watermark move between
//!   the two loads;
//! - a checkpoint appears;
//! - the state and the workers of both processes.
//!
//! With `TIDEWATER_SCREENSHOT=PATH` the same run also saves a screenshot of the page
//! there (the README's `docs/status-page.png`: see the README for the command).

mod common;

use common::*;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

/// Chromium, if it is here; without it the test is skipped loudly (and fails under CI,
/// whose script installs it).
fn chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TIDEWATER_CHROMIUM").filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let found = ["chromium", "chromium-browser"].iter().find_map(|c| {
        std::env::split_paths(&std::env::var_os("PATH")?)
            .map(|d| d.join(c))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "no Chromium under CI (.ci/run installs it with .ci/chromium)"
        );
        eprintln!("\n*** SKIPPED the status page test: no chromium (run .ci/chromium) ***\n");
    }
    found
}

/// Chromium, headless, on `url`, with `args`; what it printed. The flags keep it off
/// the network it cannot reach here, and away from any profile of the user's.
fn headless(browser: &PathBuf, profile: &std::path::Path, url: &str, args: &[&str]) -> String {
    let out = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--window-size=1300,1400",
            // The page's script runs for 2 s of the browser's time: it loads the graph
            // and the status (time stands still while a request is out).
            "--virtual-time-budget=2000",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .arg(url)
        .output()
        .expect("chromium runs");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The text of every element with `attr="value"`'s first child text, e.g. the
/// cells of a table row, in a crude but exact way: the DOM Chromium prints is the
/// page's own markup, escaped.
fn texts_after(dom: &str, marker: &str) -> Vec<String> {
    dom.match_indices(marker)
        .map(|(i, _)| {
            let rest = &dom[i + marker.len()..];
            let start = rest.find('>').map_or(0, |j| j + 1);
            let end = rest[start..].find('<').map_or(rest.len(), |j| start + j);
            rest[start..end].to_string()
        })
        .collect()
}

/// The cells of the row of table `id` whose first cell is `first` (the first such row).
fn row(dom: &str, id: &str, first: &str) -> Vec<String> {
    let table = &dom[dom.find(&format!("id=\"{id}\"")).expect("the table")..];
    let table = &table[..table.find("</table>").unwrap()];
    let at = table
        .find(&format!(">{first}</td>"))
        .unwrap_or_else(|| panic!("no row {first} in {id}: {table}"));
    let row_start = table[..at].rfind("<tr>").unwrap();
    let row = &table[row_start..];
    let row = &row[..row.find("</tr>").unwrap()];
    texts_after(row, "<td")
}

#[test]
fn the_page_shows_the_graph_rates_watermarks_and_checkpoints_in_a_browser() {
    let Some(browser) = chromium() else { return };
    let _s = serial();
    let profile = tempfile::tempdir().unwrap();
    let mut run = Run::on("native");
    // 16 s at 10,000 records/s: the page must show every worker's rates and a completed
    // checkpoint twice while the job runs, each load a headless Chromium start (a
    // clean-clone CI run once ran out of the 8 s that 80,000 records gave it).
    run.records = 160_000;
    let mut child = run
        .command(&[
            "--status-addr=127.0.0.1:0",
            "--status-linger=2s",
            "--local-cluster=2",
            "--workers=2",
        ])
        .spawn()
        .unwrap();
    let (base, _stderr) = status_base(&mut child, "the job whose page is loaded");
    let page = format!("{base}/");
    // Until every worker has published twice (its rates need two figures) and a
    // checkpoint completed.
    let started = Instant::now();
    let dom_when = |ok: &dyn Fn(&str) -> bool| loop {
        let dom = headless(&browser, profile.path(), &page, &["--dump-dom"]);
        if ok(&dom) {
            return dom;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the page did not show it within 30 s:\n{dom}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let ready = |dom: &str| {
        dom.contains("id=\"checkpoints\"")
            && !row_or_none(dom, "checkpoints").is_empty()
            && texts_after(dom, "class=\"sub\"")
                .iter()
                .filter(|t| t.starts_with("in ") && !t.starts_with("in –"))
                .count()
                == 4
            // The source's first row has its rate (a worker's rates need two of its
            // figures; the last CI run once loaded the page before it had them).
            && dom.contains("id=\"sources\"")
            && dom.contains(">Generate</td>")
            && row(dom, "sources", "Generate")[3]
                .replace(',', "")
                .parse::<u64>()
                .is_ok()
    };
    let one = dom_when(&ready);
    std::thread::sleep(Duration::from_millis(1_200));
    let two = dom_when(&ready);
    if let Some(path) = std::env::var_os("TIDEWATER_SCREENSHOT") {
        let path = PathBuf::from(path);
        let _ = headless(
            &browser,
            profile.path(),
            &page,
            &[&format!("--screenshot={}", path.display())],
        );
        assert!(path.is_file(), "no screenshot at {}", path.display());
    }
    for dom in [&one, &two] {
        // The job graph: one box per task, with its kind and its rates.
        for task in [
            "Generate",
            "RunningCount",
            "CountPerWindow/Combine",
            "AllLines",
        ] {
            assert!(
                dom.contains(&format!("data-task=\"{task}\"")),
                "no {task} in the graph:\n{dom}"
            );
        }
        assert!(dom.contains(">stateful ParDo + 1 fused<"), "{dom}");
        assert!(dom.contains(">by key<"), "{dom}");
        assert!(dom.contains(">by key, combined first<"), "{dom}");
        assert!(dom.contains("class=\"state running\""), "{dom}");
        assert!(
            dom.contains("native runner, 2 processes, 4 workers"),
            "{dom}"
        );
        // Records per second of the source, from the figures of both processes.
        let generate = row(dom, "sources", "Generate");
        let per_second: u64 = generate[3]
            .replace(',', "")
            .parse()
            .unwrap_or_else(|e| panic!("read/s {generate:?}: {e}"));
        assert!(per_second > 0, "{generate:?}");
    }
    // Between the two loads the records and the watermark moved.
    let read = |dom: &str| row(dom, "stages", "Generate")[2].clone();
    let watermark = |dom: &str| row(dom, "stages", "Generate")[10].clone();
    // Busy now: a share of the time, per stage.
    let busy = row(&two, "stages", "Generate")[6].clone();
    assert!(
        busy.strip_suffix('%')
            .and_then(|b| b.parse::<u64>().ok())
            .is_some_and(|b| b <= 100),
        "busy: {busy}"
    );
    assert_ne!(read(&one), read(&two), "the records did not move");
    assert_ne!(
        watermark(&one),
        watermark(&two),
        "the watermark did not move"
    );
    let epoch: u64 = row_or_none(&two, "checkpoints")[0].parse().unwrap();
    assert!(epoch >= 1, "{two}");
    let status = child.wait().unwrap();
    assert!(status.success(), "the job failed");
    let got = run.lines();
    let want = reference_of(run.records);
    assert!(
        got == want,
        "the job whose page was loaded: {}",
        difference(&got, &want)
    );
}

/// The cells of the first data row of table `id`, or none if it shows "none yet".
fn row_or_none(dom: &str, id: &str) -> Vec<String> {
    let table = &dom[dom.find(&format!("id=\"{id}\"")).expect("the table")..];
    let table = &table[..table.find("</table>").unwrap()];
    if table.contains("none yet") {
        return Vec::new();
    }
    match table.find("<td") {
        Some(i) => {
            let row = &table[i..];
            texts_after(&row[..row.find("</tr>").unwrap()], "<td")
        }
        None => Vec::new(),
    }
}

/// The "why hasn't my window fired?" panel, in the browser, names the idle source that
/// holds a window back (`held_window`: a source that reads nothing and holds the
/// watermark at 0).
#[test]
fn the_why_panel_names_the_idle_source_holding_a_window_back() {
    let Some(browser) = chromium() else { return };
    let profile = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_held_window"))
        .args([
            "--runner=native",
            "--workers=2",
            "--status-addr=127.0.0.1:0",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let _kill = KillOnDrop(child.id());
    let (base, _stderr) = status_base(&mut child, "held_window");
    let started = Instant::now();
    let dom = loop {
        let dom = headless(
            &browser,
            profile.path(),
            &format!("{base}/"),
            &["--dump-dom"],
        );
        if dom.contains("the oldest window still holding input") {
            break dom;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no answer on the page:\n{dom}"
        );
        std::thread::sleep(Duration::from_millis(300));
    };
    let panel = &dom[dom.find("id=\"why\"").unwrap()..];
    let panel = &panel[..panel.find("<h2>").unwrap()];
    assert!(
        panel.contains("data-task=\"CountPerSecond/Combine\""),
        "{panel}"
    );
    assert!(
        panel.contains("its trigger waits for the watermark to pass 999 ms."),
        "{panel}"
    );
    assert!(
        panel.contains(
            "It is held back by source Quiet on worker 0, partition 0, at 0 ms: it is idle"
        ),
        "{panel}"
    );
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    assert!(child.wait().unwrap().success());
}
