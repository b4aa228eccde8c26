//! What a `rediss://` connection trusts, and what it shows: the certificate authorities that may
//! sign the server's certificate, and a client certificate for servers that ask for one.

use std::fmt;

/// TLS settings for Redis beyond the defaults, for [`RedisStore::connect_tls`] and
/// [`RedisStore::cluster_tls`](super::RedisStore::cluster_tls): a private certificate authority
/// (managed Redis often signs with its own), and a client certificate for a server that
/// authenticates clients by certificate (`tls-auth-clients yes`).
///
/// Without it, a `rediss://` URL trusts the platform's roots. TLS itself comes with the crate's
/// `rustls` (default) or `native-tls` feature; without either, a `rediss://` URL fails at
/// connect with [`RedisConnectError::TlsNotBuilt`](super::RedisConnectError::TlsNotBuilt).
/// With both, the redis crate uses rustls and trusts no platform root: give the CA here.
///
/// ```
/// use reqwest_polite::limiter::redis::RedisTls;
///
/// // PEM as text or bytes: `std::fs::read("ca.pem")?` will do.
/// let ca = "-----BEGIN CERTIFICATE-----\n...\n-----END CERTIFICATE-----\n";
/// let tls = RedisTls::default().with_root_certificates(ca);
/// // Debug output counts certificates, and shows no key.
/// assert_eq!(
///     format!("{tls:?}"),
///     r#"RedisTls { root_certificates: Some("1 certificate(s)"), client_certificate: false }"#,
/// );
/// ```
///
/// [`RedisStore::connect_tls`]: super::RedisStore::connect_tls
#[derive(Clone, Default, PartialEq, Eq)]
pub struct RedisTls {
    pub(super) root_certificates: Option<Vec<u8>>,
    pub(super) client_certificate: Option<ClientCertificate>,
}

/// A client's certificate chain and private key, both PEM.
#[derive(Clone, PartialEq, Eq)]
pub(super) struct ClientCertificate {
    pub(super) chain: Vec<u8>,
    pub(super) key: Vec<u8>,
}

impl RedisTls {
    /// Trusts the certificate authorities in `pem` (one or more PEM certificates), instead of
    /// the platform's roots. Replaces any set given before.
    pub fn with_root_certificates(mut self, pem: impl Into<Vec<u8>>) -> Self {
        self.root_certificates = Some(pem.into());
        self
    }

    /// Shows the client certificate chain `chain_pem` (PEM, the client's own certificate
    /// first), proven with the private key `key_pem` (PEM, PKCS #8 for `native-tls`).
    pub fn with_client_certificate(
        mut self,
        chain_pem: impl Into<Vec<u8>>,
        key_pem: impl Into<Vec<u8>>,
    ) -> Self {
        self.client_certificate = Some(ClientCertificate {
            chain: chain_pem.into(),
            key: key_pem.into(),
        });
        self
    }

    /// Refuses PEM that holds no certificate (or no key): the redis crate would take it as an
    /// empty set of roots, and every handshake would fail later for a reason hard to see.
    pub(super) fn check(&self) -> Result<(), redis::RedisError> {
        let holds = |pem: &[u8], label: &[u8]| pem.windows(label.len()).any(|w| w == label);
        let refused = |what: &'static str| {
            Err(redis::RedisError::from((
                redis::ErrorKind::InvalidClientConfig,
                what,
            )))
        };
        if let Some(roots) = &self.root_certificates
            && !holds(roots, b"-----BEGIN CERTIFICATE-----")
        {
            return refused("the root certificates hold no PEM certificate");
        }
        if let Some(client) = &self.client_certificate {
            if !holds(&client.chain, b"-----BEGIN CERTIFICATE-----") {
                return refused("the client certificate chain holds no PEM certificate");
            }
            // PKCS #8 (`PRIVATE KEY`), or PKCS #1 and SEC1 (`RSA PRIVATE KEY`, `EC PRIVATE KEY`)
            if !holds(&client.key, b"PRIVATE KEY-----") {
                return refused("the client key holds no PEM private key");
            }
        }
        Ok(())
    }

    /// The redis crate's form of these settings.
    #[cfg(any(feature = "rustls", feature = "native-tls"))]
    pub(super) fn certificates(&self) -> redis::TlsCertificates {
        redis::TlsCertificates {
            client_tls: self
                .client_certificate
                .as_ref()
                .map(|client| redis::ClientTlsConfig {
                    client_cert: client.chain.clone(),
                    client_key: client.key.clone(),
                }),
            root_cert: self.root_certificates.clone(),
        }
    }
}

// By hand: a private key is a secret, and certificates in bytes help no one reading a log.
impl fmt::Debug for RedisTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let roots = self.root_certificates.as_ref().map(|pem| {
            let marker = b"-----BEGIN CERTIFICATE-----";
            let count = pem.windows(marker.len()).filter(|w| w == marker).count();
            format!("{count} certificate(s)")
        });
        f.debug_struct("RedisTls")
            .field("root_certificates", &roots)
            .field("client_certificate", &self.client_certificate.is_some())
            .finish()
    }
}
