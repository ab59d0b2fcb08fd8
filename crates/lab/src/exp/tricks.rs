//! tricks: the latency tricks of seeds 001/003 measured in RTTs, on a slow lossy link and a fast
//! one. Each row compares a baseline with the trick by time to first byte (TTFB, from the start
//! of the TCP connect) and states the RTTs the trick should save and the RTTs it saved (p50).
//!
//! Rows: dynamic vs fixed 16 KB records (64 KiB response), TCP Fast Open (bench --tfo), full vs
//! resumed handshakes (TLS 1.2 and 1.3), TLS 1.2 vs 1.3, TLS 1.3 resumed vs resumed with 0-RTT,
//! and an OCSP staple on/off (bytes and handshake time; the client-side OCSP lookup a staple
//! replaces is not emulated).
//!
//! Seed 003's per-message table: fresh TLS 1.2 full handshakes against the `plain` and `staple`
//! sites with the forwarder's tap on; [`crate::handshake_timeline`] turns each connection's
//! packets into the delivery time of every handshake message, aggregated per message
//! ([`MessageRow`], [`OcspSummary`]).

pub use super::tricks_model::{Config, MessageRow, OcspSummary, Trick};
use super::{tricks_report, Network, RunOpts};
use crate::client::{bench_new_conn, probe, BenchOpts, ConnSample, ProbeOpts};
use crate::exp::ttlb_pq::tempdir;
use crate::gateway::{Gateway, GatewaySpec, Site, LAB_HANDSHAKE_TIMEOUT_S};
use crate::handshake_timeline::{timelines, Side, Timeline};
use crate::report::{write_csv, write_json, Pcts};
use crate::{Lab, LinkSpec};
use anyhow::Context;
use serde::Serialize;
use std::path::Path;
use std::time::{Duration, SystemTime};
use tlsgate_tls::pki::{ocsp_response, CertSpec, Certified, KeyKind, OcspStatus};

/// Protocol order of the TLS 1.2 full handshake: the tie-break when messages arrive together.
const ORDER: [(&str, Side); 16] = [
    ("SYN", Side::ClientToServer),
    ("SYN-ACK", Side::ServerToClient),
    ("ACK", Side::ClientToServer),
    ("ClientHello", Side::ClientToServer),
    ("ServerHello", Side::ServerToClient),
    ("Certificate", Side::ServerToClient),
    ("CertificateStatus", Side::ServerToClient),
    ("ServerKeyExchange", Side::ServerToClient),
    ("ServerHelloDone", Side::ServerToClient),
    ("ClientKeyExchange", Side::ClientToServer),
    ("ChangeCipherSpec", Side::ClientToServer),
    ("Finished", Side::ClientToServer),
    ("ChangeCipherSpec", Side::ServerToClient),
    ("Finished", Side::ServerToClient),
    ("ApplicationData", Side::ClientToServer),
    ("ApplicationData", Side::ServerToClient),
];

