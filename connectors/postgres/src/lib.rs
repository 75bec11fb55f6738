//! A PostgreSQL sink that writes exactly once by epoch, with PostgreSQL's own two-phase
//! commit (Flink's two-phase-commit JDBC sink, without XA).
//!
//! Each instance of the sink (one per worker) holds two connections. On the first, the
//! rows of an epoch go into one transaction (`BEGIN`, `INSERT`s); at the epoch's stage
//! step of the sink commit protocol it runs `PREPARE TRANSACTION 'gid'`, which makes
//! the rows durable on the server but invisible. On the second, once the checkpoint (or
//! micro-batch) holding the epoch is durable, it runs `COMMIT PREPARED 'gid'`; a
//! transaction of an epoch that will be written again gets `ROLLBACK PREPARED`. The
//! transaction id encodes the sink, the job, the epoch and the instance:
//! `tidewater:SINK:JOB:e{epoch}:i{instance}`. The job is the runner's job id
//! ([`tidewater::Sink::begin_job`]: the same across a job's restarts, another for
//! another job), so a job's recovery never touches another job's transactions on the
//! same table.
//!
//! After a crash, the runner restores the checkpoint: the transactions it recorded as
//! staged are committed (again: a commit of a transaction already committed is a
//! no-op), and then [`Sink::recover`](tidewater::Sink::recover) rolls back every other
//! prepared transaction of this job left by the instances this one takes over — those
//! of epochs after the checkpoint, which the job writes again.
//!
//! **The ledger.** Each transaction also inserts its row into a ledger table
//! (`tidewater_ledger` by default; made at the first start if missing):
//! `(sink, job, epoch, instance)`, committed or rolled back with the data. A commit of a
//! transaction that is gone is checked against it: committed before is fine; otherwise
//! the rows were rolled back outside the job (by hand, by another run) and the commit
//! fails naming the epoch, instead of counting as done. Before a job writes, the runner
//! asks the ledger for the newest epoch the job committed
//! ([`tidewater::Sink::committed`]) and refuses a run that would write committed
//! epochs again. Rows older than a week are pruned as the job goes (the newest stay).
//!
//! The server must allow prepared transactions (`max_prepared_transactions` > 0; it is
//! 0 by default), and the table must exist, with the sink's columns.
//!
//! ```no_run
//! use tidewater_postgres::PostgresSink;
//! let p = tidewater::Pipeline::new(Default::default());
//! p.create("Counts", vec![("a".to_string(), 2i64), ("b".to_string(), 1)])
//!     .write_to(
//!         "Write",
//!         PostgresSink::new("host=127.0.0.1 port=5432 user=postgres dbname=app", "counts", &["word", "n"])
//!             .with_sink_id("wordcount")
//!             .bridged(),
//!     );
//! ```

#![deny(missing_docs)]

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use std::marker::PhantomData;
use std::str::FromStr;
use std::time::Duration;
use tidewater::io::{AsyncSink, BridgeOptions, SinkBridge, Unavailable};
use tidewater::{Committed, Element, Recovery, Txn, UserError, WindowedValue};
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Client, Config, NoTls};

mod checks;
use checks::{is_name, is_sink_id, is_table};

/// An element that is one row of the sink's table: one value per column, in the order
/// of the sink's columns.
pub trait ToRow: Element {
    /// How many columns the row has.
    const COLUMNS: usize;
    /// The row's values.
    fn values(&self) -> Vec<&(dyn ToSql + Sync)>;
}

macro_rules! to_row_scalar {
    ($($t:ty),*) => {$(
        impl ToRow for $t {
            const COLUMNS: usize = 1;
            fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
                vec![self]
            }
        }
    )*};
}

to_row_scalar!(String, i16, i32, i64, f32, f64, bool);

macro_rules! to_row_tuple {
    ($n:expr; $($t:ident $i:tt),*) => {
        impl<$($t: ToSql + Sync + Element),*> ToRow for ($($t,)*) {
            const COLUMNS: usize = $n;
            fn values(&self) -> Vec<&(dyn ToSql + Sync)> {
                vec![$(&self.$i),*]
            }
        }
    };
}

