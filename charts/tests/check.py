#!/usr/bin/env python3
"""Lints and renders the perfsweep chart for real, with Helm's own Go SDK (PyPI
helm-python-sdk), and validates every rendered object against the Kubernetes API schemas
(PyPI kubernetes-validate), for the default values and for non-default ones; then checks
that bad values fail with the values schema's message.

    python3 -m pip install helm-python-sdk==0.2.2 kubernetes-validate==1.37.0
    python3 charts/tests/check.py

Prints what it checked; exits non-zero if anything failed.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, Callable

import yaml

try:
    import helm_python as helm
    import kubernetes_validate
    from kubernetes_validate.utils import SchemaNotFoundError
except ImportError as error:
    print(
        f"check.py needs helm-python-sdk and kubernetes-validate ({error}):\n"
        "  python3 -m pip install helm-python-sdk==0.2.2 kubernetes-validate==1.37.0",
        file=sys.stderr,
    )
    sys.exit(2)

HERE = os.path.dirname(os.path.abspath(__file__))
CHART = os.path.normpath(os.path.join(HERE, "..", "perfsweep"))
REPO_CRDS = os.path.normpath(os.path.join(HERE, "..", "..", "crds"))
RELEASE = "perfsweep"
NAMESPACE = "perfsweep-system"
# The chart's kubeVersion floor (read from Chart.yaml) and the newest schemas
# kubernetes-validate bundles.
NEWEST_KUBE = "1.37.0"


def kube_versions() -> list[str]:
    with open(os.path.join(CHART, "Chart.yaml"), encoding="utf-8") as file:
        floor = yaml.safe_load(file)["kubeVersion"]
    # ">=1.30.0-0" → "1.30.0"
    version = floor.removeprefix(">=").split("-")[0].strip()
    return [version, NEWEST_KUBE]


KUBE_VERSIONS = kube_versions()
IMAGE = "ghcr.io/perfsweep/operator"

failures: list[str] = []


def check(condition: bool, what: str) -> None:
    if not condition:
        failures.append(what)
        print(f"  FAIL {what}")


def render(values: dict[str, Any]) -> list[dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        manifests = chart.render(values=values, name=RELEASE, namespace=NAMESPACE, is_install=True)
    objects = []
    for path, text in sorted(manifests.items()):
        if path.endswith("NOTES.txt"):
            continue
        for doc in yaml.safe_load_all(text):
            if doc:
                doc.setdefault("__source", path)
                objects.append(doc)
    return objects


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k != "__source"}


def of_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o.get("kind") == kind]


def name(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata", {})
    ns = meta.get("namespace")
    return f"{obj.get('kind')} {ns + '/' if ns else ''}{meta.get('name')}"


def validate_schemas(objects: list[dict[str, Any]]) -> None:
    """Every object against the Kubernetes OpenAPI schemas (strict: unknown fields fail)."""
    for obj in objects:
        body = strip(obj)
        for version in KUBE_VERSIONS:
            try:
                kubernetes_validate.validate(body, version, strict=True)
            except SchemaNotFoundError:
                if obj["kind"] == "ServiceMonitor":
                    # Not a built-in: its fields are checked in check_service_monitor.
                    break
                check(False, f"{name(obj)}: no Kubernetes {version} schema for {obj['kind']}")
                break
            except kubernetes_validate.ValidationError as error:
                path = "/".join(str(p) for p in error.path)
                check(False, f"{name(obj)}: Kubernetes {version} schema: {path}: {error.message}")
                break


def no_excess_rbac(objects: list[dict[str, Any]]) -> None:
    for role in of_kind(objects, "ClusterRole") + of_kind(objects, "Role"):
        for rule in role["rules"]:
            flat = rule.get("apiGroups", []) + rule.get("resources", []) + rule.get("verbs", [])
            check("*" not in flat, f"{name(role)}: no wildcard in {rule}")
            if "secrets" in rule.get("resources", []):
                # get by name only (export credentials a spec points at): listing or
                # watching would expose every Secret in scope.
                bulk = {"list", "watch"} & set(rule.get("verbs", []))
                check(not bulk, f"{name(role)}: no list/watch on Secrets ({sorted(bulk)})")


def deployment_checks(deployment: dict[str, Any], leader_election: bool) -> None:
    what = name(deployment)
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    args = container["args"]
    check(container["image"].startswith(IMAGE + ":"), f"{what}: image {IMAGE}")
    check(args[0] == "operator", f"{what}: runs `perfsweep operator`")
    check(
        any(a.startswith("--log-format=") for a in args), f"{what}: passes --log-format"
    )
    probes = {
        "livenessProbe": "/healthz",
        "readinessProbe": "/readyz",
    }
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    check(ports.get("http") == 8080, f"{what}: port http is 8080")
    for probe, path in probes.items():
        get = container.get(probe, {}).get("httpGet", {})
        check(get.get("path") == path and get.get("port") == "http", f"{what}: {probe} on {path}")
    env = {e["name"]: e for e in container["env"]}
    check(
        env.get("POD_NAME", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
        == "metadata.name",
        f"{what}: POD_NAME from the downward API",
    )
    # Restricted Pod Security Standard.
    psc, csc = pod["securityContext"], container["securityContext"]
    check(psc.get("runAsNonRoot") is True, f"{what}: runAsNonRoot")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", f"{what}: seccomp")
    check(csc.get("allowPrivilegeEscalation") is False, f"{what}: no privilege escalation")
    check(csc.get("readOnlyRootFilesystem") is True, f"{what}: read-only root filesystem")
    check(csc.get("capabilities", {}).get("drop") == ["ALL"], f"{what}: drops ALL")
    if leader_election:
        check("--leader-election" in args, f"{what}: --leader-election")
        check(spec["replicas"] >= 2, f"{what}: two replicas with leader election")
    else:
        check("--leader-election" not in args, f"{what}: no --leader-election")
        check(spec["replicas"] == 1, f"{what}: one replica without leader election")
        check(spec.get("strategy", {}).get("type") == "Recreate", f"{what}: Recreate")


def rules_of(role: dict[str, Any]) -> list[dict[str, Any]]:
    return role["rules"]


def lease_role(objects: list[dict[str, Any]]) -> dict[str, Any] | None:
    for role in of_kind(objects, "Role"):
        if role["metadata"]["name"].endswith("-leader-election"):
            return role
    return None


def chart_crd_files() -> dict[str, dict[str, Any]]:
    with helm.Chart.load(CHART) as chart:
        return {c["filename"].split("/")[-1]: yaml.safe_load(c["data"]) for c in chart.crds}


def scenario_cluster_wide(objects: list[dict[str, Any]]) -> None:
    (deployment,) = of_kind(objects, "Deployment")
    deployment_checks(deployment, leader_election=True)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    check(not any(a.startswith("--namespace") for a in args), "cluster-wide: no --namespace")
    (cluster_role,) = of_kind(objects, "ClusterRole")
    (binding,) = of_kind(objects, "ClusterRoleBinding")
    (account,) = of_kind(objects, "ServiceAccount")
    check(
        binding["subjects"]
        == [{"kind": "ServiceAccount", "name": account["metadata"]["name"], "namespace": NAMESPACE}],
        "the ClusterRoleBinding binds the operator's ServiceAccount",
    )
    check(binding["roleRef"]["name"] == cluster_role["metadata"]["name"], "binding → ClusterRole")
    check(
        [r for r in of_kind(objects, "Role") if r is not lease_role(objects)] == [],
        "cluster-wide: no Role but the lease's",
    )


def scenario_default(objects: list[dict[str, Any]], cluster_wide: list[dict[str, Any]]) -> None:
    check(not of_kind(objects, "CronJob"), "no warehouse build CronJob unless asked for")
    (deployment,) = of_kind(objects, "Deployment")
    deployment_checks(deployment, leader_election=True)
    check_admission_policy(objects, "perfsweep.io/privileged-benchmarks")
    env = {e["name"]: e.get("value") for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    check(env.get("PERFSWEEP_EXPORT_ENDPOINTS") == "", "no export endpoint allowed by default")
    check(env.get("PERFSWEEP_EXPORT_ALLOW_HTTP") == "false", "no plain-http export by default")
    check(env.get("PERFSWEEP_MAX_CHILDREN_PER_SET") == "10000", "a ceiling of 10000 children per set")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    check(
        f"--namespace={NAMESPACE}" in args,
        f"namespaced by default: the operator watches its own namespace (--namespace={NAMESPACE})",
    )
    check(deployment["metadata"]["name"] == "perfsweep", "the Deployment keeps the release's name")
    check(
        [rules_of(r) for r in of_kind(objects, "ClusterRole")] == [node_rules()],
        "by default the only ClusterRole reads nodes and perfsweep's own CRDs (by name)",
    )
    (binding,) = of_kind(objects, "ClusterRoleBinding")
    check(binding["roleRef"]["name"].endswith("-nodes"), "its ClusterRoleBinding")
    roles = [r for r in of_kind(objects, "Role") if r is not lease_role(objects)]
    check([r["metadata"]["namespace"] for r in roles] == [NAMESPACE], "a Role in the release namespace")
    cluster_rules = [r for r in rules_of(of_kind(cluster_wide, "ClusterRole")[0]) if r not in node_rules()]
    for role in roles:
        check(rules_of(role) == cluster_rules, f"{name(role)}: the cluster-wide ClusterRole's rules")
    role = lease_role(objects)
    check(role is not None and role["metadata"]["namespace"] == NAMESPACE, "lease Role")
    if role:
        named = [r for r in role["rules"] if r.get("resourceNames")]
        check(
            named and named[0]["resourceNames"] == ["perfsweep-operator"],
            "lease get/update limited to the Lease's name",
        )
        owner = [r for r in role["rules"] if r.get("resources") == ["serviceaccounts"]]
        check(
            owner == [{"apiGroups": [""], "resources": ["serviceaccounts"], "resourceNames": ["perfsweep"], "verbs": ["get"]}],
            f"the Lease's owner, the operator's own ServiceAccount, readable by name only: {owner}",
        )
        args = of_kind(objects, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
        check("--leader-election-owner=perfsweep" in args, "the Lease owned by the ServiceAccount, so uninstall removes it")
    check(not of_kind(objects, "ServiceMonitor"), "no ServiceMonitor by default")
    check(not of_kind(objects, "ConfigMap"), "no dashboard ConfigMap by default")
    check(not of_kind(objects, "CustomResourceDefinition"), "CRDs not templates by default")
    (service,) = of_kind(objects, "Service")
    check(service["spec"]["ports"][0]["port"] == 8080, "metrics Service on 8080")


def node_rules() -> list[dict[str, Any]]:
    """The rules of the ClusterRole of namespaced mode: reading nodes, and perfsweep's
    own CRDs by name (BenchmarkSet's is not read)."""
    crd_names = sorted(
        f"{crd['spec']['names']['plural']}.perfsweep.io"
        for crd in (
            yaml.safe_load(open(os.path.join(CHART, "crds", file), encoding="utf-8"))
            for file in os.listdir(os.path.join(CHART, "crds"))
            if file.endswith(".yaml")
        )
        if crd["spec"]["names"]["kind"] != "BenchmarkSet"
    )
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list"]},
        {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
         "resourceNames": crd_names, "verbs": ["get"]},
    ]


