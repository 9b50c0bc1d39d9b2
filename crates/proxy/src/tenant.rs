//! Who a request belongs to, and which class it is.
//!
//! A tenant is found, in this order, from the API key header (`Authorization: Bearer <key>`
//! by default) looked up in the configured keys; for a request without a key, from the names
//! of the client's verified TLS certificate (its subject CN, DNS and URI SANs, on the TLS
//! listener with `client_ca`) matched against each tenant's `cert_names`; then from the
//! client's socket address matched against each tenant's `ips`. A key is what a request
//! itself says, so it comes first (a service holding a certificate may still act for a
//! tenant it has a key of); a certificate is stronger evidence than an address. Nothing else the client sends is trusted: a
//! header naming a tenant is ignored (and `x-fairlane-tenant` is overwritten upstream), and
//! `X-Forwarded-For` is not consulted. A missing or unknown key is rejected with 401 or served
//! as the default tenant, as configured; an unknown key is never matched by address.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use fairlane_core::{ClassId, TenantId};
use http::{HeaderMap, Method};

use crate::ascii::eq_lower;
use crate::config::{ProxyConfig, Unknown};
use crate::head::Field;

pub use crate::cidr::{Cidr, CidrError};

/// Tenant names ↔ ids, stable across reloads: a tenant keeps its id (and its metrics) when
/// the config is reloaded; a new name gets the next id.
#[derive(Clone, Debug, Default)]
pub struct Registry {
    names: Vec<String>,
    ids: HashMap<String, TenantId>,
}

impl Registry {
    /// The id of `name`, creating it if new.
    pub fn intern(&mut self, name: &str) -> TenantId {
        if let Some(&id) = self.ids.get(name) {
            return id;
        }
        let id = TenantId(self.names.len() as u64);
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }
    /// The name of an id.
    pub fn name(&self, id: TenantId) -> &str {
        self.names.get(id.0 as usize).map_or("?", |s| s.as_str())
    }
    /// Every name, by id.
    pub fn names(&self) -> &[String] {
        &self.names
    }
}

/// What identification decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Who {
    /// Serve as this tenant.
    Tenant(TenantId),
    /// Answer 401: the key is missing or unknown and unknown requests are rejected.
    Unauthorized,
    /// Answer 400: the key header (or `Authorization`) appears more than once, so which
    /// tenant is meant is ambiguous.
    Ambiguous,
}

struct ClassRule {
    method: Option<Method>,
    prefix: String,
    exact: bool,
    /// A `grpc_method` rule (else a `path` rule).
    grpc: bool,
}

/// The hash of the API key table: a multiply-and-rotate mix of eight bytes at a time (as
/// rustc's FxHash), from a random seed per table. The table is built from the config and
/// only looked up with what clients send, so no client can grow its chains; SipHash, the
/// default, costs several times as much on every request.
#[derive(Clone, Copy)]
struct KeyHash(u64);

impl KeyHash {
    fn random() -> KeyHash {
        use std::hash::BuildHasher;
        KeyHash(std::collections::hash_map::RandomState::new().hash_one(0u64))
    }
}

impl std::hash::BuildHasher for KeyHash {
    type Hasher = KeyHasher;
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher(self.0)
    }
}

/// [`KeyHash`]'s state.
struct KeyHasher(u64);

