//! The SDK's error type: one enum at the crate boundary.

use std::path::PathBuf;

/// Everything that can go wrong building, encoding, decoding or running a pipeline.
///
/// The message of each variant names what was wrong and where.
///
/// ```
/// let e = tidewater::Error::UnknownRunner { name: "spork".into(), known: vec!["direct".into()] };
/// assert_eq!(e.to_string(), "unknown runner 'spork'; known runners: direct");
/// ```
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The pipeline could not be built as written.
    #[error("cannot construct transform '{transform}': {message}")]
    Construction {
        /// Full name of the transform being applied.
        transform: String,
        /// What was wrong and how to fix it.
        message: String,
    },
    /// The plan is not valid JSON or does not have the plan's shape.
    #[error("malformed plan: {message}")]
    MalformedPlan {
        /// The decoder's message, with the line and column.
        message: String,
    },
    /// The plan was written by another version of the format.
    #[error("plan format version {found} is not supported: this binary reads version {supported}")]
    PlanVersion {
        /// The version in the plan.
        found: u64,
        /// The version this binary reads.
        supported: u64,
    },
    /// The plan refers to something that is not in it, or is inconsistent.
    #[error("invalid plan: {message}")]
    InvalidPlan {
        /// What is inconsistent, naming the component.
        message: String,
    },
    /// A user function or type named in the plan is not registered in this binary.
    #[error(
        "unknown {kind} '{name}' in {transform}: this binary has not registered it. \
         Functions and types register themselves when the pipeline that uses them is constructed; \
         a binary that runs a plan it did not build must construct the same pipeline first{}{}",
        match *kind_snake {
            "do_fn" | "stateful_do_fn" | "source" | "sink" | "window_fn" if !name.contains('<') => format!(
                " (or, for a concrete {kind} type, link it: tidewater::register!({}{} T) in the module that \
                 defines T, or call tidewater::registry::register_{kind_snake}::<T>())",
                if *kind_snake == "stateful_do_fn" { "Stateful" } else { "" },
                match *kind_snake { "do_fn" | "stateful_do_fn" => "DoFn", "source" => "Source", "sink" => "Sink", _ => "WindowFn" },
            ),
            _ => String::new(),
        },
        generic_hint(name)
    )]
    UnknownFunction {
        /// "DoFn", "grouping" or "element type".
        kind: &'static str,
        /// `kind` as it appears in the registration function's name.
        kind_snake: &'static str,
        /// The registered name the plan uses.
        name: String,
        /// What refers to it: "transform 'X'" or "PCollection 'Y'".
        transform: String,
    },
    /// The user function's fields in the plan do not deserialize.
    #[error("cannot decode the fields of {name} in transform '{transform}': {message}")]
    FunctionPayload {
        /// Function name.
        name: String,
        /// Transform that uses it.
        transform: String,
        /// The decoder's message.
        message: String,
    },
    /// No runner of that name is registered.
    #[error("unknown runner '{name}'; known runners: {}", known.join(", "))]
    UnknownRunner {
        /// The name asked for.
        name: String,
        /// The registered runners.
        known: Vec<String>,
    },
    /// The runner cannot execute a feature the plan uses; checked before anything runs.
    #[error("runner '{runner}' cannot run this pipeline:\n{}", unsupported.iter().map(|u| format!("  - {u}")).collect::<Vec<_>>().join("\n"))]
    Unsupported {
        /// The runner.
        runner: String,
        /// Every unsupported feature with the transform that uses it.
        unsupported: Vec<crate::runner::UnsupportedFeature>,
    },
    /// A user function failed (returned an error or panicked).
    #[error("transform '{transform}' failed in {phase}{}: {message}{}", element.as_ref().map(|e| format!(" on element {}", shorten(e))).unwrap_or_default(), replay.as_ref().map(|r| format!(" ({r})")).unwrap_or_default())]
    UserCode {
        /// Full name of the transform.
        transform: String,
        /// The lifecycle step: setup, start_bundle, process, finish_bundle, teardown, or a
        /// sink's write, stage, commit, abort.
        phase: &'static str,
        /// The element's debug form, or its position.
        element: Option<String>,
        /// The error or panic message.
        message: String,
        /// How to replay the failing schedule (the direct runner's seed).
        replay: Option<String>,
    },
    /// An element did not survive encoding and decoding.
    #[error(
        "element of transform '{transform}' output does not round-trip through its coder: {message} (element {})",
        shorten(element)
    )]
    Coder {
        /// Transform whose output it is.
        transform: String,
        /// Debug form of the element.
        element: String,
        /// The coder's message.
        message: String,
    },
    /// Reading or writing a file failed.
    #[error("{what} '{}': {cause}", path.display())]
    Io {
        /// What was being done ("cannot read input file").
        what: String,
        /// The path.
        path: PathBuf,
        /// The cause, named in the message (not a separate source, so that a cause
        /// chain does not print it twice).
        cause: std::io::Error,
    },
    /// A pipeline option has a value the runner cannot use.
    #[error("invalid option {option}: {message}")]
    InvalidOption {
        /// The option, as written on the command line.
        option: String,
        /// What is wrong with its value.
        message: String,
    },
    /// A pipeline result was read under a capture name it does not have, or as another
    /// element type than the capture holds: the caller's mistake.
    #[error("{message}")]
    Capture {
        /// What was asked, and what the result holds.
        message: String,
    },
    /// An external system a connector writes to or reads from went away mid-run (a
    /// database connection lost): nothing committed is lost, and the job resumes from
    /// its last checkpoint once the system is back. A local cluster's supervisor
    /// restarts the job on it; any other runner returns it.
    #[error(
        "transform '{transform}' failed in {phase}: {message} (an external system is unavailable; the job resumes from its last checkpoint)"
    )]
    Unavailable {
        /// Full name of the transform.
        transform: String,
        /// The lifecycle step.
        phase: &'static str,
        /// What went away.
        message: String,
    },
    /// A checkpoint or snapshot cannot be used: corrupt, truncated, of another plan or
    /// of another format version. Never turned into wrong results.
    #[error("checkpoint cannot be restored: {message}")]
    Checkpoint {
        /// What is wrong with it, and where.
        message: String,
    },
    /// A run would write again output its sinks already committed (restored from an
    /// older checkpoint than the newest epoch committed, or started afresh over
    /// output the same job committed): refused, since that output would be duplicated.
    #[error("refused to write committed output again: {message}")]
    Replay {
        /// What was committed, where the run would start, and the choices.
        message: String,
    },
    /// The processes of a cluster could not connect, or lost one another: which
    /// process, and why (a peer that never came, a failed TLS handshake, a peer gone or
    /// sending a malformed frame). Not a bug of the runner.
    #[error("cluster: {message}")]
    Cluster {
        /// Which process, which peer, and what happened.
        message: String,
    },
    /// The runner itself failed; a bug, never bad input.
    #[error("internal error in runner: {0}")]
    Internal(String),
}

