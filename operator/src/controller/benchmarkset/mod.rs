//! The BenchmarkSet controller: expands a set and creates its children, `maxParallel` at
//! a time, and summarizes their progress in the set's status.
//!
//! Reconcile runs as dereference → validate → build → apply → update status; only the
//! first and the last two steps touch the cluster. Children have deterministic names, so
//! a restart mid-sweep re-derives exactly the same children: those that exist are found,
//! the missing ones are created, none is created twice.
//!
//! A spec edit re-expands the set. Children whose complete spec is unchanged keep their
//! names and are left alone (with their results); children that no longer belong to the
//! expansion are deleted, running or not.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use perfsweep_benchmarks::api::status::{condition, condition_status, set_condition};
use perfsweep_benchmarks::kinds::registry::{self, KindInfo};
use perfsweep_benchmarks::outcome::Reason;
use perfsweep_benchmarks::set::status::SetPhase;
use perfsweep_benchmarks::set::{self, BenchmarkSet, BenchmarkSetStatus, Expansion, SetError};

use super::{
    Context, Error, SetController, Settings, default_watcher, plumbing, scoped_api, served,
    unreadable,
};

mod children;
mod decide;
mod observed;
mod peers;
mod tokens;
pub use children::Children;
pub use peers::SetPolicies;
pub use tokens::SetTokens;

/// How often a set with running children is looked at even without a change.
const RESYNC: Duration = Duration::from_mins(5);

/// The controller for BenchmarkSets and the children of every kind they own, whose
/// caches it puts in `ctx` for the reconciles (build one per `Context`: a second one's
/// caches would not be the ones its reconciles read).
pub fn controller(ctx: &Context, settings: &Settings) -> SetController {
    let client = &ctx.client;
    let namespace = settings.namespace.as_deref();
    // Through the guard: one set that does not deserialize is reported
    // ([`unreadable`]) while the others go on.
    let sets: Api<DeserializeGuard<BenchmarkSet>> = scoped_api(client, namespace);
    let (controller, children) = children::watch(
        SetController::new(sets, default_watcher())
            // A kind's CRD installed (or removed): the sets waiting for it go on.
            .reconcile_all_on(ctx.served.changes()),
        client,
        namespace,
        &ctx.served,
    );
    if ctx.set_children.set(children).is_err() {
        tracing::error!("a second set controller for the same context: its caches are unused");
    }
    controller
}

/// The dynamic API resource of a benchmark kind.
pub fn api_resource(kind: &KindInfo) -> ApiResource {
    ApiResource {
        group: perfsweep_benchmarks::GROUP.into(),
        version: perfsweep_benchmarks::VERSION.into(),
        api_version: perfsweep_benchmarks::API_VERSION.into(),
        kind: kind.kind.into(),
        plural: kind.plural().into(),
    }
}

/// A set that deserialized is reconciled; one that did not is reported, and waits for a
/// change (a fix) without retries.
/// Each reconcile runs in its own span and is timed for
/// `perfsweep_reconcile_duration_seconds`.
pub async fn reconcile_guarded(
    guard: Arc<DeserializeGuard<BenchmarkSet>>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    use tracing::Instrument as _;
    let span = tracing::info_span!(
        "reconcile",
        controller = "BenchmarkSet",
        namespace = %guard.namespace().unwrap_or_default(),
        name = %guard.name_any(),
    );
    let started = std::time::Instant::now();
    let result = async {
        match &guard.0 {
            Ok(set) => reconcile(set, &ctx).await,
            Err(invalid) => {
                unreadable::report(&*guard, invalid, &ctx).await;
                Ok(Action::await_change())
            }
        }
    }
    .instrument(span)
    .await;
    ctx.metrics
        .reconcile_took("BenchmarkSet", started.elapsed());
    result
}

pub fn error_policy_guarded(
    guard: Arc<DeserializeGuard<BenchmarkSet>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    match &guard.0 {
        Ok(set) => error_policy(set, error, &ctx),
        Err(_) => Action::await_change(),
    }
}

