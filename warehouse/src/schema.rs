//! The warehouse's tables: names, grains and columns, declared once. The Arrow schemas
//! the files are written with, the DataFusion registrations and `docs/warehouse.md` all
//! follow these declarations (a test checks that the doc names every column).

use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, TimeUnit};

/// Written into every Parquet file's key-value metadata under [`SCHEMA_VERSION_KEY`]; bump
/// on an incompatible change (a renamed or retyped column), not on an added one.
pub const SCHEMA_VERSION: &str = "perfsweep.io/warehouse/v1";
pub const SCHEMA_VERSION_KEY: &str = "perfsweep.warehouse.schema_version";
/// The table a Parquet file belongs to, so a file moved out of its directory still says.
pub const TABLE_KEY: &str = "perfsweep.warehouse.table";

/// The partition columns of fact tables, in path order (`kind=…/date=…`). They live in
/// the directory names only (Hive style), as Trino, Spark and DuckDB expect.
pub const PARTITION_COLUMNS: [&str; 2] = ["kind", "date"];

/// A column's logical type; each maps to one Arrow and one Parquet type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ColumnType {
    Text,
    Int,
    Float,
    Bool,
    /// Microseconds since the epoch, UTC.
    Timestamp,
}

impl ColumnType {
    pub fn arrow(self) -> DataType {
        match self {
            Self::Text => DataType::Utf8,
            Self::Int => DataType::Int64,
            Self::Float => DataType::Float64,
            Self::Bool => DataType::Boolean,
            Self::Timestamp => DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
        }
    }

    pub fn sql_name(self) -> &'static str {
        match self {
            Self::Text => "VARCHAR",
            Self::Int => "BIGINT",
            Self::Float => "DOUBLE",
            Self::Bool => "BOOLEAN",
            Self::Timestamp => "TIMESTAMP WITH TIME ZONE",
        }
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Column {
    pub name: &'static str,
    pub ty: ColumnType,
    pub nullable: bool,
    pub doc: &'static str,
}

const fn req(name: &'static str, ty: ColumnType, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: false,
        doc,
    }
}

const fn opt(name: &'static str, ty: ColumnType, doc: &'static str) -> Column {
    Column {
        name,
        ty,
        nullable: true,
        doc,
    }
}

/// One table of the warehouse.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    BenchmarkRunFact,
    ServingOutcomeFact,
    TrainingOutcomeFact,
    SystemOutcomeFact,
    TelemetrySliceFact,
    SoftwareVersionDim,
    HardwareTopologyDim,
    ClusterRegionDim,
    WorkloadDim,
    ArtifactLineageDim,
}

use ColumnType::{Bool, Float, Int, Text, Timestamp};

const RUN_KEY: Column = req(
    "run_key",
    Text,
    "SHA-256 of the run's identity (run id, kind, benchmark name, repetition): the row's key in every fact",
);
const RUN_ID: Column = req(
    "run_id",
    Text,
    "the `perfsweep run` invocation (or the set's run in a cluster) the benchmark belonged to",
);
const CASE_KEY: Column = req(
    "case_key",
    Text,
    "the case repetitions share: the benchmark case id, or kind + canonical permutation",
);

