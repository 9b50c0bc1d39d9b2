//! A client's way in: SSLRequest answered `N`, cancel requests mapped to the server, the
//! startup packet (user, database, application_name, tracked parameters), authentication
//! against `[auth] users` (SCRAM-SHA-256 or md5; trust from loopback if configured), the
//! tenant, and the welcome (ParameterStatus from the pool's first server connection,
//! BackendKeyData of the pooler's own, ReadyForQuery).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bytes::BytesMut;
use rand::RngExt;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::config::AuthMethod;
use crate::pool::PoolId;
use crate::relay::{ClientState, TRACKED};
use crate::scram::{self, ScramError, ScramServer, Verifier};
use crate::server::PoolKey;
use crate::wire::{self, Frames, Severity, Startup};
use crate::Shared;

/// What the client's cancel key maps to: the server connection it holds now, if any.
pub type CancelSlot = Arc<CancelTarget>;

/// The backend (process id, cancel key) a client's session holds now, if any: one atomic
/// word, set and cleared at every holding without a lock. A backend's process id is never
/// 0, which stands for none.
#[derive(Debug, Default)]
pub struct CancelTarget(AtomicU64);

impl CancelTarget {
    /// Hold `to` now (`None`: no backend).
    pub fn set(&self, to: Option<(i32, i32)>) {
        let word = to.map_or(0, |(pid, secret)| {
            (u64::from(pid as u32) << 32) | u64::from(secret as u32)
        });
        self.0.store(word, Ordering::Release);
    }

    /// The backend held now.
    pub fn get(&self) -> Option<(i32, i32)> {
        let word = self.0.load(Ordering::Acquire);
        let pid = (word >> 32) as u32 as i32;
        (pid != 0).then_some((pid, word as u32 as i32))
    }
}

/// A logged-in client.
#[derive(Debug)]
pub struct Client {
    /// The socket.
    pub stream: TcpStream,
    /// Its messages.
    pub frames: Frames,
    /// (database, role).
    pub key: PoolKey,
    /// Its pool's number.
    pub pool: PoolId,
    /// Its tenant.
    pub tenant: usize,
    /// Statements and parameters.
    pub state: ClientState,
    /// The cancel key handed to the client.
    pub cancel_key: (i32, i32),
    /// Where cancel requests for it find the server connection.
    pub cancel: CancelSlot,
}

/// Why a login ended without a session.
#[derive(Debug)]
pub enum LoginEnd {
    /// A cancel request (served) or a client that left.
    Done,
    /// Refused: a FATAL error was sent.
    Refused,
}

async fn fatal(stream: &mut TcpStream, code: &str, message: &str) -> LoginEnd {
    let mut out = BytesMut::new();
    wire::error(&mut out, Severity::Fatal, code, message);
    let _ = stream.write_all(&out).await;
    LoginEnd::Refused
}

