//! The object store: etcd-like storage plus the apiserver's write semantics
//! (preconditions, status subresource, generation, finalizers, garbage collection).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{Map, Value, json};
use tokio::sync::mpsc;

use crate::error::ApiError;
use crate::ids::Ids;
use crate::meta;
use crate::patch::{self, PatchKind};
use crate::registry::{Registry, ResourceType, TypeKey, types_from_crd};
use crate::selector::{FieldSelector, LabelSelector};
use crate::watch::{WatchFilter, WatchStream, event};

/// How many changes are kept for watches resuming from an old resourceVersion.
const HISTORY_LIMIT: usize = 10_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChangeKind {
    Added,
    Modified,
    Deleted,
}

/// One committed write, as watchers see it.
#[derive(Debug)]
pub(crate) struct Change {
    pub rv: u64,
    pub key: TypeKey,
    /// Empty for cluster-scoped objects.
    pub namespace: String,
    pub kind: ChangeKind,
    /// The object before the write, so selector watches can see objects leave.
    pub old: Option<Value>,
    /// The object after the write (for deletions: as deleted, at the deletion's version).
    pub object: Value,
}

/// Which part of an object a write may change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    Main,
    Status,
}

/// `DeleteOptions.propagationPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Propagation {
    #[default]
    Background,
    Foreground,
    Orphan,
}

impl Propagation {
    pub fn parse(value: &str) -> Result<Self, ApiError> {
        match value {
            "Background" => Ok(Self::Background),
            "Foreground" => Ok(Self::Foreground),
            "Orphan" => Ok(Self::Orphan),
            other => Err(ApiError::bad_request(format!(
                "unsupported propagationPolicy {other:?}"
            ))),
        }
    }
}

/// The parts of `DeleteOptions` the double honours.
#[derive(Debug, Clone, Default)]
pub(crate) struct DeleteOptions {
    pub propagation: Propagation,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

/// Where a new watch starts.
#[derive(Debug, Clone)]
pub(crate) enum WatchStart {
    /// ADDED for every current object; with `bookmark`, then the initial-events-end BOOKMARK.
    Snapshot { bookmark: bool },
    /// Every change after this resourceVersion.
    After(u64),
    /// Only changes from now on.
    Now,
}

/// Outcome of a delete request.
pub(crate) struct Deleted {
    pub object: Value,
    /// False when finalizers (or a namespace's contents) keep the object for now.
    pub removed: bool,
}

pub(crate) struct Store {
    inner: Mutex<Inner>,
}

struct Inner {
    registry: Registry,
    objects: BTreeMap<TypeKey, BTreeMap<(String, String), Value>>,
    rv: u64,
    history: VecDeque<Arc<Change>>,
    /// Changes at or below this resourceVersion are no longer in `history`.
    compacted: u64,
    watchers: Vec<mpsc::UnboundedSender<Arc<Change>>>,
    ids: Ids,
}

fn namespaces_key() -> TypeKey {
    TypeKey {
        group: String::new(),
        plural: "namespaces".into(),
    }
}

fn crd_key() -> TypeKey {
    TypeKey {
        group: "apiextensions.k8s.io".into(),
        plural: "customresourcedefinitions".into(),
    }
}

impl Store {
    pub fn new() -> Self {
        let mut inner = Inner {
            registry: Registry::with_builtins(),
            objects: BTreeMap::new(),
            rv: 0,
            history: VecDeque::new(),
            compacted: 0,
            watchers: Vec::new(),
            ids: Ids::new(),
        };
        let ns_type = ResourceType::new("", "v1", "namespaces", "Namespace", false, true);
        for ns in ["default", "kube-system", "kube-public"] {
            let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
            // Cannot fail: the names are valid and the store is empty.
            let _ = inner.create(&ns_type, "", body);
        }
        Self {
            inner: Mutex::new(inner),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panicking test thread must not wedge every other request.
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub fn resolve(&self, group: &str, version: &str, plural: &str) -> Option<ResourceType> {
        self.lock()
            .registry
            .resolve(group, version, plural)
            .cloned()
    }

    pub fn resource_types(&self) -> Vec<ResourceType> {
        self.lock().registry.all().cloned().collect()
    }

    pub fn register(&self, rt: ResourceType) {
        self.lock().registry.register(rt);
    }

    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// Forgets watch history, so watches from any earlier version get 410 Expired.
    pub fn compact(&self) {
        let mut inner = self.lock();
        inner.history.clear();
        inner.compacted = inner.rv;
    }

    /// Takes a resourceVersion (as a write elsewhere in etcd would), forgets the
    /// history and ends every open watch: every watcher's last version is then too old.
    pub fn expire_watches(&self) {
        let mut inner = self.lock();
        inner.rv += 1;
        inner.history.clear();
        inner.compacted = inner.rv;
        inner.watchers.clear();
    }

    /// Ends every open watch.
    pub fn close_watches(&self) {
        self.lock().watchers.clear();
    }

    pub fn get(&self, rt: &ResourceType, ns: &str, name: &str) -> Result<Value, ApiError> {
        self.lock()
            .lookup(&rt.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    /// Matching objects (all namespaces when `ns` is `None`) and the list's resourceVersion.
    pub fn list(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
    ) -> (Vec<Value>, u64) {
        let inner = self.lock();
        let items = inner
            .scan(&rt.key(), ns)
            .filter(|obj| labels.matches(obj) && fields.matches(obj))
            .cloned()
            .collect();
        (items, inner.rv)
    }

    pub fn create(&self, rt: &ResourceType, ns: &str, body: Value) -> Result<Value, ApiError> {
        self.lock().create(rt, ns, body)
    }

    pub fn update(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        body: Value,
        target: Target,
    ) -> Result<Value, ApiError> {
        if let Some(given) = meta::name(&body).filter(|n| *n != name) {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given}) does not match the name on the URL ({name})"
            )));
        }
        let mut inner = self.lock();
        let old = inner
            .lookup(&rt.key(), ns, name)
            .cloned()
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        check_rv_precondition(rt, name, &old, &body)?;
        Ok(inner.commit_update(rt, ns, name, old, body, target))
    }

