//! How fast large sweeps go: expanding and validating a 10,000-child BenchmarkSet, and
//! the operator driving a 1,000-child set against the API double (wall time and API
//! requests per child). Prints figures; asserts nothing about time.
//!
//! `cargo bench -p perfsweep --bench sweep` (or `cargo bench --profile dev -p perfsweep
//! --bench sweep` to reuse a debug build: the request counts are the same, times slower;
//! `-- whole-operator` runs only the 1,000-child sweep with the benchmark controllers)

#[path = "../tests/support/mod.rs"]
mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::runtime::controller;
use perfsweep::controller::{Context, Settings, benchmarkset};
use perfsweep_benchmarks::set::{self, BenchmarkSet};
use perfsweep_testkit::{ApiDouble, Gvr, RecordedRequest};
use serde_json::{Value, json};
use support::{
    IPERFS, NS, Operator, SETS, double_with_crds, expected_names, set_phase, set_status, wait_until,
};

/// Runs per expansion case (after one warm-up run that also compiles the schemas).
const RUNS: usize = 5;
/// How long the operator may take for each phase of the 1,000-child sweep: generous,
/// for an unoptimised build on a loaded machine (a figure, not a limit).
const SWEEP_TIMEOUT: Duration = Duration::from_mins(30);

fn main() {
    // `-- whole-operator`: only the sweep with the benchmark controllers running.
    let whole_only = std::env::args().any(|arg| arg == "whole-operator");
    // `-- short`: every case at a tenth of its size or less, so that CI runs them all
    // (a bench that can no longer finish is seen the day it breaks).
    let short = std::env::args().any(|arg| arg == "short");
    let size = if short { 100 } else { 1000 };
    if !whole_only && short {
        println!("== expand + validate (parse_object + set::expand), {RUNS} runs each ==");
        expansion_case("10 streams × 100 durations × 1 repetition", 10, 100, 1);
    } else if !whole_only {
        println!("== expand + validate (parse_object + set::expand), {RUNS} runs each ==");
        expansion_case("100 streams × 100 durations × 1 repetition", 100, 100, 1);
        expansion_case("50 streams × 50 durations × 4 repetitions", 50, 50, 4);
        expansion_case("100 streams × 10 durations × 1 repetition", 100, 10, 1);
    }

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime");
    if !whole_only {
        runtime.block_on(operator_sweep(size, Mode::SetControllerAlone));
    }
    runtime.block_on(operator_sweep(size, Mode::WholeOperator));
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    /// Only the BenchmarkSet controller: what the set itself costs.
    SetControllerAlone,
    /// `perfsweep::controller::run`: the benchmark controllers also run every child
    /// (pods, services, podgroups; the double has no kubelet, so pods never start).
    WholeOperator,
}

/// Whatever runs the controllers; stops them when dropped.
enum Running {
    /// Held for its `Drop`, which aborts the operator.
    Operator {
        _operator: Operator,
    },
    Tasks(Vec<tokio::task::JoinHandle<()>>),
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Self::Tasks(tasks) = self {
            for task in tasks {
                task.abort();
            }
        }
    }
}

fn start(double: &ApiDouble, mode: Mode) -> Running {
    match mode {
        Mode::WholeOperator => Running::Operator {
            _operator: Operator::start(double, "bench"),
        },
        Mode::SetControllerAlone => {
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
            // The set controller creates children only of kinds the API server serves,
            // which discovery tells (the whole operator runs it too): without it the set
            // waited at "every child created" for ever.
            let discovery = tokio::spawn(perfsweep::controller::served::follow(
                client.clone(),
                ctx.served.clone(),
                settings.crd_recheck,
                std::future::pending(),
            ));
            let controller = benchmarkset::controller(&ctx, &settings)
                .with_config(controller::Config::default().debounce(settings.debounce))
                .run(
                    benchmarkset::reconcile_guarded,
                    benchmarkset::error_policy_guarded,
                    ctx,
                )
                .for_each(|_| async {});
            Running::Tasks(vec![tokio::spawn(controller), discovery])
        }
    }
}

