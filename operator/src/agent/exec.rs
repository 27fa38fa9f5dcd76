//! Remote launch without SSH: how an MPI launcher starts Open MPI's daemons on the
//! workers. `mpirun --mca plm_rsh_agent "perfsweep rsh"` runs
//! `perfsweep rsh HOST orted …` for every worker; [`rsh`] asks the agent at HOST, over
//! its control endpoint, to run the command, and relays the command's output and exit
//! status, exactly as `ssh HOST COMMAND` would.
//!
//! Why not SSH (kube-perftest's way): SSH needs an sshd in every worker image, host keys
//! and a client key pair per benchmark, a passwd entry for the user, and usually root.
//! The agent already runs in every pod and serves an endpoint; one random token per
//! benchmark (a Secret owned by the benchmark on Kubernetes, random per run locally) is
//! the only secret, and nothing runs as root for it.
//!
//! Protocol, on the control endpoint: the client sends `EXEC`; the agent answers a JSON
//! line with a fresh random nonce; the client sends a JSON line with the argument vector
//! and `HMAC-SHA256(token, nonce ‖ 0 ‖ argv joined by 0)` (the challenge-response of
//! every control request, `super::auth`, with the argument vector as the words), so the
//! token never crosses the network and a recorded request cannot be replayed. The agent
//! then runs the argument
//! vector (never through a shell) in its working directory with its role's environment
//! and streams frames back: `[kind: u8][length: u32 BE][payload][mac: 32 bytes]` with
//! kind 1 stdout, 2 stderr, 3 exit (payload: i32 BE exit code, 128 + signal for a
//! signal), 4 refusal (payload: the reason). Once the request is proved, every frame's
//! MAC is `HMAC-SHA256(token, context ‖ client nonce ‖ sequence ‖ kind ‖ payload)` for
//! the nonce the client sent with its request, so output and exit status are believed
//! only from an agent that holds the token, in order and whole; refusals before that
//! carry a zero MAC and only ever fail the command. Only agents of plans that launch
//! remotely accept `EXEC`, and only once their own setup is done.
//!
//! Open MPI writes the daemon's command for a remote shell (`orted -mca ess "env" …`);
//! the client splits it with POSIX shell quoting rules into an argument vector (no shell
//! runs on either side). Open MPI's `--prefix` (which prepends `PATH=…;` shell code)
//! is not supported: the images install Open MPI in `/usr`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{ExitCode, Stdio};
use std::time::Duration;

use perfsweep_benchmarks::execution::agent_env;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::auth::{self, MAX_LINE, READ_TIMEOUT, random_token, sign, verify};

const STDOUT: u8 = 1;
const STDERR: u8 = 2;
const EXIT: u8 = 3;
const REFUSED: u8 = 4;

/// Largest frame `perfsweep rsh` accepts: the agent sends output in pieces of 16 KiB, so
/// a longer one is not from an agent, and is not allocated.
const MAX_FRAME: usize = 1024 * 1024;

/// The environment variable that tells a rank's wrapper (`perfsweep mpi-rank`) which
/// directory its worker prepared.
pub const RANK_WORKDIR: &str = "PERFSWEEP_RANK_WORKDIR";

/// What an agent needs to run commands for the launcher.
#[derive(Clone, Debug)]
pub struct ExecConfig {
    pub workdir: PathBuf,
    pub env: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize)]
struct Challenge {
    nonce: String,
}

#[derive(Serialize, Deserialize)]
struct Request {
    argv: Vec<String>,
    mac: String,
    /// The client's nonce, for the agent to sign its frames with.
    nonce: String,
}

/// Length of a frame's MAC (HMAC-SHA256).
const MAC_LEN: usize = 32;

/// Signs the frames of one command's output, in order.
struct FrameSigner<'a> {
    token: &'a [u8],
    nonce: String,
    sequence: u64,
}

impl FrameSigner<'_> {
    fn tag(&mut self, kind: u8, payload: &[u8]) -> Vec<u8> {
        let tag = frame_tag(self.token, &self.nonce, self.sequence, kind, payload);
        self.sequence += 1;
        tag
    }
}

