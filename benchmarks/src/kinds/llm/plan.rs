//! The LLMInference plan and parser.
//!
//! One `loadgen` role runs `perfsweep loadgen`; with `endpoint.simulator` a `simulator`
//! role runs `perfsweep sim` and the load generator waits until it listens. Endpoints:
//!
//! - `url`: used as given;
//! - `service`: `http://<name>.<namespace>.svc:<port><path>`, or `http://<name>:<port><path>`
//!   (the benchmark's own namespace) without a namespace;
//! - `inferenceService`: KServe's predictor Service,
//!   `http://<name>-predictor.<namespace>.svc.cluster.local` — the cluster-local address
//!   KServe reports (`status.address.url`) in its Standard (RawDeployment) mode, and
//!   a host its Serverless mode's local gateway routes too — or, for OME
//!   (`apiGroup: ome.io`), the InferenceService's own Service,
//!   `http://<name>.<namespace>.svc.cluster.local:8080`, as OME reports it. Without a
//!   namespace the short name resolves in the benchmark's namespace. The model name
//!   defaults to the InferenceService's name.
//!
//! `endpoint.tls` adds `--insecure-skip-verify` or `--ca-file`; a CA bundle from a
//! ConfigMap or Secret is the loadgen role's volume `ca` (at `/perfsweep/ca`), see
//! [`super::tls`].
//!
//! A tokenizer or a dataset from a ConfigMap or a PVC is a volume of the loadgen role
//! (`tokenizer` at `/perfsweep/tokenizer`, `dataset` at `/perfsweep/dataset`), and the
//! load generator is given the file's path in it; a `file` is passed as is, a dataset
//! `url` is read by the load generator.

use super::result::{FORMAT, LLMInferenceResult};
use super::{
    Api, Arrivals, BuiltinTokenizer, DatasetFormat, InferenceServiceGroup, KeyRef,
    LLMInferenceSpec, PvcFile, SaturationLoad, SimulatorSpec, Task,
};
use crate::execution::parse_error::ParseError;
use crate::execution::plan::{
    Arg, Command, Lifetime, Plan, PlanError, Port, PortProtocol, Readiness, Role, RoleVolume,
    SecretEnv, VolumeSource,
};
use std::collections::BTreeMap;

/// The package the roles' program (`perfsweep`, run as the agent itself) comes from.
const PACKAGE: &str = "perfsweep";

/// The variable the load generator reads the API key from (`--api-key-env`).
pub const API_KEY_ENV: &str = "PERFSWEEP_API_KEY";

/// The load generator role (the result role).
pub const LOADGEN: &str = "loadgen";

/// The model name the simulator serves unless the spec names one.
pub const SIMULATOR_MODEL: &str = "perfsweep-sim";

/// The base URL the load generator targets.
pub fn endpoint_url(spec: &LLMInferenceSpec) -> Result<String, PlanError> {
    let endpoint = &spec.endpoint;
    if let Some(url) = &endpoint.url {
        return Ok(url.clone());
    }
    if let Some(direct) = &endpoint.endpoint {
        return Ok(direct.split().0);
    }
    if let Some(service) = &endpoint.service {
        let host = match &service.namespace {
            Some(ns) => format!("{}.{ns}.svc", service.name),
            None => service.name.clone(),
        };
        let path = service.path.as_deref().unwrap_or("").trim_end_matches('/');
        let path = if path.is_empty() || path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        // A TLS-terminating Service is reached over https (the scheme is what tls says).
        let scheme = if endpoint.tls.is_some() {
            "https"
        } else {
            "http"
        };
        return Ok(format!("{scheme}://{host}:{}{path}", service.port));
    }
    if let Some(isvc) = &endpoint.inference_service {
        let (service, default_port) = match isvc.api_group {
            InferenceServiceGroup::Kserve => (format!("{}-predictor", isvc.name), 80),
            InferenceServiceGroup::Ome => (isvc.name.clone(), 8080),
        };
        let host = match &isvc.namespace {
            Some(ns) => format!("{service}.{ns}.svc.cluster.local"),
            None => service,
        };
        return Ok(match isvc.port.unwrap_or(default_port) {
            80 => format!("http://{host}"),
            port => format!("http://{host}:{port}"),
        });
    }
    if let Some(sim) = &endpoint.simulator {
        return Ok(format!("http://{{peer:simulator:0}}:{}", sim.port));
    }
    Err(PlanError::Invalid {
        path: "spec.endpoint".into(),
        message: "set one of url, service, inferenceService and simulator".into(),
    })
}

/// Prefix of the variables that carry `requestHeaderSecrets` values to the load
/// generator (`PERFSWEEP_HEADER_0`, …).
pub const HEADER_ENV_PREFIX: &str = "PERFSWEEP_HEADER_";

/// The model name requests carry.
pub fn model_name(spec: &LLMInferenceSpec) -> Result<String, PlanError> {
    let endpoint = &spec.endpoint;
    if let Some(model) = endpoint.model_name.as_ref().or(endpoint
        .endpoint
        .as_ref()
        .and_then(|d| d.model_name.as_ref()))
    {
        return Ok(model.clone());
    }
    if let Some(isvc) = &endpoint.inference_service {
        return Ok(isvc.name.clone());
    }
    if endpoint.simulator.is_some() {
        return Ok(SIMULATOR_MODEL.into());
    }
    Err(PlanError::Invalid {
        path: "spec.endpoint.modelName".into(),
        message: "modelName is required with url and service".into(),
    })
}

