//! A raw HTTP/1.1 server on 127.0.0.1 that can hang where a real one does: before the
//! headers, or after them in the middle of the body. It records every request it read (a POST
//! read is a POST processed), and a plan decides the reply to each.
//!
//! Every answer carries `connection: close`, so each attempt of a client is a connection of
//! its own and a hung connection is never reused.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Connections the server accepts before it stops: no test here makes more.
const MAX_CONNECTIONS: usize = 500;
/// How long a hung connection is held open: far past any bound a test configures, so the
/// client's timeout ends it, never the server (the test's runtime drops it sooner anyway).
const HOLD: Duration = Duration::from_secs(60);
/// The largest request head read: the tests' requests are a few hundred bytes.
const MAX_HEAD: usize = 16 * 1024;

/// One request as the server read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    /// The method, as sent.
    pub method: String,
    /// The path, as sent.
    pub path: String,
    /// The `Idempotency-Key` header, if any.
    pub idempotency_key: Option<String>,
    /// Which request to this method and path it is, from 1.
    pub nth: usize,
}

/// What the server does with a request it has read.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A whole answer with this status and body.
    Answer(u16, &'static str),
    /// Nothing at all: the connection stays open and silent.
    Hang,
    /// The headers (declaring `declared` body bytes) and `sent` of the body, then silence.
    StallBody {
        /// The body's first bytes, sent at once.
        sent: &'static str,
        /// The `content-length` announced, more than `sent`.
        declared: usize,
    },
    /// A 200 whose body comes as `chunks` chunks of `chunk`, one every `gap`.
    Trickle {
        /// One chunk's bytes.
        chunk: &'static str,
        /// How many chunks.
        chunks: usize,
        /// The pause before each chunk.
        gap: Duration,
    },
}

type Plan = dyn Fn(&Received) -> Reply + Send + Sync;

/// The server: its URL and what it has read so far.
#[derive(Clone)]
pub struct HangingServer {
    url: String,
    received: Arc<Mutex<Vec<Received>>>,
}

impl HangingServer {
    /// Starts a server on 127.0.0.1 that answers each request as `plan` says.
    pub async fn start(plan: impl Fn(&Received) -> Reply + Send + Sync + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let received = Arc::new(Mutex::new(Vec::new()));
        let server = HangingServer { url, received };
        let plan: Arc<Plan> = Arc::new(plan);
        let log = server.received.clone();
        tokio::spawn(async move {
            for _ in 0..MAX_CONNECTIONS {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve(socket, plan.clone(), log.clone()));
            }
        });
        server
    }

    /// The server's URL with `path` (which starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.url)
    }

    /// Every request read so far, in order.
    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    /// How many requests with this method and path were read.
    pub fn count(&self, method: &str, path: &str) -> usize {
        self.received()
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count()
    }
}

/// Reads one request from `socket`, records it, and replies as the plan says.
async fn serve(mut socket: TcpStream, plan: Arc<Plan>, log: Arc<Mutex<Vec<Received>>>) {
    let Some((method, path, headers, body_read)) = read_head(&mut socket).await else {
        return;
    };
    let header = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.clone())
    };
    // A body of known length is read whole before the request counts as processed.
    if let Some(length) = header("content-length").and_then(|v| v.parse::<usize>().ok()) {
        let mut rest = length.saturating_sub(body_read);
        let mut buf = [0u8; 4096];
        while rest > 0 {
            match socket.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => rest = rest.saturating_sub(n),
            }
        }
    }
    let request = {
        let mut log = log.lock().unwrap();
        let nth = 1 + log
            .iter()
            .filter(|r| r.method == method && r.path == path)
            .count();
        let request = Received {
            method,
            path,
            idempotency_key: header("idempotency-key"),
            nth,
        };
        log.push(request.clone());
        request
    };
    match plan(&request) {
        Reply::Answer(status, body) => {
            let head = head(status, Some(body.len()));
            let _ = socket.write_all(format!("{head}{body}").as_bytes()).await;
        }
        Reply::Hang => tokio::time::sleep(HOLD).await,
        Reply::StallBody { sent, declared } => {
            let head = head(200, Some(declared));
            let _ = socket.write_all(format!("{head}{sent}").as_bytes()).await;
            tokio::time::sleep(HOLD).await;
        }
        Reply::Trickle { chunk, chunks, gap } => {
            let head = head(200, Some(chunk.len() * chunks));
            if socket.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for _ in 0..chunks {
                tokio::time::sleep(gap).await;
                if socket.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
            }
        }
    }
    let _ = socket.shutdown().await;
}

/// A response head with `connection: close`.
fn head(status: u16, length: Option<usize>) -> String {
    let length = length.map_or(String::new(), |n| format!("content-length: {n}\r\n"));
    format!("HTTP/1.1 {status} Whatever\r\n{length}connection: close\r\n\r\n")
}

/// The request line's method and path, the headers, and how many body bytes came with the
/// head; `None` if the client went away first.
async fn read_head(
    socket: &mut TcpStream,
) -> Option<(String, String, Vec<(String, String)>, usize)> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    let end = loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            break end;
        }
        if data.len() > MAX_HEAD {
            return None;
        }
        match socket.read(&mut buf).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => data.extend_from_slice(&buf[..n]),
        }
    };
    let text = String::from_utf8_lossy(&data[..end]).into_owned();
    let mut lines = text.split("\r\n");
    let mut request_line = lines.next()?.split(' ');
    let method = request_line.next()?.to_owned();
    let path = request_line.next()?.to_owned();
    let headers = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_owned(), value.trim().to_owned()))
        .collect();
    Some((method, path, headers, data.len() - end - 4))
}
