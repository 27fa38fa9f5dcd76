//! The API double driven through a real `kube::Client`, as perfsweep's code will drive it.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::controller::Action;
use kube::runtime::{Controller, watcher};
use kube::{Client, Resource, ResourceExt};
use perfsweep_testkit::{ApiDouble, Gvr, RequestMatcher};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(10);

fn api_status(err: kube::Error) -> (u16, String) {
    match err {
        kube::Error::Api(status) => (status.code, status.reason),
        other => panic!("expected an API error, got {other:?}"),
    }
}

fn config_map(name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.into());
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    cm.data = Some(BTreeMap::from([("k".to_owned(), "v".to_owned())]));
    cm
}

fn owned_by(mut cm: ConfigMap, owner: &ConfigMap) -> ConfigMap {
    let owner_ref = owner
        .controller_owner_ref(&())
        .expect("owner has name and uid");
    cm.metadata.owner_references = Some(vec![owner_ref]);
    cm
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "main", "image": "busybox"}]},
    }))
    .expect("valid pod")
}

async fn names(api: &Api<ConfigMap>, selector: &str) -> Vec<String> {
    let lp = ListParams::default().labels(selector);
    let list = api.list(&lp).await.expect("list");
    list.items.iter().map(ResourceExt::name_any).collect()
}

#[tokio::test]
async fn create_get_and_list_with_selectors() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let pp = PostParams::default();
    cms.create(
        &pp,
        &config_map("web", &[("app", "web"), ("tier", "front")]),
    )
    .await
    .expect("create web");
    cms.create(&pp, &config_map("db", &[("app", "db")]))
        .await
        .expect("create db");
    cms.create(&pp, &config_map("bare", &[]))
        .await
        .expect("create bare");

    let web = cms.get("web").await.expect("get");
    assert_eq!(web.metadata.namespace.as_deref(), Some("default"));
    assert!(web.metadata.uid.is_some());
    assert!(web.metadata.creation_timestamp.is_some());
    assert_eq!(web.metadata.generation, Some(1));

    assert_eq!(names(&cms, "app=web").await, ["web"]);
    assert_eq!(names(&cms, "app==db").await, ["db"]);
    assert_eq!(names(&cms, "app!=web").await, ["bare", "db"]);
    assert_eq!(names(&cms, "app in (web,db)").await, ["db", "web"]);
    assert_eq!(names(&cms, "app notin (web)").await, ["bare", "db"]);
    assert_eq!(names(&cms, "app").await, ["db", "web"]);
    assert_eq!(names(&cms, "!app").await, ["bare"]);
    assert_eq!(names(&cms, "app,!tier").await, ["db"]);

    let by_name = cms
        .list(&ListParams::default().fields("metadata.name=db"))
        .await
        .expect("field selector list");
    assert_eq!(by_name.items.len(), 1);
    let rv: u64 = by_name
        .metadata
        .resource_version
        .expect("list rv")
        .parse()
        .expect("numeric rv");
    assert_eq!(rv, double.resource_version());

    let all: Api<ConfigMap> = Api::all(double.client());
    assert_eq!(
        all.list(&ListParams::default())
            .await
            .expect("all")
            .items
            .len(),
        3
    );

    let err = cms
        .list(&ListParams::default().labels("app in web"))
        .await
        .expect_err("malformed selector");
    assert_eq!(api_status(err).0, 400);
    let err = cms.get("missing").await.expect_err("missing");
    assert_eq!(api_status(err), (404, "NotFound".into()));
}

