//! One probe connection: TCP connect, TLS handshake (offering a saved session, optionally with
//! 0-RTT), one GET over HTTP/1.1 or HTTP/2, and what BoringSSL says about all of it.

use super::args::ProbePlan;
use super::report::{ConnReport, Ocsp, Timings};
use crate::http::{parse_response, Parsed};
use crate::tls_opts::tcp_connect;
use anyhow::{bail, Context};
use boring::pkey::Id;
use boring::ssl::{ErrorCode, SslConnector, SslRef, SslSession, SslSessionCacheMode, SslVersion, StatusType};
use std::sync::{Arc, Mutex};
use std::time::{Instant, SystemTime};
use tlsgate_tls::client_ffi;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::timeout;

type Tls = tokio_boring::SslStream<TcpStream>;

/// Sessions the server sent: the newest one and how many arrived on the current connection.
#[derive(Default)]
pub struct SessionSlot {
    /// Newest session received.
    pub newest: Option<SslSession>,
    /// Sessions received since the last [`SessionSlot::take_count`].
    pub count: u32,
}

/// The TLS context of a probe and the session slot its callback fills.
pub struct Prober {
    connector: SslConnector,
    slot: Arc<Mutex<SessionSlot>>,
    plan: ProbePlan,
}

impl Prober {
    /// Builds the client context from the plan.
    pub fn new(plan: &ProbePlan) -> anyhow::Result<Self> {
        let a = &plan.args;
        let mut b = a.opts.connector(&plan.alpn_wire)?;
        b.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        let slot = Arc::new(Mutex::new(SessionSlot::default()));
        let s = slot.clone();
        let no_ticket = a.opts.no_ticket;
        b.set_new_session_callback(move |_ssl: &mut SslRef, session: SslSession| {
            let mut slot = s.lock().unwrap_or_else(|p| p.into_inner());
            slot.count += 1;
            // BoringSSL's NO_TICKET only concerns TLS 1.2; TLS 1.3 resumption is ticket-based, so
            // `--no-ticket` never offers a TLS 1.3 session again (as in `tlsgate bench`).
            if !(no_ticket && session.protocol_version() == SslVersion::TLS1_3) {
                slot.newest = Some(session);
            }
        });
        Ok(Self {
            connector: b.build(),
            slot,
            plan: plan.clone(),
        })
    }