fn frame_tag(token: &[u8], nonce: &str, sequence: u64, kind: u8, payload: &[u8]) -> Vec<u8> {
    let sequence = sequence.to_string();
    auth::sign_raw(
        token,
        auth::Context::ExecFrame,
        nonce,
        &[sequence.as_bytes(), &[kind], payload],
    )
}

/// A frame; `signer` is `None` only for refusals before the request was proved.
async fn frame<W: AsyncWrite + Unpin>(
    write: &mut W,
    kind: u8,
    payload: &[u8],
    signer: Option<&mut FrameSigner<'_>>,
) -> std::io::Result<()> {
    let length = u32::try_from(payload.len())
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidInput, "frame too large"))?;
    let mut header = [0u8; 5];
    header[0] = kind;
    header[1..].copy_from_slice(&length.to_be_bytes());
    let tag = signer.map_or_else(|| vec![0u8; MAC_LEN], |s| s.tag(kind, payload));
    write.write_all(&header).await?;
    write.write_all(payload).await?;
    write.write_all(&tag).await?;
    write.flush().await
}

/// An unsigned refusal (the request not proved yet).
async fn refuse<W: AsyncWrite + Unpin>(write: &mut W, reason: &[u8]) -> std::io::Result<()> {
    frame(write, REFUSED, reason, None).await
}

/// The agent's side of `EXEC`, after the `EXEC` line: challenge, verify with the
/// benchmark's `token`, run, stream.
pub async fn serve<R, W>(
    config: Option<ExecConfig>,
    token: &[u8],
    mut read: R,
    mut write: W,
    pending: auth::Pending,
) -> std::io::Result<()>
where
    R: AsyncBufRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let Some(config) = config else {
        return refuse(
            &mut write,
            b"this agent does not run commands for a launcher (not an MPI worker, or its setup is not done)",
        )
        .await;
    };
    let nonce = random_token().map_err(std::io::Error::other)?;
    let challenge = serde_json::to_string(&Challenge {
        nonce: nonce.clone(),
    })
    .map_err(std::io::Error::other)?;
    write.write_all(format!("{challenge}\n").as_bytes()).await?;
    let line = auth::read_line(&mut read, MAX_LINE, READ_TIMEOUT).await?;
    let request: Request = match serde_json::from_str(&line) {
        Ok(request) => request,
        Err(error) => {
            return refuse(&mut write, format!("malformed request: {error}").as_bytes()).await;
        }
    };
    if !verify(
        token,
        auth::Context::Exec,
        &nonce,
        &request.argv,
        &request.mac,
    ) {
        tracing::warn!("refused a remote command with a wrong launch token");
        return refuse(&mut write, b"authentication failed: wrong launch token").await;
    }
    // Proved: the command may run as long as it takes, outside the cap.
    drop(pending);
    let mut signer = FrameSigner {
        token,
        nonce: request.nonce.clone(),
        sequence: 0,
    };
    let Some((program, args)) = request.argv.split_first() else {
        return frame(&mut write, REFUSED, b"empty command", Some(&mut signer)).await;
    };
    tracing::info!(command = %request.argv.join(" "), "running a command for the launcher");
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .current_dir(&config.workdir)
        .envs(&config.env)
        .env(RANK_WORKDIR, &config.workdir)
        .env_remove(agent_env::LAUNCH_TOKEN)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(error) => {
            return frame(
                &mut write,
                REFUSED,
                format!("cannot start {program}: {error}").as_bytes(),
                Some(&mut signer),
            )
            .await;
        }
    };
    let (tx, mut rx) = tokio::sync::mpsc::channel::<(u8, Vec<u8>)>(16);
    let pumps = [
        child
            .stdout
            .take()
            .map(|s| pump(Box::new(s), STDOUT, tx.clone())),
        child
            .stderr
            .take()
            .map(|s| pump(Box::new(s), STDERR, tx.clone())),
    ];
    drop(tx);
    let pumps: Vec<_> = pumps.into_iter().flatten().map(tokio::spawn).collect();
    while let Some((kind, data)) = rx.recv().await {
        // A launcher that went away takes the command with it (kill on drop).
        frame(&mut write, kind, &data, Some(&mut signer)).await?;
    }
    for pump in pumps {
        let _ = pump.await;
    }
    let status = child.wait().await?;
    let code = exit_code(status);
    frame(&mut write, EXIT, &code.to_be_bytes(), Some(&mut signer)).await?;
    write.shutdown().await
}

