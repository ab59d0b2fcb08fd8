//! `tlsgate probe --h3`: one probe connection over QUIC (quiche, on the same BoringSSL as the
//! TCP probe): the QUIC and TLS handshake (offering the previous connection's session, the GET
//! sent as 0-RTT with `--early-data` when the session allows it), one GET over HTTP/3, and what
//! BoringSSL says about the handshake. quiche keeps the `SSL` to itself, so that is read in
//! BoringSSL's handshake-done callback, by the same code as over TCP ([`super::conn::tls_info`]).

use super::args::ProbePlan;
use super::conn::{micros, tls_info};
use super::report::{ConnReport, Timings};
use anyhow::{bail, Context};
use boring::ssl::{SslInfoCallbackMode, SslRef};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::net::UdpSocket;
use tokio::time::timeout;

use crate::quic::{H3_NO_ERROR, MAX_DATAGRAM};

/// The QUIC client of a probe: its configuration, the report of the connection under way (the
/// handshake-done callback fills its TLS fields), and the newest session received (quiche's
/// serialisation: the TLS session and the server's transport parameters, for 0-RTT).
pub struct QuicProber {
    config: quiche::Config,
    h3: quiche::h3::Config,
    current: Arc<Mutex<Option<ConnReport>>>,
    session: Option<Vec<u8>>,
    plan: ProbePlan,
}

