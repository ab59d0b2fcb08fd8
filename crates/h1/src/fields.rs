//! The header fields that belong to one connection and are never forwarded to the next (RFC
//! 9110 §7.6.1, and the proxy authentication fields of §11.7, which concern the gateway
//! itself): one list for the origin response parser, which notes them as it parses, and for
//! the proxy, which removes them from what it forwards either way.

use http::header::{self, HeaderName};

/// The connection-specific fields: `Connection` first, then the fields a proxy removes whether
/// or not `Connection` names them.
pub const HOP_BY_HOP: [HeaderName; 6] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

/// The proxy authentication fields: between the client and the gateway, never the origin's.
pub const PROXY_AUTH: [HeaderName; 2] = [header::PROXY_AUTHENTICATE, header::PROXY_AUTHORIZATION];

/// Whether `name` is one of [`HOP_BY_HOP`] or [`PROXY_AUTH`].
pub fn is_hop_by_hop(name: &HeaderName) -> bool {
    let (hop_by_hop, proxy_auth) = (HOP_BY_HOP, PROXY_AUTH);
    hop_by_hop.contains(name) || proxy_auth.contains(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lists_name_what_a_proxy_does_not_forward() {
        for name in [
            "Connection",
            "keep-alive",
            "Proxy-Connection",
            "TE",
            "transfer-encoding",
            "Upgrade",
        ] {
            assert!(
                is_hop_by_hop(&HeaderName::from_bytes(name.as_bytes()).unwrap()),
                "{name}"
            );
        }
        for name in ["proxy-authenticate", "Proxy-Authorization"] {
            assert!(
                is_hop_by_hop(&HeaderName::from_bytes(name.as_bytes()).unwrap()),
                "{name}"
            );
        }
        for name in ["content-length", "trailer", "server", "x-keep-alive"] {
            assert!(
                !is_hop_by_hop(&HeaderName::from_bytes(name.as_bytes()).unwrap()),
                "{name}"
            );
        }
    }
}