const BENCHMARK_RUN_FACT: &[Column] = &[
    RUN_KEY,
    RUN_ID,
    req("name", Text, "the benchmark's name"),
    opt("set_name", Text, "the BenchmarkSet it was expanded from"),
    CASE_KEY,
    opt(
        "repetition",
        Int,
        "which repetition of its case (0-based), when repeated",
    ),
    req(
        "intent",
        Text,
        "`acceptance` (the spec gates on criteria), `fleet` (a node-pair sweep) or `measurement`",
    ),
    req(
        "scheduler_path",
        Text,
        "backend and scheduler the pods went through: `local`, `kubernetes/volcano`, `kubernetes/default`",
    ),
    req(
        "mode",
        Text,
        "`publication` or `exploration`, as `warehouse build --mode` was told (exploration by default)",
    ),
    req("status", Text, "`succeeded` or `failed`"),
    opt("failure_reason", Text, "the failure reason of a failed run"),
    req(
        "summary",
        Text,
        "the record's one-line summary (or failure message)",
    ),
    opt("started_at", Timestamp, "when the benchmark started"),
    opt("finished_at", Timestamp, "when it finished"),
    opt("duration_seconds", Float, "finished_at - started_at"),
    req("backend", Text, "`local` or `kubernetes`"),
    req("network", Text, "`pod`, `host` or `multus:<attachment>`"),
    req(
        "hosts",
        Text,
        "the nodes it ran on, comma-separated, sorted",
    ),
    opt(
        "headline_metric",
        Text,
        "the kind's headline metric (unit in the name)",
    ),
    opt("headline_value", Float, "its value"),
    opt(
        "headline_better",
        Text,
        "`higher` or `lower`: which way it improves",
    ),
    opt(
        "doubt_flags",
        Text,
        "why the run's figures are in doubt, comma-separated (LLM doubts, evidence problems); null when none",
    ),
    req("doubtful", Bool, "doubt_flags is not null"),
    req(
        "workload_spec_digest",
        Text,
        "SHA-256 of the canonical spec (→ workload_dim)",
    ),
    opt(
        "artifact_manifest_digest",
        Text,
        "SHA-256 of the evidence manifest (→ artifact_lineage_dim)",
    ),
    req(
        "record_digest",
        Text,
        "SHA-256 of the raw record as stored under raw/records/",
    ),
    req(
        "record_path",
        Text,
        "the raw record's path in the warehouse location",
    ),
    req("software_version_digest", Text, "→ software_version_dim"),
    req("hardware_topology_digest", Text, "→ hardware_topology_dim"),
    req("cluster_region_digest", Text, "→ cluster_region_dim"),
    req(
        "record_schema_version",
        Text,
        "the result record's schemaVersion",
    ),
];

const SERVING_OUTCOME_FACT: &[Column] = &[
    RUN_KEY,
    RUN_ID,
    CASE_KEY,
    req("iteration", Int, "index of the load generator iteration"),
    req(
        "scenario",
        Text,
        "the traffic scenario (genai-bench syntax): the workload point",
    ),
    req(
        "concurrency",
        Int,
        "concurrent streams (closed loop) or the cap (open loop): the concurrency point",
    ),
    opt(
        "request_rate",
        Float,
        "open loop: offered requests per second",
    ),
    req("model", Text, "the model requested"),
    req("requests", Int, "measured requests that succeeded"),
    req("errors", Int, "measured requests that failed"),
    req("error_rate_percent", Float, "errors / (requests + errors)"),
    opt("ttft_mean_ms", Float, "time to first token, mean"),
    opt("ttft_p50_ms", Float, "time to first token, median"),
    opt("ttft_p95_ms", Float, "time to first token, p95"),
    opt("ttft_p99_ms", Float, "time to first token, p99"),
    opt(
        "tpot_p50_ms",
        Float,
        "time per output token after the first, median",
    ),
    opt("tpot_p95_ms", Float, "time per output token, p95"),
    opt("tpot_p99_ms", Float, "time per output token, p99"),
    opt("itl_p50_ms", Float, "inter-token latency, median"),
    opt("itl_p95_ms", Float, "inter-token latency, p95"),
    opt("itl_p99_ms", Float, "inter-token latency, p99"),
    opt(
        "itl_jitter_ms",
        Float,
        "jitter: standard deviation of the inter-token latency",
    ),
    opt("e2e_p50_ms", Float, "end-to-end request latency, median"),
    opt("e2e_p99_ms", Float, "end-to-end request latency, p99"),
    opt(
        "requests_per_second",
        Float,
        "successful requests per second",
    ),
    opt(
        "output_tokens_per_second",
        Float,
        "generated tokens per second, all streams",
    ),
    opt("input_tokens_per_second", Float, "prompt tokens per second"),
    opt(
        "queueing_delay_p99_ms",
        Float,
        "open loop: p99 of how late requests went out after they were due",
    ),
    opt(
        "goodput_requests_per_second",
        Float,
        "requests per second meeting every SLO",
    ),
    opt(
        "goodput_attainment_percent",
        Float,
        "share of requests meeting every SLO",
    ),
    opt(
        "cost_per_request",
        Float,
        "price per hour / 3600 / requests per second, when `build --price-per-hour` is given",
    ),
    opt(
        "cost_per_million_output_tokens",
        Float,
        "price per hour / 3600 / output tokens per second × 10^6, when a price is given",
    ),
    opt(
        "doubt_flags",
        Text,
        "this iteration's doubts (`clientDelay`, `tokenBursts`), comma-separated",
    ),
];