#[tokio::test]
async fn create_errors_are_statuses() {
    let double = ApiDouble::start().await;
    let client = double.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    cms.create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .expect("create");
    let err = cms
        .create(&PostParams::default(), &config_map("dup", &[]))
        .await
        .expect_err("duplicate");
    match err {
        kube::Error::Api(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (409, "AlreadyExists")
            );
            let details = status.details.expect("details");
            assert_eq!(details.name, "dup");
            assert_eq!(details.kind, "configmaps");
        }
        other => panic!("{other:?}"),
    }

    let nameless = ConfigMap::default();
    let err = cms
        .create(&PostParams::default(), &nameless)
        .await
        .expect_err("no name");
    assert_eq!(api_status(err), (422, "Invalid".into()));

    let mut generated = ConfigMap::default();
    generated.metadata.generate_name = Some("gen-".into());
    let made = cms
        .create(&PostParams::default(), &generated)
        .await
        .expect("generateName");
    let name = made.name_any();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");

    let elsewhere: Api<ConfigMap> = Api::namespaced(client.clone(), "nowhere");
    let err = elsewhere
        .create(&PostParams::default(), &config_map("x", &[]))
        .await
        .expect_err("namespace missing");
    assert_eq!(api_status(err), (404, "NotFound".into()));

    // A body of the wrong kind for the URL.
    let wrong = DynamicObject::new("x", &ApiResource::erase::<Pod>(&()));
    let as_cm = ApiResource::erase::<ConfigMap>(&());
    let dynamic: Api<DynamicObject> = Api::default_namespaced_with(client, &as_cm);
    let err = dynamic
        .create(&PostParams::default(), &wrong)
        .await
        .expect_err("kind mismatch");
    assert_eq!(api_status(err).0, 400);
}

#[tokio::test]
async fn update_conflicts_on_stale_resource_version() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let created = cms
        .create(&PostParams::default(), &config_map("c", &[]))
        .await
        .expect("create");

    let mut first = created.clone();
    first.data = Some(BTreeMap::from([("k".into(), "first".into())]));
    let updated = cms
        .replace("c", &PostParams::default(), &first)
        .await
        .expect("update with current rv");
    assert_ne!(updated.resource_version(), created.resource_version());
    assert_eq!(updated.metadata.generation, Some(2));

    let mut stale = created.clone();
    stale.data = Some(BTreeMap::from([("k".into(), "stale".into())]));
    let err = cms
        .replace("c", &PostParams::default(), &stale)
        .await
        .expect_err("stale rv");
    assert_eq!(api_status(err), (409, "Conflict".into()));

    // An update that changes nothing keeps the resourceVersion, as in etcd.
    let again = cms
        .replace("c", &PostParams::default(), &updated)
        .await
        .expect("no-op update");
    assert_eq!(again.resource_version(), updated.resource_version());

    let err = cms
        .replace("other", &PostParams::default(), &updated)
        .await
        .expect_err("name mismatch");
    assert_eq!(api_status(err).0, 400);
}

#[tokio::test]
async fn merge_json_and_apply_patches() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    cms.create(&PostParams::default(), &config_map("p", &[("a", "1")]))
        .await
        .expect("create");
    let pp = PatchParams::default();

    let merged = cms
        .patch(
            "p",
            &pp,
            &Patch::Merge(
                json!({"metadata": {"labels": {"a": null, "b": "2"}}, "data": {"x": "y"}}),
            ),
        )
        .await
        .expect("merge patch");
    assert_eq!(merged.labels().get("b").map(String::as_str), Some("2"));
    assert!(!merged.labels().contains_key("a"));
    assert_eq!(merged.data.as_ref().map(BTreeMap::len), Some(2));

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/x", "value": "y"},
        {"op": "replace", "path": "/data/x", "value": "z"},
    ]))
    .expect("ops");
    let patched = cms
        .patch("p", &pp, &Patch::Json::<()>(ops))
        .await
        .expect("json patch");
    assert_eq!(patched.data.expect("data")["x"], "z");

    let failing: json_patch::Patch =
        serde_json::from_value(json!([{"op": "test", "path": "/data/x", "value": "nope"}]))
            .expect("ops");
    let err = cms
        .patch("p", &pp, &Patch::Json::<()>(failing))
        .await
        .expect_err("failed test op");
    assert_eq!(api_status(err).0, 422);

    let stale = Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"x": "w"}}));
    let err = cms
        .patch("p", &pp, &stale)
        .await
        .expect_err("stale rv in patch");
    assert_eq!(api_status(err), (409, "Conflict".into()));

    let err = cms
        .patch("missing", &pp, &Patch::Merge(json!({})))
        .await
        .expect_err("missing");
    assert_eq!(api_status(err).0, 404);

    let apply = PatchParams::apply("perfsweep-test").force();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"a": "1"}});
    let created = cms
        .patch("applied", &apply, &Patch::Apply(&body))
        .await
        .expect("apply creates");
    assert_eq!(created.data.expect("data")["a"], "1");
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": {"b": "2"}});
    let updated = cms
        .patch("applied", &apply, &Patch::Apply(&body))
        .await
        .expect("apply updates");
    assert_eq!(updated.data.expect("data").len(), 2);

    let strategic = cms
        .patch("p", &pp, &Patch::Strategic(json!({"data": {"s": "t"}})))
        .await
        .expect("strategic");
    assert_eq!(strategic.data.expect("data")["s"], "t");
}

