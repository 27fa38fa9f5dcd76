//! Apply: create the rendered objects that are missing, keep the evidence, delete what a
//! finished benchmark leaves, publish events.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Debug;

use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Api, PostParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt};
use perfsweep_benchmarks::api::labels;
use perfsweep_benchmarks::api::volcano::PodGroup;
use perfsweep_benchmarks::outcome::{Failure, Reason};
use perfsweep_benchmarks::render::{self, Rendered};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Engine;
use super::kind::Benchmark;
use super::observe::Observation;
use super::prepare::Prepared;
use super::step::{At, Stage, Step};
use super::target::Target;
use crate::controller::caches::{self, Named};
use crate::controller::{Error, plumbing};

/// Apply, step one: the rendered objects that are missing. Returns what was created, or
/// the failure that keeps them from being created (every operator error here is
/// [`Stage::Creating`]).
///
/// A gang's PodGroup is created first and owns everything else the benchmark runs with
/// (Service, Secrets, claims, pods): deleting the PodGroup lets the garbage collector
/// delete the rest, one request instead of one per object.
pub(super) async fn create_missing(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
    observation: &Observation,
) -> Step<Vec<String>> {
    let ctx = &engine.ctx;
    // Before the first object: a network that is not there fails at once.
    if observation.pod_group.is_none()
        && observation.pods.is_empty()
        && let Err(failure) =
            super::network::check_attachment(&ctx.client, &prepared.spec, &target.namespace).await
    {
        return Err(failure.into());
    }
    if observation.pod_group.is_none() && observation.pods.is_empty() {
        super::secrets::check_consumable(&ctx.client, target, prepared).await?;
    }
    // Pods made later read their token where the first ones did, whatever this
    // reconcile rendered (a restart between them forgets a batch's key).
    let rendered = match token_source_of_existing(observation, prepared, target) {
        Some(source) => Cow::Owned(prepared.rendered.clone().with_token_source(&source)),
        None => Cow::Borrowed(&prepared.rendered),
    };
    let mut created = Vec::new();
    let mut group_owner = observation.pod_group.as_ref().and_then(gang_owner);
    if let Some(group) = &rendered.pod_group
        && observation.pod_group.is_none()
    {
        if !engine.volcano {
            return Err(volcano_missing().into());
        }
        let stored = match create(&target.api::<PodGroup>(ctx), group, target)
            .await
            .at(Stage::Creating)?
        {
            Created::Yes(stored) => {
                created.push(format!("PodGroup {}", group.name_any()));
                Some(stored)
            }
            Created::Existed(stored) => stored,
            Created::Rejected(failure) | Created::NotYet(failure) => return Err(failure.into()),
        };
        group_owner = stored.as_ref().and_then(gang_owner);
        let noted = stored.unwrap_or_else(|| group.clone());
        engine
            .recent
            .note(&target.uid, caches::Change::CreatedGroup(Box::new(noted)));
    }
    let owned = |object: &ObjectMeta| owned_by_gang(object, group_owner.as_ref());
    let missing: Vec<&Pod> = rendered
        .pods
        .iter()
        .filter(|pod| {
            !observation
                .pods
                .iter()
                .any(|p| p.name_any() == pod.name_any())
        })
        .collect();
    if missing.is_empty() {
        return Ok(created);
    }
    let service = &rendered.service;
    let service = &Service {
        metadata: owned(&service.metadata),
        ..service.clone()
    };
    match create(&target.api::<Service>(ctx), service, target)
        .await
        .at(Stage::Creating)?
    {
        Created::Yes(_) => created.push(format!("Service {}", service.name_any())),
        Created::Existed(_) => {}
        Created::Rejected(failure) | Created::NotYet(failure) => return Err(failure.into()),
    }
    if let Some(policy) = &rendered.network_policy {
        let policy = &NetworkPolicy {
            metadata: owned(&policy.metadata),
            ..policy.clone()
        };
        match create(&target.api::<NetworkPolicy>(ctx), policy, target)
            .await
            .at(Stage::Creating)?
        {
            Created::Yes(_) => created.push(format!("NetworkPolicy {}", policy.name_any())),
            Created::Existed(_) => {}
            Created::Rejected(failure) | Created::NotYet(failure) => return Err(failure.into()),
        }
    }
    for secret in &rendered.secrets {
        // A launch token is made here, once: rendering is pure, and a Secret that
        // exists already keeps its token (create answers Existed).
        let mut secret = if render::launch::needs_token(secret) {
            let token = crate::token::random()
                .map_err(|source| Error::Random {
                    what: format!("the launch token of {}", target.describe()),
                    source,
                })
                .at(Stage::Creating)?;
            render::launch::with_token(secret, &token)
        } else {
            secret.clone()
        };
        secret.metadata = owned(&secret.metadata);
        match create(&target.api::<Secret>(ctx), &secret, target)
            .await
            .at(Stage::Creating)?
        {
            Created::Yes(_) => created.push(format!("Secret {}", secret.name_any())),
            Created::Existed(_) => {}
            Created::Rejected(failure) | Created::NotYet(failure) => return Err(failure.into()),
        }
    }
    for claim in &rendered.claims {
        let claim = &PersistentVolumeClaim {
            metadata: owned(&claim.metadata),
            ..claim.clone()
        };
        match create(&target.api::<PersistentVolumeClaim>(ctx), claim, target)
            .await
            .at(Stage::Creating)?
        {
            Created::Yes(_) => {
                created.push(format!("PersistentVolumeClaim {}", claim.name_any()));
            }
            Created::Existed(_) => {}
            Created::Rejected(failure) | Created::NotYet(failure) => return Err(failure.into()),
        }
    }
    let pods = target.api::<Pod>(ctx);
    let mut pod_count = 0;
    for pod in missing {
        let pod = Pod {
            metadata: owned(&pod.metadata),
            ..pod.clone()
        };
        let stored = match create(&pods, &pod, target).await.at(Stage::Creating)? {
            Created::Yes(stored) => {
                pod_count += 1;
                Some(stored)
            }
            Created::Existed(stored) => stored,
            Created::Rejected(failure) => return Err(failure.into()),
            Created::NotYet(why) => {
                // The others would be refused alike; the PodGroup's next change (or the
                // next look) brings the reconcile that creates them.
                tracing::debug!(benchmark = %target.describe(), why = %why.message, "pods not admitted yet");
                break;
            }
        };
        let noted = stored.unwrap_or(pod);
        engine
            .recent
            .note(&target.uid, caches::Change::Created(Box::new(noted)));
    }
    if pod_count > 0 {
        created.push(format!(
            "{pod_count} pod{}",
            if pod_count == 1 { "" } else { "s" }
        ));
    }
    Ok(created)
}