pub async fn reconcile(set: &BenchmarkSet, ctx: &Context) -> Result<Action, Error> {
    let name = set.name_any();
    let namespace = set.namespace().ok_or_else(|| Error::MissingNamespace {
        kind: "BenchmarkSet",
        name: name.clone(),
    })?;
    let key = format!("{namespace}/{name}");
    if set.meta().deletion_timestamp.is_some() {
        // Children (and the set's NetworkPolicy) go with the set through their owner
        // references.
        ctx.expansions.forget(set);
        if let Some(uid) = set.uid() {
            ctx.set_policies.forget(&uid);
            ctx.set_tokens.forget(&uid);
        }
        return Ok(Action::await_change());
    }
    let Some(children) = ctx.set_children.get() else {
        tracing::error!(set = %key, "the set controller's caches are missing");
        return Ok(Action::await_change());
    };
    children.ready().await;
    let nodes = selected_nodes(set, ctx).await?;
    let action = match ctx.expansions.expand(set, nodes.as_ref()).as_ref() {
        Err(error) => reject(set, &namespace, error, ctx).await?,
        Ok(expansion) if ctx.served.is_missing(expansion.kind.kind) => {
            wait_for_crd(set, &namespace, expansion.kind, ctx).await?
        }
        Ok(expansion) => {
            if set.status.as_ref().and_then(|s| s.observed_generation) != set.meta().generation {
                prune_other_kinds(set, &namespace, expansion, children, ctx).await?;
            }
            let existing = children.of(expansion.kind, &namespace, &name);
            advance(set, &namespace, expansion, existing, nodes.as_ref(), ctx).await?
        }
    };
    ctx.backoff.reset(&key);
    Ok(action)
}

/// The nodes a node-pair or each-node set selects, with the labels its references
/// judge by, or `None` for a set that pins no nodes. Listed once per generation and then
/// kept in `status.nodes` (and `status.nodeLabels`): a re-listing on every reconcile
/// would delete the children (and results) of a node that goes away mid-sweep or after
/// it, or move a node to another reference when its labels change. An invalid set (e.g.
/// too few nodes) is listed again each time.
async fn selected_nodes(
    set: &BenchmarkSet,
    ctx: &Context,
) -> Result<Option<set::NodeLabels>, Error> {
    let Some(selector) = set.spec.permutations.node_selector() else {
        return Ok(None);
    };
    if let Some(status) = &set.status
        && status.observed_generation == set.meta().generation
        && status.phase != Some(SetPhase::Invalid)
        && !status.nodes.is_empty()
    {
        return Ok(Some(
            status
                .nodes
                .iter()
                .map(|node| {
                    let labels = status.node_labels.get(node).cloned().unwrap_or_default();
                    (node.clone(), labels)
                })
                .collect(),
        ));
    }
    let selector = selector.to_label_selector();
    let nodes: Api<Node> = Api::all(ctx.client.clone());
    let list = nodes
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(Error::kube(format!(
            "listing the nodes matching {selector:?} for BenchmarkSet {}/{}",
            set.namespace().unwrap_or_default(),
            set.name_any()
        )))?;
    Ok(Some(
        set.spec.permutations.keep_node_labels(
            list.items
                .iter()
                .map(|node| (node.name_any(), node.labels().clone())),
        ),
    ))
}

/// Expansions of the sets seen, keyed by uid, generation and selected nodes.
pub struct ExpansionCache {
    entries: std::sync::Mutex<HashMap<String, (CacheKey, CachedExpansion)>>,
    /// The administrator's ceiling on children per set (`Settings::max_children_per_set`).
    ceiling: u32,
}

impl Default for ExpansionCache {
    fn default() -> Self {
        Self::with_ceiling(super::DEFAULT_MAX_CHILDREN_PER_SET)
    }
}

/// What an expansion depends on besides the set's uid: its generation and, for a
/// node-pair or each-node set, the nodes it selects with the labels it judges by.
type CacheKey = (Option<i64>, Option<set::NodeLabels>);

/// A set's expansion, or why it has none.
type CachedExpansion = Arc<Result<Expansion, SetError>>;

