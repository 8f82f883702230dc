//! [`HttpClient`]: a minimal HTTP/1.1 client for tests and benchmarks of
//! plugins served over HTTP (feature `testing`). It needs no `http` feature:
//! a test or benchmark may drive a server built elsewhere without linking
//! an HTTP server itself.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// One keep-alive connection to a plugin served over HTTP, opened on first
/// use and reopened when the server closes it.
///
/// ```no_run
/// use scriptling_plugin::testing::HttpClient;
///
/// let mut client = HttpClient::new("127.0.0.1:8081".parse().unwrap()).header("X-Scriptling-Client", "test");
/// let response = client.post("/json-rpc", br#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#).unwrap();
/// assert_eq!(response.status, 200);
/// assert_eq!(response.json()["result"]["status"], "ok");
/// ```
#[derive(Debug)]
pub struct HttpClient {
    addr: SocketAddr,
    headers: Vec<(String, String)>,
    timeout: Duration,
    connection: Option<(BufReader<TcpStream>, TcpStream)>,
}

/// A response: status, head (status line and headers) and body.
#[derive(Clone, Debug)]
pub struct HttpResponse {
    /// The status code.
    pub status: u16,
    /// The status line and headers, as sent.
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResponse {
    /// The body as JSON (`null` if empty or not JSON).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }

    /// The value of header `name` (any case), if sent.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (key, value) = line.split_once(':')?;
            key.trim().eq_ignore_ascii_case(name).then(|| value.trim())
        })
    }
}

impl HttpClient {
    /// A client of the server at `addr`; responses wait up to 30 s.
    pub fn new(addr: SocketAddr) -> Self {
        Self { addr, headers: Vec::new(), timeout: Duration::from_secs(30), connection: None }
    }

    /// Sends `name: value` with every request.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// How long to wait for a response.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// `POST`s a JSON `body` to `path`.
    pub fn post(&mut self, path: &str, body: &[u8]) -> io::Result<HttpResponse> {
        self.request("POST", path, &[("Content-Type", "application/json")], body)
    }

    /// Sends any request, with `headers` besides the client's own.
    pub fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> io::Result<HttpResponse> {
        let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {}\r\nContent-Length: {}\r\n", self.addr, body.len());
        for (name, value) in self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())).chain(headers.iter().copied()) {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        let (reader, writer) = match &mut self.connection {
            Some(connection) => connection,
            None => {
                let stream = TcpStream::connect(self.addr)?;
                stream.set_nodelay(true)?;
                stream.set_read_timeout(Some(self.timeout))?;
                let writer = stream.try_clone()?;
                self.connection.insert((BufReader::new(stream), writer))
            }
        };
        writer.write_all(head.as_bytes())?;
        writer.write_all(body)?;
        let response = read_response(reader);
        let close =
            response.as_ref().map_or(true, |r| r.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close")));
        if close {
            self.connection = None;
        }
        response
    }
}

fn read_response(reader: &mut impl BufRead) -> io::Result<HttpResponse> {
    let mut head = String::new();
    loop {
        let before = head.len();
        if reader.read_line(&mut head)? == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the server closed the connection"));
        }
        if &head[before..] == "\r\n" {
            break;
        }
    }
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, format!("not an HTTP response: {head:?}")))?;
    let response = HttpResponse { status, head: head.trim_end().to_owned(), body: Vec::new() };
    let length: usize = response.header("content-length").and_then(|v| v.parse().ok()).unwrap_or(0);
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok(HttpResponse { body, ..response })
}
