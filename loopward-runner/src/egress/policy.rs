//! Which hosts a command may reach, and which addresses a name may lead to.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The hosts one agent's commands may reach (`[[agent]] net`): names, or addresses written
/// as such. An empty list reaches nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct EgressPolicy {
    allow: Vec<String>,
    gateway: Option<super::Gateway>,
}

/// What kind of address may not be reached through a name.
fn forbidden(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => forbidden_v4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => forbidden_v4(v4),
            None => forbidden_v6(v6),
        },
    }
}

fn forbidden_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    if ip == Ipv4Addr::new(169, 254, 169, 254) || ip == Ipv4Addr::new(100, 100, 100, 200) {
        Some("cloud-metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if ip.is_link_local() {
        Some("link-local")
    } else if ip.is_private() {
        Some("private")
    } else if a == 100 && (64..128).contains(&b) {
        Some("shared (carrier-grade NAT)")
    } else if ip.is_multicast() || ip.is_broadcast() || a >= 240 {
        Some("multicast or reserved")
    } else {
        None
    }
}

fn forbidden_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let first = ip.segments()[0];
    if ip
        == "fd00:ec2::254"
            .parse::<Ipv6Addr>()
            .unwrap_or(Ipv6Addr::UNSPECIFIED)
    {
        Some("cloud-metadata")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_unspecified() {
        Some("unspecified")
    } else if first & 0xffc0 == 0xfe80 {
        Some("link-local")
    } else if first & 0xfe00 == 0xfc00 {
        Some("private")
    } else if ip.is_multicast() {
        Some("multicast or reserved")
    } else {
        None
    }
}

impl EgressPolicy {
    /// Allows these hosts (names compared case-insensitively, or addresses).
    pub fn new<S: Into<String>>(allow: impl IntoIterator<Item = S>) -> Self {
        Self {
            allow: allow
                .into_iter()
                .map(|s| s.into().to_ascii_lowercase())
                .collect(),
            gateway: None,
        }
    }

    /// Also serves as the base URL of a model API: requests sent to the proxy itself go to
    /// `gateway`'s upstream with the real credential (see [`Gateway`](super::Gateway)).
    pub fn with_gateway(mut self, gateway: super::Gateway) -> Self {
        self.gateway = Some(gateway);
        self
    }

    /// The gateway, if any.
    pub fn gateway(&self) -> Option<&super::Gateway> {
        self.gateway.as_ref()
    }

    /// The listed hosts.
    pub fn allowed(&self) -> &[String] {
        &self.allow
    }

    /// The addresses to connect to for `host:port`, or why not: the host is not listed, cannot
    /// be resolved, or resolves to a forbidden address that is not itself listed.
    pub async fn resolve(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_ascii_lowercase();
        if !self.allow.contains(&host) {
            return Err(format!(
                "{host} is not in this agent's net allow-list ({})",
                if self.allow.is_empty() {
                    "empty".to_string()
                } else {
                    self.allow.join(", ")
                }
            ));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            // Listed as the address itself: whatever kind of address it is.
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host.as_str(), port))
            .await
            .map_err(|e| format!("{host} could not be resolved: {e}"))?
            .collect();
        if addrs.is_empty() {
            return Err(format!("{host} resolves to no address"));
        }
        if let Some((addr, kind)) = addrs
            .iter()
            .find_map(|a| forbidden(a.ip()).map(|k| (a.ip(), k)))
        {
            return Err(format!(
                "{host} resolves to {addr}, a {kind} address; only a listed address may be {kind}"
            ));
        }
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_private_link_local_and_loopback_addresses_are_named() {
        for (ip, kind) in [
            ("169.254.169.254", "cloud-metadata"),
            ("fd00:ec2::254", "cloud-metadata"),
            ("127.0.0.2", "loopback"),
            ("::1", "loopback"),
            ("::ffff:10.1.2.3", "private"),
            ("10.0.0.1", "private"),
            ("172.16.5.4", "private"),
            ("192.168.1.1", "private"),
            ("169.254.1.1", "link-local"),
            ("fe80::1", "link-local"),
            ("100.64.0.1", "shared (carrier-grade NAT)"),
            ("0.0.0.0", "unspecified"),
        ] {
            assert_eq!(forbidden(ip.parse().unwrap()), Some(kind), "{ip}");
        }
        assert_eq!(forbidden("93.184.216.34".parse().unwrap()), None);
    }
}
