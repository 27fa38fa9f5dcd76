//! A minimal AWS Signature Version 4 signer for S3 object requests (header-based
//! authentication, no query-string presigning). Hand-written on `ring` (already in the
//! build as kube's TLS provider) instead of pulling in an AWS SDK: perfsweep only PUTs
//! and GETs objects, and this is ~100 lines against a published test vector.

use ring::{digest, hmac};

use super::Credentials;

/// `x-amz-content-sha256` of an empty payload.
pub const EMPTY_SHA256: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

/// Lowercase hex SHA-256 of a payload.
pub fn sha256_hex(payload: &[u8]) -> String {
    hex(digest::digest(&digest::SHA256, payload).as_ref())
}

/// One request to sign. `headers` must include `host`, `x-amz-date` and
/// `x-amz-content-sha256`; every header given is signed.
pub struct Request<'a> {
    pub method: &'a str,
    /// The already URI-encoded absolute path (see [`encode_path`]).
    pub path: &'a str,
    /// The canonical query string (sorted, encoded), empty when none.
    pub query: &'a str,
    pub headers: &'a [(&'a str, &'a str)],
    pub payload_sha256: &'a str,
    pub region: &'a str,
    /// `YYYYMMDDTHHMMSSZ`, the same value as the `x-amz-date` header.
    pub amz_date: &'a str,
}

/// The `Authorization` header value for `request`.
pub fn authorization(credentials: &Credentials, request: &Request<'_>) -> String {
    let mut headers: Vec<(String, String)> = request
        .headers
        .iter()
        .map(|(name, value)| (name.to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    headers.sort();
    let canonical_headers: String = headers
        .iter()
        .map(|(name, value)| format!("{name}:{value}\n"))
        .collect();
    let signed_headers = headers
        .iter()
        .map(|(name, _)| name.as_str())
        .collect::<Vec<_>>()
        .join(";");
    let canonical_request = format!(
        "{}\n{}\n{}\n{canonical_headers}\n{signed_headers}\n{}",
        request.method, request.path, request.query, request.payload_sha256
    );
    // The date part of `x-amz-date`; a malformed date only yields a signature the
    // server rejects, never a panic.
    let date = request.amz_date.get(..8).unwrap_or(request.amz_date);
    let scope = format!("{date}/{}/s3/aws4_request", request.region);
    let string_to_sign = format!(
        "AWS4-HMAC-SHA256\n{}\n{scope}\n{}",
        request.amz_date,
        sha256_hex(canonical_request.as_bytes())
    );
    let secret = format!("AWS4{}", credentials.secret_access_key);
    let key = sign(secret.as_bytes(), date.as_bytes());
    let key = sign(key.as_ref(), request.region.as_bytes());
    let key = sign(key.as_ref(), b"s3");
    let key = sign(key.as_ref(), b"aws4_request");
    let signature = hex(sign(key.as_ref(), string_to_sign.as_bytes()).as_ref());
    format!(
        "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    )
}

fn sign(key: &[u8], data: &[u8]) -> hmac::Tag {
    hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, key), data)
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

/// URI-encodes an object path as SigV4 wants it: every byte but the unreserved
/// characters and `/` percent-encoded (S3 does not double-encode).
pub fn encode_path(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/') {
            out.push(byte as char);
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The "GET Object" example of the AWS documentation ("Signature Calculations for
    /// the Authorization Header: Transferring Payload in a Single Chunk").
    #[test]
    fn the_published_get_object_example_signs_identically() {
        let credentials = Credentials {
            access_key_id: "AKIAIOSFODNN7EXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY".into(),
            session_token: None,
        };
        let headers = [
            ("Host", "examplebucket.s3.amazonaws.com"),
            ("Range", "bytes=0-9"),
            ("x-amz-content-sha256", EMPTY_SHA256),
            ("x-amz-date", "20130524T000000Z"),
        ];
        let authorization = authorization(
            &credentials,
            &Request {
                method: "GET",
                path: "/test.txt",
                query: "",
                headers: &headers,
                payload_sha256: EMPTY_SHA256,
                region: "us-east-1",
                amz_date: "20130524T000000Z",
            },
        );
        assert_eq!(
            authorization,
            "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, \
             SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, \
             Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"
        );
    }

    #[test]
    fn paths_are_encoded_except_unreserved_characters_and_slashes() {
        assert_eq!(encode_path("/b/run 1/a+b.txt"), "/b/run%201/a%2Bb.txt");
        assert_eq!(sha256_hex(b""), EMPTY_SHA256);
    }
}