#[tokio::test]
async fn status_subresource_is_isolated_and_generation_tracks_spec() {
    let double = ApiDouble::start().await;
    let pods: Api<Pod> = Api::default_namespaced(double.client());
    let mut body = pod("p");
    body.status = Some(serde_json::from_value(json!({"phase": "Running"})).expect("status"));
    let created = pods
        .create(&PostParams::default(), &body)
        .await
        .expect("create");
    let phase = |p: &Pod| p.status.as_ref().and_then(|s| s.phase.clone());
    assert_eq!(
        phase(&created).as_deref(),
        Some("Pending"),
        "create drops status"
    );
    assert_eq!(created.metadata.generation, Some(1));

    let main = pods
        .patch(
            "p",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"status": {"phase": "Failed"}, "metadata": {"labels": {"l": "1"}}}),
            ),
        )
        .await
        .expect("main patch");
    assert_eq!(
        phase(&main).as_deref(),
        Some("Pending"),
        "main endpoint ignores status"
    );
    assert_eq!(main.labels()["l"], "1");
    assert_eq!(
        main.metadata.generation,
        Some(1),
        "labels do not bump generation"
    );

    let status = pods
        .patch_status(
            "p",
            &PatchParams::default(),
            &Patch::Merge(json!({
                "status": {"phase": "Running"},
                "spec": {"activeDeadlineSeconds": 5},
                "metadata": {"labels": {"l": "2"}},
            })),
        )
        .await
        .expect("status patch");
    assert_eq!(phase(&status).as_deref(), Some("Running"));
    assert_eq!(
        status.spec.as_ref().and_then(|s| s.active_deadline_seconds),
        None
    );
    assert_eq!(
        status.labels()["l"],
        "1",
        "status endpoint ignores metadata"
    );
    assert_eq!(status.metadata.generation, Some(1));

    let mut replaced = status.clone();
    replaced
        .spec
        .as_mut()
        .expect("spec")
        .active_deadline_seconds = Some(30);
    let replaced = pods
        .replace("p", &PostParams::default(), &replaced)
        .await
        .expect("replace spec");
    assert_eq!(
        replaced.metadata.generation,
        Some(2),
        "spec change bumps generation"
    );
    assert_eq!(phase(&replaced).as_deref(), Some("Running"));

    let mut for_status = replaced.clone();
    for_status.status =
        Some(serde_json::from_value(json!({"phase": "Succeeded"})).expect("status"));
    let done = pods
        .replace_status("p", &PostParams::default(), &for_status)
        .await
        .expect("replace status");
    assert_eq!(phase(&done).as_deref(), Some("Succeeded"));
    assert_eq!(done.metadata.generation, Some(2));

    // Configmaps have no status subresource.
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    cms.create(&PostParams::default(), &config_map("c", &[]))
        .await
        .expect("create cm");
    let err = cms
        .patch_status("c", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect_err("no status subresource");
    assert_eq!(api_status(err).0, 404);
}