impl ExpansionCache {
    /// A cache whose sets expand to at most `ceiling` children each.
    pub fn with_ceiling(ceiling: u32) -> Self {
        Self {
            entries: std::sync::Mutex::default(),
            ceiling,
        }
    }

    /// The set's expansion, computed once per generation and node list (`nodes`: the
    /// nodes a node-pair or each-node set selects, see [`set::expand_on`]).
    pub fn expand(&self, set: &BenchmarkSet, nodes: Option<&set::NodeLabels>) -> CachedExpansion {
        let key = set.uid().unwrap_or_else(|| set.name_any());
        let cache_key: CacheKey = (set.meta().generation, nodes.cloned());
        let mut entries = self
            .entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((cached, expansion)) = entries.get(&key)
            && *cached == cache_key
        {
            return Arc::clone(expansion);
        }
        let expansion = Arc::new(set::expand_within(
            &set.name_any(),
            &set.spec,
            nodes,
            self.ceiling,
        ));
        entries.insert(key, (cache_key, Arc::clone(&expansion)));
        expansion
    }

    /// Forgets a set that is gone.
    pub fn forget(&self, set: &BenchmarkSet) {
        let key = set.uid().unwrap_or_else(|| set.name_any());
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&key);
    }
}

/// After a spec edit that changed the template's kind, the children of the old kind are
/// no longer listed by [`advance`]; delete them here. Runs once per generation.
async fn prune_other_kinds(
    set: &BenchmarkSet,
    namespace: &str,
    expansion: &Expansion,
    children: &Children,
    ctx: &Context,
) -> Result<(), Error> {
    let name = set.name_any();
    let mut pruned = 0;
    for kind in registry::kinds()
        .iter()
        .filter(|k| k.kind != expansion.kind.kind)
    {
        let api: Api<DynamicObject> =
            Api::namespaced_with(ctx.client.clone(), namespace, &api_resource(kind));
        for child in children.of(kind, namespace, &name) {
            if let Some(child) = super::caches::Named::of(child.as_ref()) {
                delete_child(&api, &child, namespace).await?;
            }
            pruned += 1;
        }
    }
    if pruned > 0 {
        let note = format!("Deleted {pruned} children of the template's previous kind");
        publish(ctx, set, EventType::Normal, "Pruned", "Delete", &note).await;
    }
    Ok(())
}

pub fn error_policy(set: &BenchmarkSet, error: &Error, ctx: &Context) -> Action {
    let key = format!("{}/{}", set.namespace().unwrap_or_default(), set.name_any());
    let delay = ctx.backoff.next_delay(&key);
    tracing::warn!(set = %key, %error, retry_in = ?delay, "reconcile failed");
    Action::requeue(delay)
}

/// An invalid set: say what and where in status and an event; create nothing.
async fn reject(
    set: &BenchmarkSet,
    namespace: &str,
    error: &SetError,
    ctx: &Context,
) -> Result<Action, Error> {
    let generation = set.meta().generation;
    let old = set.status.clone().unwrap_or_default();
    let mut status = BenchmarkSetStatus {
        phase: Some(SetPhase::Invalid),
        observed_generation: generation,
        conditions: old.conditions.clone(),
        ..Default::default()
    };
    let message = error.to_string();
    set_condition(
        &mut status.conditions,
        condition(
            "Valid",
            condition_status::FALSE,
            Reason::InvalidSpec.as_str(),
            message.clone(),
            generation,
            Timestamp::now(),
        ),
    );
    if status_differs(&old, &status) {
        publish(
            ctx,
            set,
            EventType::Warning,
            Reason::InvalidSpec.as_str(),
            "Validate",
            &format!("{}: {message}", error.field_path()),
        )
        .await;
        patch_status(ctx, set, namespace, &status).await?;
    }
    Ok(Action::await_change())
}