def check_admission_policy(objects: list[dict[str, Any]], label: str) -> None:
    """The policy on privileged fields: it matches every benchmark kind and BenchmarkSet,
    denies (not warns), names each field it refuses, and its binding points at it. Its
    CEL runs on a real API server in operator/tests/real_cluster_security.rs."""
    (policy,) = of_kind(objects, "ValidatingAdmissionPolicy")
    (binding,) = of_kind(objects, "ValidatingAdmissionPolicyBinding")
    what = name(policy)
    check(binding["spec"]["policyName"] == policy["metadata"]["name"], f"{what}: bound")
    check(binding["spec"]["validationActions"] == ["Deny"], f"{what}: Deny")
    check(policy["spec"]["failurePolicy"] == "Fail", f"{what}: failurePolicy Fail")
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    plurals = sorted(c["spec"]["names"]["plural"] for c in chart_crd_files().values())
    check(sorted(rule["resources"]) == plurals, f"{what}: matches every perfsweep kind {plurals}")
    check(set(rule["operations"]) == {"CREATE", "UPDATE"}, f"{what}: on create and update")
    messages = " ".join(v["messageExpression"] for v in policy["spec"]["validations"])
    for field in [
        "spec.hostNetwork",
        "spec.tolerations",
        "spec.mtu",
        "spec.queue",
        "spec.priorityClassName",
        "spec.image",
        "spec.podOverride.tolerations",
        "spec.podOverride.image",
        "spec.resources",
        "spec.networkName",
        "spec.scheduler",
        "spec.permutations",
    ]:
        check(field + ":" in messages, f"{what}: a message names {field}")
    privileged = next(v for v in policy["spec"]["variables"] if v["name"] == "privileged")
    check(label in privileged["expression"], f"{what}: the namespace label {label}")
    schedulers = next(v for v in policy["spec"]["variables"] if v["name"] == "schedulers")
    check(json.loads(schedulers["expression"]) == ["volcano"],
          f"{what}: by default only the scheduler benchmarks get anyway: {schedulers}")


