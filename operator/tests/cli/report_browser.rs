//! The HTML report of a node-pair sweep, opened in a real browser (headless Chromium
//! from Debian): it renders, the fleet verdict names the slow node, the heatmap is laid
//! out with a real size, and the screenshot shows it (its colours are on the page). The
//! screenshot is kept under `target/test-artifacts/`.

use crate::local_support;

use std::path::{Path, PathBuf};
use std::process::Command;

use local_support::{perfsweep, scratch, tool_or_skip};
use serde_json::json;

const NODES: [&str; 5] = ["node-a", "node-b", "node-c", "node-d", "node-e"];
const SLOW: &str = "node-c";
/// The heatmap's best and worst colours (viridis ends).
const BEST: [u8; 3] = [0xfd, 0xe7, 0x25];
const WORST: [u8; 3] = [0x44, 0x01, 0x54];

/// Records of an all-pairs IPerf sweep over five nodes, the pairs of one at 60%.
fn write_records(dir: &Path) {
    std::fs::create_dir_all(dir).expect("the records directory");
    for (i, server) in NODES.iter().enumerate() {
        for (j, client) in NODES.iter().enumerate().skip(i + 1) {
            let name = format!("fleet-{i}{j}-0");
            let mut rate = 9.4e9 * (1.0 + (i + j) as f64 * 0.003);
            if *server == SLOW || *client == SLOW {
                rate *= 0.6;
            }
            let record = json!({
                "schemaVersion": perfsweep_benchmarks::results::record::SCHEMA_VERSION,
                "runId": "20261125T120000Z-abcdef",
                "benchmark": {"kind": "IPerf", "name": name, "set": "fleet",
                    "benchmarkCaseId": format!("case{i}{j}"), "repetition": 0,
                    "permutation": {"placement.server.nodes": [server], "placement.client.nodes": [client]}},
                "workloadSpecDigest": format!("{:064}", i * 10 + j),
                "spec": {"duration": 10, "placement": {"server": {"nodes": [server]}, "client": {"nodes": [client]}},
                         "acceptance": [{"metric": "received_bits_per_second", "min": 5.0e9}]},
                "backend": "kubernetes",
                "environment": {"perfsweepVersion": "0.1.0", "hosts": [server, client],
                                "toolVersions": {"iperf3": "3.12"}},
                "startedAt": format!("2026-11-25T12:0{}:00Z", i),
                "finishedAt": format!("2026-11-25T12:0{}:12Z", i + 1),
                "outcome": {"status": "succeeded", "summary": format!("{:.2} Gbit/s", rate / 1e9),
                    "result": {},
                    "metrics": [{"name": "received_bits_per_second", "better": "higher", "value": rate}]},
            });
            std::fs::write(
                dir.join(format!("{name}.json")),
                serde_json::to_string_pretty(&record).expect("JSON"),
            )
            .expect("writing a record");
        }
    }
}

/// Headless Chromium with the flags that keep it off the network and out of the
/// profile, on `page`.
fn chromium(profile: &Path, extra: &[String], page: &Path) -> std::process::Output {
    let mut command = Command::new("chromium");
    command.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ]);
    command.arg(format!("--user-data-dir={}", profile.display()));
    command.args(extra);
    command.arg(format!("file://{}", page.display()));
    command.output().expect("chromium runs")
}

fn artifacts_dir() -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/test-artifacts");
    std::fs::create_dir_all(&dir).expect("target/test-artifacts");
    dir
}

#[test]
fn the_fleet_report_renders_in_chromium_with_a_visible_heatmap() {
    if !tool_or_skip("chromium", "chromium") {
        return;
    }
    let dir = scratch("report-browser");
    let records = dir.join("results");
    write_records(&records);
    let report = dir.join("report");
    let output = perfsweep()
        .args(["results", "report"])
        .arg(&records)
        .arg("--output")
        .arg(&report)
        .output()
        .expect("perfsweep runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    // The fleet fails (a suspect node): not accepted, exit 3 as `perfsweep run` exits.
    assert_eq!(output.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("suspect nodes: node-c"), "{stderr}");

    // The page measures its own heatmap after layout and writes the size into the DOM,
    // so --dump-dom shows what the browser laid out.
    let html = std::fs::read_to_string(report.join("report.html")).expect("report.html");
    let probe = report.join("probe.html");
    std::fs::write(
        &probe,
        html.replace(
            "</body>",
            "<script>const f=document.getElementById('fleet-heatmap-0');\
             const s=f&&f.querySelector('svg');const r=s?s.getBoundingClientRect():{width:0,height:0};\
             document.body.setAttribute('data-heatmap-size',Math.round(r.width)+'x'+Math.round(r.height));</script></body>",
        ),
    )
    .expect("probe page");
    let profile = dir.join("profile");
    let dom = chromium(&profile, &["--dump-dom".to_owned()], &probe);
    let dom_text = String::from_utf8_lossy(&dom.stdout);
    assert!(
        dom.status.success(),
        "{}",
        String::from_utf8_lossy(&dom.stderr)
    );
    assert!(
        dom_text.contains("FLEET FAILED: 1 suspect node(s)"),
        "{dom_text}"
    );
    let size = dom_text
        .split("data-heatmap-size=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("no heatmap size in the DOM: {dom_text}"));
    let (width, height) = size.split_once('x').expect("WxH");
    let (width, height): (u32, u32) = (
        width.parse().expect("a width"),
        height.parse().expect("a height"),
    );
    assert!(
        width > 200 && height > 200,
        "the heatmap is laid out at {size}"
    );

    let screenshot = artifacts_dir().join("fleet-report.png");
    let _ = std::fs::remove_file(&screenshot);
    let shot = chromium(
        &profile,
        &[
            format!("--screenshot={}", screenshot.display()),
            "--window-size=1280,1400".to_owned(),
        ],
        &report.join("report.html"),
    );
    assert!(
        shot.status.success(),
        "{}",
        String::from_utf8_lossy(&shot.stderr)
    );
    let pixels = decode(&screenshot);
    let count = |colour: [u8; 3]| pixels.iter().filter(|p| close(**p, colour)).count();
    let (best, worst) = (count(BEST), count(WORST));
    // The heatmap's cells are tens of pixels wide: thousands of pixels of each end.
    assert!(
        best > 1000 && worst > 100,
        "heatmap colours on the screenshot: best {best}, worst {worst}"
    );
    let white = count([255, 255, 255]);
    assert!(white < pixels.len() * 98 / 100, "the screenshot is blank");
    eprintln!("screenshot kept at {}", screenshot.display());
}

fn close(a: [u8; 3], b: [u8; 3]) -> bool {
    a.iter().zip(&b).all(|(x, y)| x.abs_diff(*y) <= 6)
}

/// The screenshot's RGB pixels.
fn decode(path: &Path) -> Vec<[u8; 3]> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut reader = png::Decoder::new(std::io::BufReader::new(file))
        .read_info()
        .expect("a PNG");
    let mut buffer = vec![0; reader.output_buffer_size()];
    let info = reader.next_frame(&mut buffer).expect("a frame");
    let channels = info.color_type.samples();
    buffer[..info.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect()
}
