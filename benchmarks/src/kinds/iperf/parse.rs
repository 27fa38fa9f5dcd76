//! Parser for `iperf3 --json` client output.
//!
//! Direction vocabulary: iperf3's `sum_sent` is measured at the side that
//! *sends* the data and `sum_received` at the side that *receives* it. In a
//! normal run the client sends; with `-R` (reverse) the server sends; with
//! `--bidir` the client→server flow is in `sum_sent`/`sum_received` and the
//! server→client flow in `sum_sent_bidir_reverse`/`sum_received_bidir_reverse`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::execution::parse_error::{
    JsonAt, ParseError, ensure_ran_as_asked, extract_json_document, fmt, line_of_value,
};

/// Transport protocol of an iperf3 test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub enum IPerfProtocol {
    /// TCP (the iperf3 default).
    #[serde(rename = "TCP")]
    Tcp,
    /// UDP (`-u`).
    #[serde(rename = "UDP")]
    Udp,
    /// SCTP (`--sctp`).
    #[serde(rename = "SCTP")]
    Sctp,
}

/// Totals for one direction of data flow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPerfDirection {
    /// Throughput measured by the sending side, in bits per second.
    pub sent_bits_per_second: f64,
    /// Throughput measured by the receiving side, in bits per second (the
    /// usual headline number).
    pub received_bits_per_second: f64,
    /// Bytes written by the sender.
    pub sent_bytes: u64,
    /// Bytes read by the receiver.
    pub received_bytes: u64,
    /// TCP retransmissions counted by the sender (TCP only; absent when the
    /// sender's OS does not report them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// UDP jitter seen by the receiver, in milliseconds (UDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_millis: Option<f64>,
    /// UDP datagrams lost (UDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_packets: Option<u64>,
    /// UDP datagrams sent (UDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packets: Option<u64>,
    /// UDP datagrams lost, in percent of those sent (UDP only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_percent: Option<f64>,
}

/// One iperf3 stream (`-P N` gives N streams per direction).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPerfStream {
    /// iperf3's stream id (the client's socket number).
    pub id: i64,
    /// True for streams carrying server→client data in a `--bidir` test.
    #[serde(default, skip_serializing_if = "is_false")]
    pub bidir_reverse: bool,
    /// Throughput measured by the sender of this stream, in bits per second.
    pub sent_bits_per_second: f64,
    /// Throughput measured by the receiver of this stream, in bits per second
    /// (absent for UDP, where iperf3 reports one figure per stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub received_bits_per_second: Option<f64>,
    /// TCP retransmissions of this stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retransmits: Option<u64>,
    /// UDP jitter of this stream, in milliseconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jitter_millis: Option<f64>,
    /// UDP datagrams lost, in percent, for this stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_percent: Option<f64>,
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_false(b: &bool) -> bool {
    !*b
}

/// Result of one `iperf3 --json` client run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IPerfResult {
    /// Transport protocol (TCP, UDP or SCTP).
    pub protocol: IPerfProtocol,
    /// True when run with `-R`: the server sent and the client received.
    pub reverse: bool,
    /// True when run with `--bidir`: both directions at once; the main totals
    /// are client→server and `bidirReverse` holds server→client.
    pub bidirectional: bool,
    /// Parallel streams per direction (`-P`).
    pub num_streams: u32,
    /// Measured test duration in seconds (sender side, excluding omitted
    /// intervals).
    pub duration_seconds: f64,
    /// Totals of the main direction (client→server, or server→client with
    /// `-R`).
    #[serde(flatten)]
    pub totals: IPerfDirection,
    /// Server→client totals of a `--bidir` test.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bidir_reverse: Option<IPerfDirection>,
    /// Total CPU utilisation of the client host during the test, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_cpu_utilization_percent: Option<f64>,
    /// Total CPU utilisation of the server host during the test, in percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remote_cpu_utilization_percent: Option<f64>,
    /// Per-stream figures.
    #[serde(default)]
    pub streams: Vec<IPerfStream>,
}

impl IPerfResult {
    /// Receiver-side throughput of the main direction in Gbit/s (10^9 bit/s).
    pub fn received_gbps(&self) -> f64 {
        self.totals.received_bits_per_second / 1e9
    }

    /// Short human summary, e.g. `9.57 Gbit/s`, `99.9 Mbit/s, 0.00% lost`,
    /// `12.92 Gbit/s + 7.44 Gbit/s bidir`.
    pub fn headline(&self) -> String {
        let mut s = fmt::bits_per_second(self.totals.received_bits_per_second);
        if let Some(rev) = &self.bidir_reverse {
            s = format!(
                "{s} + {} bidir",
                fmt::bits_per_second(rev.received_bits_per_second)
            );
        }
        if let Some(lost) = self.totals.lost_percent {
            s = format!("{s}, {lost:.2}% lost");
        }
        if self.reverse {
            s = format!("{s} (reverse)");
        }
        s
    }
}

