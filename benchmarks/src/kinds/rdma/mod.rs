//! RDMA bandwidth and latency with perftest's `ib_{read,write,send}_{bw,lat}`.

pub mod bandwidth;
pub mod latency;
pub mod parse;
pub mod plan;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The RDMA operation measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// RDMA read (ib_read_*).
    #[default]
    Read,
    /// RDMA write (ib_write_*).
    Write,
    /// Two-sided send/receive (ib_send_*).
    Send,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Read => "read",
            Self::Write => "write",
            Self::Send => "send",
        }
    }
}

/// perftest options shared by the bandwidth and latency kinds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PerftestOptions {
    /// read, write or send.
    #[serde(default)]
    pub mode: Mode,

    /// Iterations per message size (perftest -n).
    #[serde(default = "default_iterations")]
    #[schemars(range(min = 5, max = 100000000))]
    pub iterations: u32,

    /// Run for this many seconds instead of a fixed number of iterations (perftest -D).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 3600))]
    pub duration: Option<u32>,

    /// RDMA device, e.g. `mlx5_0` (perftest -d). Defaults to the first device found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[A-Za-z0-9_.-]{1,64}$"))]
    pub device: Option<String>,

    /// Port of the RDMA device (perftest -i).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 255))]
    pub ib_port: Option<u32>,

    /// GID index, needed for RoCE (perftest -x).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 255))]
    pub gid_index: Option<u32>,

    /// Connect queue pairs through the RDMA connection manager (perftest -R).
    #[serde(default)]
    pub rdma_cm: bool,

    /// One message size in bytes (perftest -s). Without it and without allSizes,
    /// perftest's default size is used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 8388608))]
    pub message_size: Option<u64>,

    /// Sweep every message size from 2 bytes to 2^23 (perftest -a).
    #[serde(default)]
    pub all_sizes: bool,

    /// CPU cores to pin the benchmark to, as a taskset list such as `2` or `0-3`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$"))]
    pub cpu_affinity: Option<String>,

    /// GPUDirect RDMA from this CUDA device index (perftest --use_cuda). Request GPUs in
    /// resources too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 64))]
    pub use_cuda: Option<u32>,

    /// TCP port perftest exchanges connection data on (perftest -p).
    #[serde(default = "default_port")]
    #[schemars(range(min = 1024, max = 65535))]
    pub port: u16,

    /// Further perftest arguments, passed as separate arguments (never through a shell).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub extra_args: Vec<ExtraArg>,
}

/// One extra perftest argument.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct ExtraArg(#[schemars(length(min = 1, max = 256))] pub String);

fn default_iterations() -> u32 {
    1000
}

fn default_port() -> u16 {
    18515
}

/// CEL rules both RDMA kinds carry, checked by the registry for both.
pub(crate) fn check(options: &PerftestOptions) -> Vec<crate::api::validation::FieldError> {
    let mut errors = Vec::new();
    if options.all_sizes && options.duration.is_some() {
        errors.push(crate::api::validation::FieldError::new(
            "spec.duration",
            "duration and allSizes are mutually exclusive (perftest sweeps sizes by iteration count)",
        ));
    }
    if options.all_sizes && options.message_size.is_some() {
        errors.push(crate::api::validation::FieldError::new(
            "spec.messageSize",
            "messageSize and allSizes are mutually exclusive",
        ));
    }
    errors
}
