{{/*
What the operator does to the cluster, exactly: derived from operator/src/controller/
(the CLI's own calls do not count) and checked by operator/tests/controller/rbac_completeness.rs,
which runs the operator against an API double and fails on a request these rules do not
allow or a rule no request needs. Shared by the per-namespace Roles (the default: the
release namespace, or watch.namespaces) and the ClusterRole (watch.allNamespaces). Secrets are read only by name (get, never list
or watch): the one an outputLocation names for its credentials. The one
cluster-scoped permissions, reading nodes (get, list) and perfsweep's own CRDs (get, by
name), are in perfsweep.nodeRules: in the ClusterRole cluster-wide, in a ClusterRole of
its own in namespaced mode (a Role cannot grant them).
Discovery of Volcano's API group is a non-resource URL every authenticated user may read
(system:discovery), so it needs no rule here.
*/}}
{{- define "perfsweep.rules" -}}
# BenchmarkSet controller: watches sets (list, watch) and records expansion and
# progress in their status subresource (server-side apply, field manager perfsweep: a
# patch); get reads a set that does not deserialize once more, as plain JSON, so its
# InvalidObject event names the wrong field (list already shows every set).
- apiGroups: ["perfsweep.io"]
  resources: ["benchmarksets"]
  verbs: ["get", "list", "watch"]
- apiGroups: ["perfsweep.io"]
  resources: ["benchmarksets/status"]
  verbs: ["patch"]
# Benchmarks of every kind:
# - list, watch: the set controller follows its children, each kind's controller its
#   benchmarks;
# - create: the set controller creates children; delete: it deletes children that a
#   spec edit removed from the sweep;
# - get: before creating a benchmark's objects, the benchmark controller writes its
#   status on the cached resourceVersion (a stale copy gets 409); where the status has
#   nothing new (a pod deleted while waiting, a restart mid-creation) it re-reads the
#   benchmark instead, so a stale cache never starts a finished benchmark again;
# - patch: the evidence digest annotation (perfsweep.io/evidence-sha256) on a finished
#   benchmark.
- apiGroups: ["perfsweep.io"]
  resources:
{{- range include "perfsweep.benchmarkResources" . | fromJsonArray }}
    - {{ . | quote }}
{{- end }}
  verbs: ["get", "list", "watch", "create", "delete", "patch"]
# Benchmark status (phase, conditions, result): server-side apply (field manager
# perfsweep, a patch) on the resourceVersion the decision was made on.
- apiGroups: ["perfsweep.io"]
  resources:
{{- range include "perfsweep.benchmarkResources" . | fromJsonArray }}
    - {{ printf "%s/status" . | quote }}
{{- end }}
  verbs: ["patch"]
# The evidence ConfigMap (<benchmark>-evidence): the agent's report with the raw tool
# output and the environment the benchmark ran in, kept when a benchmark finishes so it
# outlives the pods (owned by the benchmark, so it goes with it; an existing one is left
# as it is); read back by name (get) to export the record and evidence to an
# outputLocation. list, watch: the operator caches the ConfigMaps it made (label
# app.kubernetes.io/managed-by=perfsweep), so it does not create one twice.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create", "get", "list", "watch"]
# A benchmark's networkName: its Multus NetworkAttachmentDefinition, read by name
# (get) once before the benchmark's first object, so that a network that is not there
# fails at once instead of holding every pod in ContainerCreating until the timeout.
- apiGroups: ["k8s.cni.cncf.io"]
  resources: ["network-attachment-definitions"]
  verbs: ["get"]
# The Secret an outputLocation names (secretName): the object storage credentials,
# read by name when a finished benchmark is exported. And, before a benchmark's first
# object, the labels (metadata only) of each Secret its pods would mount, which must be
# marked perfsweep.io/consumable=true by their owner. get only: no list or watch, so the
# operator reads no Secret nobody pointed it at.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
# Secrets and PersistentVolumeClaims a kind's rendering asks for (the benchmark's token
# its agents authenticate each other with, scratch volumes): created with the pods and
# deleted when the benchmark ends, a Secret after reading it by name (get, above) and
# only if the benchmark owns it, with its uid as the delete's precondition. No list or
# watch: the only Secrets the operator reads are the export credentials a spec names
# (the rule above) and, by name, a rendered Secret whose create answered 409 or that it
# is about to delete. A set's controller also creates its children's tokens in batches
# (`<set>-launch-<random>`, owned by the set, a key per child) before it creates several
# children at once, and deletes a batch, by its uid, once those children have ended.
- apiGroups: [""]
  resources: ["secrets", "persistentvolumeclaims"]
  verbs: ["create", "delete"]
# get on a claim: a create that answers 409 AlreadyExists is followed by reading the
# object of that name, to adopt it if this benchmark owns it (made before an operator
# restart) or fail the benchmark as NameConflict if it does not. list, watch: the
# operator caches the claims it made (label app.kubernetes.io/managed-by=perfsweep) and
# deletes those a finished benchmark owns from that cache.
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch"]
# Children carry an owner reference with blockOwnerDeletion to their BenchmarkSet;
# PodGroups, evidence ConfigMaps and the objects of a benchmark without a gang to their
# benchmark. Where the OwnerReferencesPermissionEnforcement admission plugin is on, that
# needs update on the owner's finalizers subresource. A gang's members (pods, Service,
# Secrets, claims) are owned by its PodGroup without blockOwnerDeletion, which needs
# nothing on podgroups/finalizers.
- apiGroups: ["perfsweep.io"]
  resources:
    - "benchmarksets/finalizers"
{{- range include "perfsweep.benchmarkResources" . | fromJsonArray }}
    - {{ printf "%s/finalizers" . | quote }}
{{- end }}
  verbs: ["update"]
