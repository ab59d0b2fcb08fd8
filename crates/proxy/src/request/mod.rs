//! One request, whichever HTTP version carried it: what it must satisfy ([`check`]), where it
//! goes ([`router`]), the service that joins the client side to the origin side ([`service`]),
//! and what is recorded of it ([`access_log`]).

pub mod access_log;
pub mod check;
pub mod rate_limit;
pub mod router;
pub mod service;
