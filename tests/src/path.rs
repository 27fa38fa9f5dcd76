//! The apiserver's URL layout.

use std::collections::HashMap;

/// A request path, classified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Version,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    Resources {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub plural: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The deprecated `/watch/` path prefix, which means the same as `?watch=true`.
    pub watch: bool,
}

pub(crate) fn parse(path: &str) -> Route {
    let segments: Vec<String> = path
        .split('/')
        .filter(|s| !s.is_empty())
        .map(percent_decode)
        .collect();
    let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
    match segments.as_slice() {
        ["version"] => Route::Version,
        ["api"] => Route::CoreVersions,
        ["apis"] => Route::Groups,
        ["apis", group] => Route::Group((*group).to_owned()),
        ["api", version] => Route::Resources {
            group: String::new(),
            version: (*version).to_owned(),
        },
        ["apis", group, version] => Route::Resources {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        },
        ["api", version, rest @ ..] => resource("", version, rest),
        ["apis", group, version, rest @ ..] => resource(group, version, rest),
        _ => Route::Unknown,
    }
}

fn resource(group: &str, version: &str, rest: &[&str]) -> Route {
    let (watch, rest) = match rest {
        ["watch", rest @ ..] => (true, rest),
        _ => (false, rest),
    };
    let own = |s: &&str| (*s).to_owned();
    let (namespace, plural, name, subresource) = match rest {
        // namespaces/{name}/status is the Namespace's own subresource, not a collection.
        ["namespaces", ns, sub @ ("status" | "finalize")] => {
            (None, "namespaces", Some(own(ns)), Some(own(sub)))
        }
        ["namespaces", ns, plural, tail @ ..] if tail.len() <= 2 => (
            Some(own(ns)),
            *plural,
            tail.first().map(own),
            tail.get(1).map(own),
        ),
        [plural, tail @ ..] if tail.len() <= 2 => {
            (None, *plural, tail.first().map(own), tail.get(1).map(own))
        }
        _ => return Route::Unknown,
    };
    Route::Resource(ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace,
        plural: plural.to_owned(),
        name,
        subresource,
        watch,
    })
}

/// Query parameters; a repeated key keeps its last value.
pub(crate) fn parse_query(query: Option<&str>) -> HashMap<String, String> {
    query
        .unwrap_or_default()
        .split('&')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

fn percent_decode(input: &str) -> String {
    let bytes = input.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(path: &str) -> ResourcePath {
        match parse(path) {
            Route::Resource(r) => r,
            other => panic!("{path}: {other:?}"),
        }
    }

    #[test]
    fn resource_paths() {
        let r = res("/api/v1/namespaces/ns/pods/p/status");
        assert_eq!(
            (r.group.as_str(), r.namespace.as_deref(), r.plural.as_str()),
            ("", Some("ns"), "pods")
        );
        assert_eq!(
            (r.name.as_deref(), r.subresource.as_deref()),
            (Some("p"), Some("status"))
        );
        let r = res("/apis/coordination.k8s.io/v1/leases");
        assert_eq!(
            (r.namespace, r.plural.as_str(), r.name),
            (None, "leases", None)
        );
        let r = res("/api/v1/namespaces/ns");
        assert_eq!(
            (r.plural.as_str(), r.name.as_deref()),
            ("namespaces", Some("ns"))
        );
        let r = res("/api/v1/namespaces/ns/status");
        assert_eq!(
            (r.plural.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("status"))
        );
        let r = res("/api/v1/watch/namespaces/ns/pods");
        assert!(r.watch);
        assert_eq!(parse("/apis/g/v/a/b/c/d"), Route::Unknown);
        assert_eq!(parse("/api"), Route::CoreVersions);
    }

    #[test]
    fn query_decoding() {
        let q = parse_query(Some("labelSelector=app%3Dweb%2Ctier+in+(a)&watch"));
        assert_eq!(q["labelSelector"], "app=web,tier in (a)");
        assert_eq!(q["watch"], "");
    }
}
