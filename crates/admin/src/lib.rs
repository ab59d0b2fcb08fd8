//! tlsgate's operational surface: the metrics registry ([`metrics`]) and the admin listener
//! ([`server`]) that serves `/metrics`, `/healthz`, `POST /reload` and the gateway's JSON APIs, on
//! loopback by default; and the request [`guard`] (Host/Origin/CSRF checks, header timeout,
//! connection cap) that the admin listener and `tlsgate console` share.
#![forbid(unsafe_code)]

pub mod delegation_metrics;
pub mod guard;
pub mod local_series;
pub mod metrics;
pub mod server;

pub use guard::Guard;
pub use hyper::{Method, StatusCode};
pub use metrics::Metrics;
pub use server::{serve_admin, AdminHooks, ApiFuture, ReloadError, ReloadReport, NOT_APPLIED_HEADER};