#[tokio::test]
async fn direct_store_access_drives_pods_like_a_kubelet() {
    let double = ApiDouble::start().await;
    let pods: Api<Pod> = Api::default_namespaced(double.client());
    pods.create(&PostParams::default(), &pod("worker"))
        .await
        .expect("create");
    let before = double.request_count();
    double
        .patch_status(
            &Gvr::PODS,
            Some("default"),
            "worker",
            json!({"status": {"phase": "Succeeded", "containerStatuses": [{
                "name": "main", "image": "busybox", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": {"exitCode": 0, "message": "{\"score\": 1}"}},
            }]}}),
        )
        .expect("kubelet status");
    assert_eq!(
        double.request_count(),
        before,
        "direct access is not recorded"
    );
    let seen = pods.get("worker").await.expect("get");
    let status = seen.status.expect("status");
    assert_eq!(status.phase.as_deref(), Some("Succeeded"));
    let terminated = status.container_statuses.expect("statuses")[0]
        .state
        .clone()
        .and_then(|s| s.terminated)
        .expect("terminated");
    assert_eq!(terminated.message.as_deref(), Some("{\"score\": 1}"));

    assert_eq!(double.list(&Gvr::PODS, None).len(), 1);
    assert!(double.get(&Gvr::PODS, Some("default"), "worker").is_some());
    double
        .create(&Gvr::CONFIGMAPS, json!({"metadata": {"name": "direct"}}))
        .expect("direct create");
    assert!(
        double
            .get(&Gvr::CONFIGMAPS, Some("default"), "direct")
            .is_some()
    );
    double
        .delete(&Gvr::CONFIGMAPS, Some("default"), "direct")
        .expect("direct delete");
    assert!(
        double
            .get(&Gvr::CONFIGMAPS, Some("default"), "direct")
            .is_none()
    );
}

/// Collects watcher events until `done` says the collection is complete.
async fn wait_for_events<S>(stream: &mut S, mut done: impl FnMut(&[String]) -> bool) -> Vec<String>
where
    S: futures::Stream<Item = Result<watcher::Event<ConfigMap>, watcher::Error>> + Unpin,
{
    let mut seen = Vec::new();
    tokio::time::timeout(WAIT, async {
        while !done(&seen) {
            let event = stream
                .next()
                .await
                .expect("stream open")
                .expect("no watch error");
            let label = match event {
                watcher::Event::Apply(cm) => format!("apply:{}", cm.name_any()),
                watcher::Event::Delete(cm) => format!("delete:{}", cm.name_any()),
                watcher::Event::InitApply(cm) => format!("init:{}", cm.name_any()),
                watcher::Event::Init => "init".to_owned(),
                watcher::Event::InitDone => "initdone".to_owned(),
            };
            seen.push(label);
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out; saw {seen:?}"));
    seen
}

async fn watcher_sees_changes(config: watcher::Config, initial_list_requests: usize) {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    cms.create(&PostParams::default(), &config_map("before", &[("w", "1")]))
        .await
        .expect("create");
    cms.create(&PostParams::default(), &config_map("unlabelled", &[]))
        .await
        .expect("create");
    let mut stream = watcher(cms.clone(), config.labels("w=1")).boxed();
    let seen = wait_for_events(&mut stream, |s| s.iter().any(|e| e == "initdone")).await;
    assert_eq!(seen, ["init", "init:before", "initdone"]);
    let lists = double
        .requests()
        .iter()
        .filter(|r| r.verb == "list")
        .count();
    assert_eq!(lists, initial_list_requests);

    cms.create(&PostParams::default(), &config_map("after", &[("w", "1")]))
        .await
        .expect("create");
    cms.patch(
        "after",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "changed"}})),
    )
    .await
    .expect("patch");
    // Leaving the selection is seen as a deletion.
    cms.patch(
        "before",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"w": "0"}}})),
    )
    .await
    .expect("relabel");
    cms.delete("after", &DeleteParams::default())
        .await
        .expect("delete");
    cms.delete("unlabelled", &DeleteParams::default())
        .await
        .expect("delete unselected");
    let seen = wait_for_events(&mut stream, |s| s.len() == 4).await;
    assert_eq!(
        seen,
        [
            "apply:after",
            "apply:after",
            "delete:before",
            "delete:after"
        ]
    );
}

#[tokio::test]
async fn watcher_with_list_watch_sees_changes() {
    watcher_sees_changes(watcher::Config::default(), 1).await;
}

#[tokio::test]
async fn watcher_with_streaming_lists_sees_changes() {
    watcher_sees_changes(watcher::Config::default().streaming_lists(), 0).await;
}

