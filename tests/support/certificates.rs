//! Certificates made at test time (rcgen, no openssl command): a private CA, a server
//! certificate it signs for 127.0.0.1 and localhost, and a client certificate it signs, each
//! written as PEM into a directory under the test process's temporary root.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};

use super::process::temp_root;

static NEXT_DIR: AtomicUsize = AtomicUsize::new(0);

/// A CA of its own, and the certificates it signed, as PEM in memory and in files.
pub struct TestCertificates {
    dir: PathBuf,
    /// The CA's certificate: what a client must trust.
    pub ca_pem: String,
    /// The client certificate (signed by the CA) and its PKCS #8 key.
    pub client_pem: String,
    pub client_key_pem: String,
}

impl TestCertificates {
    /// A new CA named `name`, with a server and a client certificate.
    pub fn new(name: &str) -> TestCertificates {
        let dir = temp_root().join(format!(
            "certs-{name}-{}",
            NEXT_DIR.fetch_add(1, Ordering::Relaxed)
        ));
        fs::create_dir_all(&dir).unwrap_or_else(|err| panic!("cannot create {dir:?}: {err}"));

        let mut ca = CertificateParams::new(Vec::<String>::new()).expect("no names to parse");
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        ca.distinguished_name
            .push(DnType::CommonName, format!("reqwest-polite test CA {name}"));
        let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().expect("a key"))
            .expect("the CA signs itself");

        let server_names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let (server_pem, server_key_pem) =
            signed(&ca, server_names, ExtendedKeyUsagePurpose::ServerAuth);
        let (client_pem, client_key_pem) = signed(
            &ca,
            vec!["pacer".to_owned()],
            ExtendedKeyUsagePurpose::ClientAuth,
        );

        let certificates = TestCertificates {
            dir,
            ca_pem: ca.pem(),
            client_pem,
            client_key_pem,
        };
        certificates.write("ca.crt", &certificates.ca_pem);
        certificates.write("server.crt", &server_pem);
        certificates.write("server.key", &server_key_pem);
        certificates
    }

    /// The CA certificate's file.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.join("ca.crt")
    }

    /// The server certificate's file.
    pub fn server_file(&self) -> PathBuf {
        self.dir.join("server.crt")
    }

    /// The server key's file.
    pub fn server_key_file(&self) -> PathBuf {
        self.dir.join("server.key")
    }

    fn write(&self, name: &str, pem: &str) {
        let path: &Path = &self.dir.join(name);
        fs::write(path, pem).unwrap_or_else(|err| panic!("cannot write {path:?}: {err}"));
    }
}

/// A certificate for `names`, signed by `ca`, for `usage`; and its key. PEM both.
fn signed(
    ca: &CertifiedIssuer<'_, KeyPair>,
    names: Vec<String>,
    usage: ExtendedKeyUsagePurpose,
) -> (String, String) {
    let mut params = CertificateParams::new(names.clone()).expect("names rcgen can parse");
    params
        .distinguished_name
        .push(DnType::CommonName, &names[0]);
    params.extended_key_usages = vec![usage];
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    let key = KeyPair::generate().expect("a key");
    let issuer: &Issuer<'_, KeyPair> = ca;
    let certificate = params.signed_by(&key, issuer).expect("the CA signs");
    (certificate.pem(), key.serialize_pem())
}

impl Drop for TestCertificates {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}
