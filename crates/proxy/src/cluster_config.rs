//! `[cluster]`, the section that makes several proxy instances share one upstream (the
//! coordination itself is `cluster`'s), checked by itself with the field in errors.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::section::{ConfigError, MAX_DEPTH};

/// `[cluster]`: coordinate this instance with others in front of the same upstream.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ClusterConfig {
    /// The Redis server, `redis://host:port[/db]` (also `rediss://`, `redis+unix://`).
    pub redis: String,
    /// This instance's id, unique among the instances (printable ASCII, no spaces).
    pub instance: String,
    /// The global depth D: requests outstanding at the shared upstream over all instances.
    pub depth: usize,
    /// How often to exchange reports with the other instances (default 100 ms).
    #[serde(default = "default_interval")]
    pub sync_interval_ms: u64,
    /// How long a report stays live without renewal; a dead instance's share is reclaimed
    /// after this (default 5 × `sync_interval_ms`).
    #[serde(default)]
    pub lease_ms: Option<u64>,
    /// A Redis round trip slower than this counts as a failure (default `sync_interval_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Prefix of the Redis keys, to run several clusters on one Redis (default `fairlane`).
    #[serde(default = "default_prefix")]
    pub key_prefix: String,
}

fn default_interval() -> u64 {
    100
}
fn default_prefix() -> String {
    "fairlane".into()
}

fn err(field: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError {
        file: None,
        field: format!("cluster.{field}"),
        reason: reason.into(),
    }
}

fn printable(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic()) && !s.contains('"')
}

impl ClusterConfig {
    /// The lease in effect.
    pub fn lease(&self) -> Duration {
        Duration::from_millis(self.lease_ms.unwrap_or(5 * self.sync_interval_ms))
    }

    /// The Redis timeout in effect.
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms.unwrap_or(self.sync_interval_ms))
    }

    /// Check every field; the error names it (`cluster.depth`, …).
    pub fn validate(&self) -> Result<(), ConfigError> {
        redis::Client::open(self.redis.as_str())
            .map_err(|e| err("redis", format!("not a Redis URL ({:?}): {e}", self.redis)))?;
        let check_printable = |field: &str, v: &str, what: &str| {
            if printable(v) {
                Ok(())
            } else {
                Err(err(field, format!("must be {what}, got {v:?}")))
            }
        };
        check_printable(
            "instance",
            &self.instance,
            "non-empty printable ASCII without quotes or spaces",
        )?;
        let within = |field: &str, v: u64, max: u64| {
            if (1..=max).contains(&v) {
                Ok(())
            } else {
                Err(err(field, format!("must be in 1..={max}, got {v}")))
            }
        };
        within("depth", self.depth as u64, MAX_DEPTH as u64)?;
        within("sync_interval_ms", self.sync_interval_ms, 60_000)?;
        if let Some(l) = self.lease_ms {
            if l <= self.sync_interval_ms {
                return Err(err(
                    "lease_ms",
                    format!(
                        "must be longer than sync_interval_ms ({}), got {l}",
                        self.sync_interval_ms
                    ),
                ));
            }
        }
        if self.timeout_ms == Some(0) {
            return Err(err("timeout_ms", "must be ≥ 1"));
        }
        check_printable("key_prefix", &self.key_prefix, "non-empty printable ASCII")?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_errors_name_the_field() {
        let ok = ClusterConfig {
            redis: "redis://127.0.0.1:6379".into(),
            instance: "p1".into(),
            depth: 8,
            sync_interval_ms: 100,
            lease_ms: None,
            timeout_ms: None,
            key_prefix: "fairlane".into(),
        };
        assert!(ok.validate().is_ok());
        let bad = |f: fn(&mut ClusterConfig), field: &str| {
            let mut c = ok.clone();
            f(&mut c);
            let e = c.validate().unwrap_err();
            assert_eq!(e.field, field, "{e}");
        };
        bad(|c| c.redis = "http://x".into(), "cluster.redis");
        bad(|c| c.instance = "a b".into(), "cluster.instance");
        bad(|c| c.depth = 0, "cluster.depth");
        bad(|c| c.sync_interval_ms = 0, "cluster.sync_interval_ms");
        bad(|c| c.lease_ms = Some(50), "cluster.lease_ms");
        bad(|c| c.timeout_ms = Some(0), "cluster.timeout_ms");
        bad(|c| c.key_prefix = String::new(), "cluster.key_prefix");
    }

    #[test]
    fn the_config_file_names_the_cluster_field() {
        let text =
            |cluster: &str| format!("[upstream]\naddr = \"127.0.0.1:8000\"\n[cluster]\n{cluster}");
        let c = crate::ProxyConfig::from_toml_str(&text(
            "redis = \"redis://127.0.0.1:6379/\"\ninstance = \"a\"\ndepth = 16",
        ))
        .unwrap();
        let c = c.cluster.unwrap();
        assert_eq!((c.depth, c.sync_interval_ms), (16, 100));
        assert_eq!(c.lease(), Duration::from_millis(500));
        let e = crate::ProxyConfig::from_toml_str(&text(
            "redis = \"redis://127.0.0.1:6379/\"\ninstance = \"a\"\ndepth = 0",
        ))
        .unwrap_err();
        assert_eq!(e.field, "cluster.depth", "{e}");
        let e = crate::ProxyConfig::from_toml_str(&text("redis = \"x\"\ninstance = \"a\""))
            .unwrap_err();
        assert!(e.to_string().contains("depth"), "{e}");
        let adaptive = "[scheduler.adaptive]\n[upstream]\naddr = \"127.0.0.1:8000\"\n[cluster]\n\
                        redis = \"redis://h:1\"\ninstance = \"a\"\ndepth = 8";
        let e = crate::ProxyConfig::from_toml_str(adaptive).unwrap_err();
        assert_eq!(e.field, "cluster", "{e}");
    }
}