#[tokio::test]
async fn watch_resumes_from_resource_version_and_expires_after_compaction() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let first = cms
        .create(&PostParams::default(), &config_map("one", &[]))
        .await
        .expect("create");
    cms.create(&PostParams::default(), &config_map("two", &[]))
        .await
        .expect("create");
    cms.delete("one", &DeleteParams::default())
        .await
        .expect("delete");

    let wp = WatchParams::default().timeout(2);
    let events: Vec<String> = cms
        .watch(&wp, &first.resource_version().expect("rv"))
        .await
        .expect("watch")
        .map_ok(|event| match event {
            WatchEvent::Added(cm) => format!("ADDED {}", cm.name_any()),
            WatchEvent::Modified(cm) => format!("MODIFIED {}", cm.name_any()),
            WatchEvent::Deleted(cm) => format!("DELETED {}", cm.name_any()),
            WatchEvent::Bookmark(_) => "BOOKMARK".into(),
            WatchEvent::Error(e) => format!("ERROR {}", e.code),
        })
        .try_collect()
        .await
        .expect("events until timeout");
    assert_eq!(events, ["ADDED two", "DELETED one"]);

    double.compact_history();
    let mut stream = cms
        .watch(&wp, &first.resource_version().expect("rv"))
        .await
        .expect("watch")
        .boxed();
    match stream.try_next().await.expect("event") {
        Some(WatchEvent::Error(status)) => assert_eq!(status.code, 410),
        other => panic!("expected 410, got {other:?}"),
    }
}

#[tokio::test]
async fn deleting_an_owner_collects_dependents_recursively() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let pp = PostParams::default();
    let owner = cms
        .create(&pp, &config_map("owner", &[]))
        .await
        .expect("owner");
    let child = cms
        .create(&pp, &owned_by(config_map("child", &[]), &owner))
        .await
        .expect("child");
    cms.create(&pp, &owned_by(config_map("grandchild", &[]), &child))
        .await
        .expect("grandchild");
    let pods: Api<Pod> = Api::default_namespaced(double.client());
    let mut owned_pod = pod("owned-pod");
    owned_pod.metadata.owner_references = owner.controller_owner_ref(&()).map(|r| vec![r]);
    pods.create(&pp, &owned_pod).await.expect("pod");
    cms.create(&pp, &config_map("bystander", &[]))
        .await
        .expect("bystander");

    cms.delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    assert_eq!(names(&cms, "").await, ["bystander"]);
    assert!(
        pods.list(&ListParams::default())
            .await
            .expect("pods")
            .items
            .is_empty()
    );

    let owner = cms.create(&pp, &config_map("o2", &[])).await.expect("o2");
    cms.create(&pp, &owned_by(config_map("kept", &[]), &owner))
        .await
        .expect("kept");
    cms.delete("o2", &DeleteParams::orphan())
        .await
        .expect("orphan delete");
    let kept = cms.get("kept").await.expect("orphan survives");
    assert!(
        kept.owner_references().is_empty(),
        "orphaning drops the reference"
    );

    let owner = cms.create(&pp, &config_map("o3", &[])).await.expect("o3");
    cms.create(&pp, &owned_by(config_map("fg", &[]), &owner))
        .await
        .expect("fg");
    cms.delete("o3", &DeleteParams::foreground())
        .await
        .expect("foreground delete");
    assert!(cms.get_opt("fg").await.expect("get").is_none());
    assert!(cms.get_opt("o3").await.expect("get").is_none());
}

#[tokio::test]
async fn finalizers_hold_deletion_until_removed() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let mut cm = config_map("held", &[]);
    cm.metadata.finalizers = Some(vec!["perfsweep.dev/cleanup".into()]);
    cms.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let deleted = cms
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let terminating = deleted
        .left()
        .expect("still present, so the object is returned");
    assert!(terminating.metadata.deletion_timestamp.is_some());
    let still = cms.get("held").await.expect("still there");
    assert!(still.metadata.deletion_timestamp.is_some());

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    assert!(cms.get_opt("held").await.expect("get").is_none());
}