/// A valid set of a kind the API server does not serve: say so in status and an event,
/// create nothing, and go on when the kind's CRD is installed (discovery's change
/// reconciles every set).
async fn wait_for_crd(
    set: &BenchmarkSet,
    namespace: &str,
    kind: &KindInfo,
    ctx: &Context,
) -> Result<Action, Error> {
    let old = set.status.clone().unwrap_or_default();
    let status = decide::crd_missing_status(set, kind, Timestamp::now());
    if status_differs(&old, &status) {
        let message = served::missing_message(kind);
        publish(
            ctx,
            set,
            EventType::Warning,
            served::CRD_MISSING,
            "Create",
            &message,
        )
        .await;
        patch_status(ctx, set, namespace, &status).await?;
    }
    Ok(Action::requeue(RESYNC))
}

/// A valid set: decide (pure, [`decide::decide`]) → delete the obsolete children and
/// create those that may run now → update status.
async fn advance(
    set: &BenchmarkSet,
    namespace: &str,
    expansion: &Expansion,
    existing: Vec<Arc<DynamicObject>>,
    nodes: Option<&set::NodeLabels>,
    ctx: &Context,
) -> Result<Action, Error> {
    let existing: Vec<&DynamicObject> = existing.iter().map(AsRef::as_ref).collect();
    let mut decision = decide::decide(set, expansion, &existing, nodes, Timestamp::now());
    let crd_outdated = ctx.served.is_outdated(expansion.kind.kind)
        && decide::mark_crd_outdated(
            &mut decision.status,
            set.status.as_ref(),
            expansion.kind,
            set.meta().generation,
            Timestamp::now(),
        );
    let resource = api_resource(expansion.kind);
    let children: Api<DynamicObject> =
        Api::namespaced_with(ctx.client.clone(), namespace, &resource);
    for obsolete in &decision.obsolete {
        // The child as the cache shows it: the delete is conditional on its uid.
        let child = existing
            .iter()
            .find(|child| child.name_any() == *obsolete)
            .and_then(|child| super::caches::Named::of(*child));
        if let Some(child) = child {
            delete_child(&children, &child, namespace).await?;
        }
    }
    if let Some(note) = decide::pruned_note(decision.obsolete.len()) {
        publish(ctx, set, EventType::Normal, "Pruned", "Delete", &note).await;
    }
    if !decision.to_create.is_empty() {
        // Before the first child: its pods are admitted by the set's policy from the start.
        peers::ensure(set, namespace, ctx).await;
    }
    create_children(
        &children,
        set,
        namespace,
        expansion,
        &decision.to_create,
        ctx,
    )
    .await?;
    // Only a set with batches left pays for the names of its ended children.
    if set
        .uid()
        .is_some_and(|uid| ctx.set_tokens.has_batches(&uid))
    {
        let ended: std::collections::HashSet<String> = existing
            .iter()
            .filter(|child| matches!(observed::child_state(child), set::status::ChildState::Created { phase, .. } if phase.is_finished()))
            .map(|child| child.name_any())
            .collect();
        tokens::delete_ended(set, ctx, |name| ended.contains(name)).await;
    }
    if let Some(note) = decide::created_note(expansion, &decision.to_create) {
        let first = decision
            .to_create
            .first()
            .map(|&index| child_reference(expansion, index, namespace));
        plumbing::publish_related(
            &ctx.recorder,
            set,
            first,
            EventType::Normal,
            "Created",
            "Create",
            &note,
        )
        .await;
    }
    let old = set.status.clone().unwrap_or_default();
    let status = &decision.status;
    if crd_outdated {
        let message = served::outdated_message(expansion.kind);
        publish(
            ctx,
            set,
            EventType::Warning,
            served::CRD_OUTDATED,
            "Reconcile",
            &message,
        )
        .await;
    }
    if status_differs(&old, status) {
        if old.phase != status.phase
            && let Some((type_, reason, note)) = decide::phase_event(status)
        {
            publish(ctx, set, type_, reason, "Reconcile", &note).await;
        }
        patch_status(ctx, set, namespace, status).await?;
    }
    Ok(match status.phase {
        Some(SetPhase::Succeeded | SetPhase::Failed) => Action::await_change(),
        _ => Action::requeue(RESYNC),
    })
}

