//! Whole-fleet acceptance on paper and in simulation: the all-pairs plan of a 1,000-node
//! fleet (rounds, pairs per round, the set's status size at its largest, the projected
//! wall time for a test duration), the expansion and verdict costs, and the API requests
//! per child of the set controller driving a smaller fleet round by round against the
//! API double. Prints figures; asserts only the plan's shape.
//!
//! `cargo bench -p perfsweep --bench fleet_plan` (`FLEET_TEST_SECONDS=30` for another
//! test duration).

#[path = "../tests/support/mod.rs"]
mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::runtime::controller;
use perfsweep::controller::{Context, Settings, benchmarkset};
use perfsweep_benchmarks::api::status::{Phase, condition};
use perfsweep_benchmarks::judging::fleet::{self, OutlierRule, PairResult};
use perfsweep_benchmarks::judging::metrics::Better;
use perfsweep_benchmarks::set::status::{self as set_status, ChildState, RoundProgress, SetPhase};
use perfsweep_benchmarks::set::summary::{CaseSummary, ResultsSummary};
use perfsweep_benchmarks::set::{self, BenchmarkSetSpec, BenchmarkSetStatus};
use serde_json::json;
use support::{
    SETS, create_node, double_with_crds, name_of, node_pair_set, set_phase, set_status, wait_until,
};

const FLEET: usize = 1000;
/// The fleet the expansion is timed on (its per-child cost is projected to `FLEET`).
const EXPANDED: usize = 200;
/// The fleet the set controller drives against the API double.
const SIMULATED: usize = 30;
const STATUS_LIMIT: usize = 256 * 1024;

fn main() {
    let test_seconds: f64 = std::env::var("FLEET_TEST_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0);
    plan(test_seconds);
    expansion();
    status_size();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    runtime.block_on(simulate(SIMULATED));
}

fn plan(test_seconds: f64) {
    println!("== the all-pairs plan of {FLEET} nodes ==");
    let start = Instant::now();
    let rounds = set::rounds::all_pairs(FLEET);
    let planned_in = start.elapsed();
    let pairs: usize = rounds.iter().map(Vec::len).sum();
    let smallest = rounds.iter().map(Vec::len).min().unwrap_or(0);
    let largest = rounds.iter().map(Vec::len).max().unwrap_or(0);
    assert_eq!(
        (rounds.len(), smallest, largest),
        (FLEET - 1, FLEET / 2, FLEET / 2)
    );
    assert_eq!(pairs, FLEET * (FLEET - 1) / 2);
    println!(
        "rounds: {}; pairs per round: {smallest}..{largest}; pairs: {pairs}; planned in {planned_in:.2?}",
        rounds.len()
    );
    println!(
        "projected wall time for a {test_seconds} s test (per round: the test plus pod start-up and result collection):"
    );
    for overhead in [0.0, 5.0, 15.0] {
        let seconds = rounds.len() as f64 * (test_seconds + overhead);
        println!(
            "  overhead {overhead:>4} s/round: {} in rounds, against {} for the pairs one after another",
            hours(seconds),
            hours(pairs as f64 * (test_seconds + overhead))
        );
    }
    let ring = set::rounds::ring(FLEET);
    println!(
        "Ring screen: {} pairs in {} rounds = {}",
        ring.iter().map(Vec::len).sum::<usize>(),
        ring.len(),
        hours(ring.len() as f64 * test_seconds)
    );
}

fn hours(seconds: f64) -> String {
    if seconds >= 86_400.0 {
        format!("{:.1} days", seconds / 86_400.0)
    } else {
        format!("{:.2} h", seconds / 3600.0)
    }
}

fn node_names(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!("gpu-node-{i:04}.rack-{:02}.example", i / 40))
        .collect()
}