/// Where the benchmark's existing pods read their token, when that is not where this
/// reconcile's rendering has them read it: the pods still to make must read the same.
/// The benchmark's own launch Secret is not such a place (rendering makes it when it is
/// needed).
pub(super) fn token_source_of_existing(
    observation: &Observation,
    prepared: &Prepared,
    target: &Target,
) -> Option<render::launch::TokenSource> {
    let existing = observation
        .pods
        .iter()
        .find_map(render::launch::token_source_of)?;
    let rendered = prepared
        .rendered
        .pods
        .first()
        .and_then(render::launch::token_source_of);
    let own = perfsweep_benchmarks::execution::agent_env::launch_secret_name(&target.name);
    (rendered.as_ref() != Some(&existing) && existing.secret != own).then_some(existing)
}

/// The owner reference that makes an object a member of the gang `group`; `None` for a
/// PodGroup the API server has not given a uid (not stored yet).
pub(super) fn gang_owner(group: &PodGroup) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: PodGroup::api_version(&()).into_owned(),
        kind: PodGroup::kind(&()).into_owned(),
        name: group.name_any(),
        uid: group.uid()?,
        controller: Some(true),
        // Blocking the PodGroup's deletion would need update on podgroups/finalizers
        // where owner-reference permissions are enforced; nothing waits for the members.
        block_owner_deletion: None,
    })
}

