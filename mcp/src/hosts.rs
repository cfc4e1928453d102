//! The `Host` policy of the HTTP transport: which names rmcp's DNS-rebinding guard admits.
//! Its own module because both the guard (`http`) and the `Origin` check (`origin`) read it.

use std::net::SocketAddr;

/// Names the DNS-rebinding guard always admits: how a client on the same machine (or
/// through a published container port) addresses the server.
pub(crate) const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "::1"];

/// Which `Host` headers are served.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AllowedHosts {
    Any,
    Only(Vec<String>),
}

/// As the start-up log shows it: `*`, or the names comma-separated.
impl std::fmt::Display for AllowedHosts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AllowedHosts::Any => f.write_str("*"),
            AllowedHosts::Only(hosts) => f.write_str(&hosts.join(",")),
        }
    }
}

/// The `Host` policy for a listener. `CORTEX_HTTP_ALLOWED_HOSTS` (comma-separated names,
/// each optionally with `:port`, or `*`) wins, with the loopback names always added.
/// Otherwise: a wildcard bind (0.0.0.0, ::) is reached under names the server cannot know
/// (a container's service name, a load balancer's), so any host is served and the token
/// alone guards; a specific address is served under its own name and the loopback names.
pub fn allowed_hosts(
    configured: Option<&str>,
    requested_host: &str,
    bound: SocketAddr,
) -> AllowedHosts {
    let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
    let mut add = |host: &str| {
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        if !host.is_empty() && !hosts.iter().any(|h| h.eq_ignore_ascii_case(host)) {
            hosts.push(host.to_ascii_lowercase());
        }
    };
    if let Some(list) = configured.map(str::trim).filter(|l| !l.is_empty()) {
        if list == "*" {
            return AllowedHosts::Any;
        }
        list.split(',').for_each(&mut add);
        return AllowedHosts::Only(hosts);
    }
    if bound.ip().is_unspecified() {
        return AllowedHosts::Any;
    }
    if !bound.ip().is_loopback() {
        add(requested_host);
        add(&bound.ip().to_string());
    }
    AllowedHosts::Only(hosts)
}

/// The host part of a `host:port` bind address (`[::1]:80` gives `::1`).
pub fn host_part(addr: &str) -> &str {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    host.trim_start_matches('[').trim_end_matches(']')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn only(extra: &[&str]) -> AllowedHosts {
        let mut hosts: Vec<String> = LOOPBACK_HOSTS.iter().map(|h| (*h).to_owned()).collect();
        hosts.extend(extra.iter().map(|h| (*h).to_owned()));
        AllowedHosts::Only(hosts)
    }

    #[test]
    fn loopback_binds_serve_loopback_names() {
        let bound = addr("127.0.0.1:8765");
        assert_eq!(allowed_hosts(None, "127.0.0.1", bound), only(&[]));
        assert_eq!(allowed_hosts(None, "localhost", bound), only(&[]));
    }

    #[test]
    fn wildcard_binds_serve_any_host_unless_configured() {
        let bound = addr("0.0.0.0:8765");
        assert_eq!(allowed_hosts(None, "0.0.0.0", bound), AllowedHosts::Any);
        assert_eq!(
            allowed_hosts(Some("cortex, Cortex.example.com:443"), "0.0.0.0", bound),
            only(&["cortex", "cortex.example.com:443"])
        );
        assert_eq!(
            allowed_hosts(Some("*"), "0.0.0.0", bound),
            AllowedHosts::Any
        );
        assert_eq!(
            allowed_hosts(Some(" "), "0.0.0.0", bound),
            AllowedHosts::Any
        );
    }

    #[test]
    fn specific_addresses_serve_their_own_name() {
        let bound = addr("192.0.2.7:8765");
        assert_eq!(
            allowed_hosts(None, "memory.internal", bound),
            only(&["memory.internal", "192.0.2.7"])
        );
    }

    #[test]
    fn host_parts() {
        assert_eq!(host_part("127.0.0.1:8765"), "127.0.0.1");
        assert_eq!(host_part("[::1]:8765"), "::1");
        assert_eq!(host_part("localhost:0"), "localhost");
    }
}
