//! tidewater_transforms::TextIO: every line of every matching file; sharded writes
//! that hold every element exactly once.

use crate::case::RunResult;
use crate::check::{eq, succeeded, values, values_eq};
use crate::{scratch, Case};
use std::path::Path;
use tidewater::runner::Feature::{
    Capture, CombineGlobally, Create, Flatten, GroupByKey, ParDo, ReadBounded, Sink, WindowInto,
};
use tidewater::Pipeline;
use tidewater_transforms::TextIO;

pub(crate) fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "text_io/read",
            features: &[ReadBounded, Capture],
            build: read,
            check: check_read,
        },
        Case {
            name: "text_io/write",
            features: &[
                Create,
                ParDo,
                WindowInto,
                GroupByKey,
                CombineGlobally,
                Flatten,
                Sink,
                Capture,
            ],
            build: write,
            check: check_write,
        },
    ]
}

/// Writes the file whole or not at all (a temporary file renamed into place): the
/// processes of a local cluster each build the case, writing the same file, and must
/// never see another one's half-written copy (its length is part of the plan).
fn write_file(path: &Path, contents: &str) {
    let tmp = path.with_extension(format!("tmp-{}", std::process::id()));
    if let Err(e) = std::fs::write(&tmp, contents).and_then(|()| std::fs::rename(&tmp, path)) {
        panic!(
            "cannot write the case's input file '{}': {e}",
            path.display()
        );
    }
}

/// Two matching files (one with CRLF line ends and no final newline, one with an empty
/// line), an empty matching file and a file the pattern does not match.
fn read(p: &Pipeline) {
    let dir = scratch::dir("text_io_read").expect("a scratch directory");
    write_file(&dir.join("a.txt"), "alpha\nbeta\n\ngamma\n");
    write_file(&dir.join("b.txt"), "delta\r\nepsilon");
    write_file(&dir.join("empty.txt"), "");
    write_file(&dir.join("other.csv"), "not,read\n");
    let pattern = dir.join("*.txt");
    p.apply("Read", TextIO::read().from(&pattern.to_string_lossy()))
        .capture("lines");
}

fn check_read(r: RunResult) -> Result<(), String> {
    let lines = ["alpha", "beta", "", "gamma", "delta", "epsilon"]
        .map(String::from)
        .to_vec();
    values_eq(&succeeded(r)?, "lines", lines)
}

fn lines() -> Vec<String> {
    (0..500)
        .map(|i| format!("line {i}"))
        .chain(["".to_string(), "line 7".to_string()])
        .collect()
}

fn write(p: &Pipeline) {
    let dir = scratch::dir("text_io_write").expect("a scratch directory");
    let prefix = dir.join("out");
    p.create("Lines", lines())
        .apply(
            "Write",
            TextIO::write()
                .to(&prefix.to_string_lossy())
                .with_suffix(".txt")
                .with_num_shards(3),
        )
        .capture("files");
}

fn check_write(r: RunResult) -> Result<(), String> {
    let r = succeeded(r)?;
    let files = values::<String>(&r, "files")?;
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            Path::new(f)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default()
        })
        .collect();
    eq(
        "files written",
        names,
        (0..3).map(|i| format!("out-{i:05}-of-00003.txt")).collect(),
    )?;
    let dir = Path::new(&files[0])
        .parent()
        .ok_or("a written file has no directory")?;
    let mut read_back = Vec::new();
    for f in &files {
        let text =
            std::fs::read_to_string(f).map_err(|e| format!("cannot read back '{f}': {e}"))?;
        if !text.is_empty() && !text.ends_with('\n') {
            return Err(format!("'{f}' does not end with a newline"));
        }
        read_back.extend(text.lines().map(str::to_string));
    }
    read_back.sort();
    let mut expected = lines();
    expected.sort();
    eq("lines read back from all shards", read_back, expected)?;
    let mut entries: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot list '{}': {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
        .collect();
    entries.sort();
    eq(
        "files in the output directory (no temporary files left)",
        entries,
        (0..3).map(|i| format!("out-{i:05}-of-00003.txt")).collect(),
    )
}
