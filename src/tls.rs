//! TLS setup every HTTPS client of perfgate shares (the streaming client, the GitHub API client):
//! a leaf, so neither has to reach into the other for it.

/// Installs ring as rustls' process-wide crypto provider (idempotent).
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}