/// Log a client in.
pub async fn login(
    shared: &Arc<Shared>,
    mut stream: TcpStream,
    peer: SocketAddr,
) -> Result<Client, LoginEnd> {
    let params = startup(shared, &mut stream).await?;
    let get = |k: &str| params.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let Some(user) = get("user").filter(|u| !u.is_empty()) else {
        return Err(fatal(
            &mut stream,
            "28000",
            "no PostgreSQL user name specified in startup packet",
        )
        .await);
    };
    let database = get("database")
        .filter(|d| !d.is_empty())
        .unwrap_or_else(|| user.clone());
    for (k, _) in &params {
        if k == "options" || k == "replication" {
            return Err(fatal(
                &mut stream,
                "08P01",
                &format!("unsupported startup parameter: {k}"),
            )
            .await);
        }
    }
    let app = get("application_name")
        .or_else(|| get("fallback_application_name"))
        .unwrap_or_default();
    let mut state = ClientState {
        rename: shared.config.pool.mode == crate::config::Mode::Transaction,
        ..ClientState::default()
    };
    for k in TRACKED {
        if let Some(v) = params
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(k))
            .map(|(_, v)| v)
        {
            state.params.push((k.to_string(), v.clone()));
        }
    }
    if !state.params.iter().any(|(k, _)| k == "application_name") {
        state.params.push(("application_name".into(), app.clone()));
    }
    let mut frames = Frames::new(shared.config.limits.max_message_bytes);
    if shared.clients.load(Ordering::Relaxed) > shared.config.limits.max_clients {
        return Err(fatal(&mut stream, "53300", "sorry, too many clients already").await);
    }
    authenticate(shared, &mut stream, &mut frames, &user, peer).await?;
    let tenant = shared
        .sched
        .classify(&shared.config, &user, &database, &app);
    let key = (database, user);
    let welcome = match welcome(shared, &key, tenant, &state).await {
        Ok(w) => w,
        Err((code, message)) => return Err(fatal(&mut stream, &code, &message).await),
    };
    let mut out = BytesMut::new();
    wire::auth(&mut out, 0, &[]);
    for (k, v) in &welcome {
        let v = state
            .params
            .iter()
            .find(|(n, _)| n == k)
            .map_or(v, |(_, v)| v);
        wire::parameter_status(&mut out, k, v);
    }
    let cancel_key = {
        let mut rng = rand::rng();
        (rng.random_range(1..i32::MAX), rng.random())
    };
    let cancel = shared.register_cancel(cancel_key);
    wire::backend_key(&mut out, cancel_key.0, cancel_key.1);
    wire::ready(&mut out, b'I');
    if stream.write_all(&out).await.is_err() {
        shared.unregister_cancel(cancel_key);
        return Err(LoginEnd::Done);
    }
    Ok(Client {
        stream,
        frames,
        pool: shared.pools.id(&key),
        key,
        tenant,
        state,
        cancel_key,
        cancel,
    })
}

/// Read startup packets until the protocol 3.0 one: `N` to encryption requests, cancel
/// requests served.
async fn startup(
    shared: &Arc<Shared>,
    stream: &mut TcpStream,
) -> Result<Vec<(String, String)>, LoginEnd> {
    loop {
        match wire::read_startup(stream).await {
            Ok(Startup::Encryption) => {
                if stream.write_all(b"N").await.is_err() {
                    return Err(LoginEnd::Done);
                }
            }
            Ok(Startup::Cancel { pid, secret }) => {
                shared.cancel(pid, secret).await;
                return Err(LoginEnd::Done);
            }
            Ok(Startup::Params(p)) => return Ok(p),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(fatal(stream, "08P01", &format!("invalid startup packet: {e}")).await)
            }
            Err(_) => return Err(LoginEnd::Done),
        }
    }
}

/// The parameters to greet the client with: the pool's, from its first server connection
/// (opened now, through the gate, if the pool has none: an unknown database or role is the
/// server's own error).
async fn welcome(
    shared: &Arc<Shared>,
    key: &PoolKey,
    tenant: usize,
    state: &ClientState,
) -> Result<Vec<(String, String)>, (String, String)> {
    if let Some(w) = shared.pools.welcome(key) {
        return Ok(w);
    }
    let seat = shared
        .sched
        .acquire(tenant, &mut crate::sched::QueueTimer::new())
        .await
        .map_err(|r| crate::session::refusal_error(&r))?;
    let password = shared
        .config
        .auth
        .password(&key.1)
        .unwrap_or_default()
        .to_string();
    let pool = (shared.pools.id(key), key);
    match shared
        .pools
        .checkout(pool, || &password, &state.params)
        .await
    {
        Ok(mut leased) => {
            // The backend's CPU from its start: its login.
            let conn = leased.conn();
            let cpu = conn.cpu_ns();
            conn.cpu_since_mark();
            let now = Instant::now();
            shared.pools.checkin(leased, now).await;
            seat.finish(cpu, now);
        }
        Err(e) => {
            seat.finish(None, Instant::now());
            return Err(crate::session::connect_error(&e));
        }
    }
    shared.pools.welcome(key).ok_or_else(|| {
        (
            "08006".into(),
            "server connection closed during login".into(),
        )
    })
}