def scenario_namespaced(objects: list[dict[str, Any]], cluster_wide: list[dict[str, Any]]) -> None:
    watched = ["team-a", "team-b"]
    cluster_roles = of_kind(objects, "ClusterRole")
    check(
        [rules_of(r) for r in cluster_roles] == [node_rules()],
        "namespaced: one ClusterRole, for reading nodes and perfsweep's own CRDs (by name) only",
    )
    bindings = of_kind(objects, "ClusterRoleBinding")
    check(
        len(bindings) == 1
        and cluster_roles
        and bindings[0]["roleRef"]["name"] == cluster_roles[0]["metadata"]["name"],
        "namespaced: its ClusterRoleBinding",
    )
    cluster_rules = [r for r in rules_of(of_kind(cluster_wide, "ClusterRole")[0]) if r not in node_rules()]
    roles = [r for r in of_kind(objects, "Role") if r["metadata"]["namespace"] in watched]
    check(sorted(r["metadata"]["namespace"] for r in roles) == watched, "a Role per namespace")
    for role in roles:
        check(rules_of(role) == cluster_rules, f"{name(role)}: the ClusterRole's rules")
    bindings = of_kind(objects, "RoleBinding")
    check(
        sorted(b["metadata"]["namespace"] for b in bindings) == sorted(watched + [NAMESPACE]),
        "a RoleBinding per namespace, and the lease's in the release namespace",
    )
    deployments = of_kind(objects, "Deployment")
    check(len(deployments) == 2, "one operator Deployment per watched namespace")
    leases = []
    for deployment, ns in zip(sorted(deployments, key=lambda d: d["metadata"]["name"]), watched):
        deployment_checks(deployment, leader_election=True)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        check(f"--namespace={ns}" in args, f"{name(deployment)}: --namespace={ns}")
        leases += [a.split("=", 1)[1] for a in args if a.startswith("--leader-election-lease=")]
    check(len(set(leases)) == 2, f"a Lease per operator: {leases}")
    role = lease_role(objects)
    if role:
        named = [r for r in role["rules"] if r.get("resourceNames")]
        check(sorted(named[0]["resourceNames"]) == sorted(leases), "lease Role names both")
    selectors = [d["spec"]["selector"]["matchLabels"] for d in deployments]
    check(selectors[0] != selectors[1], "the Deployments' selectors do not overlap")


