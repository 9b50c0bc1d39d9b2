//! Checking a client's password without seeing it: the server side of SCRAM-SHA-256
//! (RFC 5802, RFC 7677, as PostgreSQL runs it: no channel binding, the user name taken from
//! the startup packet) and PostgreSQL's md5 challenge.
//!
//! A [`Verifier`] is computed once per configured user at start-up (salt, StoredKey,
//! ServerKey); a login then costs two HMACs, not 4096.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine;
use hmac::{Hmac, KeyInit, Mac};
use rand::RngExt;
use sha2::{Digest, Sha256};

/// Iterations of `Hi` (PostgreSQL's default `scram_iterations`).
pub const ITERATIONS: u32 = 4096;

fn hmac(key: &[u8], parts: &[&[u8]]) -> [u8; 32] {
    // HMAC takes keys of any length: `new_from_slice` cannot fail.
    let mut m = <Hmac<Sha256> as KeyInit>::new_from_slice(key).expect("HMAC takes any key");
    for p in parts {
        m.update(p);
    }
    m.finalize().into_bytes().into()
}

/// `Hi(password, salt, i)` of RFC 5802 §2.2 (PBKDF2 with HMAC-SHA-256, one block).
fn hi(password: &[u8], salt: &[u8], iterations: u32) -> [u8; 32] {
    let mut u = hmac(password, &[salt, &[0, 0, 0, 1]]);
    let mut out = u;
    for _ in 1..iterations {
        u = hmac(password, &[&u]);
        for (o, x) in out.iter_mut().zip(u.iter()) {
            *o ^= x;
        }
    }
    out
}

/// What the server keeps of a password (RFC 5802 §3).
#[derive(Clone)]
pub struct Verifier {
    salt: [u8; 16],
    iterations: u32,
    stored_key: [u8; 32],
    server_key: [u8; 32],
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Verifier(..)")
    }
}

impl Verifier {
    /// The verifier of `password` (SASLprep-normalized as PostgreSQL does, the raw bytes
    /// when it is not valid for SASLprep) under a fresh random salt.
    pub fn new(password: &str) -> Verifier {
        let mut salt = [0u8; 16];
        rand::rng().fill(&mut salt);
        Verifier::with_salt(password, salt, ITERATIONS)
    }

    fn with_salt(password: &str, salt: [u8; 16], iterations: u32) -> Verifier {
        let normalized = stringprep::saslprep(password)
            .map(|c| c.into_owned())
            .unwrap_or_else(|_| password.to_string());
        let salted = hi(normalized.as_bytes(), &salt, iterations);
        let client_key = hmac(&salted, &[b"Client Key"]);
        Verifier {
            salt,
            iterations,
            stored_key: Sha256::digest(client_key).into(),
            server_key: hmac(&salted, &[b"Server Key"]),
        }
    }
}

/// Why a SCRAM exchange failed.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramError {
    /// The client's message is not what RFC 5802 allows here (SQLSTATE 08P01).
    Protocol(String),
    /// The proof is wrong: a wrong password (SQLSTATE 28P01).
    Failed,
}

/// One exchange, after the client's first message.
#[derive(Debug)]
pub struct ScramServer {
    verifier: Verifier,
    client_first_bare: String,
    server_first: String,
    nonce: String,
}

impl ScramServer {
    /// Read SASLInitialResponse's data; returns the server-first-message to send.
    pub fn start(
        verifier: Verifier,
        client_first: &[u8],
    ) -> Result<(ScramServer, String), ScramError> {
        let text = std::str::from_utf8(client_first)
            .map_err(|_| ScramError::Protocol("client-first-message is not UTF-8".into()))?;
        // gs2-header: "n,," (no channel binding) or "y,," (client supports it, we do not).
        let bare = text
            .strip_prefix("n,,")
            .or_else(|| text.strip_prefix("y,,"))
            .ok_or_else(|| {
                ScramError::Protocol(
                    "channel binding is not supported by the pooler (no TLS); use \
                     channel_binding=disable or prefer"
                        .into(),
                )
            })?;
        let client_nonce = bare
            .split(',')
            .find_map(|a| a.strip_prefix("r="))
            .filter(|n| !n.is_empty() && n.bytes().all(|c| (0x21..0x7f).contains(&c) && c != b','))
            .ok_or_else(|| ScramError::Protocol("client-first-message without a nonce".into()))?;
        let mut rng = rand::rng();
        let server_nonce: String = (0..24)
            .map(|_| {
                let c = rng.random_range(0x21u8..0x7e);
                if c == b',' {
                    '~'
                } else {
                    c as char
                }
            })
            .collect();
        let nonce = format!("{client_nonce}{server_nonce}");
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(verifier.salt),
            verifier.iterations
        );
        let s = ScramServer {
            verifier,
            client_first_bare: bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok((s, server_first))
    }