/// Per-message rows, staple off vs on, ordered by p50 delivery time (then protocol order).
pub fn message_rows(net: &Network, off: &[Timeline], on: &[Timeline]) -> Vec<MessageRow> {
    let mut keys: Vec<(String, Side)> = vec![];
    for e in off.iter().chain(on).flat_map(|t| &t.events) {
        if !keys.iter().any(|(n, d)| *n == e.name && *d == e.dir) {
            keys.push((e.name.clone(), e.dir));
        }
    }
    let col = |tl: &[Timeline], name: &str, dir: Side| -> (Pcts, f64) {
        let ev: Vec<_> = tl.iter().filter_map(|t| t.find(name, dir)).collect();
        let bytes: Vec<f64> = ev.iter().map(|e| e.bytes as f64).collect();
        (
            Pcts::of(&ev.iter().map(|e| e.t_ms).collect::<Vec<_>>()),
            crate::measure::percentile(&bytes, 50.0),
        )
    };
    let mut rows: Vec<(usize, MessageRow)> = keys
        .into_iter()
        .map(|(name, dir)| {
            let (a, ab) = col(off, &name, dir);
            let (b, bb) = col(on, &name, dir);
            let rank = ORDER
                .iter()
                .position(|(n, d)| *n == name && *d == dir)
                .unwrap_or(ORDER.len());
            let row = MessageRow {
                network: net.name.clone(),
                rtt_ms: net.rtt_ms,
                dir: dir.arrow().into(),
                message: name,
                n_off: a.n,
                n_on: b.n,
                bytes_off: ab,
                bytes_on: bb,
                p50_off_ms: a.p50,
                p50_on_ms: b.p50,
                p90_off_ms: a.p90,
                p90_on_ms: b.p90,
                delta_p50_ms: b.p50 - a.p50,
            };
            (rank, row)
        })
        .collect();
    let key = |r: &MessageRow| {
        if r.p50_on_ms.is_finite() {
            r.p50_on_ms
        } else {
            r.p50_off_ms
        }
    };
    rows.sort_by(|(ra, a), (rb, b)| key(a).total_cmp(&key(b)).then(ra.cmp(rb)));
    rows.into_iter().map(|(_, r)| r).collect()
}

fn networks(quick: bool) -> Vec<Network> {
    let _ = quick;
    vec![
        Network::new("slow-lossy-100ms-2m-1pct", 100.0, 2.0, 0.01),
        Network::new("fast-20ms-1g", 20.0, 1000.0, 0.0),
    ]
}

/// One event of one captured connection (`tricks-timelines.csv`).
#[derive(Debug, Clone, Serialize)]
pub struct TimelineRow {
    /// Network.
    pub network: String,
    /// `ocsp12-off` / `ocsp12-stapled`.
    pub config: String,
    /// 1-based connection number within the configuration.
    pub connection: usize,
    /// Message.
    pub message: String,
    /// `c→s` / `s→c`.
    pub dir: String,
    /// Delivery of its last byte, ms after the SYN's delivery.
    pub t_ms: f64,
    /// Bytes.
    pub bytes: usize,
}

struct Env<'a> {
    opts: &'a RunOpts,
    lab: &'a Lab,
    work: &'a Path,
    net: &'a Network,
    configs: Vec<Config>,
    samples: Vec<serde_json::Value>,
}