def scenario_service_monitor(objects: list[dict[str, Any]]) -> None:
    monitors = of_kind(objects, "ServiceMonitor")
    check(len(monitors) == 1, "a ServiceMonitor")
    if not monitors:
        return
    monitor = monitors[0]
    (service,) = of_kind(objects, "Service")
    check(monitor["apiVersion"] == "monitoring.coreos.com/v1", "ServiceMonitor apiVersion")
    labels = service["metadata"]["labels"]
    selector = monitor["spec"]["selector"]["matchLabels"]
    check(all(labels.get(k) == v for k, v in selector.items()), "it selects the Service")
    port_names = {p["name"] for p in service["spec"]["ports"]}
    for endpoint in monitor["spec"]["endpoints"]:
        check(endpoint["port"] in port_names, "its endpoint names a Service port")
        check(endpoint["path"] == "/metrics", "it scrapes /metrics")
    check(monitor["metadata"]["labels"].get("release") == "prometheus", "its extra labels")


def scenario_grafana_dashboard(objects: list[dict[str, Any]]) -> None:
    maps = [o for o in of_kind(objects, "ConfigMap") if o["metadata"]["name"].endswith("-dashboard")]
    check(len(maps) == 1, "a dashboard ConfigMap")
    if not maps:
        return
    (config_map,) = maps
    labels = config_map["metadata"]["labels"]
    check(labels.get("grafana_dashboard") == "1", "labelled for Grafana's sidecar")
    check(labels.get("team") == "perf", "with the extra labels")
    check(config_map["metadata"]["namespace"] == "monitoring", "in the chosen namespace")
    check(
        config_map["metadata"].get("annotations", {}).get("grafana_folder") == "perfsweep",
        "with the annotations",
    )
    with open(os.path.join(CHART, "dashboards", "perfsweep.json"), encoding="utf-8") as f:
        shipped = json.load(f)
    check(json.loads(config_map["data"]["perfsweep.json"]) == shipped, "the shipped dashboard")