/// For a closure's name (`..{{closure}}..@file:line:column`): why this binary may lack it.
/// The closure hint, or for another generic function's name (it has type parameters)
/// why linking cannot register it.
fn generic_hint(name: &str) -> String {
    let hint = closure_hint(name);
    if hint.is_empty() && crate::registry::combine_fn_of(name).is_some() {
        return ". It is a combine of a concrete CombineFn: link it with \
                tidewater::register!(CombineFn F keys: K) naming the key type of a per-key combine, \
                or construct the pipeline that applies it"
            .into();
    }
    if hint.is_empty() && name.contains('<') {
        return ". Its name has type parameters: a generic function cannot be registered at link time \
                (typetag needs one constant name per impl), so it registers only when the pipeline \
                that uses it is constructed"
            .into();
    }
    hint
}

fn closure_hint(name: &str) -> String {
    match name.rsplit_once('@') {
        Some((ty, site)) if ty.contains("{{closure}}") => format!(
            ". The plan names a closure by the place it was given ({site}): this binary gave no such \
             closure there while constructing the pipeline. A plan with closures runs only on the binary \
             that wrote it, built from the same source, after constructing the same pipeline (every \
             process must build the same pipeline); name the function (a `fn` item) for a plan that \
             outlives its binary"
        ),
        _ => String::new(),
    }
}

/// The longest element dump an error message shows.
const ELEMENT_DUMP_CHARS: usize = 200;

/// An element's debug form, cut to a couple of hundred characters: an error names the
/// element, it does not print a whole shard.
///
/// ```
/// let long = "x".repeat(1000);
/// assert_eq!(tidewater::shorten(&long).chars().count(), 200 + " … (800 more characters)".chars().count());
/// assert_eq!(tidewater::shorten("short"), "short");
/// ```
pub fn shorten(element: &str) -> String {
    let n = element.chars().count();
    if n <= ELEMENT_DUMP_CHARS {
        return element.to_string();
    }
    let head: String = element.chars().take(ELEMENT_DUMP_CHARS).collect();
    format!("{head} … ({} more characters)", n - ELEMENT_DUMP_CHARS)
}

/// The SDK's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The error type user functions return: anything that is an error.
pub type UserError = Box<dyn std::error::Error + Send + Sync + 'static>;
