//! The upgrade handoff codec reads bytes another process wrote: decoding must never panic,
//! never claim more bytes than it was given or a frame may hold, and must give the same answer
//! once more bytes follow a complete frame. The encoding is canonical: a decoded message
//! re-encodes to exactly the bytes it came from. Every prefix of a frame is incomplete or the
//! same error, never another message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use tlsgate_wire::handoff::{decode, encode, frame_len, HEADER_LEN, MAX_BODY};

fuzz_target!(|data: &[u8]| {
    let mut rest = data;
    // A stream of frames, as the channel reads them.
    while let Ok(Some((message, used))) = decode(rest) {
        assert!(used >= HEADER_LEN && used <= rest.len() && used <= HEADER_LEN + MAX_BODY);
        assert_eq!(frame_len(rest), Ok(Some(used)));
        let mut again = Vec::new();
        encode(&message, &mut again).expect("a decoded message encodes");
        assert_eq!(again, &rest[..used], "canonical encoding");
        let mut longer = rest[..used].to_vec();
        longer.extend_from_slice(&[0, 0, 0, 0, 0x0c]);
        assert_eq!(decode(&longer), Ok(Some((message, used))));
        for cut in [0, 1, 4, 5, used / 2, used.saturating_sub(1)] {
            if cut < used {
                assert_eq!(decode(&rest[..cut]), Ok(None), "a prefix is incomplete");
            }
        }
        rest = &rest[used..];
    }
});