/// `metadata` owned by the gang (the PodGroup) instead of the benchmark, when there is
/// one: the PodGroup itself is owned by the benchmark, so deleting the benchmark still
/// deletes everything.
fn owned_by_gang(metadata: &ObjectMeta, gang: Option<&OwnerReference>) -> ObjectMeta {
    let mut metadata = metadata.clone();
    if let Some(gang) = gang {
        metadata.owner_references = Some(vec![gang.clone()]);
    }
    metadata
}

pub(super) fn volcano_missing() -> Failure {
    Failure::new(
        Reason::VolcanoNotInstalled,
        format!(
            "scheduler: volcano needs Volcano's PodGroup ({}), which this cluster does not serve: install Volcano (then restart the operator) or set scheduler: default",
            PodGroup::api_version(&())
        ),
    )
}

pub(super) enum Created<T> {
    /// Created: the object as stored.
    Yes(T),
    /// Created for this benchmark before: the object as stored, if it is still there.
    Existed(Option<T>),
    /// The API server refused the object for good (admission, quota, validation).
    Rejected(Failure),
    /// Refused for now: Volcano admits a gang's pods only once its PodGroup left
    /// `Pending`. Only pods are answered so; the failure says what was refused, should
    /// it come to that.
    NotYet(Failure),
}

/// Whether an admission refusal is Volcano's pod webhook waiting for the gang's PodGroup
/// (`/pods/validate`, where enabled, refuses a pod while its PodGroup is missing or
/// `Pending`): Volcano's scheduler moves the PodGroup on once its queue admits it, and
/// that change triggers the reconcile that creates the pods.
fn gang_not_admitted(message: &str) -> bool {
    message.contains("validatepod.volcano.sh")
        && (message.contains("podgroup phase is Pending")
            || message.contains("failed to get PodGroup"))
}

pub(super) async fn create<T>(
    api: &Api<T>,
    object: &T,
    target: &Target,
) -> Result<Created<T>, Error>
where
    T: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let kind = T::kind(&());
    let name = object.name_any();
    match api.create(&PostParams::default(), object).await {
        Ok(stored) => Ok(Created::Yes(stored)),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            // Created by an earlier reconcile that the list did not show yet, or someone
            // else's object of the same name, which the benchmark must not adopt.
            let existing = api.get_opt(&name).await.map_err(Error::kube(format!(
                "reading {kind} {}/{name} of {}",
                target.namespace,
                target.describe()
            )))?;
            // Ours if owned by the benchmark or by the owner it was to be given (its gang).
            let ours = |existing: &T| {
                target.owns(existing)
                    || existing.owner_references().iter().any(|held| {
                        object
                            .owner_references()
                            .iter()
                            .any(|meant| meant.uid == held.uid)
                    })
            };
            match existing {
                Some(existing) if !ours(&existing) => {
                    let owner = existing
                        .owner_references()
                        .first()
                        .map(|o| format!(" (it belongs to {} {})", o.kind, o.name))
                        .unwrap_or_default();
                    Ok(Created::Rejected(Failure::new(
                        Reason::NameConflict,
                        format!(
                            "{kind} {}/{name} already exists and does not belong to this benchmark{owner}: delete it or rename the benchmark",
                            target.namespace
                        ),
                    )))
                }
                // Created for this benchmark before (by an earlier reconcile or operator
                // instance): adopted as it is.
                existing => Ok(Created::Existed(existing)),
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 && kind == PodGroup::kind(&()) => {
            Ok(Created::Rejected(volcano_missing()))
        }
        Err(kube::Error::Api(status))
            if status.code == 400
                && kind == Pod::kind(&())
                && gang_not_admitted(&status.message) =>
        {
            Ok(Created::NotYet(Failure::new(
                Reason::CreateRejected,
                format!(
                    "the API server refused {kind} {name} for now: {}",
                    status.message
                ),
            )))
        }
        Err(kube::Error::Api(status)) if matches!(status.code, 400 | 403 | 422) => {
            Ok(Created::Rejected(Failure::new(
                Reason::CreateRejected,
                format!("the API server rejected {kind} {name}: {}", status.message),
            )))
        }
        Err(source) => Err(Error::Kube {
            action: format!(
                "creating {kind} {}/{name} of {}",
                target.namespace,
                target.describe()
            ),
            source,
        }),
    }
}

