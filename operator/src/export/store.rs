//! One export destination opened through object_store: a bucket (S3, GCS, Azure) or a
//! local directory, under a key prefix.

use std::path::Path;
use std::sync::Arc;

use anyhow::Context;
use bytes::Bytes;
use futures::StreamExt;
use object_store::aws::AmazonS3Builder;
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::local::LocalFileSystem;
use object_store::path::Path as Key;
use object_store::{BackoffConfig, ObjectStore, ObjectStoreExt, PutPayload, RetryConfig};

use super::github::{Release, Uploader};
use super::http::{Failures, HyperConnectorFactory};
use super::{AzureKey, BucketLocation, Credentials, Retry, Service};

/// An open destination. `Debug` shows where, never the credentials the store holds.
pub struct Store {
    inner: Backend,
    /// Key prefix, without leading or trailing `/`; may be empty.
    prefix: String,
    /// Where, for messages.
    location: String,
    /// Failed HTTP exchanges since the last [`Store::take_failures`]; none for files.
    failures: Arc<Failures>,
    /// Attempts per request (1 for a directory: nothing there is worth retrying at once).
    attempts: u32,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// What a store writes through.
enum Backend {
    /// Object storage and directories.
    Objects(Arc<dyn ObjectStore>),
    /// GitHub release assets (written only).
    GitHub(Box<Uploader>),
}

fn retry_config(retry: &Retry) -> RetryConfig {
    RetryConfig {
        backoff: BackoffConfig {
            init_backoff: retry.initial_delay,
            max_backoff: retry.max_delay,
            base: 2.0,
        },
        max_retries: retry.attempts.saturating_sub(1) as usize,
        // Bounded by the attempts, not by time; the request timeout bounds each one.
        retry_timeout: std::time::Duration::from_hours(1),
    }
}

impl Store {
    /// A local directory (`file://`), created if missing.
    pub fn directory(root: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(root)
            .with_context(|| format!("cannot create the export directory {}", root.display()))?;
        let inner = LocalFileSystem::new_with_prefix(root)
            .with_context(|| format!("cannot export to {}", root.display()))?;
        Ok(Self {
            inner: Backend::Objects(Arc::new(inner)),
            prefix: String::new(),
            location: format!("file://{}", root.display()),
            failures: Arc::default(),
            attempts: 1,
        })
    }

