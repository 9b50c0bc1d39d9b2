//! TLS with rustls (the `ring` provider; TLS 1.2 and 1.3): the listener's configuration
//! (`[listen.tls]`: a PEM certificate and key, ALPN `h2` and `http/1.1`, optional client
//! certificates checked against `client_ca`), swapped in place by [`Acceptor::reload`]
//! without touching open connections; the upstream's (`[upstream.tls]`: a CA bundle, a
//! server name and an optional client certificate); and the names a verified client
//! certificate carries, which identify a tenant by its `cert_names`.
//!
//! Files are checked when read: a certificate file must hold at least one certificate and
//! its first (the proxy's own) must be valid now — an expired or not yet valid certificate
//! is refused, naming the file and its dates — and a key file must hold one private key
//! that matches the certificate.

use std::sync::{Arc, RwLock};

use rustls::crypto::CryptoProvider;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{ConfigError, ListenTls, UpstreamTls};

/// The TLS versions offered, both ways.
const VERSIONS: &[&rustls::SupportedProtocolVersion] =
    &[&rustls::version::TLS13, &rustls::version::TLS12];

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The listener's TLS configuration, replaced whole by a reload: a handshake uses the one
/// current when it starts.
pub(crate) struct Acceptor {
    config: RwLock<Arc<ServerConfig>>,
}

impl Acceptor {
    /// Read `tls`'s files (`http2`: offer `h2` in ALPN).
    pub fn new(tls: &ListenTls, http2: bool) -> Result<Acceptor, ConfigError> {
        Ok(Acceptor {
            config: RwLock::new(server_config(tls, http2)?),
        })
    }

    /// The configuration new handshakes use.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.config
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Read `tls`'s files again and use them for new handshakes; on an error the old
    /// configuration stays.
    pub fn reload(&self, tls: &ListenTls, http2: bool) -> Result<(), ConfigError> {
        let new = server_config(tls, http2)?;
        *self.config.write().unwrap_or_else(|e| e.into_inner()) = new;
        Ok(())
    }
}

/// The listener's rustls configuration from `[listen.tls]`.
pub(crate) fn server_config(
    tls: &ListenTls,
    http2: bool,
) -> Result<Arc<ServerConfig>, ConfigError> {
    let certs = read_certs("listen.tls.cert", &tls.cert, true)?;
    let key = read_key("listen.tls.key", &tls.key)?;
    let builder = ServerConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| ConfigError::new("listen.tls", e.to_string()))?;
    let builder = match &tls.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let roots = roots("listen.tls.client_ca", ca)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider());
            let verifier = if tls.require_client_cert {
                verifier
            } else {
                verifier.allow_unauthenticated()
            };
            let verifier = verifier
                .build()
                .map_err(|e| ConfigError::new("listen.tls.client_ca", e.to_string()))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder
        .with_single_cert(certs, key)
        .map_err(|e| ConfigError::new("listen.tls.key", format!("{}: {e}", tls.key)))?;
    config.alpn_protocols = if http2 {
        vec![b"h2".to_vec(), b"http/1.1".to_vec()]
    } else {
        vec![b"http/1.1".to_vec()]
    };
    Ok(Arc::new(config))
}