async fn pump(
    mut source: Box<dyn tokio::io::AsyncRead + Unpin + Send>,
    kind: u8,
    tx: tokio::sync::mpsc::Sender<(u8, Vec<u8>)>,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        match source.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if tx.send((kind, buffer[..n].to_vec())).await.is_err() {
                    break;
                }
            }
        }
    }
}

fn exit_code(status: std::process::ExitStatus) -> i32 {
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return 128 + signal;
        }
    }
    status.code().unwrap_or(1)
}

/// Where `perfsweep rsh` finds the agent of a host: the launcher's agent exports the
/// control endpoint of every peer by its data address.
pub type RshPeers = BTreeMap<String, String>;

/// `perfsweep rsh HOST WORDS…`: runs WORDS (a command line written for a remote shell)
/// on the agent at HOST and relays its output and exit status.
pub async fn rsh(host: &str, words: &[String]) -> anyhow::Result<ExitCode> {
    use anyhow::Context as _;
    let token = std::env::var(agent_env::LAUNCH_TOKEN).with_context(|| {
        format!(
            "{} is not set: perfsweep rsh runs under an agent of a plan that launches remotely",
            agent_env::LAUNCH_TOKEN
        )
    })?;
    let peers: RshPeers = serde_json::from_str(
        &std::env::var(agent_env::RSH_PEERS)
            .with_context(|| format!("{} is not set", agent_env::RSH_PEERS))?,
    )
    .with_context(|| format!("{} is not a JSON object", agent_env::RSH_PEERS))?;
    let endpoint = peers.get(host).with_context(|| {
        format!(
            "no agent for host {host:?}: the benchmark's peers are {}",
            peers.keys().cloned().collect::<Vec<_>>().join(", ")
        )
    })?;
    let argv = split_command(words)?;
    let code = run_remote(endpoint, token.as_bytes(), &argv).await?;
    Ok(ExitCode::from(
        u8::try_from(code.clamp(0, 255)).unwrap_or(1),
    ))
}

/// Open MPI's remote command, as an argument vector: the words joined as a remote shell
/// would see them, then split with POSIX quoting rules.
pub fn split_command(words: &[String]) -> anyhow::Result<Vec<String>> {
    let line = words.join(" ");
    let argv = shlex::split(&line)
        .ok_or_else(|| anyhow::anyhow!("unbalanced quotes in the remote command {line:?}"))?;
    if argv.is_empty() {
        anyhow::bail!("no remote command given");
    }
    if let Some(first) = argv.first()
        && first.contains('=')
    {
        anyhow::bail!(
            "the remote command starts with an assignment ({first:?}): Open MPI's --prefix needs a shell, which perfsweep rsh does not run; install Open MPI on the default PATH"
        );
    }
    Ok(argv)
}

/// How long `perfsweep rsh` waits for an agent's challenge.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `perfsweep rsh` looks an agent's name up: past a cached miss's 5 s.
const RESOLVE_PATIENCE: Duration = Duration::from_secs(6);

