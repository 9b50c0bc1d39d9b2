//! The relay between a client and the server connection it holds: client messages go to the
//! server (prepared statements renamed and re-prepared in transaction mode), server
//! messages go back to the client, and a queue of what each forwarded message will be
//! answered with tells when the connection can be handed back (nothing outstanding, the
//! transaction idle), which answers are the pooler's own (a re-prepare, a parameter SET)
//! and which the pooler gives itself (ParseComplete for a statement the connection already
//! has, CloseComplete for a closed one).

use std::collections::{HashMap, VecDeque};
use std::hash::{Hash, Hasher};
use std::io;

use bytes::BytesMut;

use crate::server::ConnSession;
use crate::wire::{self, Parse};

/// What one forwarded (or answered) client message expects from the server.
#[derive(Clone, Debug, PartialEq)]
enum Expect {
    /// ParseComplete; `hide`: the pooler's own re-prepare; `srv`: its name on the server.
    Parse { hide: bool, srv: Option<String> },
    /// BindComplete.
    Bind,
    /// (ParameterDescription,) RowDescription or NoData.
    Describe,
    /// Rows, then CommandComplete, EmptyQueryResponse or PortalSuspended.
    Execute,
    /// CloseComplete.
    Close,
    /// ReadyForQuery.
    Sync,
    /// A simple query or function call, up to its ReadyForQuery; `hide`: the pooler's own.
    Query { hide: bool },
    /// An answer the pooler writes itself when this entry reaches the front.
    Synth(u8),
}

/// The session parameters the pooler keeps in step on shared server connections.
pub const TRACKED: [&str; 6] = [
    "client_encoding",
    "DateStyle",
    "TimeZone",
    "IntervalStyle",
    "extra_float_digits",
    "application_name",
];

/// A client's view of its session, kept across server connections.
#[derive(Debug, Default)]
pub struct ClientState {
    /// Named statements: the client's name → its Parse and the name on the server.
    pub statements: HashMap<String, (Parse, String)>,
    /// Tracked parameters the client set (startup packet, then ParameterStatus).
    pub params: Vec<(String, String)>,
    /// Rename and re-prepare named statements (transaction mode).
    pub rename: bool,
}

impl ClientState {
    fn set_param(&mut self, name: &str, value: &str) {
        match self.params.iter_mut().find(|(k, _)| k == name) {
            Some(p) => p.1 = value.to_string(),
            None => self.params.push((name.to_string(), value.to_string())),
        }
    }
}

/// The server-side name of a statement: the same text and types share one.
fn server_name(p: &Parse) -> String {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.query.hash(&mut h);
    p.types.hash(&mut h);
    format!("fl_{:016x}_{}", h.finish(), p.query.len())
}

/// The relay's state while a client holds a server connection.
#[derive(Debug)]
pub struct Relay {
    expect: VecDeque<Expect>,
    /// The last ReadyForQuery's transaction status.
    pub status: u8,
    /// The server is reading COPY data from the client.
    pub copy_in: bool,
    /// The client sent extended-protocol messages since its last Sync: the server answers
    /// (or, after an error, skips to) that Sync before the connection may go back.
    unsynced: bool,
    /// Bytes for the server.
    pub to_server: BytesMut,
    /// Bytes for the client.
    pub to_client: BytesMut,
}

impl Default for Relay {
    fn default() -> Self {
        Relay {
            expect: VecDeque::new(),
            status: b'I',
            copy_in: false,
            unsynced: false,
            to_server: BytesMut::with_capacity(4096),
            to_client: BytesMut::with_capacity(8192),
        }
    }
}

/// What a client message meant.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Go on.
    More,
    /// Terminate: the client is leaving.
    Terminate,
}

impl Relay {
    /// Start a new holding of a server connection, keeping the buffers' memory.
    pub fn reset(&mut self) {
        self.expect.clear();
        self.status = b'I';
        self.copy_in = false;
        self.unsynced = false;
        self.to_server.clear();
        self.to_client.clear();
    }

    /// Nothing outstanding and the transaction idle: the connection may go back.
    pub fn idle(&self) -> bool {
        self.expect.is_empty() && self.status == b'I' && !self.copy_in && !self.unsynced
    }

    /// Answers outstanding.
    pub fn outstanding(&self) -> bool {
        !self.expect.is_empty()
    }

    /// Whether the client's messages so far end in a Sync (or a simple query): if not, the
    /// server waits for more before it answers.
    pub fn synced(&self) -> bool {
        !self.unsynced
            && matches!(
                self.expect
                    .iter()
                    .rev()
                    .find(|e| !matches!(e, Expect::Synth(_))),
                None | Some(Expect::Sync) | Some(Expect::Query { .. })
            )
    }

    /// Send Sync on the client's behalf (it left mid-pipeline), expecting its answer.
    pub fn add_sync(&mut self) {
        postgres_protocol::message::frontend::sync(&mut self.to_server);
        self.expect.push_back(Expect::Sync);
        self.unsynced = false;
    }

