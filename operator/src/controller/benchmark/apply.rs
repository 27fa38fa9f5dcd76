//! Apply: create the rendered objects that are missing, keep the evidence, delete what a
//! finished benchmark leaves, publish events.

use super::{
    Api, BTreeMap, Benchmark, ConfigMap, Debug, DeserializeOwned, Engine, Error, EventType,
    Failure, ObjectMeta, Observation, OwnerReference, PersistentVolumeClaim, Pod, PodGroup,
    PostParams, Prepared, Reason, Rendered, Resource, ResourceExt, Secret, Serialize, Service,
    Target, caches, labels, plumbing, render,
};

/// Apply, step one: the rendered objects that are missing. Returns what was created, or
/// the failure that keeps them from being created.
pub(super) async fn create_missing(
    engine: &Engine,
    target: &Target,
    prepared: &Prepared,
    observation: &Observation,
) -> Result<Result<Vec<String>, Failure>, Error> {
    let ctx = &engine.ctx;
    let mut created = Vec::new();
    if let Some(group) = &prepared.rendered.pod_group
        && observation.pod_group.is_none()
    {
        if !engine.volcano {
            return Ok(Err(volcano_missing()));
        }
        match create(&target.api::<PodGroup>(ctx), group, target).await? {
            Created::Yes => created.push(format!("PodGroup {}", group.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
        let group = caches::Change::CreatedGroup(Box::new(group.clone()));
        engine.recent.note(&target.uid, group);
    }
    let missing: Vec<&Pod> = prepared
        .rendered
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
        return Ok(Ok(created));
    }
    let service = &prepared.rendered.service;
    match create(&target.api::<Service>(ctx), service, target).await? {
        Created::Yes => created.push(format!("Service {}", service.name_any())),
        Created::Existed => {}
        Created::Rejected(failure) => return Ok(Err(failure)),
    }
    for secret in &prepared.rendered.secrets {
        // A launch token is made here, once: rendering is pure, and a Secret that
        // exists already keeps its token (create answers Existed).
        let secret = &if render::launch::needs_token(secret) {
            let token = crate::agent::exec::random_token().map_err(|e| Error::Kube {
                action: format!("making the launch token of {}", target.describe()),
                source: kube::Error::Service(e.into()),
            })?;
            render::launch::with_token(secret, &token)
        } else {
            secret.clone()
        };
        match create(&target.api::<Secret>(ctx), secret, target).await? {
            Created::Yes => created.push(format!("Secret {}", secret.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    for claim in &prepared.rendered.claims {
        match create(&target.api::<PersistentVolumeClaim>(ctx), claim, target).await? {
            Created::Yes => created.push(format!("PersistentVolumeClaim {}", claim.name_any())),
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
    }
    let pods = target.api::<Pod>(ctx);
    let mut pod_count = 0;
    for pod in missing {
        match create(&pods, pod, target).await? {
            Created::Yes => pod_count += 1,
            Created::Existed => {}
            Created::Rejected(failure) => return Ok(Err(failure)),
        }
        let pod = caches::Change::Created(Box::new(pod.clone()));
        engine.recent.note(&target.uid, pod);
    }
    if pod_count > 0 {
        created.push(format!(
            "{pod_count} pod{}",
            if pod_count == 1 { "" } else { "s" }
        ));
    }
    Ok(Ok(created))
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

pub(super) enum Created {
    Yes,
    Existed,
    /// The API server refused the object for good (admission, quota, validation).
    Rejected(Failure),
}

pub(super) async fn create<T>(api: &Api<T>, object: &T, target: &Target) -> Result<Created, Error>
where
    T: Resource<DynamicType = ()> + Clone + Serialize + DeserializeOwned + Debug,
{
    let kind = T::kind(&());
    let name = object.name_any();
    match api.create(&PostParams::default(), object).await {
        Ok(_) => Ok(Created::Yes),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            // Created by an earlier reconcile that the list did not show yet, or someone
            // else's object of the same name, which the benchmark must not adopt.
            let existing = api.get_opt(&name).await.map_err(Error::kube(format!(
                "reading {kind} {}/{name} of {}",
                target.namespace,
                target.describe()
            )))?;
            match existing {
                Some(existing) if !target.owns(&existing) => {
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
                _ => Ok(Created::Existed),
            }
        }
        Err(kube::Error::Api(status)) if status.code == 404 && kind == PodGroup::kind(&()) => {
            Ok(Created::Rejected(volcano_missing()))
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

/// Whether the cached benchmark is still the stored one: objects are only created from
/// the latest state, so a stale copy never revives a finished benchmark.
pub(super) async fn still_current<K: Benchmark>(
    engine: &Engine,
    target: &Target,
) -> Result<bool, Error> {
    let fresh = target
        .api::<K>(&engine.ctx)
        .get_opt(&target.name)
        .await
        .map_err(Error::kube(format!("reading {}", target.describe())))?;
    Ok(fresh.is_some_and(|fresh| fresh.meta().resource_version == target.resource_version))
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
    report: Option<&perfsweep_benchmarks::report::AgentReport>,
    environment: &perfsweep_benchmarks::record::Environment,
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

/// Deletes what the benchmark created that is still there: pods, Service, claims and
/// PodGroup as the caches show them, and the rendered Secrets by name (Secrets are not
/// watched: that would need read access to every Secret in the namespace, which the
/// operator does not ask for). Idempotent: what is already gone is skipped.
pub(super) async fn release(
    engine: &Engine,
    target: &Target,
    rendered: Option<&Rendered>,
) -> Result<(), Error> {
    let ctx = &engine.ctx;
    let owned = &engine.owned;
    let (namespace, uid) = (target.namespace.as_str(), target.uid.as_str());
    let pods = caches::left_to_delete(&owned.pods, namespace, uid);
    delete_named(engine, &target.api::<Pod>(ctx), &pods, target).await?;
    let services = caches::left_to_delete(&owned.services, namespace, uid);
    delete_named(engine, &target.api::<Service>(ctx), &services, target).await?;
    if let Some(rendered) = rendered {
        let secrets: Vec<String> = rendered.secrets.iter().map(ResourceExt::name_any).collect();
        delete_named(engine, &target.api::<Secret>(ctx), &secrets, target).await?;
    }
    let claims = caches::left_to_delete(&owned.claims, namespace, uid);
    delete_named(
        engine,
        &target.api::<PersistentVolumeClaim>(ctx),
        &claims,
        target,
    )
    .await?;
    if let Some(groups) = &owned.pod_groups {
        let groups = caches::left_to_delete(groups, namespace, uid);
        delete_named(engine, &target.api::<PodGroup>(ctx), &groups, target).await?;
    }
    Ok(())
}

pub(super) async fn delete_named<T>(
    engine: &Engine,
    api: &Api<T>,
    names: &[String],
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
            .is_some_and(|name| !names.iter().any(|n| n == name)),
        _ => false,
    });
    for name in names {
        let what = format!("{kind}/{name}");
        if engine.recent.deleted(&target.uid, &what) {
            // Deleted a moment ago; the cache has not caught up.
            continue;
        }
        plumbing::delete_if_present(api, name)
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