/// Runs `argv` at `endpoint`, relaying its output to ours; returns its exit code.
pub async fn run_remote(endpoint: &str, token: &[u8], argv: &[String]) -> anyhow::Result<i32> {
    use anyhow::Context as _;
    let address = super::peer_dns::resolve_patiently(endpoint, RESOLVE_PATIENCE)
        .await
        .with_context(|| format!("looking up the agent at {endpoint}"))?;
    let stream = TcpStream::connect(address)
        .await
        .with_context(|| format!("connecting to the agent at {endpoint}"))?;
    let (read, mut write) = stream.into_split();
    let mut read = BufReader::new(read);
    write.write_all(b"EXEC\n").await?;
    let line = auth::read_line(&mut read, MAX_LINE, CONNECT_TIMEOUT)
        .await
        .with_context(|| format!("reading the challenge of the agent at {endpoint}"))?;
    let challenge: Challenge = if let Ok(challenge) = serde_json::from_str(&line) {
        challenge
    } else {
        // A refusal frame instead of a challenge.
        let mut rest = line.into_bytes();
        (&mut read)
            .take(u64::try_from(MAX_LINE).unwrap_or(u64::MAX))
            .read_to_end(&mut rest)
            .await?;
        let reason = rest
            .get(5..rest.len().saturating_sub(MAC_LEN))
            .map(String::from_utf8_lossy)
            .unwrap_or_default();
        anyhow::bail!("the agent at {endpoint} refused: {reason}");
    };
    let nonce = random_token()?;
    let request = Request {
        mac: sign(token, auth::Context::Exec, &challenge.nonce, argv),
        argv: argv.to_vec(),
        nonce: nonce.clone(),
    };
    let mut sequence = 0u64;
    let mut body = serde_json::to_string(&request)?;
    body.push('\n');
    write.write_all(body.as_bytes()).await?;
    let mut stdout = tokio::io::stdout();
    let mut stderr = tokio::io::stderr();
    loop {
        let mut header = [0u8; 5];
        read.read_exact(&mut header).await.with_context(|| {
            format!("the agent at {endpoint} closed the connection before the command ended")
        })?;
        let length = u32::from_be_bytes([header[1], header[2], header[3], header[4]]) as usize;
        if length > MAX_FRAME {
            anyhow::bail!(
                "the agent at {endpoint} sent a frame of {length} bytes (at most {MAX_FRAME} expected)"
            );
        }
        let mut payload = vec![0u8; length];
        read.read_exact(&mut payload).await?;
        let mut tag = [0u8; MAC_LEN];
        read.read_exact(&mut tag).await?;
        let signed = auth::verify_raw(
            token,
            auth::Context::ExecFrame,
            &nonce,
            &[sequence.to_string().as_bytes(), &[header[0]], &payload],
            &tag,
        );
        sequence += 1;
        if !signed && header[0] != REFUSED {
            // Output or an exit status is believed only from the benchmark's agent, in
            // order: a refusal only fails the command, which anyone on the path could.
            anyhow::bail!(
                "a frame from {endpoint} is not signed with the benchmark's token (or out of order): it is not this benchmark's agent"
            );
        }
        match header[0] {
            STDOUT => {
                stdout.write_all(&payload).await?;
                stdout.flush().await?;
            }
            STDERR => {
                stderr.write_all(&payload).await?;
                stderr.flush().await?;
            }
            EXIT => {
                let code: [u8; 4] = payload
                    .get(..4)
                    .and_then(|p| p.try_into().ok())
                    .context("malformed exit frame")?;
                return Ok(i32::from_be_bytes(code));
            }
            REFUSED => anyhow::bail!(
                "the agent at {endpoint} refused: {}",
                String::from_utf8_lossy(&payload)
            ),
            other => anyhow::bail!("unknown frame {other} from the agent at {endpoint}"),
        }
    }
}

