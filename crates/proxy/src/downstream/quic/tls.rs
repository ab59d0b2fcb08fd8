//! The QUIC side of a configuration generation: quiche's transport settings from `[http3]` over
//! a BoringSSL context built by the same code as the TCP path's (`TlsService::build_quic`: SNI
//! site selection, ECDSA/RSA per client, key backends, ticket keys, groups, the 0-RTT claim),
//! and the HTTP/3 settings (QPACK without a dynamic table: quiche's encoder has none).

use super::error::QuicError;
use crate::gateway::{Gateway, Generation};
use std::sync::Arc;
use tlsgate_tls::TlsService;

/// Unidirectional streams a client may open (control, QPACK encoder and decoder, and room for
/// extensions it may try).
const MAX_STREAMS_UNI: u64 = 16;
/// Flow-control window of each unidirectional stream.
const UNI_STREAM_WINDOW: u64 = 64 * 1024;
/// `active_connection_id_limit`: the client's connection IDs the gateway keeps, which quiche
/// also takes as the number of network paths a connection holds at once. Unpatched quiche 0.30
/// never freed a path the client left, so this was how many addresses one connection could
/// ever have (quiche's default of 2 stalled a client at its second change); the patched quiche
/// (third_party/README.md) evicts a path the connection migrated away from when a new address
/// needs room, so addresses may change any number of times, 7 of the old paths kept meanwhile.
const MAX_PATHS: u64 = 8;

/// One generation's QUIC settings.
pub struct QuicTls {
    /// The generation it was built from.
    pub generation: Arc<Generation>,
    /// The sites' TLS contexts with ALPN `h3` (site lookups after the handshake).
    pub service: Arc<TlsService>,
    /// quiche's settings, holding the front context.
    pub config: quiche::Config,
}

impl QuicTls {
    /// Builds the settings of the gateway's current generation.
    pub fn build(gateway: &Gateway) -> Result<Self, QuicError> {
        let generation = gateway.current();
        // The generation's (built with it from the files as they were); one that does not serve
        // HTTP/3 (a reload turned it off: the sockets stay until a restart) is built here.
        let service = match &generation.quic_tls {
            Some(s) => s.clone(),
            None => Arc::new(TlsService::build_quic(&generation.config, &gateway.sessions)?),
        };
        let front = service.quic_front(&generation.config.tls, &gateway.sessions)?;
        let mut config = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, front)?;
        config.set_application_protos(&[b"h3"])?;
        let h3 = &generation.config.http3;
        let tls = &generation.config.tls;
        config.set_max_idle_timeout(u64::try_from(h3.idle_timeout.get().as_millis()).unwrap_or(u64::MAX));
        config.set_max_recv_udp_payload_size(1500);
        config.set_max_send_udp_payload_size(h3.max_udp_payload);
        config.set_initial_max_data(h3.initial_connection_window);
        config.set_initial_max_stream_data_bidi_remote(h3.initial_stream_window);
        config.set_initial_max_stream_data_bidi_local(h3.initial_stream_window);
        config.set_initial_max_stream_data_uni(UNI_STREAM_WINDOW);
        config.set_initial_max_streams_bidi(h3.max_concurrent_streams);
        config.set_initial_max_streams_uni(MAX_STREAMS_UNI);
        config.set_active_connection_id_limit(MAX_PATHS);
        config.set_cc_algorithm_name(h3.congestion_control.quiche_name())?;
        config.enable_pacing(h3.pacing);
        if tls.tickets.enabled && tls.tickets.early_data {
            config.enable_early_data();
        }
        Ok(Self {
            generation,
            service,
            config,
        })
    }
}

/// The HTTP/3 settings of a new connection.
pub fn h3_config(h3: &tlsgate_config::Http3Config) -> Result<quiche::h3::Config, QuicError> {
    let mut c = quiche::h3::Config::new()?;
    c.set_max_field_section_size(h3.max_field_section_size);
    c.set_qpack_max_table_capacity(0);
    c.set_qpack_blocked_streams(0);
    Ok(c)
}

#[cfg(test)]
mod tests {
    use tlsgate_config::CongestionControl;

    #[test]
    fn quiche_knows_every_congestion_controller_the_configuration_names() {
        for cc in [
            CongestionControl::Bbr2,
            CongestionControl::Cubic,
            CongestionControl::Reno,
        ] {
            let mut q = quiche::Config::new(quiche::PROTOCOL_VERSION).unwrap();
            assert!(q.set_cc_algorithm_name(cc.quiche_name()).is_ok(), "{cc:?}");
        }
    }
}
