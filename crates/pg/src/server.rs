//! One connection to the PostgreSQL server, logged in as a client's role on its database
//! with the password from `[auth] users` (so `current_user` is the client's), through
//! `postgres-protocol`'s frontend messages and SCRAM client. It remembers the backend's
//! process id and cancel key (BackendKeyData), the parameters the server reported, the
//! statements prepared on it under the pooler's names, and reads the backend's CPU time (its
//! process CPU clock: `/proc/<pid>/schedstat`'s first field, in one `clock_gettime`) when the
//! server runs on this host.

use std::collections::{HashMap, HashSet};
use std::io;
use std::time::Duration;

use bytes::BytesMut;
use fairlane_runtime::cpu::ThreadCpuClock;
use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256, SCRAM_SHA_256};
use postgres_protocol::message::backend::Message;
use postgres_protocol::message::frontend;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::wire::{self, Frames};

/// A server connection's pool: (database, role).
pub type PoolKey = (String, String);

/// Why a server connection could not be opened.
#[derive(Debug)]
pub enum ConnectError {
    /// The server refused: its ErrorResponse (SQLSTATE, message), passed to the client.
    Refused {
        /// SQLSTATE.
        code: String,
        /// The server's message.
        message: String,
    },
    /// Network trouble or a protocol surprise (SQLSTATE 08006 to the client).
    Io(io::Error),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Refused { code, message } => write!(f, "{message} (SQLSTATE {code})"),
            ConnectError::Io(e) => write!(f, "{e}"),
        }
    }
}

impl From<io::Error> for ConnectError {
    fn from(e: io::Error) -> Self {
        ConnectError::Io(e)
    }
}

/// A logged-in server connection.
#[derive(Debug)]
pub struct ServerConn {
    /// The socket.
    pub stream: TcpStream,
    /// Buffered reading of the server's messages.
    pub frames: Frames,
    /// Its pool.
    pub key: PoolKey,
    /// Its pool's number in the pools ([`crate::pool::PoolId`]).
    pub pool: usize,
    /// Backend process id (BackendKeyData).
    pub pid: i32,
    /// Cancel key (BackendKeyData).
    pub secret: i32,
    /// Its session's parameters and statements (apart from the socket and its buffer, so
    /// the relay updates them while it reads messages where they lie in the buffer).
    pub session: ConnSession,
    /// The backend's CPU clock (a PostgreSQL backend is one thread: its clock is
    /// `/proc/<pid>/schedstat`'s first field).
    cpu: Option<ThreadCpuClock>,
    /// The backend's CPU time at the last reading: the end of the last holding, the start
    /// of the next.
    cpu_mark: Option<u64>,
    /// Set when the connection can no longer be trusted (an I/O error, a protocol surprise):
    /// it is closed instead of returned to the pool.
    pub broken: bool,
}

/// What the pooler knows of a server connection's session: its parameters and the
/// statements prepared on it.
#[derive(Debug, Default)]
pub struct ConnSession {
    /// Parameters as the server last reported them (ParameterStatus), or as the pooler set
    /// them.
    params: HashMap<String, String>,
    /// The client parameters this connection was last brought in line with, while
    /// `params` has not changed since (empty: none known).
    in_line: Vec<(String, String)>,
    /// Statements prepared under the pooler's names (`fl_…`).
    pub prepared: HashSet<String>,
}

impl ConnSession {
    /// Record a ParameterStatus message the server sent.
    pub fn note_parameter(&mut self, m: &[u8]) {
        let mut b = wire::body(m);
        if let (Ok(k), Ok(v)) = (wire::cstr(&mut b), wire::cstr(&mut b)) {
            self.set_param(k, v);
        }
    }

    /// The session parameters as the server reported them or the pooler set them.
    pub fn params(&self) -> &HashMap<String, String> {
        &self.params
    }

    /// Record a parameter's value on the server.
    pub fn set_param(&mut self, name: String, value: String) {
        if self.params.get(&name) != Some(&value) {
            self.in_line.clear();
            self.params.insert(name, value);
        }
    }

    /// Forget a parameter's value (the server went back to a default the pooler does not
    /// know).
    pub fn forget_param(&mut self, name: &str) {
        self.in_line.clear();
        self.params.remove(name);
    }

    /// Whether the connection is known to be in line with `client`'s parameters: it was
    /// brought in line with the same list and has not changed since.
    pub fn in_line_with(&self, client: &[(String, String)]) -> bool {
        !self.in_line.is_empty() && self.in_line == client
    }

