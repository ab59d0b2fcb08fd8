//! What `tlsgate probe --h3` and `tlsgate bench --h3` share: the QUIC client configuration
//! (quiche on the same BoringSSL, the TLS options of [`crate::tls_opts::TlsOpts`]) and the
//! datagram size limits.

use crate::tls_opts::TlsOpts;
use anyhow::Context;
use boring::ssl::SslContextBuilder;

/// Largest UDP payload read.
pub const MAX_DATAGRAM: usize = 65_535;
/// HTTP/3's "no error" application code, for the closing CONNECTION_CLOSE.
pub const H3_NO_ERROR: u64 = 0x100;

/// The client configuration over `ctx` (built by [`TlsOpts::quic_context`], callbacks added by
/// the caller): ALPN h3, the peer verified under `--cacert`, `--timeout` as the idle timeout,
/// generous flow-control windows, up to `streams` requests at a time, 0-RTT when `early_data`.
pub fn client_config(
    ctx: SslContextBuilder,
    opts: &TlsOpts,
    streams: u64,
    early_data: bool,
) -> anyhow::Result<quiche::Config> {
    let mut config = quiche::Config::with_boring_ssl_ctx_builder(quiche::PROTOCOL_VERSION, ctx)
        .context("cannot create the QUIC configuration")?;
    config
        .set_application_protos(quiche::h3::APPLICATION_PROTOCOL)
        .context("ALPN h3")?;
    // verify_peer follows --cacert, as over TCP (the context's verify mode is quiche's).
    config.verify_peer(opts.cacert.is_some());
    config.set_max_idle_timeout(opts.timeout.as_millis().try_into().unwrap_or(u64::MAX));
    config.set_max_recv_udp_payload_size(MAX_DATAGRAM);
    config.set_max_send_udp_payload_size(1350);
    config.set_initial_max_data(64 << 20);
    config.set_initial_max_stream_data_bidi_local(8 << 20);
    config.set_initial_max_stream_data_bidi_remote(1 << 20);
    config.set_initial_max_stream_data_uni(1 << 20);
    config.set_initial_max_streams_bidi(streams);
    config.set_initial_max_streams_uni(16);
    config.set_disable_active_migration(true);
    if early_data {
        config.enable_early_data();
    }
    Ok(config)
}
