//! One background task per slot of the running configuration generation (an OCSP staple, a
//! delegated credential): started when a generation brings a slot, stopped when a generation
//! drops it. Shared by [`super::stapling`] and [`super::delegation`].

use crate::gateway::{Gateway, Generation};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// Keeps `task(slot)` running for every slot `live(generation)` lists; `forget` is told the
/// live slots after each change (so registries drop the others). Returns only if the runtime
/// stops.
pub async fn supervise<S, Fut>(
    gateway: Arc<Gateway>,
    live: impl Fn(&Generation) -> Vec<Arc<S>>,
    forget: impl Fn(&Gateway, &[Arc<S>]),
    task: impl Fn(Arc<S>) -> Fut,
) where
    S: Send + Sync + 'static,
    Fut: Future<Output = ()> + Send + 'static,
{
    let mut tasks: Vec<(Arc<S>, tokio::task::JoinHandle<()>)> = Vec::new();
    let mut seen = 0;
    loop {
        let generation = gateway.current();
        if generation.id != seen {
            seen = generation.id;
            let slots = live(&generation);
            forget(&gateway, &slots);
            tasks.retain(|(slot, handle)| {
                let keep = slots.iter().any(|l| Arc::ptr_eq(l, slot));
                if !keep {
                    handle.abort();
                }
                keep
            });
            for slot in slots {
                if !tasks.iter().any(|(s, _)| Arc::ptr_eq(s, &slot)) {
                    let handle = tokio::spawn(task(slot.clone()));
                    tasks.push((slot, handle));
                }
            }
        }
        drop(generation);
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
