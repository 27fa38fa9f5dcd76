//! Watch streams: which changes a watcher sees and how they are framed on the wire.

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::registry::{ResourceType, TypeKey};
use crate::selector::{FieldSelector, LabelSelector};
use crate::store::{Change, ChangeKind};

/// What one watch request selects.
#[derive(Debug, Clone)]
pub(crate) struct WatchFilter {
    pub rt: ResourceType,
    pub namespace: Option<String>,
    pub labels: LabelSelector,
    pub fields: FieldSelector,
}

impl WatchFilter {
    pub fn key(&self) -> TypeKey {
        self.rt.key()
    }

    pub fn selects(&self, obj: &Value) -> bool {
        self.labels.matches(obj) && self.fields.matches(obj)
    }

    /// The event this watcher receives for `change`, if any. As in the apiserver, an
    /// object moving into or out of the selection is seen as ADDED or DELETED.
    pub fn event_for(&self, change: &Change) -> Option<Value> {
        if change.key != self.key() {
            return None;
        }
        if let Some(ns) = &self.namespace
            && ns != &change.namespace
        {
            return None;
        }
        let now = self.selects(&change.object);
        let before = change.old.as_ref().is_some_and(|o| self.selects(o));
        let kind = match change.kind {
            ChangeKind::Added => now.then_some("ADDED"),
            ChangeKind::Modified => match (before, now) {
                (true, true) => Some("MODIFIED"),
                (false, true) => Some("ADDED"),
                (true, false) => Some("DELETED"),
                (false, false) => None,
            },
            ChangeKind::Deleted => (before || now).then_some("DELETED"),
        }?;
        Some(event(kind, render(&self.rt, change.object.clone())))
    }

    /// The BOOKMARK that ends the initial events of a streaming list.
    pub fn initial_events_end(&self, resource_version: u64) -> Value {
        event(
            "BOOKMARK",
            json!({
                "apiVersion": self.rt.api_version(),
                "kind": self.rt.kind,
                "metadata": {
                    "resourceVersion": resource_version.to_string(),
                    "annotations": {"k8s.io/initial-events-end": "true"},
                },
            }),
        )
    }
}

pub(crate) fn event(kind: &str, object: Value) -> Value {
    json!({"type": kind, "object": object})
}

/// Labels an object with the version it is served at; versions share storage.
pub(crate) fn render(rt: &ResourceType, mut obj: Value) -> Value {
    if let Some(map) = obj.as_object_mut() {
        map.insert("apiVersion".into(), Value::String(rt.api_version()));
    }
    obj
}

/// A live watch: replayed events first, then changes as they happen.
pub(crate) struct WatchStream {
    pub initial: Vec<Value>,
    /// `None` when the watch ends after `initial` (e.g. after an expiry error).
    pub live: Option<mpsc::UnboundedReceiver<Arc<Change>>>,
    pub filter: WatchFilter,
}

/// Newline-delimited JSON frames until the deadline, the server's shutdown, or the
/// store dropping this watcher.
pub(crate) fn frames(
    watch: WatchStream,
    deadline: Instant,
    shutdown: watch::Receiver<bool>,
) -> impl Stream<Item = Result<Frame<Bytes>, Infallible>> + Send + 'static {
    struct State {
        initial: std::vec::IntoIter<Value>,
        live: Option<mpsc::UnboundedReceiver<Arc<Change>>>,
        filter: WatchFilter,
        shutdown: watch::Receiver<bool>,
    }
    let state = State {
        initial: watch.initial.into_iter(),
        live: watch.live,
        filter: watch.filter,
        shutdown,
    };
    futures::stream::unfold(state, move |mut state| async move {
        if let Some(event) = state.initial.next() {
            return Some((Ok(frame(&event)), state));
        }
        loop {
            let live = state.live.as_mut()?;
            let change = tokio::select! {
                () = tokio::time::sleep_until(deadline) => None,
                _ = state.shutdown.wait_for(|stopped| *stopped) => None,
                change = live.recv() => change,
            }?;
            if let Some(event) = state.filter.event_for(&change) {
                return Some((Ok(frame(&event)), state));
            }
        }
    })
}

fn frame(event: &Value) -> Frame<Bytes> {
    let mut line = event.to_string().into_bytes();
    line.push(b'\n');
    Frame::data(Bytes::from(line))
}
