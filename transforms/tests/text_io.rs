//! TextIO: reading globs, sharded writes that appear whole, and clear errors for
//! missing inputs and unwritable outputs.

use tidewater::{Error, Pipeline, PipelineOptions};
use tidewater_transforms::TextIO;

fn options() -> PipelineOptions {
    tidewater_runner_direct::register();
    PipelineOptions {
        seed: Some(11),
        ..Default::default()
    }
}

fn read_shards(prefix: &str, n: u32) -> Vec<String> {
    let mut lines = Vec::new();
    for i in 0..n {
        let name = tidewater_transforms::text_io::shard_name(prefix, i, n, ".txt");
        let text = std::fs::read_to_string(&name).unwrap_or_else(|e| panic!("{name}: {e}"));
        lines.extend(text.lines().map(str::to_string));
    }
    lines.sort();
    lines
}

#[test]
fn reads_every_file_of_a_glob_and_writes_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "one\ntwo\r\nthree").unwrap();
    std::fs::write(dir.path().join("b.txt"), "four\n\nfive\n").unwrap();
    std::fs::write(dir.path().join("c.log"), "not matched\n").unwrap();
    let prefix = dir.path().join("out").to_str().unwrap().to_string();
    let p = Pipeline::new(options());
    let lines = p.apply(
        "Read",
        TextIO::read().from(dir.path().join("*.txt").to_str().unwrap()),
    );
    lines
        .apply(
            "Write",
            TextIO::write()
                .to(&prefix)
                .with_suffix(".txt")
                .with_num_shards(3),
        )
        .capture("files");
    let r = p.run().unwrap();
    let files = r.captured_values::<String>("files").unwrap();
    assert_eq!(files.len(), 3);
    assert_eq!(
        read_shards(&prefix, 3),
        vec!["", "five", "four", "one", "three", "two"]
    );
    // Nothing temporary is left behind.
    let leftovers: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.contains(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn an_empty_input_still_writes_every_shard() {
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("empty").to_str().unwrap().to_string();
    let p = Pipeline::new(options());
    p.create::<String>("Nothing", vec![]).apply(
        "Write",
        TextIO::write()
            .to(&prefix)
            .with_suffix(".txt")
            .with_num_shards(2),
    );
    p.run().unwrap();
    assert_eq!(read_shards(&prefix, 2), Vec::<String>::new());
}

#[test]
fn a_missing_input_is_refused_at_construction_naming_the_pattern() {
    let p = Pipeline::new(options());
    p.apply("ReadLogs", TextIO::read().from("/nonexistent/dir/*.log"));
    let e = p.run().unwrap_err();
    assert!(matches!(e, Error::Construction { .. }));
    insta::assert_snapshot!(e.to_string(), @"cannot construct transform 'ReadLogs': no input file matches '/nonexistent/dir/*.log'");
}

#[test]
fn an_input_deleted_before_running_fails_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gone.txt");
    std::fs::write(&path, "x\n").unwrap();
    let p = Pipeline::new(options());
    p.apply("Read", TextIO::read().from(path.to_str().unwrap()))
        .capture("lines");
    std::fs::remove_file(&path).unwrap();
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.starts_with("transform 'Read/ReadLines' failed in process: ")
            && e.contains(&format!(
                "cannot read input file '{}': No such file or directory",
                path.display()
            )),
        "{e}"
    );
}

#[test]
fn a_missing_output_directory_is_refused_at_construction() {
    let p = Pipeline::new(options());
    p.create("Lines", vec!["a".to_string()])
        .apply("Write", TextIO::write().to("/nonexistent/dir/out"));
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @"cannot construct transform 'Write': output directory '/nonexistent/dir' (of prefix '/nonexistent/dir/out') does not exist or is not a directory");
}

#[test]
fn an_unwritable_output_fails_naming_the_file_and_keeps_what_was_there() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let prefix = out.join("counts").to_str().unwrap().to_string();
    let shard = tidewater_transforms::text_io::shard_name(&prefix, 0, 1, "");
    // A directory where the shard should go cannot be replaced by a file.
    std::fs::create_dir(&shard).unwrap();
    std::fs::write(std::path::Path::new(&shard).join("keep"), "old").unwrap();
    let p = Pipeline::new(options());
    p.create("Lines", vec!["a".to_string()])
        .apply("Write", TextIO::write().to(&prefix));
    let e = p.run().unwrap_err().to_string();
    // The shard is staged, then cannot move into place at commit.
    let expected = format!(
        "transform 'Write/WriteShards' failed in commit: transaction e0-i0: cannot move output file '{shard}' into place: "
    );
    assert!(e.starts_with(&expected), "{e}");
    // An IO failure does not depend on the order of elements: no replay hint.
    assert!(!e.contains("--seed"), "{e}");
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&shard).join("keep")).unwrap(),
        "old"
    );
}

