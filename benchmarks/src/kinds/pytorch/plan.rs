//! The PyTorch plan: one worker runs perfsweep's benchmark script
//! (`images/pytorch/benchmark.py`) with `python3`.
//!
//! The script travels in the plan, as a file the agent writes into its working
//! directory, rather than being looked up on the machine: the script's output format is
//! the parser's input, so the binary that parses also brings the script it parses. The
//! same holds in pods (the `ghcr.io/perfsweep/pytorch` image provides Python, PyTorch
//! and torchvision) and on the local backend (Debian's `python3-torch` and
//! `python3-torchvision` on CPU; the script names what is missing when an import fails).

use super::{BenchmarkType, Device, Model, PyTorchSpec};
use crate::execution::plan::{Arg, Command, Lifetime, Plan, PlanError, PlanFile, Readiness, Role};
use std::collections::BTreeMap;

/// The benchmark script, as shipped with this version of perfsweep.
pub const SCRIPT: &str = include_str!("../../../../images/pytorch/benchmark.py");
/// Where the agent writes it (relative to its working directory).
pub const SCRIPT_FILE: &str = "benchmark.py";
const PACKAGE: &str = "python3-torch";

pub fn plan(spec: &PyTorchSpec) -> Result<Plan, PlanError> {
    let mut args: Vec<String> = vec![
        SCRIPT_FILE.into(),
        "--model".into(),
        model(spec.model).into(),
        "--device".into(),
        device(spec.device).into(),
        "--type".into(),
        match spec.benchmark_type {
            BenchmarkType::Train => "train",
            BenchmarkType::Eval => "eval",
        }
        .into(),
        "--batch-size".into(),
        spec.input_batch_size.to_string(),
    ];
    if spec.device == Device::Cuda {
        args.extend(["--gpus".into(), gpus(spec)?.to_string()]);
    }
    let worker = Role {
        name: "worker".into(),
        replicas: 1,
        setup: Vec::new(),
        command: Command {
            program: "python3".into(),
            package: PACKAGE.into(),
            args: args.into_iter().map(Arg::Literal).collect(),
        },
        files: vec![PlanFile {
            path: SCRIPT_FILE.into(),
            contents: SCRIPT.into(),
        }],
        ports: Vec::new(),
        ready_when: Readiness::Started,
        waits_for: Vec::new(),
        lifetime: Lifetime::RunToCompletion,
        uses_devices: true,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    };
    Ok(Plan {
        kind: "PyTorch".into(),
        roles: vec![worker],
        result_role: "worker".into(),
        timeout_seconds: 0,
        pod_overrides: BTreeMap::default(),
    })
}

fn model(model: Model) -> &'static str {
    match model {
        Model::Alexnet => "alexnet",
        Model::Resnet50 => "resnet50",
        Model::Llama => "llama",
    }
}

fn device(device: Device) -> &'static str {
    match device {
        Device::Cpu => "cpu",
        Device::Cuda => "cuda",
    }
}

/// The GPUs the worker gets: the `…/gpu` limit (e.g. `nvidia.com/gpu: 2`).
fn gpus(spec: &PyTorchSpec) -> Result<u32, PlanError> {
    let limits = spec
        .common
        .resources
        .as_ref()
        .and_then(|r| r.limits.as_ref());
    let Some((name, quantity)) = limits
        .into_iter()
        .flatten()
        .find(|(name, _)| name.ends_with("/gpu"))
    else {
        return Err(PlanError::Invalid {
            path: "spec.resources.limits".into(),
            message: "device cuda needs a GPU limit, e.g. nvidia.com/gpu: 1".into(),
        });
    };
    match quantity.0.parse::<u32>() {
        Ok(count) if count >= 1 => Ok(count),
        _ => Err(PlanError::Invalid {
            path: format!("spec.resources.limits[{name}]"),
            message: format!(
                "{:?} is not a whole number of GPUs (at least 1)",
                quantity.0
            ),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, fill, resolve_args};

    fn spec(json: serde_json::Value) -> PyTorchSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    #[test]
    fn runs_the_shipped_script_on_cpu() {
        let plan = plan(&spec(
            serde_json::json!({"model": "alexnet", "inputBatchSize": 8}),
        ))
        .expect("a plan");
        let worker = plan.role("worker").expect("worker");
        assert_eq!(plan.result_role, "worker");
        assert_eq!(worker.command.program, "python3");
        assert_eq!(worker.command.package, "python3-torch");
        assert_eq!(
            resolve_args(&worker.command.args, &PeerAddresses::new()).expect("resolvable"),
            [
                "benchmark.py",
                "--model",
                "alexnet",
                "--device",
                "cpu",
                "--type",
                "eval",
                "--batch-size",
                "8"
            ]
        );
        assert_eq!(worker.files[0].path, "benchmark.py");
        // The agent fills placeholders in files; the script has none it would touch.
        assert_eq!(
            fill(&worker.files[0].contents, &PeerAddresses::new()).expect("fillable"),
            SCRIPT
        );
    }

    #[test]
    fn cuda_gets_the_gpu_count_from_the_limit() {
        let plan = plan(&spec(serde_json::json!({
            "model": "resnet50", "device": "cuda", "benchmarkType": "train",
            "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "8"}}
        })))
        .expect("a plan");
        let args = resolve_args(
            &plan.role("worker").expect("worker").command.args,
            &PeerAddresses::new(),
        )
        .expect("resolvable")
        .join(" ");
        assert!(
            args.ends_with("--device cuda --type train --batch-size 64 --gpus 2"),
            "{args}"
        );
        let fractional = spec(serde_json::json!({
            "model": "resnet50", "device": "cuda",
            "resources": {"limits": {"nvidia.com/gpu": "500m"}}
        }));
        assert!(super::plan(&fractional).is_err());
    }
}
