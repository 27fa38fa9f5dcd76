//! Command-line pieces of distributed runs and OME compatibility.

use crate::report::result::ServiceMetadata;
use anyhow::{Context as _, bail};

/// `--service-metadata key=value` pairs as the result's metadata (`None` without any).
pub fn service_metadata(pairs: &[String]) -> anyhow::Result<Option<ServiceMetadata>> {
    if pairs.is_empty() {
        return Ok(None);
    }
    let mut metadata = ServiceMetadata::default();
    for pair in pairs {
        let (key, value) = pair
            .split_once('=')
            .with_context(|| format!("--service-metadata {pair:?}: expected key=value"))?;
        match key {
            "engine" => metadata.engine = Some(value.into()),
            "version" => metadata.version = Some(value.into()),
            "gpuType" => metadata.gpu_type = Some(value.into()),
            "gpuCount" => {
                metadata.gpu_count = Some(value.parse().with_context(|| {
                    format!("--service-metadata gpuCount={value}: not a count")
                })?);
            }
            other => bail!(
                "--service-metadata {other}: unknown key (engine, version, gpuType, gpuCount)"
            ),
        }
    }
    Ok(Some(metadata))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_four_keys_and_refuses_others() {
        let metadata = service_metadata(&[
            "engine=SGLang".into(),
            "version=v0.4.0".into(),
            "gpuType=H100".into(),
            "gpuCount=16".into(),
        ])
        .expect("valid")
        .expect("set");
        assert_eq!(metadata.engine.as_deref(), Some("SGLang"));
        assert_eq!(metadata.gpu_count, Some(16));
        assert_eq!(service_metadata(&[]).expect("valid"), None);
        assert!(service_metadata(&["gpuCount=many".into()]).is_err());
        assert!(service_metadata(&["colour=red".into()]).is_err());
        assert!(service_metadata(&["engine".into()]).is_err());
    }
}
