//! The writing end of the side protocol: what `serve` and `connect --plan` print for their
//! parent. Each event is one line, flushed at once (the parent reads the lines while the side
//! runs, and a side may be killed right after its last one). The engine's callbacks (a case
//! measured, the server listening) run on its thread while the end of the run writes the report
//! or the failure from the caller's, so the writer is shared and locks per line: two events never
//! interleave on the channel.

use super::{CaseProgress, Listening, SIDE_SCHEMA, SideEvent, SideFailure, side_line};
use crate::model::{CaseResult, PairReport};
use std::io::Write;
use std::sync::Mutex;

/// A side's protocol channel (its reserved stdout, or any writer in tests).
pub struct SideWriter<W> {
    out: Mutex<W>,
}

impl<W: Write> SideWriter<W> {
    pub fn new(out: W) -> Self {
        SideWriter { out: Mutex::new(out) }
    }

    /// Writes `event` as one line and flushes it.
    pub fn send(&self, event: &SideEvent) -> std::io::Result<()> {
        let mut out = self
            .out
            .lock()
            .map_err(|_| std::io::Error::other("the protocol channel is unusable"))?;
        writeln!(out, "{}", side_line(event))?;
        out.flush()
    }

    /// `serve` is bound at `address`.
    pub fn listening(&self, address: impl Into<String>, ucx: impl Into<String>) -> std::io::Result<()> {
        self.send(&SideEvent::Listening(Listening::new(address, ucx)))
    }

    /// `connect --plan` measured case `index` (1-based) of `total`.
    pub fn case(&self, index: usize, total: usize, case: &CaseResult) -> std::io::Result<()> {
        self.send(&SideEvent::Case(Box::new(CaseProgress {
            schema: SIDE_SCHEMA.into(),
            index,
            total,
            case: case.clone(),
        })))
    }

    /// The side is about to exit with an error.
    pub fn failed(&self, failure: SideFailure) -> std::io::Result<()> {
        self.send(&SideEvent::Failed(failure))
    }

    /// `connect --plan` is done: the whole report.
    pub fn report(&self, report: PairReport) -> std::io::Result<()> {
        self.send(&SideEvent::Report(Box::new(report)))
    }

    /// The writer back (tests read what was written).
    pub fn into_inner(self) -> W {
        self.out.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::{SideErrorKind, parse_side_line};

    #[test]
    fn every_event_is_one_line_the_parent_parses_back() {
        let w = SideWriter::new(Vec::new());
        w.listening("0.0.0.0:4000", "1.17").unwrap();
        w.failed(SideFailure::new(SideErrorKind::Other, "no route")).unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        let events: Vec<_> = text.lines().map(|l| parse_side_line(l).unwrap().unwrap()).collect();
        assert_eq!(
            events,
            [
                SideEvent::Listening(Listening::new("0.0.0.0:4000", "1.17")),
                SideEvent::Failed(SideFailure::new(SideErrorKind::Other, "no route")),
            ]
        );
        assert!(text.ends_with('\n'));
    }

    #[test]
    fn the_cases_and_the_report_of_connect_plan_read_back_as_sent() {
        let report: PairReport = serde_json::from_str(include_str!("../../tests/fixtures/pair_report.json")).unwrap();
        let w = SideWriter::new(Vec::new());
        w.case(1, 2, &report.cases[0]).unwrap();
        w.report(report.clone()).unwrap();
        let text = String::from_utf8(w.into_inner()).unwrap();
        let mut lines = text.lines().map(|l| parse_side_line(l).unwrap().unwrap());
        match lines.next() {
            Some(SideEvent::Case(p)) => assert_eq!((p.index, p.total, &p.case), (1, 2, &report.cases[0])),
            other => panic!("expected a case line, got {other:?}"),
        }
        assert_eq!(lines.next(), Some(SideEvent::Report(Box::new(report))));
        assert_eq!(lines.next(), None);
    }
}