#[tokio::test]
async fn deleting_a_namespace_deletes_its_contents() {
    let double = ApiDouble::start().await;
    let client = double.client();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let mut ns = Namespace::default();
    ns.metadata.name = Some("sweep".into());
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create ns");
    assert_eq!(
        created.status.and_then(|s| s.phase).as_deref(),
        Some("Active")
    );
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "sweep");
    let mut held = config_map("held", &[]);
    held.metadata.finalizers = Some(vec!["x/y".into()]);
    cms.create(&PostParams::default(), &held).await.expect("cm");
    cms.create(&PostParams::default(), &config_map("plain", &[]))
        .await
        .expect("cm");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "sweep");
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("pod");

    namespaces
        .delete("sweep", &DeleteParams::default())
        .await
        .expect("delete ns");
    let terminating = namespaces.get("sweep").await.expect("held by content");
    assert_eq!(
        terminating.status.and_then(|s| s.phase).as_deref(),
        Some("Terminating")
    );
    assert_eq!(names(&cms, "").await, ["held"]);
    let err = cms
        .create(&PostParams::default(), &config_map("late", &[]))
        .await
        .expect_err("terminating namespace");
    assert_eq!(api_status(err).0, 403);

    cms.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": []}})),
    )
    .await
    .expect("release");
    assert!(namespaces.get_opt("sweep").await.expect("get").is_none());
    assert!(double.list(&Gvr::PODS, Some("sweep")).is_empty());
}

#[tokio::test]
async fn delete_collection_honours_label_selector() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    for (name, app) in [("a", "x"), ("b", "x"), ("c", "y")] {
        cms.create(&PostParams::default(), &config_map(name, &[("app", app)]))
            .await
            .expect("create");
    }
    let deleted = cms
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("app=x"),
        )
        .await
        .expect("delete collection");
    let deleted = deleted.left().expect("list of deleted");
    assert_eq!(deleted.items.len(), 2);
    assert_eq!(names(&cms, "").await, ["c"]);
}

