//! `report_sections` in the agent build, which leaves the warehouse's SQL engine out: what
//! needs the warehouse says so, naming the build that has it. Everything else of `results
//! report` works unchanged.

// The same signatures as the warehouse build's, which await.
#![allow(clippy::unused_async)]

use std::path::Path;

use perfsweep_benchmarks::results::record::ResultRecord;
use perfsweep_benchmarks::results::report::ExtraSection;

/// The error of a command that needs the warehouse.
pub fn without_warehouse(what: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{what} needs the warehouse, which this perfsweep was built without (the agent \
         build, `--no-default-features`, as in the benchmark images): use the full \
         perfsweep (the default build, as in the operator image)"
    )
}

/// A publication's figures and the records of the runs behind them.
pub struct Published {
    pub records: Vec<ResultRecord>,
    pub section: ExtraSection,
    pub broken: usize,
}

pub fn published(_root: &Path, _name: &str) -> anyhow::Result<Published> {
    Err(without_warehouse("results report --publication"))
}

pub async fn what_changed(
    _sides: [(&Path, &str); 2],
    _records: &[ResultRecord],
    _into: &Path,
    _threshold_percent: f64,
) -> anyhow::Result<(Vec<ExtraSection>, bool)> {
    Err(without_warehouse("results report --baseline"))
}

pub async fn load(
    _dir: &Path,
    _warehouse: &Path,
    _publication: bool,
    _locations: &super::location::LocationArgs,
) -> anyhow::Result<()> {
    Err(without_warehouse("results upload --warehouse"))
}