impl Env<'_> {
    /// Runs `runs` probes of `po` against `addr`; keeps the samples whose index is in `keep`.
    fn probe(
        &mut self,
        label: &str,
        addr: std::net::SocketAddr,
        po: &ProbeOpts,
        runs: usize,
        keep: &[usize],
        check: fn(&ConnSample) -> bool,
    ) -> anyhow::Result<()> {
        let mut got: Vec<ConnSample> = vec![];
        let mut bytes = 0u64;
        for _ in 0..runs {
            let (_, b0) = self.lab.stats();
            let s = probe(&self.opts.exe, &self.lab.a, addr, po)?;
            let (_, b1) = self.lab.stats();
            bytes += b1.since(&b0).tx_bytes / s.len().max(1) as u64;
            got.extend(s.into_iter().filter(|c| keep.contains(&c.index)));
        }
        for s in &got {
            self.samples
                .push(serde_json::json!({ "network": self.net.name, "config": label, "sample": s }));
        }
        let ok: Vec<&ConnSample> = got.iter().filter(|c| c.error.is_none()).collect();
        let col = |f: fn(&ConnSample) -> f64| Pcts::of(&ok.iter().map(|c| f(c)).collect::<Vec<_>>());
        let ttfb = col(|c| c.ttfb_ms);
        self.configs.push(Config {
            network: self.net.name.clone(),
            rtt_ms: self.net.rtt_ms,
            label: label.into(),
            ttfb,
            ttlb: col(|c| c.ttlb_ms),
            handshake: col(|c| c.connect_ms + c.handshake_ms),
            ttfb_rtts: ttfb.p50 / self.net.rtt_ms,
            down_bytes: bytes / runs.max(1) as u64,
            as_labelled: format!("{}/{}", ok.iter().filter(|c| check(c)).count(), got.len()),
        });
        Ok(())
    }

    fn bench(&mut self, label: &str, gw: &Gateway, n: usize, tfo: bool, groups: &str) -> anyhow::Result<()> {
        let url = format!("https://plain.lab:{}/n/0/", gw.addr.port());
        let o = BenchOpts {
            url: &url,
            addr: gw.addr,
            sni: "plain.lab",
            n,
            tfo,
            groups: Some(groups),
        };
        let r = bench_new_conn(&self.opts.exe, &self.lab.a, self.work, &o)?;
        self.samples
            .push(serde_json::json!({ "network": self.net.name, "config": label, "bench": r }));
        let p = |x: f64| Pcts {
            n: r.count as usize,
            min: f64::NAN,
            p50: x,
            p75: f64::NAN,
            p90: f64::NAN,
            max: f64::NAN,
        };
        let mut ttfb = p(r.ttfb_p50_ms);
        ttfb.p90 = r.ttfb_p90_ms;
        self.configs.push(Config {
            network: self.net.name.clone(),
            rtt_ms: self.net.rtt_ms,
            label: label.into(),
            ttfb,
            ttlb: p(r.ttlb_p50_ms),
            handshake: p(f64::NAN),
            ttfb_rtts: r.ttfb_p50_ms / self.net.rtt_ms,
            down_bytes: 0,
            as_labelled: format!("{} ok, {} errors", r.count, r.errors),
        });
        Ok(())
    }

    fn get(&self, label: &str) -> Option<&Config> {
        self.configs
            .iter()
            .rev()
            .find(|c| c.label == label && c.network == self.net.name)
    }
}

