//! The cloud clients' TLS: rustls with ring's cryptography. object_store's default is
//! aws-lc-rs; ring is rustls's other provider, as well kept, and builds from a small core of
//! C and assembly where aws-lc-sys compiles a whole C library, the longest step of the
//! extension's build (docs/development.md), again for every platform's wheel. reqwest, built
//! without a provider of its own, takes the process's default, installed here before the
//! first client is built.

use std::sync::Once;

/// Installs ring's provider as the process's default, once. A program that installed a
/// provider before keeps its own; one that wants another installs it before its first
/// cloud lock (rustls takes the first default installed).
pub(crate) fn install_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err only when a provider was installed already: that choice stands.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}