/// The environment of the role's commands: the role's `env` with placeholders filled;
/// `PATH` led by the agent's own directory (so `perfsweep rsh` and `perfsweep mpi-rank`
/// resolve to this very binary); and, in a plan that launches remotely, the map
/// [`agent_env::RSH_PEERS`] from each peer's data address to its control endpoint.
pub fn command_env(
    config: &super::AgentConfig,
    peers: &perfsweep_benchmarks::execution::plan::PeerAddresses,
) -> Result<BTreeMap<String, String>, super::Failure> {
    use super::{Failure, Reason};
    let mut env = BTreeMap::new();
    for (name, value) in &config.role().env {
        let value = perfsweep_benchmarks::execution::plan::fill(value, peers)
            .map_err(|e| Failure::plain(Reason::PlanInvalid, format!("env {name}: {e}")))?;
        env.insert(name.clone(), value);
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(PathBuf::from))
    {
        let mut paths = vec![dir];
        paths.extend(
            std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths),
        );
        if let Ok(path) = std::env::join_paths(paths) {
            env.insert("PATH".to_owned(), path.to_string_lossy().into_owned());
        }
    }
    if config.plan.remote_launch() {
        if std::env::var_os(agent_env::LAUNCH_TOKEN).is_none() {
            return Err(Failure::plain(
                Reason::LaunchTokenMissing,
                format!(
                    "the plan launches remotely but {} is not set (on Kubernetes it comes from the benchmark's Secret)",
                    agent_env::LAUNCH_TOKEN
                ),
            ));
        }
        let mut map = RshPeers::new();
        for (role, addresses) in peers {
            let Some(endpoints) = config.peers.get(role) else {
                continue;
            };
            for (address, endpoint) in addresses.iter().zip(endpoints) {
                map.insert(address.clone(), super::peer_dns::known(endpoint));
            }
        }
        let map = serde_json::to_string(&map)
            .map_err(|e| Failure::plain(Reason::PlanInvalid, e.to_string()))?;
        env.insert(agent_env::RSH_PEERS.to_owned(), map);
    }
    Ok(env)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: &[u8] = b"the benchmark's token";

    /// A real agent runs a command for the launcher: its output and exit status arrive,
    /// every frame signed.
    #[tokio::test]
    async fn a_command_runs_on_the_agent_and_its_signed_output_is_relayed() {
        let control = super::super::control::Control::new(TOKEN.to_vec());
        control.enable_exec(ExecConfig {
            workdir: std::env::temp_dir(),
            env: BTreeMap::new(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        tokio::spawn(control.serve(listener));
        let argv = ["sh", "-c", "exit 7"].map(str::to_owned);
        assert_eq!(run_remote(&endpoint, TOKEN, &argv).await.unwrap(), 7);
        let error = run_remote(&endpoint, b"another token", &argv)
            .await
            .expect_err("a wrong token is refused");
        assert!(error.to_string().contains("wrong launch token"), "{error}");
    }

    /// Issue 34, finding 5: EXEC's output frames were not signed, so an impostor at a
    /// worker's address could feed the launcher output and an exit status. Frames
    /// without the token's MAC end the command with an error.
    #[tokio::test]
    async fn output_from_an_impostor_without_the_token_is_not_believed() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = listener.local_addr().unwrap().to_string();
        tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read, mut write) = stream.into_split();
            let mut read = BufReader::new(read);
            let _exec = auth::read_line(&mut read, MAX_LINE, READ_TIMEOUT).await;
            write.write_all(b"{\"nonce\":\"chosen\"}\n").await.unwrap();
            let _request = auth::read_line(&mut read, MAX_LINE, READ_TIMEOUT).await;
            frame(&mut write, STDOUT, b"forged output", None)
                .await
                .unwrap();
            frame(&mut write, EXIT, &0i32.to_be_bytes(), None)
                .await
                .unwrap();
        });
        let argv = ["orted".to_owned()];
        let error = run_remote(&endpoint, TOKEN, &argv)
            .await
            .expect_err("an impostor's frames are refused");
        assert!(error.to_string().contains("not signed"), "{error}");
    }

    #[test]
    fn open_mpi_quoting_becomes_an_argument_vector() {
        let words: Vec<String> = [
            " orted",
            "-mca",
            "ess",
            "\"env\"",
            "-mca",
            "orte_hnp_uri",
            "\"1.0;tcp://10.0.0.1:5000\"",
            "-mca",
            "plm_rsh_agent",
            "\"perfsweep rsh\"",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            split_command(&words).unwrap(),
            [
                "orted",
                "-mca",
                "ess",
                "env",
                "-mca",
                "orte_hnp_uri",
                "1.0;tcp://10.0.0.1:5000",
                "-mca",
                "plm_rsh_agent",
                "perfsweep rsh"
            ]
        );
        assert!(split_command(&["PATH=/x;".into(), "orted".into()]).is_err());
        assert!(split_command(&["\"open".into()]).is_err());
    }
}