fn expansion() {
    println!("\n== expanding and validating an all-pairs IPerf set ==");
    let spec: BenchmarkSetSpec = serde_json::from_value(json!({
        "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {"duration": 10}},
        "permutations": {"nodePairs": {"selector": {"matchLabels": {"bench": "yes"}}}},
        "maxChildren": 1_000_000,
    }))
    .expect("a set spec");
    let nodes = node_names(EXPANDED);
    let start = Instant::now();
    let expansion = set::expand_with_nodes("fleet", &spec, Some(&nodes)).expect("expands");
    let took = start.elapsed();
    let children = expansion.children.len();
    let per_child = took.as_secs_f64() / children as f64;
    let full = FLEET * (FLEET - 1) / 2;
    println!(
        "{EXPANDED} nodes: {children} children in {} rounds, {took:.2?} ({:.1} µs/child); projected for {FLEET} nodes ({full} children): {:.1} s",
        expansion.rounds,
        per_child * 1e6,
        per_child * full as f64
    );
}

/// The status of a 1,000-node set at its largest: half-way, a round running, every
/// list in it at its cap, a fleet verdict with a slow node and a few bad links.
fn status_size() {
    println!("\n== the set's status at {FLEET} nodes ==");
    let nodes = node_names(FLEET);
    let rounds = set::rounds::all_pairs(FLEET);
    let total = FLEET * (FLEET - 1) / 2;
    let half = rounds.len() / 2;
    let done: usize = rounds[..half].iter().map(Vec::len).sum();
    let mut states = Vec::with_capacity(total);
    for (index, round) in rounds.iter().enumerate() {
        for _ in round {
            states.push(match index {
                i if i < half => ChildState::Created {
                    phase: if states.len() % 997 == 0 { Phase::Failed } else { Phase::Succeeded },
                    message: Some("the client exited with code 1: iperf3: error - unable to connect to server: Connection refused".into()),
                },
                i if i == half => ChildState::Created {
                    phase: Phase::Running,
                    message: None,
                },
                _ => ChildState::NotCreated,
            });
        }
    }
    let names: Vec<String> = (0..total)
        .map(|i| format!("fleet-{:010x}-0", i * 7919))
        .collect();
    let summary = set_status::summarize(names.iter().map(String::as_str).zip(&states));

    // The verdict over the finished half, one node 40% slow and three bad links.
    let mut results = Vec::with_capacity(done);
    // Three bad links among the pairs already run (none with the slow node).
    let bad_links: Vec<(usize, usize)> = rounds[..half]
        .iter()
        .flatten()
        .copied()
        .filter(|&(a, b)| a != 123 && b != 123)
        .step_by(50_000)
        .take(3)
        .collect();
    for round in &rounds[..half] {
        for &(a, b) in round {
            let mut value = 9.4e9 * (1.0 + ((a * 31 + b * 17) % 11) as f64 * 0.002);
            if a == 123 || b == 123 {
                value *= 0.6;
            }
            if bad_links.contains(&(a, b)) {
                value *= 0.5;
            }
            results.push(PairResult {
                nodes: [nodes[a].clone(), nodes[b].clone()],
                value: Some(value),
                accepted: Some(value >= 9.0e9),
                evidence: None,
            });
        }
    }
    let start = Instant::now();
    let verdict = fleet::judge(
        "received_bits_per_second",
        "bit/s",
        Better::Higher,
        OutlierRule::default(),
        &results,
    );
    let judged_in = start.elapsed();
    let fleet_summary = verdict.summary();
    println!(
        "fleet verdict over {} pairs in {judged_in:.2?}: {} suspect nodes, {} suspect links, {} outlier pairs (one node made 40% slow, three links 50%)",
        results.len(),
        fleet_summary.suspect_nodes,
        fleet_summary.suspect_links,
        fleet_summary.outlier_pairs
    );

    let now = Timestamp::now();
    let status = BenchmarkSetStatus {
        phase: Some(SetPhase::Running),
        observed_generation: Some(1),
        permutation_count: Some(total as u32),
        total: total as u32,
        pending: summary.pending,
        running: summary.running,
        succeeded: summary.succeeded,
        failed: summary.failed,
        conditions: ["Valid", "Progressing", "Complete", "Accepted"]
            .iter()
            .map(|t| {
                condition(
                    t,
                    "True",
                    "Reason",
                    "a message of about eighty characters, as the controller writes them..",
                    Some(1),
                    now,
                )
            })
            .collect(),
        children: Some(summary.children),
        failures: summary.failures,
        started_at: Some(Time(now)),
        finished_at: None,
        summary: Some(ResultsSummary {
            cases: done as u32,
            unstable: done as u32,
            max_cv: 0.05,
            per_case: (0..set::summary::CASES_LISTED)
                .map(|i| CaseSummary {
                    case_id: format!("{:010x}", i * 7919),
                    metric: "received_bits_per_second".into(),
                    count: 1,
                    mean: 9.41e9,
                    ci95: None,
                    cv: None,
                    unstable: true,
                })
                .collect(),
            note: Some("the first 100 cases of 249500".into()),
        }),
        acceptance: None,
        nodes,
        rounds: Some(RoundProgress {
            total: rounds.len() as u32,
            current: half as u32,
        }),
        fleet: Some(fleet_summary),
        node_labels: std::collections::BTreeMap::new(),
        per_node: None,
    };
    let bytes = serde_json::to_vec(&status)
        .expect("the status serializes")
        .len();
    let children_bytes = status.children.as_deref().map_or(0, str::len);
    println!(
        "status: {bytes} bytes ({:.1} KiB; limit {} KiB: {}); of which children (run-length encoded above {} children) {children_bytes} bytes, node list {} bytes",
        bytes as f64 / 1024.0,
        STATUS_LIMIT / 1024,
        if bytes < STATUS_LIMIT {
            "under"
        } else {
            "OVER"
        },
        set_status::CHILDREN_LISTED_PLAIN,
        serde_json::to_vec(&status.nodes).map_or(0, |v| v.len()),
    );
}

