//! Placeholder until the iperf3 parser lands.

/// The structured result of an iperf3 run.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct IPerfResult {
    /// Received bandwidth, bits per second, summed over streams.
    pub received_bits_per_second: f64,
}
