//! Client address blocks (`10.0.0.0/8`, `2001:db8::/32`, one address): what a tenant's `ips`
//! name, checked by the config and matched by the identifier.

use std::net::IpAddr;

/// Why a string is not an address block ([`Cidr::parse`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CidrError {
    /// The part before `/` is not an IP address.
    NotAnAddress(String),
    /// The prefix length is not a number in `0..=max` (32 for IPv4, 128 for IPv6).
    Prefix {
        /// The whole input.
        input: String,
        /// The largest prefix its address family allows.
        max: u8,
    },
}

impl std::fmt::Display for CidrError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CidrError::NotAnAddress(s) => write!(f, "{s:?} is not an address or CIDR block"),
            CidrError::Prefix { input, max } => {
                write!(f, "{input:?}: prefix must be 0..={max}")
            }
        }
    }
}

impl std::error::Error for CidrError {}

/// An address block: `10.0.0.0/8`, `2001:db8::/32`, or a single address.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// Parse `addr` or `addr/prefix`.
    pub fn parse(s: &str) -> Result<Cidr, CidrError> {
        let (a, p) = match s.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (s, None),
        };
        let addr: IpAddr = a
            .trim()
            .parse()
            .map_err(|_| CidrError::NotAnAddress(s.to_string()))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match p {
            None => max,
            Some(p) => p
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|&p| p <= max)
                .ok_or_else(|| CidrError::Prefix {
                    input: s.to_string(),
                    max,
                })?,
        };
        Ok(Cidr { addr, prefix })
    }

    /// Whether `ip` is inside the block (IPv4-mapped IPv6 addresses match IPv4 blocks).
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            v4 => v4,
        };
        match (self.addr, ip) {
            (IpAddr::V4(a), IpAddr::V4(b)) => {
                mask(u32::from(a).into(), u32::from(b).into(), self.prefix, 32)
            }
            (IpAddr::V6(a), IpAddr::V6(b)) => mask(u128::from(a), u128::from(b), self.prefix, 128),
            _ => false,
        }
    }
}

fn mask(a: u128, b: u128, prefix: u8, bits: u32) -> bool {
    if prefix == 0 {
        return true;
    }
    let shift = bits - u32::from(prefix);
    (a >> shift) == (b >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cidr() {
        let c = Cidr::parse("192.168.0.0/16").unwrap();
        assert!(c.contains("192.168.3.4".parse().unwrap()));
        assert!(c.contains("::ffff:192.168.3.4".parse().unwrap()));
        assert!(!c.contains("192.169.0.1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("8.8.8.8".parse().unwrap()));
        assert!(Cidr::parse("::1").unwrap().contains("::1".parse().unwrap()));
        assert_eq!(
            Cidr::parse("10.0.0.0/33"),
            Err(CidrError::Prefix {
                input: "10.0.0.0/33".into(),
                max: 32
            })
        );
        assert_eq!(
            Cidr::parse("nope").unwrap_err().to_string(),
            "\"nope\" is not an address or CIDR block"
        );
    }
}