    /// Returns the patched object and whether an apply created it. `manager`: an
    /// apply's field manager (server-side apply tracks its fields).
    #[allow(clippy::too_many_arguments)] // the parts of one PATCH request
    pub fn patch(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        kind: PatchKind,
        body: &[u8],
        target: Target,
        manager: Option<&str>,
    ) -> Result<(Value, bool), ApiError> {
        let mut inner = self.lock();
        let Some(old) = inner.lookup(&rt.key(), ns, name).cloned() else {
            if kind == PatchKind::Apply && target == Target::Main {
                let mut obj = patch::parse_object(body)?;
                if meta::name(&obj).is_some_and(|n| n != name) {
                    return Err(ApiError::bad_request(
                        "the name of the object does not match the name on the URL",
                    ));
                }
                meta::set(&mut obj, "name", Value::String(name.to_owned()));
                return Ok((inner.create(rt, ns, obj)?, true));
            }
            return Err(ApiError::not_found(rt, name));
        };
        let mut new = old.clone();
        match (kind, manager) {
            (PatchKind::Apply, Some(manager)) => {
                let subresource = (target == Target::Status).then_some("status");
                crate::apply::server_side_apply(&mut new, body, manager, subresource)?;
            }
            _ => patch::apply(kind, &mut new, body)?,
        }
        check_rv_precondition(rt, name, &old, &new)?;
        Ok((inner.commit_update(rt, ns, name, old, new, target), false))
    }