/// Largest report kept whole in the evidence ConfigMap; ConfigMaps hold at most 1 MiB.
pub(super) const EVIDENCE_LIMIT: usize = 900 * 1024;

/// Keeps the agent's report (of a succeeded run), raw output included, and the
/// environment the benchmark ran in, in a ConfigMap owned by the benchmark, so the
/// evidence behind the result outlives the pods. A raw output too big for a ConfigMap
/// is left out (its digest stays, and the log had it).
pub(super) async fn keep_evidence(
    engine: &Engine,
    target: &Target,
    report: Option<&perfsweep_benchmarks::execution::agent_report::AgentReport>,
    environment: &perfsweep_benchmarks::results::record::Environment,
) -> Result<(), Error> {
    let json = |text: Result<String, serde_json::Error>, what: &'static str| {
        text.map_err(|source| Error::Serialize { what, source })
    };
    let mut data = BTreeMap::from([(
        labels::EVIDENCE_ENVIRONMENT_KEY.to_owned(),
        json(serde_json::to_string(environment), "the environment")?,
    )]);
    if let Some(report) = report {
        let mut report = report.clone();
        let mut text = json(serde_json::to_string(&report), "the agent report")?;
        if text.len() > EVIDENCE_LIMIT {
            report.raw_output = None;
            text = json(serde_json::to_string(&report), "the agent report")?;
        }
        data.insert(labels::EVIDENCE_REPORT_KEY.to_owned(), text);
    }
    let name = labels::evidence_config_map(&target.name);
    let kept = caches::owned_by(&engine.owned.config_maps, &target.namespace, &target.uid);
    if kept.iter().any(|map| map.name_any() == name) {
        // Kept by an earlier reconcile whose status write lost a race.
        return Ok(());
    }
    let map = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(target.namespace.clone()),
            labels: Some(BTreeMap::from([
                (labels::MANAGED_BY.to_owned(), labels::MANAGER.to_owned()),
                (labels::BENCHMARK.to_owned(), target.name.clone()),
            ])),
            owner_references: Some(vec![OwnerReference {
                api_version: perfsweep_benchmarks::API_VERSION.to_owned(),
                kind: target.info.kind.to_owned(),
                name: target.name.clone(),
                uid: target.uid.clone(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }]),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    };
    match target
        .api::<ConfigMap>(&engine.ctx)
        .create(&PostParams::default(), &map)
        .await
    {
        Ok(_) => Ok(()),
        // Kept by an earlier reconcile whose status write lost a race.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(source) => Err(Error::Kube {
            action: format!(
                "keeping the evidence of {} in ConfigMap {name}",
                target.describe()
            ),
            source,
        }),
    }
}

