//! Which extra request headers a spec may give in clear. `requestHeaders` are recorded
//! as written (the spec, the pod's command line, every record and export), so a header
//! that carries a credential must come from a Secret (`requestHeaderSecrets`).
//!
//! A check of perfsweep's own rather than a CEL rule: a regular expression over the keys
//! of an unbounded map is the kind of rule whose estimated cost an API server refuses.

use crate::api::validation::FieldError;

use super::LLMInferenceSpec;

/// Words in a header name that say it carries a credential (compared lower-case):
/// `Authorization`, `Proxy-Authorization`, `api-key`, `X-Auth-Token`, `Cookie`, …
const CREDENTIAL_WORDS: &[&str] = &[
    "auth",
    "token",
    "secret",
    "passw",
    "cookie",
    "key",
    "credential",
    "session",
    "signature",
];

/// Whether a header of this name would carry a credential.
pub fn carries_a_credential(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    CREDENTIAL_WORDS.iter().any(|word| name.contains(word))
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
        } else if carries_a_credential(name) {
            errors.push(FieldError::new(
                path,
                format!("{name} looks like a credential, and requestHeaders are recorded in clear (spec, command line, records): give it in requestHeaderSecrets, which takes the value from a Secret"),
            ));
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
            assert!(!carries_a_credential(name), "{name}");
        }
        assert!(is_header_name("X-Team") && !is_header_name("X Team") && !is_header_name(""));
    }
}
