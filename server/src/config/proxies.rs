//! `trusted_proxies_min_prefix`, the bound on how wide `trusted_proxies` may be.

use ipnet::IpNet;
use serde::Deserialize;

use super::ConfigError;

/// `trusted_proxies_min_prefix`: how wide a trusted range may be. A proxy's headers name the
/// user, so every address a range covers may sign in as anyone: `0.0.0.0/0` (or a range a
/// typo widened) hands that to every client. Narrower than the pod networks of common
/// clusters would refuse real installs, so the bound is the operator's to tighten.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrustedProxiesMinPrefix {
    /// The shortest IPv4 prefix accepted (default 8).
    pub ipv4: u8,
    /// The shortest IPv6 prefix accepted (default 32).
    pub ipv6: u8,
}

impl Default for TrustedProxiesMinPrefix {
    fn default() -> Self {
        TrustedProxiesMinPrefix { ipv4: 8, ipv6: 32 }
    }
}

impl TrustedProxiesMinPrefix {
    /// Refuses a bound outside its family's prefix lengths, and any range wider than it.
    pub(super) fn check(&self, nets: &[IpNet]) -> Result<(), ConfigError> {
        if self.ipv4 > 32 {
            return Err(ConfigError::new(
                "trusted_proxies_min_prefix.ipv4",
                "must be a prefix length from 0 to 32",
            ));
        }
        if self.ipv6 > 128 {
            return Err(ConfigError::new(
                "trusted_proxies_min_prefix.ipv6",
                "must be a prefix length from 0 to 128",
            ));
        }
        for (i, net) in nets.iter().enumerate() {
            let (min, family) = match net {
                IpNet::V4(_) => (self.ipv4, "ipv4"),
                IpNet::V6(_) => (self.ipv6, "ipv6"),
            };
            if net.prefix_len() < min {
                let what = if net.prefix_len() == 0 {
                    "covers every address".to_string()
                } else {
                    format!("is wider than /{min}")
                };
                return Err(ConfigError::new(
                    format!("trusted_proxies[{i}]"),
                    format!(
                        "{net} {what}: every client in it could send the proxy's headers and \
                         sign in as anyone; list the auth proxy's own addresses or its pod \
                         network (or lower trusted_proxies_min_prefix.{family} if this range \
                         really holds only proxies)"
                    ),
                ));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    #[test]
    fn ranges_wider_than_the_bound_are_refused_naming_the_entry() {
        for (text, key, says) in [
            (
                "trusted_proxies = [\"0.0.0.0/0\"]",
                "trusted_proxies[0]",
                "covers every address",
            ),
            (
                "trusted_proxies = [\"10.0.0.1/32\", \"::/0\"]",
                "trusted_proxies[1]",
                "covers every address",
            ),
            (
                "trusted_proxies = [\"10.0.0.0/7\"]",
                "trusted_proxies[0]",
                "wider than /8",
            ),
            (
                "trusted_proxies = [\"2001:db8::/31\"]",
                "trusted_proxies[0]",
                "wider than /32",
            ),
            (
                "trusted_proxies = [\"10.42.0.0/16\"]\ntrusted_proxies_min_prefix = { ipv4 = 24 }",
                "trusted_proxies[0]",
                "wider than /24",
            ),
            (
                "trusted_proxies_min_prefix = { ipv4 = 33 }",
                "trusted_proxies_min_prefix.ipv4",
                "0 to 32",
            ),
            (
                "trusted_proxies_min_prefix = { ipv6 = 129 }",
                "trusted_proxies_min_prefix.ipv6",
                "0 to 128",
            ),
        ] {
            let e = super::super::parse(text).unwrap_err();
            assert_eq!(e.key, key, "{text}");
            assert!(e.reason.contains(says), "{text}: {}", e.reason);
        }
        for text in [
            "trusted_proxies = [\"10.42.0.0/16\", \"127.0.0.1/32\", \"fd00::/48\"]",
            "trusted_proxies = [\"10.0.0.0/8\"]",
            "trusted_proxies = [\"0.0.0.0/0\"]\ntrusted_proxies_min_prefix = { ipv4 = 0 }",
        ] {
            let c = super::super::parse(text).unwrap();
            assert!(!c.trusted_proxies.is_empty(), "{text}");
        }
    }
}