to_row_tuple!(1; A 0);
to_row_tuple!(2; A 0, B 1);
to_row_tuple!(3; A 0, B 1, C 2);
to_row_tuple!(4; A 0, B 1, C 2, D 3);
to_row_tuple!(5; A 0, B 1, C 2, D 3, E 4);
to_row_tuple!(6; A 0, B 1, C 2, D 3, E 4, F 5);

/// Writes rows of type `T` into a PostgreSQL table, exactly once by epoch (see the crate
/// documentation). Its fields travel in the plan; write through [`PostgresSink::bridged`].
#[derive(Serialize, Deserialize)]
#[serde(bound = "")]
pub struct PostgresSink<T> {
    /// The connection: a `postgresql://` URL or `key=value` pairs (tokio-postgres'
    /// `Config`).
    pub url: String,
    /// The table, `name` or `schema.name`.
    #[serde(deserialize_with = "checks::checked::table")]
    pub table: String,
    /// Its columns the rows fill, in the order of a row's values.
    #[serde(deserialize_with = "checks::checked::columns")]
    pub columns: Vec<String>,
    /// Names this sink in transaction ids (letters, digits, `-` and `_`; at most 80),
    /// beside the job's id: two sinks of one job writing into one table need different
    /// ids. By default the table's name.
    #[serde(deserialize_with = "checks::checked::sink_id")]
    pub sink_id: String,
    /// The longest a connection attempt or a statement may take, in milliseconds.
    #[serde(deserialize_with = "checks::checked::timeout_ms")]
    pub timeout_ms: u64,
    /// The ledger table (see the crate documentation), `name` or `schema.name`.
    #[serde(
        default = "default_ledger",
        deserialize_with = "checks::checked::ledger_table"
    )]
    pub ledger_table: String,
    /// The job writing, as the runner says ([`tidewater::Sink::begin_job`]).
    #[serde(skip)]
    job: Option<String>,
    #[serde(skip)]
    conn: Connections,
    #[serde(skip)]
    _rows: PhantomData<fn(T)>,
}

fn default_ledger() -> String {
    "tidewater_ledger".to_string()
}

/// Ledger rows older than this are pruned (one instance's, every
/// [`PRUNE_EVERY`] epochs, in its transaction).
const LEDGER_RETENTION: &str = "7 days";
const PRUNE_EVERY: u64 = 1000;

/// An instance's two connections, made at its first call.
#[derive(Default)]
struct Connections {
    /// Holds the open transaction.
    data: Option<Client>,
    /// Commits, rolls back and lists prepared transactions (which cannot run inside
    /// the data connection's open transaction).
    control: Option<Client>,
    /// The transaction open on `data`.
    open: Option<Txn>,
    instance: Option<u32>,
}

impl<T: ToRow> PostgresSink<T> {
    /// Writes into `columns` of `table` on the server at `url`; the sink id defaults to
    /// the table's name.
    pub fn new(url: &str, table: &str, columns: &[&str]) -> Self {
        PostgresSink {
            url: url.to_string(),
            table: table.to_string(),
            columns: columns.iter().map(|c| c.to_string()).collect(),
            sink_id: table.replace('.', "_"),
            timeout_ms: 10_000,
            ledger_table: default_ledger(),
            job: None,
            conn: Connections::default(),
            _rows: PhantomData,
        }
    }

    /// Names the sink in transaction ids (for two sinks of one job on one table).
    pub fn with_sink_id(mut self, sink_id: &str) -> Self {
        self.sink_id = sink_id.to_string();
        self
    }

    /// What transaction ids of this sink in this job begin with.
    fn gid_prefix(&self) -> String {
        format!(
            "tidewater:{}:{}:",
            self.sink_id,
            self.job.as_deref().unwrap_or("-")
        )
    }

