//! The sender that delivers live email through a provider.

use async_trait::async_trait;
use crm_domain::mail::{Connection, EmailMessage};

/// Why a delivery attempt failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendFailure {
    /// Worth trying again (network error, timeout, 429, 5xx).
    Retryable(String),
    /// The provider will refuse it again (4xx: bad key, unverified sender, invalid address).
    Permanent(String),
}

/// Delivers one email through the tenant's connection; answers the provider's message id.
#[async_trait]
pub trait EmailSender: Send + Sync {
    async fn send(
        &self,
        connection: &Connection,
        email: &EmailMessage,
    ) -> Result<Option<String>, SendFailure>;
}