fn sweep_object(name: &str, streams: u32, durations: u32, repetitions: u32) -> Value {
    json!({
        "apiVersion": "perfsweep.io/v1alpha1",
        "kind": "BenchmarkSet",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "template": {"apiVersion": "perfsweep.io/v1alpha1", "kind": "IPerf", "spec": {}},
            "repetitions": repetitions,
            "permutations": {"product": {
                "streams": (1..=streams).collect::<Vec<_>>(),
                "duration": (1..=durations).collect::<Vec<_>>(),
            }},
            "maxParallel": streams * durations * repetitions,
        },
    })
}

fn expansion_case(label: &str, streams: u32, durations: u32, repetitions: u32) {
    let object = sweep_object("sweep", streams, durations, repetitions);
    let run = || {
        let start = Instant::now();
        let set = set::parse_object(&object).expect("the sweep is a valid BenchmarkSet");
        let expansion = set::expand("sweep", &set.spec).expect("the sweep expands");
        (start.elapsed(), expansion.children.len())
    };
    let (warm_up, children) = run();
    let mut times: Vec<Duration> = (0..RUNS).map(|_| run().0).collect();
    times.sort();
    let (min, median) = (times[0], times[RUNS / 2]);
    println!(
        "{label}: {children} children ({} permutations validated); warm-up {warm_up:.2?}, min {min:.2?}, median {median:.2?}, {:.0} children/s (median)",
        streams * durations,
        children as f64 / median.as_secs_f64()
    );
}

async fn operator_sweep(size: u32, mode: Mode) {
    println!("\n== {mode:?} against the API double: a {size}-child set, maxParallel {size} ==");
    let double = double_with_crds().await;
    let _running = start(&double, mode);
    let object = sweep_object("bench", 100, size / 100, 1);
    let set: BenchmarkSet = serde_json::from_value(object.clone()).expect("a BenchmarkSet");
    let expected = expected_names(&set);
    assert_eq!(expected.len(), size as usize);

    // Let the controllers start their watches, so the timing below is the sweep's alone.
    settle(&double).await;
    let startup = request_counts(&double.requests());
    double.clear_requests();

    // Created directly in the store (not logged): every request below is the operator's.
    let start = Instant::now();
    double.create(&SETS, object).expect("creating the set");
    let all_pending = "P".repeat(size as usize);
    wait_until(SWEEP_TIMEOUT, "every child created", || {
        let status = set_status(&double, "bench");
        if status["total"] == size && status["children"] == all_pending.as_str() {
            Ok(())
        } else {
            Err(format!(
                "total {}, {} created",
                status["total"],
                status["children"]
                    .as_str()
                    .map_or(0, |c| c.matches('P').count())
            ))
        }
    })
    .await;
    let created_in = start.elapsed();
    let created = double.list(&IPERFS, Some(NS)).len();
    // Count the reconciles the creates themselves trigger, before anything finishes.
    settle(&double).await;
    let creating = double.requests();
    println!(
        "set created → {created} children exist and status.total = {size}: {created_in:.2?} ({:.0} children/s)",
        f64::from(size) / created_in.as_secs_f64()
    );
    double.clear_requests();

    let start = Instant::now();
    for name in &expected {
        set_phase(&double, name, "Succeeded");
    }
    let marked_in = start.elapsed();
    // The sweep's own timeout, not the tests' short one: an unoptimised build (`cargo
    // bench --profile dev`) finishes a 1,000-child sweep too, only more slowly.
    wait_until(SWEEP_TIMEOUT, "the set Succeeded", || {
        match set_status(&double, "bench")["phase"].as_str() {
            Some("Succeeded") => Ok(()),
            phase => Err(format!("phase {phase:?}")),
        }
    })
    .await;
    let finished_in = start.elapsed();
    println!(
        "all children marked Succeeded (direct store patches, {marked_in:.2?}) → set Succeeded: {finished_in:.2?}"
    );
    // Each benchmark's own cleanup (its gang's PodGroup deleted) goes on after the set is
    // Succeeded: counted whole, not cut off where the set's phase happened to land.
    wait_until(SWEEP_TIMEOUT, "every PodGroup deleted", || {
        match double.list(&Gvr::PODGROUPS, Some(NS)).len() {
            0 => Ok(()),
            left => Err(format!("{left} PodGroups left")),
        }
    })
    .await;
    // Count the trailing reconciles too (the last status write triggers one).
    settle(&double).await;
    let finishing = double.requests();

    report("operator start-up (before the set exists)", &startup, None);
    report("creating", &request_counts(&creating), Some(size));
    report("finishing", &request_counts(&finishing), Some(size));
    let mut all = creating.clone();
    all.extend(finishing.iter().cloned());
    report("creating + finishing", &request_counts(&all), Some(size));
    for (phase, log) in [("creating", &creating), ("finishing", &finishing)] {
        let status_writes = log
            .iter()
            .filter(|r| r.verb == "patch" && r.rbac_resource() == "benchmarksets/status")
            .count();
        // Every watch's initial list happened at start-up (counted there): the stores
        // are primed before the set exists, and no watch expires during the sweep, so
        // every list below was issued by a reconcile.
        let lists: Vec<String> = log
            .iter()
            .filter(|r| r.verb == "list")
            .map(|r| {
                format!(
                    "{} {}",
                    r.rbac_resource(),
                    r.namespace.as_deref().unwrap_or("(all namespaces)")
                )
            })
            .collect();
        println!(
            "{phase}: {status_writes} set status writes; {} list requests issued by reconciles{}",
            lists.len(),
            if lists.is_empty() {
                String::new()
            } else {
                format!(" ({})", summarize(&lists))
            }
        );
    }
}