#[tokio::test]
async fn request_log_records_rbac_verbs() {
    let double = ApiDouble::start().await;
    let pods: Api<Pod> = Api::default_namespaced(double.client());
    double.clear_requests();
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("create");
    pods.get("p").await.expect("get");
    pods.list(&ListParams::default()).await.expect("list");
    pods.patch("p", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect("patch");
    pods.patch_status("p", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect("patch status");
    let current = pods.get("p").await.expect("get");
    pods.replace("p", &PostParams::default(), &current)
        .await
        .expect("update");
    pods.delete("p", &DeleteParams::default())
        .await
        .expect("delete");
    let _ = pods.get("p").await.expect_err("gone");

    let requests = double.requests();
    let summary: Vec<(String, String, Option<String>, u16)> = requests
        .iter()
        .map(|r| {
            (
                r.verb.clone(),
                r.rbac_resource(),
                r.name.clone(),
                r.status_code,
            )
        })
        .collect();
    let p = || Some("p".to_owned());
    assert_eq!(
        summary,
        [
            ("create".into(), "pods".into(), None, 201),
            ("get".into(), "pods".into(), p(), 200),
            ("list".into(), "pods".into(), None, 200),
            ("patch".into(), "pods".into(), p(), 200),
            ("patch".into(), "pods/status".into(), p(), 200),
            ("get".into(), "pods".into(), p(), 200),
            ("update".into(), "pods".into(), p(), 200),
            ("delete".into(), "pods".into(), p(), 200),
            ("get".into(), "pods".into(), p(), 404),
        ]
    );
    assert!(
        requests
            .iter()
            .all(|r| r.namespace.as_deref() == Some("default")
                && r.group.is_empty()
                && r.version == "v1")
    );
    assert_eq!(double.request_count(), 9);
    double.clear_requests();
    assert_eq!(double.request_count(), 0);
}

#[tokio::test]
async fn fail_next_injects_errors_without_side_effects() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    double.fail_next(
        RequestMatcher::new("create", "configmaps").times(2),
        500,
        "InternalError",
    );
    double.fail_next(RequestMatcher::new("patch", "pods/status"), 409, "Conflict");
    for _ in 0..2 {
        let err = cms
            .create(&PostParams::default(), &config_map("c", &[]))
            .await
            .expect_err("injected");
        assert_eq!(api_status(err), (500, "InternalError".into()));
    }
    assert!(double.list(&Gvr::CONFIGMAPS, None).is_empty());
    cms.create(&PostParams::default(), &config_map("c", &[]))
        .await
        .expect("third attempt succeeds");
    let statuses: Vec<u16> = double.requests().iter().map(|r| r.status_code).collect();
    assert_eq!(statuses, [500, 500, 201]);

    let pods: Api<Pod> = Api::default_namespaced(double.client());
    pods.create(&PostParams::default(), &pod("p"))
        .await
        .expect("create");
    pods.patch("p", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect("main endpoint is not matched");
    let err = pods
        .patch_status("p", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect_err("status patch fails");
    assert_eq!(api_status(err), (409, "Conflict".into()));
}

#[tokio::test]
async fn kubeconfig_round_trip() {
    let double = ApiDouble::start().await;
    let dir = std::env::temp_dir().join(format!("apidouble-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("kubeconfig");
    double.write_kubeconfig(&path).expect("write");
    let kubeconfig = kube::config::Kubeconfig::read_from(&path).expect("parse file");
    let from_yaml =
        kube::config::Kubeconfig::from_yaml(&double.kubeconfig_yaml()).expect("parse yaml");
    assert_eq!(from_yaml.current_context.as_deref(), Some("apidouble"));
    let config = kube::Config::from_custom_kubeconfig(
        kubeconfig,
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .expect("config");
    assert_eq!(config.default_namespace, "default");
    let client = Client::try_from(config).expect("client");
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(version.git_version, "v1.34.0-apidouble");
    let pods: Api<Pod> = Api::default_namespaced(client);
    pods.list(&ListParams::default()).await.expect("list");
    std::fs::remove_dir_all(&dir).ok();
}

fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.dev"},
        "spec": {
            "group": "example.dev",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
                "subresources": {"status": {}},
            }],
        },
    })
}

#[tokio::test]
async fn discovery_and_custom_resources() {
    let double = ApiDouble::start().await;
    let client = double.client();
    let crds: Api<DynamicObject> = Api::all_with(
        client.clone(),
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
            "customresourcedefinitions",
        ),
    );
    let crd: DynamicObject = serde_json::from_value(widget_crd()).expect("crd");
    let created = crds
        .create(&PostParams::default(), &crd)
        .await
        .expect("post CRD");
    let conditions = created.data["status"]["conditions"].to_string();
    assert!(conditions.contains("Established"), "{conditions}");

    let discovery = kube::Discovery::new(client.clone())
        .run()
        .await
        .expect("discovery");
    let (widgets, caps) = discovery
        .resolve_gvk(&GroupVersionKind::gvk("example.dev", "v1", "Widget"))
        .expect("widgets discovered");
    assert_eq!(widgets.plural, "widgets");
    assert!(caps.supports_operation(kube::discovery::verbs::WATCH));
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk(
                "scheduling.volcano.sh",
                "v1beta1",
                "PodGroup"
            ))
            .is_some()
    );
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("", "v1", "Pod"))
            .is_some()
    );

    let api: Api<DynamicObject> = Api::default_namespaced_with(client.clone(), &widgets);
    let mut widget = DynamicObject::new("w", &widgets);
    widget.data = json!({"spec": {"size": 1}, "status": {"ready": true}});
    let created = api
        .create(&PostParams::default(), &widget)
        .await
        .expect("create widget");
    assert!(
        created.data.get("status").is_none(),
        "status dropped on create"
    );
    let patched = api
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"ready": true}})),
        )
        .await
        .expect("status");
    assert_eq!(patched.data["status"]["ready"], true);

    crds.delete("widgets.example.dev", &DeleteParams::default())
        .await
        .expect("delete CRD");
    let err = api.get("w").await.expect_err("type gone");
    assert_eq!(api_status(err).0, 404);

    double
        .register_crd(&widget_crd())
        .expect("register directly");
    assert!(
        double
            .list(&Gvr::new("example.dev", "v1", "widgets"), None)
            .is_empty()
    );
    api.create(&PostParams::default(), &widget)
        .await
        .expect("served again");
}

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

