//! An S3-compatible server for tests of checkpoints on object stores: the one `.ci/run`
//! starts (`TIDEWATER_S3_ENDPOINT`, see `.ci/s3-server`), else a `moto_server` on PATH
//! started for the test on a free loopback port (`pip install 'moto[server]'`), else
//! none: the test says it skipped why (and fails under CI, which has one).

use std::io::{Read, Write};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub struct S3 {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    server: Option<Child>,
}

impl Drop for S3 {
    fn drop(&mut self) {
        if let Some(c) = &mut self.server {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The test's S3 server, or `None` after saying why `test` is skipped.
pub fn server(test: &str) -> Option<S3> {
    if let Ok(endpoint) = std::env::var("TIDEWATER_S3_ENDPOINT") {
        if !endpoint.is_empty() {
            return Some(S3 {
                endpoint,
                server: None,
            });
        }
    }
    let port = free_port();
    let child = Command::new("moto_server")
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    let Ok(child) = child else {
        assert!(
            std::env::var_os("CI").is_none(),
            "{test}: no S3 server under CI (.ci/run starts one and sets TIDEWATER_S3_ENDPOINT)"
        );
        eprintln!(
            "\n*** SKIPPED {test}: no S3 server (set TIDEWATER_S3_ENDPOINT, or pip install 'moto[server]' for moto_server) ***\n"
        );
        return None;
    };
    let s3 = S3 {
        endpoint: format!("http://127.0.0.1:{port}"),
        server: Some(child),
    };
    let started = Instant::now();
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "moto_server did not listen on port {port} within 30 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    Some(s3)
}

impl S3 {
    /// The environment a job (or this test process) reaches the server with.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT", self.endpoint.clone()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_ACCESS_KEY_ID", "testing".into()),
            ("AWS_SECRET_ACCESS_KEY", "testing".into()),
            ("AWS_REGION", "us-east-1".into()),
        ]
    }

    /// A new bucket named after `what` (and this process), made on the server; its
    /// `s3://` URL.
    pub fn bucket(&self, what: &str) -> String {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "tw-{what}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let hostport = self.endpoint.trim_start_matches("http://");
        let mut stream = std::net::TcpStream::connect(hostport).unwrap();
        write!(
            stream,
            "PUT /{name} HTTP/1.1\r\nHost: {hostport}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut answer = String::new();
        let _ = stream.read_to_string(&mut answer);
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "the S3 server did not make bucket {name}: {answer}"
        );
        format!("s3://{name}")
    }
}
