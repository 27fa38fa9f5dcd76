//! Checks a plan runs as setup steps (`perfsweep require-…`), built into the agent so
//! their failures carry a precise reason. The local backend runs them before it starts
//! any process, so a missing device or tool is reported before anything starts.

use std::path::Path;

use perfsweep_benchmarks::execution::plan::{AGENT_PROGRAM, Command};
use perfsweep_benchmarks::kinds::mpi::{PROGRAM_ALTERNATIVES, REQUIRE_PROGRAM};
use perfsweep_benchmarks::kinds::rdma::plan::REQUIRE_RDMA_DEVICE;

use super::{Failure, Reason};

/// Where the kernel lists RDMA devices (what `ibv_devices` reads).
pub const RDMA_SYSFS: &str = "/sys/class/infiniband";

/// `Some(outcome)` when `command` is a built-in check, run here; `None` otherwise.
pub fn run(command: &Command, argv: &[String]) -> Option<Result<(), Failure>> {
    if command.program != AGENT_PROGRAM {
        return None;
    }
    match argv {
        [check, rest @ ..] if check == REQUIRE_RDMA_DEVICE => Some(require_rdma_device(
            Path::new(RDMA_SYSFS),
            rest.first().map(String::as_str),
        )),
        [check, program, hint] if check == REQUIRE_PROGRAM => Some(require_program(program, hint)),
        _ => None,
    }
}

/// Fails with `NoRdmaDevice` unless `sysfs` lists an RDMA device (`device`, if named).
pub fn require_rdma_device(sysfs: &Path, device: Option<&str>) -> Result<(), Failure> {
    let mut present: Vec<String> = std::fs::read_dir(sysfs)
        .map(|entries| {
            entries
                .filter_map(std::result::Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    present.sort();
    if present.is_empty() {
        return Err(Failure::plain(
            Reason::NoRdmaDevice,
            format!(
                "no RDMA device: {} is empty or missing (ibv_devices would list none); give the benchmark an RDMA device (an RDMA NIC on this host, or on Kubernetes an RDMA shared device or SR-IOV VF in spec.resources)",
                sysfs.display()
            ),
        ));
    }
    match device {
        Some(device) if !present.iter().any(|p| p == device) => Err(Failure::plain(
            Reason::NoRdmaDevice,
            format!(
                "RDMA device {device} not found; present: {}",
                present.join(", ")
            ),
        )),
        _ => Ok(()),
    }
}

/// `program` may list alternatives ([`PROGRAM_ALTERNATIVES`]): any one will do.
fn require_program(program: &str, hint: &str) -> Result<(), Failure> {
    let alternatives: Vec<&str> = program.split(PROGRAM_ALTERNATIVES).collect();
    if alternatives.iter().any(|p| find_on_path(p)) {
        return Ok(());
    }
    let missing = match alternatives.as_slice() {
        [one] => format!("{one} not found on PATH"),
        several => format!("none of {} found on PATH", several.join(", ")),
    };
    Err(Failure::plain(
        Reason::ToolMissing,
        format!("{missing}: {hint}"),
    ))
}

/// Whether `program` is an executable file on `PATH` (or at that path).
pub fn find_on_path(program: &str) -> bool {
    if program.contains('/') {
        return Path::new(program).is_file();
    }
    std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdma_devices_are_required_and_named() {
        let dir = std::env::temp_dir().join(format!("perfsweep-rdma-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let error = require_rdma_device(&dir, None).unwrap_err();
        assert_eq!(error.reason, "NoRdmaDevice");
        std::fs::create_dir_all(dir.join("mlx5_0")).unwrap();
        assert!(require_rdma_device(&dir, None).is_ok());
        assert!(require_rdma_device(&dir, Some("mlx5_0")).is_ok());
        let error = require_rdma_device(&dir, Some("mlx5_1")).unwrap_err();
        assert!(
            error.message.contains("present: mlx5_0"),
            "{}",
            error.message
        );
        std::fs::remove_dir_all(dir).ok();
    }

    #[test]
    fn missing_programs_say_how_to_get_them() {
        let error = require_program("surely-not-installed-xyz", "build it").unwrap_err();
        assert_eq!(error.reason, "ToolMissing");
        assert!(error.message.ends_with("build it"));
        assert!(require_program("sh", "").is_ok());
    }

    #[test]
    fn any_one_of_the_alternatives_will_do() {
        assert!(require_program("surely-not-installed-xyz|sh", "").is_ok());
        let error = require_program("not-here-a|not-here-b", "install one").unwrap_err();
        assert_eq!(error.reason, "ToolMissing");
        assert!(
            error
                .message
                .starts_with("none of not-here-a, not-here-b found on PATH"),
            "{}",
            error.message
        );
    }
}