#[test]
fn invalid_utf8_names_the_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bin.txt");
    std::fs::write(&path, b"fine\n\xff\xfe\n").unwrap();
    let p = Pipeline::new(options());
    p.apply("Read", TextIO::read().from(path.to_str().unwrap()))
        .capture("lines");
    let e = p.run().unwrap_err().to_string();
    let expected = format!(
        "cannot read input file '{}' at byte 5: stream did not contain valid UTF-8",
        path.display()
    );
    assert!(e.contains(&expected), "{e}");
}

#[test]
fn generate_sequence_is_the_same_on_any_number_of_partitions() {
    use tidewater::{ReadStatus, Source, Timestamp};
    use tidewater_transforms::GenerateSequence;
    let generator = GenerateSequence::new(10, Some(60))
        .with_event_time(1_000, 5)
        .with_out_of_orderness(7, 3)
        .with_late_records(11, 100);
    let read_all = |partitions: usize| {
        let mut g = generator.clone();
        let mut all = Vec::new();
        for p in 0..partitions {
            let mut pos = g.initial_position(p, partitions);
            loop {
                let mut out = Vec::new();
                let status = g
                    .read(p, partitions, &mut pos, 3, Timestamp(0), &mut out)
                    .unwrap();
                // Every record is at or after the watermark reported before it, unless late.
                all.extend(out);
                if status == ReadStatus::Done {
                    assert_eq!(g.watermark(p, partitions, &pos), Timestamp::MAX);
                    break;
                }
            }
        }
        all.sort();
        all
    };
    let one = read_all(1);
    assert_eq!(one.len(), 50);
    assert_eq!(one, read_all(3));
    assert_eq!(one, read_all(7));
    // Offsets 21, 32, 43, 54 are late by 100 ms; the others are at most 7 ms early.
    for (n, ts) in &one {
        let nominal = 1_000 + (*n as i64 - 10) * 5;
        let late = (*n - 10) % 11 == 0 && *n > 10;
        let back = nominal - ts.millis();
        assert!(
            if late {
                (100..=107).contains(&back)
            } else {
                (0..=7).contains(&back)
            },
            "{n}: {back}"
        );
    }
}

#[test]
fn a_windowed_input_is_written_whole_into_the_same_shards() {
    use tidewater::{Timestamp, Window, WindowFn};
    #[allow(clippy::ptr_arg)] // with_timestamps hands the element by reference
    fn at(line: &String) -> Timestamp {
        Timestamp(line.parse().unwrap())
    }
    let dir = tempfile::tempdir().unwrap();
    let prefix = dir.path().join("out").to_str().unwrap().to_string();
    let p = Pipeline::new(options());
    p.create(
        "Lines",
        ["1", "2", "15", "25"]
            .iter()
            .map(|s| s.to_string())
            .collect(),
    )
    .with_timestamps("Stamp", at)
    .apply("Fixed10", Window::into(WindowFn::fixed(10)))
    .apply(
        "Write",
        TextIO::write()
            .to(&prefix)
            .with_suffix(".txt")
            .with_num_shards(2),
    );
    p.run().unwrap();
    assert_eq!(read_shards(&prefix, 2), vec!["1", "15", "2", "25"]);
}

#[test]
fn a_directory_as_input_is_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new(options());
    p.apply("Read", TextIO::read().from(dir.path().to_str().unwrap()))
        .capture("lines");
    let e = p.run().unwrap_err().to_string();
    let expected = format!(
        "input '{}' is a directory: give a file or a pattern such as '{}'",
        dir.path().display(),
        dir.path().join("*").display()
    );
    assert!(e.contains(&expected), "{e}");
}

#[test]
fn writing_unbounded_input_says_that_text_io_needs_bounded_input() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new(options());
    let stream = tidewater::TestStream::new()
        .add_elements(vec![("a".to_string(), tidewater::Timestamp(1))])
        .advance_watermark_to_infinity();
    p.apply("Lines", stream)
        .apply(
            "Fixed",
            tidewater::Window::into(tidewater::WindowFn::fixed(10)),
        )
        .apply(
            "Write",
            TextIO::write().to(dir.path().join("out").to_str().unwrap()),
        );
    insta::assert_snapshot!(p.run().unwrap_err().to_string(), @"cannot construct transform 'Write': TextIO::write() needs bounded input: it writes each shard once, when its input is complete, and an unbounded PCollection never is (writing per window and pane, as Beam's withWindowedWrites, is not supported yet); write unbounded output through a Sink with write_to");
}