    pub fn delete(
        &self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut inner = self.lock();
        let current = inner
            .lookup(&rt.key(), ns, name)
            .ok_or_else(|| ApiError::not_found(rt, name))?;
        if let Some(uid) = &opts.precondition_uid
            && meta::uid(current) != Some(uid.as_str())
        {
            return Err(ApiError::conflict(
                rt,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                    meta::uid(current).unwrap_or_default()
                ),
            ));
        }
        if let Some(rv) = &opts.precondition_rv
            && meta::str_field(current, "resourceVersion") != Some(rv.as_str())
        {
            return Err(ApiError::stale(rt, name));
        }
        inner
            .request_delete(&rt.key(), ns, name, opts.propagation)
            .ok_or_else(|| ApiError::not_found(rt, name))
    }

    pub fn delete_collection(
        &self,
        rt: &ResourceType,
        ns: Option<&str>,
        labels: &LabelSelector,
        fields: &FieldSelector,
        opts: &DeleteOptions,
    ) -> Vec<Value> {
        let mut inner = self.lock();
        let key = rt.key();
        let targets: Vec<(String, String)> = inner
            .scan(&key, ns)
            .filter(|obj| labels.matches(obj) && fields.matches(obj))
            .filter_map(|obj| {
                let ns = meta::str_field(obj, "namespace").unwrap_or_default();
                Some((ns.to_owned(), meta::name(obj)?.to_owned()))
            })
            .collect();
        targets
            .into_iter()
            .filter_map(|(ns, name)| {
                inner
                    .request_delete(&key, &ns, &name, opts.propagation)
                    .map(|d| d.object)
            })
            .collect()
    }

    /// Registers the watcher and computes its replayed events atomically, so it
    /// neither misses nor duplicates a change.
    pub fn watch(&self, filter: WatchFilter, start: WatchStart) -> WatchStream {
        let mut inner = self.lock();
        let mut initial = Vec::new();
        match start {
            WatchStart::Snapshot { bookmark } => {
                initial.extend(
                    inner
                        .scan(&filter.key(), filter.namespace.as_deref())
                        .filter(|obj| filter.selects(obj))
                        .map(|obj| event("ADDED", crate::watch::render(&filter.rt, obj.clone()))),
                );
                if bookmark {
                    initial.push(filter.initial_events_end(inner.rv));
                }
            }
            WatchStart::After(rv) if rv < inner.compacted => {
                let expired = ApiError::expired(rv, inner.compacted + 1);
                initial.push(event("ERROR", expired.to_status()));
                return WatchStream {
                    initial,
                    live: None,
                    filter,
                };
            }
            WatchStart::After(rv) => initial.extend(
                inner
                    .history
                    .iter()
                    .filter(|change| change.rv > rv)
                    .filter_map(|change| filter.event_for(change)),
            ),
            WatchStart::Now => {}
        }
        let (tx, rx) = mpsc::unbounded_channel();
        inner.watchers.push(tx);
        WatchStream {
            initial,
            live: Some(rx),
            filter,
        }
    }
}

fn check_rv_precondition(
    rt: &ResourceType,
    name: &str,
    old: &Value,
    new: &Value,
) -> Result<(), ApiError> {
    match meta::str_field(new, "resourceVersion") {
        Some(rv) if !rv.is_empty() && Some(rv) != meta::str_field(old, "resourceVersion") => {
            Err(ApiError::stale(rt, name))
        }
        _ => Ok(()),
    }
}

/// What `generation` tracks: `spec`, or for spec-less kinds (ConfigMap, Secret, …)
/// everything outside metadata and status.
fn generation_content(obj: &Value) -> Value {
    if let Some(spec) = obj.get("spec") {
        return spec.clone();
    }
    let mut rest = obj.as_object().cloned().unwrap_or_default();
    for field in ["metadata", "status", "apiVersion", "kind"] {
        rest.remove(field);
    }
    Value::Object(rest)
}

/// Lowercase RFC 1123 subdomain, which is what most resource names must be.
fn valid_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= 253
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'.'))
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}

impl Inner {
    fn lookup(&self, key: &TypeKey, ns: &str, name: &str) -> Option<&Value> {
        self.objects
            .get(key)?
            .get(&(ns.to_owned(), name.to_owned()))
    }

    fn scan<'a>(&'a self, key: &TypeKey, ns: Option<&'a str>) -> impl Iterator<Item = &'a Value> {
        self.objects
            .get(key)
            .into_iter()
            .flat_map(|objects| objects.iter())
            .filter(move |((obj_ns, _), _)| ns.is_none_or(|ns| ns == obj_ns))
            .map(|(_, obj)| obj)
    }