struct Ctx {
    client: Client,
    reconciles: AtomicUsize,
}

async fn reconcile(parent: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    ctx.reconciles.fetch_add(1, Ordering::SeqCst);
    let ns = parent.namespace().unwrap_or_default();
    let cms: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), &ns);
    let child = owned_by(
        config_map(
            &format!("{}-child", parent.name_any()),
            &[("role", "child")],
        ),
        &parent,
    );
    let apply = PatchParams::apply("test-controller").force();
    cms.patch(&child.name_any(), &apply, &Patch::Apply(&child))
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(100))
}

#[tokio::test]
async fn controller_reconciles_on_owned_object_changes() {
    let double = ApiDouble::start().await;
    let client = double.client();
    let cms: Api<ConfigMap> = Api::default_namespaced(client.clone());
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        reconciles: AtomicUsize::new(0),
    });
    let controller = Controller::new(
        cms.clone(),
        watcher::Config::default().labels("role=parent"),
    )
    .owns(cms.clone(), watcher::Config::default().labels("role=child"))
    .run(reconcile, error_policy, ctx.clone())
    .for_each(|_| async {});
    let controller = tokio::spawn(controller);

    cms.create(
        &PostParams::default(),
        &config_map("parent", &[("role", "parent")]),
    )
    .await
    .expect("parent");
    let wait_for_child = || async {
        tokio::time::timeout(WAIT, async {
            loop {
                if let Some(child) = cms.get_opt("parent-child").await.expect("get") {
                    break child;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await
        .expect("controller creates the child")
    };
    let child = wait_for_child().await;
    assert_eq!(child.owner_references()[0].name, "parent");

    // Deleting the owned child must trigger a reconcile of its owner.
    let before = ctx.reconciles.load(Ordering::SeqCst);
    cms.delete("parent-child", &DeleteParams::default())
        .await
        .expect("delete child");
    let recreated = wait_for_child().await;
    assert_ne!(recreated.uid(), child.uid());
    assert!(ctx.reconciles.load(Ordering::SeqCst) > before);

    controller.abort();
}

#[tokio::test]
async fn shutdown_ends_open_watches() {
    let double = ApiDouble::start().await;
    let cms: Api<ConfigMap> = Api::default_namespaced(double.client());
    let mut stream = cms
        .watch(&WatchParams::default(), "0")
        .await
        .expect("watch")
        .boxed();
    double.shutdown().await;
    let end = tokio::time::timeout(WAIT, stream.next())
        .await
        .expect("stream ends promptly");
    assert!(
        !matches!(end, Some(Ok(_))),
        "no events after shutdown: {end:?}"
    );
}

#[tokio::test]
async fn malformed_requests_get_statuses() {
    let double = ApiDouble::start().await;
    let client = double.client();
    let send = |method: &str, uri: &str, body: &str| {
        let request = http::Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .body(body.as_bytes().to_vec())
            .expect("request");
        let client = client.clone();
        async move { client.request::<Value>(request).await }
    };
    let cases = [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "{not json",
            400,
        ),
        ("POST", "/api/v1/namespaces/default/configmaps/x", "{}", 405),
        ("PUT", "/api/v1/namespaces/default/configmaps", "{}", 405),
        ("GET", "/apis/nope.dev/v1/things", "", 404),
        ("GET", "/api/v1/namespaces/default/nodes/n", "", 404),
        ("GET", "/api/v1/configmaps?watch=maybe", "", 400),
        (
            "GET",
            "/api/v1/configmaps?watch=1&resourceVersion=abc",
            "",
            400,
        ),
    ];
    for (method, uri, body, code) in cases {
        let err = send(method, uri, body).await.expect_err(uri);
        assert_eq!(api_status(err).0, code, "{method} {uri}");
    }
    let list = send("GET", "/api/v1/namespaces", "")
        .await
        .expect("namespaces");
    assert_eq!(list["kind"], "NamespaceList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(3));
}