impl KeyHasher {
    fn add(&mut self, word: u64) {
        self.0 = (self.0.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl std::hash::Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.add(u64::from_le_bytes(w));
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// The identification and classification tables built from one config.
pub struct Identifier {
    header: http::HeaderName,
    /// The key's scheme (`Bearer`), lowercased.
    scheme: Box<[u8]>,
    /// API keys, as bytes: a request's key is looked up as it came.
    keys: HashMap<Box<[u8]>, TenantId, KeyHash>,
    cert_names: HashMap<String, TenantId>,
    ips: Vec<(Cidr, TenantId)>,
    default: Option<TenantId>,
    classes: Vec<ClassRule>,
    class_names: Vec<String>,
    names: Vec<Arc<str>>,
}

impl Identifier {
    /// Build from a validated config, interning tenant names in `registry`.
    pub fn new(config: &ProxyConfig, registry: &mut Registry) -> Identifier {
        let mut keys = HashMap::with_hasher(KeyHash::random());
        let mut cert_names = HashMap::new();
        let mut ips = Vec::new();
        for t in &config.tenants {
            let id = registry.intern(&t.name);
            for k in &t.keys {
                keys.insert(k.as_bytes().into(), id);
            }
            for n in &t.cert_names {
                cert_names.insert(n.clone(), id);
            }
            for ip in &t.ips {
                if let Ok(c) = Cidr::parse(ip) {
                    ips.push((c, id));
                }
            }
        }
        let default = match config.identity.unknown {
            Unknown::Default => Some(registry.intern(&config.identity.default_tenant)),
            Unknown::Reject => None,
        };
        let classes = config
            .classes
            .iter()
            .map(|c| ClassRule {
                method: c
                    .method
                    .as_ref()
                    .and_then(|m| Method::from_bytes(m.as_bytes()).ok()),
                prefix: c.pattern().trim_end_matches('*').to_string(),
                exact: !c.pattern().ends_with('*'),
                grpc: c.grpc_method.is_some(),
            })
            .collect();
        Identifier {
            header: http::HeaderName::from_bytes(config.identity.header.as_bytes())
                .unwrap_or(http::header::AUTHORIZATION),
            scheme: config
                .identity
                .scheme
                .to_ascii_lowercase()
                .into_bytes()
                .into(),
            keys,
            cert_names,
            ips,
            default,
            classes,
            class_names: config.classes.iter().map(|c| c.name.clone()).collect(),
            names: registry
                .names()
                .iter()
                .map(|n| Arc::from(n.as_str()))
                .collect(),
        }
    }

    /// The name of a tenant id, shared (for log lines about the tenant).
    pub fn name(&self, id: TenantId) -> Arc<str> {
        self.names
            .get(id.0 as usize)
            .cloned()
            .unwrap_or_else(|| Arc::from("?"))
    }

    /// The name of tenant `id` by reference (`None`: not a tenant of this table).
    pub(crate) fn name_ref(&self, id: TenantId) -> Option<&Arc<str>> {
        self.names.get(id.0 as usize)
    }

    /// The tenant of a request from `peer` with these headers.
    pub fn identify(&self, headers: &HeaderMap, peer: IpAddr) -> Who {
        // Two keys (or two `Authorization` headers, whichever header carries the key) name
        // the tenant ambiguously: refuse rather than pick one.
        let mut keys = headers.get_all(&self.header).iter();
        if keys.next().is_some() && keys.next().is_some() {
            return Who::Ambiguous;
        }
        if self.header != http::header::AUTHORIZATION {
            let mut auth = headers.get_all(http::header::AUTHORIZATION).iter();
            if auth.next().is_some() && auth.next().is_some() {
                return Who::Ambiguous;
            }
        }
        let key = headers.get(&self.header).map(|v| {
            let v = v.to_str().ok()?;
            self.strip_scheme(v.as_bytes().trim_ascii())
        });
        self.by_key_or_peer(key, peer, &[])
    }

    /// [`identify`](Self::identify) over a head's raw header lines, with the same answers (a
    /// value `HeaderValue::to_str` refuses is no key), and the names of the client's
    /// verified certificate (`cert_names`) between the key and the address.
    pub(crate) fn identify_raw<'h>(
        &self,
        headers: impl IntoIterator<Item = Field<'h>>,
        peer: IpAddr,
        cert_names: &[Box<str>],
    ) -> Who {
        let name = self.header.as_str().as_bytes();
        let by_auth = self.header == http::header::AUTHORIZATION;
        let (mut key, mut keys, mut auths) = (None, 0, 0);
        for h in headers {
            if eq_lower(h.name, name) {
                keys += 1;
                key.get_or_insert(h.value);
            } else if !by_auth && eq_lower(h.name, b"authorization") {
                auths += 1;
            }
        }
        if keys > 1 || auths > 1 {
            return Who::Ambiguous;
        }
        // What `HeaderValue::to_str` accepts: visible ASCII and tabs.
        let key = key.map(|v| {
            let visible = v.iter().all(|&b| b == b'\t' || (0x20..0x7f).contains(&b));
            visible.then(|| self.strip_scheme(v.trim_ascii())).flatten()
        });
        self.by_key_or_peer(key, peer, cert_names)
    }

    /// The decision once the key header is read: `Some(key)` when the header was present
    /// (`Some(None)`: present but no usable key), `None` to fall back to the certificate's
    /// names, then the peer's address.
    fn by_key_or_peer(&self, key: Option<Option<&[u8]>>, peer: IpAddr, names: &[Box<str>]) -> Who {
        if let Some(key) = key {
            return match key.and_then(|k| self.keys.get(k)) {
                Some(&id) => Who::Tenant(id),
                None => self.unknown(),
            };
        }
        if let Some(&id) = names.iter().find_map(|n| self.cert_names.get(&**n)) {
            return Who::Tenant(id);
        }
        for (cidr, id) in &self.ips {
            if cidr.contains(peer) {
                return Who::Tenant(*id);
            }
        }
        self.unknown()
    }

    fn unknown(&self) -> Who {
        self.default.map_or(Who::Unauthorized, Who::Tenant)
    }

    /// The key in a trimmed header value: after the configured scheme and a space, if any.
    fn strip_scheme<'a>(&self, v: &'a [u8]) -> Option<&'a [u8]> {
        if self.scheme.is_empty() {
            return Some(v);
        }
        let space = v.iter().position(|&b| b == b' ')?;
        let (scheme, rest) = v.split_at(space);
        eq_lower(scheme, &self.scheme).then(|| rest.trim_ascii())
    }