const TRAINING_OUTCOME_FACT: &[Column] = &[
    RUN_KEY,
    RUN_ID,
    CASE_KEY,
    req("framework", Text, "`PyTorch` or `OpenFOAM`"),
    req(
        "phase",
        Text,
        "PyTorch: the benchmark type (`train`, `inference`); OpenFOAM: `solve`",
    ),
    req(
        "scale_point",
        Int,
        "PyTorch: input batch size; OpenFOAM: MPI processes",
    ),
    opt(
        "nodes",
        Int,
        "nodes the run spanned (OpenFOAM numNodes; 1 for PyTorch)",
    ),
    opt(
        "step_time_mean_seconds",
        Float,
        "PyTorch: mean batch time; OpenFOAM: mean time step",
    ),
    opt("step_time_p90_seconds", Float, "PyTorch: p90 batch time"),
    opt("samples_per_second", Float, "PyTorch: samples per second"),
    opt(
        "tokens_per_second",
        Float,
        "tokens per second, when the model reports tokens",
    ),
    opt(
        "execution_time_seconds",
        Float,
        "OpenFOAM: solver CPU seconds",
    ),
    opt(
        "clock_time_seconds",
        Float,
        "OpenFOAM: solver wall-clock seconds",
    ),
];

const SYSTEM_OUTCOME_FACT: &[Column] = &[
    RUN_KEY,
    RUN_ID,
    CASE_KEY,
    req(
        "metric",
        Text,
        "the kind's metric, unit in the name (e.g. `received_bits_per_second`)",
    ),
    req("value", Float, "its value"),
    req("better", Text, "`higher` or `lower`"),
    req(
        "scope",
        Text,
        "`pair` (two placed roles), `node` (one host) or `run` (aggregate over several hosts)",
    ),
    opt(
        "node_a",
        Text,
        "pair: the first role's node; node: the node",
    ),
    opt("node_b", Text, "pair: the second role's node"),
    req("network", Text, "`pod`, `host` or `multus:<attachment>`"),
];

const TELEMETRY_SLICE_FACT: &[Column] = &[
    req(
        "slice_digest",
        Text,
        "SHA-256 of the canonical slice document: the row's key",
    ),
    RUN_ID,
    opt(
        "run_key",
        Text,
        "the benchmark the slice belongs to, when the slice names one",
    ),
    req("window_start", Timestamp, "start of the slice's window"),
    req("window_end", Timestamp, "end of the window"),
    req("node", Text, "the node the series were reduced over"),
    opt(
        "cpu_utilization_percent",
        Float,
        "mean CPU busy share over the window",
    ),
    opt("memory_used_bytes", Float, "mean memory in use"),
    opt(
        "network_receive_bytes_per_second",
        Float,
        "mean receive rate, all NICs",
    ),
    opt(
        "network_transmit_bytes_per_second",
        Float,
        "mean transmit rate, all NICs",
    ),
    opt(
        "disk_read_bytes_per_second",
        Float,
        "mean read rate, all disks",
    ),
    opt(
        "disk_write_bytes_per_second",
        Float,
        "mean write rate, all disks",
    ),
    opt(
        "gpu_utilization_percent",
        Float,
        "mean GPU utilization, where an exporter reports it",
    ),
    opt(
        "nvlink_bytes_per_second",
        Float,
        "mean NVLink traffic, where reported",
    ),
    opt(
        "pcie_bytes_per_second",
        Float,
        "mean PCIe traffic, where reported",
    ),
];

const SOFTWARE_VERSION_DIM: &[Column] = &[
    req(
        "software_version_digest",
        Text,
        "SHA-256 of the canonical JSON of the other columns",
    ),
    req("perfsweep_version", Text, "perfsweep's version"),
    opt(
        "kubernetes_version",
        Text,
        "the API server's version (absent locally)",
    ),
    req("tool_versions", Text, "tool → version, canonical JSON"),
    req(
        "image_digests",
        Text,
        "image → resolved digest, canonical JSON",
    ),
];

