//! Which extra request headers a spec may give in clear. `requestHeaders` are recorded
//! as written (the spec, the pod's command line, every record and export), so a header
//! that carries a credential must come from a Secret (`requestHeaderSecrets`).
//!
//! A check of perfsweep's own rather than a CEL rule: a regular expression over the keys
//! of an unbounded map is the kind of rule whose estimated cost an API server refuses.

use crate::api::validation::FieldError;

use super::LLMInferenceSpec;

/// Headers known to carry no secret, which `requestHeaders` may give in clear (compared
/// lower-case). An allow-list rather than a list of suspicious words: a word list always
/// misses a name (`X-Pwd`, `X-Jwt`, `X-Bearer`). Any other header goes in
/// `requestHeaderSecrets`, from a Secret.
pub const PLAIN_HEADERS: &[&str] = &[
    "accept",
    "accept-encoding",
    "accept-language",
    "anthropic-beta",
    "anthropic-version",
    "cache-control",
    "content-type",
    "openai-beta",
    "openai-organization",
    "openai-project",
    "traceparent",
    "tracestate",
    "user-agent",
    "x-client-name",
    "x-correlation-id",
    "x-model",
    "x-request-id",
    "x-request-priority",
    "x-team",
    "x-tenant",
];

/// Words in a name (of a URL query parameter, a request body parameter) that say it
/// carries a credential (compared lower-case), where no allow-list can be had.
const CREDENTIAL_WORDS: &[&str] = &[
    "auth",
    "token",
    "secret",
    "pass",
    "pwd",
    "cookie",
    "key",
    "credential",
    "session",
    "signature",
    "sig",
    "jwt",
    "bearer",
    "private",
    "sas",
    "otp",
];

/// Whether a header of this name may be given in clear.
pub fn is_plain_header(name: &str) -> bool {
    PLAIN_HEADERS.contains(&name.to_ascii_lowercase().as_str())
}

/// Whether a parameter of this name would carry a credential.
pub fn carries_a_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
}

/// What is wrong with an endpoint URL that would carry a credential in clear (the spec,
/// the pod's command line, every record): `user:password@`, or a query parameter whose
/// name says it is one (`?key=`, `?sig=`).
fn url_credential(url: &str) -> Option<String> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    if authority.contains('@') {
        return Some(
            "the URL carries credentials (user:password@), which would be recorded in clear: give them in requestHeaderSecrets (e.g. Authorization) instead".into(),
        );
    }
    let query = rest
        .split_once('?')
        .map(|(_, q)| q.split('#').next().unwrap_or_default())?;
    let name = query
        .split('&')
        .map(|pair| pair.split('=').next().unwrap_or_default())
        .find(|name| carries_a_credential(name))?;
    Some(format!(
        "the query parameter {name:?} looks like a credential, and the URL is recorded in clear: give it in requestHeaderSecrets (e.g. api-key) instead"
    ))
}

/// RFC 9110's `token`: what a header name may be.
fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

pub(super) fn check(spec: &LLMInferenceSpec) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for name in spec.request_headers.keys() {
        let path = format!("spec.requestHeaders[{name}]");
        if !is_header_name(name) {
            errors.push(FieldError::new(path, "not an HTTP header name"));
        } else if !is_plain_header(name) {
            errors.push(FieldError::new(
                path,
                format!("{name} is not one of the headers known to carry no secret ({}), and requestHeaders are recorded in clear (spec, command line, records): give it in requestHeaderSecrets, which takes the value from a Secret", PLAIN_HEADERS.join(", ")),
            ));
        }
    }
    for name in spec.additional_request_params.keys() {
        if carries_a_credential(name) {
            errors.push(FieldError::new(
                format!("spec.additionalRequestParams[{name}]"),
                format!("{name} looks like a credential, and additionalRequestParams are recorded in clear: give credentials in requestHeaderSecrets"),
            ));
        }
    }
    let urls = [
        ("spec.endpoint.url", spec.endpoint.url.as_deref()),
        (
            "spec.endpoint.endpoint.url",
            spec.endpoint.endpoint.as_ref().map(|e| e.url.as_str()),
        ),
    ];
    for (path, url) in urls {
        if let Some(why) = url.and_then(url_credential) {
            errors.push(FieldError::new(path, why));
        }
    }
    for name in spec.request_header_secrets.keys() {
        if !is_header_name(name) {
            errors.push(FieldError::new(
                format!("spec.requestHeaderSecrets[{name}]"),
                "not an HTTP header name (an HTTP token: letters, digits and !#$%&'*+-.^_`|~)",
            ));
        }
        if spec.request_headers.contains_key(name) {
            errors.push(FieldError::new(
                format!("spec.requestHeaderSecrets[{name}]"),
                "also in requestHeaders: give each header once",
            ));
        }
    }
    errors
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credential_names_are_told_apart_from_others() {
        for name in [
            "Authorization",
            "api-key",
            "X-API-KEY",
            "Cookie",
            "X-Amz-Security-Token",
        ] {
            assert!(carries_a_credential(name), "{name}");
        }
        for name in [
            "X-Team",
            "X-Request-Priority",
            "OpenAI-Organization",
            "Accept",
        ] {
            assert!(is_plain_header(name), "{name}");
        }
        // Issue 34, finding 6: names a word list missed are not plain either.
        for name in ["X-Pwd", "X-Jwt", "X-Bearer", "X-Custom", "Authorization"] {
            assert!(!is_plain_header(name), "{name}");
        }
        for name in ["X-Pwd", "X-Jwt", "X-Bearer", "sig", "sv_sas"] {
            assert!(carries_a_credential(name), "{name}");
        }
    }

    /// Issue 34, finding 6: `user:pass@` or `?key=` in an endpoint URL was recorded in
    /// clear.
    #[test]
    fn an_endpoint_url_carrying_credentials_is_refused() {
        for url in [
            "http://user:pass@vllm:8000",
            "https://llm.example/v1?api_key=s3cret",
            "https://x.openai.azure.com/openai?api-version=2024-02-01&sig=abc",
        ] {
            assert!(url_credential(url).is_some(), "{url}");
        }
        for url in [
            "http://vllm:8000",
            "https://x.openai.azure.com/openai?api-version=2024-02-01",
            "http://vllm:8000/v1/completions",
        ] {
            assert_eq!(url_credential(url), None, "{url}");
        }
        assert!(is_header_name("X-Team") && !is_header_name("X Team") && !is_header_name(""));
    }
}