    /// The class of a request (`grpc`: a gRPC call, matched by the `grpc_method` rules
    /// only; other requests by the `path` rules only): the first matching rule's index + 1,
    /// or 0.
    pub fn classify(&self, method: &Method, path: &str, grpc: bool) -> ClassId {
        self.classify_with(method, || path, grpc)
    }

    /// [`classify`](Self::classify), reading the path only when a rule needs it.
    pub(crate) fn classify_with<'p>(
        &self,
        method: &Method,
        path: impl FnOnce() -> &'p str,
        grpc: bool,
    ) -> ClassId {
        if self.classes.is_empty() {
            return ClassId(0);
        }
        let path = path();
        for (i, c) in self.classes.iter().enumerate() {
            if c.grpc != grpc || c.method.as_ref().is_some_and(|m| m != method) {
                continue;
            }
            let hit = if c.exact {
                path == c.prefix
            } else {
                path.starts_with(&c.prefix)
            };
            if hit {
                return ClassId(i as u32 + 1);
            }
        }
        ClassId(0)
    }

    /// The name of a class id (`"default"` for 0).
    pub fn class_name(&self, class: ClassId) -> &str {
        match class.0 {
            0 => "default",
            i => self
                .class_names
                .get(i as usize - 1)
                .map_or("?", |s| s.as_str()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(extra: &str) -> ProxyConfig {
        ProxyConfig::from_toml_str(&format!(
            r#"
            [upstream]
            addr = "127.0.0.1:1"
            {extra}
            [[tenant]]
            name = "a"
            keys = ["ka"]
            ips = ["10.0.0.0/8"]
            [[tenant]]
            name = "b"
            keys = ["kb"]
            [[class]]
            name = "search"
            method = "GET"
            path = "/search/*"
            [[class]]
            name = "login"
            path = "/login"
            [[class]]
            name = "get"
            grpc_method = "/pkg.Store/Get"
            [[class]]
            name = "store"
            grpc_method = "/pkg.Store/*"
            "#
        ))
        .unwrap()
    }

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        m
    }

    #[test]
    fn keys_addresses_and_unknowns() {
        let mut reg = Registry::default();
        let id = Identifier::new(&config(""), &mut reg);
        let local: IpAddr = "127.0.0.1".parse().unwrap();
        let ten: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(
            id.identify(&h(&[("authorization", "Bearer ka")]), local),
            Who::Tenant(TenantId(0))
        );
        assert_eq!(
            id.identify(&h(&[("authorization", "bearer  kb")]), ten),
            Who::Tenant(TenantId(1))
        );
        assert_eq!(id.identify(&h(&[]), ten), Who::Tenant(TenantId(0)));
        assert_eq!(id.identify(&h(&[]), local), Who::Unauthorized);
        // An unknown key is not rescued by the address, and a tenant-naming header is ignored.
        assert_eq!(
            id.identify(&h(&[("authorization", "Bearer nope")]), ten),
            Who::Unauthorized
        );
        assert_eq!(
            id.identify(&h(&[("x-fairlane-tenant", "a")]), local),
            Who::Unauthorized
        );
        assert_eq!(
            id.identify(&h(&[("authorization", "Basic ka")]), local),
            Who::Unauthorized
        );

        let mut reg = Registry::default();
        let id = Identifier::new(
            &config("[identity]\nunknown = \"default\"\ndefault_tenant = \"anon\""),
            &mut reg,
        );
        assert_eq!(id.identify(&h(&[]), local), Who::Tenant(TenantId(2)));
        assert_eq!(reg.name(TenantId(2)), "anon");
    }

    #[test]
    fn duplicated_key_headers_are_ambiguous() {
        let mut reg = Registry::default();
        let id = Identifier::new(&config(""), &mut reg);
        let local: IpAddr = "10.1.2.3".parse().unwrap();
        let mut two = HeaderMap::new();
        two.append("authorization", "Bearer ka".parse().unwrap());
        two.append("authorization", "Bearer kb".parse().unwrap());
        assert_eq!(id.identify(&two, local), Who::Ambiguous);
        // Even the same key twice: the request is malformed.
        let mut same = HeaderMap::new();
        same.append("authorization", "Bearer ka".parse().unwrap());
        same.append("authorization", "Bearer ka".parse().unwrap());
        assert_eq!(id.identify(&same, local), Who::Ambiguous);

        let mut reg = Registry::default();
        let id = Identifier::new(
            &config("[identity]\nheader = \"x-api-key\"\nscheme = \"\""),
            &mut reg,
        );
        let mut keys = HeaderMap::new();
        keys.append("x-api-key", "ka".parse().unwrap());
        assert_eq!(id.identify(&keys, local), Who::Tenant(TenantId(0)));
        keys.append("x-api-key", "kb".parse().unwrap());
        assert_eq!(id.identify(&keys, local), Who::Ambiguous);
        let mut auth = h(&[("x-api-key", "ka")]);
        auth.append("authorization", "Basic x".parse().unwrap());
        assert_eq!(id.identify(&auth, local), Who::Tenant(TenantId(0)));
        auth.append("authorization", "Basic y".parse().unwrap());
        assert_eq!(id.identify(&auth, local), Who::Ambiguous);
    }

    #[test]
    fn raw_header_lines_identify_as_the_header_map_does() {
        let lists: &[&[(&str, &[u8])]] = &[
            &[],
            &[("Authorization", b"Bearer ka")],
            &[("authorization", b"bearer  kb"), ("Host", b"x")],
            &[("AUTHORIZATION", b"Bearer nope")],
            &[("authorization", b"Basic ka")],
            &[
                ("authorization", b"Bearer ka"),
                ("authorization", b"Bearer ka"),
            ],
            &[("authorization", b"Bearer k\xe9")],
            &[("X-Api-Key", b"ka")],
            &[("x-api-key", b" kb "), ("authorization", b"Basic x")],
            &[("x-api-key", b"ka"), ("x-api-key", b"kb")],
            &[
                ("x-api-key", b"ka"),
                ("authorization", b"a"),
                ("authorization", b"b"),
            ],
            &[("x-fairlane-tenant", b"a")],
        ];
        for extra in ["", "[identity]\nheader = \"x-api-key\"\nscheme = \"\""] {
            let mut reg = Registry::default();
            let id = Identifier::new(&config(extra), &mut reg);
            for ip in ["127.0.0.1", "10.1.2.3"] {
                let ip: IpAddr = ip.parse().unwrap();
                for list in lists {
                    let mut map = HeaderMap::new();
                    let mut raw = Vec::new();
                    for (k, v) in *list {
                        map.append(
                            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                            http::HeaderValue::from_bytes(v).unwrap(),
                        );
                        raw.push(Field {
                            name: k.as_bytes(),
                            value: v,
                        });
                    }
                    assert_eq!(
                        id.identify_raw(raw, ip, &[]),
                        id.identify(&map, ip),
                        "{extra} {ip} {list:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn classes() {
        let mut reg = Registry::default();
        let id = Identifier::new(&config(""), &mut reg);
        assert_eq!(id.classify(&Method::GET, "/search/x", false), ClassId(1));
        assert_eq!(id.classify(&Method::POST, "/search/x", false), ClassId(0));
        assert_eq!(id.classify(&Method::POST, "/login", false), ClassId(2));
        assert_eq!(id.classify(&Method::POST, "/login/x", false), ClassId(0));
        // gRPC calls by method (exact first here, then the service prefix), never by path.
        assert_eq!(
            id.classify(&Method::POST, "/pkg.Store/Get", true),
            ClassId(3)
        );
        assert_eq!(
            id.classify(&Method::POST, "/pkg.Store/Put", true),
            ClassId(4)
        );
        assert_eq!(
            id.classify(&Method::POST, "/pkg.Other/Get", true),
            ClassId(0)
        );
        assert_eq!(id.classify(&Method::POST, "/login", true), ClassId(0));
        assert_eq!(
            id.classify(&Method::POST, "/pkg.Store/Get", false),
            ClassId(0)
        );
        assert_eq!(id.class_name(ClassId(2)), "login");
    }
}