    /// Keeps the ledger in `table` (`name` or `schema.name`) instead of
    /// `tidewater_ledger`.
    pub fn with_ledger_table(mut self, table: &str) -> Self {
        self.ledger_table = table.to_string();
        self
    }

    /// The longest a connection attempt or statement may take (1 ms to a day).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout_ms =
            (timeout.as_millis() as u64).clamp(1, tidewater::plan::field::MAX_TIMEOUT_MS);
        self
    }

    /// The sink as a [`tidewater::Sink`], to pass to `write_to`.
    pub fn bridged(self) -> SinkBridge<Self> {
        SinkBridge::new(self)
    }

    /// The transaction id of `txn`.
    pub fn gid(&self, txn: &Txn) -> String {
        format!("{}e{}:i{}", self.gid_prefix(), txn.epoch, txn.instance)
    }

    /// The epoch and instance of a transaction id of this job, if it is one.
    fn parse_gid(&self, gid: &str) -> Option<Txn> {
        let rest = gid.strip_prefix(&self.gid_prefix())?.strip_prefix('e')?;
        let (epoch, instance) = rest.split_once(":i")?;
        Some(Txn {
            epoch: epoch.parse().ok()?,
            instance: instance.parse().ok()?,
        })
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.max(1))
    }

    /// Where the sink connects, without the password, for messages.
    fn server(&self) -> String {
        match Config::from_str(&self.url) {
            Ok(c) => {
                let hosts: Vec<String> = c
                    .get_hosts()
                    .iter()
                    .zip(c.get_ports().iter().chain(std::iter::repeat(&5432)))
                    .map(|(h, p)| match h {
                        tokio_postgres::config::Host::Tcp(h) => format!("{h}:{p}"),
                        tokio_postgres::config::Host::Unix(d) => {
                            format!("{}/.s.PGSQL.{p}", d.display())
                        }
                    })
                    .collect();
                format!(
                    "PostgreSQL at {} (user {}, database {})",
                    hosts.join(","),
                    c.get_user().unwrap_or("?"),
                    c.get_dbname().unwrap_or("?")
                )
            }
            Err(_) => "PostgreSQL".to_string(),
        }
    }

    /// Checks the configuration: what a bad one gets wrong, named.
    fn check(&self) -> Result<(), UserError> {
        for (what, table) in [("table", &self.table), ("ledger table", &self.ledger_table)] {
            if !is_table(table) {
                return Err(format!(
                    "PostgreSQL sink: the {what} '{table}' is not a plain name (letters, digits, _; optionally schema.name)"
                )
                .into());
            }
        }
        if let Some(c) = self.columns.iter().find(|c| !is_name(c)) {
            return Err(format!("PostgreSQL sink: the column '{c}' is not a plain name").into());
        }
        if self.columns.len() != T::COLUMNS {
            return Err(format!(
                "PostgreSQL sink: {} columns given for table '{}' ({}), but a row has {} values",
                self.columns.len(),
                self.table,
                self.columns.join(", "),
                T::COLUMNS
            )
            .into());
        }
        if !is_sink_id(&self.sink_id) {
            return Err(format!(
                "PostgreSQL sink: the sink id '{}' must be 1 to 80 letters, digits, - or _",
                self.sink_id
            )
            .into());
        }
        Ok(())
    }

    /// Opens a connection. Failing to reach the server when the instance starts is the
    /// job's error (a wrong URL, a server that is down); later, mid-run, the server went
    /// away ([`Unavailable`]).
    async fn connect(
        &self,
        role: &str,
        instance: u32,
        at_start: bool,
    ) -> Result<Client, UserError> {
        let gone = |message: String| -> UserError {
            if at_start {
                message.into()
            } else {
                Unavailable(message).into()
            }
        };
        let mut config = Config::from_str(&self.url)
            .map_err(|e| format!("PostgreSQL sink: the connection string is not valid: {e}"))?;
        config
            .connect_timeout(self.timeout())
            .keepalives(true)
            .keepalives_idle(Duration::from_secs(10))
            .application_name(format!(
                "tidewater-{}-i{instance}-{role}-{}",
                self.sink_id,
                self.job.as_deref().unwrap_or("-")
            ))
            .options(format!("-c statement_timeout={}", self.timeout_ms.max(1)));
        let (client, connection) =
            match tokio::time::timeout(self.timeout(), config.connect(NoTls)).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => {
                    return Err(gone(format!(
                        "cannot connect to {}: {} (is the server running, and the URL right?)",
                        self.server(),
                        describe(&e)
                    )))
                }
                Err(_) => {
                    return Err(gone(format!(
                        "cannot connect to {}: no answer within {:?}",
                        self.server(),
                        self.timeout()
                    )))
                }
            };
        // The connection's IO runs on its own task; it ends when the client is dropped
        // or the server goes away (the client's calls then fail).
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    async fn control(&mut self, instance: u32, at_start: bool) -> Result<&Client, UserError> {
        if self.conn.control.as_ref().is_none_or(|c| c.is_closed()) {
            // Nothing is open on this connection: a new one does as well.
            let c = self.connect("control", instance, at_start).await?;
            self.conn.control = Some(c);
        }
        Ok(self.conn.control.as_ref().expect("connected above"))
    }

    /// Runs `sql` on the control connection; a transaction id that does not exist
    /// (committed or rolled back already) is no error.
    async fn finish_prepared(&mut self, verb: &str, txn: &Txn) -> Result<(), UserError> {
        let gid = self.gid(txn);
        let server = self.server();
        let client = self.control(txn.instance, false).await?;
        match client
            .batch_execute(&format!("{verb} PREPARED '{gid}'"))
            .await
        {
            Ok(()) => Ok(()),
            // Rolled back or committed already: a rollback is done either way; a commit
            // is done only if the ledger says it committed.
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) && verb == "ROLLBACK" => Ok(()),
            Err(e) if e.code() == Some(&SqlState::UNDEFINED_OBJECT) => {
                if self.in_ledger(txn).await? {
                    return Ok(());
                }
                Err(format!(
                    "epoch {} of instance {} is lost: its transaction '{gid}' was prepared, but it is no longer on {server} and the ledger {} has no commit of it, so its rows were rolled back outside this job (by hand, or by another run on the same table)",
                    txn.epoch, txn.instance, self.ledger_table
                )
                .into())
            }
            Err(e) => {
                let m = format!(
                    "{verb} PREPARED '{gid}' on {server} failed: {}",
                    describe(&e)
                );
                Err(failure(&e, m))
            }
        }
    }

    /// Whether the ledger records `txn` as committed.
    async fn in_ledger(&mut self, txn: &Txn) -> Result<bool, UserError> {
        let server = self.server();
        let sql = format!(
            "SELECT 1 FROM {} WHERE sink = $1 AND job = $2 AND epoch = $3 AND instance = $4",
            self.ledger_table
        );
        let (sink, job) = (self.sink_id.clone(), self.job_name());
        let client = self.control(txn.instance, false).await?;
        let rows = client
            .query(
                sql.as_str(),
                &[&sink, &job, &(txn.epoch as i64), &(txn.instance as i64)],
            )
            .await
            .map_err(|e| {
                let m = format!("reading the ledger on {server} failed: {}", describe(&e));
                failure(&e, m)
            })?;
        Ok(!rows.is_empty())
    }

    fn job_name(&self) -> String {
        self.job.clone().unwrap_or_else(|| "-".into())
    }

    /// Makes the ledger table if it is missing.
    async fn ensure_ledger(client: &Client, ledger: &str, server: &str) -> Result<(), UserError> {
        // Made under a transaction-scoped advisory lock: instances of several processes
        // start at once, and concurrent CREATE TABLE IF NOT EXISTS can still clash on
        // the table's row type ("type ... already exists").
        let key = tidewater::exec::key_hash(format!("tidewater:ledger:{ledger}").as_bytes()) as i64;
        let sql = format!(
            "BEGIN; SELECT pg_advisory_xact_lock({key}); CREATE TABLE IF NOT EXISTS {ledger} (sink text NOT NULL, job text NOT NULL, epoch bigint NOT NULL, instance bigint NOT NULL, target text NOT NULL, written_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (sink, job, epoch, instance)); COMMIT"
        );
        for attempt in 0..3 {
            match client.batch_execute(&sql).await {
                Ok(()) => return Ok(()),
                // Made by another run at once all the same: it is there the next time.
                Err(e)
                    if attempt < 2
                        && [
                            SqlState::UNIQUE_VIOLATION,
                            SqlState::DUPLICATE_TABLE,
                            SqlState::DUPLICATE_OBJECT,
                        ]
                        .iter()
                        .any(|c| e.code() == Some(c)) =>
                {
                    let _ = client.batch_execute("ROLLBACK").await;
                }
                Err(e) => {
                    let _ = client.batch_execute("ROLLBACK").await;
                    return Err(format!(
                        "creating the ledger table {ledger} on {server} failed: {}",
                        describe(&e)
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    fn insert_sql(&self, rows: usize) -> String {
        let cols = self.columns.len();
        let mut sql = format!(
            "INSERT INTO {} ({}) VALUES ",
            self.table,
            self.columns.join(", ")
        );
        for r in 0..rows {
            if r > 0 {
                sql.push(',');
            }
            sql.push('(');
            for c in 0..cols {
                if c > 0 {
                    sql.push(',');
                }
                sql.push_str(&format!("${}", r * cols + c + 1));
            }
            sql.push(')');
        }
        sql
    }
}

/// Whether `e` is one that passes (the connection closed or broken, the server shutting
/// down, a timeout or a lock wait): recoverable from the last checkpoint, unlike a bad
/// statement.
fn lost(e: &tokio_postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    if let Some(code) = e.code() {
        let code = code.code();
        // The connection or server gone (08, 57P), and what passes with time: a
        // statement over its timeout or a lock not granted in time (57014, 55P03:
        // another session holds what it needs, often one of an earlier run that ends
        // soon), a serialization failure or deadlock (40001, 40P01), no connection
        // slot (53300).
        return code.starts_with("08")
            || code.starts_with("57P")
            || ["57014", "55P03", "40001", "40P01", "53300"].contains(&code);
    }
    std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>())
}

/// `message` as the sink's error: [`Unavailable`] if the server went away.
fn failure(e: &tokio_postgres::Error, message: String) -> UserError {
    if lost(e) {
        Unavailable(message).into()
    } else {
        message.into()
    }
}

/// A tokio-postgres error with its server message or cause.
fn describe(e: &tokio_postgres::Error) -> String {
    match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => {
            let mut s = e.to_string();
            let mut cause = std::error::Error::source(e);
            while let Some(c) = cause {
                s.push_str(&format!(": {c}"));
                cause = c.source();
            }
            s
        }
    }
}

/// Rows per INSERT statement (PostgreSQL takes at most 65535 parameters).
const ROWS_PER_STATEMENT: usize = 500;

#[async_trait]
impl<T: ToRow> AsyncSink for PostgresSink<T> {
    type In = T;

    async fn write(&mut self, txn: &Txn, elements: Vec<WindowedValue<T>>) -> Result<(), UserError> {
        let server = self.server();
        if self.conn.open != Some(*txn) {
            if let Some(open) = self.conn.open {
                return Err(format!(
                    "transaction {} is still open while {} begins (the sink protocol stages one epoch before the next)",
                    self.gid(&open),
                    self.gid(txn)
                )
                .into());
            }
            if self.conn.data.as_ref().is_none_or(|c| c.is_closed()) {
                let c = self.connect("data", txn.instance, false).await?;
                self.conn.data = Some(c);
            }
            let data = self.conn.data.as_ref().expect("connected above");
            data.batch_execute("BEGIN")
                .await
                .map_err(|e| failure(&e, format!("BEGIN on {server} failed: {}", describe(&e))))?;
            self.conn.open = Some(*txn);
            // The ledger's row commits (or rolls back) with the epoch's rows.
            let (sink, job) = (self.sink_id.clone(), self.job_name());
            let (epoch, instance) = (txn.epoch as i64, txn.instance as i64);
            let ledger = self.ledger_table.clone();
            let record = format!(
                "INSERT INTO {ledger} (sink, job, epoch, instance, target) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING"
            );
            data.execute(
                record.as_str(),
                &[&sink, &job, &epoch, &instance, &self.table],
            )
            .await
            .map_err(|e| {
                let m = format!(
                    "recording transaction {} in the ledger {ledger} on {server} failed: {}",
                    self.gid(txn),
                    describe(&e)
                );
                failure(&e, m)
            })?;
            if txn.epoch.is_multiple_of(PRUNE_EVERY) {
                let prune = format!(
                    "DELETE FROM {ledger} WHERE sink = $1 AND job = $2 AND instance = $3 AND epoch < $4 AND written_at < now() - interval '{LEDGER_RETENTION}'"
                );
                data.execute(prune.as_str(), &[&sink, &job, &instance, &epoch])
                    .await
                    .map_err(|e| {
                        let m = format!(
                            "pruning the ledger {ledger} on {server} failed: {}",
                            describe(&e)
                        );
                        failure(&e, m)
                    })?;
            }
        }
        let data = self.conn.data.as_ref().expect("a transaction is open");
        if data.is_closed() {
            return Err(Unavailable(format!(
                "the connection to {server} was lost with transaction {} open: its rows are gone, the epoch is written again after recovery",
                self.gid(txn)
            ))
            .into());
        }
        let per = ROWS_PER_STATEMENT.min(65_535 / T::COLUMNS.max(1));
        for chunk in elements.chunks(per) {
            let sql = self.insert_sql(chunk.len());
            let params: Vec<&(dyn ToSql + Sync)> =
                chunk.iter().flat_map(|x| x.value.values()).collect();
            data.execute(sql.as_str(), &params).await.map_err(|e| {
                let m = format!(
                    "inserting into {} on {server} (transaction {}) failed: {}",
                    self.table,
                    self.gid(txn),
                    describe(&e)
                );
                failure(&e, m)
            })?;
        }
        Ok(())
    }

    async fn stage(&mut self, txn: &Txn) -> Result<(), UserError> {
        if self.conn.open != Some(*txn) {
            // Nothing was written to the server in this transaction.
            return Ok(());
        }
        let gid = self.gid(txn);
        let server = self.server();
        let data = self.conn.data.as_ref().expect("a transaction is open");
        let result = data
            .batch_execute(&format!("PREPARE TRANSACTION '{gid}'"))
            .await;
        self.conn.open = None;
        result.map_err(|e| {
            let hint = if e.code() == Some(&SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE) {
                " (set max_prepared_transactions > 0 on the server)"
            } else {
                ""
            };
            let m = format!(
                "PREPARE TRANSACTION '{gid}' on {server} failed: {}{hint}",
                describe(&e)
            );
            failure(&e, m)
        })
    }

    async fn commit(&mut self, txn: &Txn) -> Result<(), UserError> {
        self.finish_prepared("COMMIT", txn).await
    }

    async fn abort(&mut self, txn: &Txn) -> Result<(), UserError> {
        if self.conn.open == Some(*txn) {
            self.conn.open = None;
            if let Some(data) = self.conn.data.as_ref().filter(|c| !c.is_closed()) {
                let _ = data.batch_execute("ROLLBACK").await;
            }
            return Ok(());
        }
        self.finish_prepared("ROLLBACK", txn).await
    }

    fn begin_job(&mut self, job: &str) -> Result<(), UserError> {
        self.job = Some(job.to_string());
        Ok(())
    }

    async fn recover(&mut self, recovery: &Recovery) -> Result<(), UserError> {
        self.check()?;
        self.conn.instance = Some(recovery.instance);
        let server = self.server();
        let table = self.table.clone();
        let columns = self.columns.join(", ");
        let lock_name = format!("{}i{}", self.gid_prefix(), recovery.instance);
        let lock_wait = self.timeout();
        let ledger = self.ledger_table.clone();
        // Out of reach at a restart (writing resumes after epoch 0): as mid-run.
        let client = self
            .control(recovery.instance, recovery.resume_epoch == 0)
            .await?;
        // One run of a job's instance at a time: a session lock (held as long as the
        // control connection, so it goes with a killed process) on the sink, job and
        // instance. A second run of the same job would roll back the first one's
        // prepared transactions here, and the first would then commit nothing.
        // Waited for a while: a killed process's session may take a moment to end.
        let key = tidewater::exec::key_hash(lock_name.as_bytes()) as i64;
        let started = std::time::Instant::now();
        loop {
            let row = client
                .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                .await
                .map_err(|e| {
                    format!(
                        "taking the lock '{lock_name}' on {server} failed: {}",
                        describe(&e)
                    )
                })?;
            if row.get::<_, bool>(0) {
                break;
            }
            if started.elapsed() >= lock_wait {
                return Err(format!(
                    "instance {} of job {} is already writing into {table} (sink {}) on {server}: another run of the same job holds its lock '{lock_name}'; two runs of one job on one table are refused (give this one another --job-id, or wait for that one to end)",
                    recovery.instance,
                    self.job.as_deref().unwrap_or("-"),
                    self.sink_id,
                )
                .into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A clear error now for a missing table or column, not at the first write.
        client
            .batch_execute(&format!("SELECT {columns} FROM {table} WHERE false"))
            .await
            .map_err(|e| {
                format!(
                    "the table {table} ({columns}) on {server}: {}",
                    describe(&e)
                )
            })?;
        Self::ensure_ledger(client, &ledger, &server).await?;
        let rows = client
            .query(
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database()",
                &[],
            )
            .await
            .map_err(|e| {
                format!(
                    "listing prepared transactions on {server} failed: {}",
                    describe(&e)
                )
            })?;
        let leftover: Vec<Txn> = rows
            .iter()
            .filter_map(|r| self.parse_gid(r.get::<_, &str>(0)))
            .filter(|t| recovery.takes_over(t.instance))
            .collect();
        for txn in leftover {
            tracing::warn!(
                "PostgreSQL sink: rolling back {} left prepared by an earlier run (its epoch is written again)",
                self.gid(&txn)
            );
            self.finish_prepared("ROLLBACK", &txn).await?;
        }
        Ok(())
    }

    async fn committed(&mut self, restoring: bool) -> Result<Vec<Committed>, UserError> {
        self.check()?;
        let server = self.server();
        let ledger = self.ledger_table.clone();
        let sink = self.sink_id.clone();
        // Out of reach at a restart: as mid-run, the job waits for the server.
        let client = self.control(0, !restoring).await?;
        let read = |e: tokio_postgres::Error| -> UserError {
            let m = format!(
                "reading the ledger {ledger} on {server} failed: {}",
                describe(&e)
            );
            failure(&e, m)
        };
        let exists: Option<String> = client
            .query_one("SELECT to_regclass($1)::text", &[&ledger])
            .await
            .map_err(read)?
            .get(0);
        if exists.is_none() {
            return Ok(Vec::new());
        }
        let rows = client
            .query(
                format!("SELECT job, max(epoch) FROM {ledger} WHERE sink = $1 GROUP BY job")
                    .as_str(),
                &[&sink],
            )
            .await
            .map_err(read)?;
        Ok(rows
            .iter()
            .map(|r| Committed {
                job: r.get(0),
                last_epoch: r.get::<_, i64>(1) as u64,
            })
            .collect())
    }

    fn bridge_options(&self) -> BridgeOptions {
        BridgeOptions {
            // A statement may take up to the sink's timeout; the pipeline waits a
            // little longer before it calls the sink unresponsive.
            timeout: self.timeout() * 2,
            ..BridgeOptions::default()
        }
    }
}