/// Every line of every file is read exactly once, however the files are split into
/// blocks and partitions: lines across block boundaries, at them, across several
/// blocks, empty lines, a last line without a terminator, an empty file. At every position the source says exactly how
/// many lines the partition has left (a micro-batch fixes its ranges with it).
#[test]
fn a_text_source_reads_every_line_once_whatever_the_partitions() {
    use tidewater::{ReadStatus, Source, Timestamp};
    let dir = tempfile::tempdir().unwrap();
    let mut want = Vec::new();
    let mut paths = Vec::new();
    for (i, text) in [
        "alpha\nbeta\n\ngamma delta epsilon\nz",
        "",
        "x\r\nyy\nzzz\nwwww\n",
        "a longer line that crosses several small partitions at once\nend\n",
    ]
    .iter()
    .enumerate()
    {
        let path = dir.path().join(format!("{i}.txt"));
        std::fs::write(&path, text).unwrap();
        want.extend(text.lines().map(str::to_string));
        paths.push(path);
    }
    want.sort();
    for (block, partitions) in [1, 2, 3, 5, 7, 16, 1 << 20]
        .into_iter()
        .flat_map(|block| (1..=40).map(move |partitions| (block, partitions)))
    {
        let mut source =
            tidewater_transforms::text_io::TextSource::new(&paths).with_block_size(block);
        let mut got = Vec::new();
        for p in 0..partitions {
            let mut pos = source.initial_position(p, partitions);
            let mut lines = Vec::new();
            let mut left = Vec::new();
            loop {
                left.push(
                    source
                        .available(p, partitions, &pos, tidewater::Timestamp(0))
                        .unwrap(),
                );
                let mut out = Vec::new();
                let status = source
                    .read(p, partitions, &mut pos, 2, Timestamp(0), &mut out)
                    .unwrap();
                lines.extend(out.into_iter().map(|(l, _)| l));
                if status == ReadStatus::Done {
                    break;
                }
            }
            assert_eq!(
                source.available(p, partitions, &pos, tidewater::Timestamp(0)),
                Some(0)
            );
            // The read that takes the partition's last line says that it is done.
            assert_eq!(
                left.len(),
                lines.len().div_ceil(2).max(1),
                "partition {p} of {partitions}, blocks of {block}: reads"
            );
            // Before the k-th read, lines read so far + left = all the partition's.
            for (k, left) in left.iter().enumerate() {
                assert_eq!(
                    (2 * k).min(lines.len()) as u64 + left,
                    lines.len() as u64,
                    "partition {p} of {partitions}, blocks of {block}, before read {k}"
                );
            }
            got.extend(lines);
        }
        got.sort();
        assert_eq!(got, want, "with {partitions} partitions, blocks of {block}");
    }
}

/// The blocks are dealt to the partitions in turn, so that partitions move through a
/// file together; a line starting exactly at a block's end belongs to that block.
#[test]
fn a_text_source_deals_its_blocks_to_the_partitions_in_turn() {
    use tidewater::{ReadStatus, Source, Timestamp};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lines.txt");
    // Eight lines of 3 bytes: l0 at byte 0, l1 at 3, ... l7 at 21.
    std::fs::write(&path, (0..8).map(|i| format!("l{i}\n")).collect::<String>()).unwrap();
    let mut source = tidewater_transforms::text_io::TextSource::new(&[path]).with_block_size(6);
    let read = |source: &mut tidewater_transforms::text_io::TextSource, p| {
        let mut pos = source.initial_position(p, 2);
        let mut out = Vec::new();
        while source
            .read(p, 2, &mut pos, 1, Timestamp(0), &mut out)
            .unwrap()
            == ReadStatus::More
        {}
        out.into_iter()
            .map(|(l, _)| l)
            .collect::<Vec<_>>()
            .join(" ")
    };
    // Blocks [0, 6), [6, 12), [12, 18), [18, 24): partition 0 reads blocks 0 and 2,
    // partition 1 blocks 1 and 3.
    assert_eq!(read(&mut source, 0), "l0 l1 l2 l5 l6");
    assert_eq!(read(&mut source, 1), "l3 l4 l7");
}

