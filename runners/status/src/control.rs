//! Control over the status server (Flink's REST `savepoints`, `stop`, `cancel`):
//!
//! - `POST /api/savepoint`: keep the next complete checkpoint as a savepoint (as
//!   SIGUSR1 does; it needs `--savepoint-dir`); `/api/job` lists it once written;
//! - `POST /api/stop`: stop the job as Ctrl-C (or SIGTERM to a local cluster's
//!   supervisor) does: the sources stop, the output is committed, and with
//!   `--savepoint-dir` the last checkpoint is kept there as a savepoint (the sources
//!   stay where they stopped, so a job started from it reads on);
//! - `POST /api/cancel`: end the job at once; what it committed stays, and the next run
//!   on its checkpoint directory resumes from its last checkpoint.
//!
//! - `GET /api/state?id=ID&key=KEY`: a keyed state lookup (Flink's queryable state,
//!   Kafka Streams' interactive queries): the state `ID` holds for `KEY`, as of the
//!   job's last completed checkpoint (consistent across keys and steps, as a savepoint
//!   is), read from its checkpoint directory.
//!
//! The reading endpoints are open to whoever reaches the address; these are not. A
//! job serves them only with a token (`--control-token-file FILE`, or
//! [`TOKEN_ENV`]), and a request must present it as `Authorization: Bearer TOKEN`,
//! compared in constant time. Without a token they answer 403 and say how to turn
//! them on; with a wrong or missing one, 401.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;
use tidewater::{Error, Result};

/// The environment variable a control token may come from instead of a file.
pub const TOKEN_ENV: &str = "TIDEWATER_CONTROL_TOKEN";

/// The shortest token taken.
const MIN_TOKEN: usize = 16;

/// A control token.
pub struct Token(Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The job's token: `--control-token-file`'s (a file only its owner can read),
    /// else [`TOKEN_ENV`]'s, else none (control off).
    pub fn of(e: &tidewater::EngineOptions) -> Result<Option<Token>> {
        let (text, option) = match &e.control_token_file {
            Some(path) => {
                let option = format!("--control-token-file {}", path.display());
                (crate::private_file::read_owner_only(path, &option)?, option)
            }
            None => match std::env::var(TOKEN_ENV) {
                Ok(t) => (t, TOKEN_ENV.to_string()),
                Err(_) => return Ok(None),
            },
        };
        let token = text.trim();
        if token.len() < MIN_TOKEN || token.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(Error::InvalidOption {
                option,
                message: format!(
                    "a control token is one word of at least {MIN_TOKEN} characters (e.g. openssl rand -hex 16)"
                ),
            });
        }
        Ok(Some(Token(token.as_bytes().to_vec())))
    }

    /// Whether `presented` is this token, in time that does not depend on where they
    /// differ.
    fn matches(&self, presented: &[u8]) -> bool {
        let mut diff = u8::from(self.0.len() != presented.len());
        for (i, b) in self.0.iter().enumerate() {
            diff |= b ^ presented.get(i).copied().unwrap_or(0);
        }
        diff == 0
    }
}

/// What control asks of a job.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Keep the next complete checkpoint as a savepoint.
    Savepoint,
    /// Stop (with a savepoint under `--savepoint-dir`).
    Stop,
    /// End at once.
    Cancel,
}

/// Whatever carries out control: a process, or a local cluster's supervisor.
pub trait Controls: Send + Sync + 'static {
    /// Does `action`, saying what happens next, or says why it cannot.
    fn act(&self, action: Action) -> std::result::Result<String, String>;
    /// The state step `id` holds for `key` as of the last completed checkpoint (JSON),
    /// or why it cannot be read.
    fn query_state(&self, _id: &str, _key: &str) -> std::result::Result<serde_json::Value, String> {
        Err("this job keeps no checkpoints whose state could be read".into())
    }
}

/// The answer to a control request.
#[derive(Debug, Serialize, Deserialize)]
pub struct Answer {
    /// Whether the job took it.
    pub accepted: bool,
    /// What happens next, or why not.
    pub message: String,
}

/// Control of one job.
pub struct Control {
    token: Option<Token>,
    controls: Arc<dyn Controls>,
}

impl Control {
    /// Control by `controls`, to whoever holds `token` (none: off).
    pub fn new(token: Option<Token>, controls: Arc<dyn Controls>) -> Control {
        Control { token, controls }
    }
}

