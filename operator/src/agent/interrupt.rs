//! The agent's stop signal. In a pod the agent is PID 1, which the kernel shields from
//! every signal it has no handler for: without one, deleting a pod waited out its whole
//! grace period and the tool ran on meanwhile (issue 23: a deleted client pod finished
//! its measurement and the benchmark was recorded Succeeded). With this handler the agent
//! ends its tool and reports [`super::Reason::Interrupted`] at once.

use std::future::Future;

/// A signal that tells the agent to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: the kubelet stopping the pod, or the local runner ending the run.
    Terminate,
    /// SIGINT: Ctrl-C of an agent run by hand.
    Interrupt,
}

impl Stop {
    pub fn name(self) -> &'static str {
        match self {
            Self::Terminate => "SIGTERM",
            Self::Interrupt => "SIGINT",
        }
    }

    /// The exit code of a process ended by this signal, as shells and the kubelet show
    /// it (128 + signal number).
    pub fn exit_code(self) -> u8 {
        match self {
            Self::Terminate => 128 + 15,
            Self::Interrupt => 128 + 2,
        }
    }
}

/// Installs the handlers now (a signal that arrives before the future is polled is not
/// lost) and resolves with the first stop signal. Where a handler cannot be installed the
/// signal keeps its default action, and the future never resolves for it.
pub fn stop_signal() -> impl Future<Output = Stop> + Send + 'static {
    use tokio::signal::unix::{SignalKind, signal};
    let handler = |kind: SignalKind, name: &str| match signal(kind) {
        Ok(handler) => Some(handler),
        Err(error) => {
            tracing::warn!(%error, "cannot handle {name}");
            None
        }
    };
    let mut terminate = handler(SignalKind::terminate(), "SIGTERM");
    let mut interrupt = handler(SignalKind::interrupt(), "SIGINT");
    async move {
        let terminated = async {
            match terminate.as_mut() {
                Some(handler) => handler.recv().await,
                None => std::future::pending().await,
            }
        };
        let interrupted = async {
            match interrupt.as_mut() {
                Some(handler) => handler.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = terminated => Stop::Terminate,
            _ = interrupted => Stop::Interrupt,
        }
    }
}