# Benchmark pods: one watch (list, watch; label app.kubernetes.io/managed-by=perfsweep)
# caches the pods of every benchmark and triggers their reconciles, which read the cache
# and list nothing; the controllers create one pod per process of the plan; delete: the
# pods of a benchmark without a gang when it ends (a gang's pods go with its PodGroup,
# by garbage collection); get reads the pod of a name whose create answered 409
# AlreadyExists (adopted if the benchmark owns it, NameConflict if not).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "list", "watch", "create", "delete"]
# The result pod's agent log carries the structured result and the raw evidence.
- apiGroups: [""]
  resources: ["pods/log"]
  verbs: ["get"]
# The headless Service that gives a benchmark's pods peer DNS names: created with the
# pods, cached by a watch (list, watch; perfsweep's label); a gang's Service goes with
# its PodGroup, the Service of a benchmark without a gang is deleted from that cache
# when the benchmark ends; get reads the Service of that name when its create answers
# 409 AlreadyExists (after an operator restart mid-creation it is the benchmark's own
# and adopted; someone else's is a NameConflict).
- apiGroups: [""]
  resources: ["services"]
  verbs: ["get", "list", "watch", "create", "delete"]
# The NetworkPolicy that admits only a benchmark's own pods to its pods (agents' control
# port, tools' ports): created with the pods; a gang's goes with its PodGroup; get, then
# delete with the uid found as a precondition, for a benchmark without a gang when it
# ends (only when owned by the benchmark: someone else's of that name is left alone),
# and get to adopt or refuse one whose create answered 409 AlreadyExists. A set's one
# NetworkPolicy (`<set>-set`, admitting only its children's pods) is created by the set
# controller before the first child and read when that create answers 409 (used only if
# owned by the set); it goes with the set through its owner reference.
- apiGroups: ["networking.k8s.io"]
  resources: ["networkpolicies"]
  verbs: ["get", "create", "delete"]
# Volcano PodGroups gang-schedule a benchmark's pods: cached by one watch (list, watch)
# that also triggers their benchmarks' reconciles, read by name when a create answers
# 409, created, and deleted when the benchmark ends (the one delete of a gang: its
# members are owned by it and the garbage collector deletes them).
- apiGroups: ["scheduling.volcano.sh"]
  resources: ["podgroups"]
  verbs: ["get", "list", "watch", "create", "delete"]
# Events on sets and benchmarks (kube-runtime's Recorder): create, and patch to count a
# repeat of the same event.
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/*
Cluster-scoped rules. Node-pair sweeps (BenchmarkSet spec.permutations.nodePairs): the
set controller lists the nodes matching the set's label selector to pair them up (list
with a label selector, once per generation of the set; never watch, never a change).
get: a finished benchmark's record names the nodes its pods ran on and their labels,
read by name (a few per benchmark; a watch of every node would cost more).
*/}}
{{- define "perfsweep.nodeRules" -}}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get", "list"]
# The installed CRDs of the benchmark kinds, read by name (their metadata only): one
# whose perfsweep.io/schema-digest annotation is not this version's is outdated (Helm
# never upgrades crds/), and the sets of that kind say so. Limited to perfsweep's CRDs.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: {{ include "perfsweep.benchmarkCRDNames" . }}
  verbs: ["get"]
{{- end -}}

{{/* Names of the benchmark kinds' CRDs, from the CRDs the chart ships. */}}
{{- define "perfsweep.benchmarkCRDNames" -}}
{{- $names := list -}}
{{- range $path, $_ := .Files.Glob "crds/*.yaml" -}}
{{- $crd := $.Files.Get $path | fromYaml -}}
{{- if ne $crd.spec.names.kind "BenchmarkSet" -}}
{{- $names = append $names $crd.metadata.name -}}
{{- end -}}
{{- end -}}
{{- $names | sortAlpha | toJson -}}
{{- end -}}

{{/* Plural names of the benchmark kinds, from the CRDs the chart ships. */}}
{{- define "perfsweep.benchmarkResources" -}}
{{- $plurals := list -}}
{{- range $path, $_ := .Files.Glob "crds/*.yaml" -}}
{{- $crd := $.Files.Get $path | fromYaml -}}
{{- if ne $crd.spec.names.kind "BenchmarkSet" -}}
{{- $plurals = append $plurals $crd.spec.names.plural -}}
{{- end -}}
{{- end -}}
{{- $plurals | sortAlpha | toJson -}}
{{- end -}}

{{/*
Leader election: the Lease the operator takes and renews (get, update) is named, so
those verbs are limited to it; create cannot be limited by name (RBAC cannot know the
name of an object that does not exist yet). Only in the release namespace. The operator
reads its own ServiceAccount (by name) once at start, to make it the Lease's owner, so
that uninstalling removes the Lease.
*/}}
{{- define "perfsweep.leaseRules" -}}
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  verbs: ["create"]
- apiGroups: ["coordination.k8s.io"]
  resources: ["leases"]
  resourceNames:
{{- range (include "perfsweep.instances" . | fromJson).items }}
    - {{ .lease | quote }}
{{- end }}
  verbs: ["get", "update"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  resourceNames: [{{ include "perfsweep.serviceAccountName" . | quote }}]
  verbs: ["get"]
{{- end -}}
