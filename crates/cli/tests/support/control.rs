//! A hand-driven control session for tests that play a hostile or unusual client: hello,
//! request and the server's answer through the sans-IO `ClientSession`, over a TCP
//! connection from a chosen local address (another "host" on loopback or in a namespace).
#![allow(dead_code, unreachable_pub)]

use netchar_model::{Direction, TestSpec, UdpRate};
use netchar_wire::session::{ClientEvent, ClientSession, Timeouts};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// A TCP connection from a chosen local address (another "host" on loopback).
pub fn connect_from(local: &str, port: u16) -> TcpStream {
    connect_from_to(local, "127.0.0.1", port)
}

/// A TCP connection from `local` to `server:port`.
pub fn connect_from_to(local: &str, server: &str, port: u16) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&format!("{local}:0").parse::<SocketAddr>().unwrap().into()).unwrap();
    socket.connect(&format!("{server}:{port}").parse::<SocketAddr>().unwrap().into()).unwrap();
    socket.into()
}

/// A hand-driven control session: hello, request, and the server's answer.
pub struct Control {
    stream: TcpStream,
    session: ClientSession,
}

impl Control {
    pub fn open(local: &str, port: u16, spec: TestSpec, companion: Option<[u8; 16]>) -> Self {
        Self::open_to(local, "127.0.0.1", port, spec, companion)
    }

    /// A session from `local` to the server at `server:port`.
    pub fn open_to(local: &str, server: &str, port: u16, spec: TestSpec, companion: Option<[u8; 16]>) -> Self {
        let stream = connect_from_to(local, server, port);
        stream.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let session = ClientSession::with_companion(Instant::now(), spec, Timeouts::default(), companion);
        Self { stream, session }
    }

    /// Drives the session until it yields an event (or fails, or 5 s pass).
    pub fn next_event(&mut self) -> Result<ClientEvent, String> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut buf = [0u8; 4096];
        loop {
            let mut out = Vec::new();
            self.session.poll_output(&mut out);
            self.stream.write_all(&out).map_err(|e| e.to_string())?;
            if let Some(ev) = self.session.poll_event() {
                return Ok(ev);
            }
            if Instant::now() > deadline {
                return Err("no answer within 5 s".into());
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return Err("closed".into()),
                Ok(n) => self.session.handle_input(Instant::now(), &buf[..n]).map_err(|e| e.to_string())?,
                Err(_) => {}
            }
        }
    }
}

/// `udp -R` at `rate` bit/s with 1472-byte datagrams.
pub fn udp_reverse(rate: u64) -> TestSpec {
    let mut spec = TestSpec::udp_default();
    spec.direction = Direction::Down;
    spec.block_bytes = 1472;
    spec.udp.as_mut().unwrap().rate = UdpRate::BitsPerSecond(rate);
    spec
}
