//! Ad-hoc timings of the plan and snapshot codecs (not a benchmark suite, no
//! assertions): `cargo run --release -p tidewater-examples --example codec_timing`.
//! Prints the time to decode the word count's plan, to decode and translate it, to
//! encode and decode a snapshot, and a direct-runner word count with a snapshot and
//! restore every round (`checkpoint_every=1`) against one without.

use std::time::Instant;
use tidewater::{plan, Pipeline, PipelineOptions};
use tidewater_examples::word_count;
use tidewater_runners_core::snapshot::{Part, Scope, Snapshot};

fn per_iter(n: u32, mut f: impl FnMut()) -> f64 {
    f();
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_secs_f64() / n as f64
}

fn main() {
    tidewater_runner_direct::register();
    let p = Pipeline::new(PipelineOptions::default());
    word_count::build(&p, word_count::SAMPLE, None, 10);
    let the_plan = p.to_plan().expect("plan");
    let json = plan::encode(&the_plan);
    let n = 2000;
    let decode = per_iter(n, || {
        std::hint::black_box(plan::decode(&json).unwrap());
    });
    let translate = per_iter(n, || {
        let d = plan::decode(&json).unwrap();
        std::hint::black_box(tidewater_runners_core::translate(&d).unwrap());
    });
    println!(
        "plan: {} bytes; decode {:.1} us; decode + translate {:.1} us",
        json.len(),
        decode * 1e6,
        translate * 1e6
    );
    let parts: Vec<Part> = (0..128u32)
        .map(|g| Part {
            transform: "CountWords/Combine".into(),
            scope: Scope::KeyGroup(g),
            bytes: (0..16 * 1024)
                .map(|i| (i * 31 + g as usize) as u8)
                .collect(),
        })
        .collect();
    let snap = Snapshot {
        plan_hash: 7,
        max_key_groups: 128,
        epoch: 3,
        base: Vec::new(),
        parts,
        stored: Default::default(),
    };
    let bytes = snap.encode();
    let write = per_iter(200, || {
        std::hint::black_box(snap.encode());
    });
    let restore = per_iter(200, || {
        std::hint::black_box(Snapshot::decode(&bytes, 7).unwrap());
    });
    println!(
        "snapshot: {} bytes; write {:.0} us; restore {:.0} us",
        bytes.len(),
        write * 1e6,
        restore * 1e6
    );
    for every in [None, Some("1")] {
        let mut o = PipelineOptions::default();
        if let Some(e) = every {
            o.runner_options.push(("checkpoint_every".into(), e.into()));
        }
        let run = per_iter(5, || {
            let p = Pipeline::new(o.clone());
            word_count::build(&p, word_count::SAMPLE, None, 10);
            std::hint::black_box(p.run().unwrap());
        });
        println!(
            "direct word count, checkpoint_every={}: {:.1} ms",
            every.unwrap_or("off"),
            run * 1e3
        );
    }
}