    /// Check the client-final-message; returns the server-final-message (`v=…`).
    pub fn finish(self, client_final: &[u8]) -> Result<String, ScramError> {
        let text = std::str::from_utf8(client_final)
            .map_err(|_| ScramError::Protocol("client-final-message is not UTF-8".into()))?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| ScramError::Protocol("client-final-message without a proof".into()))?;
        let mut channel = None;
        let mut nonce = None;
        for attr in without_proof.split(',') {
            if let Some(c) = attr.strip_prefix("c=") {
                channel = Some(c);
            } else if let Some(r) = attr.strip_prefix("r=") {
                nonce = Some(r);
            }
        }
        if !matches!(channel, Some("biws") | Some("eSws")) {
            return Err(ScramError::Protocol(
                "unexpected channel binding data".into(),
            ));
        }
        if nonce != Some(self.nonce.as_str()) {
            return Err(ScramError::Protocol("the nonce does not match".into()));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| ScramError::Protocol("the proof is not base64".into()))?;
        if proof.len() != 32 {
            return Err(ScramError::Failed);
        }
        let auth_message = format!(
            "{},{},{}",
            self.client_first_bare, self.server_first, without_proof
        );
        let signature = hmac(&self.verifier.stored_key, &[auth_message.as_bytes()]);
        let client_key: Vec<u8> = proof.iter().zip(signature).map(|(p, s)| p ^ s).collect();
        let stored: [u8; 32] = Sha256::digest(&client_key).into();
        // Constant time: fold the differences.
        let diff = stored
            .iter()
            .zip(self.verifier.stored_key)
            .fold(0u8, |d, (a, b)| d | (a ^ b));
        if diff != 0 {
            return Err(ScramError::Failed);
        }
        let server_signature = hmac(&self.verifier.server_key, &[auth_message.as_bytes()]);
        Ok(format!("v={}", B64.encode(server_signature)))
    }
}

/// Whether an md5 password message (`md5` + hex) answers the challenge `salt` for
/// `user` / `password` (PostgreSQL: `md5(md5(password ‖ user) ‖ salt)`).
pub fn md5_ok(user: &str, password: &str, salt: [u8; 4], answer: &[u8]) -> bool {
    let want =
        postgres_protocol::authentication::md5_hash(user.as_bytes(), password.as_bytes(), salt);
    let answer = answer.strip_suffix(&[0]).unwrap_or(answer);
    answer.len() == want.len()
        && answer
            .iter()
            .zip(want.as_bytes())
            .fold(0u8, |d, (a, b)| d | (a ^ b))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use postgres_protocol::authentication::sasl::{ChannelBinding, ScramSha256};

    fn exchange(server_pw: &str, client_pw: &str) -> Result<(), ScramError> {
        let v = Verifier::new(server_pw);
        let mut client = ScramSha256::new(client_pw.as_bytes(), ChannelBinding::unsupported());
        let (server, first) = ScramServer::start(v, client.message())?;
        client.update(first.as_bytes()).unwrap();
        let last = server.finish(client.message())?;
        client
            .finish(last.as_bytes())
            .map_err(|_| ScramError::Failed)
    }

    #[test]
    fn postgres_protocols_client_logs_in() {
        assert_eq!(exchange("s3cret", "s3cret"), Ok(()));
        assert_eq!(exchange("pässwörd", "pässwörd"), Ok(()));
    }

    #[test]
    fn a_wrong_password_fails() {
        assert_eq!(exchange("s3cret", "guess"), Err(ScramError::Failed));
    }

    #[test]
    fn rfc7677_test_vector() {
        // RFC 7677 §3: user "user", password "pencil".
        let salt: [u8; 16] = B64
            .decode("W22ZaJ0SNY7soEsUEjb6gQ==")
            .unwrap()
            .try_into()
            .unwrap();
        let v = Verifier::with_salt("pencil", salt, 4096);
        let s = ScramServer {
            verifier: v,
            client_first_bare: "n=user,r=rOprNGfwEbeRWgbNEkqO".into(),
            server_first: "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096".into(),
            nonce: "rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
        };
        let last = s
            .finish(b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=")
            .unwrap();
        assert_eq!(last, "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=");
    }

    #[test]
    fn garbage_is_a_protocol_error() {
        let v = Verifier::new("x");
        assert!(matches!(
            ScramServer::start(v.clone(), b"\xff"),
            Err(ScramError::Protocol(_))
        ));
        assert!(matches!(
            ScramServer::start(v.clone(), b"p=tls-server-end-point,,n=,r=a"),
            Err(ScramError::Protocol(_))
        ));
        let (s, _) = ScramServer::start(v, b"n,,n=,r=abc").unwrap();
        assert!(matches!(
            s.finish(b"c=biws,r=zzz,p=AAAA"),
            Err(ScramError::Protocol(_))
        ));
    }

    #[test]
    fn md5_answers() {
        let salt = [1, 2, 3, 4];
        let good = postgres_protocol::authentication::md5_hash(b"bob", b"pw", salt);
        assert!(md5_ok("bob", "pw", salt, good.as_bytes()));
        assert!(!md5_ok("bob", "other", salt, good.as_bytes()));
        assert!(!md5_ok("bob", "pw", salt, b"md5"));
    }
}
