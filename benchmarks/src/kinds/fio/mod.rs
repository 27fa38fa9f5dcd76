//! Fio: distributed storage benchmark, one `fio --server` per worker driven by a
//! `fio --client`.

pub mod parse;
pub mod plan;

use k8s_openapi::api::core::v1::PersistentVolumeClaimSpec;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::api::status::BenchmarkStatus;
use crate::judging::metrics::{Metric, MetricDef};
use crate::kinds::common::CommonSpec;

/// fio's `rw` option. kube-perftest spelled the sequential mixed mode `"rw,readwrite"`;
/// that value is accepted and means `rw`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ReadWrite {
    #[default]
    Read,
    Write,
    RandRead,
    RandWrite,
    #[serde(alias = "readwrite", alias = "rw,readwrite")]
    Rw,
    RandRw,
    Trim,
    RandTrim,
    TrimWrite,
}

impl JsonSchema for ReadWrite {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FioReadWrite".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The aliases must be admitted too, which a derived schema would not list.
        schemars::json_schema!({
            "description": "fio rw: read, write, randread, randwrite, rw (also readwrite and kube-perftest's \"rw,readwrite\"), randrw, trim, randtrim, trimwrite.",
            "type": "string",
            "enum": ["read", "write", "randread", "randwrite", "rw", "readwrite", "rw,readwrite",
                     "randrw", "trim", "randtrim", "trimwrite"]
        })
    }
}

impl ReadWrite {
    /// The value fio reads.
    pub fn as_fio(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::RandRead => "randread",
            Self::RandWrite => "randwrite",
            Self::Rw => "rw",
            Self::RandRw => "randrw",
            Self::Trim => "trim",
            Self::RandTrim => "randtrim",
            Self::TrimWrite => "trimwrite",
        }
    }
}

/// fio I/O engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IoEngine {
    #[default]
    Libaio,
    IoUring,
    Psync,
    Sync,
    Posixaio,
    Mmap,
}

/// Distributed fio: `numWorkers` pods each run `fio --server` on their volume, and one
/// client drives them all with the same job.
#[derive(CustomResource, KubeSchema, Clone, Debug, PartialEq, Serialize, Deserialize)]
#[kube(
    group = "perfsweep.io",
    version = "v1alpha1",
    kind = "Fio",
    plural = "fios",
    shortname = "fiob",
    category = "perfsweep",
    namespaced,
    status = "FioStatus",
    doc = "Storage throughput, IOPS and latency with fio, across worker pods.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"RW","type":"string","jsonPath":".spec.rw"}"#,
    printcolumn = r#"{"name":"BS","type":"string","jsonPath":".spec.bs"}"#,
    printcolumn = r#"{"name":"Jobs","type":"integer","jsonPath":".spec.numJobs"}"#,
    printcolumn = r#"{"name":"Workers","type":"integer","jsonPath":".spec.numWorkers"}"#,
    printcolumn = r#"{"name":"Result","type":"string","jsonPath":".status.summary"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[x_kube(validation = Rule::new("[has(self.volumeClaimTemplate), has(self.existingClaim), self.emptyDir].filter(x, x).size() <= 1").message("choose one of volumeClaimTemplate, existingClaim and emptyDir").field_path(".volumeClaimTemplate"))]
#[serde(rename_all = "camelCase")]
pub struct FioSpec {
    #[serde(flatten)]
    pub common: CommonSpec,

    /// Port the workers' `fio --server` listens on.
    #[serde(default = "default_fio_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub fio_port: u16,

    /// A PVC made for the benchmark and deleted with it: one per worker (ReadWriteOnce),
    /// or one shared by all workers when accessModes includes ReadWriteMany.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume_claim_template: Option<PersistentVolumeClaimSpec>,

    /// An existing PVC to test instead (shared by all workers; kept afterwards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub existing_claim: Option<String>,

    /// Test the node's ephemeral storage through an emptyDir (the default when no
    /// volume is given).
    #[serde(default)]
    pub empty_dir: bool,

    /// Worker pods, each running `fio --server`.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 1000))]
    pub num_workers: u32,

    /// fio rw.
    #[serde(default)]
    pub rw: ReadWrite,

    /// fio bs: block size such as 4k, 1M.
    #[serde(default = "default_bs")]
    #[schemars(regex(pattern = r"^[0-9]+([kKmMgGtTpP]([iI]?[bB])?)?$"))]
    pub bs: String,

    /// fio iodepth.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 65536))]
    pub iodepth: u32,

    /// fio ioengine.
    #[serde(default)]
    pub ioengine: IoEngine,

    /// fio nrfiles.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 100000))]
    pub nrfiles: u32,

    /// fio rwmixread: percentage of reads in mixed workloads.
    #[serde(default = "default_rwmixread")]
    #[schemars(range(min = 0, max = 100))]
    pub rwmixread: u32,

    /// fio percentage_random.
    #[serde(default = "default_percentage_random")]
    #[schemars(range(min = 0, max = 100))]
    pub percentage_random: u32,

    /// fio direct: 1 bypasses the page cache (O_DIRECT), 0 does not.
    #[serde(default = "one")]
    #[schemars(range(min = 0, max = 1))]
    pub direct: u32,

    /// fio runtime, e.g. 30s, 5m.
    #[serde(default = "default_runtime")]
    #[schemars(regex(pattern = r"^[0-9]+([dDhHmMsS]|ms|us)?$"))]
    pub runtime: String,

    /// Seconds of warm-up left out of the result (fio ramp_time), e.g. 5s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+([dDhHmMsS]|ms|us)?$"))]
    pub ramp_time: Option<String>,

