//! Test support for perfsweep: [`ApiDouble`], an in-memory Kubernetes API server served
//! over real HTTP, so `kube::Client`, kube-runtime controllers and the `perfsweep` CLI
//! can run against it unchanged.
//!
//! It implements the apiserver's REST semantics for what it serves (discovery, CRUD,
//! watch with history and streaming lists, merge/JSON patch, status subresources,
//! optimistic concurrency, finalizers, owner-reference garbage collection, namespace
//! deletion), records every request under its RBAC verb, and can inject failures.
//!
//! Deliberate simplifications, beyond which tests must not rely on it:
//! - No admission, defaulting, or schema validation (names are checked to be RFC 1123
//!   subdomains; CRD schemas are ignored). Authorization only for the one service
//!   account [`ApiDouble::enforce_rbac`] names (see the `rbac` module); other requests
//!   are the test's own, allowed everything.
//! - Strategic merge patch is applied as a JSON merge patch; server-side apply creates
//!   or merge-patches without field ownership (see the `patch` module).
//! - Garbage collection is synchronous; Foreground deletes dependents before the owner
//!   but does not wait for dependents held by finalizers. Pods are removed at once
//!   (no kubelet grace period). Deleting a CRD removes its objects immediately.
//! - `limit`/`continue` are ignored (lists are complete); `resourceVersion` on get and
//!   list is ignored (always the latest state); `dryRun` is not supported.
//! - No aggregated discovery, protobuf, table output, or subresources besides `status` and
//!   pods' `log` (text set by the test; no `follow`, `previous`, `since*` or timestamps).

#![warn(missing_docs)]

mod admission;
mod apply;
mod discovery;
mod error;
mod gvr;
mod handler;
mod ids;
mod logs;
mod meta;
mod patch;
mod path;
mod rbac;
mod registry;
mod requests;
mod selector;
mod server;
mod store;
mod watch;

pub use error::ApiError;
pub use gvr::Gvr;
pub use logs::LogFailure;
pub use rbac::{PolicyRule, Rbac};
pub use registry::ResourceType;
pub use requests::{RecordedRequest, RequestMatcher};
pub use selector::{FieldSelector, LabelSelector};
pub use server::ApiDouble;
