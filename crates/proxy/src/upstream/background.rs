//! The upstream side's background thread (`tlsgate-health`): active health probes and the
//! sweep of idle origin connections run on it, off the workers. Its own runtime, because the first
//! generation's groups are built before any worker runtime exists.

use std::sync::OnceLock;

/// The runtime of the background thread, started on first use.
pub(super) fn runtime() -> Option<&'static tokio::runtime::Handle> {
    static HANDLE: OnceLock<Option<tokio::runtime::Handle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .inspect_err(|e| tracing::error!(error = %e, "cannot start the upstream background runtime"))
                .ok()?;
            let handle = runtime.handle().clone();
            std::thread::Builder::new()
                .name("tlsgate-health".into())
                .spawn(move || runtime.block_on(std::future::pending::<()>()))
                .inspect_err(|e| tracing::error!(error = %e, "cannot start the upstream background thread"))
                .ok()?;
            Some(handle)
        })
        .as_ref()
}
