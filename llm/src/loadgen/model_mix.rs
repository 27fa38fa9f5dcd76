//! A weighted mix of model names in one run (a base model and its LoRA adapters, say):
//! each request draws its model by weight, and every iteration reports its figures per
//! model besides the whole.

use anyhow::{Context as _, bail};

use crate::rng::Rng;

/// One model of the mix and its request body's fixed fields.
#[derive(Clone, Debug)]
pub struct MixedModel {
    pub name: String,
    /// `{"model":"name",...,` (see `body_prefix`).
    pub body_prefix: String,
    /// Sum of the weights up to and including this model's.
    cumulative: f64,
}

/// Parses `--model-mix NAME=WEIGHT` arguments into names and weights.
pub fn parse(arguments: &[String]) -> anyhow::Result<Vec<(String, f64)>> {
    arguments
        .iter()
        .map(|argument| {
            let (name, weight) = argument
                .rsplit_once('=')
                .with_context(|| format!("--model-mix {argument:?}: expected NAME=WEIGHT"))?;
            let weight: f64 = weight
                .trim()
                .parse()
                .with_context(|| format!("--model-mix {argument:?}: the weight is not a number"))?;
            if name.trim().is_empty() || !(weight.is_finite() && weight > 0.0) {
                bail!("--model-mix {argument:?}: needs a name and a positive weight");
            }
            Ok((name.trim().to_owned(), weight))
        })
        .collect()
}

/// The mix, each model with its body prefix from `prefix`.
pub fn build(models: &[(String, f64)], prefix: impl Fn(&str) -> String) -> Vec<MixedModel> {
    let mut cumulative = 0.0;
    models
        .iter()
        .map(|(name, weight)| {
            cumulative += weight;
            MixedModel {
                name: name.clone(),
                body_prefix: prefix(name),
                cumulative,
            }
        })
        .collect()
}

/// Request `ticket`'s model (deterministic for a seed), by weight.
pub fn choose(mix: &[MixedModel], seed: u64, ticket: u64) -> Option<usize> {
    let total = mix.last()?.cumulative;
    let point = Rng::derive(seed ^ 0x6D_6978, ticket).unit() * total;
    Some(
        mix.iter()
            .position(|m| point < m.cumulative)
            .unwrap_or(mix.len() - 1),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn models_are_drawn_by_weight_and_bad_arguments_are_refused() {
        let models = parse(&["base=3".into(), "lora-a=1".into()]).expect("valid");
        let mix = build(&models, |name| format!("{{\"model\":\"{name}\","));
        assert_eq!(mix[1].body_prefix, "{\"model\":\"lora-a\",");
        let lora = (0..4000)
            .filter(|&ticket| choose(&mix, 7, ticket) == Some(1))
            .count();
        assert!(
            (800..1200).contains(&lora),
            "{lora} of 4000 drew the 1/4 model"
        );
        assert_eq!(choose(&[], 7, 0), None);
        for bad in ["base", "base=0", "=2", "base=x"] {
            assert!(parse(&[bad.into()]).is_err(), "{bad}");
        }
    }
}