const HARDWARE_TOPOLOGY_DIM: &[Column] = &[
    req(
        "hardware_topology_digest",
        Text,
        "SHA-256 of the canonical JSON of the run's hosts and their recorded labels",
    ),
    req("host_count", Int, "nodes the run used"),
    opt(
        "instance_types",
        Text,
        "node.kubernetes.io/instance-type values, comma-separated",
    ),
    opt(
        "gpu_product",
        Text,
        "nvidia.com/gpu.product values, comma-separated",
    ),
    opt(
        "gpu_count",
        Int,
        "GPUs per node (the largest nvidia.com/gpu.count)",
    ),
    opt("arch", Text, "kubernetes.io/arch values, comma-separated"),
    req("rdma", Bool, "every node labels RDMA available"),
    req("sriov", Bool, "every node labels SR-IOV capable"),
    req(
        "node_labels",
        Text,
        "node → recorded labels, canonical JSON",
    ),
];

const CLUSTER_REGION_DIM: &[Column] = &[
    req(
        "cluster_region_digest",
        Text,
        "SHA-256 of the canonical JSON of the other columns",
    ),
    req("backend", Text, "`local` or `kubernetes`"),
    opt(
        "regions",
        Text,
        "topology.kubernetes.io/region values, comma-separated",
    ),
    opt(
        "zones",
        Text,
        "topology.kubernetes.io/zone values, comma-separated",
    ),
    req("network", Text, "`pod`, `host` or `multus:<attachment>`"),
];

const WORKLOAD_DIM: &[Column] = &[
    req(
        "workload_spec_digest",
        Text,
        "SHA-256 of the canonical {apiVersion, kind, spec} (the record's own digest)",
    ),
    req("kind", Text, "the benchmark kind"),
    CASE_KEY,
    opt("set_name", Text, "the set the case belongs to"),
    req(
        "permutation",
        Text,
        "the permutation's values, canonical JSON",
    ),
    opt("model", Text, "LLMInference: the model; PyTorch: the model"),
    req("spec", Text, "the complete spec that ran, canonical JSON"),
];

const ARTIFACT_LINEAGE_DIM: &[Column] = &[
    req(
        "artifact_manifest_digest",
        Text,
        "SHA-256 of the canonical evidence manifest (the record's own digest)",
    ),
    req("evidence_count", Int, "evidence objects in the manifest"),
    req("evidence_bytes", Int, "their total size"),
    req(
        "manifest",
        Text,
        "the manifest: [{path, sha256, bytes}] sorted by path, canonical JSON",
    ),
    req(
        "evidence_paths",
        Text,
        "where each object is in the warehouse location (raw/evidence/<sha256>), comma-separated",
    ),
];

