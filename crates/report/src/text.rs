//! The short texts every human output shares: one case as a line (a live progress line, a log
//! line), and a duration short enough for a progress bar. Bandwidth itself has one rule,
//! `icb_core::units::format_bandwidth`, which these use.

use icb_core::model::{BandwidthUnit, CaseResult, CaseStatus, PairReport, TransportClass};
use std::time::Duration;

/// `put_bw 1 MiB host→host`: what a case measures.
pub fn case_head(c: &CaseResult) -> String {
    format!("{} {} {}", c.operation(), c.shape(), c.memory)
}

/// `13.30 GB/s`, `p50 1.52 µs`, `skipped`, `failed`: what a case gave.
pub fn case_value(c: &CaseResult, unit: BandwidthUnit) -> String {
    match (c.status, &c.measurement) {
        (CaseStatus::Measured, Some(m)) => match (m.bandwidth_bps, &m.latency_us) {
            (Some(bps), _) => icb_core::units::format_bandwidth(bps, unit),
            (None, Some(l)) => format!("p50 {:.2} µs", l.p50),
            _ => "measured".to_string(),
        },
        (CaseStatus::Skipped, _) => "skipped".to_string(),
        _ => "failed".to_string(),
    }
}

/// One case on one line: `put_bw 1 MiB host→host: 13.30 GB/s over cma`, or with the reason
/// when it was not measured (`…: skipped (no CUDA driver)`). The data path is named only when
/// the case has one (the NIXL engine names them when the run ends).
pub fn case_line(c: &CaseResult, unit: BandwidthUnit) -> String {
    let head = case_head(c);
    let value = case_value(c, unit);
    match (c.status, &c.transport, &c.reason) {
        (CaseStatus::Measured, Some(t), _) => format!("{head}: {value} over {}", t.data_path.class),
        (CaseStatus::Measured, None, _) | (_, _, None) => format!("{head}: {value}"),
        (_, _, Some(reason)) => format!("{head}: {value} ({reason})"),
    }
}

/// The data paths a run's cases took so far, in the order first seen: what its live line names.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PathsSoFar(Vec<TransportClass>);

impl PathsSoFar {
    /// Adds the data path of `c` (when it has one and it is new).
    pub fn add(&mut self, c: &CaseResult) {
        if let Some(t) = &c.transport
            && !self.0.contains(&t.data_path.class)
        {
            self.0.push(t.data_path.class);
        }
    }

    /// `· tag_bw 64 KiB host→host · 4.59 GB/s · data path so far: tcp, shared memory`: the
    /// live line's text after `case N/M` for the case just finished.
    pub fn progress_text(&self, c: &CaseResult, unit: BandwidthUnit) -> String {
        let mut s = format!("· {} · {}", case_head(c), case_value(c, unit));
        if !self.0.is_empty() {
            let names: Vec<&str> = self.0.iter().map(|p| p.as_str()).collect();
            s.push_str(&format!(" · data path so far: {}", names.join(", ")));
        }
        s
    }
}

/// Which UCX each side of `r` loaded: one line when both loaded the same
/// (`both sides loaded UCX 1.18.0 from /usr/lib`), else one per side, decode first.
pub fn ucx_loaded_lines(r: &PairReport) -> Vec<String> {
    let (s, c) = (&r.server, &r.client);
    if (&s.ucx_version, &s.ucx_library) == (&c.ucx_version, &c.ucx_library) {
        return vec![format!(
            "both sides loaded UCX {} from {}",
            s.ucx_version, s.ucx_library
        )];
    }
    [("decode", s), ("prefill", c)]
        .into_iter()
        .map(|(side, peer)| {
            format!(
                "the {side} side loaded UCX {} from {}",
                peer.ucx_version, peer.ucx_library
            )
        })
        .collect()
}

/// `45s`, `3m05s`, `1h02m`: short enough for a progress line, exact to the unit that matters.
pub fn short_duration(d: Duration) -> String {
    let s = d.as_secs_f64().round() as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(status: &str, transport: Option<serde_json::Value>, reason: Option<&str>) -> CaseResult {
        serde_json::from_value(serde_json::json!({
            "test": "put_bw", "memory": {"initiator": "host", "target": "host"}, "size": 1048576,
            "status": status, "reason": reason,
            "measurement": (status == "measured").then(|| serde_json::json!({
                "warmup_iterations": 16, "iterations": 1285, "elapsed_s": 0.1,
                "bytes": 1347420160u64, "bandwidth_bps": 13.3e9, "window": 32, "verified": true})),
            "transport": transport,
        }))
        .expect("a case")
    }

    #[test]
    fn a_case_line_names_its_data_path_only_when_it_has_one() {
        let no_path = case_line(&case("measured", None, None), BandwidthUnit::GBps);
        assert_eq!(no_path, "put_bw 1 MiB host→host: 13.30 GB/s");
        let evidence = serde_json::json!({"data_path": {
            "class": "cma", "transports": [], "protocol": "", "source": "proto_info"}});
        let with_path = case_line(&case("measured", Some(evidence), None), BandwidthUnit::GBps);
        assert_eq!(with_path, "put_bw 1 MiB host→host: 13.30 GB/s over cma");
        let skipped = case_line(&case("skipped", None, Some("no CUDA driver")), BandwidthUnit::GBps);
        assert_eq!(skipped, "put_bw 1 MiB host→host: skipped (no CUDA driver)");
    }

    #[test]
    fn the_case_value_follows_the_unit_and_the_one_bandwidth_rule() {
        let c = case("measured", None, None);
        assert_eq!(case_value(&c, BandwidthUnit::GBps), "13.30 GB/s");
        assert_eq!(case_value(&c, BandwidthUnit::MiBps), "12683.87 MiB/s");
    }

    #[test]
    fn the_live_text_names_each_data_path_once_in_the_order_seen() {
        let evidence = |class: &str| {
            serde_json::json!({"data_path": {
                "class": class, "transports": [], "protocol": "", "source": "proto_info"}})
        };
        let mut paths = PathsSoFar::default();
        let plain = case("measured", None, None);
        paths.add(&plain);
        assert_eq!(
            paths.progress_text(&plain, BandwidthUnit::GBps),
            "· put_bw 1 MiB host→host · 13.30 GB/s"
        );
        for class in ["cma", "tcp", "cma"] {
            paths.add(&case("measured", Some(evidence(class)), None));
        }
        let text = paths.progress_text(&plain, BandwidthUnit::GBps);
        assert!(text.ends_with(" · data path so far: cma, tcp"), "{text}");
    }

    #[test]
    fn the_ucx_each_side_loaded_is_one_line_when_the_same() {
        let mut r: PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        r.client.ucx_version = r.server.ucx_version.clone();
        r.client.ucx_library = r.server.ucx_library.clone();
        let same = ucx_loaded_lines(&r);
        assert_eq!(same.len(), 1);
        assert!(same[0].starts_with("both sides loaded UCX "), "{}", same[0]);
        r.client.ucx_library = "/elsewhere/libucp.so".into();
        let lines = ucx_loaded_lines(&r);
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("the decode side") && lines[1].ends_with("from /elsewhere/libucp.so"));
    }

    #[test]
    fn durations_are_short() {
        assert_eq!(short_duration(Duration::from_secs(45)), "45s");
        assert_eq!(short_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(short_duration(Duration::from_secs(3720)), "1h02m");
    }
}