def scenario_crds_as_templates(objects: list[dict[str, Any]]) -> None:
    crds = {o["metadata"]["name"]: o for o in of_kind(objects, "CustomResourceDefinition")}
    files = chart_crd_files()
    expected = {c["metadata"]["name"]: c for c in files.values()}
    check(sorted(crds) == sorted(expected), f"every CRD rendered: {sorted(crds)}")
    for crd_name, crd in crds.items():
        body = strip(crd)
        want = expected.get(crd_name, {})
        check(body.get("spec") == want.get("spec"), f"{crd_name}: the crds/ file's spec")
        annotations = body["metadata"].get("annotations", {})
        check(annotations.get("helm.sh/resource-policy") == "keep", f"{crd_name}: kept")


def scenario_no_leader_election(objects: list[dict[str, Any]]) -> None:
    (deployment,) = of_kind(objects, "Deployment")
    deployment_checks(deployment, leader_election=False)
    check(lease_role(objects) is None, "no lease Role without leader election")
    image = deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    check(image.endswith("@sha256:" + "a" * 64), f"image pinned by digest: {image}")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    check("--log-format=text" in args, "--log-format=text")
    for flag in [
        "--default-image-registry=mirror.example.com/perfsweep",
        "--default-scheduler=default",
        "--default-queue=benchmarks",
    ]:
        check(flag in args, f"benchmark defaults reach the operator: {flag}")


