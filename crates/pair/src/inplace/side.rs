//! One running in-place side: the exec that carries the copied binary's whole life, read as the
//! pipeline's [`Side`].

use super::*;

/// One side running in a worker container.
pub struct InPlaceSide {
    pub(super) role: &'static str,
    pub(super) label: String,
    pub(super) session: ExecSession,
    /// Lines read ahead (the decode side's start-up), handed to the pipeline first.
    pub(super) replay: VecDeque<String>,
}

impl InPlaceSide {
    /// Whether the side wrote nothing to stderr (besides its pid line) so far.
    pub(crate) fn said_nothing(&self) -> bool {
        self.session
            .stderr_tail()
            .iter()
            .all(|l| l.trim().is_empty() || l.starts_with("icb-inplace-pid"))
    }

    /// A side whose exec was opened elsewhere (the Kubernetes rails seam runs its ranks so).
    pub fn new(role: &'static str, label: String, session: ExecSession) -> InPlaceSide {
        InPlaceSide {
            role,
            label,
            session,
            replay: VecDeque::new(),
        }
    }

    /// The exit code its exit note read, if it did.
    pub fn exit_code_seen(&self) -> Option<i32> {
        self.session.exit_seen()
    }

    /// Reads (and drops) lines up to one starting with `marker`: `false` when the output ended
    /// first.
    pub async fn read_until(&mut self, marker: &str) -> bool {
        self.read_marked(marker).await.is_some()
    }

    /// Reads (and drops) lines up to one starting with `marker`, and returns the rest of it:
    /// `None` when the output ended first.
    pub async fn read_marked(&mut self, marker: &str) -> Option<String> {
        while let Some(line) = self.session.next_line().await {
            if let Some(rest) = line.strip_prefix(marker) {
                return Some(rest.to_string());
            }
        }
        None
    }

    /// Reads until the listening event or the end of the output (every line is kept for the
    /// pipeline): `Err` carries why the side ended, and its typed failure when it said one.
    pub(super) async fn first_event(&mut self) -> Result<(), (String, Option<SideErrorKind>)> {
        let mut failed = None;
        loop {
            match self.session.next_line().await {
                Some(line) => {
                    let event = parse_side_line(&line);
                    self.replay.push_back(line);
                    match event {
                        Ok(Some(SideEvent::Listening(_))) => return Ok(()),
                        Ok(Some(SideEvent::Failed(f))) => failed = Some(f.cause),
                        _ => {}
                    }
                }
                None => {
                    let why = self.exit_note().await.unwrap_or_else(|| "exit status 0".into());
                    return Err((why, failed));
                }
            }
        }
    }
}

impl Side for InPlaceSide {
    fn name(&self) -> String {
        format!("the {} side ({})", self.role, self.label)
    }

    async fn next_line(&mut self) -> Option<String> {
        if let Some(line) = self.replay.pop_front() {
            return Some(line);
        }
        self.session.next_line().await
    }

    async fn exit_note(&mut self) -> Option<String> {
        let tail = self.session.stderr_tail();
        let words = summarize(
            tail.iter()
                .map(String::as_str)
                .filter(|l| !l.starts_with("icb-inplace-pid")),
        );
        match self.session.exit_code(Duration::from_secs(5)).await {
            Ok(0) => None,
            Ok(code) => Some(format!("exit {code}: {words}")),
            Err(why) => Some(format!("{why}: {words}")),
        }
    }

    fn last_words(&self) -> String {
        let tail = self.session.stderr_tail();
        summarize(
            tail.iter()
                .map(String::as_str)
                .filter(|l| !l.starts_with("icb-inplace-pid")),
        )
    }

    async fn interrupt(&mut self) {
        // Closing stdin makes the wrapper SIGTERM the side it started; its output is still read,
        // so the prefill side's report of the cases it measured comes through.
        self.session.close_stdin().await;
    }

    async fn stop(&mut self, grace: Duration) {
        // Closing stdin is the wrapper's signal: it stops the process it started and removes
        // the copy. The connection is closed after the grace either way.
        if !grace.is_zero() {
            let _ = tokio::time::timeout(grace, async { while self.session.next_line().await.is_some() {} }).await;
        }
        self.session.close_stdin().await;
        self.session.abort();
    }
}
