//! WebSocket tunnels (HTTP/1.1 `Upgrade: websocket`, on the own HTTP/1.1 client adapter).
//!
//! An upgrade request is identified, classified and admitted like any other request, and
//! holds one of D's slots while it waits and while the upstream answers it, on a fresh
//! upstream connection with its `Upgrade` headers kept ([`crate::rewrite`]'s
//! `BodyFraming::Upgrade`). On a `101 Switching Protocols` the slot is freed — charged for
//! the time it was held, like an ordinary request — and the two sockets are spliced both ways
//! (the client adapter's `splice`) until either side closes, the tunnel is idle for
//! `limits.tunnel_idle_timeout_ms`, or the proxy stops. Any other answer is an ordinary
//! response.
//!
//! An open tunnel holds no slot of D and its time is not charged: its bytes are not work the
//! scheduler can compare (a socket is mostly idle), and D stays for requests. Tunnels are
//! bounded by count instead ([`Tunnels`]): at most `limits.max_tunnels_per_tenant` per
//! tenant and `limits.max_tunnels` in all, counted from admission (an upgrade in flight
//! counts) until the tunnel closes; one more is answered 503 before it queues.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use fairlane_core::TenantId;

use crate::head::RequestHead;
use crate::rewrite::lists;

/// What a request head says about an upgrade to a WebSocket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Upgrade {
    /// None asked for (or `Upgrade` without `Connection: upgrade`, which is ignored).
    No,
    /// A WebSocket opening handshake (RFC 6455 §4.1).
    WebSocket,
    /// An upgrade to a WebSocket that cannot be one (the reason, for a 400).
    Invalid(&'static str),
}

/// Whether `head` asks to upgrade to a WebSocket: `Upgrade: websocket` with
/// `Connection: upgrade`; then it must be an HTTP/1.1 `GET` without a body, with a
/// `Sec-WebSocket-Key` and a `Sec-WebSocket-Version` (RFC 6455 §4.1), else it is invalid.
pub(crate) fn upgrade_of(head: &RequestHead, http10: bool, bodiless: bool) -> Upgrade {
    // One pass over the header lines (this runs for every request on the own path).
    let (mut websocket, mut connection, mut key, mut version) = (false, false, false, false);
    for h in head.iter() {
        let n = h.name;
        if n.eq_ignore_ascii_case(b"upgrade") {
            websocket |= lists(h.value, b"websocket");
        } else if n.eq_ignore_ascii_case(b"connection") {
            connection |= lists(h.value, b"upgrade");
        } else if n.eq_ignore_ascii_case(b"sec-websocket-key") {
            key = true;
        } else if n.eq_ignore_ascii_case(b"sec-websocket-version") {
            version = true;
        }
    }
    if !(websocket && connection) {
        return Upgrade::No;
    }
    let invalid = if *head.method() != http::Method::GET {
        "a WebSocket upgrade must be a GET"
    } else if http10 {
        "a WebSocket upgrade needs HTTP/1.1"
    } else if !bodiless {
        "a WebSocket upgrade has no body"
    } else if !(key && version) {
        "a WebSocket upgrade needs Sec-WebSocket-Key and Sec-WebSocket-Version"
    } else {
        return Upgrade::WebSocket;
    };
    Upgrade::Invalid(invalid)
}

/// The tunnels open (or opening) per tenant and in all, against their caps.
#[derive(Debug, Default)]
pub(crate) struct Tunnels {
    counts: Arc<Counts>,
    /// Refused at the tenant's cap.
    refused_tenant: AtomicU64,
    /// Refused at the global cap.
    refused_global: AtomicU64,
}

#[derive(Debug, Default)]
struct Counts {
    per_tenant: Mutex<HashMap<TenantId, usize>>,
    total: AtomicUsize,
}

/// Which cap refused a tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Cap {
    /// `limits.max_tunnels_per_tenant`.
    Tenant,
    /// `limits.max_tunnels`.
    Global,
}

/// One tunnel counted in [`Tunnels`] until dropped.
#[derive(Debug)]
pub(crate) struct Pass {
    counts: Arc<Counts>,
    tenant: TenantId,
}

impl Tunnels {
    /// Count a tunnel for `tenant` unless it holds `per_tenant` already or `global` are
    /// open in all.
    pub fn take(&self, tenant: TenantId, per_tenant: usize, global: usize) -> Result<Pass, Cap> {
        let mut held = self
            .counts
            .per_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let n = held.get(&tenant).copied().unwrap_or(0);
        let refused = if n >= per_tenant {
            (Cap::Tenant, &self.refused_tenant)
        } else if self.counts.total.load(Relaxed) >= global {
            (Cap::Global, &self.refused_global)
        } else {
            held.insert(tenant, n + 1);
            self.counts.total.fetch_add(1, Relaxed);
            return Ok(Pass {
                counts: self.counts.clone(),
                tenant,
            });
        };
        refused.1.fetch_add(1, Relaxed);
        Err(refused.0)
    }