/// Runs the experiment; returns the tricks (also written under `opts.out`).
pub fn run(opts: &RunOpts) -> anyhow::Result<Vec<Trick>> {
    std::fs::create_dir_all(&opts.out)?;
    let work = tempdir()?;
    let sites = pki(&work)?;
    let cacert = work.join("ca.pem");
    let lab = Lab::new(LinkSpec::default(), LinkSpec::default())?;
    let bodies = vec![0, 64 * 1024];
    let mk = |port, admin, dynamic| GatewaySpec {
        port,
        admin_port: admin,
        dynamic_records: dynamic,
        early_data: true,
        tcp_fastopen: 256,
        sites: sites.clone(),
        bodies: bodies.clone(),
        handshake_timeout_s: Some(LAB_HANDSHAKE_TIMEOUT_S),
        http3: false,
        quic_congestion_control: None,
    };
    let dynamic = Gateway::start(&opts.exe, &lab.b, &work, "dynamic", &mk(443, 9090, true))?;
    let fixed = Gateway::start(&opts.exe, &lab.b, &work, "fixed", &mk(444, 9091, false))?;
    wait_for_staple(opts, &lab, &dynamic, &cacert)?;
    let mut tricks = vec![];
    let mut configs = vec![];
    let mut samples = vec![];
    let (mut message_table, mut ocsp_summaries, mut timeline_rows) = (vec![], vec![], vec![]);
    for net in networks(opts.quick) {
        net.apply(&lab)?;
        lab.set_initcwnd(Some(10))?;
        let n = opts.samples(false);
        opts.log(&format!("{}: {n} samples per configuration", net.name));
        let mut env = Env {
            opts,
            lab: &lab,
            work: &work,
            net: &net,
            configs: vec![],
            samples: vec![],
        };
        let base = ProbeOpts {
            sni: "plain.lab".into(),
            path: "/n/0/".into(),
            connections: 1,
            cacert: Some(cacert.clone()),
            ..ProbeOpts::default()
        };
        let all = |_: &ConnSample| true;
        // Records: fresh full TLS 1.3 handshakes, 64 KiB response.
        let big = ProbeOpts {
            path: "/n/65536/".into(),
            connections: n,
            no_ticket: true,
            ..base.clone()
        };
        env.probe(
            "records-fixed-16k",
            fixed.addr,
            &big,
            1,
            &(1..=n).collect::<Vec<_>>(),
            all,
        )?;
        env.probe(
            "records-dynamic",
            dynamic.addr,
            &big,
            1,
            &(1..=n).collect::<Vec<_>>(),
            all,
        )?;
        // Versions and resumption: each run = a full handshake, then a resumed one.
        for (v, early) in [("1.2", false), ("1.3", false), ("1.3", true)] {
            let po = ProbeOpts {
                tls: Some(v.into()),
                connections: 2,
                early_data: early,
                ..base.clone()
            };
            let tag = if early {
                "tls13-0rtt".to_string()
            } else {
                format!("tls{}", v.replace('.', ""))
            };
            // A run of one connection is a full handshake (each probe process starts without a
            // session); the resumed ones come second in runs of two.
            if !early {
                let single = ProbeOpts {
                    connections: 1,
                    ..po.clone()
                };
                env.probe(&format!("{tag}-full"), dynamic.addr, &single, n, &[1], |c| !c.resumed)?;
                env.probe(&format!("{tag}-resumed"), dynamic.addr, &po, n, &[2], |c| c.resumed)?;
            } else {
                env.probe(&tag, dynamic.addr, &po, n, &[2], |c| c.early_data_accepted)?;
            }
            // Runs of two: the second connection's bytes are the run's minus a full handshake's.
            let full = env
                .get(&format!("tls{}-full", v.replace('.', "")))
                .map_or(0, |c| c.down_bytes);
            if let Some(c) = env.configs.last_mut() {
                c.down_bytes = (2 * c.down_bytes).saturating_sub(full);
            }
        }
        // OCSP staple.
        let full13 = ProbeOpts {
            tls: Some("1.3".into()),
            connections: n,
            no_ticket: true,
            ..base.clone()
        };
        env.probe(
            "ocsp-off",
            dynamic.addr,
            &full13,
            1,
            &(1..=n).collect::<Vec<_>>(),
            |c| !c.stapled,
        )?;
        let staple = ProbeOpts {
            sni: "staple.lab".into(),
            ..full13
        };
        env.probe(
            "ocsp-stapled",
            dynamic.addr,
            &staple,
            1,
            &(1..=n).collect::<Vec<_>>(),
            |c| c.stapled,
        )?;
        // Seed 003's per-message table: fresh TLS 1.2 full handshakes (one connection per probe
        // process: no session to offer), staple off and on, every packet captured.
        let full12 = ProbeOpts {
            tls: Some("1.2".into()),
            connections: 1,
            no_ticket: true,
            ..base.clone()
        };
        let mut tl = vec![];
        let mut dropped = 0;
        for (label, sni) in [("ocsp12-off", "plain.lab"), ("ocsp12-stapled", "staple.lab")] {
            let po = ProbeOpts {
                sni: sni.into(),
                ..full12.clone()
            };
            lab.start_capture();
            let check: fn(&ConnSample) -> bool = if sni == "plain.lab" {
                |c| !c.stapled && !c.resumed
            } else {
                |c| c.stapled && !c.resumed
            };
            let r = env.probe(label, dynamic.addr, &po, n, &[1], check);
            let cap = lab.take_capture();
            r?;
            dropped += cap.dropped;
            let t: Vec<Timeline> = timelines(&cap.packets)
                .into_iter()
                .filter(|t| t.server == dynamic.addr)
                .collect();
            for (i, t) in t.iter().enumerate() {
                env.samples.push(serde_json::json!({
                    "network": net.name, "config": label, "connection": i + 1, "timeline": t
                }));
                for e in &t.events {
                    timeline_rows.push(TimelineRow {
                        network: net.name.clone(),
                        config: label.into(),
                        connection: i + 1,
                        message: e.name.clone(),
                        dir: e.dir.arrow().into(),
                        t_ms: e.t_ms,
                        bytes: e.bytes,
                    });
                }
            }
            tl.push(t);
        }
        let (off, on) = (&tl[0], &tl[1]);
        let with = |v: &[Timeline]| {
            v.iter()
                .filter(|t| t.find("CertificateStatus", Side::ServerToClient).is_some())
                .count()
        };
        let done = |v: &[Timeline]| {
            Pcts::of(
                &v.iter()
                    .filter_map(|t| t.find("Finished", Side::ServerToClient))
                    .map(|e| e.t_ms)
                    .collect::<Vec<_>>(),
            )
        };
        let status_bytes: Vec<f64> = on
            .iter()
            .filter_map(|t| t.find("CertificateStatus", Side::ServerToClient))
            .map(|e| e.bytes as f64)
            .collect();
        let down = |l: &str| env.get(l).map_or(0, |c| c.down_bytes);
        ocsp_summaries.push(OcspSummary {
            network: net.name.clone(),
            rtt_ms: net.rtt_ms,
            conns_off: off.len(),
            conns_on: on.len(),
            with_status_off: with(off),
            with_status_on: with(on),
            status_bytes: crate::measure::percentile(&status_bytes, 50.0),
            down_bytes_off: down("ocsp12-off"),
            down_bytes_on: down("ocsp12-stapled"),
            handshake_p50_off_ms: done(off).p50,
            handshake_p50_on_ms: done(on).p50,
            handshake_p90_off_ms: done(off).p90,
            handshake_p90_on_ms: done(on).p90,
            capture_dropped: dropped,
        });
        message_table.extend(message_rows(&net, off, on));
        // TCP Fast Open (bench: fresh connections, no resumption; the first one fetches the cookie).
        // With X25519MLKEM768 the ClientHello (~1.3 KB key share) no longer fits in the SYN.
        for (g, tag) in [("X25519", "x25519"), ("X25519MLKEM768", "mlkem")] {
            env.bench(&format!("tfo-off-{tag}"), &dynamic, n + 1, false, g)?;
            env.bench(&format!("tfo-on-{tag}"), &dynamic, n + 1, true, g)?;
        }

        let rows: [(&str, &str, &str, f64, &str); 8] = [
            ("dynamic vs fixed 16 KB records (64 KiB)", "records-fixed-16k", "records-dynamic", 1.0, "up to 1 RTT: the first byte needs the whole first record; a 16 KB record costs its serialization, and a round trip when it exceeds the congestion window (which grows during the handshake)"),
            ("TCP Fast Open, X25519", "tfo-off-x25519", "tfo-on-x25519", 1.0, "ClientHello in the SYN (bench --tfo, cookie from the first connection)"),
            ("TCP Fast Open, X25519MLKEM768", "tfo-off-mlkem", "tfo-on-mlkem", 1.0, "the hybrid ClientHello exceeds the SYN's MSS: the rest waits for the SYN-ACK"),
            ("TLS 1.2 resumed vs full", "tls12-full", "tls12-resumed", 1.0, "abbreviated handshake: 1 RTT instead of 2"),
            ("TLS 1.3 resumed vs full", "tls13-full", "tls13-resumed", 0.0, "both 1-RTT; resumption saves the certificate bytes and signature"),
            ("TLS 1.3 vs TLS 1.2 (full)", "tls12-full", "tls13-full", 1.0, "1-RTT handshake"),
            ("TLS 1.3 0-RTT vs resumed", "tls13-resumed", "tls13-0rtt", 1.0, "request in the first flight"),
            ("OCSP staple on vs off", "ocsp-off", "ocsp-stapled", 0.0, "adds bytes to the handshake; saves the client's own OCSP lookup (≥ 1 RTT to the CA's responder, not emulated)"),
        ];
        for (name, b, t, exp, note) in rows {
            let (Some(bc), Some(tc)) = (env.get(b), env.get(t)) else {
                continue;
            };
            let mut note = note.to_string();
            if b.starts_with("ocsp") || b.starts_with("tls1") {
                note = format!("{note}; bytes ↓ {} → {}", bc.down_bytes, tc.down_bytes);
            }
            tricks.push(Trick {
                network: net.name.clone(),
                trick: name.into(),
                baseline: b.into(),
                with_trick: t.into(),
                expected_rtts_saved: exp,
                measured_rtts_saved: (bc.ttfb.p50 - tc.ttfb.p50) / net.rtt_ms,
                baseline_ttfb_p50_ms: bc.ttfb.p50,
                trick_ttfb_p50_ms: tc.ttfb.p50,
                baseline_ttlb_p50_ms: bc.ttlb.p50,
                trick_ttlb_p50_ms: tc.ttlb.p50,
                note,
            });
        }
        configs.extend(env.configs);
        samples.extend(env.samples);
    }
    drop((dynamic, fixed, lab));
    write_csv(&opts.out.join("tricks.csv"), &tricks)?;
    write_csv(&opts.out.join("tricks-ocsp-messages.csv"), &message_table)?;
    write_csv(&opts.out.join("tricks-timelines.csv"), &timeline_rows)?;
    write_json(
        &opts.out.join("tricks.json"),
        &serde_json::json!({
            "tricks": tricks, "configs": configs, "ocsp_messages": message_table,
            "ocsp_summary": ocsp_summaries, "samples": samples
        }),
    )?;
    std::fs::write(
        opts.out.join("tricks.md"),
        tricks_report::markdown(&tricks, &configs, &message_table, &ocsp_summaries, opts),
    )?;
    let _ = std::fs::remove_dir_all(&work);
    Ok(tricks)
}