/// A file the load generator reads: the argument naming it, and the volume it is on.
fn input_file(
    volume: &str,
    config_map: Option<&KeyRef>,
    pvc: Option<&PvcFile>,
    direct: Option<&str>,
) -> Option<(String, Option<RoleVolume>)> {
    let mount_path = format!("/perfsweep/{volume}");
    let placeholder = format!("{{volume:{volume}}}");
    if let Some(key) = config_map {
        return Some((
            format!("{placeholder}/{}", key.key),
            Some(RoleVolume {
                name: volume.into(),
                mount_path,
                source: VolumeSource::ConfigMap {
                    name: key.name.clone(),
                },
            }),
        ));
    }
    if let Some(file) = pvc {
        return Some((
            format!("{placeholder}/{}", file.path.trim_start_matches('/')),
            Some(RoleVolume {
                name: volume.into(),
                mount_path,
                source: VolumeSource::ExistingClaim {
                    claim_name: file.claim_name.clone(),
                },
            }),
        ));
    }
    direct.map(|path| (path.to_owned(), None))
}

/// The loadgen's tokenizer and dataset arguments, and the volumes they are on.
fn inputs(spec: &LLMInferenceSpec) -> (Vec<String>, Vec<RoleVolume>) {
    let mut args = Vec::new();
    let mut volumes = Vec::new();
    if let Some(tokenizer) = &spec.tokenizer {
        let builtin = tokenizer.builtin.map(|b| {
            format!(
                "builtin:{}",
                match b {
                    BuiltinTokenizer::Cl100kBase => "cl100k_base",
                    BuiltinTokenizer::O200kBase => "o200k_base",
                }
            )
        });
        let file = input_file(
            "tokenizer",
            tokenizer.config_map.as_ref(),
            tokenizer.pvc.as_ref(),
            tokenizer.file.as_deref(),
        );
        if let Some((arg, volume)) = builtin.map(|b| (b, None)).or(file) {
            args.extend(["--tokenizer".into(), arg]);
            volumes.extend(volume);
        }
    }
    if let Some(dataset) = &spec.dataset {
        let source = &dataset.source;
        let direct = source.file.as_deref().or(source.url.as_deref());
        if let Some((arg, volume)) = input_file(
            "dataset",
            source.config_map.as_ref(),
            source.pvc.as_ref(),
            direct,
        ) {
            args.extend(["--dataset".into(), arg]);
            volumes.extend(volume);
        }
        args.extend([
            "--dataset-format".into(),
            match dataset.format {
                DatasetFormat::Sharegpt => "sharegpt",
                DatasetFormat::Prompts => "prompts",
                DatasetFormat::MooncakeTrace => "mooncake-trace",
            }
            .into(),
            "--dataset-seed".into(),
            dataset.seed.to_string(),
        ]);
        if let Some(max) = dataset.max_prompts {
            args.extend(["--dataset-max-prompts".into(), max.to_string()]);
        }
        if let Some(tokens) = dataset.output_tokens {
            args.extend(["--dataset-output-tokens".into(), tokens.to_string()]);
        }
        if let Some(tokens) = dataset.block_tokens {
            args.extend(["--trace-block-tokens".into(), tokens.to_string()]);
        }
        for (key, value) in &source.parameters {
            args.extend(["--dataset-param".into(), format!("{key}={value}")]);
        }
    }
    (args, volumes)
}

/// The object storage credentials of an `s3://`, `gs://` or `az://` dataset, from its
/// Secret into the loadgen's environment under the names the store client reads.
fn dataset_credentials(spec: &LLMInferenceSpec) -> Vec<SecretEnv> {
    let Some(source) = spec.dataset.as_ref().map(|d| &d.source) else {
        return Vec::new();
    };
    let (Some(secret), Some(url)) = (&source.secret_name, &source.url) else {
        return Vec::new();
    };
    let scheme = url.split("://").next().unwrap_or_default();
    let Some((required, optional)) = crate::execution::output::credential_names(scheme) else {
        return Vec::new();
    };
    let entry = |name: &&str, optional: bool| SecretEnv {
        name: (*name).into(),
        secret: secret.clone(),
        key: (*name).into(),
        optional,
    };
    required
        .iter()
        .map(|name| entry(name, false))
        .chain(optional.iter().map(|name| entry(name, true)))
        .collect()
}

/// The API requests use: the one a direct endpoint's URL names, or `spec.api`.
pub fn api(spec: &LLMInferenceSpec) -> Api {
    spec.endpoint
        .endpoint
        .as_ref()
        .and_then(|direct| direct.split().1)
        .unwrap_or(spec.api)
}

