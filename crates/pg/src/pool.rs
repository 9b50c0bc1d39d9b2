//! The server connections: idle ones kept per (database, role), at most
//! `pool.max_connections` open over all pools (in use: at most D, the gate's seats). A
//! transaction holding one of the D seats always finds a connection: its pool's most
//! recently used idle one (checked for a server that closed it meanwhile), a new one below
//! the cap, or a new one in place of the longest-idle connection of another pool.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use crate::server::{ConnectError, PoolKey, ServerConn, Target};

/// A pool's number in [`Pools`]: a client finds its pool once, at login, and its
/// transactions then check connections out and in without hashing (database, role).
pub type PoolId = usize;

#[derive(Debug, Default)]
struct Idle {
    ids: HashMap<PoolKey, PoolId>,
    /// Idle connections per pool, by [`PoolId`], the most recently used last.
    /// (Boxed: a checkout and a check-in move a pointer, not the connection.)
    by_id: Vec<Vec<(Instant, Box<ServerConn>)>>,
    /// Connections open or being opened (idle + leased).
    open: usize,
    /// The parameters the server reported on each pool's first connection (what a client
    /// is told at login).
    welcome: HashMap<PoolKey, Vec<(String, String)>>,
}

/// The pools of server connections.
#[derive(Debug)]
pub struct Pools {
    idle: Mutex<Idle>,
    max_open: usize,
    target: Target,
}

/// A connection taken from the pools. Give it back with [`Pools::checkin`]; dropped, it
/// is closed and its place freed.
#[derive(Debug)]
pub struct Leased<'a> {
    pools: &'a Pools,
    conn: Option<Box<ServerConn>>,
}

impl Leased<'_> {
    /// The connection.
    pub fn conn(&mut self) -> &mut ServerConn {
        self.conn
            .as_mut()
            .expect("a leased connection is present until checked in")
    }
}

impl Drop for Leased<'_> {
    fn drop(&mut self) {
        if self.conn.take().is_some() {
            self.pools.lock().open -= 1;
        }
    }
}

impl Pools {
    /// `max_open` connections at most (≥ the gate's seats), to `target`.
    pub fn new(max_open: usize, target: Target) -> Arc<Pools> {
        Arc::new(Pools {
            idle: Mutex::new(Idle::default()),
            max_open,
            target,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Idle> {
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The server.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// (open, idle) connections now.
    pub fn counts(&self) -> (usize, usize) {
        let g = self.lock();
        (g.open, g.by_id.iter().map(Vec::len).sum())
    }

    /// The parameters a pool's first connection reported, if it had one.
    pub fn welcome(&self, key: &PoolKey) -> Option<Vec<(String, String)>> {
        self.lock().welcome.get(key).cloned()
    }

    /// The number of pool `key`, given to it the first time it is asked for.
    pub fn id(&self, key: &PoolKey) -> PoolId {
        let mut g = self.lock();
        if let Some(&id) = g.ids.get(key) {
            return id;
        }
        let id = g.by_id.len();
        g.by_id.push(Vec::new());
        g.ids.insert(key.clone(), id);
        id
    }

    /// A connection of pool `id` (from [`Pools::id`] for `key`; the caller holds a seat).
    /// A new one logs in with the password `password()` gives (asked only then) and the
    /// client's tracked `params`.
    pub async fn checkout<'p>(
        &self,
        (id, key): (PoolId, &PoolKey),
        password: impl FnOnce() -> &'p str,
        params: &[(String, String)],
    ) -> Result<Leased<'_>, ConnectError> {
        let evicted = {
            let mut g = self.lock();
            if let Some((_, c)) = Self::pop_idle(&mut g, id) {
                return Ok(self.lease(c));
            }
            let evicted = if g.open >= self.max_open {
                // The longest-idle connection of any pool gives its place.
                let oldest = g
                    .by_id
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.first().map(|(t, _)| (*t, i)))
                    .min_by_key(|(t, _)| *t);
                match oldest {
                    Some((_, i)) => Some(g.by_id[i].remove(0).1),
                    None => {
                        return Err(ConnectError::Io(std::io::Error::other(
                            "all server connections are in use (more holders than pool.max_connections)",
                        )))
                    }
                }
            } else {
                g.open += 1;
                None
            };
            evicted
        };
        if let Some(old) = evicted {
            // Boxed: the cold paths stay out of every checkout's future.
            Box::pin(old.terminate()).await;
        }
        match Box::pin(ServerConn::connect(
            &self.target,
            key.clone(),
            password(),
            params,
        ))
        .await
        {
            Ok(mut c) => {
                c.pool = id;
                let mut g = self.lock();
                g.welcome.entry(key.clone()).or_insert_with(|| {
                    c.session
                        .params()
                        .iter()
                        .map(|(k, v)| (k.clone(), v.clone()))
                        .collect()
                });
                Ok(Leased {
                    pools: self,
                    conn: Some(Box::new(c)),
                })
            }
            Err(e) => {
                self.lock().open -= 1;
                Err(e)
            }
        }
    }

    /// Pool `id`'s most recently used idle connection that the server has not closed, and
    /// since when it is idle (closed ones are dropped on the way).
    fn pop_idle(g: &mut Idle, id: PoolId) -> Option<(Instant, Box<ServerConn>)> {
        while let Some((t, c)) = g.by_id.get_mut(id).and_then(Vec::pop) {
            if c.is_stale() {
                g.open -= 1;
                continue;
            }
            return Some((t, c));
        }
        None
    }

    /// An idle connection of pool `id`, without waiting (none idle: `None`), and since when
    /// it was idle (to [`Pools::put_back`] unused). The caller holds a seat, or is about to.
    pub fn checkout_idle(&self, id: PoolId) -> Option<(Instant, Box<ServerConn>)> {
        Self::pop_idle(&mut self.lock(), id)
    }

    /// Give back unused what [`Pools::checkout_idle`] gave, as it was.
    pub fn put_back(&self, (since, c): (Instant, Box<ServerConn>)) {
        let mut g = self.lock();
        match g.by_id.get_mut(c.pool) {
            Some(idle) => {
                // Back where it was among the idle ones: they stay ordered by idle time.
                let at = idle.partition_point(|(t, _)| *t <= since);
                idle.insert(at, (since, c));
            }
            None => g.open -= 1,
        }
    }

    /// Lease a connection from [`Pools::checkout_idle`].
    pub fn lease(&self, conn: Box<ServerConn>) -> Leased<'_> {
        Leased {
            pools: self,
            conn: Some(conn),
        }
    }

    /// Give a connection back at `now`: idle in its pool, or closed if it is broken.
    pub async fn checkin(&self, mut leased: Leased<'_>, now: Instant) {
        let Some(c) = leased.conn.take() else { return };
        if c.broken {
            self.lock().open -= 1;
            Box::pin(c.terminate()).await;
            return;
        }
        let mut g = self.lock();
        if let Some(idle) = g.by_id.get_mut(c.pool) {
            idle.push((now, c));
        } else {
            // Not a connection of these pools: closed.
            g.open -= 1;
        }
    }
}