    /// The connection's parameters now match `client`'s.
    pub fn mark_in_line(&mut self, client: &[(String, String)]) {
        self.in_line.clear();
        self.in_line.extend_from_slice(client);
    }
}

/// Where the server is and how to reach it.
#[derive(Clone, Debug)]
pub struct Target {
    /// `host:port`.
    pub addr: String,
    /// Connect (and log in) within this long.
    pub timeout: Duration,
    /// Read backends' CPU from `/proc` (the server runs on this host).
    pub schedstat: bool,
}

impl ServerConn {
    /// Open and log in as `key.1` on `key.0` with `password`, passing `params` (the
    /// tracked session parameters) in the startup packet.
    pub async fn connect(
        target: &Target,
        key: PoolKey,
        password: &str,
        params: &[(String, String)],
    ) -> Result<ServerConn, ConnectError> {
        match tokio::time::timeout(target.timeout, Self::login(target, key, password, params)).await
        {
            Ok(r) => r,
            Err(_) => Err(ConnectError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("no login to the server within {:?}", target.timeout),
            ))),
        }
    }

    async fn login(
        target: &Target,
        key: PoolKey,
        password: &str,
        params: &[(String, String)],
    ) -> Result<ServerConn, ConnectError> {
        let stream = TcpStream::connect(&target.addr).await?;
        stream.set_nodelay(true)?;
        let mut c = ServerConn {
            stream,
            frames: Frames::new(1 << 30),
            key,
            pool: 0,
            pid: 0,
            secret: 0,
            session: ConnSession::default(),
            cpu: None,
            cpu_mark: None,
            broken: false,
        };
        let mut out = BytesMut::new();
        let mut startup: Vec<(&str, &str)> =
            vec![("user", c.key.1.as_str()), ("database", c.key.0.as_str())];
        startup.extend(params.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        frontend::startup_message(startup, &mut out)?;
        c.stream.write_all(&out).await?;
        c.authenticate(password).await?;
        c.read_until_ready().await?;
        if target.schedstat {
            c.cpu = ThreadCpuClock::process(c.pid);
            c.cpu_mark = c.cpu_ns();
        }
        Ok(c)
    }

    async fn next_message(&mut self) -> Result<Message, ConnectError> {
        let mut m = self.frames.next(&mut self.stream).await?.ok_or_else(|| {
            io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
        })?;
        if m[0] == b'E' {
            let (code, message) = wire::error_fields(&m);
            return Err(ConnectError::Refused { code, message });
        }
        Message::parse(&mut m)?
            .ok_or_else(|| ConnectError::Io(wire::invalid("incomplete server message")))
    }

    async fn send(&mut self, out: &mut BytesMut) -> io::Result<()> {
        self.stream.write_all(out).await?;
        out.clear();
        Ok(())
    }

    async fn authenticate(&mut self, password: &str) -> Result<(), ConnectError> {
        let mut out = BytesMut::new();
        let mut scram: Option<ScramSha256> = None;
        loop {
            match self.next_message().await? {
                Message::AuthenticationOk => return Ok(()),
                Message::AuthenticationCleartextPassword => {
                    frontend::password_message(password.as_bytes(), &mut out)?;
                }
                Message::AuthenticationMd5Password(b) => {
                    let hash = postgres_protocol::authentication::md5_hash(
                        self.key.1.as_bytes(),
                        password.as_bytes(),
                        b.salt(),
                    );
                    frontend::password_message(hash.as_bytes(), &mut out)?;
                }
                Message::AuthenticationSasl(b) => {
                    let mut mechs = b.mechanisms();
                    let mut ok = false;
                    while let Some(m) = fallible_next(&mut mechs)? {
                        ok |= m == SCRAM_SHA_256;
                    }
                    if !ok {
                        return Err(wire::invalid("the server offers no SCRAM-SHA-256").into());
                    }
                    let s = ScramSha256::new(password.as_bytes(), ChannelBinding::unsupported());
                    frontend::sasl_initial_response(SCRAM_SHA_256, s.message(), &mut out)?;
                    scram = Some(s);
                }
                Message::AuthenticationSaslContinue(b) => {
                    let s = scram
                        .as_mut()
                        .ok_or_else(|| wire::invalid("SASL continue first"))?;
                    s.update(b.data())?;
                    frontend::sasl_response(s.message(), &mut out)?;
                }
                Message::AuthenticationSaslFinal(b) => {
                    let s = scram
                        .as_mut()
                        .ok_or_else(|| wire::invalid("SASL final first"))?;
                    s.finish(b.data())?;
                }
                _ => return Err(wire::invalid("unexpected message during authentication").into()),
            }
            if !out.is_empty() {
                self.send(&mut out).await?;
            }
        }
    }

    async fn read_until_ready(&mut self) -> Result<(), ConnectError> {
        loop {
            match self.next_message().await? {
                Message::BackendKeyData(k) => {
                    self.pid = k.process_id();
                    self.secret = k.secret_key();
                }
                Message::ParameterStatus(p) => {
                    self.session
                        .set_param(p.name()?.to_string(), p.value()?.to_string());
                }
                Message::ReadyForQuery(_) => return Ok(()),
                Message::NoticeResponse(_) => {}
                _ => return Err(wire::invalid("unexpected message before ReadyForQuery").into()),
            }
        }
    }

    /// The backend's CPU time so far in nanoseconds (`/proc/<pid>/schedstat`'s first field,
    /// read through the process's CPU clock), if it is readable.
    pub fn cpu_ns(&self) -> Option<u64> {
        self.cpu.as_ref()?.read()
    }

    /// The backend's CPU time (ns) since the last call (or since login): one reading per
    /// holding, at its end, which is also where the next holding's count starts. All the
    /// backend's CPU is charged to some holding, in one `clock_gettime` each. The kernel
    /// brings the counter up to date when the backend sleeps, is preempted, wakes a task
    /// onto its CPU (its answer waking the pooler, usually) or at a tick; what it ran after
    /// that (finishing its write after ReadyForQuery) is charged to the next holding
    /// (docs/pg.md, "Metering"). `None` if the clock is not readable.
    pub fn cpu_since_mark(&mut self) -> Option<u64> {
        let now = self.cpu_ns()?;
        let since = self.cpu_mark.map(|m| now.saturating_sub(m));
        self.cpu_mark = Some(now);
        since
    }

    /// Whether the server closed or wrote to this idle connection (a restart, an
    /// administrator's `pg_terminate_backend`): then it must not be handed out.
    pub fn is_stale(&self) -> bool {
        let mut b = [0u8; 1];
        !matches!(self.stream.try_read(&mut b), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
    }

    /// Run `sql` (one simple query) and read up to its ReadyForQuery; the transaction status
    /// it ends in, or an error if it failed.
    pub async fn exec(&mut self, sql: &str) -> Result<u8, ConnectError> {
        let mut out = BytesMut::new();
        frontend::query(sql, &mut out)?;
        self.send(&mut out).await?;
        let mut failed = None;
        loop {
            let m = self.frames.next(&mut self.stream).await?.ok_or_else(|| {
                io::Error::new(io::ErrorKind::UnexpectedEof, "server closed the connection")
            })?;
            match m[0] {
                b'E' => {
                    let (code, message) = wire::error_fields(&m);
                    failed = Some(ConnectError::Refused { code, message });
                }
                b'S' => self.session.note_parameter(&m),
                b'Z' => {
                    let status = *wire::body(&m).first().unwrap_or(&b'I');
                    return match failed {
                        Some(e) => Err(e),
                        None => Ok(status),
                    };
                }
                _ => {}
            }
        }
    }

    /// Ask the server to cancel what backend `pid` runs (a new connection, as a client would).
    pub async fn cancel(addr: &str, pid: i32, secret: i32) -> io::Result<()> {
        let mut s = TcpStream::connect(addr).await?;
        let mut out = BytesMut::new();
        frontend::cancel_request(pid, secret, &mut out);
        s.write_all(&out).await?;
        // The server closes it when done; don't wait long.
        let mut b = [0u8; 1];
        let _ = tokio::time::timeout(
            Duration::from_secs(1),
            tokio::io::AsyncReadExt::read(&mut s, &mut b),
        )
        .await;
        Ok(())
    }

    /// Say Terminate and close.
    pub async fn terminate(mut self) {
        let mut out = BytesMut::new();
        frontend::terminate(&mut out);
        let _ = tokio::time::timeout(Duration::from_millis(200), self.stream.write_all(&out)).await;
    }
}

fn fallible_next<'a>(
    it: &mut postgres_protocol::message::backend::SaslMechanisms<'a>,
) -> io::Result<Option<&'a str>> {
    use fallible_iterator::FallibleIterator;
    it.next()
}