    /// Bring the server connection's parameters in line with the client's: one hidden
    /// simple query of SETs, if anything differs.
    pub fn sync_params(&mut self, client: &ClientState, conn: &mut ConnSession) {
        // The common case: the connection last served a client with the same parameters
        // (one comparison of the lists instead of a lookup per parameter).
        if conn.in_line_with(&client.params) {
            return;
        }
        let mut sql = String::new();
        for (k, v) in &client.params {
            if conn.params().get(k) != Some(v) {
                sql.push_str(&format!("SET {k} TO '{}';", v.replace('\'', "''")));
                conn.set_param(k.clone(), v.clone());
            }
        }
        conn.mark_in_line(&client.params);
        if !sql.is_empty() {
            // A simple query never fails in the middle of a client's pipeline: it comes
            // before the client's first message.
            let _ = postgres_protocol::message::frontend::query(&sql, &mut self.to_server);
            self.expect.push_back(Expect::Query { hide: true });
        }
    }

    fn synth(&mut self, tag: u8) {
        self.expect.push_back(Expect::Synth(tag));
        self.drain_synth();
    }

    /// Whether answers the pooler writes itself are due (after the message just passed).
    pub fn synth_due(&self) -> bool {
        matches!(self.expect.front(), Some(Expect::Synth(_)))
    }

    /// Write the answers the pooler gives itself that are due to `to_client`.
    pub fn drain_synth(&mut self) {
        while let Some(Expect::Synth(tag)) = self.expect.front() {
            wire::empty(&mut self.to_client, *tag);
            self.expect.pop_front();
        }
    }

    /// Make sure `conn` has the client's statement `name`; the name to use on the server.
    fn ensure(
        &mut self,
        client: &ClientState,
        conn: &mut ConnSession,
        name: &str,
    ) -> Option<String> {
        let (parse, srv) = client.statements.get(name)?;
        if !conn.prepared.contains(srv) {
            parse.write_as(srv, &mut self.to_server);
            self.expect.push_back(Expect::Parse {
                hide: true,
                srv: Some(srv.clone()),
            });
            conn.prepared.insert(srv.clone());
        }
        Some(srv.clone())
    }

    /// One client message.
    pub fn client(
        &mut self,
        m: &[u8],
        client: &mut ClientState,
        conn: &mut ConnSession,
    ) -> io::Result<Step> {
        let rename = client.rename;
        match m[0] {
            b'P' | b'B' | b'D' | b'E' | b'C' => self.unsynced = true,
            b'S' if !self.copy_in => self.unsynced = false,
            _ => {}
        }
        match m[0] {
            b'Q' | b'F' => self.forward(m, Expect::Query { hide: false }),
            b'P' if rename => self.parse(m, client, conn)?,
            b'B' if rename => {
                let (portal, stmt, rest) = wire::bind_statement(m)?;
                match (!stmt.is_empty())
                    .then(|| self.ensure(client, conn, &stmt))
                    .flatten()
                {
                    Some(srv) => wire::write_bind(&mut self.to_server, &portal, &srv, rest),
                    None => self.to_server.extend_from_slice(m),
                }
                self.expect.push_back(Expect::Bind);
            }
            b'D' if rename => {
                let (kind, name) = wire::target(m)?;
                let srv = (kind == b'S' && !name.is_empty())
                    .then(|| self.ensure(client, conn, &name))
                    .flatten();
                match srv {
                    Some(srv) => wire::write_target(&mut self.to_server, b'D', kind, &srv),
                    None => self.to_server.extend_from_slice(m),
                }
                self.expect.push_back(Expect::Describe);
            }
            b'C' if rename => {
                let (kind, name) = wire::target(m)?;
                if kind == b'S' && !name.is_empty() {
                    // Statements stay prepared on the server for whoever needs them next;
                    // a Close of one that does not exist succeeds in PostgreSQL too.
                    client.statements.remove(&name);
                    self.synth(b'3');
                } else {
                    self.forward(m, Expect::Close);
                }
            }
            b'P' => self.forward(
                m,
                Expect::Parse {
                    hide: false,
                    srv: None,
                },
            ),
            b'B' => self.forward(m, Expect::Bind),
            b'D' => self.forward(m, Expect::Describe),
            b'C' => self.forward(m, Expect::Close),
            b'E' => self.forward(m, Expect::Execute),
            // The server ignores Sync and Flush while it reads COPY data.
            b'S' if self.copy_in => self.to_server.extend_from_slice(m),
            b'S' => self.forward(m, Expect::Sync),
            b'H' => self.to_server.extend_from_slice(m),
            b'd' => self.to_server.extend_from_slice(m),
            b'c' | b'f' => {
                self.copy_in = false;
                self.to_server.extend_from_slice(m);
            }
            b'X' => return Ok(Step::Terminate),
            t => {
                return Err(wire::invalid(format!(
                    "unexpected message type {:?} from the client",
                    t as char
                )))
            }
        }
        Ok(Step::More)
    }