pub fn plan(spec: &LLMInferenceSpec) -> Result<Plan, PlanError> {
    let model = model_name(spec)?;
    let loadgen = loadgen_command(spec, &model)?;
    let simulator = spec.endpoint.simulator.as_ref();
    let mut roles = vec![loadgen_role(spec, loadgen, simulator.is_some())];
    if let Some(sim) = simulator {
        let mut role = simulator_role(sim, &model, connections_at_most(spec));
        // The simulator serves every model of a mix too.
        for mixed in spec.model_mix.iter().filter(|m| m.name != model) {
            role.command.args.extend([
                Arg::Literal("--model".into()),
                Arg::Literal(mixed.name.clone()),
            ]);
        }
        roles.insert(0, role);
    }
    Ok(Plan {
        kind: "LLMInference".into(),
        roles,
        result_role: LOADGEN.into(),
        timeout_seconds: 0,
        pod_overrides: spec
            .pod_override
            .iter()
            .map(|o| (LOADGEN.to_owned(), o.clone()))
            .collect(),
    })
}

/// The load generator's command line and what it needs from outside it.
struct LoadgenCommand {
    args: Vec<String>,
    /// Variables from Secrets: the API key, header values, dataset credentials.
    secret_env: Vec<SecretEnv>,
    /// The CA bundle, tokenizer and dataset volumes.
    volumes: Vec<RoleVolume>,
}

fn loadgen_command(spec: &LLMInferenceSpec, model: &str) -> Result<LoadgenCommand, PlanError> {
    let mut args = endpoint_args(spec, model)?;
    let (input_args, volumes) = inputs(spec);
    args.extend(input_args);
    args.extend(workload_args(spec));
    args.extend(load_args(spec));
    if let Some(seconds) = spec.warmup_seconds {
        args.extend(["--warmup-s".into(), seconds.to_string()]);
    }
    let (secret_args, secret_env) = secrets(spec);
    args.extend(secret_args);
    args.extend(budget_args(spec));
    args.extend(request_args(spec));
    args.extend(slo_args(spec));
    args.extend(worker_args(spec));
    let (tls_args, ca_volume) = spec
        .endpoint
        .tls
        .as_ref()
        .map(super::tls::EndpointTls::plan)
        .unwrap_or_default();
    args.extend(tls_args);
    args.extend(service_metadata_args(spec));
    Ok(LoadgenCommand {
        args,
        secret_env,
        volumes: ca_volume.into_iter().chain(volumes).collect(),
    })
}

/// What the load generator talks to and how: endpoint, model, API, seed, error limit,
/// task.
fn endpoint_args(spec: &LLMInferenceSpec, model: &str) -> Result<Vec<String>, PlanError> {
    Ok(vec![
        "loadgen".into(),
        "--url".into(),
        endpoint_url(spec)?,
        "--model".into(),
        model.to_owned(),
        "--api".into(),
        match api(spec) {
            Api::Chat => "chat",
            Api::Completions => "completions",
        }
        .into(),
        "--seed".into(),
        spec.seed.to_string(),
        "--max-error-rate-percent".into(),
        spec.max_error_rate_percent.to_string(),
        "--task".into(),
        match spec.task {
            Task::TextToText => "text-to-text",
            Task::TextToEmbeddings => "text-to-embeddings",
        }
        .into(),
    ])
}

/// What the requests are: streamed or not, the model mix, and where prompts come from
/// (shared-prefix groups, multi-turn sessions, or the traffic scenarios unless a
/// dataset supplies them).
fn workload_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if !spec.streaming {
        args.push("--no-stream".into());
    }
    for model in &spec.model_mix {
        args.extend([
            "--model-mix".into(),
            format!("{}={}", model.name, model.weight),
        ]);
    }
    if let Some(shared) = &spec.shared_prefix {
        args.extend([
            "--shared-prefix-groups".into(),
            shared.groups.to_string(),
            "--shared-prefix-system-tokens".into(),
            shared.system_prompt_tokens.to_string(),
            "--shared-prefix-question-tokens".into(),
            shared.question_tokens.to_string(),
            "--shared-prefix-output-tokens".into(),
            shared.output_tokens.to_string(),
        ]);
    } else if let Some(sessions) = &spec.sessions {
        args.extend([
            "--sessions-turns".into(),
            sessions.turns.to_string(),
            "--sessions-user-tokens".into(),
            sessions.user_tokens.to_string(),
            "--sessions-output-tokens".into(),
            sessions.output_tokens.to_string(),
            "--sessions-think-time-ms".into(),
            sessions.think_time_millis.to_string(),
        ]);
    } else if spec.dataset.is_none() {
        for scenario in &spec.traffic_scenarios {
            args.extend(["--scenario".into(), scenario.0.clone()]);
        }
    }
    args
}

