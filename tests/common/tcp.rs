//! The fixture plugin served over TCP, and a bare line client, for the
//! tests of the TCP transport.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use scriptling_plugin::testing::Host;
use serde_json::{Value as Json, json};

use super::{Raw, Stop};

pub(crate) const WAIT: Duration = Duration::from_secs(15);

/// The fixture plugin serving TCP on a free port.
pub(crate) struct Server {
    pub(crate) raw: Raw,
    pub(crate) addr: SocketAddr,
}

pub(crate) fn serve(env: &[(&str, &str)]) -> Server {
    let mut command = Command::new(env!("CARGO_BIN_EXE_fixture-plugin"));
    command.args(["--listen", "tcp://127.0.0.1:0"]).envs(env.iter().copied());
    serve_command(command)
}

/// The example `name` serving TCP on a free port.
pub(crate) fn serve_example(name: &str) -> Server {
    let mut command = Command::new(scriptling_plugin::testing::example_path(name));
    command.args(["--listen", "tcp://127.0.0.1:0"]);
    serve_command(command)
}

/// `command`, which serves TCP on a port it prints, started.
pub(crate) fn serve_command(mut command: Command) -> Server {
    let raw = Raw::spawn(&mut command);
    let stderr = raw.wait_for_stderr("listening at tcp://", WAIT);
    let addr = stderr
        .split("listening at tcp://")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|addr| addr.parse().ok())
        .unwrap_or_else(|| panic!("no address in {stderr}"));
    Server { raw, addr }
}

impl Server {
    /// Connects and pings until a new client is served (a place or a
    /// descriptor freed comes back); panics with `why` after [`WAIT`].
    pub(crate) fn wait_until_a_new_client_is_served(&self, why: &str) {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let mut next = self.line_client();
            // Turned away while a place is still closing: the write may fail.
            let sent = next.try_send(r#"{"jsonrpc":"2.0","id":9,"method":"ping"}"#).is_ok();
            if sent && next.recv().is_some_and(|a| a["result"]["status"] == "ok") {
                return;
            }
            assert!(std::time::Instant::now() < deadline, "{why}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub(crate) fn host(&self) -> Host {
        let host = Host::connect_tcp(self.addr).expect("connect");
        host.set_timeout(WAIT);
        host
    }

    pub(crate) fn line_client(&self) -> LineClient {
        LineClient::connect(self.addr)
    }

    /// Stops the server with SIGTERM (Ctrl-Break on Windows); `None` where
    /// that cannot be delivered.
    pub(crate) fn terminate(&mut self) -> Option<std::process::ExitStatus> {
        self.raw.stop(Stop::Terminate).then(|| self.raw.wait(WAIT))
    }
}

/// A bare line client, as a ten-line Python or `nc` session would be.
pub(crate) struct LineClient {
    pub(crate) reader: BufReader<TcpStream>,
    pub(crate) writer: TcpStream,
}

impl LineClient {
    pub(crate) fn connect(addr: SocketAddr) -> LineClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream.set_read_timeout(Some(WAIT)).unwrap();
        LineClient { writer: stream.try_clone().unwrap(), reader: BufReader::new(stream) }
    }

    pub(crate) fn send(&mut self, line: &str) {
        self.try_send(line).unwrap();
    }

    pub(crate) fn try_send(&mut self, line: &str) -> std::io::Result<()> {
        self.writer.write_all(format!("{line}\n").as_bytes())
    }

    /// The next line as JSON, or `None` when the server closed the connection.
    pub(crate) fn recv(&mut self) -> Option<Json> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line}"))),
        }
    }

    pub(crate) fn request(&mut self, id: u64, method: &str, params: Json) -> Json {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string());
        let answer = self.recv().expect("an answer");
        assert_eq!(answer["id"], id, "{answer}");
        answer
    }

    /// Whether the server closes the connection within `limit`.
    pub(crate) fn closed_within(&mut self, limit: Duration) -> bool {
        self.reader.get_ref().set_read_timeout(Some(limit)).unwrap();
        let mut line = String::new();
        matches!(self.reader.read_line(&mut line), Ok(0))
    }
}

pub(crate) fn tool(client: &mut LineClient, id: u64, name: &str, arguments: Json) -> Json {
    client.request(id, "tools/call", json!({"name": name, "arguments": arguments}))
}