    fn forward(&mut self, m: &[u8], e: Expect) {
        self.to_server.extend_from_slice(m);
        self.expect.push_back(e);
    }

    fn parse(
        &mut self,
        m: &[u8],
        client: &mut ClientState,
        conn: &mut ConnSession,
    ) -> io::Result<()> {
        let p = Parse::read(m)?;
        if p.name.is_empty() {
            self.forward(
                m,
                Expect::Parse {
                    hide: false,
                    srv: None,
                },
            );
            return Ok(());
        }
        let srv = server_name(&p);
        if conn.prepared.contains(&srv) {
            self.synth(b'1');
        } else {
            p.write_as(&srv, &mut self.to_server);
            conn.prepared.insert(srv.clone());
            self.expect.push_back(Expect::Parse {
                hide: false,
                srv: Some(srv.clone()),
            });
        }
        client.statements.insert(p.name.clone(), (p, srv));
        Ok(())
    }

    /// One server message; what to write to the client goes to `to_client`.
    pub fn server(&mut self, m: &[u8], client: &mut ClientState, conn: &mut ConnSession) {
        if self.server_pass(m, client, conn) {
            self.to_client.extend_from_slice(m);
        }
        self.drain_synth();
    }

    /// One server message, without writing it: whether it goes to the client as it is.
    /// The caller passes it on, then writes what [`Relay::drain_synth`] writes after it
    /// ([`Relay::server`] does both).
    pub fn server_pass(
        &mut self,
        m: &[u8],
        client: &mut ClientState,
        conn: &mut ConnSession,
    ) -> bool {
        let front = self.expect.front();
        // Rows, the bulk of the traffic, answer no expectation and change nothing: passed
        // on (the pooler's own hidden SETs return none).
        if m[0] == b'D' && !matches!(front, Some(Expect::Query { hide: true })) {
            return true;
        }
        // The pooler's own SETs are answered to nobody; its own re-prepare's ParseComplete
        // too, but not its error: the client's next message depended on it.
        let hidden = match front {
            Some(Expect::Query { hide }) => *hide,
            Some(Expect::Parse { hide, .. }) => *hide && m[0] != b'E',
            _ => false,
        };
        // A simple query's row description and its command tags are passed on as they
        // are (a tag starting with `D` may be DISCARD ALL or DEALLOCATE ALL: below).
        if !hidden
            && matches!(front, Some(Expect::Query { .. }))
            && (m[0] == b'T' || (m[0] == b'C' && wire::body(m).first() != Some(&b'D')))
        {
            return true;
        }
        let (mut failed, mut copy_in) = (false, false);
        let pop = match (m[0], front) {
            (b'Z', _) => {
                self.status = *wire::body(m).first().unwrap_or(&b'I');
                true
            }
            (b'E', Some(Expect::Query { .. })) | (b'E', None) | (b'E', Some(Expect::Sync)) => false,
            (b'E', Some(_)) => {
                failed = true;
                false
            }
            (b'1', Some(Expect::Parse { .. })) => true,
            (b'2', Some(Expect::Bind)) => true,
            (b'3', Some(Expect::Close)) => true,
            (b'T' | b'n', Some(Expect::Describe)) => true,
            (b'C' | b'I' | b's', Some(Expect::Execute)) => true,
            (b'G', _) => {
                copy_in = true;
                false
            }
            (b'S', _) => {
                conn.note_parameter(m);
                if !hidden {
                    let mut b = wire::body(m);
                    if let (Ok(k), Ok(v)) = (wire::cstr(&mut b), wire::cstr(&mut b)) {
                        if TRACKED.contains(&k.as_str()) {
                            client.set_param(&k, &v);
                        }
                    }
                }
                false
            }
            _ => false,
        };
        if failed {
            self.failed(conn);
        }
        if copy_in {
            // COPY FROM STDIN: Syncs the client sent behind the command before its data are
            // ignored by the server, so no ReadyForQuery answers them.
            self.copy_in = true;
            let mut rest = self.expect.split_off(1.min(self.expect.len()));
            rest.retain(|e| *e != Expect::Sync);
            self.expect.append(&mut rest);
        }
        if m[0] == b'C' {
            let tag = wire::body(m);
            if tag.starts_with(b"DISCARD ALL") || tag.starts_with(b"DEALLOCATE ALL") {
                conn.prepared.clear();
            }
        }
        if pop {
            self.expect.pop_front();
        }
        !hidden
    }

    /// An extended-protocol message failed: the server skips to the next Sync, and so do
    /// the expectations (a statement that failed to prepare is not prepared).
    fn failed(&mut self, conn: &mut ConnSession) {
        while let Some(e) = self.expect.front() {
            match e {
                Expect::Sync | Expect::Query { .. } => break,
                Expect::Parse { srv: Some(s), .. } => {
                    conn.prepared.remove(s);
                }
                _ => {}
            }
            self.expect.pop_front();
        }
    }
}
