//! `perfsweep crds`.

use std::path::Path;
use std::process::ExitCode;

use anyhow::Context;
use perfsweep_benchmarks::crds;

pub fn run(output_dir: Option<&Path>) -> anyhow::Result<ExitCode> {
    let all = crds::all();
    match output_dir {
        None => {
            print!(
                "{}",
                perfsweep_benchmarks::formats::yaml::to_multi_document(&all)?
            );
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            for crd in &all {
                let path = dir.join(crds::file_name(crd));
                std::fs::write(&path, crds::to_yaml(crd)?)
                    .with_context(|| format!("cannot write {}", path.display()))?;
                eprintln!("wrote {}", path.display());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