def scenario_warehouse_build(objects: list[dict[str, Any]]) -> None:
    (cron,) = of_kind(objects, "CronJob")
    check(cron["spec"]["concurrencyPolicy"] == "Forbid", "one warehouse build at a time")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    check(pod.get("automountServiceAccountToken") is False, "the build job has no API token")
    (container,) = pod["containers"]
    args = container["args"]
    check(args[:3] == ["warehouse", "build", "s3://perf/exports"], f"builds from the exports: {args}")
    for flag in [
        "--output=s3://perf/warehouse",
        "--mode=publication",
        "--cache-dir=/cache",
        "--location-param=endpoint=https://minio.storage:9000",
    ]:
        check(flag in args, f"warehouse build flag {flag}")
    check(
        container.get("envFrom") == [{"secretRef": {"name": "warehouse-s3"}}],
        "credentials from the named Secret",
    )
    check(container["securityContext"]["readOnlyRootFilesystem"] is True, "read-only root filesystem")
    check(
        any(m["mountPath"] == "/cache" for m in container["volumeMounts"]),
        "the mirror is on a writable volume",
    )


SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("cluster-wide (watch.allNamespaces: true)", {"watch": {"allNamespaces": True}}),
    ("default values", {}),
    ("namespaced (watch.namespaces: [team-a, team-b])", {"watch": {"namespaces": ["team-a", "team-b"]}}),
    (
        "ServiceMonitor on",
        {"metrics": {"serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}}}},
    ),
    ("CRDs as templates", {"crds": {"asTemplates": True}}),
    (
        "one replica without leader election, image by digest, text logs, benchmark defaults",
        {
            "operator": {"leaderElection": {"enabled": False}, "logFormat": "text"},
            "image": {"digest": "sha256:" + "a" * 64},
            "benchmarkDefaults": {
                "imageRegistry": "mirror.example.com/perfsweep",
                "scheduler": "default",
                "queue": "benchmarks",
            },
        },
    ),
    (
        "warehouse build CronJob on",
        {
            "warehouse": {
                "build": {
                    "enabled": True,
                    "sources": ["s3://perf/exports"],
                    "location": "s3://perf/warehouse",
                    "params": {"endpoint": "https://minio.storage:9000"},
                    "credentialsSecret": "warehouse-s3",
                    "mode": "publication",
                }
            }
        },
    ),
    (
        "Grafana dashboard ConfigMap on",
        {
            "metrics": {
                "grafanaDashboard": {
                    "enabled": True,
                    "namespace": "monitoring",
                    "labels": {"team": "perf"},
                    "annotations": {"grafana_folder": "perfsweep"},
                }
            }
        },
    ),
]

# Values that must not install, and what the error must say.
BAD_VALUES: list[tuple[dict[str, Any], str]] = [
    ({"operator": {"logFormat": "xml"}}, "at '/operator/logFormat': value must be one of 'json', 'text'"),
    ({"watch": {"namespaces": ["Team_A"]}}, "at '/watch/namespaces/0'"),
    ({"watch": {"namespaces": "team-a"}}, "at '/watch/namespaces': got string, want array"),
    (
        {"watch": {"allNamespaces": True, "namespaces": ["team-a"]}},
        "watch.allNamespaces and watch.namespaces exclude each other",
    ),
    ({"operator": {"replicas": 0}}, "at '/operator/replicas': minimum"),
    ({"export": {"allowedEndpoints": ["https://u:p@store/x"]}}, "at '/export/allowedEndpoints/0'"),
    ({"maxChildrenPerSet": 2000000}, "at '/maxChildrenPerSet': maximum"),
    (
        {"warehouse": {"build": {"enabled": True, "sources": ["s3://perf/exports"]}}},
        "warehouse.build.enabled needs warehouse.build.sources",
    ),
    ({"warehouse": {"build": {"sources": ["/local/dir"]}}}, "at '/warehouse/build/sources/0'"),
    ({"warehouse": {"build": {"mode": "draft"}}}, "at '/warehouse/build/mode'"),
    ({"operater": {"replicas": 2}}, "additional properties 'operater' not allowed"),
    ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy': value must be one of"),
    ({"image": {"digest": "latest"}}, "at '/image/digest'"),
    ({"securityContext": {"allowPrivilegeEscalation": True}}, "at '/securityContext/allowPrivilegeEscalation'"),
    ({"podSecurityContext": {"runAsNonRoot": False}}, "at '/podSecurityContext/runAsNonRoot'"),
    ({"benchmarkDefaults": {"scheduler": "kube"}}, "at '/benchmarkDefaults/scheduler'"),
    ({"resources": {"limits": {"memory": "lots"}}}, "at '/resources/limits/memory'"),
    (
        {"metrics": {"service": {"enabled": False}, "serviceMonitor": {"enabled": True}}},
        "metrics.serviceMonitor.enabled needs metrics.service.enabled",
    ),
]


def main() -> int:
    print(f"Helm SDK {helm.helm_sdk_version()} (helm-python-sdk {helm.__version__}); chart {CHART}")
    print(f"Kubernetes schemas: {', '.join(KUBE_VERSIONS)} (kubernetes-validate)")

    print("== chart crds/ equals the repository's crds/")
    files = chart_crd_files()
    repo = sorted(f for f in os.listdir(REPO_CRDS) if f.endswith(".yaml"))
    check(sorted(files) == repo, f"same CRD files: {sorted(files)} vs {repo}")
    for file in repo:
        with open(os.path.join(REPO_CRDS, file), encoding="utf-8") as f:
            check(yaml.safe_load(f) == files.get(file), f"crds/{file} identical in the chart")
    print(f"  {len(repo)} CRDs")
    validate_schemas([dict(c, __source="crds/") for c in files.values()])

    rendered: dict[str, list[dict[str, Any]]] = {}
    cluster_wide = SCENARIOS[0][0]
    checks: dict[str, Callable[[list[dict[str, Any]]], None]] = {
        SCENARIOS[0][0]: scenario_cluster_wide,
        SCENARIOS[1][0]: lambda o: scenario_default(o, rendered[cluster_wide]),
        SCENARIOS[2][0]: lambda o: scenario_namespaced(o, rendered[cluster_wide]),
        SCENARIOS[3][0]: scenario_service_monitor,
        SCENARIOS[4][0]: scenario_crds_as_templates,
        SCENARIOS[5][0]: scenario_no_leader_election,
        SCENARIOS[6][0]: scenario_warehouse_build,
        SCENARIOS[7][0]: scenario_grafana_dashboard,
    }
    for label, values in SCENARIOS:
        print(f"== {label}")
        report = helm.lint(CHART, values, strict=True, namespace=NAMESPACE)
        problems = [m for m in report["messages"] if m["severity"] >= 2] + [
            {"path": "", "error": e} for e in report["errors"]
        ]
        for problem in problems:
            check(False, f"lint: {problem['path']}: {problem['error']}")
        print(f"  lint (strict): {len(problems)} problems")
        try:
            objects = render(values)
        except helm.HelmError as error:
            check(False, f"render failed: {error}")
            continue
        rendered[label] = objects
        kinds: dict[str, int] = {}
        for obj in objects:
            kinds[obj["kind"]] = kinds.get(obj["kind"], 0) + 1
        print("  rendered: " + ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())))
        validate_schemas(objects)
        no_excess_rbac(objects)
        checks[label](objects)
        print(f"  schema-valid for Kubernetes {' and '.join(KUBE_VERSIONS)}; content checked")

    print("== bad values fail with the schema's message")
    for values, message in BAD_VALUES:
        try:
            render(values)
        except helm.HelmError as error:
            text = str(error)
            check(message in text, f"{values}: message {message!r} not in {text!r}")
            first = text.strip().splitlines()[-1].strip()
            print(f"  rejected {values}: {first}")
        else:
            check(False, f"{values} rendered, but must be rejected ({message})")
    report = helm.lint(CHART, BAD_VALUES[0][0], strict=True)
    check(
        any("logFormat" in m["error"] for m in report["messages"] if m["severity"] == 3),
        "lint reports bad values as an error",
    )

    if failures:
        print(f"\n{len(failures)} check(s) failed:", file=sys.stderr)
        for failure in failures:
            print(f"  {failure}", file=sys.stderr)
        return 1
    print("\nall chart checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
