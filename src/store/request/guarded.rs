//! A store request whose panic becomes an error: object_store panics on a URL it cannot
//! build (a typo in an endpoint), and a panic must not cross into Python as
//! `PanicException`, which escapes `except Exception`.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

thread_local! {
    /// Set while this thread polls a request inside [`Guarded`].
    static GUARDED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// True while this thread runs a store request whose panics become errors: a panic hook
/// may then stay quiet (the Python bindings install one).
pub fn in_guarded_request() -> bool {
    GUARDED.with(|g| g.get())
}

/// A request whose panic (object_store panics on a URL it cannot build) becomes an error.
pub(crate) struct Guarded<F>(pub(crate) Pin<Box<F>>);

impl<F: Future> Future for Guarded<F> {
    type Output = std::result::Result<F::Output, String>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = &mut self.get_mut().0;
        let was = GUARDED.with(|g| g.replace(true));
        let polled =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| inner.as_mut().poll(cx)));
        GUARDED.with(|g| g.set(was));
        match polled {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
        }
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_panic_in_a_request_becomes_an_error() {
        let panicking = async { panic!("request valid: InvalidUri") };
        let got: std::result::Result<(), String> = Guarded(Box::pin(panicking)).await;
        assert!(got.unwrap_err().contains("InvalidUri"));
        assert!(!in_guarded_request());
    }
}