impl QuicProber {
    /// Builds the client from the plan.
    pub fn new(plan: &ProbePlan) -> anyhow::Result<Self> {
        let a = &plan.args;
        if a.sess_in.is_some() || a.sess_out.is_some() {
            bail!("--sess-in and --sess-out hold TCP sessions (DER): not with --h3");
        }
        if plan.ech_config_list.is_some() {
            bail!("--ech-config is not offered over QUIC yet");
        }
        let mut ctx = a.opts.quic_context()?;
        let current: Arc<Mutex<Option<ConnReport>>> = Arc::default();
        let slot = current.clone();
        ctx.set_info_callback(move |ssl: &SslRef, mode, _| {
            if mode == SslInfoCallbackMode::HANDSHAKE_DONE {
                if let Some(r) = slot.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                    tls_info(r, ssl);
                }
            }
        });
        let config = crate::quic::client_config(ctx, &a.opts, 16, plan.early_data)?;
        let h3 = quiche::h3::Config::new().context("HTTP/3 configuration")?;
        Ok(Self {
            config,
            h3,
            current,
            session: None,
            plan: plan.clone(),
        })
    }

    /// Connection `index`, offering the newest session received, if any.
    pub async fn probe(&mut self, index: usize) -> ConnReport {
        let mut report = ConnReport::new(index);
        let offer = self.session.clone();
        if offer.is_some() {
            report.session_offered = Some("previous");
            report.offered_ticket = true;
            report.early_data.session_capable = self.plan.early_data;
        }
        *self.current.lock().unwrap_or_else(|p| p.into_inner()) = Some(report);
        let budget = self.plan.args.opts.timeout * 3;
        let outcome = timeout(budget, self.run(offer)).await;
        let mut report = self
            .current
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .unwrap_or_else(|| ConnReport::new(index));
        match outcome {
            Ok(Ok(run)) => {
                report.http_status = Some(run.status);
                report.hsts = run.hsts;
                report.timings_us = Some(run.timings);
                // quiche sends what 0-RTT carried again after a rejection.
                report.early_data.rejected = report.early_data.offered && !report.early_data.accepted;
                if let Some(session) = run.session {
                    report.sessions_received = 1;
                    report.new_session_ticket = true;
                    report.new_session_early_data = self.plan.early_data;
                    // `--no-ticket`: every connection a full handshake (as over TCP, where TLS
                    // 1.3 sessions are not offered again).
                    if !self.plan.args.opts.no_ticket {
                        self.session = Some(session);
                    }
                }
            }
            Ok(Err(e)) => report.error = Some(format!("{e:#}")),
            Err(_) => report.error = Some(format!("timed out after {}", humantime::format_duration(budget))),
        }
        report
    }

    async fn run(&mut self, offer: Option<Vec<u8>>) -> anyhow::Result<Run> {
        let plan = &self.plan;
        let peer = plan.addr;
        let t0 = Instant::now();
        let bind: SocketAddr = if peer.is_ipv4() {
            ([0, 0, 0, 0], 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let socket = UdpSocket::bind(bind).await.context("cannot open a UDP socket")?;
        socket
            .connect(peer)
            .await
            .with_context(|| format!("cannot reach {peer}"))?;
        let local = socket.local_addr()?;
        let mut scid = [0u8; quiche::MAX_CONN_ID_LEN];
        boring::rand::rand_bytes(&mut scid)?;
        let scid = quiche::ConnectionId::from_ref(&scid);
        let server_name = plan.sni.as_deref().unwrap_or(&plan.host);
        let mut conn = quiche::connect(Some(server_name), &scid, local, peer, &mut self.config)
            .context("cannot start the QUIC connection")?;
        if let Some(session) = &offer {
            conn.set_session(session).context("the saved session")?;
        }
        let request = [
            quiche::h3::Header::new(b":method", b"GET"),
            quiche::h3::Header::new(b":scheme", b"https"),
            quiche::h3::Header::new(
                b":authority",
                super::conn::host_header(&plan.host, plan.port).as_bytes(),
            ),
            quiche::h3::Header::new(b":path", plan.path.as_bytes()),
            quiche::h3::Header::new(b"user-agent", b"tlsgate-probe"),
        ];
        let mut out = vec![0u8; MAX_DATAGRAM];
        let mut inb = vec![0u8; MAX_DATAGRAM];
        let mut body = vec![0u8; 64 * 1024];
        let mut h3: Option<quiche::h3::Connection> = None;
        let mut run = Run::default();
        let (mut handshake, mut ttfb, mut done) = (None, None, false);
        loop {
            loop {
                match conn.send(&mut out) {
                    Ok((n, _)) => {
                        socket.send(&out[..n]).await.context("cannot send a datagram")?;
                    }
                    Err(quiche::Error::Done) => break,
                    Err(e) => bail!("QUIC: {e}"),
                }
            }
            if done || conn.is_closed() {
                break;
            }
            if handshake.is_none() && conn.is_established() {
                handshake = Some(t0.elapsed());
            }
            if h3.is_none() && (conn.is_established() || conn.is_in_early_data()) {
                // Noted before the handshake ends, so that the handshake-done callback judges
                // the 0-RTT.
                run_early(&self.current, conn.is_in_early_data());
                let mut c = quiche::h3::Connection::with_transport(&mut conn, &self.h3).context("HTTP/3")?;
                c.send_request(&mut conn, &request, true)
                    .context("cannot send the GET")?;
                h3 = Some(c);
                continue;
            }
            if let Some(c) = h3.as_mut() {
                loop {
                    match c.poll(&mut conn) {
                        Ok((_, quiche::h3::Event::Headers { list, .. })) => {
                            ttfb.get_or_insert_with(|| t0.elapsed());
                            let status = field(&list, b":status").and_then(|s| s.parse::<u16>().ok());
                            if let Some(status) = status.filter(|s| *s >= 200) {
                                run.status = status;
                                run.hsts = field(&list, b"strict-transport-security");
                            }
                        }
                        Ok((stream, quiche::h3::Event::Data)) => {
                            while c.recv_body(&mut conn, stream, &mut body).is_ok() {}
                        }
                        Ok((_, quiche::h3::Event::Finished)) => done = true,
                        Ok((_, quiche::h3::Event::Reset(code))) => {
                            bail!("the server reset the request (code {code:#x})")
                        }
                        Ok(_) => {}
                        Err(quiche::h3::Error::Done) => break,
                        Err(e) => bail!("HTTP/3: {e}"),
                    }
                }
                if done {
                    run.session = conn.session().map(<[u8]>::to_vec);
                    let _ = conn.close(true, H3_NO_ERROR, b"");
                    continue;
                }
            }
            let wait = conn.timeout().unwrap_or(Duration::from_secs(1));
            match timeout(wait, socket.recv(&mut inb)).await {
                Ok(Ok(n)) => {
                    let info = quiche::RecvInfo { from: peer, to: local };
                    if let Err(e) = conn.recv(&mut inb[..n], info) {
                        if e != quiche::Error::Done {
                            bail!("QUIC: {e}");
                        }
                    }
                }
                Ok(Err(e)) => bail!("cannot receive: {e}"),
                Err(_) => conn.on_timeout(),
            }
        }
        if !done {
            let why = conn
                .peer_error()
                .map(|e| {
                    format!(
                        "the server closed the connection (code {:#x}, {})",
                        e.error_code,
                        String::from_utf8_lossy(&e.reason)
                    )
                })
                .or_else(|| {
                    conn.local_error()
                        .map(|e| format!("closed (local code {:#x})", e.error_code))
                })
                .unwrap_or_else(|| "the connection closed before a complete response".into());
            bail!(why);
        }
        let handshake = handshake.unwrap_or_default();
        run.timings = Timings {
            connect: 0,
            handshake: micros(handshake),
            ttfb: micros(ttfb.unwrap_or_default()),
            ttlb: micros(t0.elapsed()),
        };
        Ok(run)
    }
}

/// What the exchange of one connection gave.
#[derive(Default)]
struct Run {
    status: u16,
    hsts: Option<String>,
    timings: Timings,
    session: Option<Vec<u8>>,
}

/// Notes in the report under way whether the GET goes as 0-RTT.
fn run_early(current: &Mutex<Option<ConnReport>>, early: bool) {
    if let Some(r) = current.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
        r.early_data.offered = early;
    }
}

/// A field of an HTTP/3 head, as text.
fn field(list: &[quiche::h3::Header], name: &[u8]) -> Option<String> {
    use quiche::h3::NameValue;
    list.iter()
        .find(|h| h.name() == name)
        .map(|h| String::from_utf8_lossy(h.value()).into_owned())
}