/// The loads the iterations run: concurrency levels, request rates with their arrival
/// process (only for an open loop), and the saturation search.
fn load_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for concurrency in &spec.num_concurrency {
        args.extend(["--concurrency".into(), concurrency.0.to_string()]);
    }
    for rate in &spec.request_rates {
        args.extend(["--request-rate".into(), rate.0.to_string()]);
    }
    let open_loop = !spec.request_rates.is_empty()
        || spec
            .saturation
            .as_ref()
            .is_some_and(|s| s.load == SaturationLoad::RequestRate);
    if open_loop {
        let arrivals = match spec.arrivals {
            Arrivals::Constant => "constant",
            Arrivals::Poisson => "poisson",
            Arrivals::Gamma => "gamma",
        };
        args.extend(["--arrivals".into(), arrivals.into()]);
        if let Some(burstiness) = spec.burstiness {
            args.extend(["--burstiness".into(), burstiness.to_string()]);
        }
        if let Some(cap) = spec.max_concurrency {
            args.extend(["--max-concurrency".into(), cap.to_string()]);
        }
    }
    if let Some(saturation) = &spec.saturation {
        args.extend([
            "--saturate".into(),
            match saturation.load {
                SaturationLoad::Concurrency => "concurrency",
                SaturationLoad::RequestRate => "rate",
            }
            .into(),
            "--saturation-probes".into(),
            saturation.max_iterations.to_string(),
            "--saturation-precision".into(),
            (saturation.precision_percent / 100.0).to_string(),
        ]);
        if let Some(start) = saturation.start {
            args.extend(["--saturation-start".into(), start.to_string()]);
        }
        if let Some(max) = saturation.max {
            args.extend(["--saturation-max".into(), max.to_string()]);
        }
    }
    args
}

/// The arguments naming the variables that carry secret values (the API key, header
/// values), and the variables themselves with the dataset's credentials.
fn secrets(spec: &LLMInferenceSpec) -> (Vec<String>, Vec<SecretEnv>) {
    let mut args: Vec<String> = Vec::new();
    let mut secret_env: Vec<SecretEnv> = spec
        .endpoint
        .api_key_secret_ref
        .iter()
        .map(|secret| SecretEnv {
            name: API_KEY_ENV.into(),
            secret: secret.name.clone(),
            key: secret.key.clone(),
            optional: false,
        })
        .collect();
    secret_env.extend(dataset_credentials(spec));
    // Headers from Secrets: the load generator gets each value as a variable and the
    // command line names only the header and the variable.
    for (index, (header, secret)) in spec.request_header_secrets.iter().enumerate() {
        let variable = format!("{HEADER_ENV_PREFIX}{index}");
        args.extend(["--header-env".into(), format!("{header}={variable}")]);
        secret_env.push(SecretEnv {
            name: variable,
            secret: secret.name.clone(),
            key: secret.key.clone(),
            optional: false,
        });
    }
    // Only the variable's name is an argument; its value never is.
    args.extend(["--api-key-env".into(), API_KEY_ENV.into()]);
    (args, secret_env)
}

/// How long an iteration runs and how many of its requests are warmup.
fn budget_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if let Some(minutes) = spec.max_time_per_iteration {
        args.extend(["--max-time-s".into(), (u64::from(minutes) * 60).to_string()]);
    }
    if let Some(requests) = spec.max_requests_per_iteration {
        args.extend(["--max-requests".into(), requests.to_string()]);
    }
    if let Some(warmup) = spec.warmup_requests {
        args.extend(["--warmup-requests".into(), warmup.to_string()]);
    }
    args
}

/// Extra request body fields and literal headers.
fn request_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    for (key, value) in &spec.additional_request_params {
        args.extend(["--param".into(), format!("{key}={value}")]);
    }
    for (name, value) in &spec.request_headers {
        args.extend(["--header".into(), format!("{name}: {value}")]);
    }
    args
}

fn slo_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if let Some(slo) = &spec.slo {
        if let Some(ttft) = slo.ttft_millis {
            args.extend(["--slo-ttft-ms".into(), ttft.to_string()]);
        }
        if let Some(tpot) = slo.tpot_millis {
            args.extend(["--slo-tpot-ms".into(), tpot.to_string()]);
        }
        args.extend([
            "--slo-attainment-percent".into(),
            slo.attainment_percent.to_string(),
        ]);
    }
    args
}

fn worker_args(spec: &LLMInferenceSpec) -> Vec<String> {
    if spec.workers <= 1 {
        return Vec::new();
    }
    // Every worker gets the same arguments: its index picks its share, and the agent
    // of worker 0 holds the barrier that starts each iteration everywhere.
    vec![
        "--workers".into(),
        spec.workers.to_string(),
        "--worker".into(),
        "{index}".into(),
        "--sync".into(),
        format!("{{control:{LOADGEN}:0}}"),
    ]
}

/// What the result records about the serving side (engine, version, GPUs).
fn service_metadata_args(spec: &LLMInferenceSpec) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    if let Some(metadata) = &spec.service_metadata {
        for (key, value) in [
            ("engine", metadata.engine.clone()),
            ("version", metadata.version.clone()),
            ("gpuType", metadata.gpu_type.clone()),
            ("gpuCount", metadata.gpu_count.map(|n| n.to_string())),
        ] {
            if let Some(value) = value {
                args.extend(["--service-metadata".into(), format!("{key}={value}")]);
            }
        }
    }
    args
}