    fn bump(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn emit(
        &mut self,
        key: &TypeKey,
        ns: &str,
        kind: ChangeKind,
        old: Option<Value>,
        object: &Value,
    ) {
        let change = Arc::new(Change {
            rv: self.rv,
            key: key.clone(),
            namespace: ns.to_owned(),
            kind,
            old,
            object: object.clone(),
        });
        self.watchers.retain(|tx| tx.send(change.clone()).is_ok());
        self.history.push_back(change);
        while self.history.len() > HISTORY_LIMIT {
            if let Some(dropped) = self.history.pop_front() {
                self.compacted = dropped.rv;
            }
        }
    }

    fn put(&mut self, key: &TypeKey, ns: &str, name: &str, obj: Value) {
        self.objects
            .entry(key.clone())
            .or_default()
            .insert((ns.to_owned(), name.to_owned()), obj);
    }

    fn create(&mut self, rt: &ResourceType, ns: &str, mut body: Value) -> Result<Value, ApiError> {
        let Some(map) = body.as_object_mut() else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        for (field, expected) in [("apiVersion", rt.api_version()), ("kind", rt.kind.clone())] {
            match map.get(field).and_then(Value::as_str) {
                None | Some("") => {
                    map.insert(field.to_owned(), Value::String(expected));
                }
                Some(given) if given != expected => {
                    return Err(ApiError::bad_request(format!(
                        "the {field} in the data ({given}) does not match the expected {field} ({expected})"
                    )));
                }
                Some(_) => {}
            }
        }
        let key = rt.key();
        let name = match (meta::name(&body), meta::str_field(&body, "generateName")) {
            (Some(name), _) => name.to_owned(),
            (None, Some(prefix)) if !prefix.is_empty() => {
                let base: String = prefix.chars().take(58).collect();
                loop {
                    let candidate = format!("{base}{}", self.ids.name_suffix());
                    if self.lookup(&key, ns, &candidate).is_none() {
                        break candidate;
                    }
                }
            }
            _ => {
                return Err(ApiError::invalid(
                    rt,
                    "",
                    "metadata.name",
                    "Required value: name or generateName is required",
                ));
            }
        };
        if !valid_name(&name) {
            return Err(ApiError::invalid(
                rt,
                &name,
                "metadata.name",
                "Invalid value: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.'",
            ));
        }
        if rt.namespaced {
            match meta::str_field(&body, "namespace") {
                Some(given) if !given.is_empty() && given != ns => {
                    return Err(ApiError::bad_request(
                        "the namespace of the provided object does not match the namespace sent on the request",
                    ));
                }
                _ => {}
            }
            match self.lookup(&namespaces_key(), "", ns) {
                None => return Err(ApiError::namespace_not_found(ns)),
                Some(namespace) if meta::is_terminating(namespace) => {
                    return Err(ApiError::forbidden(format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        rt.group_resource()
                    )));
                }
                Some(_) => {}
            }
        }
        if self.lookup(&key, ns, &name).is_some() {
            return Err(ApiError::already_exists(rt, &name));
        }
        let crd_types = if key == crd_key() {
            let types = types_from_crd(&body)?;
            let expected = format!(
                "{}.{}",
                body.pointer("/spec/names/plural")
                    .and_then(Value::as_str)
                    .unwrap_or_default(),
                body.pointer("/spec/group")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
            );
            if expected != name {
                return Err(ApiError::invalid(
                    rt,
                    &name,
                    "metadata.name",
                    &format!(
                        "Invalid value: must be spec.names.plural+\".\"+spec.group ({expected})"
                    ),
                ));
            }
            types
        } else {
            Vec::new()
        };

        let rv = self.bump();
        let uid = self.ids.uid();
        let Some(meta) = meta::metadata_mut(&mut body) else {
            return Err(ApiError::bad_request(
                "the request body must be a JSON object",
            ));
        };
        meta.insert("name".into(), Value::String(name.clone()));
        if rt.namespaced {
            meta.insert("namespace".into(), Value::String(ns.to_owned()));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), Value::String(uid));
        meta.insert("resourceVersion".into(), Value::String(rv.to_string()));
        meta.insert(
            "creationTimestamp".into(),
            Value::String(meta::now_rfc3339()),
        );
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        if let Some(map) = body.as_object_mut() {
            if rt.status_subresource {
                map.remove("status");
            }
            // What the real registry strategies initialise on create.
            match (rt.group.as_str(), rt.plural.as_str()) {
                ("", "pods") => {
                    map.insert("status".into(), json!({"phase": "Pending"}));
                }
                ("", "namespaces") => {
                    map.insert("status".into(), json!({"phase": "Active"}));
                }
                ("apiextensions.k8s.io", "customresourcedefinitions") => {
                    let names = map
                        .get("spec")
                        .and_then(|s| s.get("names"))
                        .cloned()
                        .unwrap_or_default();
                    let stored: Vec<Value> = crd_types
                        .iter()
                        .map(|t| Value::String(t.version.clone()))
                        .take(1)
                        .collect();
                    map.insert(
                        "status".into(),
                        json!({
                            "acceptedNames": names,
                            "storedVersions": stored,
                            "conditions": [
                                {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts",
                                 "lastTransitionTime": meta::now_rfc3339()},
                                {"type": "Established", "status": "True", "reason": "InitialNamesAccepted",
                                 "lastTransitionTime": meta::now_rfc3339()},
                            ],
                        }),
                    );
                }
                _ => {}
            }
        }
        for t in crd_types {
            self.registry.register(t);
        }
        self.put(&key, ns, &name, body.clone());
        self.emit(&key, ns, ChangeKind::Added, None, &body);
        Ok(body)
    }

    /// Applies the apiserver's update rules to `new` and stores it. No-op writes
    /// keep the old resourceVersion and emit nothing, as in the real apiserver.
    fn commit_update(
        &mut self,
        rt: &ResourceType,
        ns: &str,
        name: &str,
        old: Value,
        mut new: Value,
        target: Target,
    ) -> Value {
        if !new.is_object() {
            new = Value::Object(Map::new());
        }
        // Who applied what is the object's whoever wrote it (status applies too).
        let managed_fields = new.pointer("/metadata/managedFields").cloned();
        if rt.status_subresource {
            let (keep_from, status_from) = match target {
                Target::Main => (new.clone(), old.clone()),
                Target::Status => (old.clone(), new.clone()),
            };
            new = keep_from;
            match (new.as_object_mut(), status_from.get("status")) {
                (Some(map), Some(status)) => {
                    map.insert("status".into(), status.clone());
                }
                (Some(map), None) => {
                    map.remove("status");
                }
                (None, _) => {}
            }
        }
        if let Some(managed_fields) = managed_fields {
            meta::set(&mut new, "managedFields", managed_fields);
        }
        for field in ["apiVersion", "kind"] {
            if let (Some(map), Some(value)) = (new.as_object_mut(), old.get(field)) {
                map.insert(field.into(), value.clone());
            }
        }
        for field in [
            "name",
            "namespace",
            "uid",
            "creationTimestamp",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "generation",
            "resourceVersion",
        ] {
            match old.get("metadata").and_then(|m| m.get(field)) {
                Some(value) => meta::set(&mut new, field, value.clone()),
                None => meta::remove(&mut new, field),
            }
        }
        if new == old {
            return old;
        }
        if generation_content(&new) != generation_content(&old) {
            let generation = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            meta::set(&mut new, "generation", json!(generation + 1));
        }
        let key = rt.key();
        if key == crd_key()
            && let Ok(types) = types_from_crd(&new)
        {
            if let Some(instances) = crd_instances_key(&old) {
                self.registry.unregister(&instances);
            }
            for t in types {
                self.registry.register(t);
            }
        }
        let rv = self.bump();
        meta::set(&mut new, "resourceVersion", Value::String(rv.to_string()));
        self.put(&key, ns, name, new.clone());
        self.emit(&key, ns, ChangeKind::Modified, Some(old), &new);
        if meta::is_terminating(&new) && !self.blocked(&key, &new) {
            return self.remove(&key, ns, name, true).unwrap_or(new);
        }
        new
    }

    /// Finalizers, and for namespaces any remaining content, keep a deleted object.
    fn blocked(&self, key: &TypeKey, obj: &Value) -> bool {
        meta::has_finalizers(obj)
            || (*key == namespaces_key()
                && meta::name(obj).is_some_and(|ns| self.namespace_has_content(ns)))
    }

    fn namespace_has_content(&self, ns: &str) -> bool {
        self.objects
            .values()
            .any(|objects| objects.keys().any(|(obj_ns, _)| obj_ns == ns))
    }

    fn request_delete(
        &mut self,
        key: &TypeKey,
        ns: &str,
        name: &str,
        propagation: Propagation,
    ) -> Option<Deleted> {
        let mut current = self.lookup(key, ns, name)?.clone();
        let is_namespace = *key == namespaces_key();
        if propagation == Propagation::Orphan {
            self.orphan_dependents(&current);
        }
        if !meta::is_terminating(&current) && (meta::has_finalizers(&current) || is_namespace) {
            let old = current.clone();
            meta::set(
                &mut current,
                "deletionTimestamp",
                Value::String(meta::now_rfc3339()),
            );
            meta::set(&mut current, "deletionGracePeriodSeconds", json!(0));
            if is_namespace && let Some(map) = current.as_object_mut() {
                map.insert("status".into(), json!({"phase": "Terminating"}));
            }
            let rv = self.bump();
            meta::set(
                &mut current,
                "resourceVersion",
                Value::String(rv.to_string()),
            );
            self.put(key, ns, name, current.clone());
            self.emit(key, ns, ChangeKind::Modified, Some(old), &current);
        }
        if is_namespace {
            self.delete_namespace_content(name);
        }
        if propagation == Propagation::Foreground {
            self.delete_dependents(&current);
        }
        // Deleting content may already have finalized (removed) a namespace.
        let Some(latest) = self.lookup(key, ns, name).cloned() else {
            return Some(Deleted {
                object: current,
                removed: true,
            });
        };
        if self.blocked(key, &latest) {
            return Some(Deleted {
                object: latest,
                removed: false,
            });
        }
        let cascade = propagation != Propagation::Orphan;
        self.remove(key, ns, name, cascade).map(|object| Deleted {
            object,
            removed: true,
        })
    }

    /// Removes an object for good: DELETED event, then garbage collection.
    fn remove(&mut self, key: &TypeKey, ns: &str, name: &str, cascade: bool) -> Option<Value> {
        let old = self
            .objects
            .get_mut(key)?
            .remove(&(ns.to_owned(), name.to_owned()))?;
        let mut obj = old.clone();
        let rv = self.bump();
        meta::set(&mut obj, "resourceVersion", Value::String(rv.to_string()));
        self.emit(key, ns, ChangeKind::Deleted, Some(old), &obj);
        if cascade {
            self.delete_dependents(&obj);
        }
        if *key == crd_key()
            && let Some(instances) = crd_instances_key(&obj)
        {
            let doomed: Vec<(String, String)> = self
                .objects
                .get(&instances)
                .map(|objects| objects.keys().cloned().collect())
                .unwrap_or_default();
            for (obj_ns, obj_name) in doomed {
                self.remove(&instances, &obj_ns, &obj_name, true);
            }
            self.objects.remove(&instances);
            self.registry.unregister(&instances);
        }
        if !ns.is_empty() {
            self.finalize_if_done(&namespaces_key(), "", ns);
        }
        Some(obj)
    }

    fn finalize_if_done(&mut self, key: &TypeKey, ns: &str, name: &str) {
        let done = self
            .lookup(key, ns, name)
            .is_some_and(|obj| meta::is_terminating(obj) && !self.blocked(key, obj));
        if done {
            self.remove(key, ns, name, true);
        }
    }

    fn dependents_of(&self, owner: &Value) -> Vec<(TypeKey, String, String)> {
        let Some(uid) = meta::uid(owner) else {
            return Vec::new();
        };
        self.objects
            .iter()
            .flat_map(|(key, objects)| {
                objects
                    .iter()
                    .filter(|(_, obj)| meta::owner_uids(obj).iter().any(|o| o == uid))
                    .map(move |((ns, name), _)| (key.clone(), ns.clone(), name.clone()))
            })
            .collect()
    }

    fn delete_dependents(&mut self, owner: &Value) {
        for (key, ns, name) in self.dependents_of(owner) {
            self.request_delete(&key, &ns, &name, Propagation::Background);
        }
    }

    /// What the garbage collector does for `Orphan`: drop the owner references.
    fn orphan_dependents(&mut self, owner: &Value) {
        let Some(uid) = meta::uid(owner).map(str::to_owned) else {
            return;
        };
        for (key, ns, name) in self.dependents_of(owner) {
            let Some(old) = self.lookup(&key, &ns, &name).cloned() else {
                continue;
            };
            let mut new = old.clone();
            if let Some(refs) = new
                .pointer_mut("/metadata/ownerReferences")
                .and_then(Value::as_array_mut)
            {
                refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
            }
            let rv = self.bump();
            meta::set(&mut new, "resourceVersion", Value::String(rv.to_string()));
            self.put(&key, &ns, &name, new.clone());
            self.emit(&key, &ns, ChangeKind::Modified, Some(old), &new);
        }
    }

    fn delete_namespace_content(&mut self, ns: &str) {
        let content: Vec<(TypeKey, String)> = self
            .objects
            .iter()
            .flat_map(|(key, objects)| {
                objects
                    .keys()
                    .filter(|(obj_ns, _)| obj_ns == ns)
                    .map(move |(_, name)| (key.clone(), name.clone()))
            })
            .collect();
        for (key, name) in content {
            self.request_delete(&key, ns, &name, Propagation::Background);
        }
    }
}

/// The storage key of a CRD's custom resources.
fn crd_instances_key(crd: &Value) -> Option<TypeKey> {
    Some(TypeKey {
        group: crd.pointer("/spec/group")?.as_str()?.to_owned(),
        plural: crd.pointer("/spec/names/plural")?.as_str()?.to_owned(),
    })
}