async fn read_password(stream: &mut TcpStream, frames: &mut Frames) -> Result<BytesMut, LoginEnd> {
    match frames.next(stream).await {
        Ok(Some(m)) if m[0] == b'p' => Ok(m),
        Ok(Some(m)) => Err(fatal(
            stream,
            "08P01",
            &format!(
                "expected a password response, got message type {:?}",
                m[0] as char
            ),
        )
        .await),
        Ok(None) | Err(_) => Err(LoginEnd::Done),
    }
}

async fn authenticate(
    shared: &Arc<Shared>,
    stream: &mut TcpStream,
    frames: &mut Frames,
    user: &str,
    peer: SocketAddr,
) -> Result<(), LoginEnd> {
    let failed = format!("password authentication failed for user \"{user}\"");
    let password = shared.config.auth.password(user);
    if shared.config.auth.trust_loopback && peer.ip().is_loopback() {
        return match password {
            Some(_) => Ok(()),
            None => Err(fatal(
                stream,
                "28000",
                &format!("role \"{user}\" is not in the pooler's [auth] users"),
            )
            .await),
        };
    }
    let mut out = BytesMut::new();
    match shared.config.auth.method {
        AuthMethod::Md5 => {
            let salt: [u8; 4] = rand::rng().random();
            wire::auth(&mut out, 5, &salt);
            stream.write_all(&out).await.map_err(|_| LoginEnd::Done)?;
            let m = read_password(stream, frames).await?;
            let ok = password.is_some_and(|p| scram::md5_ok(user, p, salt, wire::body(&m)));
            if !ok {
                return Err(fatal(stream, "28P01", &failed).await);
            }
            Ok(())
        }
        AuthMethod::Scram => {
            // An unknown user goes through the same exchange against a random verifier, so
            // a client cannot tell unknown users from wrong passwords.
            let verifier =
                shared.verifiers.get(user).cloned().unwrap_or_else(|| {
                    Verifier::new(&format!("{:x}", rand::rng().random::<u128>()))
                });
            wire::auth(&mut out, 10, b"SCRAM-SHA-256\0\0");
            stream.write_all(&out).await.map_err(|_| LoginEnd::Done)?;
            let m = read_password(stream, frames).await?;
            let (mech, data) = match wire::sasl_initial(&m) {
                Ok(x) => x,
                Err(e) => return Err(fatal(stream, "08P01", &e.to_string()).await),
            };
            if mech != "SCRAM-SHA-256" {
                return Err(fatal(
                    stream,
                    "28000",
                    &format!("SASL mechanism {mech:?} is not supported"),
                )
                .await);
            }
            let (server, first) = match ScramServer::start(verifier, &data) {
                Ok(x) => x,
                Err(e) => return Err(scram_failed(stream, e, &failed).await),
            };
            out.clear();
            wire::auth(&mut out, 11, first.as_bytes());
            stream.write_all(&out).await.map_err(|_| LoginEnd::Done)?;
            let m = read_password(stream, frames).await?;
            let last = match server.finish(wire::body(&m)) {
                Ok(last) if password.is_some() => last,
                Ok(_) => return Err(fatal(stream, "28P01", &failed).await),
                Err(e) => return Err(scram_failed(stream, e, &failed).await),
            };
            out.clear();
            wire::auth(&mut out, 12, last.as_bytes());
            stream.write_all(&out).await.map_err(|_| LoginEnd::Done)?;
            Ok(())
        }
    }
}

async fn scram_failed(stream: &mut TcpStream, e: ScramError, failed: &str) -> LoginEnd {
    match e {
        ScramError::Failed => fatal(stream, "28P01", failed).await,
        ScramError::Protocol(m) => fatal(stream, "08P01", &m).await,
    }
}

#[cfg(test)]
mod tests {
    use super::CancelTarget;

    #[test]
    fn a_cancel_target_keeps_any_key_and_none() {
        let t = CancelTarget::default();
        assert_eq!(t.get(), None);
        for key in [(1, 0), (4242, -1), (i32::MAX, i32::MIN), (7, 123_456_789)] {
            t.set(Some(key));
            assert_eq!(t.get(), Some(key));
        }
        t.set(None);
        assert_eq!(t.get(), None);
    }
}
