//! The TLS listener, with certificates made in the test (rcgen): the handshake and the ALPN
//! choice (h2, or HTTP/1.1 on the own adapter), a client certificate's name deciding the
//! tenant (after a key, before the address), a certificate reload under load with no failed
//! request, bad reloads keeping the old certificate, and bad input (plaintext to the TLS
//! port, a failed handshake) closed and counted, the proxy serving on. h2spec (installed by
//! scripts/test-deps.sh) runs against both listeners.

mod common;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A test CA, and certificates it signs, written as PEM files into a directory of their own.
struct Pki {
    dir: tempfile::TempDir,
    ca: rcgen::Certificate,
    ca_key: KeyPair,
}

/// A certificate and its key, as PEM text.
struct Issued {
    cert: String,
    key: String,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name
            .push(DnType::CommonName, "fairlane test CA");
        let ca = p.self_signed(&ca_key).unwrap();
        let dir = tempfile::Builder::new()
            .prefix("fairlane-proxy-tls-")
            .tempdir()
            .unwrap();
        let pki = Pki { dir, ca, ca_key };
        pki.write("ca.pem", &pki.ca.pem());
        pki
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.path(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    /// A certificate for `cn` (and `sans`), for a server or a client, valid from `from` to
    /// `until` (years).
    fn issue(&self, cn: &str, sans: &[&str], server: bool, (from, until): (i32, i32)) -> Issued {
        let key = KeyPair::generate().unwrap();
        let mut p =
            CertificateParams::new(sans.iter().map(|s| s.to_string()).collect::<Vec<_>>()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![if server {
            ExtendedKeyUsagePurpose::ServerAuth
        } else {
            ExtendedKeyUsagePurpose::ClientAuth
        }];
        p.not_before = rcgen::date_time_ymd(from, 1, 1);
        p.not_after = rcgen::date_time_ymd(until, 1, 1);
        let cert = p.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        Issued {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// A server certificate for 127.0.0.1 and `localhost` (valid now), written as the
    /// listener's `cert.pem` and `key.pem`.
    fn server(&self, cn: &str) -> Issued {
        let s = self.issue(cn, &["localhost", "127.0.0.1"], true, (2020, 2100));
        self.write("cert.pem", &s.cert);
        self.write("key.pem", &s.key);
        s
    }

    /// The `[listen.tls]` section for the files in this directory (`mtls`: with `client_ca`).
    fn listen_tls(&self, mtls: bool) -> String {
        let mut s = format!(
            "[listen.tls]\naddr = \"127.0.0.1:0\"\ncert = \"{}\"\nkey = \"{}\"\n",
            self.path("cert.pem").display(),
            self.path("key.pem").display()
        );
        if mtls {
            s += &format!("client_ca = \"{}\"\n", self.path("ca.pem").display());
        }
        s
    }

    /// A TLS client trusting this CA, offering `alpn`, presenting `client` if given.
    fn client(&self, alpn: &[&[u8]], client: Option<&Issued>) -> tokio_rustls::TlsConnector {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let mut config = match client {
            None => b.with_no_client_auth(),
            Some(c) => {
                let certs = CertificateDer::pem_slice_iter(c.cert.as_bytes())
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap();
                let key = PrivateKeyDer::from_pem_slice(c.key.as_bytes()).unwrap();
                b.with_client_auth_cert(certs, key).unwrap()
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    }
}

/// A proxy with a TLS listener, and that listener's address.
/// A PKI with a server certificate for `server`, an upstream, and a proxy in front of it
/// whose TLS listener verifies client certificates if `mtls`; `rest` follows in the config.
async fn pki_proxy(
    server: &str,
    mtls: bool,
    rest: &str,
) -> (
    Pki,
    fairlane_proxy_testkit::upstream::UpstreamServer,
    Running,
    SocketAddr,
) {
    let pki = Pki::new();
    pki.server(server);
    let up = start_upstream().await;
    let (p, tls) = tls_proxy(up.addr(), &format!("{}{rest}", pki.listen_tls(mtls))).await;
    (pki, up, p, tls)
}

async fn tls_proxy(up: SocketAddr, rest: &str) -> (Running, SocketAddr) {
    let p = start_proxy(config(up, rest)).await;
    let tls = p.tls.expect("a TLS listener");
    (p, tls)
}

/// One GET over a new TLS connection: (the ALPN protocol chosen, the status, the tenant the
/// upstream saw, the server certificate).
async fn get_tls(
    addr: SocketAddr,
    tls: &tokio_rustls::TlsConnector,
    key: Option<&str>,
) -> Result<(Vec<u8>, u16, String, Vec<u8>), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::try_from("localhost").unwrap();
    let stream = tls.connect(name, tcp).await.map_err(|e| e.to_string())?;
    let (_, session) = stream.get_ref();
    let alpn = session.alpn_protocol().unwrap_or_default().to_vec();
    let cert = session.peer_certificates().unwrap()[0].to_vec();
    let mut req = http::Request::get(format!("https://localhost:{}/", addr.port()));
    if let Some(k) = key {
        req = req.header("authorization", format!("Bearer {k}"));
    }
    let req = req.body(Empty::<Bytes>::new()).unwrap();
    let io = TokioIo::new(stream);
    let resp = if alpn == b"h2" {
        let (mut send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        send.send_request(req).await
    } else {
        let (mut send, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        send.send_request(req).await
    }
    .map_err(|e| e.to_string())?;
    let status = resp.status().as_u16();
    let tenant = resp
        .headers()
        .get("x-saw-tenant")
        .map(|v| v.to_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    resp.into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?;
    Ok((alpn, status, tenant, cert))
}

/// Wait until the proxy has counted `n` failed handshakes. The client sees the alert or the
/// close before the proxy's accept returns and counts it, so the count may lag a moment.
async fn handshake_failures(admin: SocketAddr, n: u64) {
    let what = format!("{n} failed handshakes counted");
    eventually(STEP, &what, || async move {
        status(admin).await["tls_handshake_failures"] == n
    })
    .await;
    let s = status(admin).await;
    assert_eq!(s["tls_handshake_failures"], n, "no more than {n}: {s}");
}

const TENANTS: &str = "[identity]\nunknown = \"reject\"\n\
    [[tenant]]\nname = \"svc\"\ncert_names = [\"svc-a.internal\"]\n\
    [[tenant]]\nname = \"keyed\"\nkeys = [\"kb\"]\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_alpn_and_client_certificates_decide_the_tenant() {
    let (pki, _up, p, tls) = pki_proxy("proxy", true, TENANTS).await;
    let svc = pki.issue("svc-a.internal", &[], false, (2020, 2100));
    // The name may be a SAN rather than the subject's CN.
    let san = pki.issue("someone", &["svc-a.internal"], false, (2020, 2100));
    let h2 = pki.client(&[b"h2", b"http/1.1"], Some(&svc));
    let h1 = pki.client(&[b"http/1.1"], Some(&san));
    let anonymous = pki.client(&[b"h2", b"http/1.1"], None);

    let (alpn, code, tenant, _) = get_tls(tls, &h2, None).await.unwrap();
    assert_eq!(
        (alpn.as_slice(), code, tenant.as_str()),
        (&b"h2"[..], 200, "svc")
    );
    let (alpn, code, tenant, _) = get_tls(tls, &h1, None).await.unwrap();
    let want = (&b"http/1.1"[..], 200, "svc");
    assert_eq!((alpn.as_slice(), code, tenant.as_str()), want);
    // A key comes before the certificate; without either, no tenant (unknown = reject).
    let (_, code, tenant, _) = get_tls(tls, &h2, Some("kb")).await.unwrap();
    assert_eq!((code, tenant.as_str()), (200, "keyed"));
    let (_, code, _, _) = get_tls(tls, &anonymous, None).await.unwrap();
    assert_eq!(code, 401);
    // A certificate from another CA is refused in the handshake, and counted.
    let other = Pki::new();
    let stranger = other.issue("svc-a.internal", &[], false, (2020, 2100));
    let forged = pki.client(&[b"h2"], Some(&stranger));
    assert!(get_tls(tls, &forged, None).await.is_err());
    handshake_failures(p.admin, 1).await;
    // The plaintext listener serves on beside it (no certificate there: the key decides).
    let (code, _, _) = get(p.addr, "/", Some("kb")).await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reload_under_load_fails_no_request() {
    let (pki, up, p, tls) = pki_proxy("first", false, &tenants(&[("a", "ka")])).await;
    let rest = format!("{}{}", pki.listen_tls(false), tenants(&[("a", "ka")]));
    let client = pki.client(&[b"h2", b"http/1.1"], None);
    let (_, _, _, first) = get_tls(tls, &client, Some("ka")).await.unwrap();

    // Load: new connections (a handshake each) one after another, every one must succeed.
    let stop = Arc::new(AtomicBool::new(false));
    let (done, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (stop, done, failed, client) =
            (stop.clone(), done.clone(), failed.clone(), client.clone());
        tokio::spawn(async move {
            let mut certs = Vec::new();
            while !stop.load(Relaxed) {
                match get_tls(tls, &client, Some("ka")).await {
                    Ok((_, 200, _, cert)) => {
                        done.fetch_add(1, Relaxed);
                        if certs.last() != Some(&cert) {
                            certs.push(cert);
                        }
                    }
                    other => {
                        eprintln!("failed under reload: {:?}", other.map(|r| r.1));
                        failed.fetch_add(1, Relaxed);
                    }
                }
            }
            certs
        })
    };
    let reload = |p: &Running| p.handle.reload(config(up.addr(), &rest));
    eventually(STEP, "load running", || async { done.load(Relaxed) >= 5 }).await;
    let second = pki.server("second");
    assert_eq!(reload(&p).unwrap(), Vec::<String>::new());
    let before = done.load(Relaxed);
    eventually(STEP, "requests after the reload", || async {
        done.load(Relaxed) >= before + 5
    })
    .await;

    // Bad reloads keep the second certificate and say why: an expired certificate, a key
    // that does not match, a file that cannot be read.
    let expired = pki.issue("expired", &["localhost"], true, (2001, 2002));
    pki.write("cert.pem", &expired.cert);
    pki.write("key.pem", &expired.key);
    let w = reload(&p).unwrap();
    assert!(
        w.iter()
            .any(|w| w.contains("expired") && w.contains("kept the old certificate")),
        "{w:?}"
    );
    pki.write("cert.pem", &second.cert);
    pki.write("key.pem", &pki.issue("other", &[], true, (2020, 2100)).key);
    let w = reload(&p).unwrap();
    assert!(
        w.iter().any(|w| w.contains("kept the old certificate")),
        "{w:?}"
    );
    std::fs::remove_file(pki.path("cert.pem")).unwrap();
    let w = reload(&p).unwrap();
    assert!(
        w.iter()
            .any(|w| w.contains("cannot read") && w.contains("kept the old certificate")),
        "{w:?}"
    );
    let before = done.load(Relaxed);
    eventually(STEP, "requests after the bad reloads", || async {
        done.load(Relaxed) >= before + 5
    })
    .await;
    stop.store(true, Relaxed);
    let certs = load.await.unwrap();
    assert_eq!(
        failed.load(Relaxed),
        0,
        "requests failed during the reloads"
    );
    let second_der = CertificateDer::from_pem_slice(second.cert.as_bytes()).unwrap();
    assert_eq!(
        certs.first(),
        Some(&first),
        "the load began on the first certificate"
    );
    assert_eq!(
        certs.last().map(|c| c.as_slice()),
        Some(second_der.as_ref()),
        "{}",
        certs.len()
    );
    assert_eq!(
        certs.len(),
        2,
        "only the good reload changed the certificate"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_and_garbage_on_the_tls_port_are_closed() {
    let (pki, _up, p, tls) = pki_proxy("proxy", false, &tenants(&[("a", "ka")])).await;
    for junk in [
        &b"GET / HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\n\r\n"[..],
        b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
        b"\x16\x03\x01\x00\x05hello",
    ] {
        let mut s = TcpStream::connect(tls).await.unwrap();
        s.write_all(junk).await.unwrap();
        let mut got = Vec::new();
        let read = tokio::time::timeout(STEP, s.read_to_end(&mut got)).await;
        let read = read.expect("the proxy closes the connection");
        // Closed, perhaps after a TLS alert; never an HTTP answer.
        assert!(
            !String::from_utf8_lossy(&got).contains("HTTP/"),
            "{read:?} {got:?}"
        );
    }
    handshake_failures(p.admin, 3).await;
    let s = status(p.admin).await;
    assert_eq!(tenant(&s, "a")["received"], 0, "nothing was forwarded: {s}");
    let client = pki.client(&[b"http/1.1"], None);
    let (_, code, _, _) = get_tls(tls, &client, Some("ka")).await.unwrap();
    assert_eq!(code, 200);
}

/// The own HTTP/1.1 adapter over TLS reads what rustls holds before waiting on the socket:
/// two requests of 3 KiB in one TLS record are both answered (the adapter reads 4 KiB at a
/// time, so the second one's end waits in rustls's plaintext buffer, with no new bytes on
/// the socket to wake the adapter), a request sent while the one before is at the upstream
/// is answered after it, and a client that closes its connection (close_notify, then FIN)
/// while its request is at the upstream cancels it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipelined_requests_and_a_departed_client_over_tls() {
    let (pki, _up, p, tls) = pki_proxy("proxy", false, &tenants(&[("a", "ka")])).await;
    let client = pki.client(&[b"http/1.1"], None);
    let connect = || async {
        let tcp = TcpStream::connect(tls).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let s = client.connect(name, tcp).await.unwrap();
        assert_eq!(s.get_ref().1.alpn_protocol(), Some(&b"http/1.1"[..]));
        s
    };
    let pad = "p".repeat(3000);
    let req = |path: &str| {
        format!(
            "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ka\r\nX-Pad: {pad}\r\n\r\n"
        )
    };
    let mut s = connect().await;
    let two = format!("{}{}", req("/one"), req("/two"));
    s.write_all(two.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    read_answers(&mut s, &mut got, 2).await;
    s.write_all(req("/slow?delay_ms=300").as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    s.write_all(req("/after").as_bytes()).await.unwrap();
    read_answers(&mut s, &mut got, 4).await;
    assert_eq!(tenant(&status(p.admin).await, "a")["completed"], 4);

    let mut s = connect().await;
    s.write_all(req("/held?delay_ms=60000").as_bytes())
        .await
        .unwrap();
    let admin = p.admin;
    eventually(STEP, "the request at the upstream", || async move {
        status(admin).await["in_flight"] == 1
    })
    .await;
    s.shutdown().await.unwrap();
    drop(s);
    eventually(
        STEP,
        "the request cancelled by its client's close",
        || async move {
            let s = status(admin).await;
            s["in_flight"] == 0 && tenant(&s, "a")["cancelled"] == 1
        },
    )
    .await;
}

/// Read from `s` into `got` until it holds `n` answers (status lines), within [`STEP`].
async fn read_answers(
    s: &mut tokio_rustls::client::TlsStream<TcpStream>,
    got: &mut Vec<u8>,
    n: usize,
) {
    let answers = |got: &[u8]| {
        String::from_utf8_lossy(got)
            .matches("HTTP/1.1 200 ")
            .count()
    };
    let read = async {
        while answers(got) < n {
            let mut chunk = [0u8; 4096];
            let k = s.read(&mut chunk).await.unwrap();
            assert!(k > 0, "closed after {:?}", String::from_utf8_lossy(got));
            got.extend_from_slice(&chunk[..k]);
        }
    };
    let waited = tokio::time::timeout(STEP, read).await;
    assert!(
        waited.is_ok(),
        "{n} answers: {:?}",
        String::from_utf8_lossy(got)
    );
}

/// h2spec's report: its output, the summary's (passed, failed) counts, and the cases
/// listed under "Failures:".
fn h2spec(args: &[&str]) -> (String, (u32, u32), Vec<String>) {
    let out = Command::new(test_dep("bin/h2spec"))
        .args(args)
        .args(["--timeout", "5"])
        .output()
        .expect("run h2spec");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    // "145 tests, 144 passed, 0 skipped, 1 failed"
    let summary = text
        .lines()
        .rev()
        .find(|l| l.contains(" tests, ") && l.ends_with(" failed"))
        .unwrap_or_else(|| panic!("no h2spec summary in:\n{text}"));
    let count = |what: &str| -> u32 {
        summary
            .split(", ")
            .find_map(|part| part.strip_suffix(what))
            .and_then(|n| n.trim().rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {what:?} count in {summary:?}"))
    };
    let failures = text
        .split("Failures:")
        .nth(1)
        .map(|f| {
            f.lines()
                .filter(|l| l.trim_start().starts_with('×'))
                .map(|l| l.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    (text.clone(), (count(" passed"), count(" failed")), failures)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn h2spec_passes_on_both_listeners() {
    let (_pki, _up, p, tls) = pki_proxy("proxy", false, "[identity]\nunknown = \"default\"").await;
    let (tls_port, plain_port) = (tls.port().to_string(), p.addr.port().to_string());
    let run = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            h2spec(&args)
        })
    };
    let on_tls = run(vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        tls_port,
        "-t".into(),
        "-k".into(),
    ]);
    let (text, (passed, failed), failures) = on_tls.await.unwrap();
    assert_eq!(failed, 0, "h2spec on the TLS listener:\n{text}");
    assert!(passed >= 140, "h2spec ran its cases:\n{text}");
    assert!(failures.is_empty(), "{failures:?}");
    // The plaintext listener also serves HTTP/1.1, so a connection whose first bytes are
    // not the HTTP/2 preface is read as HTTP/1.1: h2spec's invalid-preface case (3.5/2)
    // gets an HTTP/1.1 answer rather than a GOAWAY. Every other case passes.
    let on_plain = run(vec![
        "-h".into(),
        "127.0.0.1".into(),
        "-p".into(),
        plain_port,
    ]);
    let (text, (passed, failed), failures) = on_plain.await.unwrap();
    assert_eq!(failed, 1, "h2spec on the plaintext listener:\n{text}");
    assert!(passed >= 140, "h2spec ran its cases:\n{text}");
    assert!(text.contains("3.5. HTTP/2 Connection Preface"), "{text}");
    assert_eq!(failures.len(), 1, "{failures:?}\n{text}");
    assert!(
        failures[0].contains("Sends invalid connection preface"),
        "{failures:?}"
    );
}