/// The upstream's rustls configuration from `[upstream.tls]`, offering `alpn`.
pub(crate) fn client_config(
    tls: &UpstreamTls,
    alpn: &[&[u8]],
) -> Result<Arc<ClientConfig>, ConfigError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_protocol_versions(VERSIONS)
        .map_err(|e| ConfigError::new("upstream.tls", e.to_string()))?
        .with_root_certificates(roots("upstream.tls.ca", &tls.ca)?);
    let mut config = match (&tls.cert, &tls.key) {
        (Some(cert), Some(key)) => {
            let certs = read_certs("upstream.tls.cert", cert, true)?;
            let key_der = read_key("upstream.tls.key", key)?;
            builder
                .with_client_auth_cert(certs, key_der)
                .map_err(|e| ConfigError::new("upstream.tls.key", format!("{key}: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

impl crate::ProxyConfig {
    /// Read every TLS file the configuration names, as starting the proxy would: a file
    /// that cannot be read, holds no certificate or key, or an expired certificate is an
    /// error naming its field and file. (`--check` runs it after
    /// [`validate`](crate::ProxyConfig::validate).)
    pub fn check_files(&self) -> Result<(), ConfigError> {
        if let Some(t) = &self.listen.tls {
            server_config(t, self.listen.http2)?;
        }
        if let Some(t) = &self.upstream.tls {
            client_config(t, &[])?;
        }
        Ok(())
    }
}

/// A root store of the CA certificates in `path`.
fn roots(field: &str, path: &str) -> Result<Arc<RootCertStore>, ConfigError> {
    let mut store = RootCertStore::empty();
    for c in read_certs(field, path, false)? {
        store
            .add(c)
            .map_err(|e| ConfigError::new(field, format!("{path}: {e}")))?;
    }
    Ok(Arc::new(store))
}

/// The certificates of a PEM file (at least one). `leaf`: its first must be valid now.
fn read_certs(
    field: &str,
    path: &str,
    leaf: bool,
) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bad = |why: String| ConfigError::new(field, format!("{path}: {why}"));
    let text = std::fs::read(path).map_err(|e| bad(format!("cannot read: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&text)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(format!("not a PEM certificate file: {e}")))?;
    let Some(first) = certs.first() else {
        return Err(bad("no certificate in it".into()));
    };
    if leaf {
        let (from, until) =
            der::validity(first).ok_or_else(|| bad("its certificate cannot be read".into()))?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        if now > until {
            return Err(bad(format!(
                "its certificate expired on {}",
                der::utc(until)
            )));
        }
        if now < from {
            return Err(bad(format!(
                "its certificate is valid only from {}",
                der::utc(from)
            )));
        }
    }
    Ok(certs)
}

/// The one private key of a PEM file.
fn read_key(field: &str, path: &str) -> Result<PrivateKeyDer<'static>, ConfigError> {
    let text = std::fs::read(path)
        .map_err(|e| ConfigError::new(field, format!("{path}: cannot read: {e}")))?;
    PrivateKeyDer::from_pem_slice(&text)
        .map_err(|e| ConfigError::new(field, format!("{path}: no PEM private key in it ({e})")))
}

/// The names a verified client certificate carries, for identification: its subject's
/// common name, then its DNS and URI subject alternative names.
pub(crate) fn peer_names(cert: &CertificateDer<'_>) -> Vec<Box<str>> {
    let Ok(parsed) = webpki::EndEntityCert::try_from(cert) else {
        return Vec::new();
    };
    let mut names: Vec<Box<str>> = der::common_name(parsed.subject())
        .into_iter()
        .map(Box::from)
        .collect();
    names.extend(parsed.valid_dns_names().map(Box::from));
    names.extend(parsed.valid_uri_names().map(Box::from));
    names
}

/// Just enough DER (X.690) to read a certificate's validity and its subject's common name,
/// which rustls and webpki do not hand out. Anything unexpected reads as absent.
mod der {
    /// One element at the start of `input`: its tag, its contents and what follows it.
    fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, rest) = input.split_first()?;
        let (&first, rest) = rest.split_first()?;
        let (len, rest) = if first < 0x80 {
            (first as usize, rest)
        } else {
            let n = (first & 0x7f) as usize;
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
            (len, &rest[n..])
        };
        if rest.len() < len {
            return None;
        }
        Some((tag, &rest[..len], &rest[len..]))
    }

    const SEQUENCE: u8 = 0x30;
    const SET: u8 = 0x31;
    const OID: u8 = 0x06;
    /// 2.5.4.3, id-at-commonName.
    const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];

    /// A certificate's validity, `notBefore` and `notAfter`, in Unix seconds.
    pub fn validity(cert: &[u8]) -> Option<(i64, i64)> {
        let (SEQUENCE, cert, _) = element(cert)? else {
            return None;
        };
        let (SEQUENCE, tbs, _) = element(cert)? else {
            return None;
        };
        // [0] version (optional), serial, signature algorithm, issuer, then validity.
        let mut rest = tbs;
        let (tag, _, after) = element(rest)?;
        if tag == 0xa0 {
            rest = after;
        }
        for _ in 0..3 {
            rest = element(rest)?.2;
        }
        let (SEQUENCE, validity, _) = element(rest)? else {
            return None;
        };
        let (t1, from, rest) = element(validity)?;
        let (t2, until, _) = element(rest)?;
        Some((time(t1, from)?, time(t2, until)?))
    }

    /// A UTCTime (`YYMMDDHHMMSSZ`) or GeneralizedTime (`YYYYMMDDHHMMSSZ`) in Unix seconds.
    fn time(tag: u8, v: &[u8]) -> Option<i64> {
        let (year, rest) = match tag {
            0x17 if v.len() == 13 => {
                let y = num(&v[..2])?;
                (if y < 50 { 2000 + y } else { 1900 + y }, &v[2..])
            }
            0x18 if v.len() == 15 => (num(&v[..4])?, &v[4..]),
            _ => return None,
        };
        if rest[10] != b'Z' {
            return None;
        }
        let [mo, d, h, mi, s] = [0, 2, 4, 6, 8].map(|i| num(&rest[i..i + 2]));
        let (mo, d, h, mi, s) = (mo?, d?, h?, mi?, s?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return None;
        }
        Some(crate::civil::to_days(year, mo, d) * 86_400 + h * 3600 + mi * 60 + s)
    }

    fn num(digits: &[u8]) -> Option<i64> {
        digits.iter().try_fold(0i64, |a, &b| {
            b.is_ascii_digit().then(|| a * 10 + i64::from(b - b'0'))
        })
    }

    /// Unix seconds as `YYYY-MM-DD HH:MM:SS UTC` .
    pub fn utc(secs: i64) -> String {
        let (y, m, d) = crate::civil::from_days(secs.div_euclid(86_400));
        let sod = secs.rem_euclid(86_400);
        let (h, mi, s) = (sod / 3600, sod / 60 % 60, sod % 60);
        format!("{y:04}-{m:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
    }

    /// The DER elements of `bytes`, one after another, as (tag, contents); a malformed one
    /// ends the walk.
    fn elements(mut bytes: &[u8]) -> impl Iterator<Item = (u8, &[u8])> {
        std::iter::from_fn(move || {
            let (tag, contents, rest) = element(bytes)?;
            bytes = rest;
            Some((tag, contents))
        })
    }

    /// The first common name in a Name's contents (its RDNs: SETs of attribute SEQUENCEs),
    /// as text.
    pub fn common_name(name: &[u8]) -> Option<&str> {
        let value = elements(name)
            .filter(|&(tag, _)| tag == SET)
            .flat_map(|(_, set)| elements(set))
            .filter(|&(tag, _)| tag == SEQUENCE)
            .find_map(|(_, attr)| {
                let (t, oid, value) = element(attr)?;
                (t == OID && oid == COMMON_NAME).then_some(value)
            })?;
        let (_, text, _) = element(value)?;
        std::str::from_utf8(text).ok()
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn times_read_as_unix_seconds() {
            // `date -u -d 2024-02-29T12:34:56Z +%s`
            assert_eq!(time(0x17, b"240229123456Z"), Some(1_709_210_096));
            assert_eq!(time(0x18, b"20240229123456Z"), Some(1_709_210_096));
            assert_eq!(time(0x17, b"700101000000Z"), Some(0));
            assert_eq!(time(0x18, b"99991231235959Z"), Some(253_402_300_799));
            assert_eq!(time(0x17, b"241329123456Z"), None, "month 13");
            assert_eq!(time(0x17, b"2402291234Z"), None, "short");
            assert_eq!(time(0x17, b"24022912345+Z"), None, "not digits");
            assert_eq!(utc(1_709_210_096), "2024-02-29 12:34:56 UTC");
            assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        }

        #[test]
        fn broken_der_reads_as_absent() {
            for bad in [
                &b""[..],
                b"\x30",
                b"\x30\x85\x00\x00\x00\x00\x01",
                b"\x30\x05\x30\x03\x02\x01",
            ] {
                assert_eq!(validity(bad), None, "{bad:?}");
                assert_eq!(common_name(bad), None, "{bad:?}");
            }
        }
    }
}