/// Deletes what the benchmark created that is still there. A gang's members (pods,
/// Service, NetworkPolicy, Secrets, claims) are owned by its PodGroup: deleting the
/// PodGroup is one request, and the garbage collector deletes them. What the benchmark
/// owns itself (the objects of a benchmark without a gang) is deleted one by one as the
/// caches show it, and its Secrets and NetworkPolicy by name once read back and found
/// owned by it (they are not watched: Secrets would need read access to every Secret in
/// the namespace, which the operator does not ask for). Every delete is conditional on
/// the uid of the object found ours, so someone else's object of the same name — one
/// whose create made this benchmark fail with NameConflict — is never deleted.
/// Idempotent: what is already gone is skipped.
pub(super) async fn release(
    engine: &Engine,
    target: &Target,
    rendered: Option<&Rendered>,
) -> Result<(), Error> {
    let ctx = &engine.ctx;
    let owned = &engine.owned;
    let (namespace, uid) = (target.namespace.as_str(), target.uid.as_str());
    if let Some(groups) = &owned.pod_groups {
        let groups = caches::left_to_delete(groups, namespace, uid);
        delete_named(engine, &target.api::<PodGroup>(ctx), &groups, target).await?;
    }
    let pods = caches::left_to_delete(&owned.pods, namespace, uid);
    delete_named(engine, &target.api::<Pod>(ctx), &pods, target).await?;
    let services = caches::left_to_delete(&owned.services, namespace, uid);
    delete_named(engine, &target.api::<Service>(ctx), &services, target).await?;
    if let Some(rendered) = rendered.filter(|r| r.pod_group.is_none()) {
        let names: Vec<String> = rendered.secrets.iter().map(ResourceExt::name_any).collect();
        let secrets = ours_by_name(engine, &target.api::<Secret>(ctx), &names, target).await?;
        delete_named(engine, &target.api::<Secret>(ctx), &secrets, target).await?;
        // By the name a policy of its own has, whether or not this rendering has one: a
        // set's child reconciled before its set after a restart may have made one.
        let names = [target.name.clone()];
        let policies =
            ours_by_name(engine, &target.api::<NetworkPolicy>(ctx), &names, target).await?;
        delete_named(engine, &target.api::<NetworkPolicy>(ctx), &policies, target).await?;
    }
    let claims = caches::left_to_delete(&owned.claims, namespace, uid);
    delete_named(
        engine,
        &target.api::<PersistentVolumeClaim>(ctx),
        &claims,
        target,
    )
    .await
}

/// The objects of `names` that exist and are owned by the benchmark, read back by name
/// (not those deleted a moment ago).
async fn ours_by_name<T>(
    engine: &Engine,
    api: &Api<T>,
    names: &[String],
    target: &Target,
) -> Result<Vec<Named>, Error>
where
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let mut ours = Vec::new();
    for name in names {
        if engine
            .recent
            .deleted(&target.uid, &format!("{}/{name}", T::kind(&())))
        {
            continue;
        }
        let found = api.get_opt(name).await.map_err(Error::kube(format!(
            "reading {} {}/{name} of {} before deleting it",
            T::kind(&()),
            target.namespace,
            target.describe()
        )))?;
        match found {
            Some(object) if target.owns(&object) => ours.extend(Named::of(&object)),
            Some(_) => tracing::info!(
                benchmark = %target.describe(),
                kind = %T::kind(&()),
                %name,
                "not deleting an object of the benchmark's name that it does not own"
            ),
            None => {}
        }
    }
    Ok(ours)
}

pub(super) async fn delete_named<T>(
    engine: &Engine,
    api: &Api<T>,
    objects: &[Named],
    target: &Target,
) -> Result<(), Error>
where
    T: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
{
    let kind = T::kind(&());
    // A delete whose object the cache no longer shows is done.
    engine.recent.forget(&target.uid, |change| match change {
        caches::Change::Deleted(what) => what
            .strip_prefix(&format!("{kind}/"))
            .is_some_and(|name| !objects.iter().any(|o| o.name == name)),
        _ => false,
    });
    for Named { name, uid } in objects {
        let what = format!("{kind}/{name}");
        if engine.recent.deleted(&target.uid, &what) {
            // Deleted a moment ago; the cache has not caught up.
            continue;
        }
        plumbing::delete_if_present(api, name, uid)
            .await
            .map_err(Error::kube(format!(
                "deleting {} {}/{name} of {}",
                T::kind(&()),
                target.namespace,
                target.describe()
            )))?;
        engine
            .recent
            .note(&target.uid, caches::Change::Deleted(what));
    }
    Ok(())
}

pub(super) async fn publish<K: Benchmark>(
    engine: &Engine,
    benchmark: &K,
    type_: EventType,
    reason: &str,
    action: &str,
    note: &str,
) {
    plumbing::publish(&engine.ctx.recorder, benchmark, type_, reason, action, note).await;
}
