//! Placeholder until the parser lands.

/// The structured result.
#[derive(
    Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct FioResult {
    /// Placeholder.
    pub placeholder: Option<f64>,
}