    /// The newest session received, if any.
    pub fn newest_session(&self) -> Option<SslSession> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).newest.clone()
    }

    /// One connection; `offer` is the session to offer and where it came from.
    pub async fn probe(&self, index: usize, offer: Option<(SslSession, &'static str)>) -> ConnReport {
        let mut report = ConnReport::new(index);
        if let Some((s, from)) = &offer {
            report.session_offered = Some(from);
            report.offered_ticket = client_ffi::session_has_ticket(s);
            report.early_data.session_capable = client_ffi::session_early_data_capable(s);
        }
        self.slot.lock().unwrap_or_else(|p| p.into_inner()).count = 0;
        let budget = self.plan.args.opts.timeout * 3;
        match timeout(budget, self.run(&mut report, offer.map(|o| o.0))).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => report.error = Some(format!("{e:#}")),
            Err(_) => report.error = Some(format!("timed out after {}", humantime::format_duration(budget))),
        }
        let slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        report.sessions_received = slot.count;
        if slot.count > 0 {
            if let Some(s) = &slot.newest {
                report.new_session_ticket = client_ffi::session_has_ticket(s);
                report.new_session_early_data = client_ffi::session_early_data_capable(s);
            }
        }
        report
    }

    async fn run(&self, r: &mut ConnReport, offer: Option<SslSession>) -> anyhow::Result<()> {
        let plan = &self.plan;
        let t0 = Instant::now();
        let opts = &plan.args.opts;
        let tcp = timeout(opts.timeout, tcp_connect(plan.addr, opts.tfo))
            .await
            .context("TCP connect timed out")?
            .with_context(|| format!("cannot connect to {}", plan.addr))?;
        let _ = tcp.set_nodelay(true);
        let t_connect = t0.elapsed();
        let mut ssl = opts.ssl(&self.connector, plan.sni.as_deref(), &plan.host)?;
        ssl.set_status_type(StatusType::OCSP)?;
        if plan.early_data {
            client_ffi::set_early_data_enabled(&mut ssl, true);
        }
        if let Some(s) = &offer {
            tlsgate_tls::set_client_session(&mut ssl, s).context("SSL_set_session")?;
        }
        if let Some(list) = &plan.ech_config_list {
            ssl.set_ech_config_list(list)
                .context("--ech-config: not an ECHConfigList")?;
            r.ech.offered = true;
        }
        let mut tls = timeout(
            plan.args.opts.timeout,
            tokio_boring::SslStreamBuilder::new(ssl, tcp).connect(),
        )
        .await
        .context("TLS handshake timed out")?
        .map_err(|e| {
            r.ech.retry_configs = tlsgate_tls::ech::retry_configs(&e).map(|l| tlsgate_tls::ech::base64(&l));
            anyhow::anyhow!(opts.handshake_error(&e))
        })?;
        let t_handshake = t0.elapsed();
        r.early_data.offered = client_ffi::in_early_data(tls.ssl());
        let h2 = !r.early_data.offered && tls.ssl().selected_alpn_protocol() == Some(b"h2");
        let (status, hsts, ttfb) = if h2 {
            tls_info(r, tls.ssl());
            self.get_h2(tls, t0).await?
        } else {
            let out = self.get_h1(&mut tls, r, t0).await?;
            tls_info(r, tls.ssl());
            let _ = timeout(plan.args.opts.timeout, tls.shutdown()).await;
            out
        };
        r.http_status = Some(status);
        r.hsts = hsts;
        r.timings_us = Some(Timings {
            connect: micros(t_connect),
            handshake: micros(t_handshake - t_connect),
            ttfb: micros(ttfb),
            ttlb: micros(t0.elapsed()),
        });
        Ok(())
    }

    async fn get_h1(
        &self,
        tls: &mut Tls,
        r: &mut ConnReport,
        t0: Instant,
    ) -> anyhow::Result<(u16, Option<String>, std::time::Duration)> {
        let plan = &self.plan;
        let request = crate::args::build_request(&host_header(&plan.host, plan.port), &plan.path, &[], true)?;
        let mut buf = Vec::with_capacity(16 * 1024);
        let mut ttfb = None;
        timeout(plan.args.opts.timeout, tls.write_all(&request))
            .await
            .context("write timed out")?
            .context("cannot send the request")?;
        loop {
            if !buf.is_empty() {
                match parse_response(&buf, false) {
                    Ok(Parsed::Incomplete) => {}
                    Ok(Parsed::Interim { len }) => {
                        buf.drain(..len);
                        continue;
                    }
                    Ok(Parsed::Done { len, status, .. }) => {
                        return Ok((
                            status,
                            header(&buf[..len], "strict-transport-security"),
                            ttfb.unwrap_or_default(),
                        ));
                    }
                    Err(e) => bail!("bad HTTP response: {e}"),
                }
            }
            buf.reserve(16 * 1024);
            let read = timeout(plan.args.opts.timeout, tls.read_buf(&mut buf))
                .await
                .context("response timed out")?;
            match read {
                Ok(0) => {
                    return match parse_response(&buf, true) {
                        Ok(Parsed::Done { len, status, .. }) => Ok((
                            status,
                            header(&buf[..len], "strict-transport-security"),
                            ttfb.unwrap_or_default(),
                        )),
                        _ => bail!("connection closed before a complete response"),
                    }
                }
                Ok(_) => {
                    ttfb.get_or_insert_with(|| t0.elapsed());
                }
                Err(e) if early_data_rejected(&e) && !r.early_data.rejected => {
                    // The server refused the 0-RTT data: reset and send the request again.
                    r.early_data.rejected = true;
                    client_ffi::reset_early_data_reject(tls.ssl_mut());
                    buf.clear();
                    timeout(plan.args.opts.timeout, tls.write_all(&request))
                        .await
                        .context("write timed out")?
                        .context("cannot send the request again after 0-RTT was rejected")?;
                }
                Err(e) => return Err(e).context("cannot read the response"),
            }
        }
    }

    async fn get_h2(&self, tls: Tls, t0: Instant) -> anyhow::Result<(u16, Option<String>, std::time::Duration)> {
        use http_body_util::BodyExt;
        let plan = &self.plan;
        let io = hyper_util::rt::TokioIo::new(tls);
        let (mut send, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
            .await
            .context("HTTP/2 handshake failed")?;
        tokio::spawn(conn);
        let uri = format!("https://{}{}", host_header(&plan.host, plan.port), plan.path);
        let req = hyper::Request::get(uri).body(http_body_util::Empty::<bytes::Bytes>::new())?;
        let resp = timeout(plan.args.opts.timeout, send.send_request(req))
            .await
            .context("response timed out")?
            .context("HTTP/2 request failed")?;
        let ttfb = t0.elapsed();
        let status = resp.status().as_u16();
        let hsts = resp
            .headers()
            .get("strict-transport-security")
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
        timeout(plan.args.opts.timeout, resp.into_body().collect())
            .await
            .context("body timed out")?
            .context("cannot read the body")?;
        Ok((status, hsts, ttfb))
    }
}

