//! Both ends of a handshake in one process: the gateway's server side, built from a parsed and
//! validated configuration file exactly as the gateway builds it (`SessionState::new`,
//! `TlsService::build`, `new_ssl`, tokio-boring's `accept`), and a plain BoringSSL client,
//! joined by tokio's in-memory duplex through a tap that can alter records on their way.

mod client;
mod failure;
mod server;
mod tap;

pub use client::{Client, ClientOpts};
pub use failure::Failure;
pub use server::{material, Gateway, Site};
use tap::pump;
pub use tap::{Edit, Record};

use boring::pkey::Id;
use boring::ssl::{SslSession, SslVersion, StatusType};
use std::time::Duration;
use tlsgate_tls::client_ffi;
use tlsgate_tls::HandshakeInfo;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

/// What the application sends once the handshake is done (0-RTT data when early data is on).
pub const PING: &[u8] = b"ping";
/// The server's answer (its write also flushes TLS 1.3 session tickets).
pub const PONG: &[u8] = b"pong";

/// One connection's client-side choices.
#[derive(Default)]
pub struct Conn {
    /// Session to offer.
    pub session: Option<SslSession>,
    /// Send [`PING`] as 0-RTT early data (needs a session that allows it).
    pub early_data: bool,
    /// Ask for an OCSP staple (status_request).
    pub status_request: bool,
    /// Alters client→server records (index counted from 0) on their way.
    pub to_server: Option<Edit>,
    /// Alters server→client records on their way.
    pub to_client: Option<Edit>,
}

/// What the client saw.
#[derive(Debug)]
pub struct ClientSide {
    pub version: Option<SslVersion>,
    pub resumed: bool,
    /// Key type of the certificate it was served (the session's, when resumed).
    pub peer_key: Option<Id>,
    pub ocsp: Option<Vec<u8>>,
    pub alpn: Option<Vec<u8>>,
    /// The handshake returned while still in early data ([`PING`] went as 0-RTT).
    pub early_sent: bool,
    /// The server accepted the 0-RTT data.
    pub early_accepted: bool,
    /// The server rejected it (the client sent [`PING`] again after the handshake).
    pub early_rejected: bool,
    pub reply: Vec<u8>,
}

/// What the server saw.
#[derive(Debug)]
pub struct ServerSide {
    /// The gateway's own summary of the handshake.
    pub info: HandshakeInfo,
    /// BoringSSL's reason for (not) accepting 0-RTT (`accepted`, `disabled`, `alpn_mismatch`...).
    pub early_reason: String,
    /// The site the gateway selected.
    pub site: Option<usize>,
    pub received: Vec<u8>,
    /// The server's connection still held its handshake configuration after the exchange.
    pub config_kept: bool,
}

/// Both ends of one connection.
#[derive(Debug)]
pub struct Outcome {
    pub client: Result<ClientSide, Failure>,
    pub server: Result<ServerSide, Failure>,
}

impl Outcome {
    /// Both sides, when both finished the exchange; panics with both stories otherwise.
    pub fn ok(self) -> (ClientSide, ServerSide) {
        match (self.client, self.server) {
            (Ok(c), Ok(s)) => {
                assert_eq!(c.reply, PONG, "client got the server's answer");
                assert_eq!(s.received, PING, "server got the client's data");
                (c, s)
            }
            (client, server) => {
                let story = |r: Result<(), Failure>| r.map_or_else(|f| f.text, |()| "fine".into());
                panic!(
                    "connection failed:\nclient: {}\nserver: {}",
                    story(client.map(drop)),
                    story(server.map(drop))
                )
            }
        }
    }
}

/// Runs one connection from `client` to `gateway` over memory; gives up after 10 s.
pub async fn connect(gateway: &Gateway, client: &Client, conn: Conn) -> Outcome {
    let (client_io, tap_client) = tokio::io::duplex(1 << 16);
    let (tap_server, server_io) = tokio::io::duplex(1 << 16);
    let (from_client, to_client) = tokio::io::split(tap_client);
    let (from_server, to_server) = tokio::io::split(tap_server);
    let c2s = pump(from_client, to_server, conn.to_server);
    let s2c = pump(from_server, to_client, conn.to_client);
    let run = async {
        let (c, s, (), ()) = tokio::join!(
            client_side(client, client_io, conn.session, conn.early_data, conn.status_request),
            server_side(gateway, server_io),
            c2s,
            s2c
        );
        Outcome { client: c, server: s }
    };
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("connection finished within 10 s")
}