/// The set controller alone drives an all-pairs set of `n` nodes, the bench marking
/// children Succeeded as they appear: API requests per child and per round.
async fn simulate(n: usize) {
    let children = n * (n - 1) / 2;
    println!(
        "\n== the set controller driving {n} nodes ({children} children, {} rounds) against the API double ==",
        n - 1
    );
    let double = double_with_crds().await;
    for i in 0..n {
        create_node(&double, &format!("node-{i:03}"), json!({"bench": "yes"}));
    }
    let client = double.client();
    let settings = Settings {
        namespace: None,
        health_addr: "127.0.0.1:0".parse().expect("a socket address"),
        debounce: Duration::from_millis(50),
        instance: Some("bench".into()),
        defaults: perfsweep_benchmarks::kinds::common::ClusterDefaults::default(),
        export: perfsweep::controller::benchmark::export::ExportPolicy::default(),
        max_children_per_set: perfsweep::controller::DEFAULT_MAX_CHILDREN_PER_SET,
        crd_recheck: perfsweep::controller::served::DEFAULT_RECHECK,
    };
    let ctx = Arc::new(Context::new(client.clone(), settings.instance.clone()));
    let task = tokio::spawn(
        benchmarkset::controller(&ctx, &settings)
            .with_config(controller::Config::default().debounce(settings.debounce))
            .run(
                benchmarkset::reconcile_guarded,
                benchmarkset::error_policy_guarded,
                ctx,
            )
            .for_each(|_| async {}),
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    double.clear_requests();
    let start = Instant::now();
    double
        .create(&SETS, node_pair_set("fleet", 1))
        .expect("creating the set");
    let mut most_at_once = 0;
    wait_until(Duration::from_mins(10), "the set to finish", || {
        let live: Vec<String> = support::children(&double, "fleet")
            .iter()
            .filter(|c| c["status"]["phase"] != "Succeeded")
            .map(|c| name_of(c).to_owned())
            .collect();
        most_at_once = most_at_once.max(live.len());
        for name in &live {
            set_phase(&double, name, "Succeeded");
        }
        match set_status(&double, "fleet")["phase"].as_str() {
            Some("Succeeded") => Ok(()),
            _ => Err(format!("{} live", live.len())),
        }
    })
    .await;
    let took = start.elapsed();
    // The bench reads and patches the store directly: every logged request is the
    // controller's.
    let operator = double.requests();
    println!(
        "finished in {took:.2?} ({:.0} ms per round); at most {most_at_once} children live at once (a round is {}); {} API requests by the set controller, {:.2} per child",
        took.as_secs_f64() * 1000.0 / (n - 1) as f64,
        n / 2,
        operator.len(),
        operator.len() as f64 / children as f64
    );
    task.abort();
}
