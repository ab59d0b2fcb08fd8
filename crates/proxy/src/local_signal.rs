//! The drain signal as a worker thread's tasks see it.
//!
//! The gateway's drain signal is one process-wide `watch` channel, and every connection task
//! polls its `changed()` each time it runs (`downstream::drive`'s select; the accept loops and
//! QUIC connections likewise). tokio's `Notified` takes the lock of one of the channel's eight
//! notifier shards on every such poll, and those shards are shared by all worker threads: a
//! cache line that moves between cores on each task poll of a gateway with several workers
//! (issue 18: nothing on the per-request path may take a process-wide lock). [`local`] gives
//! each worker thread, per runtime, a channel of its own fed from the process-wide one by one
//! task, so a connection's polls touch only its own thread's lock.

use std::cell::RefCell;
use tokio::sync::watch;

thread_local! {
    static MIRRORS: RefCell<Vec<Mirror>> = const { RefCell::new(Vec::new()) };
}

/// This thread's copy of one process-wide channel, in one runtime.
struct Mirror {
    /// The process-wide sender's address (compared, never dereferenced).
    global: usize,
    /// A receiver of the process-wide channel: closed once its sender is gone, so a new sender
    /// at the same address never finds this mirror.
    probe: watch::Receiver<bool>,
    runtime: tokio::runtime::Id,
    rx: watch::Receiver<bool>,
}

/// A receiver that says what `global` says: on a tokio runtime, of this thread's mirror of it
/// (made, with the task that feeds it, on first use); outside one, of `global` itself. The
/// mirror takes each new value of `global` and is closed once `global` is.
pub fn local(global: &watch::Sender<bool>) -> watch::Receiver<bool> {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return global.subscribe();
    };
    let runtime = runtime.id();
    let key = global as *const watch::Sender<bool> as usize;
    MIRRORS.with(|mirrors| {
        let mut mirrors = mirrors.borrow_mut();
        // Done with: a mirror of a closed channel, or whose feeding task ended with its runtime.
        mirrors.retain(|m| m.probe.has_changed().is_ok() && m.rx.has_changed().is_ok());
        if let Some(m) = mirrors.iter().find(|m| m.global == key && m.runtime == runtime) {
            return m.rx.clone();
        }
        let mut from = global.subscribe();
        let (tx, rx) = watch::channel(*from.borrow_and_update());
        tokio::spawn(async move {
            // Each value the process-wide channel takes, until it closes (then so does this one).
            while from.changed().await.is_ok() {
                let now = *from.borrow_and_update();
                tx.send_if_modified(|v| std::mem::replace(v, now) != now);
            }
        });
        mirrors.push(Mirror {
            global: key,
            probe: global.subscribe(),
            runtime,
            rx: rx.clone(),
        });
        rx
    })
}

#[cfg(test)]
mod tests {
    use super::local;
    use std::time::Duration;
    use tokio::sync::watch;

    #[tokio::test]
    async fn a_thread_s_tasks_share_one_mirror_that_follows_the_process_wide_signal() {
        let (global, keep) = watch::channel(false);
        let mut a = local(&global);
        let b = local(&global);
        assert!(a.same_channel(&b), "one mirror per thread and runtime");
        assert!(!a.same_channel(&global.subscribe()), "not the process-wide channel");
        assert!(!*a.borrow());
        global.send_replace(true);
        tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .expect("the drain reached the mirror")
            .expect("still open");
        assert!(*a.borrow_and_update());
        // A mirror made after the drain began says so at once.
        let (drained, _rx) = watch::channel(true);
        assert!(*local(&drained).borrow());
        // The process-wide channel closing closes the mirror.
        drop(keep);
        drop(global);
        assert!(tokio::time::timeout(Duration::from_secs(5), a.changed())
            .await
            .expect("closed in time")
            .is_err());
    }

    #[test]
    fn each_runtime_gets_its_own_mirror_and_outside_one_the_channel_itself() {
        let (global, _rx) = watch::channel(false);
        let outside = local(&global);
        assert!(outside.same_channel(&global.subscribe()));
        let on = |global: &watch::Sender<bool>| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            let rx = rt.block_on(async { local(global) });
            (rt, rx)
        };
        let (rt1, first) = on(&global);
        drop(rt1);
        // The first runtime's feeding task is gone with it: its mirror is closed, and the next
        // runtime on this thread gets a mirror that works.
        assert!(first.has_changed().is_err());
        let (rt2, mut second) = on(&global);
        assert!(!second.same_channel(&first));
        global.send_replace(true);
        rt2.block_on(async {
            tokio::time::timeout(Duration::from_secs(5), second.changed())
                .await
                .expect("the drain reached the second runtime's mirror")
                .expect("open");
        });
        assert!(*second.borrow());
    }
}
