//! The QUIC listener's metrics, labelled `protocol="h3"` so dashboards put them beside the TCP
//! path's: handshakes (by site, resumption and 0-RTT), handshake failures, what happened to
//! datagrams that reached no connection, and per connection at its end its lost packets and
//! smoothed RTT, the UDP datapath's datagrams per system call (GSO/GRO at work) and the waits
//! for a paced packet's release time; the client address changes connections followed. Requests
//! are counted by the access log (`requests_total{protocol="h3"}`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{exponential_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::LazyLock;

/// The one protocol label value of this listener.
pub const PROTOCOL: &str = "h3";

/// Labels of `tlsgate_quic_handshakes_total`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct HandshakeLabels {
    /// Always `h3`.
    pub protocol: &'static str,
    /// The site selected by SNI.
    pub site: &'static str,
    /// `full` or `resumed`.
    pub outcome: &'static str,
    /// `yes` when 0-RTT data was accepted.
    pub early_data: &'static str,
    /// The key exchange group.
    pub group: &'static str,
}

/// Labels with a reason or an event name.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WhatLabels {
    /// Always `h3`.
    pub protocol: &'static str,
    /// What happened.
    pub what: &'static str,
}

/// Labels of the UDP datapath's counters.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DirectionLabels {
    /// Always `h3`.
    pub protocol: &'static str,
    /// `sent` or `received`.
    pub direction: &'static str,
}

/// Labels with the protocol alone.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ProtocolLabels {
    /// Always `h3`.
    pub protocol: &'static str,
}

fn rtt_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.000_1, 2.0, 16))
}

/// The process-wide QUIC metrics.
pub struct QuicMetrics {
    /// Completed handshakes.
    pub handshakes: Family<HandshakeLabels, Counter>,
    /// Handshakes that did not complete, by reason.
    pub handshake_failures: Family<WhatLabels, Counter>,
    /// Datagrams handled without a connection (garbage, resets, retries, ...).
    pub datagrams: Family<WhatLabels, Counter>,
    /// Packets declared lost, counted when each connection ends.
    pub lost_packets: Family<ProtocolLabels, Counter>,
    /// Smoothed RTT of each connection when it ends.
    pub rtt: Family<ProtocolLabels, Histogram, fn() -> Histogram>,
    /// UDP datagrams sent (counted as each connection ends) and received (as the endpoint
    /// reads them, added up in batches).
    pub udp_datagrams: Family<DirectionLabels, Counter>,
    /// The system calls that moved them (with GSO/GRO one call carries several datagrams).
    pub udp_calls: Family<DirectionLabels, Counter>,
    /// Times a connection held a packet until the congestion controller's release time
    /// (pacing), counted as each connection ends.
    pub paced_waits: Family<ProtocolLabels, Counter>,
    /// Connections that followed their client to a new, validated address (a NAT rebinding, or
    /// a migration the client started).
    pub migrations: Family<ProtocolLabels, Counter>,
}

/// The metrics (they outlive configuration generations).
pub fn metrics() -> &'static QuicMetrics {
    static METRICS: LazyLock<QuicMetrics> = LazyLock::new(|| QuicMetrics {
        handshakes: Family::default(),
        handshake_failures: Family::default(),
        datagrams: Family::default(),
        lost_packets: Family::default(),
        rtt: Family::new_with_constructor(rtt_histogram),
        udp_datagrams: Family::default(),
        udp_calls: Family::default(),
        paced_waits: Family::default(),
        migrations: Family::default(),
    });
    &METRICS
}

/// Counts one datagram event (`tlsgate_quic_datagrams_total{what}`).
pub fn datagram(what: &'static str) {
    metrics()
        .datagrams
        .get_or_create(&WhatLabels {
            protocol: PROTOCOL,
            what,
        })
        .inc();
}

/// Counts one failed handshake.
pub fn handshake_failed(what: &'static str) {
    metrics()
        .handshake_failures
        .get_or_create(&WhatLabels {
            protocol: PROTOCOL,
            what,
        })
        .inc();
}

fn udp(direction: &'static str, datagrams: u64, calls: u64) {
    let labels = DirectionLabels {
        protocol: PROTOCOL,
        direction,
    };
    metrics().udp_datagrams.get_or_create(&labels).inc_by(datagrams);
    metrics().udp_calls.get_or_create(&labels).inc_by(calls);
}

/// Counts what a connection sent (at its end).
pub fn udp_sent(datagrams: u64, calls: u64) {
    udp("sent", datagrams, calls);
}

/// Counts a connection's waits for a paced packet's release time (at its end).
pub fn paced_waits(waits: u64) {
    metrics()
        .paced_waits
        .get_or_create(&ProtocolLabels { protocol: PROTOCOL })
        .inc_by(waits);
}

/// Counts a connection moving to its client's new address.
pub fn migrated() {
    metrics()
        .migrations
        .get_or_create(&ProtocolLabels { protocol: PROTOCOL })
        .inc();
}

/// Counts what an endpoint received (in batches, not per datagram).
pub fn udp_received(datagrams: u64, calls: u64) {
    udp("received", datagrams, calls);
}

/// Registers the QUIC metrics in `registry` (once, at start).
pub fn register(registry: &mut Registry) {
    let m = metrics();
    registry.register(
        "quic_handshakes",
        "Completed QUIC handshakes by site, resumption, 0-RTT and group",
        m.handshakes.clone(),
    );
    registry.register(
        "quic_handshake_failures",
        "QUIC handshakes that did not complete, by reason",
        m.handshake_failures.clone(),
    );
    registry.register(
        "quic_datagrams",
        "UDP datagrams handled without a connection: garbage, unknown connection (stateless reset), \
         retry, version negotiation, forwarded to their worker, shed",
        m.datagrams.clone(),
    );
    registry.register(
        "quic_lost_packets",
        "Packets QUIC declared lost, counted as each connection ends",
        m.lost_packets.clone(),
    );
    registry.register(
        "quic_rtt_seconds",
        "Smoothed round-trip time of each QUIC connection when it ends",
        m.rtt.clone(),
    );
    registry.register(
        "quic_udp_datagrams",
        "UDP datagrams of QUIC connections, sent (counted as each connection ends) and received",
        m.udp_datagrams.clone(),
    );
    registry.register(
        "quic_udp_calls",
        "System calls that sent or received them: with UDP GSO/GRO one call carries several",
        m.udp_calls.clone(),
    );
    registry.register(
        "quic_paced_waits",
        "Times a QUIC connection held a packet until its congestion controller's release time \
         (pacing; BBRv2 only), counted as each connection ends",
        m.paced_waits.clone(),
    );
    registry.register(
        "quic_migrations",
        "QUIC connections that moved to their client's new, validated address (a NAT rebinding, \
         or a migration the client started)",
        m.migrations.clone(),
    );
}