/// Version, cipher, group, certificate, ALPN, staple, resumption: once the handshake is done
/// (over TCP from the stream; over QUIC from BoringSSL's handshake-done callback).
pub(super) fn tls_info(r: &mut ConnReport, ssl: &SslRef) {
    r.version = Some(ssl.version_str().to_string());
    r.cipher = ssl
        .current_cipher()
        .map(|c| c.standard_name().unwrap_or_else(|| c.name()).to_string());
    r.group = ssl.curve_name().map(str::to_string);
    // BoringSSL keeps the original handshake's algorithm in a resumed session; nothing was
    // signed on a resumption, so report none.
    r.sigalg = ssl
        .peer_signature_algorithm()
        .filter(|_| !ssl.session_reused())
        .map(|s| s.name().map_or_else(|| s.to_string(), str::to_string));
    r.alpn = ssl
        .selected_alpn_protocol()
        .map(|p| String::from_utf8_lossy(p).into_owned());
    r.resumed = ssl.session_reused();
    r.resumption = match (r.resumed, ssl.version2()) {
        (false, _) => "full",
        (true, Some(SslVersion::TLS1_3)) => "tls13_psk",
        (true, _) if r.offered_ticket => "ticket",
        (true, _) => "session_id",
    };
    r.early_data.accepted = r.early_data.offered && client_ffi::early_data_accepted(ssl);
    r.early_data.reason = client_ffi::early_data_reason(ssl);
    let chain: Vec<boring::x509::X509> = ssl
        .peer_cert_chain()
        .map(|c| c.iter().map(|x| x.to_owned()).collect())
        .unwrap_or_default();
    r.chain_certs = chain.len();
    r.chain_bytes = chain.iter().map(|c| c.to_der().map_or(0, |d| d.len())).sum();
    r.cert_from_session = r.resumed;
    let peer_key = ssl.peer_certificate().and_then(|c| c.public_key().ok());
    r.cert_type = peer_key.as_ref().map(|k| {
        match (k.id(), tlsgate_tls::mldsa::Level::of_id(k.id())) {
            (_, Some(level)) => level.display(),
            (Id::EC, _) => "ECDSA",
            (Id::RSA, _) => "RSA",
            (Id::ED25519, _) => "Ed25519",
            _ => "other",
        }
        .to_string()
    });
    r.signature_bytes = crate::probe::report::signature_bytes(r.sigalg.as_deref(), peer_key.as_deref());
    r.ocsp = ocsp(ssl.ocsp_status(), &chain);
    if r.ech.offered {
        r.ech.accepted = ssl.ech_accepted();
        r.ech.served_name = chain.first().and_then(|c| {
            let names = c.subject_alt_names()?;
            names.iter().find_map(|n| n.dnsname().map(str::to_string))
        });
    }
}

pub(super) fn micros(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// `Host:` value for host and port.
pub fn host_header(host: &str, port: u16) -> String {
    match (host.contains(':'), port) {
        (true, 443) => format!("[{host}]"),
        (true, p) => format!("[{host}]:{p}"),
        (false, 443) => host.to_string(),
        (false, p) => format!("{host}:{p}"),
    }
}

/// The value of header `name` in a response head (case-insensitive), if present.
pub fn header(response: &[u8], name: &str) -> Option<String> {
    let end = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    response[..end]
        .split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            let colon = line.iter().position(|&b| b == b':')?;
            line[..colon]
                .eq_ignore_ascii_case(name.as_bytes())
                .then(|| String::from_utf8_lossy(line[colon + 1..].trim_ascii()).into_owned())
        })
        .next()
}

fn early_data_rejected(e: &std::io::Error) -> bool {
    e.get_ref()
        .and_then(|inner| inner.downcast_ref::<boring::ssl::Error>())
        .is_some_and(|s| s.code() == ErrorCode::from_raw(client_ffi::ERROR_EARLY_DATA_REJECTED))
}

/// What the staple says, checked against the chain the server sent.
fn ocsp(staple: Option<&[u8]>, chain: &[boring::x509::X509]) -> Ocsp {
    let Some(der) = staple.filter(|d| !d.is_empty()) else {
        return Ocsp::default();
    };
    let mut out = Ocsp {
        present: true,
        bytes: der.len(),
        ..Ocsp::default()
    };
    let now = SystemTime::now();
    match tlsgate_tls::ocsp::OcspTarget::from_chain(chain) {
        Err(e) => {
            out.status = Some("unverified".into());
            out.detail = Some(e.to_string());
        }
        Ok(target) => match target.check(der, now) {
            Ok(staple) => {
                out.status = Some("good".into());
                out.age_s = Some(staple.age(now).as_secs());
                out.next_update_in_s = staple
                    .next_update
                    .map(|n| n.duration_since(now).unwrap_or_default().as_secs());
            }
            Err(rejection) => {
                use tlsgate_tls::ocsp::Rejection;
                out.status = Some(
                    match &rejection {
                        Rejection::Revoked(_) => "revoked",
                        Rejection::Expired(_) => "stale",
                        Rejection::Invalid(_) => "invalid",
                    }
                    .into(),
                );
                out.detail = Some(rejection.to_string());
            }
        },
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_headers() {
        let r = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nStrict-Transport-Security:  max-age=60 \r\n\r\n";
        assert_eq!(header(r, "strict-transport-security").as_deref(), Some("max-age=60"));
        assert_eq!(header(r, "content-length").as_deref(), Some("0"));
        assert_eq!(header(r, "x-none"), None);
        assert_eq!(header(b"HTTP/1.1 200 OK\r\n", "content-length"), None);
        assert_eq!(host_header("::1", 443), "[::1]");
        assert_eq!(host_header("a", 8443), "a:8443");
    }
}
