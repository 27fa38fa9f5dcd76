//! The request log and fault injection.

use std::sync::Mutex;

use crate::error::ApiError;

/// One HTTP request the double answered, named the way RBAC names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordedRequest {
    /// RBAC verb: `get`, `list`, `watch`, `create`, `update`, `patch`, `delete` or
    /// `deletecollection`. Non-resource requests (discovery, `/version`) are `get`.
    pub verb: String,
    /// API group; empty for core (and for non-resource requests).
    pub group: String,
    /// API version; empty for non-resource requests.
    pub version: String,
    /// Plural resource; empty for non-resource requests.
    pub resource: String,
    /// E.g. `status`.
    pub subresource: Option<String>,
    /// Namespace from the URL.
    pub namespace: Option<String>,
    /// Object name from the URL.
    pub name: Option<String>,
    /// HTTP status code of the response (200 for a watch that started streaming).
    pub status_code: u16,
    /// Request path without the query string.
    pub path: String,
}

impl RecordedRequest {
    /// Whether this was a request against a resource (not discovery or `/version`).
    pub fn is_resource_request(&self) -> bool {
        !self.resource.is_empty()
    }

    /// `resource` or `resource/subresource`, as written in RBAC rules.
    pub fn rbac_resource(&self) -> String {
        match &self.subresource {
            Some(sub) => format!("{}/{sub}", self.resource),
            None => self.resource.clone(),
        }
    }
}

/// Selects requests for [`crate::ApiDouble::fail_next`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMatcher {
    /// RBAC verb to match (`None`: any).
    pub verb: Option<String>,
    /// `plural` or `plural/subresource` to match (`None`: any resource request).
    pub resource: Option<String>,
    /// How many matching requests to fail.
    pub count: usize,
}

impl RequestMatcher {
    /// Matches the next request with this verb on this resource (`plural` or
    /// `plural/subresource`), once.
    pub fn new(verb: &str, resource: &str) -> Self {
        Self {
            verb: Some(verb.to_owned()),
            resource: Some(resource.to_owned()),
            count: 1,
        }
    }

    /// Matches any resource request, once.
    pub fn any() -> Self {
        Self {
            verb: None,
            resource: None,
            count: 1,
        }
    }

    /// Fails `count` matching requests instead of one.
    #[must_use]
    pub fn times(mut self, count: usize) -> Self {
        self.count = count;
        self
    }

    fn matches(&self, request: &RecordedRequest) -> bool {
        request.is_resource_request()
            && self.verb.as_ref().is_none_or(|v| *v == request.verb)
            && self
                .resource
                .as_ref()
                .is_none_or(|r| *r == request.rbac_resource())
    }
}

#[derive(Debug)]
struct Fault {
    matcher: RequestMatcher,
    error: ApiError,
}

#[derive(Debug, Default)]
pub(crate) struct RequestLog {
    requests: Mutex<Vec<RecordedRequest>>,
    faults: Mutex<Vec<Fault>>,
}

impl RequestLog {
    pub fn record(&self, request: RecordedRequest) {
        lock(&self.requests).push(request);
    }

    pub fn snapshot(&self) -> Vec<RecordedRequest> {
        lock(&self.requests).clone()
    }

    pub fn clear(&self) {
        lock(&self.requests).clear();
    }

    pub fn len(&self) -> usize {
        lock(&self.requests).len()
    }

    pub fn add_fault(&self, matcher: RequestMatcher, error: ApiError) {
        if matcher.count > 0 {
            lock(&self.faults).push(Fault { matcher, error });
        }
    }

    /// Disarms every injected failure.
    pub fn clear_faults(&self) {
        lock(&self.faults).clear();
    }

    /// The injected error for this request, if one is armed; consumes one use.
    pub fn take_fault(&self, request: &RecordedRequest) -> Option<ApiError> {
        let mut faults = lock(&self.faults);
        let index = faults.iter().position(|f| f.matcher.matches(request))?;
        let fault = &mut faults[index];
        let error = fault.error.clone();
        fault.matcher.count -= 1;
        if fault.matcher.count == 0 {
            faults.remove(index);
        }
        Some(error)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
