//! What the MPI kinds (MPIPingPong, OpenFOAM) share.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How MPI ranks talk to each other.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum Transport {
    /// Open MPI's TCP byte transfer layer.
    #[default]
    #[serde(rename = "TCP")]
    Tcp,
    /// UCX over RDMA (InfiniBand or RoCE).
    #[serde(rename = "RDMA")]
    Rdma,
}

pub(crate) fn default_ssh_port() -> u16 {
    2222
}
