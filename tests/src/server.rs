//! The HTTP server's lifecycle and the test-facing [`ApiDouble`] handle.

use std::convert::Infallible;
use std::path::Path;
use std::sync::{Arc, RwLock};

use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::error::ApiError;
use crate::gvr::Gvr;
use crate::handler::{Shared, handle};
use crate::logs::PodLogs;
use crate::patch::PatchKind;
use crate::registry::{ResourceType, types_from_crd};
use crate::requests::{RecordedRequest, RequestLog, RequestMatcher};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{DeleteOptions, Store, Target};

/// An in-memory Kubernetes API server listening on `127.0.0.1`, serving until dropped.
pub struct ApiDouble {
    shared: Arc<Shared>,
    url: String,
    stop: watch::Sender<bool>,
    accept_loop: JoinHandle<()>,
}

impl ApiDouble {
    /// Binds `127.0.0.1:0` and starts serving on the current tokio runtime.
    ///
    /// # Panics
    /// If no loopback port can be bound, since no test could proceed.
    pub async fn start() -> ApiDouble {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("binding a loopback port for the API double");
        let address = listener
            .local_addr()
            .expect("a bound listener has a local address")
            .to_string();
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            store: Store::new(),
            log: RequestLog::default(),
            pod_logs: PodLogs::default(),
            address: address.clone(),
            shutdown: stopped.clone(),
            rbac: RwLock::default(),
            volcano_pod_admission: std::sync::atomic::AtomicBool::new(false),
        });
        let accept_loop = tokio::spawn(serve(listener, shared.clone(), stopped));
        ApiDouble {
            shared,
            url: format!("http://{address}"),
            stop,
            accept_loop,
        }
    }

    /// Stops serving: closes the listener and every connection, ending open watches.
    pub async fn shutdown(self) {
        self.stop_serving();
        tokio::task::yield_now().await;
    }

    fn stop_serving(&self) {
        self.stop.send_replace(true);
        self.shared.store.close_watches();
        self.accept_loop.abort();
    }

    /// Base URL, e.g. `http://127.0.0.1:40123`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A client for this server with default namespace `default`.
    ///
    /// # Panics
    /// Only if kube rejects a plain-HTTP loopback configuration, which it does not.
    pub fn client(&self) -> kube::Client {
        let uri = self
            .url
            .parse()
            .expect("the double's own URL is a valid URI");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        kube::Client::try_from(config).expect("kube accepts a plain-HTTP loopback config")
    }

    /// A client that authenticates as the service account whose requests
    /// [`Self::enforce_rbac`] authorizes (a bearer token); without enforcement it may do
    /// anything, as [`Self::client`] may.
    pub fn service_account_client(&self) -> kube::Client {
        let uri = self
            .url
            .parse()
            .expect("the double's own URL is a valid URI");
        let mut config = kube::Config::new(uri);
        config.default_namespace = "default".into();
        config.auth_info.token = Some(crate::rbac::SERVICE_ACCOUNT_TOKEN.to_owned().into());
        kube::Client::try_from(config).expect("kube accepts a plain-HTTP loopback config")
    }

    /// From now on, requests of [`Self::service_account_client`] are authorized by
    /// these rules: what none allows is answered 403 Forbidden (recorded as such).
    pub fn enforce_rbac(&self, rbac: crate::rbac::Rbac) {
        *self
            .shared
            .rbac
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(rbac);
    }

    /// Plays Volcano's pod admission webhook (`/pods/validate`) from now on: a Volcano pod
    /// is refused while its PodGroup is missing or `Pending` (see
    /// [`crate::admission::volcano_pod`]).
    pub fn enable_volcano_pod_admission(&self) {
        self.shared
            .volcano_pod_admission
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Makes every read of the pod's log fail (`None`: readable again), as when its
    /// node's kubelet cannot be reached. Other pods' logs are unaffected.
    pub fn fail_pod_log(&self, ns: &str, pod: &str, failure: Option<crate::logs::LogFailure>) {
        self.shared.pod_logs.set_failure(ns, pod, failure);
    }

    /// Ends every open watch after dropping the watch history, as an apiserver restart
    /// after etcd compaction does: each watcher's next watch from its last
    /// resourceVersion is answered `410 Expired`, and it must re-list.
    pub fn expire_watches(&self) {
        self.shared.store.expire_watches();
    }

    /// A kubeconfig whose current context (`apidouble`, namespace `default`) points at
    /// this server over plain HTTP without credentials.
    pub fn kubeconfig_yaml(&self) -> String {
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: apidouble
  cluster:
    server: {url}
contexts:
- name: apidouble
  context:
    cluster: apidouble
    user: apidouble
    namespace: default
current-context: apidouble
users:
- name: apidouble
  user: {{}}
preferences: {{}}
",
            url = self.url
        )
    }

    /// Writes [`Self::kubeconfig_yaml`] to `path`.
    pub fn write_kubeconfig(&self, path: impl AsRef<Path>) -> std::io::Result<()> {
        std::fs::write(path, self.kubeconfig_yaml())
    }

    /// Serves an additional resource type (also listed in discovery).
    pub fn register(&self, rt: ResourceType) {
        self.shared.store.register(rt);
    }

    /// Installs a CustomResourceDefinition (creating the object if absent), which
    /// serves its resource at every served version.
    pub fn register_crd(&self, crd: &Value) -> Result<(), ApiError> {
        let crds = self.resolve(&Gvr::CUSTOM_RESOURCE_DEFINITIONS)?;
        match self.shared.store.create(&crds, "", crd.clone()) {
            Err(e) if e.code == 409 => {
                for rt in types_from_crd(crd)? {
                    self.shared.store.register(rt);
                }
                Ok(())
            }
            other => other.map(drop),
        }
    }

    /// Sets the log `GET .../pods/{pod}/log?container={container}` answers with (recorded
    /// as verb `get` on `pods/log`). `tailLines` and `limitBytes` are honoured; a pod
    /// that does not exist is a 404, a container without a log has an empty one.
    pub fn set_pod_log(&self, ns: &str, pod: &str, container: &str, text: &str) {
        self.shared.pod_logs.set(ns, pod, container, text);
    }

    /// Sets a huge log, `filler_bytes` of filler lines and then `tail`, that the double
    /// never holds in memory: it makes the filler as a client reads it (a pod that logs
    /// gigabytes).
    pub fn set_huge_pod_log(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        filler_bytes: u64,
        tail: &str,
    ) {
        self.shared
            .pod_logs
            .set_padded(ns, pod, container, filler_bytes, tail);
    }

    /// Sets a log whose one line is huge (`head`, `filler_bytes` of `x`, `tail`), made as
    /// a client reads it: a report carrying a huge raw output, which `tailLines` does not
    /// shorten.
    pub fn set_long_line_pod_log(
        &self,
        ns: &str,
        pod: &str,
        container: &str,
        head: &str,
        filler_bytes: u64,
        tail: &str,
    ) {
        self.shared
            .pod_logs
            .set_long_line(ns, pod, container, head, filler_bytes, tail);
    }

    /// Every request answered so far, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.log.snapshot()
    }

    /// Forgets the recorded requests (armed failures stay armed).
    pub fn clear_requests(&self) {
        self.shared.log.clear();
    }

    /// How many requests were recorded.
    pub fn request_count(&self) -> usize {
        self.shared.log.len()
    }

    /// Makes the next `matcher.count` matching resource requests fail with a Status of
    /// this code and reason, before they have any effect.
    pub fn fail_next(&self, matcher: RequestMatcher, status_code: u16, reason: &str) {
        let error = ApiError::new(
            status_code,
            reason,
            format!("injected failure: {reason} ({status_code})"),
        );
        self.shared.log.add_fault(matcher, error);
    }

    /// Disarms every failure armed with [`Self::fail_next`] and not used up yet.
    pub fn clear_failures(&self) {
        self.shared.log.clear_faults();
    }

    /// The current (global) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.resource_version()
    }

    /// Drops watch history, as etcd compaction does: watches resuming from an older
    /// resourceVersion then get `410 Expired` and must re-list.
    pub fn compact_history(&self) {
        self.shared.store.compact();
    }

    fn resolve(&self, gvr: &Gvr) -> Result<ResourceType, ApiError> {
        self.shared
            .store
            .resolve(&gvr.group, &gvr.version, &gvr.resource)
            .ok_or_else(ApiError::unknown_resource)
    }

    /// One object, read without going through HTTP (not recorded).
    pub fn get(&self, gvr: &Gvr, ns: Option<&str>, name: &str) -> Option<Value> {
        let rt = self.resolve(gvr).ok()?;
        let obj = self
            .shared
            .store
            .get(&rt, ns.unwrap_or_default(), name)
            .ok()?;
        Some(crate::watch::render(&rt, obj))
    }

    /// All objects of a type, in one namespace or (`None`) all of them.
    pub fn list(&self, gvr: &Gvr, ns: Option<&str>) -> Vec<Value> {
        let Ok(rt) = self.resolve(gvr) else {
            return Vec::new();
        };
        let (items, _) = self.shared.store.list(
            &rt,
            ns,
            &LabelSelector::default(),
            &FieldSelector::default(),
        );
        items
            .into_iter()
            .map(|obj| crate::watch::render(&rt, obj))
            .collect()
    }

    /// Creates an object as a POST would; its namespace comes from `metadata.namespace`
    /// (default `default`). Watches fire as for an HTTP request.
    pub fn create(&self, gvr: &Gvr, obj: Value) -> Result<Value, ApiError> {
        let rt = self.resolve(gvr)?;
        let ns = if rt.namespaced {
            crate::meta::str_field(&obj, "namespace")
                .filter(|ns| !ns.is_empty())
                .unwrap_or("default")
                .to_owned()
        } else {
            String::new()
        };
        self.shared.store.create(&rt, &ns, obj)
    }

    /// Merge-patches an object's main endpoint (status changes are ignored when the
    /// type has a status subresource).
    pub fn patch(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        merge_patch: Value,
    ) -> Result<Value, ApiError> {
        self.merge(gvr, ns, name, merge_patch, Target::Main)
    }

    /// Merge-patches status as a kubelet or controller would through `/status`
    /// (or the main endpoint for types without a status subresource).
    pub fn patch_status(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        merge_patch: Value,
    ) -> Result<Value, ApiError> {
        self.merge(gvr, ns, name, merge_patch, Target::Status)
    }

    fn merge(
        &self,
        gvr: &Gvr,
        ns: Option<&str>,
        name: &str,
        merge_patch: Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        let rt = self.resolve(gvr)?;
        let target = if rt.status_subresource {
            target
        } else {
            Target::Main
        };
        let body = merge_patch.to_string();
        let (obj, _) = self.shared.store.patch(
            &rt,
            ns.unwrap_or_default(),
            name,
            PatchKind::Merge,
            body.as_bytes(),
            target,
            None,
        )?;
        Ok(crate::watch::render(&rt, obj))
    }

    /// Deletes an object (background propagation). Returns it as deleted, or with
    /// `deletionTimestamp` set if finalizers keep it.
    pub fn delete(&self, gvr: &Gvr, ns: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let rt = self.resolve(gvr)?;
        let deleted = self.shared.store.delete(
            &rt,
            ns.unwrap_or_default(),
            name,
            &DeleteOptions::default(),
        )?;
        Ok(crate::watch::render(&rt, deleted.object))
    }
}

impl Drop for ApiDouble {
    fn drop(&mut self) {
        self.stop_serving();
    }
}

async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stopped: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::debug!("api double: accept failed: {e}");
                    continue;
                }
            },
            _ = stopped.wait_for(|stop| *stop) => return,
        };
        let shared = shared.clone();
        let mut stopped = stopped.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request| {
                let shared = shared.clone();
                async move { Ok::<_, Infallible>(handle(shared, request).await) }
            });
            let connection = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                result = connection => {
                    if let Err(e) = result {
                        tracing::debug!("api double: connection error: {e}");
                    }
                }
                _ = stopped.wait_for(|stop| *stop) => {}
            }
        });
    }
}
