//! Where the operator may send a benchmark's results with credentials it reads itself.
//!
//! The operator reads an `outputLocation`'s Secret with its own rights: were the user to
//! pick any endpoint, creating a benchmark would be reading any Secret of the namespace
//! and sending it anywhere (a confused deputy). So the administrator decides: an
//! `endpoint` parameter must be one of the endpoints the operator's settings list
//! (`--export-endpoint`, Helm value `export.allowedEndpoints`), plain `http://` only
//! when they allow it (`--export-allow-http`), and a service's own endpoint (AWS S3,
//! Google Cloud Storage, Azure Blob Storage, GitHub's API, OCI's S3-compatible API of a
//! region) is always fine. The Secret's side is in [`EXPORT_CREDENTIALS_LABEL`].

use super::{BucketLocation, Destination};

/// A Secret is used as export credentials only when its owner labelled it so
/// (`perfsweep.io/export-credentials: "true"`): a Secret of the namespace that nobody
/// marked for exports is never read into an upload.
pub const EXPORT_CREDENTIALS_LABEL: &str = "perfsweep.io/export-credentials";

/// The administrator's export settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AllowedDestinations {
    /// Endpoints (`https://host[:port]`) an `outputLocation` may name, besides its
    /// service's own.
    pub endpoints: Vec<String>,
    /// Whether those may be plain `http://` (a store inside the cluster, a test server).
    pub plain_http: bool,
}

impl AllowedDestinations {
    /// Whether the operator may export to `destination`; the error says what the
    /// administrator would have to allow.
    pub fn check(&self, destination: &Destination) -> Result<(), String> {
        let endpoint = match destination {
            Destination::Bucket(bucket) => {
                bucket.endpoint.as_deref().filter(|e| !oci_own(bucket, e))
            }
            Destination::GitHub(release) => release.endpoint.as_deref(),
            Destination::Claim { .. } | Destination::Directory(_) => None,
        };
        let Some(endpoint) = endpoint else {
            return Ok(());
        };
        let endpoint = endpoint.trim_end_matches('/');
        if endpoint.starts_with("http://") && !self.plain_http {
            return Err(format!(
                "spec.outputLocation: endpoint {endpoint} is plain http, which this operator does not send credentials over (its administrator allows it with --export-allow-http, Helm value export.allowPlainHttp)"
            ));
        }
        if self
            .endpoints
            .iter()
            .any(|allowed| allowed.trim_end_matches('/') == endpoint)
        {
            return Ok(());
        }
        Err(format!(
            "spec.outputLocation: endpoint {endpoint} is not one this operator exports to: its administrator lists the allowed endpoints (--export-endpoint, Helm value export.allowedEndpoints){}",
            if self.endpoints.is_empty() {
                " and lists none".to_owned()
            } else {
                format!(": {}", self.endpoints.join(", "))
            }
        ))
    }
}

/// OCI's S3-compatible endpoint, derived from the region by the parser: the service's
/// own.
fn oci_own(bucket: &BucketLocation, endpoint: &str) -> bool {
    endpoint.starts_with("https://")
        && endpoint.trim_end_matches('/').ends_with(&format!(
            ".compat.objectstorage.{}.oraclecloud.com",
            bucket.region.as_deref().unwrap_or_default()
        ))
        && !endpoint["https://".len()..].contains(['/', '@', ':'])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn destination(uri: &str, parameters: &[(&str, &str)]) -> Destination {
        let parameters = parameters
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        super::super::parse(uri, &parameters).expect("parses")
    }

    /// Issue 24, finding 2: `github://a/b@t` with `endpoint: http://attacker` sent the
    /// namespace's token to the attacker.
    #[test]
    fn a_user_chosen_endpoint_needs_the_administrators_yes() {
        let nothing = AllowedDestinations::default();
        let attacker = destination("github://a/b@t", &[("endpoint", "http://attacker.example")]);
        let error = nothing.check(&attacker).expect_err("refused");
        assert!(error.contains("plain http"), "{error}");
        let attacker = destination(
            "github://a/b@t",
            &[("endpoint", "https://attacker.example")],
        );
        let error = nothing.check(&attacker).expect_err("refused");
        assert!(
            error.contains("export.allowedEndpoints") && error.contains("lists none"),
            "{error}"
        );
        let minio = destination("s3://b/p", &[("endpoint", "https://minio.store:9000")]);
        assert!(nothing.check(&minio).is_err());

        let allowed = AllowedDestinations {
            endpoints: vec![
                "https://minio.store:9000/".into(),
                "http://in-cluster:9000".into(),
            ],
            plain_http: false,
        };
        assert_eq!(allowed.check(&minio), Ok(()));
        let plain = destination("s3://b/p", &[("endpoint", "http://in-cluster:9000")]);
        assert!(allowed.check(&plain).is_err(), "http needs its own yes");
        let both = AllowedDestinations {
            plain_http: true,
            ..allowed
        };
        assert_eq!(both.check(&plain), Ok(()));
        assert!(both.check(&attacker).is_err());
    }

    #[test]
    fn a_services_own_endpoint_is_always_fine() {
        let nothing = AllowedDestinations::default();
        for (uri, parameters) in [
            ("s3://b/p", vec![("region", "us-east-1")]),
            ("gs://b/p", vec![]),
            ("az://myaccount/container/p", vec![]),
            ("github://o/r@v1", vec![]),
            (
                "oci://n/ns/b/bucket/o/p",
                vec![("region", "eu-frankfurt-1")],
            ),
        ] {
            assert_eq!(
                nothing.check(&destination(uri, &parameters)),
                Ok(()),
                "{uri}"
            );
        }
        // A user-named OCI-looking endpoint of another region is not derived.
        let other = destination(
            "oci://n/ns/b/bucket/o/p",
            &[
                ("region", "eu-frankfurt-1"),
                ("endpoint", "https://evil.example"),
            ],
        );
        assert!(nothing.check(&other).is_err());
    }
}
