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

/// The hosts a bucket's client may send a request to, judged on each request's URL as
/// the client built it (not on the parts it was built from): the location's endpoint
/// (which [`AllowedDestinations::check`] judged), else the service's own hosts over
/// https. A region, account or bucket that slipped past validation and bent the URL
/// elsewhere is refused here, before the request (and its credentials) leave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origins {
    /// `(scheme, host, port)` allowed exactly.
    exact: Vec<(String, String, u16)>,
    /// Hosts `LABEL.suffix` (one DNS label) allowed over https on 443.
    one_label_under: Vec<String>,
}

impl Origins {
    pub fn of(bucket: &BucketLocation) -> Self {
        let https = |host: String| ("https".to_owned(), host, 443);
        if let Some(endpoint) = &bucket.endpoint {
            return Self {
                exact: origin(endpoint).into_iter().collect(),
                one_label_under: Vec::new(),
            };
        }
        match bucket.service {
            super::Service::S3 => {
                let region = bucket.region.as_deref().unwrap_or("us-east-1");
                Self {
                    exact: vec![https(format!("s3.{region}.amazonaws.com"))],
                    one_label_under: vec![format!("s3.{region}.amazonaws.com")],
                }
            }
            super::Service::Gcs => Self {
                exact: ["storage.googleapis.com", "oauth2.googleapis.com"]
                    .map(|host| https(host.to_owned()))
                    .to_vec(),
                one_label_under: Vec::new(),
            },
            super::Service::Azure => Self {
                exact: Vec::new(),
                one_label_under: vec!["blob.core.windows.net".to_owned()],
            },
        }
    }

    /// Whether a request to `uri` may be sent; the error names the host refused.
    pub fn permit(&self, uri: &::http::Uri) -> Result<(), String> {
        let scheme = uri.scheme_str().unwrap_or_default();
        let host = uri.host().unwrap_or_default().to_ascii_lowercase();
        let port = uri
            .port_u16()
            .unwrap_or(if scheme == "http" { 80 } else { 443 });
        let exact = self
            .exact
            .iter()
            .any(|(s, h, p)| s == scheme && *h == host && *p == port);
        let under = scheme == "https"
            && port == 443
            && uri.authority().is_some_and(|a| !a.as_str().contains('@'))
            && self.one_label_under.iter().any(|suffix| {
                host.strip_suffix(suffix.as_str())
                    .and_then(|label| label.strip_suffix('.'))
                    .is_some_and(is_dns_label)
            });
        if exact || under {
            Ok(())
        } else {
            Err(format!(
                "a request to {scheme}://{host}:{port} was refused: not the export's endpoint \
                 or its service's own host"
            ))
        }
    }
}

/// `(scheme, host, port)` of an endpoint URL.
fn origin(endpoint: &str) -> Option<(String, String, u16)> {
    let uri: ::http::Uri = endpoint.parse().ok()?;
    let scheme = uri.scheme_str()?.to_owned();
    let port = uri
        .port_u16()
        .unwrap_or(if scheme == "http" { 80 } else { 443 });
    Some((scheme, uri.host()?.to_ascii_lowercase(), port))
}

fn is_dns_label(label: &str) -> bool {
    (1..=63).contains(&label.len())
        && label
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
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

    fn bucket(uri: &str, parameters: &[(&str, &str)]) -> BucketLocation {
        match destination(uri, parameters) {
            Destination::Bucket(bucket) => bucket,
            other => panic!("not a bucket: {other:?}"),
        }
    }

    /// Issue 34, finding 1: judged on the URL the client builds, a request to any host
    /// but the endpoint or the service's own is refused.
    #[test]
    fn a_request_goes_only_to_the_endpoint_or_the_services_own_host() {
        let uri = |text: &str| text.parse::<::http::Uri>().expect("a URI");
        let azure = Origins::of(&bucket("az://acct/c/p", &[]));
        assert_eq!(
            azure.permit(&uri("https://acct.blob.core.windows.net/c/p")),
            Ok(())
        );
        for refused in [
            "https://evil.example/c/p",
            "https://evil.example?.blob.core.windows.net/c",
            "https://a.b.blob.core.windows.net/c",
            "http://acct.blob.core.windows.net/c",
            "https://acct.blob.core.windows.net:8443/c",
            "https://10.77.0.1/c",
        ] {
            let error = azure.permit(&uri(refused)).expect_err(refused);
            assert!(error.contains("was refused"), "{error}");
        }
        let s3 = Origins::of(&bucket("s3://b/p", &[("region", "eu-west-3")]));
        assert_eq!(
            s3.permit(&uri("https://s3.eu-west-3.amazonaws.com/b/p")),
            Ok(())
        );
        assert_eq!(
            s3.permit(&uri("https://b.s3.eu-west-3.amazonaws.com/p")),
            Ok(())
        );
        assert!(s3.permit(&uri("https://s3.evil.example/b/p")).is_err());
        assert!(
            s3.permit(&uri("https://x.s3.us-east-1.amazonaws.com/p"))
                .is_err()
        );
        let minio = Origins::of(&bucket(
            "s3://b/p",
            &[("endpoint", "http://10.77.0.1:9000")],
        ));
        assert_eq!(minio.permit(&uri("http://10.77.0.1:9000/b/p")), Ok(()));
        assert!(minio.permit(&uri("http://10.77.0.1:9001/b/p")).is_err());
        assert!(minio.permit(&uri("https://10.77.0.1:9000/b/p")).is_err());
        let gcs = Origins::of(&bucket("gs://b/p", &[]));
        assert_eq!(gcs.permit(&uri("https://storage.googleapis.com/b")), Ok(()));
        assert!(
            gcs.permit(&uri("https://evil.googleapis.com.evil/b"))
                .is_err()
        );
    }

    /// Issue 34, finding 8: the chart's own example, a GitHub Enterprise API under a
    /// path, was refused as malformed.
    #[test]
    fn a_github_enterprise_endpoint_with_its_api_path_is_usable_when_allowed() {
        let ghe = destination(
            "github://o/r@t",
            &[("endpoint", "https://ghe.example/api/v3")],
        );
        let allowed = AllowedDestinations {
            endpoints: vec!["https://ghe.example/api/v3".into()],
            plain_http: false,
        };
        assert_eq!(allowed.check(&ghe), Ok(()));
        assert!(AllowedDestinations::default().check(&ghe).is_err());
        let parameters = [("endpoint".to_owned(), "https://m:9000/p".to_owned())].into();
        let error = super::super::parse("s3://b/p", &parameters)
            .expect_err("a bucket's endpoint has no path");
        assert!(
            error.to_string().contains("must not have a path"),
            "{error}"
        );
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