/// The control endpoints.
pub fn routes<S: Clone + Send + Sync + 'static>(control: Arc<Control>) -> Router<S> {
    Router::new()
        .route("/api/savepoint", post(|s, h| act(s, h, Action::Savepoint)))
        .route("/api/stop", post(|s, h| act(s, h, Action::Stop)))
        .route("/api/cancel", post(|s, h| act(s, h, Action::Cancel)))
        .route("/api/state", axum::routing::get(state))
        .with_state(control)
}

/// A refusal: its status and message.
type Refusal = (StatusCode, String);

fn refusal(code: StatusCode, message: String) -> Refusal {
    (code, message)
}

/// The headers of a refusal with `code`: a 401 says how to authenticate.
fn refusal_headers(code: StatusCode) -> HeaderMap {
    let mut h = HeaderMap::new();
    if code == StatusCode::UNAUTHORIZED {
        h.insert(
            header::WWW_AUTHENTICATE,
            "Bearer".parse().expect("a valid header"),
        );
    }
    h
}

/// Whether `headers` present the job's token.
fn authorize(control: &Control, headers: &HeaderMap) -> std::result::Result<(), Refusal> {
    let Some(token) = &control.token else {
        return Err(refusal(
            StatusCode::FORBIDDEN,
            format!(
                "control is off: this job serves its status read-only; start it with --control-token-file FILE (or {TOKEN_ENV}) to take savepoints, stop or cancel it, or read its state over the API"
            ),
        ));
    };
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim);
    match presented {
        Some(p) if token.matches(p.as_bytes()) => Ok(()),
        Some(_) => Err(refusal(
            StatusCode::UNAUTHORIZED,
            "the token presented is not this job's".into(),
        )),
        None => Err(refusal(
            StatusCode::UNAUTHORIZED,
            "control needs the job's token: Authorization: Bearer TOKEN".into(),
        )),
    }
}

/// `GET /api/state?id=ID&key=KEY`: state is the job's data, so it takes the token too.
async fn state(
    State(control): State<Arc<Control>>,
    headers: HeaderMap,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> (StatusCode, HeaderMap, Json<serde_json::Value>) {
    let refuse = |(code, message): Refusal| {
        (
            code,
            refusal_headers(code),
            Json(serde_json::json!({ "message": message })),
        )
    };
    if let Err(r) = authorize(&control, &headers) {
        return refuse(r);
    }
    let (Some(id), Some(key)) = (q.get("id"), q.get("key")) else {
        return refuse(refusal(
            StatusCode::BAD_REQUEST,
            "give the state id and the key: /api/state?id=ID&key=KEY".into(),
        ));
    };
    let controls = Arc::clone(&control.controls);
    let (id, key) = (id.clone(), key.clone());
    // Reading a checkpoint blocks: off the server's threads.
    let answer = tokio::task::spawn_blocking(move || controls.query_state(&id, &key))
        .await
        .unwrap_or_else(|e| Err(format!("the state lookup failed: {e}")));
    match answer {
        Ok(v) => (StatusCode::OK, HeaderMap::new(), Json(v)),
        Err(message) => refuse(refusal(StatusCode::CONFLICT, message)),
    }
}

async fn act(
    State(control): State<Arc<Control>>,
    headers: HeaderMap,
    action: Action,
) -> (StatusCode, HeaderMap, Json<Answer>) {
    let refuse = |(code, message): Refusal| {
        (
            code,
            refusal_headers(code),
            Json(Answer {
                accepted: false,
                message,
            }),
        )
    };
    if let Err(r) = authorize(&control, &headers) {
        return refuse(r);
    }
    match control.controls.act(action) {
        Ok(message) => (
            StatusCode::ACCEPTED,
            HeaderMap::new(),
            Json(Answer {
                accepted: true,
                message,
            }),
        ),
        Err(message) => refuse(refusal(StatusCode::CONFLICT, message)),
    }
}

/// Ends this process shortly (after the answer has left), as a cancel: what was
/// committed stays; a local cluster's processes end with their supervisor.
pub fn cancel_soon(what: &str) -> String {
    std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(200));
        tracing::warn!("cancelled over the control API: ending now (the next run on the checkpoint directory resumes from its last checkpoint)");
        std::process::exit(130);
    });
    format!("cancelling {what}: it ends now; what it committed stays, and the next run on its checkpoint directory resumes from its last checkpoint")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_matches_itself_only() {
        let t = Token(b"0123456789abcdef".to_vec());
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeg"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b"0123456789abcdef0"));
        assert!(!t.matches(b""));
    }
}