/// CA, a plain site and a stapling site (chain = leaf + CA, the issuer the staple needs).
fn pki(dir: &Path) -> anyhow::Result<Vec<Site>> {
    let ca = Certified::issue(&CertSpec::ca("tlsgate lab tricks CA", KeyKind::EcdsaP256, 30), None)?;
    std::fs::write(dir.join("ca.pem"), &ca.cert_pem)?;
    let mut sites = vec![];
    for name in ["plain", "staple"] {
        let leaf = Certified::issue(
            &CertSpec::leaf(&[&format!("{name}.lab")], KeyKind::EcdsaP256, 30),
            Some(&ca),
        )?;
        let chain = dir.join(format!("{name}.pem"));
        let key = dir.join(format!("{name}.key"));
        std::fs::write(&chain, format!("{}{}", leaf.cert_pem, ca.cert_pem))?;
        std::fs::write(&key, &leaf.key_pem)?;
        let ocsp_file = if name == "staple" {
            let now = SystemTime::now();
            let der = ocsp_response(
                &leaf.cert_pem,
                &ca,
                OcspStatus::Good,
                now - Duration::from_secs(60),
                Some(now + Duration::from_secs(86_400)),
            )?;
            let f = dir.join("staple.ocsp.der");
            std::fs::write(&f, der)?;
            Some(f)
        } else {
            None
        };
        sites.push(Site {
            name: name.into(),
            chain,
            key,
            ocsp_file,
            extra: vec![],
        });
    }
    Ok(sites)
}

fn wait_for_staple(opts: &RunOpts, lab: &Lab, gw: &Gateway, ca: &Path) -> anyhow::Result<()> {
    let po = ProbeOpts {
        sni: "staple.lab".into(),
        path: "/n/0/".into(),
        connections: 1,
        no_ticket: true,
        cacert: Some(ca.into()),
        ..ProbeOpts::default()
    };
    for _ in 0..50 {
        if probe(&opts.exe, &lab.a, gw.addr, &po)?
            .first()
            .is_some_and(|c| c.stapled)
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err(anyhow::anyhow!("the gateway never stapled")).context(std::fs::read_to_string(&gw.log).unwrap_or_default())
}