    /// fio numjobs per worker.
    #[serde(default = "one")]
    #[schemars(range(min = 1, max = 1024))]
    pub num_jobs: u32,

    /// fio size per job, e.g. 1G, or a percentage of the device such as 50%.
    #[serde(default = "default_size")]
    #[schemars(regex(pattern = r"^[0-9]+([kKmMgGtTpP]([iI]?[bB])?|%)?$"))]
    pub size: String,

    /// fio thread: jobs as threads instead of processes.
    #[serde(default)]
    pub thread: bool,

    /// Write the test files fully before measuring, so reads hit allocated blocks.
    #[serde(default)]
    pub prefill: bool,

    /// fio group_reporting: one aggregate per worker instead of one per job.
    #[serde(default = "yes")]
    pub group_reporting: bool,

    /// Completion-latency percentiles to report.
    #[serde(default = "default_percentiles")]
    #[schemars(length(min = 1, max = 20))]
    pub percentiles: Vec<f64>,

    /// A complete fio job file to run instead of the one built from the fields above.
    /// The escape hatch for options perfsweep does not model; `directory` is set to the
    /// benchmark volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 65536))]
    pub job_file: Option<String>,
}

fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}
fn default_fio_port() -> u16 {
    8765
}
fn default_bs() -> String {
    "4M".into()
}
fn default_rwmixread() -> u32 {
    50
}
fn default_percentage_random() -> u32 {
    100
}
fn default_runtime() -> String {
    "30s".into()
}
fn default_size() -> String {
    "10G".into()
}
fn default_percentiles() -> Vec<f64> {
    vec![50.0, 90.0, 99.0, 99.9]
}

/// Status of a Fio benchmark.
pub type FioStatus = BenchmarkStatus<parse::FioResult>;

impl crate::kinds::kind::BenchmarkKind for Fio {
    type Spec = FioSpec;
    type Output = parse::FioResult;
    const PARSE_NAME: &'static str = "fio";
    const IMAGE: &'static str = "fio";

    fn parse(raw: &str) -> Result<parse::FioResult, crate::execution::parse_error::ParseError> {
        parse::parse(raw)
    }

    fn headline(output: &parse::FioResult) -> String {
        output.headline()
    }

    const METRICS: &'static [MetricDef] = METRICS;

    fn metrics(output: &parse::FioResult) -> Vec<Metric> {
        metrics(output)
    }
    const ROLES: &'static [&'static str] = &["client", "worker"];

    fn common(spec: &FioSpec) -> &CommonSpec {
        &spec.common
    }

    fn check(spec: &FioSpec) -> Vec<crate::api::validation::FieldError> {
        let mut errors: Vec<crate::api::validation::FieldError> = spec
            .percentiles
            .iter()
            .enumerate()
            .filter(|(_, p)| !(**p > 0.0 && **p < 100.0))
            .map(|(i, p)| {
                crate::api::validation::FieldError::new(
                    format!("spec.percentiles[{i}]"),
                    format!("{p} is not a percentile strictly between 0 and 100"),
                )
            })
            .collect();
        if spec.prefill && spec.job_file.is_some() {
            errors.push(crate::api::validation::FieldError::new(
                "spec.prefill",
                "prefill writes the files of the generated job; with jobFile, add the write pass to the job file (a job with stonewall)",
            ));
        }
        errors
    }

    fn plan(
        spec: &FioSpec,
    ) -> Result<crate::execution::plan::Plan, crate::execution::plan::PlanError> {
        Ok(plan::plan(spec))
    }
}

const METRICS: &[MetricDef] = &[
    MetricDef::higher(
        "read_bandwidth_bytes_per_second",
        "B/s",
        "aggregate read bandwidth",
    )
    .up_to(1e14),
    MetricDef::higher(
        "read_iops",
        "IOPS",
        "aggregate read I/O operations per second",
    )
    .up_to(1e10),
    MetricDef::lower(
        "read_clat_mean_microseconds",
        "µs",
        "mean read completion latency",
    )
    .up_to(3.6e9),
    MetricDef::lower(
        "read_clat_p99_microseconds",
        "µs",
        "99th percentile read completion latency (an upper bound unless percentilesExact)",
    )
    .up_to(3.6e9),
    MetricDef::higher(
        "write_bandwidth_bytes_per_second",
        "B/s",
        "aggregate write bandwidth",
    )
    .up_to(1e14),
    MetricDef::higher(
        "write_iops",
        "IOPS",
        "aggregate write I/O operations per second",
    )
    .up_to(1e10),
    MetricDef::lower(
        "write_clat_mean_microseconds",
        "µs",
        "mean write completion latency",
    )
    .up_to(3.6e9),
    MetricDef::lower(
        "write_clat_p99_microseconds",
        "µs",
        "99th percentile write completion latency (an upper bound unless percentilesExact)",
    )
    .up_to(3.6e9),
];

/// Fio's headline metrics: read figures, then write figures (so a write-only job's
/// headline is its write bandwidth).
fn metrics(output: &parse::FioResult) -> Vec<Metric> {
    let mut metrics = Vec::new();
    for (defs, stats) in [
        (&METRICS[..4], &output.read),
        (&METRICS[4..], &output.write),
    ] {
        let Some(stats) = stats else { continue };
        metrics.push(defs[0].of(stats.bandwidth_bytes_per_second as f64));
        metrics.push(defs[1].of(stats.iops));
        metrics.push(defs[2].of(stats.clat_mean_micros));
        metrics.extend(defs[3].maybe(stats.clat_p99_micros));
    }
    metrics
}
