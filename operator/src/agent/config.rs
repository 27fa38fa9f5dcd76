//! The agent's configuration, read from the environment the backends set
//! (see `perfsweep_benchmarks::execution::agent_env`).

use std::path::PathBuf;

use perfsweep_benchmarks::execution::agent_env::{self, AddressSource, PeerEndpoints};
use perfsweep_benchmarks::execution::plan::{Plan, Role};

/// Everything an agent needs to play its role.
#[derive(Clone, Debug)]
pub struct AgentConfig {
    pub plan: Plan,
    pub role: String,
    pub index: u32,
    pub peers: PeerEndpoints,
    pub control_port: u16,
    pub address: AddressSource,
    pub workdir: PathBuf,
    pub mtu: Option<u32>,
    pub host: Option<String>,
    pub termination_log: Option<PathBuf>,
    /// Where the plan's volumes are when they are not mounted (the local backend).
    pub volumes_dir: Option<PathBuf>,
    /// The benchmark's token, which every control request proves it holds; `None` when
    /// the backend set none (the agent then fails, saying so).
    pub token: Option<Token>,
}

/// The benchmark's token; never printed.
#[derive(Clone)]
pub struct Token(pub Vec<u8>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(redacted)")
    }
}

/// A missing or malformed setting, named.
#[derive(Debug, thiserror::Error)]
#[error("{variable}: {message}")]
pub struct ConfigError {
    pub variable: &'static str,
    pub message: String,
}

impl AgentConfig {
    /// Reads the configuration through `lookup` (the process environment in production).
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        let required = |variable: &'static str| {
            lookup(variable).ok_or_else(|| ConfigError {
                variable,
                message: "not set (the agent is started by perfsweep's backends, which set it)"
                    .into(),
            })
        };
        let invalid = |variable: &'static str| {
            move |e: &dyn std::fmt::Display| ConfigError {
                variable,
                message: e.to_string(),
            }
        };
        let plan: Plan = serde_json::from_str(&required(agent_env::PLAN)?)
            .map_err(|e| invalid(agent_env::PLAN)(&e))?;
        let role = required(agent_env::ROLE)?;
        if plan.role(&role).is_none() {
            return Err(ConfigError {
                variable: agent_env::ROLE,
                message: format!("the plan has no role {role:?}"),
            });
        }
        let index = required(agent_env::INDEX)?
            .parse()
            .map_err(|e| invalid(agent_env::INDEX)(&e))?;
        let peers: PeerEndpoints = serde_json::from_str(&required(agent_env::PEERS)?)
            .map_err(|e| invalid(agent_env::PEERS)(&e))?;
        let control_port = match lookup(agent_env::CONTROL_PORT) {
            Some(port) => port
                .parse()
                .map_err(|e| invalid(agent_env::CONTROL_PORT)(&e))?,
            None => agent_env::DEFAULT_CONTROL_PORT,
        };
        let address = required(agent_env::ADDRESS)?
            .parse()
            .map_err(|e: String| invalid(agent_env::ADDRESS)(&e))?;
        let mtu = lookup(agent_env::MTU)
            .map(|m| m.parse().map_err(|e| invalid(agent_env::MTU)(&e)))
            .transpose()?;
        Ok(Self {
            plan,
            role,
            index,
            peers,
            control_port,
            address,
            workdir: lookup(agent_env::WORKDIR).map_or_else(|| PathBuf::from("."), PathBuf::from),
            mtu,
            host: lookup(agent_env::HOST),
            termination_log: lookup(agent_env::TERMINATION_LOG).map(PathBuf::from),
            volumes_dir: lookup(agent_env::VOLUMES_DIR).map(PathBuf::from),
            token: lookup(agent_env::LAUNCH_TOKEN)
                .filter(|token| !token.is_empty())
                .map(|token| Token(token.into_bytes())),
        })
    }

    /// This agent's role in the plan.
    pub fn role(&self) -> &Role {
        // Checked in `from_lookup`.
        self.plan
            .role(&self.role)
            .unwrap_or_else(|| unreachable!("role {} checked at start", self.role))
    }

    /// Whether this agent is the result process: replica 0 of the result role, whose
    /// end is the benchmark's end.
    pub fn is_result_process(&self) -> bool {
        self.role == self.plan.result_role && self.index == 0
    }

    /// Whether this agent parses and reports a result: every replica of the result role
    /// (several replicas' results are merged by the backends; see
    /// `perfsweep_benchmarks::outcome::evaluate`).
    pub fn produces_result(&self) -> bool {
        self.role == self.plan.result_role
    }
}
