//! `tlsgate probe HOST:PORT`: a diagnostic in the spirit of `openssl s_client -reconnect`.
//! Connects `-n` times, one after the other, each time offering the newest session received
//! (or the one loaded with `--sess-in`), and reports what each handshake did, as BoringSSL
//! reports it; `--expect-*` flags turn the report into a check with an exit status.

pub mod args;
pub mod conn;
pub mod quic;
pub mod report;

pub use args::{ProbeArgs, ProbePlan};
pub use report::ProbeReport;

use anyhow::{bail, Context};
use boring::ssl::SslSession;

/// Runs the probe and returns its report (printing nothing).
pub fn probe(plan: &ProbePlan) -> anyhow::Result<ProbeReport> {
    let a = &plan.args;
    if a.h3 {
        return probe_h3(plan);
    }
    if plan.early_data && crate::tls_opts::alpn_offers(&plan.alpn_wire, b"h2") {
        bail!("--early-data sends an HTTP/1.1 request: offer --alpn http/1.1 only");
    }
    let mut offer = match &a.sess_in {
        Some(path) => {
            let der = std::fs::read(path).with_context(|| format!("--sess-in {}: cannot read", path.display()))?;
            let session = SslSession::from_der(&der)
                .with_context(|| format!("--sess-in {}: not a DER session", path.display()))?;
            Some((session, "file"))
        }
        None => None,
    };
    let prober = conn::Prober::new(plan)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let mut conns = Vec::with_capacity(a.connections);
    for i in 1..=a.connections {
        let report = rt.block_on(prober.probe(i, offer.take()));
        conns.push(report);
        offer = prober.newest_session().map(|s| (s, "previous"));
    }
    let mut session_saved = None;
    if let Some(path) = &a.sess_out {
        let session = prober
            .newest_session()
            .context("--sess-out: the server sent no session to save")?;
        let der = session.to_der().context("cannot encode the session")?;
        std::fs::write(path, der).with_context(|| format!("--sess-out {}: cannot write", path.display()))?;
        session_saved = Some(path.display().to_string());
    }
    let expectations = report::expectations(plan, &conns);
    let ok = conns.iter().all(|c| c.error.is_none()) && expectations.iter().all(|e| e.ok);
    Ok(ProbeReport {
        target: a.target.clone(),
        addr: plan.addr.to_string(),
        sni: plan.sni.clone(),
        connections: conns,
        expectations,
        ok,
        session_saved,
    })
}

/// Runs the probe from command-line options, prints the report (text or `--json`) and says on
/// stderr what failed. Returns whether everything held.
pub fn run_and_report(args: &ProbeArgs) -> anyhow::Result<bool> {
    let plan = args.plan()?;
    let report = probe(&plan)?;
    if args.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.to_text());
    }
    for c in &report.connections {
        if let Some(e) = &c.error {
            eprintln!("probe: connection {} failed: {e}", c.index);
        }
    }
    for e in report.expectations.iter().filter(|e| !e.ok) {
        eprintln!("probe: expectation {} failed: {}", e.flag, e.message);
    }
    Ok(report.ok)
}

/// [`probe`] over QUIC and HTTP/3 (`--h3`): each connection offers the previous one's session.
fn probe_h3(plan: &ProbePlan) -> anyhow::Result<ProbeReport> {
    let mut prober = quic::QuicProber::new(plan)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let conns: Vec<_> = (1..=plan.args.connections)
        .map(|i| rt.block_on(prober.probe(i)))
        .collect();
    let expectations = report::expectations(plan, &conns);
    let ok = conns.iter().all(|c| c.error.is_none()) && expectations.iter().all(|e| e.ok);
    Ok(ProbeReport {
        target: plan.args.target.clone(),
        addr: format!("{} (UDP)", plan.addr),
        sni: plan.sni.clone(),
        connections: conns,
        expectations,
        ok,
        session_saved: None,
    })
}