/// `what ×count, …` of a list of request descriptions.
fn summarize(requests: &[String]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for request in requests {
        *counts.entry(request.as_str()).or_default() += 1;
    }
    counts
        .iter()
        .map(|(what, count)| format!("{what} ×{count}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Waits until the operator has made no request for a second (at most a minute).
async fn settle(double: &ApiDouble) {
    let deadline = Instant::now() + Duration::from_mins(1);
    let mut seen = double.request_count();
    while Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = double.request_count();
        if now == seen {
            return;
        }
        seen = now;
    }
}

/// (made by, verb, resource) → count.
type Counts = BTreeMap<(&'static str, String, String), usize>;

fn request_counts(log: &[RecordedRequest]) -> Counts {
    let mut counts = Counts::new();
    for request in log {
        let resource = if request.is_resource_request() {
            request.rbac_resource()
        } else {
            format!("(non-resource) {}", request.path)
        };
        *counts
            .entry((made_by(request), request.verb.clone(), resource))
            .or_default() += 1;
    }
    counts
}

/// Which controller makes such a request: `set`, `benchmark`, or `either` (events,
/// start-up lists and watches of the children, discovery).
fn made_by(request: &RecordedRequest) -> &'static str {
    let resource = request.rbac_resource();
    match (request.verb.as_str(), resource.as_str()) {
        (_, "benchmarksets" | "benchmarksets/status") | ("create" | "delete", "iperfs") => "set",
        ("list", "iperfs") if request.namespace.is_some() => "set",
        ("get", "iperfs")
        | (_, "iperfs/status" | "pods" | "pods/log" | "services" | "podgroups") => "benchmark",
        _ => "either",
    }
}

fn report(phase: &str, counts: &Counts, children: Option<u32>) {
    let total: usize = counts.values().sum();
    match children {
        Some(n) => println!(
            "\n{phase}: {total} API requests, {:.3} per child",
            total as f64 / f64::from(n)
        ),
        None => println!("\n{phase}: {total} API requests"),
    }
    for ((by, verb, resource), count) in counts {
        match children {
            Some(n) => println!(
                "  {by:<9} {verb:<6} {resource:<32} {count:>6}  ({:.3}/child)",
                *count as f64 / f64::from(n)
            ),
            None => println!("  {by:<9} {verb:<6} {resource:<32} {count:>6}"),
        }
    }
}
