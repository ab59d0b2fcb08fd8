//! Reading what a ClientHello offers for resumption must never panic on untrusted bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::resumption::{offer, session_id, HelloParts, ResumptionOffer};

fuzz_target!(|data: &[u8]| {
    let (flags, data) = data.split_first().unwrap_or((&0, data));
    let quarter = data.len() / 4;
    let (body, rest) = data.split_at(quarter * 2);
    let (versions, rest) = rest.split_at(quarter / 2);
    let (psk, ticket) = rest.split_at(rest.len() / 2);
    let parts = HelloParts {
        body,
        supported_versions: (flags & 1 != 0).then_some(versions),
        pre_shared_key: (flags & 2 != 0).then_some(psk),
        session_ticket: (flags & 4 != 0).then_some(ticket),
    };
    match offer(parts, flags & 8 != 0) {
        ResumptionOffer::Tls13Psk(id) => assert!(!id.is_empty()),
        ResumptionOffer::Tls12Ticket(t) => assert!(!t.is_empty()),
        ResumptionOffer::Tls12SessionId(id) => assert!(!id.is_empty() && id.len() <= 32),
        ResumptionOffer::None => {}
    }
    if let Some(id) = session_id(body) {
        assert!(id.len() <= 32);
    }
});