    /// A bucket, with `credentials` for its service and object_store retrying failed
    /// requests as `retry` says.
    pub fn bucket(
        location: &BucketLocation,
        credentials: &Credentials,
        retry: &Retry,
    ) -> anyhow::Result<Self> {
        let failures = Arc::new(Failures::default());
        let connector = HyperConnectorFactory {
            failures: failures.clone(),
            origins: super::allowed::Origins::of(location),
        };
        let attempts = retry.attempts.max(1);
        let retry = retry_config(retry);
        let plain_http = location
            .endpoint
            .as_deref()
            .is_some_and(|e| e.starts_with("http://"));
        let inner: Arc<dyn ObjectStore> = match (location.service, credentials) {
            (
                Service::S3,
                Credentials::Aws {
                    access_key_id,
                    secret_access_key,
                    session_token,
                },
            ) => {
                let mut builder = AmazonS3Builder::new()
                    .with_bucket_name(&location.bucket)
                    .with_region(location.region.as_deref().unwrap_or("us-east-1"))
                    .with_access_key_id(access_key_id)
                    .with_secret_access_key(secret_access_key)
                    .with_http_connector(connector)
                    .with_retry(retry);
                if let Some(token) = session_token {
                    builder = builder.with_token(token);
                }
                if let Some(endpoint) = &location.endpoint {
                    builder = builder.with_endpoint(endpoint).with_allow_http(plain_http);
                }
                Arc::new(builder.build().map_err(|e| configuration(location, e))?)
            }
            (
                Service::Gcs,
                Credentials::Gcs {
                    service_account_key,
                },
            ) => {
                let mut builder = GoogleCloudStorageBuilder::new()
                    .with_bucket_name(&location.bucket)
                    .with_service_account_key(service_account_key)
                    .with_http_connector(connector)
                    .with_retry(retry);
                if let Some(endpoint) = &location.endpoint {
                    builder = builder
                        .with_config(GoogleConfigKey::BaseUrl, endpoint)
                        .with_client_options(
                            object_store::ClientOptions::new().with_allow_http(plain_http),
                        );
                }
                Arc::new(builder.build().map_err(|e| configuration(location, e))?)
            }
            (Service::Azure, Credentials::Azure { account, key }) => {
                let account = location
                    .account
                    .as_ref()
                    .or(account.as_ref())
                    .with_context(|| {
                        format!(
                            "{location}: no storage account: set the parameter account or the \
                         credential AZURE_STORAGE_ACCOUNT_NAME"
                        )
                    })?;
                let builder = MicrosoftAzureBuilder::new().with_account(account);
                let builder = match key {
                    AzureKey::AccessKey(key) => builder.with_access_key(key),
                    AzureKey::Sas(sas) => builder.with_config(AzureConfigKey::SasKey, sas),
                };
                let mut builder = builder
                    .with_container_name(&location.bucket)
                    .with_http_connector(connector)
                    .with_retry(retry);
                if let Some(endpoint) = &location.endpoint {
                    builder = builder
                        .with_endpoint(endpoint.clone())
                        .with_allow_http(plain_http);
                }
                Arc::new(builder.build().map_err(|e| configuration(location, e))?)
            }
            (service, credentials) => anyhow::bail!(
                "{location}: {credentials:?} cannot be used for a {}:// location",
                service.scheme()
            ),
        };
        Ok(Self {
            inner: Backend::Objects(inner),
            prefix: location.prefix.clone(),
            location: location.to_string(),
            failures,
            attempts,
        })
    }

    /// The assets of a GitHub release, uploaded with a token.
    pub fn github(
        release: Release,
        credentials: &Credentials,
        retry: &Retry,
    ) -> anyhow::Result<Self> {
        let Credentials::GitHub { token } = credentials else {
            anyhow::bail!("{release}: {credentials:?} cannot be used for a github:// location");
        };
        let location = release.to_string();
        Ok(Self {
            inner: Backend::GitHub(Box::new(Uploader::new(release, token.clone())?)),
            prefix: String::new(),
            location,
            failures: Arc::default(),
            attempts: retry.attempts.max(1),
        })
    }

    /// The object store, or an error saying the destination cannot do `what`.
    fn objects(&self, what: &str) -> anyhow::Result<&Arc<dyn ObjectStore>> {
        match &self.inner {
            Backend::Objects(store) => Ok(store),
            Backend::GitHub(_) => anyhow::bail!(
                "{}: cannot {what} (release assets are written only)",
                self.location
            ),
        }
    }

    /// Attempts per request, the first included.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// Where the objects go, for messages (never with credentials).
    pub fn location(&self) -> &str {
        &self.location
    }

    fn key(&self, name: &str) -> Key {
        if self.prefix.is_empty() {
            Key::from(name)
        } else {
            Key::from(format!("{}/{name}", self.prefix))
        }
    }

    /// Writes one object (object_store retries what is worth retrying).
    pub async fn put(&self, name: &str, body: Bytes) -> anyhow::Result<()> {
        let store = match &self.inner {
            Backend::Objects(store) => store,
            Backend::GitHub(uploader) => return uploader.put(name, body).await,
        };
        store
            .put(&self.key(name), PutPayload::from(body))
            .await
            .map(|_| ())
            .map_err(|error| anyhow::anyhow!(describe(&error)))
    }

    /// Reads one object.
    pub async fn get(&self, name: &str) -> anyhow::Result<Bytes> {
        let key = self.key(name);
        let store = self.objects("read objects")?;
        let read = async { store.get(&key).await?.bytes().await };
        read.await
            .map_err(|error| anyhow::anyhow!("cannot read {key}: {}", describe(&error)))
    }

