//! The judged report of a client session, assembled the same way for both engines.

use crate::error::EngineError;
use crate::messages::Hello;
use crate::options::ConnectOptions;
use crate::session::peer_info;
use icb_core::readiness::PairReadiness;
use icb_core::{CaseResult, Endpoint, PAIR_SCHEMA, PairReport, Placement, Verdict, VerdictStatus};
use std::time::Instant;

/// When a client session started and between which addresses, for its report.
pub struct SessionStart {
    pub started: Instant,
    /// RFC 3339, when the run started.
    pub started_at: String,
    pub server_addr: std::net::SocketAddr,
    /// This side's end of the control connection, once connected.
    pub local_addr: Option<std::net::SocketAddr>,
}

impl SessionStart {
    /// Starts the clock, then resolves `server` (the run's duration counts the lookup).
    pub async fn resolve(server: &str) -> Result<SessionStart, EngineError> {
        let started = Instant::now();
        let started_at = jiff::Timestamp::now().to_string();
        let server_addr = crate::session::resolve(server).await?;
        Ok(SessionStart {
            started,
            started_at,
            server_addr,
            local_addr: None,
        })
    }
}

/// What a client session got so far, the same for both engines: it outlives the session's
/// future, so an interrupted run keeps the cases measured before the interruption.
#[derive(Default)]
pub struct SessionState {
    /// The server's hello (the decode side), once it arrived.
    pub server: Option<Hello>,
    pub cases: Vec<CaseResult>,
    pub warnings: Vec<String>,
}

/// What one client session produced, for [`assemble_report`].
pub struct SessionRecord {
    pub start: SessionStart,
    /// This side's hello (the prefill side).
    pub mine: Hello,
    pub session: SessionState,
    /// Interrupted once the server's hello had arrived: the report is a partial run of the
    /// planned cases.
    pub interrupted: bool,
}

/// The judged report of a client session, the same for both engines: the placement from the two
/// hellos (same kernel boot id: same host), the expectation for it, then [`finish_report`].
///
/// A session that ended before the server's hello has nothing to report: an internal error
/// (the callers end such a session with the error that stopped it first).
pub fn assemble_report(opts: &ConnectOptions, r: SessionRecord) -> Result<PairReport, EngineError> {
    let SessionState {
        server: Some(server),
        cases,
        warnings,
    } = r.session
    else {
        return Err(EngineError::Internal(
            "the session ended without the server's hello".into(),
        ));
    };
    let same_boot = !r.mine.boot_id.is_empty() && r.mine.boot_id == server.boot_id;
    let mut expectation = opts
        .expectation_for(same_boot)
        .map_err(|e| EngineError::Settings(e.to_string()))?;
    if expectation.line_rate_bps.is_none() {
        // Between two hosts the slower side's NICs bound what can arrive.
        expectation.line_rate_bps = [r.mine.line_rate_bps, server.line_rate_bps]
            .into_iter()
            .flatten()
            .reduce(f64::min);
    }
    let mut report = PairReport {
        schema: PAIR_SCHEMA.to_string(),
        tool: opts.tool.clone(),
        started_at: r.start.started_at,
        duration_s: r.start.started.elapsed().as_secs_f64(),
        placement: Placement {
            locality: expectation.locality,
            mode: opts.placement_mode.clone(),
            prefill: Endpoint {
                host: r.mine.hostname.clone(),
                address: r.start.local_addr.map(|a| a.to_string()),
                ..Default::default()
            },
            decode: Endpoint {
                host: server.hostname.clone(),
                address: Some(r.start.server_addr.to_string()),
                ..Default::default()
            },
        },
        server: peer_info(&server),
        client: peer_info(&r.mine),
        settings: opts.settings.clone(),
        expectation,
        cases,
        verdict: Verdict {
            status: VerdictStatus::Pass,
            reason: String::new(),
            hint: None,
            data_paths: Vec::new(),
        },
        warnings,
        partial: r.interrupted.then(|| icb_core::PartialRun {
            reason: "interrupted".into(),
            planned_cases: opts.settings.case_list().len(),
        }),
        ucx_profile: (opts.ucx.profile != icb_core::UcxProfile::Default).then_some(opts.ucx.profile),
        rails: None,
        kv: None,
        baseline: None,
        controls: Vec::new(),
        // Compared before any case ran: each side read its own in its hello.
        readiness: Some(Box::new(PairReadiness::of(
            r.mine.readiness.clone(),
            server.readiness.clone(),
        ))),
    };
    finish_report(&mut report);
    Ok(report)
}