/// The load generator role: `spec.workers` replicas that run to completion, after the
/// simulator listens when there is one.
fn loadgen_role(spec: &LLMInferenceSpec, loadgen: LoadgenCommand, simulated: bool) -> Role {
    Role {
        name: LOADGEN.into(),
        replicas: spec.workers.max(1),
        setup: Vec::new(),
        command: Command {
            program: crate::execution::plan::AGENT_PROGRAM.into(),
            package: PACKAGE.into(),
            args: loadgen.args.into_iter().map(Arg::Literal).collect(),
        },
        files: Vec::new(),
        ports: Vec::new(),
        ready_when: Readiness::Started,
        waits_for: simulated
            .then(|| "simulator".to_owned())
            .into_iter()
            .collect(),
        lifetime: Lifetime::RunToCompletion,
        uses_devices: false,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: loadgen.secret_env,
        volumes: loadgen.volumes,
    }
}

/// The most connections the load generators open at once, where the spec bounds it
/// (every concurrency level, the open-loop cap, a concurrency search's ceiling), plus
/// room for the readiness probe and model check; `None` for an uncapped open loop.
fn connections_at_most(spec: &LLMInferenceSpec) -> Option<u64> {
    let levels = spec.num_concurrency.iter().map(|c| u64::from(c.0));
    let cap = spec.max_concurrency.map(u64::from);
    let search = spec.saturation.as_ref().and_then(|s| match s.load {
        SaturationLoad::Concurrency => Some(s.max.unwrap_or(1024.0).ceil() as u64),
        SaturationLoad::RequestRate => None,
    });
    if !spec.request_rates.is_empty() && cap.is_none() {
        return None;
    }
    levels.chain(cap).chain(search).max().map(|most| most + 64)
}

fn simulator_role(sim: &SimulatorSpec, model: &str, connections: Option<u64>) -> Role {
    let mut args: Vec<String> = vec![
        "sim".into(),
        "--listen".into(),
        // Its own data address only (the address the load generator is given): with
        // SO_REUSEPORT, two simulators on every address would share one port and each
        // other's clients; on their own addresses two local runs stay apart.
        format!("{{self}}:{}", sim.port),
        "--model".into(),
        model.into(),
        "--ttft-ms".into(),
        sim.ttft_millis.to_string(),
        "--itl-ms".into(),
        sim.itl_millis.to_string(),
        "--ttft-jitter-ms".into(),
        sim.ttft_jitter_millis.to_string(),
        "--itl-jitter-ms".into(),
        sim.itl_jitter_millis.to_string(),
        "--seed".into(),
        sim.seed.to_string(),
    ];
    if let Some(capacity) = sim.capacity {
        args.extend(["--capacity".into(), capacity.to_string()]);
    }
    if sim.prefill_millis_per_token > 0.0 {
        args.extend([
            "--prefill-ms-per-token".into(),
            sim.prefill_millis_per_token.to_string(),
        ]);
    }
    if let Some(tokens) = sim.reasoning_tokens {
        args.extend([
            "--reasoning-model".into(),
            model.into(),
            "--reasoning-tokens".into(),
            tokens.to_string(),
        ]);
    }
    if let Some(cache) = &sim.prefix_cache {
        args.extend([
            "--prefix-cache-blocks".into(),
            cache.blocks.to_string(),
            "--prefix-block-tokens".into(),
            cache.block_tokens.to_string(),
        ]);
    }
    // Past the open-file limit the simulator spreads connections over file tables.
    if let Some(connections) = connections {
        args.extend(["--max-connections".into(), connections.to_string()]);
    }
    Role {
        name: "simulator".into(),
        replicas: 1,
        setup: Vec::new(),
        command: Command {
            program: crate::execution::plan::AGENT_PROGRAM.into(),
            package: PACKAGE.into(),
            args: args.into_iter().map(Arg::Literal).collect(),
        },
        files: Vec::new(),
        ports: vec![Port {
            name: "openai".into(),
            port: sim.port,
            protocol: PortProtocol::TCP,
        }],
        ready_when: Readiness::Listening(sim.port),
        waits_for: Vec::new(),
        lifetime: Lifetime::Serve,
        uses_devices: false,
        capabilities: Vec::new(),
        env: BTreeMap::default(),
        secret_env: Vec::new(),
        volumes: Vec::new(),
    }
}