    /// Tunnels open (or opening) for `tenant`.
    pub fn open(&self, tenant: TenantId) -> usize {
        let held = self
            .counts
            .per_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        held.get(&tenant).copied().unwrap_or(0)
    }

    /// The tunnel metrics in Prometheus's text format: open per tenant (`names` by tenant
    /// id), refusals by cap.
    pub fn prometheus(&self, names: &[String]) -> String {
        let mut o = String::new();
        let name = "fairlane_proxy_tunnels_open";
        let _ = writeln!(
            o,
            "# HELP {name} WebSocket tunnels open or opening, per tenant.\n# TYPE {name} gauge"
        );
        for (id, tenant) in names.iter().enumerate() {
            let n = self.open(TenantId(id as u64));
            let tenant = crate::prom::label(tenant);
            let _ = writeln!(o, "{name}{{tenant=\"{tenant}\"}} {n}");
        }
        let name = "fairlane_proxy_tunnels_refused_total";
        let _ = writeln!(
            o,
            "# HELP {name} WebSocket upgrades answered 503 at a tunnel cap.\n# TYPE {name} counter"
        );
        for (cap, n) in [
            ("tenant", &self.refused_tenant),
            ("global", &self.refused_global),
        ] {
            let _ = writeln!(o, "{name}{{cap=\"{cap}\"}} {}", n.load(Relaxed));
        }
        o
    }
}

impl Drop for Pass {
    fn drop(&mut self) {
        let mut held = self
            .counts
            .per_tenant
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        if let Some(n) = held.get_mut(&self.tenant) {
            *n -= 1;
            if *n == 0 {
                held.remove(&self.tenant);
            }
        }
        self.counts.total.fetch_sub(1, Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(raw: &[u8]) -> Upgrade {
        let mut raw = raw.to_vec();
        let (head, info) = RequestHead::parse_h1(&mut raw, 64 * 1024).unwrap().unwrap();
        upgrade_of(
            &head,
            info.http10,
            info.body == crate::h1::BodyLen::Length(0),
        )
    }

    #[test]
    fn websocket_upgrades_are_told_from_others() {
        let ok = b"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Upgrade\r\n\
            Upgrade: WebSocket\r\nSec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n";
        assert_eq!(up(ok), Upgrade::WebSocket);
        assert_eq!(up(b"GET / HTTP/1.1\r\nHost: h\r\n\r\n"), Upgrade::No);
        // `Upgrade` without `Connection: upgrade` is ignored; other protocols are not ours.
        let no_conn = b"GET / HTTP/1.1\r\nUpgrade: websocket\r\n\r\n";
        assert_eq!(up(no_conn), Upgrade::No);
        let h2c = b"GET / HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: h2c\r\n\r\n";
        assert_eq!(up(h2c), Upgrade::No);
        for bad in [
            &b"POST /ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
               Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n"[..],
            b"GET /ws HTTP/1.0\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
               Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\n\r\n",
            b"GET /ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\
               Sec-WebSocket-Key: k\r\nSec-WebSocket-Version: 13\r\nContent-Length: 2\r\n\r\nab",
            b"GET /ws HTTP/1.1\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n",
        ] {
            assert!(matches!(up(bad), Upgrade::Invalid(_)), "{bad:?}");
        }
    }

    #[test]
    fn tunnels_are_capped_per_tenant_and_in_all() {
        let t = Tunnels::default();
        let (a, b) = (TenantId(0), TenantId(1));
        let a1 = t.take(a, 2, 3).unwrap();
        let _a2 = t.take(a, 2, 3).unwrap();
        assert_eq!(t.take(a, 2, 3).unwrap_err(), Cap::Tenant);
        let _b1 = t.take(b, 2, 3).unwrap();
        assert_eq!(t.take(b, 2, 3).unwrap_err(), Cap::Global);
        assert_eq!((t.open(a), t.open(b)), (2, 1));
        drop(a1);
        assert_eq!(t.open(a), 1);
        let _b2 = t.take(b, 2, 3).unwrap();
        let text = t.prometheus(&["a".into(), "b".into()]);
        assert!(
            text.contains("fairlane_proxy_tunnels_open{tenant=\"b\"} 2"),
            "{text}"
        );
        assert!(text.contains("fairlane_proxy_tunnels_refused_total{cap=\"tenant\"} 1"));
        assert!(text.contains("fairlane_proxy_tunnels_refused_total{cap=\"global\"} 1"));
    }
}