/// The last step of every engine's client: the verdict, the measurement-quality findings, and for
/// a partial run a verdict reason that says it covers only what was measured.
pub fn finish_report(report: &mut PairReport) {
    icb_core::verdict::judge(report);
    icb_core::quality::add_findings(report);
    if let Some(p) = &report.partial {
        // The verdict covers only what was measured: say so where people read it.
        report.verdict.reason = format!(
            "{} (partial run: {} of {} cases before the interruption)",
            report.verdict.reason,
            report.cases.len(),
            p.planned_cases
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::messages::Role;
    use icb_core::RunSettings;
    use std::time::Duration;

    fn hello(boot_id: &str, line_rate_bps: Option<f64>) -> Hello {
        Hello {
            role: Role::Client,
            tool_version: "0".into(),
            hostname: format!("host-{boot_id}"),
            boot_id: boot_id.into(),
            ucx_version: "1.22.0".into(),
            ucx_library: String::new(),
            cuda: icb_core::CudaInfo {
                available: false,
                detail: "no CUDA driver".into(),
                devices: 0,
            },
            env: Default::default(),
            worker_address: crate::messages::HexBytes(Vec::new()),
            peer_errors: false,
            engine: None,
            nixl: None,
            line_rate_bps,
            readiness: None,
            auth: None,
        }
    }

    #[test]
    fn the_slower_hosts_nics_bound_the_physics_check_between_hosts() {
        let opts = ConnectOptions {
            server: "x:1".into(),
            settings: RunSettings::verdict_profile(),
            connect_timeout: Duration::from_secs(1),
            locality: None,
            expect_flags: Default::default(),
            expect_config: None,
            expectation: None,
            ucx: Default::default(),
            tool: icb_core::ToolInfo {
                name: "t".into(),
                version: "0".into(),
                git_commit: String::new(),
                ucx_headers: String::new(),
            },
            placement_mode: "manual".into(),
            on_case: None,
            cancel: None,
            token: None,
        };
        let record = |mine: Hello, server: Hello| SessionRecord {
            start: SessionStart {
                started: Instant::now(),
                started_at: String::new(),
                server_addr: "127.0.0.1:1".parse().expect("an address"),
                local_addr: None,
            },
            mine,
            session: SessionState {
                server: Some(server),
                ..SessionState::default()
            },
            interrupted: false,
        };
        let r = assemble_report(
            &opts,
            record(hello("a", Some(400e9 / 8.0)), hello("b", Some(200e9 / 8.0))),
        )
        .expect("a report");
        assert_eq!(r.placement.locality, icb_core::Locality::DifferentHosts);
        assert_eq!(r.expectation.line_rate_bps, Some(200e9 / 8.0));
        let r = assemble_report(&opts, record(hello("a", None), hello("b", Some(100e9 / 8.0)))).expect("a report");
        assert_eq!(
            r.expectation.line_rate_bps,
            Some(100e9 / 8.0),
            "one side known is a bound"
        );
        let r = assemble_report(&opts, record(hello("a", None), hello("b", None))).expect("a report");
        assert_eq!(r.expectation.line_rate_bps, None);
        assert_eq!(r.partial, None, "a session that ran to its end is whole");
        let interrupted = SessionRecord {
            interrupted: true,
            ..record(hello("a", None), hello("b", None))
        };
        let r = assemble_report(&opts, interrupted).expect("a report");
        let partial = r.partial.expect("an interrupted session is a partial run");
        assert_eq!(partial.reason, "interrupted");
        assert_eq!(partial.planned_cases, opts.settings.case_list().len());
        let mut no_hello = record(hello("a", None), hello("b", None));
        no_hello.session.server = None;
        assert!(
            matches!(assemble_report(&opts, no_hello), Err(EngineError::Internal(_))),
            "a session that ended before the server's hello has no report"
        );
    }
}