/// Reads the load generator's JSON document (the last line that is one).
pub fn parse(raw: &str) -> Result<LLMInferenceResult, ParseError> {
    if raw.trim().is_empty() {
        return Err(ParseError::Empty);
    }
    let line = raw
        .lines()
        .rev()
        .map(str::trim)
        .find(|line| line.starts_with('{'))
        .ok_or_else(|| ParseError::NotFound {
            what: "load generator JSON document".into(),
        })?;
    let result: LLMInferenceResult =
        serde_json::from_str(line).map_err(|e| ParseError::InvalidJson {
            line: raw.lines().count(),
            column: e.column(),
            message: e.to_string(),
        })?;
    if result.format != FORMAT {
        return Err(ParseError::Json {
            path: "/format".into(),
            message: format!("expected {FORMAT:?}, found {:?}", result.format),
        });
    }
    if let Some(failure) = &result.failure {
        return Err(ParseError::ToolReportedError(failure.clone()));
    }
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::plan::{PeerAddresses, resolve_args};

    fn spec(json: serde_json::Value) -> LLMInferenceSpec {
        serde_json::from_value(json).expect("valid spec")
    }

    fn loadgen_args(plan: &Plan, peers: &PeerAddresses) -> Vec<String> {
        resolve_args(&plan.role("loadgen").expect("loadgen").command.args, peers)
            .expect("resolvable")
    }

    #[test]
    fn a_url_endpoint_runs_one_loadgen_with_the_spec_as_arguments() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "trafficScenarios": ["D(128,64)", "N(480,240)/(300,150)"],
            "numConcurrency": [1, 8],
            "maxRequestsPerIteration": 50,
            "additionalRequestParams": {"temperature": "0.0"},
            "slo": {"ttftMillis": 200.0},
        })))
        .expect("plan");
        assert_eq!(plan.roles.len(), 1);
        assert_eq!(plan.result_role, "loadgen");
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        for part in [
            "loadgen --url http://vllm:8000 --model llama --api chat",
            "--scenario D(128,64) --scenario N(480,240)/(300,150)",
            "--concurrency 1 --concurrency 8",
            "--max-requests 50",
            "--param temperature=0.0",
            "--slo-ttft-ms 200 --slo-attainment-percent 90",
        ] {
            assert!(args.contains(part), "{part:?} not in {args}");
        }
    }

    #[test]
    fn a_simulator_endpoint_adds_a_listening_role_the_loadgen_waits_for() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"simulator": {"ttftMillis": 20.0, "itlMillis": 5.0, "capacity": 4}},
            "numConcurrency": [1, 2, 4],
        })))
        .expect("plan");
        let sim = plan.role("simulator").expect("simulator role");
        assert_eq!(sim.ready_when, Readiness::Listening(18000));
        assert_eq!(sim.lifetime, Lifetime::Serve);
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert_eq!(loadgen.waits_for, ["simulator"]);
        let peers = PeerAddresses::from([
            ("simulator".into(), vec!["10.0.0.9".into()]),
            (crate::execution::plan::SELF.into(), vec!["10.0.0.9".into()]),
        ]);
        let args = loadgen_args(&plan, &peers).join(" ");
        assert!(
            args.contains("--url http://10.0.0.9:18000 --model perfsweep-sim"),
            "{args}"
        );
        let sim_args = resolve_args(&sim.command.args, &peers)
            .expect("resolvable")
            .join(" ");
        assert!(
            sim_args.starts_with("sim --listen 10.0.0.9:18000 "),
            "the simulator listens on its own address: {sim_args}"
        );
        assert!(sim_args.contains("--ttft-ms 20 --itl-ms 5"), "{sim_args}");
        assert!(sim_args.contains("--capacity 4"), "{sim_args}");
        // Ready for the highest level's streams (and a little more).
        assert!(sim_args.ends_with("--max-connections 68"), "{sim_args}");
    }

    #[test]
    fn workers_are_replicas_of_the_loadgen_that_find_their_share_and_barrier() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"simulator": {}},
            "numConcurrency": [1, 8],
            "workers": 3,
            "serviceMetadata": {"engine": "vLLM", "gpuType": "H100", "gpuCount": 8},
            "podOverride": {"image": "example.com/loadgen:1", "nodeSelector": {"pool": "cpu"}},
        })))
        .expect("plan");
        let loadgen = plan.role(LOADGEN).expect("loadgen");
        assert_eq!(loadgen.replicas, 3);
        assert_eq!(plan.result_role, LOADGEN);
        let mut peers = PeerAddresses::from([
            ("simulator".into(), vec!["10.0.0.9".into()]),
            (crate::execution::plan::INDEX.into(), vec!["2".into()]),
        ]);
        peers.insert(
            crate::execution::plan::control_key(LOADGEN),
            vec!["a:7470".into(), "b:7470".into(), "c:7470".into()],
        );
        let args = loadgen_args(&plan, &peers).join(" ");
        assert!(
            args.contains("--workers 3 --worker 2 --sync a:7470"),
            "{args}"
        );
        assert!(
            args.contains("--service-metadata engine=vLLM --service-metadata gpuType=H100 --service-metadata gpuCount=8"),
            "{args}"
        );
        let changes = &plan.pod_overrides[LOADGEN];
        assert_eq!(changes.image.as_deref(), Some("example.com/loadgen:1"));
        assert!(!plan.pod_overrides.contains_key("simulator"));
        // One worker: no distribution arguments.
        let single = plan_args_of(serde_json::json!({"endpoint": {"simulator": {}}}));
        assert!(!single.contains("--workers"), "{single}");
    }

    fn plan_args_of(json: serde_json::Value) -> String {
        let plan = plan(&spec(json)).expect("plan");
        let peers = PeerAddresses::from([("simulator".into(), vec!["10.0.0.9".into()])]);
        loadgen_args(&plan, &peers).join(" ")
    }

    #[test]
    fn services_and_inference_services_resolve_to_cluster_urls() {
        let service = spec(serde_json::json!({
            "endpoint": {"service": {"name": "vllm", "namespace": "models", "port": 8000, "path": "openai"}, "modelName": "m"},
        }));
        assert_eq!(
            endpoint_url(&service).expect("url"),
            "http://vllm.models.svc:8000/openai"
        );
        let isvc = spec(serde_json::json!({"endpoint": {"inferenceService": {"name": "llama"}}}));
        assert_eq!(endpoint_url(&isvc).expect("url"), "http://llama-predictor");
        let kserve = spec(
            serde_json::json!({"endpoint": {"inferenceService": {"name": "llama", "namespace": "models"}}}),
        );
        assert_eq!(
            endpoint_url(&kserve).expect("url"),
            "http://llama-predictor.models.svc.cluster.local"
        );
        let ome = spec(
            serde_json::json!({"endpoint": {"inferenceService": {"name": "llama", "namespace": "models", "apiGroup": "ome.io"}}}),
        );
        assert_eq!(
            endpoint_url(&ome).expect("url"),
            "http://llama.models.svc.cluster.local:8080"
        );
        assert_eq!(model_name(&isvc).expect("model"), "llama");
        let no_model = spec(serde_json::json!({"endpoint": {"service": {"name": "vllm"}}}));
        assert!(model_name(&no_model).is_err());
    }

    #[test]
    fn an_object_storage_datasets_credentials_reach_the_loadgen_from_its_secret() {
        let keyed = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "m"},
            "dataset": {"format": "sharegpt",
                        "source": {"url": "s3://datasets/sharegpt.json", "secretName": "s3-creds",
                                   "parameters": {"endpoint": "http://minio:9000"}}},
        })))
        .expect("plan");
        let loadgen = keyed.role("loadgen").expect("loadgen");
        let credentials: Vec<(&str, &str, &str, bool)> = loadgen
            .secret_env
            .iter()
            .map(|s| {
                (
                    s.name.as_str(),
                    s.secret.as_str(),
                    s.key.as_str(),
                    s.optional,
                )
            })
            .collect();
        assert_eq!(
            credentials,
            [
                ("AWS_ACCESS_KEY_ID", "s3-creds", "AWS_ACCESS_KEY_ID", false),
                (
                    "AWS_SECRET_ACCESS_KEY",
                    "s3-creds",
                    "AWS_SECRET_ACCESS_KEY",
                    false
                ),
                ("AWS_SESSION_TOKEN", "s3-creds", "AWS_SESSION_TOKEN", true),
            ]
        );
        // Without a Secret, nothing is taken from one.
        let plain = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "m"},
            "dataset": {"format": "sharegpt", "source": {"url": "s3://datasets/sharegpt.json"}},
        })))
        .expect("plan");
        assert!(
            plain
                .role("loadgen")
                .expect("loadgen")
                .secret_env
                .is_empty()
        );
    }

    #[test]
    fn tokenizers_and_datasets_from_configmaps_and_pvcs_are_loadgen_volumes() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "task": "text-to-embeddings",
            "trafficScenarios": ["E(64)"],
            "tokenizer": {"configMap": {"name": "llama3-tok", "key": "tokenizer.json"}},
            "dataset": {"format": "sharegpt", "source": {"pvc": {"claimName": "datasets", "path": "/sharegpt/v3.json"}}, "maxPrompts": 500, "seed": 9},
        })))
        .expect("plan");
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert_eq!(
            loadgen.volumes,
            [
                RoleVolume {
                    name: "tokenizer".into(),
                    mount_path: "/perfsweep/tokenizer".into(),
                    source: VolumeSource::ConfigMap {
                        name: "llama3-tok".into()
                    },
                },
                RoleVolume {
                    name: "dataset".into(),
                    mount_path: "/perfsweep/dataset".into(),
                    source: VolumeSource::ExistingClaim {
                        claim_name: "datasets".into()
                    },
                },
            ]
        );
        let mut peers = plan.volume_paths(None);
        peers.insert("self".into(), vec!["10.0.0.1".into()]);
        let args = loadgen_args(&plan, &peers).join(" ");
        for part in [
            "--task text-to-embeddings",
            "--tokenizer /perfsweep/tokenizer/tokenizer.json",
            "--dataset /perfsweep/dataset/sharegpt/v3.json --dataset-format sharegpt --dataset-seed 9 --dataset-max-prompts 500",
        ] {
            assert!(args.contains(part), "{part:?} not in {args}");
        }
        assert!(
            !args.contains("--scenario"),
            "a dataset replaces scenarios: {args}"
        );
    }

    #[test]
    fn builtin_tokenizers_files_and_urls_need_no_volume() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "tokenizer": {"builtin": "o200k_base"},
            "dataset": {"format": "prompts", "source": {"url": "https://example.com/prompts.txt", "parameters": {"region": "eu-west-1"}}, "outputTokens": 128},
        })))
        .expect("plan");
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert!(loadgen.volumes.is_empty());
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        assert!(args.contains("--tokenizer builtin:o200k_base"), "{args}");
        assert!(
            args.contains("--dataset https://example.com/prompts.txt --dataset-format prompts"),
            "{args}"
        );
        assert!(args.contains("--dataset-output-tokens 128"), "{args}");
        assert!(args.contains("--dataset-param region=eu-west-1"), "{args}");
        let plan = super::plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "tokenizer": {"file": "/models/llama/tokenizer.json"},
        })))
        .expect("plan");
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        assert!(
            args.contains("--tokenizer /models/llama/tokenizer.json"),
            "{args}"
        );
        assert!(args.contains("--scenario D(100,100)"), "{args}");
    }

    #[test]
    fn parse_reads_the_document_and_fails_on_reported_failures() {
        let mut result = LLMInferenceResult {
            format: FORMAT.into(),
            model: "m".into(),
            ..Default::default()
        };
        let text = format!(
            "progress\n{}\n",
            serde_json::to_string(&result).expect("json")
        );
        assert_eq!(parse(&text).expect("parses").model, "m");
        result.failure = Some("7 of 10 requests failed".into());
        let text = serde_json::to_string(&result).expect("json");
        assert!(
            matches!(parse(&text), Err(ParseError::ToolReportedError(m)) if m.contains("7 of 10"))
        );
        assert_eq!(parse(" \n"), Err(ParseError::Empty));
        assert!(parse("{\"format\": \"other\"}").is_err());
        assert!(parse("no json").is_err());
    }

    #[test]
    fn request_rates_run_open_loop_with_their_arrivals_and_cap() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "requestRates": [2.5, 10],
            "arrivals": "gamma",
            "burstiness": 0.5,
            "maxConcurrency": 32,
            "warmupSeconds": 3.0,
            "maxTimePerIteration": 2,
        })))
        .expect("plan");
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        for part in [
            "--request-rate 2.5 --request-rate 10",
            "--arrivals gamma --burstiness 0.5 --max-concurrency 32",
            "--warmup-s 3",
            "--max-time-s 120",
        ] {
            assert!(args.contains(part), "{part:?} not in {args}");
        }
        assert!(!args.contains("--concurrency"), "{args}");
    }

    #[test]
    fn closed_loop_alone_leaves_open_loop_settings_out() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
        })))
        .expect("plan");
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        assert!(
            !args.contains("--arrivals") && !args.contains("--saturate"),
            "{args}"
        );
        assert!(
            !args.contains("--concurrency"),
            "the loadgen's default of 1: {args}"
        );
    }

    #[test]
    fn a_saturation_search_passes_its_bounds() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "http://vllm:8000", "modelName": "llama"},
            "saturation": {"load": "requestRate", "start": 4, "max": 400, "maxIterations": 9, "precisionPercent": 10},
            "maxConcurrency": 64,
            "slo": {"tpotMillis": 50},
        })))
        .expect("plan");
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        for part in [
            "--saturate rate --saturation-probes 9 --saturation-precision 0.1",
            "--saturation-start 4 --saturation-max 400",
            "--arrivals poisson --max-concurrency 64",
            "--slo-tpot-ms 50",
        ] {
            assert!(args.contains(part), "{part:?} not in {args}");
        }
    }

    #[test]
    fn the_api_key_comes_from_the_secret_as_an_environment_variable_only() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "https://api.example", "modelName": "m",
                         "apiKeySecretRef": {"name": "llm-key", "key": "token"}},
        })))
        .expect("plan");
        let loadgen = plan.role("loadgen").expect("loadgen");
        assert_eq!(
            loadgen.secret_env,
            [SecretEnv {
                name: API_KEY_ENV.into(),
                secret: "llm-key".into(),
                key: "token".into(),
                optional: false,
            }]
        );
        assert_eq!(
            loadgen.secret_env[0].local_variable(),
            "PERFSWEEP_SECRET_LLM_KEY_TOKEN"
        );
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        assert!(args.contains("--api-key-env PERFSWEEP_API_KEY"), "{args}");
        assert!(!args.contains("llm-key"), "{args}");
    }

    /// Issue 24, finding 7: a header from a Secret is a variable of the load generator;
    /// the command line names the header and the variable, never a value.
    #[test]
    fn headers_from_secrets_reach_the_load_generator_as_variables_only() {
        let plan = plan(&spec(serde_json::json!({
            "endpoint": {"url": "https://llm.example", "modelName": "m"},
            "requestHeaders": {"X-Team": "perf"},
            "requestHeaderSecrets": {
                "api-key": {"name": "cred-a", "key": "key"},
                "X-Tenant-Token": {"name": "cred-b", "key": "token"},
            },
        })))
        .expect("plan");
        let loadgen = plan.role("loadgen").expect("loadgen");
        let from_secrets: Vec<(&str, &str, &str)> = loadgen
            .secret_env
            .iter()
            .filter(|s| s.name.starts_with(HEADER_ENV_PREFIX))
            .map(|s| (s.name.as_str(), s.secret.as_str(), s.key.as_str()))
            .collect();
        assert_eq!(
            from_secrets,
            [
                ("PERFSWEEP_HEADER_0", "cred-b", "token"),
                ("PERFSWEEP_HEADER_1", "cred-a", "key"),
            ]
        );
        let args = loadgen_args(&plan, &PeerAddresses::new()).join(" ");
        assert!(
            args.contains("--header-env X-Tenant-Token=PERFSWEEP_HEADER_0")
                && args.contains("--header-env api-key=PERFSWEEP_HEADER_1")
                && args.contains("--header X-Team: perf"),
            "{args}"
        );
        assert!(!args.contains("cred-"), "{args}");
    }
}
