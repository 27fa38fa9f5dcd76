//! HTTP requests to store operations and back, with request logging and fault injection.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Incoming;
use serde_json::{Value, json};

use crate::discovery;
use crate::error::ApiError;
use crate::logs::{LogQuery, PodLogs};
use crate::meta;
use crate::patch::PatchKind;
use crate::path::{self, ResourcePath, Route};
use crate::registry::ResourceType;
use crate::requests::{RecordedRequest, RequestLog};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, Propagation, Store, Target, WatchStart};
use crate::watch::{self, WatchFilter, render};

pub(crate) type Body = UnsyncBoxBody<Bytes, Infallible>;

/// Watches without `timeoutSeconds` end after this long (the apiserver picks 30–60 min;
/// shorter keeps a forgotten watch from outliving a test run).
const DEFAULT_WATCH_TIMEOUT: Duration = Duration::from_mins(5);

pub(crate) struct Shared {
    pub store: Store,
    pub log: RequestLog,
    /// Container logs served at `pods/{name}/log`.
    pub pod_logs: PodLogs,
    /// `host:port`, advertised in `/api`.
    pub address: String,
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    /// The service account's rules, once a test enforces them.
    pub rbac: std::sync::RwLock<Option<crate::rbac::Rbac>>,
    /// Whether Volcano's pod admission webhook is played ([`crate::admission::volcano_pod`]).
    pub volcano_pod_admission: std::sync::atomic::AtomicBool,
}

/// Whether the request carries the service account's token (and so is authorized).
fn from_service_account(headers: &http::HeaderMap) -> bool {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        == Some(crate::rbac::SERVICE_ACCOUNT_TOKEN)
}

pub(crate) async fn handle(shared: Arc<Shared>, request: Request<Incoming>) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let path = parts.uri.path().to_owned();
    let query = path::parse_query(parts.uri.query());
    match path::parse(&path) {
        Route::Resource(target) => {
            let content_type = parts
                .headers
                .get(header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("application/json")
                .to_owned();
            let request = ResourceRequest {
                service_account: from_service_account(&parts.headers),
                method: parts.method,
                target,
                query,
                content_type,
            };
            resource_request(&shared, request, body, path).await
        }
        route => {
            let response = match parts.method {
                Method::GET => non_resource(&shared, route),
                _ => Err(ApiError::method_not_allowed()),
            };
            let response = response.unwrap_or_else(|e| error_response(&e));
            shared.log.record(RecordedRequest {
                verb: "get".into(),
                group: String::new(),
                version: String::new(),
                resource: String::new(),
                subresource: None,
                namespace: None,
                name: None,
                status_code: response.status().as_u16(),
                path,
            });
            response
        }
    }
}

fn non_resource(shared: &Shared, route: Route) -> Result<Response<Body>, ApiError> {
    let types = shared.store.resource_types();
    let document = match route {
        Route::Version => Some(discovery::version()),
        Route::CoreVersions => Some(discovery::core_versions(&shared.address)),
        Route::Groups => Some(discovery::group_list(&types)),
        Route::Group(group) => discovery::group(&types, &group),
        Route::Resources { group, version } => discovery::resource_list(&types, &group, &version),
        Route::Resource(_) | Route::Unknown => None,
    };
    document
        .map(|doc| json_response(StatusCode::OK, &doc))
        .ok_or_else(ApiError::unknown_resource)
}

struct ResourceRequest {
    /// Made with the service account's token: RBAC applies.
    service_account: bool,
    method: Method,
    target: ResourcePath,
    query: HashMap<String, String>,
    content_type: String,
}

impl ResourceRequest {
    fn param(&self, key: &str) -> Option<&str> {
        self.query.get(key).map(String::as_str)
    }

    fn flag(&self, key: &str) -> Result<Option<bool>, ApiError> {
        self.param(key).map(parse_bool).transpose()
    }

