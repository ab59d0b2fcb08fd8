//! tlsgate's network lab: a user-space link emulator between two network namespaces, and the
//! experiments run through it (`tlsgate lab`).
//!
//! The kernel here has no netem qdisc, so [`Lab`] builds namespaces A (client) and B (server),
//! each with a TUN device, and a [`forward::Forwarder`] (threads in this process) that moves
//! packets between them through a [`link::Link`] per direction: loss (random or
//! Gilbert-Elliott), optional reordering, a rate limit with a drop-tail queue, and delay with
//! netem's jitter distributions ([`dist`]). Both ends run the real kernel TCP.
#![forbid(unsafe_code)]

pub mod calibrate;
pub mod client;
pub mod conn_trace;
pub mod dist;
pub mod exp;
pub mod first_flight;
pub mod forward;
pub mod gateway;
pub mod handshake_timeline;
pub mod link;
pub mod measure;
pub mod netns;
pub mod pki;
pub mod report;
pub mod svg;
pub mod topology;

pub use dist::{Dist, Loss};
pub use link::LinkSpec;
pub use topology::{Lab, LabOptions, ADDR_A, ADDR_B};
