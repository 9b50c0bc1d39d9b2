//! The exchange with Redis: one Lua script per sync, atomic on the server.
//!
//! Keys, under `<prefix>`: `<prefix>:members` (a set of instance ids) and, per instance,
//! `<prefix>:member:<id>`, a hash of `report` (JSON), `seq` and `claim`, expiring after the
//! lease unless renewed.

use std::time::Duration;

use super::alloc::Report;
use super::member::{Outgoing, Peer, Reply};
use super::ClusterConfig;

/// Write this instance's report and claim, then return every live report with its claim.
/// The claim is [`settle`](super::member::settle), computed here so that two instances can
/// never be granted the same free seat. Returns `{grant, previous seq, report, claim, …}`,
/// or `{'stale'}` without writing when Redis has a newer report of this instance (an
/// exchange the instance gave up on, run late by a Redis that hung, must not overwrite it).
const EXCHANGE: &str = r"
local p, me = KEYS[1], ARGV[1]
local body, lease, seq = ARGV[2], ARGV[3], ARGV[4]
local held, want, depth, expect = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]), ARGV[8]
local mine = p .. ':member:' .. me
local previous = redis.call('HGET', mine, 'seq') or ''
if previous ~= '' and tonumber(previous) > tonumber(seq) then return {'stale'} end
local others, out = 0, {}
for _, id in ipairs(redis.call('SMEMBERS', p .. ':members')) do
  if id ~= me then
    local v = redis.call('HMGET', p .. ':member:' .. id, 'report', 'claim')
    if v[1] then
      others = others + (tonumber(v[2]) or 0)
      table.insert(out, v[1])
      table.insert(out, v[2] or '0')
    else
      redis.call('SREM', p .. ':members', id)
    end
  end
end
local grant = held
if want > held and previous == expect then
  grant = math.max(held, math.min(want, depth - others))
end
redis.call('HSET', mine, 'report', body, 'seq', seq, 'claim', grant)
redis.call('PEXPIRE', mine, lease)
redis.call('SADD', p .. ':members', me)
table.insert(out, body)
table.insert(out, tostring(grant))
table.insert(out, 1, previous)
table.insert(out, 1, tostring(grant))
return out
";

/// The connection to Redis and the loaded script; reconnects after an error.
pub(crate) struct Link {
    client: redis::Client,
    conn: Option<redis::aio::MultiplexedConnection>,
    script: redis::Script,
}

impl Link {
    /// A link to the configured Redis (`None`: not a Redis URL; validated at start-up).
    pub(crate) fn new(c: &ClusterConfig) -> Option<Link> {
        Some(Link {
            client: redis::Client::open(c.redis.as_str()).ok()?,
            conn: None,
            script: redis::Script::new(EXCHANGE),
        })
    }

    /// One exchange, within `c.timeout()` for the connect and again for the call.
    pub(crate) async fn exchange(
        &mut self,
        c: &ClusterConfig,
        out: &Outgoing,
    ) -> Result<Reply, String> {
        let timeout = c.timeout();
        if self.conn.is_none() {
            let connect = self.client.get_multiplexed_async_connection();
            match tokio::time::timeout(timeout, connect).await {
                Ok(Ok(k)) => self.conn = Some(k),
                Ok(Err(e)) => return Err(e.to_string()),
                Err(_) => return Err("connect timed out".into()),
            }
        }
        let conn = self.conn.as_mut().ok_or("no connection")?;
        let got = tokio::time::timeout(timeout, invoke(conn, &self.script, c, out)).await;
        let raw = match got {
            Ok(Ok(raw)) => raw,
            Ok(Err(e)) => {
                self.conn = None;
                return Err(e.to_string());
            }
            Err(_) => {
                self.conn = None;
                return Err("timed out".into());
            }
        };
        if raw.first().is_some_and(|r| r == "stale") {
            return Err("Redis has a newer report of this instance".into());
        }
        parse(&raw).ok_or_else(|| format!("unexpected answer from Redis ({} items)", raw.len()))
    }
}

async fn invoke(
    conn: &mut redis::aio::MultiplexedConnection,
    script: &redis::Script,
    c: &ClusterConfig,
    out: &Outgoing,
) -> redis::RedisResult<Vec<String>> {
    let body = serde_json::to_string(&out.report).unwrap_or_default();
    let mut call = script.key(&c.key_prefix);
    call.arg(&c.instance)
        .arg(body)
        .arg(Duration::as_millis(&c.lease()) as u64)
        .arg(out.report.seq)
        .arg(out.held)
        .arg(out.want)
        .arg(c.depth)
        .arg(out.expect.map_or(String::new(), |s| s.to_string()));
    call.invoke_async(conn).await
}

/// The script's answer; a report that does not parse (another version, a stray key) is
/// skipped.
fn parse(raw: &[String]) -> Option<Reply> {
    let grant = raw.first()?.parse().ok()?;
    let previous = raw.get(1)?.parse().ok();
    let peers = raw[2..]
        .chunks_exact(2)
        .filter_map(|pair| {
            let report: Report = serde_json::from_str(&pair[0]).ok()?;
            let claim = pair[1].parse().ok()?;
            Some(Peer { report, claim })
        })
        .collect();
    Some(Reply {
        grant,
        previous,
        peers,
    })
}

/// One exchange over a fresh connection to `c.redis`: what a sync does, without the sync
/// loop (tools and tests; the test that holds the script to [`settle`](super::member::settle)
/// uses it).
pub async fn exchange(c: &ClusterConfig, out: &Outgoing) -> Result<Reply, String> {
    let mut link = Link::new(c).ok_or("not a Redis URL")?;
    link.exchange(c, out).await
}