#[test]
fn a_device_as_input_is_refused_naming_what_it_is() {
    let p = Pipeline::new(options());
    p.apply("Read", TextIO::read().from("/dev/zero"))
        .capture("lines");
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains("input '/dev/zero' is a character device, not a regular file"),
        "{e}"
    );
}

/// A plan is untrusted: its TextSource may list a device (reading `/dev/zero` grew
/// memory until allocation failed) or a block of 0 bytes (a division by zero that
/// reported only "panicked").
#[test]
fn a_plans_text_source_is_checked_block_and_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.txt");
    std::fs::write(&input, "a\nb\n").unwrap();
    let p = Pipeline::new(options());
    p.apply("Read", TextIO::read().from(input.to_str().unwrap()))
        .capture("lines");
    let json = tidewater::plan::encode(&p.to_plan().unwrap());
    let block = regex_free_replace(&json, "\"block\":", "0");
    let e = tidewater::run_plan_json(&block, &options())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `block` (bytes per block) must be at least 1, found 0"),
        "{e}"
    );
    let device = json.replace(input.to_str().unwrap(), "/dev/zero");
    let e = tidewater::run_plan_json(&device, &options())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("input file '/dev/zero' is a character device, not a regular file"),
        "{e}"
    );
}

/// `json` with the number after the first `key` replaced by `value`.
fn regex_free_replace(json: &str, key: &str, value: &str) -> String {
    let at = json.find(key).expect("the key is in the plan") + key.len();
    let rest = &json[at..];
    let start = rest.len() - rest.trim_start().len();
    let digits = rest[start..]
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len() - start);
    format!(
        "{}{}{value}{}",
        &json[..at],
        &rest[..start],
        &rest[start + digits..]
    )
}

/// A plan's GenerateSequence with a rate of 0 waited forever; its other fields that
/// could hang or break a job are checked too, each named.
#[test]
fn a_plans_generate_sequence_is_checked_field_by_field() {
    use tidewater::Read;
    use tidewater_transforms::GenerateSequence;
    let p = Pipeline::new(options());
    p.apply(
        "Numbers",
        Read::from(GenerateSequence::new(0, Some(10)).with_rate(0.0)),
    )
    .capture("numbers");
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains(
            "field `rate_per_sec` must be a positive number of records per second, found Some(0.0)"
        ),
        "{e}"
    );
    let p = Pipeline::new(options());
    p.apply("Numbers", Read::from(GenerateSequence::new(0, Some(10))))
        .capture("numbers");
    let json = tidewater::plan::encode(&p.to_plan().unwrap());
    for (field, bad, says) in [
        (
            "\"event_interval_ms\":",
            "-5",
            "field `event_interval_ms` must be 0 or more, found -5",
        ),
        (
            "\"out_of_orderness_ms\":",
            "-1",
            "field `out_of_orderness_ms` must be 0 or more, found -1",
        ),
    ] {
        let e = tidewater::run_plan_json(&regex_free_replace(&json, field, bad), &options())
            .unwrap_err()
            .to_string();
        assert!(e.contains(says), "{e}");
    }
    let late = json.replacen("\"late_every\": null", "\"late_every\": 0", 1);
    assert_ne!(late, json, "the plan names late_every");
    let e = tidewater::run_plan_json(&late, &options())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("field `late_every` must be at least 1, found Some(0)"),
        "{e}"
    );
}

/// A plan's shard count of 0 divided by zero as the first line was written; it is
/// refused as the plan is decoded, naming the field, and so is one of millions of files.
#[test]
fn a_plans_shard_count_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let p = Pipeline::new(options());
    p.create("Lines", vec!["a".to_string(), "b".to_string()])
        .apply(
            "Write",
            TextIO::write()
                .to(dir.path().join("out").to_str().unwrap())
                .with_num_shards(2),
        );
    let json = tidewater::plan::encode(&p.to_plan().unwrap());
    for bad in ["0", "4000000000"] {
        let e =
            tidewater::run_plan_json(&regex_free_replace(&json, "\"shards\":", bad), &options())
                .unwrap_err()
                .to_string();
        assert!(
            e.contains(&format!(
                "field `shards` must be between 1 and 100000, found {bad}"
            )),
            "{e}"
        );
    }
    let p = Pipeline::new(options());
    p.create("Lines", vec!["a".to_string()]).apply(
        "Write",
        TextIO::write()
            .to(dir.path().join("out").to_str().unwrap())
            .with_num_shards(0),
    );
    let e = p.run().unwrap_err().to_string();
    assert!(
        e.contains("TextIO::write() needs 1 to 100000 shards, not 0"),
        "{e}"
    );
}
