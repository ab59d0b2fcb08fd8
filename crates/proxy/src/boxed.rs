//! Futures built in their box. `Box::pin(f())` builds the future on the stack, allocates, and
//! copies all of it into the box: the future's whole size (the largest of its states), though a
//! future that has not started holds only its arguments. The proxy boxes two per request (an
//! HTTP/2 stream's future, ~3.9 KB, and the forwarding state, ~3.3 KB), and those copies were a
//! half of the gateway's `memmove` time in the HTTP/2 proxy profile. [`pin_in_place`] allocates
//! first and has the future written straight into the allocation (the compiler's call-slot
//! optimisation: the future is the return value of a call that is not inlined, whose return
//! slot becomes the box), so only its arguments are written.

use std::future::Future;
use std::pin::Pin;

/// Boxes the future `make` returns without building it on the stack first. `make` should call
/// the `async fn` directly (`|| serve(a, b)`): the call's return slot is the box.
#[inline(always)]
pub fn pin_in_place<F: Future>(make: impl FnOnce() -> F) -> Pin<Box<F>> {
    let slot = Box::<F>::new_uninit();
    Box::into_pin(Box::write(slot, make()))
}

#[cfg(test)]
mod tests {
    use super::pin_in_place;

    #[tokio::test]
    async fn the_boxed_future_runs_to_its_answer() {
        let a = String::from("in");
        let fut = pin_in_place(|| async move { format!("{a} place") });
        assert_eq!(fut.await, "in place");
    }
}
