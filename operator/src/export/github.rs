//! `github://owner/repo[@tag]`: results uploaded as assets of a GitHub release (OME's
//! format), through GitHub's REST API: the release is looked up by tag (the latest
//! release without one), and each object becomes an asset named after its key with `/`
//! replaced by `__` (asset names are flat).
//!
//! The API's base URL is `https://api.github.com` unless the parameter `endpoint` names
//! another (GitHub Enterprise Server's `https://host/api/v3`, or a test server).

use anyhow::Context;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// GitHub's public API.
pub const API: &str = "https://api.github.com";

/// A release to upload assets to.
#[derive(Clone, Debug, PartialEq)]
pub struct Release {
    pub owner: String,
    pub repo: String,
    /// The release's tag; the latest release when absent.
    pub tag: Option<String>,
    /// The API's base URL.
    pub endpoint: Option<String>,
    /// The Secret holding `GITHUB_TOKEN` (operator only).
    pub secret_name: Option<String>,
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "github://{}/{}", self.owner, self.repo)?;
        match &self.tag {
            Some(tag) => write!(f, "@{tag}"),
            None => write!(f, " (latest release)"),
        }
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl Release {
    /// Parses `owner/repo[@tag]` (what follows `github://`).
    pub fn parse(
        rest: &str,
        endpoint: Option<String>,
        secret_name: Option<String>,
    ) -> anyhow::Result<Self> {
        let (path, tag) = match rest.split_once('@') {
            Some((path, tag)) => (path, Some(tag)),
            None => (rest, None),
        };
        let path = path.trim_end_matches('/');
        let Some((owner, repo)) = path.split_once('/') else {
            anyhow::bail!("expected github://owner/repo[@tag]");
        };
        if !valid_name(owner) || !valid_name(repo) {
            anyhow::bail!("expected github://owner/repo[@tag] (owner and repo without '/')");
        }
        if tag.is_some_and(|t| t.is_empty() || t.contains(char::is_whitespace)) {
            anyhow::bail!("the tag after @ must be a tag name");
        }
        Ok(Self {
            owner: owner.into(),
            repo: repo.into(),
            tag: tag.map(str::to_owned),
            endpoint,
            secret_name,
        })
    }

    /// The asset name of an object key.
    pub fn asset_name(key: &str) -> String {
        key.trim_matches('/').replace('/', "__")
    }
}

type Https = hyper_rustls::HttpsConnector<HttpConnector>;

/// An open release: a client and the token.
pub struct Uploader {
    release: Release,
    token: String,
    client: Client<Https, Full<Bytes>>,
}

impl std::fmt::Debug for Uploader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Uploader")
            .field("release", &self.release.to_string())
            .finish_non_exhaustive()
    }
}

impl Uploader {
    pub fn new(release: Release, token: String) -> anyhow::Result<Self> {
        let connector = super::http::https_or_http(std::time::Duration::from_secs(10))?;
        Ok(Self {
            release,
            token,
            client: Client::builder(TokioExecutor::new()).build(connector),
        })
    }

    async fn request(
        &self,
        method: ::http::Method,
        url: &str,
        body: Bytes,
    ) -> anyhow::Result<(::http::StatusCode, Bytes)> {
        let request = ::http::Request::builder()
            .method(method)
            .uri(url)
            .header("authorization", format!("Bearer {}", self.token))
            .header("accept", "application/vnd.github+json")
            .header("user-agent", "perfsweep")
            .header("x-github-api-version", "2022-11-28")
            .header("content-type", "application/octet-stream")
            .body(Full::new(body))
            .context("building the request")?;
        let what = url.split('?').next().unwrap_or(url).to_owned();
        let response = tokio::time::timeout(
            std::time::Duration::from_mins(2),
            self.client.request(request),
        )
        .await
        .with_context(|| format!("{what}: timed out"))?
        .with_context(|| format!("{what}: request failed"))?;
        let status = response.status();
        let body = response
            .into_body()
            .collect()
            .await
            .with_context(|| format!("{what}: reading the response"))?
            .to_bytes();
        Ok((status, body))
    }

    /// The upload URL of the release (`.../releases/{id}/assets`).
    async fn upload_url(&self) -> anyhow::Result<String> {
        let api = self
            .release
            .endpoint
            .as_deref()
            .unwrap_or(API)
            .trim_end_matches('/');
        let (owner, repo) = (&self.release.owner, &self.release.repo);
        let url = match &self.release.tag {
            Some(tag) => format!(
                "{api}/repos/{owner}/{repo}/releases/tags/{}",
                percent_encode(tag)
            ),
            None => format!("{api}/repos/{owner}/{repo}/releases/latest"),
        };
        let (status, body) = self
            .request(::http::Method::GET, &url, Bytes::new())
            .await?;
        if !status.is_success() {
            anyhow::bail!(
                "{}: looking up the release answered HTTP {status}{}",
                self.release,
                if status == ::http::StatusCode::NOT_FOUND {
                    " (no such release, or the token cannot see the repository)"
                } else {
                    ""
                }
            );
        }
        let release: serde_json::Value =
            serde_json::from_slice(&body).context("the release is not JSON")?;
        let template = release["upload_url"]
            .as_str()
            .context("the release has no upload_url")?;
        // `https://uploads.github.com/repos/o/r/releases/1/assets{?name,label}`
        let upload = template
            .split_once('{')
            .map_or(template, |(url, _)| url)
            .to_owned();
        // The token goes with the upload: only to GitHub's own upload host.
        check_upload_host(api, &upload).with_context(|| format!("{}", self.release))?;
        Ok(upload)
    }