/// Creates the children of `indices`; one that exists already (created by an earlier
/// reconcile the cache did not show yet: same name, same spec) is left as it is. Several
/// at once get their launch tokens in batches first ([`tokens::write_batch`]).
async fn create_children(
    children: &Api<DynamicObject>,
    set: &BenchmarkSet,
    namespace: &str,
    expansion: &Expansion,
    indices: &[usize],
    ctx: &Context,
) -> Result<(), Error> {
    let owner = set::expand::SetRef {
        name: set.name_any(),
        namespace: Some(namespace.to_owned()),
        uid: set.uid(),
    };
    let kind = expansion.kind.kind;
    // One child alone gains nothing from a batch (a create either way), and would leave
    // a batch per child behind until it ends.
    let mut batched: std::collections::HashSet<String> = std::collections::HashSet::new();
    if indices.len() > 1 {
        for chunk in indices.chunks(perfsweep_benchmarks::render::launch::MAX_BATCH_TOKENS) {
            let names: Vec<String> = chunk
                .iter()
                .map(|&index| expansion.children[index].name.clone())
                .collect();
            if let Some(written) = tokens::write_batch(set, namespace, kind, &names, ctx).await {
                batched.extend(written.children);
            }
        }
    }
    for (position, &index) in indices.iter().enumerate() {
        let child = &expansion.children[index];
        let object: DynamicObject = serde_json::from_value(child.to_object(expansion.kind, &owner))
            .map_err(|source| Error::Serialize {
                what: "a child benchmark",
                source,
            })?;
        let outcome = children.create(&PostParams::default(), &object).await;
        if outcome.is_err() && batched.contains(&child.name) {
            // Not the child its key was written for: one of that name was there already,
            // or none was made.
            ctx.set_tokens.unrecord(namespace, kind, &child.name);
        }
        match outcome {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 409 => {}
            Err(source) => {
                for &later in &indices[position + 1..] {
                    let name = &expansion.children[later].name;
                    if batched.contains(name) {
                        ctx.set_tokens.unrecord(namespace, kind, name);
                    }
                }
                return Err(Error::Kube {
                    action: format!("creating {kind} {namespace}/{}", child.name),
                    source,
                });
            }
        }
    }
    Ok(())
}

/// The child of `index`, as an event's related object: each `Created` event then names
/// its own child instead of joining the first one's series.
fn child_reference(
    expansion: &Expansion,
    index: usize,
    namespace: &str,
) -> k8s_openapi::api::core::v1::ObjectReference {
    k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(perfsweep_benchmarks::API_VERSION.into()),
        kind: Some(expansion.kind.kind.into()),
        name: Some(expansion.children[index].name.clone()),
        namespace: Some(namespace.into()),
        ..Default::default()
    }
}

fn status_differs(old: &BenchmarkSetStatus, new: &BenchmarkSetStatus) -> bool {
    plumbing::status_differs(old, new, |s| &mut s.conditions)
}

/// Applies the set's whole status; what it leaves out (failures of deleted children,
/// finishedAt of a set that runs again, the summary of an invalid set) the API server
/// removes.
async fn patch_status(
    ctx: &Context,
    set: &BenchmarkSet,
    namespace: &str,
    status: &BenchmarkSetStatus,
) -> Result<(), Error> {
    let sets: Api<BenchmarkSet> = Api::namespaced(ctx.client.clone(), namespace);
    plumbing::apply_status(&sets, set, status, None).await?;
    Ok(())
}

async fn delete_child(
    children: &Api<DynamicObject>,
    child: &super::caches::Named,
    namespace: &str,
) -> Result<(), Error> {
    let name = &child.name;
    plumbing::delete_if_present(children, name, &child.uid)
        .await
        .map_err(Error::kube(format!(
            "deleting obsolete child {namespace}/{name}"
        )))
}

async fn publish(
    ctx: &Context,
    set: &BenchmarkSet,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    plumbing::publish(&ctx.recorder, set, type_, reason, action, note).await;
}
