//! `perfsweep results` over the records of a real local iperf3 sweep: list, statistics,
//! CSV, SVG, and a comparison that finds a planted regression and nothing else.

use crate::local_support;

use local_support::{perfsweep, run_local_sweep, scratch, tool_or_skip};

use std::path::Path;
use std::process::Output;

use serde_json::Value;

const SWEEP: &str = r"
apiVersion: perfsweep.io/v1alpha1
kind: BenchmarkSet
metadata:
  name: results-iperf
spec:
  template:
    apiVersion: perfsweep.io/v1alpha1
    kind: IPerf
    spec:
      duration: 1
      port: 15311
  repetitions: 3
  permutations:
    product:
      streams: [1, 2]
";

fn results(args: &[&str]) -> Output {
    let output = perfsweep()
        .arg("results")
        .args(args)
        .output()
        .expect("perfsweep runs");
    eprintln!(
        "perfsweep results {args:?}\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

fn text(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// A copy of `from` in which the streams=2 case's throughput drops by 90%.
fn plant_regression(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("copy directory");
    for entry in std::fs::read_dir(from).expect("records") {
        let file = entry.expect("entry").path();
        if file.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let mut record: Value =
            serde_json::from_str(&std::fs::read_to_string(&file).expect("record")).expect("JSON");
        if record["benchmark"]["permutation"]["streams"] == 2 {
            let outcome = &mut record["outcome"];
            for metric in outcome["metrics"].as_array_mut().expect("metrics recorded") {
                if metric["name"] == "received_bits_per_second" {
                    metric["value"] = (metric["value"].as_f64().unwrap() / 10.0).into();
                }
            }
        }
        std::fs::write(
            to.join(file.file_name().unwrap()),
            serde_json::to_string(&record).unwrap(),
        )
        .expect("copy written");
    }
}

#[test]
fn results_of_a_local_sweep() {
    if !tool_or_skip("iperf3", "iperf3") {
        return;
    }
    let dir = scratch("results");
    let (out, _) = run_local_sweep(&dir, "run", SWEEP);

    // Records carry metrics, the network mode and the artifact manifest digest.
    let one = std::fs::read_dir(&out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let record: Value = serde_json::from_str(&std::fs::read_to_string(one).unwrap()).unwrap();
    assert_eq!(
        record["outcome"]["metrics"][0]["name"],
        "received_bits_per_second"
    );
    assert_eq!(record["outcome"]["metrics"][0]["better"], "higher");
    assert_eq!(record["environment"]["network"], "pod");
    assert_eq!(
        record["artifactManifestDigest"].as_str().map(str::len),
        Some(64)
    );

    let list = results(&["list", path(&out)]);
    assert!(list.status.success());
    assert_eq!(text(&list).lines().count(), 1 + 6);
    assert!(text(&list).contains("received_bits_per_second = "));

    let show = results(&["show", "--headline", path(&out)]);
    assert!(show.status.success());
    let show = text(&show);
    assert!(show.contains("streams=1") && show.contains("streams=2"));
    assert_eq!(show.lines().count(), 1 + 2, "one headline row per case");

    let csv_path = dir.join("results.csv");
    assert!(
        results(&["export", path(&out), "-o", path(&csv_path)])
            .status
            .success()
    );
    let csv = std::fs::read_to_string(&csv_path).unwrap();
    assert!(csv.starts_with("run_id,set,benchmark_case_id,kind,"));
    assert!(
        csv.lines()
            .filter(|l| l.contains(",received_bits_per_second,"))
            .count()
            == 6
    );

    let svg_path = dir.join("plot.svg");
    assert!(
        results(&[
            "plot",
            path(&out),
            "--parameter",
            "streams",
            "-o",
            path(&svg_path)
        ])
        .status
        .success()
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    assert!(svg.starts_with("<svg") && svg.matches("<circle").count() == 2);
    let both = dir.join("both.svg");
    let plotted = results(&[
        "plot",
        path(&out),
        "--parameter",
        "streams",
        "--format",
        "both",
        "-o",
        path(&both),
    ]);
    assert!(
        plotted.status.success(),
        "{}",
        String::from_utf8_lossy(&plotted.stderr)
    );
    assert!(
        std::fs::read_to_string(dir.join("both.svg"))
            .unwrap()
            .starts_with("<svg")
    );
    let png = std::fs::read(dir.join("both.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && &png[12..16] == b"IHDR");

    // Same records on both sides: nothing changed (exit 0).
    let same = results(&["compare", path(&out), path(&out)]);
    assert!(same.status.success());
    assert!(text(&same).contains("0 improved, 0 regressed"));

    // Drop streams=2's throughput by 90% in a copy: that case regressed, the other did
    // not change. Real loopback runs on a busy machine can be noisy (CV of 25% seen on
    // 2 cores under a parallel build); with 3 repetitions Welch's test then lacks the
    // power to call even a 90% drop, and the honest verdict is `unstable`.
    let worse = dir.join("worse");
    plant_regression(&out, &worse);
    let compared = results(&["compare", "--json", path(&out), path(&worse)]);
    let comparison: Value = serde_json::from_slice(&compared.stdout).expect("JSON comparison");
    let changes = comparison["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2);
    let mut regressed = false;
    for change in changes {
        let verdict = change["verdict"].as_str().unwrap();
        if change["permutation"] == "streams=2" {
            let cv = change["baseline"]["cv"].as_f64().unwrap();
            if cv <= 0.3 {
                assert_eq!(verdict, "regressed", "{change}");
            } else {
                assert!(matches!(verdict, "regressed" | "unstable"), "{change}");
            }
            regressed = verdict == "regressed";
        } else {
            assert!(
                matches!(verdict, "noSignificantChange" | "unstable"),
                "{change}"
            );
            assert_eq!(change["pValue"], 1.0);
        }
    }
    assert_eq!(compared.status.code(), Some(i32::from(regressed)));
    let _ = std::fs::remove_dir_all(&dir);
}