    /// The RBAC verb, or `None` for a method the URL does not support.
    fn verb(&self) -> Result<Option<&'static str>, ApiError> {
        let item = self.target.name.is_some();
        Ok(match self.method {
            Method::GET if self.target.watch || self.flag("watch")? == Some(true) => Some("watch"),
            Method::GET if item => Some("get"),
            Method::GET => Some("list"),
            Method::POST if !item => Some("create"),
            Method::PUT if item => Some("update"),
            Method::PATCH if item => Some("patch"),
            Method::DELETE if item => Some("delete"),
            Method::DELETE => Some("deletecollection"),
            _ => None,
        })
    }

    fn labels(&self) -> Result<LabelSelector, ApiError> {
        LabelSelector::parse(self.param("labelSelector").unwrap_or_default())
    }

    fn fields(&self) -> Result<FieldSelector, ApiError> {
        FieldSelector::parse(
            self.param("fieldSelector").unwrap_or_default(),
            &self.target.plural,
        )
    }

    fn target_part(&self) -> Target {
        if self.target.subresource.is_some() {
            Target::Status
        } else {
            Target::Main
        }
    }
}

/// Go's `strconv.ParseBool`, which the apiserver uses for boolean query parameters.
fn parse_bool(value: &str) -> Result<bool, ApiError> {
    match value {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Ok(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Ok(false),
        other => Err(ApiError::bad_request(format!(
            "invalid boolean value {other:?}"
        ))),
    }
}

async fn resource_request(
    shared: &Arc<Shared>,
    request: ResourceRequest,
    body: Incoming,
    path: String,
) -> Response<Body> {
    let verb = request.verb();
    let mut record = RecordedRequest {
        verb: match &verb {
            Ok(Some(verb)) => (*verb).to_owned(),
            _ => request.method.as_str().to_lowercase(),
        },
        group: request.target.group.clone(),
        version: request.target.version.clone(),
        resource: request.target.plural.clone(),
        subresource: request.target.subresource.clone(),
        namespace: request.target.namespace.clone(),
        name: request.target.name.clone(),
        status_code: 0,
        path,
    };
    let outcome = match verb {
        Err(e) => Err(e),
        Ok(None) => Err(ApiError::method_not_allowed()),
        Ok(Some(verb)) => match authorize(shared, &request, &record) {
            Err(denied) => Err(denied),
            Ok(()) => match shared.log.take_fault(&record) {
                Some(injected) => Err(injected),
                None => dispatch(shared, verb, &request, body).await,
            },
        },
    };
    let response = outcome.unwrap_or_else(|e| error_response(&e));
    record.status_code = response.status().as_u16();
    shared.log.record(record);
    response
}

/// The authorizer runs before anything else, as in the apiserver's filter chain.
fn authorize(
    shared: &Shared,
    request: &ResourceRequest,
    record: &RecordedRequest,
) -> Result<(), ApiError> {
    if !request.service_account {
        return Ok(());
    }
    let rbac = shared
        .rbac
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match rbac.as_ref() {
        Some(rbac) => rbac.authorize(record),
        None => Ok(()),
    }
}

async fn dispatch(
    shared: &Arc<Shared>,
    verb: &str,
    request: &ResourceRequest,
    body: Incoming,
) -> Result<Response<Body>, ApiError> {
    let target = &request.target;
    let rt = shared
        .store
        .resolve(&target.group, &target.version, &target.plural)
        .ok_or_else(ApiError::unknown_resource)?;
    let scope_ok = if rt.namespaced {
        target.namespace.is_some() || target.name.is_none()
    } else {
        target.namespace.is_none()
    };
    let is_pod_log = rt.group.is_empty() && rt.plural == "pods";
    let subresource_ok = match target.subresource.as_deref() {
        None => true,
        Some("status") => rt.status_subresource,
        Some("log") => is_pod_log,
        Some(_) => false,
    };
    if !scope_ok || !subresource_ok {
        return Err(ApiError::unknown_resource());
    }
    let ns = target.namespace.as_deref();
    let name = target.name.as_deref().unwrap_or_default();
    let store = &shared.store;
    if target.subresource.as_deref() == Some("log") {
        if verb != "get" {
            return Err(ApiError::method_not_allowed());
        }
        let ns = ns.unwrap_or_default();
        let pod = store.get(&rt, ns, name)?;
        let selected = shared
            .pod_logs
            .read(ns, &pod, &LogQuery::parse(&request.query)?)?;
        return Ok(streamed_text_response(selected.into_chunks()));
    }
    match verb {
        "get" => {
            let obj = store.get(&rt, ns.unwrap_or_default(), name)?;
            Ok(object_response(StatusCode::OK, &rt, obj))
        }
        "list" => {
            let (items, rv) = store.list(&rt, ns, &request.labels()?, &request.fields()?);
            Ok(list_response(&rt, items, rv))
        }
        "watch" => start_watch(shared, rt, request),
        "create" => {
            let Some(ns) = ns.or((!rt.namespaced).then_some("")) else {
                return Err(ApiError::method_not_allowed());
            };
            let body = read_json(body).await?;
            if crate::admission::is_pods(&rt)
                && shared
                    .volcano_pod_admission
                    .load(std::sync::atomic::Ordering::Relaxed)
            {
                crate::admission::volcano_pod(store, ns, &body)?;
            }
            let obj = store.create(&rt, ns, body)?;
            Ok(object_response(StatusCode::CREATED, &rt, obj))
        }
        "update" => {
            let body = read_json(body).await?;
            let obj = store.update(
                &rt,
                ns.unwrap_or_default(),
                name,
                body,
                request.target_part(),
            )?;
            Ok(object_response(StatusCode::OK, &rt, obj))
        }
        "patch" => {
            let kind = PatchKind::from_content_type(&request.content_type)?;
            if kind == PatchKind::Apply
                && request.param("fieldManager").unwrap_or_default().is_empty()
            {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch",
                ));
            }
            request.flag("force")?;
            let body = read_bytes(body).await?;
            let (obj, created) = store.patch(
                &rt,
                ns.unwrap_or_default(),
                name,
                kind,
                &body,
                request.target_part(),
                request.param("fieldManager"),
            )?;
            let code = if created {
                StatusCode::CREATED
            } else {
                StatusCode::OK
            };
            Ok(object_response(code, &rt, obj))
        }
        "delete" => {
            let opts = delete_options(request, &read_bytes(body).await?)?;
            let deleted = store.delete(&rt, ns.unwrap_or_default(), name, &opts)?;
            Ok(delete_response(&rt, deleted.object, deleted.removed))
        }
        "deletecollection" => {
            let opts = delete_options(request, &read_bytes(body).await?)?;
            let items =
                store.delete_collection(&rt, ns, &request.labels()?, &request.fields()?, &opts);
            let rv = store.resource_version();
            Ok(list_response(&rt, items, rv))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn start_watch(
    shared: &Arc<Shared>,
    rt: ResourceType,
    request: &ResourceRequest,
) -> Result<Response<Body>, ApiError> {
    let mut fields = request.fields()?;
    if let Some(name) = &request.target.name {
        fields = fields.and(FieldSelector::name(name));
    }
    let filter = WatchFilter {
        rt,
        namespace: request.target.namespace.clone(),
        labels: request.labels()?,
        fields,
    };
    let rv = request.param("resourceVersion").unwrap_or_default();
    let start = match request.flag("sendInitialEvents")? {
        Some(true) => {
            if request.param("resourceVersionMatch") != Some("NotOlderThan") {
                return Err(ApiError::new(
                    422,
                    "Invalid",
                    "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            WatchStart::Snapshot { bookmark: true }
        }
        Some(false) if rv.is_empty() || rv == "0" => WatchStart::Now,
        None if rv.is_empty() || rv == "0" => WatchStart::Snapshot { bookmark: false },
        _ => WatchStart::After(
            rv.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let timeout = match request.param("timeoutSeconds") {
        Some(secs) => Duration::from_secs(
            secs.parse()
                .map_err(|_| ApiError::bad_request(format!("invalid timeoutSeconds: {secs:?}")))?,
        ),
        None => DEFAULT_WATCH_TIMEOUT,
    };
    let deadline = tokio::time::Instant::now() + timeout;
    let stream = shared.store.watch(filter, start);
    let frames = watch::frames(stream, deadline, shared.shutdown.clone());
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(StreamBody::new(frames).boxed_unsync())
        .map_err(|e| ApiError::new(500, "InternalError", e.to_string()))
}

fn delete_options(request: &ResourceRequest, body: &[u8]) -> Result<DeleteOptions, ApiError> {
    let mut opts = DeleteOptions::default();
    if let Some(policy) = request.param("propagationPolicy") {
        opts.propagation = Propagation::parse(policy)?;
    }
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(opts);
    }
    let body: Value = serde_json::from_slice(body)
        .map_err(|e| ApiError::bad_request(format!("invalid DeleteOptions: {e}")))?;
    if body.get("orphanDependents").and_then(Value::as_bool) == Some(true) {
        opts.propagation = Propagation::Orphan;
    }
    if let Some(policy) = body.get("propagationPolicy").and_then(Value::as_str) {
        opts.propagation = Propagation::parse(policy)?;
    }
    let precondition = |field: &str| {
        body.get("preconditions")
            .and_then(|p| p.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    opts.precondition_uid = precondition("uid");
    opts.precondition_rv = precondition("resourceVersion");
    Ok(opts)
}

async fn read_bytes(body: Incoming) -> Result<Bytes, ApiError> {
    body.collect()
        .await
        .map(http_body_util::Collected::to_bytes)
        .map_err(|e| ApiError::bad_request(format!("failed to read the request body: {e}")))
}

async fn read_json(body: Incoming) -> Result<Value, ApiError> {
    let bytes = read_bytes(body).await?;
    serde_json::from_slice(&bytes)
        .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    let mut response = Response::new(Full::new(Bytes::from(value.to_string())).boxed_unsync());
    *response.status_mut() = code;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

/// A text body made one chunk at a time as the client reads it (a huge pod log).
fn streamed_text_response(chunks: Box<dyn Iterator<Item = Bytes> + Send>) -> Response<Body> {
    let frames = futures::stream::iter(chunks.map(|chunk| Ok(hyper::body::Frame::data(chunk))));
    let mut response = Response::new(http_body_util::StreamBody::new(frames).boxed_unsync());
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("text/plain"),
    );
    response
}

fn object_response(code: StatusCode, rt: &ResourceType, obj: Value) -> Response<Body> {
    json_response(code, &render(rt, obj))
}

fn list_response(rt: &ResourceType, items: Vec<Value>, rv: u64) -> Response<Body> {
    let items: Vec<Value> = items.into_iter().map(|obj| render(rt, obj)).collect();
    json_response(
        StatusCode::OK,
        &json!({
            "apiVersion": rt.api_version(),
            "kind": format!("{}List", rt.kind),
            "metadata": {"resourceVersion": rv.to_string()},
            "items": items,
        }),
    )
}

/// 202 with the object while finalizers hold it. Once gone, pods answer with the
/// object and other kinds with a `Success` Status, as their registry strategies do.
fn delete_response(rt: &ResourceType, obj: Value, removed: bool) -> Response<Body> {
    if !removed {
        return object_response(StatusCode::ACCEPTED, rt, obj);
    }
    if rt.group.is_empty() && rt.plural == "pods" {
        return object_response(StatusCode::OK, rt, obj);
    }
    json_response(
        StatusCode::OK,
        &json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Success",
            "details": {
                "name": meta::name(&obj).unwrap_or_default(),
                "group": rt.group,
                "kind": rt.plural,
                "uid": meta::uid(&obj).unwrap_or_default(),
            },
        }),
    )
}

fn error_response(error: &ApiError) -> Response<Body> {
    let code = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    json_response(code, &error.to_status())
}
