//! `--lean`: the load loop of [`crate::lean`]: each operation a TCP connection, a full TLS 1.3
//! handshake done with the least client work and one request, recorded like `--new-conn` (the
//! request's latency counts from before the connect, or from its intended start under `--rate`).

use super::{connect_tcp, count_error, pace, record_outcome, Pacer, Response, Shared};
use crate::lean::{exchange, handshake, Lean, LeanError, Records};
use crate::report::{ErrorKind, Stats};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::time::timeout;

/// One connection slot of a thread sharing `lean`.
pub(super) async fn connection(sh: Arc<Shared>, st: Rc<RefCell<Stats>>, lean: Rc<Lean>, index: usize) {
    let mut pacer = Pacer::new(&sh, index, sh.plan.connections);
    let mut records = Records::default();
    loop {
        let due = pace(&mut pacer).await;
        if !sh.claim() {
            return;
        }
        once(&sh, &st, &lean, &mut records, due.unwrap_or_else(Instant::now)).await;
    }
}

/// One connection: connect, handshake, request, read to the server's close.
async fn once(sh: &Shared, st: &RefCell<Stats>, lean: &Lean, records: &mut Records, started: Instant) {
    let limit = sh.plan.opts.timeout;
    let Some((mut tcp, t1)) = connect_tcp(sh, st).await else {
        return;
    };
    records.clear();
    let est = match timeout(limit, handshake(lean, &mut tcp, records)).await {
        Ok(Ok(est)) => est,
        Ok(Err(e)) => {
            st.borrow_mut().error_with(ErrorKind::Handshake, &e);
            count_error(sh);
            return;
        }
        Err(_) => {
            st.borrow_mut().error(ErrorKind::Timeout);
            count_error(sh);
            return;
        }
    };
    {
        let mut st = st.borrow_mut();
        st.record_handshake(
            t1.elapsed(),
            false,
            false,
            ("TLSv1.3", "TLS_AES_128_GCM_SHA256", "X25519"),
        );
        st.record_sigalg(scheme_name(est.signature_scheme, est.delegated_credential));
    }
    if let Some(p) = &sh.progress {
        p.handshakes.fetch_add(1, Ordering::Relaxed);
    }
    let outcome = timeout(limit, exchange(est, &mut tcp, records, &sh.plan.request))
        .await
        .map(|r| {
            r.map(|r| Response {
                first_byte: r.first_byte,
                status: r.status,
                len: r.len,
            })
            .map_err(|e| (error_kind(&e), e.to_string()))
        });
    record_outcome(sh, st, started, outcome);
}

/// Where a failure after the handshake is counted.
fn error_kind(e: &LeanError) -> ErrorKind {
    match e {
        LeanError::Http(_) => ErrorKind::Http,
        LeanError::Closed => ErrorKind::Closed,
        _ => ErrorKind::Read,
    }
}

/// The name of a TLS 1.3 signature scheme the lean hello offers; one made with a delegated
/// credential's key says so.
fn scheme_name(scheme: Option<u16>, delegated: bool) -> &'static str {
    match scheme {
        Some(0x0403) if delegated => "ecdsa_secp256r1_sha256 (delegated credential)",
        Some(_) if delegated => "unknown (delegated credential)",
        Some(0x0403) => "ecdsa_secp256r1_sha256",
        Some(0x0804) => "rsa_pss_rsae_sha256",
        Some(0x0401) => "rsa_pkcs1_sha256",
        Some(_) => "unknown",
        None => "none",
    }
}
