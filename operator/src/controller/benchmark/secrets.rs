//! The Secrets a benchmark's pods would mount, checked before anything is created: only
//! those their owners labelled [`CONSUMABLE_LABEL`]. The operator creates the pods with
//! its own rights, so without this, creating a benchmark would be reading any Secret of
//! the namespace (a Helm release, another benchmark's launch token, the warehouse's
//! credentials) by having a pod mount it.

use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;
use perfsweep_benchmarks::outcome::{Failure, Reason};
use perfsweep_benchmarks::render::consumed_secrets::{CONSUMABLE_LABEL, consumed_secrets};

use super::prepare::Prepared;
use super::step::{Halt, Stage, Step, Stuck};
use super::target::Target;
use crate::controller::Error;

/// Pure: why a Secret with these labels may not be mounted (`None`: it may).
pub(super) fn refusal(
    name: &str,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> Option<String> {
    let labelled = labels
        .and_then(|labels| labels.get(CONSUMABLE_LABEL))
        .is_some_and(|value| value == "true");
    (!labelled).then(|| {
        format!(
            "Secret {name} is not labelled {CONSUMABLE_LABEL}=true: a benchmark's pods mount only Secrets their owner marked for benchmarks (kubectl label secret {name} {CONSUMABLE_LABEL}=true)"
        )
    })
}

/// One metadata read per Secret the pods name (none for most benchmarks): a Secret that
/// is missing or not labelled fails the benchmark, naming it.
pub(super) async fn check_consumable(
    client: &kube::Client,
    target: &Target,
    prepared: &Prepared,
) -> Step<()> {
    let api: Api<Secret> = Api::namespaced(client.clone(), &target.namespace);
    for name in consumed_secrets(&prepared.rendered) {
        match api.get_metadata_opt(&name).await {
            Ok(Some(secret)) => {
                if let Some(why) = refusal(&name, secret.metadata.labels.as_ref()) {
                    return Err(Halt::Fails(Failure::new(Reason::SecretNotConsumable, why)));
                }
            }
            Ok(None) => {
                return Err(Halt::Fails(Failure::new(
                    Reason::SecretNotConsumable,
                    format!(
                        "Secret {}/{name}, which the benchmark's pods would mount, does not exist",
                        target.namespace
                    ),
                )));
            }
            Err(source) => {
                return Err(Halt::Stuck(Stuck {
                    stage: Stage::Creating,
                    error: Error::Kube {
                        action: format!(
                            "reading Secret {}/{name}'s labels for {}",
                            target.namespace,
                            target.describe()
                        ),
                        source,
                    },
                }));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_secret_its_owner_labelled_may_be_mounted() {
        let labels = |value: &str| {
            std::collections::BTreeMap::from([(CONSUMABLE_LABEL.to_owned(), value.to_owned())])
        };
        assert_eq!(refusal("s", Some(&labels("true"))), None);
        for refused in [
            None,
            Some(labels("false")),
            Some(std::collections::BTreeMap::new()),
        ] {
            let why = refusal("s", refused.as_ref()).expect("refused");
            assert!(
                why.contains("kubectl label secret s perfsweep.io/consumable=true"),
                "{why}"
            );
        }
    }
}