    /// Uploads one asset; an asset of the same name already there is an error (GitHub
    /// keeps the first), reported as such.
    pub async fn put(&self, key: &str, body: Bytes) -> anyhow::Result<()> {
        let upload = self.upload_url().await?;
        let name = Release::asset_name(key);
        let url = format!("{upload}?name={}", percent_encode(&name));
        let (status, response) = self.request(::http::Method::POST, &url, body).await?;
        if status.is_success() {
            return Ok(());
        }
        // GitHub's own answer says why; a server of another endpoint's is not echoed into
        // the benchmark's status (whatever it answers stays there).
        let detail = if self.release.endpoint.is_none() {
            let detail = String::from_utf8_lossy(&response);
            format!(": {}", detail.chars().take(200).collect::<String>())
        } else {
            String::new()
        };
        anyhow::bail!(
            "{}: uploading asset {name} answered HTTP {status}{detail}",
            self.release
        )
    }

    pub fn location(&self) -> String {
        self.release.to_string()
    }
}

/// GitHub's upload host for its public API; a GitHub Enterprise Server (or any other
/// endpoint) uploads to its own host.
const UPLOADS: &str = "uploads.github.com";

/// The upload URL a release names must be GitHub's upload host for the public API, or
/// the endpoint's own host (scheme included) otherwise: a release (or a server posing as
/// the API) naming another host would receive the token.
fn check_upload_host(api: &str, upload: &str) -> anyhow::Result<()> {
    let api: ::http::Uri = api.parse().context("the API endpoint is not a URL")?;
    let upload_uri: ::http::Uri = upload
        .parse()
        .with_context(|| format!("the release's upload_url {upload:?} is not a URL"))?;
    let expected_host = if api.host() == Some("api.github.com") {
        UPLOADS
    } else {
        api.host().unwrap_or_default()
    };
    let same_scheme = upload_uri.scheme_str() == api.scheme_str();
    let same_port = api.host() == Some("api.github.com") || upload_uri.port_u16() == api.port_u16();
    if upload_uri.host() != Some(expected_host) || !same_scheme || !same_port {
        anyhow::bail!(
            "the release's upload_url is at {}, not {expected_host}: the token is not sent there",
            upload_uri.authority().map_or("no host", |a| a.as_str())
        );
    }
    Ok(())
}

/// `text` as one URL path segment or query value: everything but RFC 3986's unreserved
/// characters percent-encoded (a tag may hold `/`, `?`, `#`).
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_asset_names_are_encoded() {
        assert_eq!(percent_encode("v1.0.0"), "v1.0.0");
        assert_eq!(percent_encode("a/../b?x#y"), "a%2F..%2Fb%3Fx%23y");
    }

    /// Issue 24: the token went to whatever `upload_url` the release lookup returned.
    #[test]
    fn the_token_goes_only_to_githubs_upload_host() {
        let ok = |api: &str, upload: &str| check_upload_host(api, upload).is_ok();
        assert!(ok(
            API,
            "https://uploads.github.com/repos/o/r/releases/1/assets"
        ));
        assert!(!ok(
            API,
            "https://attacker.example/repos/o/r/releases/1/assets"
        ));
        assert!(!ok(
            API,
            "http://uploads.github.com/repos/o/r/releases/1/assets"
        ));
        let ghe = "https://ghe.corp/api/v3";
        assert!(ok(
            ghe,
            "https://ghe.corp/api/uploads/repos/o/r/releases/1/assets"
        ));
        assert!(!ok(
            ghe,
            "https://uploads.github.com/repos/o/r/releases/1/assets"
        ));
        assert!(!ok("http://127.0.0.1:8080", "http://127.0.0.1:9999/assets"));
        assert!(ok("http://127.0.0.1:8080", "http://127.0.0.1:8080/assets"));
    }

    #[test]
    fn owner_repo_and_tag_parse_and_keys_become_flat_asset_names() {
        let release = Release::parse("myorg/myrepo@v1.0.0", None, None).expect("valid");
        assert_eq!(
            (
                release.owner.as_str(),
                release.repo.as_str(),
                release.tag.as_deref()
            ),
            ("myorg", "myrepo", Some("v1.0.0"))
        );
        assert_eq!(Release::parse("o/r", None, None).expect("valid").tag, None);
        assert!(Release::parse("just-owner", None, None).is_err());
        assert!(Release::parse("o/r/extra", None, None).is_err());
        assert!(Release::parse("o/r@", None, None).is_err());
        assert_eq!(
            Release::asset_name("run-1/evidence/ab.txt"),
            "run-1__evidence__ab.txt"
        );
    }
}