/// Parses the JSON printed by `iperf3 -c HOST --json` (iperf3 3.x; `--bidir`
/// exists since 3.7). Text before the JSON is skipped. An `"error"` member (e.g.
/// "unable to connect to server") becomes `ToolReportedError`, as does the
/// plain-text `iperf3: error - ...` line printed without `--json`.
pub fn parse(raw: &str) -> Result<IPerfResult, ParseError> {
    let doc = match extract_json_document(raw, "iperf3") {
        Ok(doc) => doc,
        Err(e @ ParseError::NotFound { .. }) => {
            if let Some(msg) = raw
                .lines()
                .find_map(|l| l.trim().strip_prefix("iperf3: error - "))
            {
                return Err(ParseError::ToolReportedError(msg.trim().to_string()));
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let root = JsonAt::root(&doc);
    if let Some(err) = root.get("error") {
        let msg = err.as_str().map_or_else(
            |_| format!("iperf3 reported a non-string error at {}", err.path()),
            str::to_string,
        );
        return Err(ParseError::ToolReportedError(msg));
    }

    let end = root.req("end")?;
    let test_start = root.get("start").and_then(|s| s.get("test_start"));
    let protocol = if let Some(p) = test_start.as_ref().and_then(|t| t.get("protocol")) {
        match p.as_str()? {
            "TCP" => IPerfProtocol::Tcp,
            "UDP" => IPerfProtocol::Udp,
            "SCTP" => IPerfProtocol::Sctp,
            other => return Err(p.error(format!("unknown protocol {other:?}"))),
        }
    } else {
        let first_udp = end
            .get("streams")
            .and_then(|s| s.as_array().ok())
            .and_then(|s| s.first().and_then(|s| s.get("udp")));
        if first_udp.is_some() {
            IPerfProtocol::Udp
        } else {
            IPerfProtocol::Tcp
        }
    };
    let reverse = match test_start.as_ref().and_then(|t| t.get("reverse")) {
        Some(r) => r.as_flag()?,
        None => false,
    };

    let Some((totals, duration_seconds)) = direction(&end, "", protocol)? else {
        return Err(ParseError::Truncated {
            what: format!(
                "iperf3 JSON has no end-of-test totals ({}/sum_sent and {}/sum_received are missing); was the test interrupted?",
                end.path(),
                end.path()
            ),
        });
    };
    check_duration(raw, test_start.as_ref(), duration_seconds)?;
    let bidir_reverse = direction(&end, "_bidir_reverse", protocol)?.map(|(d, _)| d);
    let bidirectional = bidir_reverse.is_some()
        || match test_start.as_ref().and_then(|t| t.get("bidir")) {
            Some(b) => b.as_flag()?,
            None => false,
        };

    let mut streams = Vec::new();
    if let Some(list) = end.get("streams") {
        for s in list.as_array()? {
            streams.push(stream(&s, bidirectional)?);
        }
    }
    let num_streams = if let Some(n) = test_start.as_ref().and_then(|t| t.get("num_streams")) {
        u32::try_from(n.as_u64()?).map_err(|_| n.error("stream count too large"))?
    } else {
        let forward = streams.iter().filter(|s| !s.bidir_reverse).count();
        u32::try_from(forward).unwrap_or(u32::MAX)
    };

    let cpu = end.get("cpu_utilization_percent");
    let (host_cpu, remote_cpu) = match &cpu {
        Some(c) => (c.opt_f64("host_total")?, c.opt_f64("remote_total")?),
        None => (None, None),
    };

    Ok(IPerfResult {
        protocol,
        reverse,
        bidirectional,
        num_streams,
        duration_seconds,
        totals,
        bidir_reverse,
        host_cpu_utilization_percent: host_cpu,
        remote_cpu_utilization_percent: remote_cpu,
        streams,
    })
}

/// A time-bound test (`-t`, not `-n`/`-k`) must have run about the seconds asked for.
fn check_duration(
    raw: &str,
    test_start: Option<&JsonAt<'_>>,
    ran_seconds: f64,
) -> Result<(), ParseError> {
    let Some(test_start) = test_start else {
        return Ok(());
    };
    let bytes = test_start.opt_u64("bytes")?.unwrap_or(0);
    let blocks = test_start.opt_u64("blocks")?.unwrap_or(0);
    match test_start.opt_f64("duration")? {
        Some(asked) if bytes == 0 && blocks == 0 => ensure_ran_as_asked(
            "iperf3",
            ran_seconds,
            asked,
            line_of_value(raw, ran_seconds),
        ),
        _ => Ok(()),
    }
}

/// Totals of one direction. `suffix` is "" or "_bidir_reverse". UDP output
/// of older iperf3 releases only has `sum` (sender rate + receiver loss); then the
/// same block serves as sent and received figures.
fn direction(
    end: &JsonAt<'_>,
    suffix: &str,
    protocol: IPerfProtocol,
) -> Result<Option<(IPerfDirection, f64)>, ParseError> {
    let sum = end.get(&format!("sum{suffix}"));
    let sent = end
        .get(&format!("sum_sent{suffix}"))
        .or_else(|| sum.clone());
    let received = end
        .get(&format!("sum_received{suffix}"))
        .or_else(|| sum.clone());
    let (Some(sent), Some(received)) = (sent, received) else {
        return Ok(None);
    };
    let duration = match sent.opt_f64("seconds")? {
        Some(s) => s,
        None => sent.req_f64("end")? - sent.opt_f64("start")?.unwrap_or(0.0),
    };
    let mut dir = IPerfDirection {
        sent_bits_per_second: sent.req_f64("bits_per_second")?,
        received_bits_per_second: received.req_f64("bits_per_second")?,
        sent_bytes: sent.req_u64("bytes")?,
        received_bytes: received.req_u64("bytes")?,
        retransmits: None,
        jitter_millis: None,
        lost_packets: None,
        packets: None,
        lost_percent: None,
    };
    match protocol {
        IPerfProtocol::Udp => {
            // `sum` carries the receiver's jitter/loss; in `sum_sent` they are 0.
            let loss = sum.unwrap_or(received);
            dir.jitter_millis = loss.opt_f64("jitter_ms")?;
            dir.lost_packets = loss.opt_u64("lost_packets")?;
            dir.packets = loss.opt_u64("packets")?;
            dir.lost_percent = loss.opt_f64("lost_percent")?;
        }
        IPerfProtocol::Tcp | IPerfProtocol::Sctp => {
            dir.retransmits = sent.opt_u64("retransmits")?;
        }
    }
    Ok(Some((dir, duration)))
}

fn stream(s: &JsonAt<'_>, bidirectional: bool) -> Result<IPerfStream, ParseError> {
    if let Some(udp) = s.get("udp") {
        let sender_flag = udp.get("sender").map(|f| f.as_flag()).transpose()?;
        return Ok(IPerfStream {
            id: udp.req("socket")?.as_i64()?,
            bidir_reverse: bidirectional && sender_flag == Some(false),
            sent_bits_per_second: udp.req_f64("bits_per_second")?,
            received_bits_per_second: None,
            retransmits: None,
            jitter_millis: udp.opt_f64("jitter_ms")?,
            lost_percent: udp.opt_f64("lost_percent")?,
        });
    }
    let sender = s.req("sender")?;
    let receiver = s.get("receiver");
    let sender_flag = sender.get("sender").map(|f| f.as_flag()).transpose()?;
    Ok(IPerfStream {
        id: sender.req("socket")?.as_i64()?,
        bidir_reverse: bidirectional && sender_flag == Some(false),
        sent_bits_per_second: sender.req_f64("bits_per_second")?,
        received_bits_per_second: receiver.map(|r| r.req_f64("bits_per_second")).transpose()?,
        retransmits: sender.opt_u64("retransmits")?,
        jitter_millis: None,
        lost_percent: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::execution::parse_error::test_support::{approx, check_prefixes, corrupt, edits};
    use proptest::prelude::*;
    use serde_json::Value;

    const TCP1: &str = include_str!("../../../testdata/iperf/tcp-1stream.json");
    const TCP4: &str = include_str!("../../../testdata/iperf/tcp-4streams.json");
    const UDP: &str = include_str!("../../../testdata/iperf/udp-100m.json");
    const UDP2: &str = include_str!("../../../testdata/iperf/udp-2streams.json");
    const REVERSE: &str = include_str!("../../../testdata/iperf/tcp-reverse.json");
    const BIDIR: &str = include_str!("../../../testdata/iperf/tcp-bidir.json");
    const REFUSED: &str = include_str!("../../../testdata/iperf/error-connrefused.json");
    const ALL: &[&str] = &[TCP1, TCP4, UDP, UDP2, REVERSE, BIDIR, REFUSED];

    fn doc(raw: &str) -> Value {
        serde_json::from_str(raw).unwrap()
    }
    fn f(v: &Value, ptr: &str) -> f64 {
        v.pointer(ptr).and_then(Value::as_f64).unwrap()
    }
    fn u(v: &Value, ptr: &str) -> u64 {
        v.pointer(ptr).and_then(Value::as_u64).unwrap()
    }

    #[test]
    fn tcp_single_stream() {
        let d = doc(TCP1);
        let r = parse(TCP1).unwrap();
        assert_eq!(r.protocol, IPerfProtocol::Tcp);
        assert!(!r.reverse && !r.bidirectional);
        assert_eq!(r.num_streams, 1);
        assert_eq!(r.duration_seconds, f(&d, "/end/sum_sent/seconds"));
        assert_eq!(
            r.totals.received_bits_per_second,
            f(&d, "/end/sum_received/bits_per_second")
        );
        approx(r.totals.received_bits_per_second, 9569483264.35114);
        assert_eq!(
            r.totals.sent_bits_per_second,
            f(&d, "/end/sum_sent/bits_per_second")
        );
        assert_eq!(r.totals.sent_bytes, 2436628480);
        assert_eq!(r.totals.received_bytes, u(&d, "/end/sum_received/bytes"));
        assert_eq!(r.totals.retransmits, Some(12));
        assert_eq!(r.totals.jitter_millis, None);
        approx(r.host_cpu_utilization_percent.unwrap(), 37.966049724379324);
        approx(r.remote_cpu_utilization_percent.unwrap(), 44.90527579762388);
        assert_eq!(r.streams.len(), 1);
        assert_eq!(r.streams[0].id, 5);
        approx(
            r.streams[0].received_bits_per_second.unwrap(),
            9569483264.35114,
        );
        assert!((r.received_gbps() - 9.56948326435114).abs() < 1e-12);
        assert_eq!(r.headline(), "9.57 Gbit/s");
        assert!(r.bidir_reverse.is_none());
    }

    #[test]
    fn tcp_four_streams() {
        let d = doc(TCP4);
        let r = parse(TCP4).unwrap();
        assert_eq!(r.num_streams, 4);
        assert_eq!(r.streams.len(), 4);
        assert_eq!(
            r.streams.iter().map(|s| s.id).collect::<Vec<_>>(),
            vec![5, 7, 9, 12]
        );
        assert_eq!(r.totals.retransmits, Some(4));
        assert_eq!(
            r.totals.received_bits_per_second,
            f(&d, "/end/sum_received/bits_per_second")
        );
        for (i, s) in r.streams.iter().enumerate() {
            assert_eq!(
                s.sent_bits_per_second,
                f(&d, &format!("/end/streams/{i}/sender/bits_per_second"))
            );
            assert_eq!(
                s.retransmits,
                Some(u(&d, &format!("/end/streams/{i}/sender/retransmits")))
            );
        }
        let per_stream: f64 = r
            .streams
            .iter()
            .filter_map(|s| s.received_bits_per_second)
            .sum();
        assert!((per_stream - r.totals.received_bits_per_second).abs() / per_stream < 1e-9);
    }

    #[test]
    fn udp() {
        let d = doc(UDP);
        let r = parse(UDP).unwrap();
        assert_eq!(r.protocol, IPerfProtocol::Udp);
        approx(r.totals.received_bits_per_second, 99997186.3024725);
        assert_eq!(
            r.totals.sent_bits_per_second,
            f(&d, "/end/sum_sent/bits_per_second")
        );
        assert_eq!(r.totals.jitter_millis, Some(f(&d, "/end/sum/jitter_ms")));
        approx(r.totals.jitter_millis.unwrap(), 0.010018276223267831);
        assert_eq!(r.totals.lost_packets, Some(0));
        assert_eq!(r.totals.packets, Some(763));
        assert_eq!(r.totals.lost_percent, Some(0.0));
        assert_eq!(r.totals.retransmits, None);
        assert_eq!(r.streams.len(), 1);
        assert_eq!(r.streams[0].received_bits_per_second, None);
        assert_eq!(r.headline(), "100.0 Mbit/s, 0.00% lost");

        let r2 = parse(UDP2).unwrap();
        let d2 = doc(UDP2);
        assert_eq!(r2.num_streams, 2);
        assert_eq!(r2.totals.packets, Some(764));
        assert_eq!(
            r2.streams[1].jitter_millis,
            Some(f(&d2, "/end/streams/1/udp/jitter_ms"))
        );
    }

    #[test]
    fn udp_with_only_sum_block() {
        // Older iperf3 UDP output has only `sum`; drop sum_sent/sum_received.
        let mut d = doc(UDP);
        let end = d.pointer_mut("/end").unwrap().as_object_mut().unwrap();
        end.remove("sum_sent");
        end.remove("sum_received");
        let r = parse(&d.to_string()).unwrap();
        approx(r.totals.sent_bits_per_second, 100000385.97085921);
        approx(r.totals.received_bits_per_second, 100000385.97085921);
        assert_eq!(r.totals.packets, Some(763));
    }

    #[test]
    fn reverse() {
        let r = parse(REVERSE).unwrap();
        assert!(r.reverse && !r.bidirectional);
        approx(r.totals.received_bits_per_second, 19117693536.508354);
        assert_eq!(r.totals.retransmits, Some(32));
        assert!(!r.streams[0].bidir_reverse);
        assert_eq!(r.headline(), "19.12 Gbit/s (reverse)");
    }

    #[test]
    fn bidirectional() {
        let d = doc(BIDIR);
        let r = parse(BIDIR).unwrap();
        assert!(r.bidirectional && !r.reverse);
        assert_eq!(
            r.totals.received_bits_per_second,
            f(&d, "/end/sum_received/bits_per_second")
        );
        let rev = r.bidir_reverse.as_ref().unwrap();
        approx(rev.received_bits_per_second, 7438953157.182987);
        assert_eq!(rev.sent_bytes, u(&d, "/end/sum_sent_bidir_reverse/bytes"));
        assert_eq!(rev.retransmits, Some(56));
        assert_eq!(r.streams.len(), 2);
        assert!(!r.streams[0].bidir_reverse);
        assert!(r.streams[1].bidir_reverse);
        assert_eq!(r.headline(), "12.92 Gbit/s + 7.44 Gbit/s bidir");
    }

    /// Issue 18, finding 4: a test stopped early (the server killed, a signal) must not
    /// pass for the one asked for: 2.04 s of a 10 s `-t` is refused.
    #[test]
    fn a_test_far_shorter_than_asked_is_refused() {
        let asked_ten = TCP1.replacen("\"duration\":\t2,", "\"duration\":\t10,", 1);
        assert_ne!(asked_ten, TCP1);
        match parse(&asked_ten).unwrap_err() {
            ParseError::Implausible { line, reason } => {
                assert!(reason.contains("ran 2.037 s of the 10 s"), "{reason}");
                assert!(line.is_some());
            }
            other => panic!("{other:?}"),
        }
        // A byte-bound test (-n) has no duration to meet.
        let by_bytes = asked_ten.replacen("\"bytes\":\t0,", "\"bytes\":\t1000000,", 1);
        assert!(parse(&by_bytes).is_ok());
        assert!(parse(TCP1).is_ok());
    }

    #[test]
    fn errors() {
        assert_eq!(
            parse(REFUSED).unwrap_err(),
            ParseError::ToolReportedError("unable to connect to server: Connection refused".into())
        );
        assert_eq!(
            parse("iperf3: error - unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: Connection refused\n").unwrap_err(),
            ParseError::ToolReportedError("unable to connect to server - server may have stopped running or use a different port, firewall issue, etc.: Connection refused".into())
        );
        assert!(matches!(
            parse(&TCP1[..TCP1.len() / 2]),
            Err(ParseError::Truncated { .. })
        ));
        let empty_end =
            r#"{"start": {"test_start": {"protocol": "TCP"}}, "intervals": [], "end": {}}"#;
        assert!(matches!(
            parse(empty_end),
            Err(ParseError::Truncated { .. })
        ));
        let bad = TCP1.replace(
            "\"bits_per_second\":\t9569483264.35114",
            "\"bits_per_second\":\t\"fast\"",
        );
        assert_ne!(bad, TCP1);
        let err = parse(&bad).unwrap_err();
        assert!(err.to_string().contains("/end/"), "{err}");
        assert!(err.to_string().contains("/bits_per_second"), "{err}");
    }

    #[test]
    fn schema_mentions_flattened_fields() {
        let schema = serde_json::to_string(&schemars::schema_for!(IPerfResult)).unwrap();
        assert!(schema.contains("receivedBitsPerSecond"));
        assert!(schema.contains("Throughput measured by the receiving side"));
    }

    #[test]
    fn every_prefix_is_handled() {
        for raw in ALL {
            check_prefixes(raw, parse, IPerfResult::headline);
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]
        #[test]
        fn corruption_never_panics(which in 0..ALL.len(), e in edits()) {
            let raw = corrupt(ALL[which], &e);
            if let Ok(r) = parse(&raw) {
                crate::execution::parse_error::test_support::assert_round_trips(&r);
                let _ = r.headline();
            }
        }
    }
}