async fn client_side(
    client: &Client,
    io: DuplexStream,
    session: Option<SslSession>,
    early_data: bool,
    status_request: bool,
) -> Result<ClientSide, Failure> {
    let setup = |e: boring::error::ErrorStack| Failure::other(format!("client setup: {e}"));
    let mut ssl = client
        .connector
        .configure()
        .map_err(setup)?
        .into_ssl("localhost")
        .map_err(setup)?;
    if status_request {
        ssl.set_status_type(StatusType::OCSP).map_err(setup)?;
    }
    if let Some(s) = &session {
        tlsgate_tls::set_client_session(&mut ssl, s).map_err(setup)?;
    }
    if early_data {
        client_ffi::set_early_data_enabled(&mut ssl, true);
    }
    let mut tls = tokio_boring::SslStreamBuilder::new(ssl, io)
        .connect()
        .await
        .map_err(|e| Failure::from_handshake(&e, "client handshake"))?;
    let early_sent = client_ffi::in_early_data(tls.ssl());
    let io_err = |what: &'static str| move |e: std::io::Error| Failure::from_io(&e, what);
    tls.write_all(PING).await.map_err(io_err("client write"))?;
    let mut reply = vec![0u8; PONG.len()];
    let mut early_rejected = false;
    if let Err(e) = tls.read_exact(&mut reply).await {
        if !early_rejected_error(&e) {
            return Err(Failure::from_io(&e, "client read"));
        }
        // As a browser does: the server refused the 0-RTT data, so send it again.
        early_rejected = true;
        client_ffi::reset_early_data_reject(tls.ssl_mut());
        tls.write_all(PING)
            .await
            .map_err(io_err("client write after 0-RTT reject"))?;
        tls.read_exact(&mut reply).await.map_err(io_err("client read"))?;
    }
    let ssl = tls.ssl();
    let side = ClientSide {
        version: ssl.version2(),
        resumed: ssl.session_reused(),
        peer_key: ssl.peer_certificate().and_then(|c| c.public_key().ok()).map(|k| k.id()),
        ocsp: ssl.ocsp_status().map(<[u8]>::to_vec),
        alpn: ssl.selected_alpn_protocol().map(<[u8]>::to_vec),
        early_sent,
        early_accepted: early_sent && client_ffi::early_data_accepted(ssl),
        early_rejected,
        reply,
    };
    // Read to the server's close_notify so every ticket it sent is processed.
    let mut rest = Vec::new();
    let _ = tls.read_to_end(&mut rest).await;
    let _ = tls.shutdown().await;
    Ok(side)
}

fn early_rejected_error(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<boring::ssl::Error>())
        .is_some_and(|s| s.code().as_raw() == client_ffi::ERROR_EARLY_DATA_REJECTED)
}

async fn server_side(gateway: &Gateway, io: DuplexStream) -> Result<ServerSide, Failure> {
    let ssl = gateway
        .service
        .new_ssl()
        .map_err(|e| Failure::other(format!("new_ssl: {e}")))?;
    let mut tls = tokio_boring::SslStreamBuilder::new(ssl, io)
        .accept()
        .await
        .map_err(|e| Failure::from_handshake(&e, "server handshake"))?;
    let info = HandshakeInfo::read(tls.ssl());
    let early_reason = client_ffi::early_data_reason(tls.ssl());
    let site = gateway.service.site_of(tls.ssl());
    let mut received = vec![0u8; PING.len()];
    tls.read_exact(&mut received)
        .await
        .map_err(|e| Failure::from_io(&e, "server read"))?;
    tls.write_all(PONG)
        .await
        .map_err(|e| Failure::from_io(&e, "server write"))?;
    let config_kept = client_ffi::handshake_config_kept(tls.ssl());
    let _ = tls.shutdown().await;
    Ok(ServerSide {
        info,
        early_reason,
        site,
        received,
        config_kept,
    })
}