    /// Deletes one object (gone already is fine: deleting is idempotent in object_store).
    pub async fn delete(&self, name: &str) -> anyhow::Result<()> {
        let key = self.key(name);
        self.objects("delete objects")?
            .delete(&key)
            .await
            .map_err(|error| anyhow::anyhow!("cannot delete {key}: {}", describe(&error)))
    }

    /// Names (relative to the prefix) of every object under the prefix, sorted.
    pub async fn list(&self) -> anyhow::Result<Vec<String>> {
        let prefix = (!self.prefix.is_empty()).then(|| Key::from(self.prefix.as_str()));
        let mut listing = self.objects("list objects")?.list(prefix.as_ref());
        let mut names = Vec::new();
        while let Some(meta) = listing.next().await {
            let meta = meta.map_err(|error| {
                anyhow::anyhow!("cannot list {}: {}", self.location, describe(&error))
            })?;
            let name = meta.location.as_ref();
            let relative = match &prefix {
                Some(prefix) => name
                    .strip_prefix(prefix.as_ref())
                    .map_or(name, |rest| rest.trim_start_matches('/')),
                None => name,
            };
            names.push(relative.to_owned());
        }
        names.sort();
        Ok(names)
    }

    /// Failed HTTP exchanges since the last call (each one object_store retried, or the
    /// last before it gave up).
    pub fn take_failures(&self) -> Vec<String> {
        self.failures.take()
    }
}

fn configuration(location: &BucketLocation, error: object_store::Error) -> anyhow::Error {
    anyhow::anyhow!("cannot configure {location}: {}", describe(&error))
}

/// An object_store error on one line, causes included (its own message is often only
/// "Generic S3 error").
fn describe(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn location(uri: &str, params: &[(&str, &str)]) -> BucketLocation {
        let params = params
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        match super::super::parse(uri, &params) {
            Ok(super::super::Destination::Bucket(location)) => location,
            other => panic!("{uri}: {other:?}"),
        }
    }

    /// No Azure server (nor Azurite) is available here: this shows the configuration
    /// an az:// location with an account and key builds, and nothing more.
    #[test]
    fn an_azure_location_with_account_and_key_builds_a_store() {
        let key = "c2VjcmV0LWF6dXJlLWtleS1ieXRlcw=="; // base64, as Azure hands them out
        let credentials = Credentials::Azure {
            account: None,
            key: AzureKey::AccessKey(key.into()),
        };
        let store = Store::bucket(
            &location("az://results/nightly", &[("account", "perfacct")]),
            &credentials,
            &Retry::default(),
        )
        .expect("an Azure store");
        assert_eq!(store.location(), "az://results/nightly");
        assert_eq!(store.key("r/a.jsonl").as_ref(), "nightly/r/a.jsonl");
        assert!(!format!("{store:?}").contains(key));

        let no_account = Store::bucket(
            &BucketLocation {
                account: None,
                ..location("az://results/nightly", &[])
            },
            &credentials,
            &Retry::default(),
        )
        .expect_err("no account");
        assert!(no_account.to_string().contains("no storage account"));
        let wrong = Store::bucket(
            &location("az://results", &[("account", "acct")]),
            &Credentials::Gcs {
                service_account_key: "{}".into(),
            },
            &Retry::default(),
        )
        .expect_err("GCS credentials for Azure");
        assert!(
            wrong.to_string().contains("cannot be used for a az://"),
            "{wrong}"
        );
    }

    #[test]
    fn an_s3_compatible_endpoint_builds_a_store_with_plain_http() {
        let store = Store::bucket(
            &location("s3://b/p", &[("endpoint", "http://127.0.0.1:9000")]),
            &Credentials::Aws {
                access_key_id: "id".into(),
                secret_access_key: "key".into(),
                session_token: None,
            },
            &Retry::default(),
        )
        .expect("an S3 store");
        assert_eq!(
            store.location(),
            "s3://b/p (endpoint http://127.0.0.1:9000)"
        );
    }
}