impl Table {
    pub const ALL: [Table; 10] = [
        Self::BenchmarkRunFact,
        Self::ServingOutcomeFact,
        Self::TrainingOutcomeFact,
        Self::SystemOutcomeFact,
        Self::TelemetrySliceFact,
        Self::SoftwareVersionDim,
        Self::HardwareTopologyDim,
        Self::ClusterRegionDim,
        Self::WorkloadDim,
        Self::ArtifactLineageDim,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::BenchmarkRunFact => "benchmark_run_fact",
            Self::ServingOutcomeFact => "serving_outcome_fact",
            Self::TrainingOutcomeFact => "training_outcome_fact",
            Self::SystemOutcomeFact => "system_outcome_fact",
            Self::TelemetrySliceFact => "telemetry_slice_fact",
            Self::SoftwareVersionDim => "software_version_dim",
            Self::HardwareTopologyDim => "hardware_topology_dim",
            Self::ClusterRegionDim => "cluster_region_dim",
            Self::WorkloadDim => "workload_dim",
            Self::ArtifactLineageDim => "artifact_lineage_dim",
        }
    }

    /// One row per …
    pub fn grain(self) -> &'static str {
        match self {
            Self::BenchmarkRunFact => "benchmark run (one result record)",
            Self::ServingOutcomeFact => "run × workload point (scenario) × concurrency point",
            Self::TrainingOutcomeFact => "run × phase × scale point",
            Self::SystemOutcomeFact => "run × metric × node scope (pair, node or whole run)",
            Self::TelemetrySliceFact => "run × time window × node",
            Self::SoftwareVersionDim => "distinct software versions (content digest)",
            Self::HardwareTopologyDim => "distinct host set with its hardware labels",
            Self::ClusterRegionDim => "distinct backend, region, zones and network",
            Self::WorkloadDim => "distinct workload spec",
            Self::ArtifactLineageDim => "distinct evidence manifest",
        }
    }

    pub fn columns(self) -> &'static [Column] {
        match self {
            Self::BenchmarkRunFact => BENCHMARK_RUN_FACT,
            Self::ServingOutcomeFact => SERVING_OUTCOME_FACT,
            Self::TrainingOutcomeFact => TRAINING_OUTCOME_FACT,
            Self::SystemOutcomeFact => SYSTEM_OUTCOME_FACT,
            Self::TelemetrySliceFact => TELEMETRY_SLICE_FACT,
            Self::SoftwareVersionDim => SOFTWARE_VERSION_DIM,
            Self::HardwareTopologyDim => HARDWARE_TOPOLOGY_DIM,
            Self::ClusterRegionDim => CLUSTER_REGION_DIM,
            Self::WorkloadDim => WORKLOAD_DIM,
            Self::ArtifactLineageDim => ARTIFACT_LINEAGE_DIM,
        }
    }

    /// Facts are partitioned by kind and date; dimensions are small and are not.
    pub fn is_fact(self) -> bool {
        matches!(
            self,
            Self::BenchmarkRunFact
                | Self::ServingOutcomeFact
                | Self::TrainingOutcomeFact
                | Self::SystemOutcomeFact
                | Self::TelemetrySliceFact
        )
    }

    /// A dimension's key: the content digest its rows are deduplicated by.
    pub fn key(self) -> &'static str {
        self.columns()[0].name
    }

    /// The schema of the files (partition columns excluded: they are in the paths).
    pub fn file_schema(self) -> Arc<Schema> {
        let fields: Vec<Field> = self
            .columns()
            .iter()
            .map(|c| Field::new(c.name, c.ty.arrow(), c.nullable))
            .collect();
        Arc::new(Schema::new(fields))
    }

    pub fn by_name(name: &str) -> Option<Table> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }
}

/// The tables as Markdown, one section per table (the guide's "Tables" part).
pub fn markdown() -> String {
    let mut out = String::new();
    for table in Table::ALL {
        let placement = if table.is_fact() {
            format!(
                "`{}/kind=<kind>/date=<YYYY-MM-DD>/part-<digest>.parquet`",
                table.name()
            )
        } else {
            format!("`{}/part-<digest>.parquet`", table.name())
        };
        out.push_str(&format!(
            "### `{}`\n\nOne row per {}. Files: {placement}.\n\n| column | type | null | meaning |\n| --- | --- | --- | --- |\n",
            table.name(),
            table.grain()
        ));
        for column in table.columns() {
            out.push_str(&format!(
                "| `{}` | {} | {} | {} |\n",
                column.name,
                column.ty.sql_name(),
                if column.nullable { "yes" } else { "no" },
                column.doc.replace('|', "\\|")
            ));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_columns_too() {
        let mut names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Table::ALL.len());
        for table in Table::ALL {
            let mut columns: Vec<&str> = table.columns().iter().map(|c| c.name).collect();
            let count = columns.len();
            columns.sort_unstable();
            columns.dedup();
            assert_eq!(columns.len(), count, "{}", table.name());
            // The partition columns of facts come from the paths: a file column of the
            // same name would clash in Hive-partitioned readers.
            if table.is_fact() {
                for partition in PARTITION_COLUMNS {
                    assert!(!columns.contains(&partition), "{}", table.name());
                }
            }
            assert_eq!(Table::by_name(table.name()), Some(table));
        }
    }

    /// The guide's table section is this module's [`markdown`], so it cannot drift: run
    /// `cargo run -p perfsweep-warehouse --example schema_markdown` and
    /// paste the output to refresh it.
    #[test]
    fn the_guide_documents_every_table_as_declared() {
        let guide = include_str!("../../docs/warehouse.md");
        assert!(
            guide.contains(&markdown()),
            "docs/warehouse.md's tables differ from warehouse/src/schema.rs: regenerate them with cargo run -p perfsweep-warehouse --example schema_markdown"
        );
        for table in Table::ALL {
            assert!(markdown().contains(&format!("| `{}` |", table.columns()[0].name)));
        }
    }
}
