//! Notes on how a pair's bench pods were decided (a pod a selector picked, a device default, what
//! a model did not carry over), each with a kind that callers decide on, never its text.

/// What a preparation note is about, so that callers decide on the kind, never on the text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoteKind {
    /// Which pod a selector picked among several.
    PodPicked,
    /// A device request defaulted from what the node advertises (`--gpus`/`--rdma` change it).
    DeviceDefault,
    /// What the model did not carry over, where it came from, a node that could not be read.
    Other,
}

impl NoteKind {
    /// Whether a note is said on stderr when a pair runs: device defaults are shown by
    /// `--dry-run` and at `-v` only, so stderr stays one line on errors.
    pub fn on_stderr(self) -> bool {
        self != NoteKind::DeviceDefault
    }

    /// Whether the pair report keeps the note as a warning: which pod a selector picked and the
    /// device defaults are not findings about the run.
    pub fn in_report(self) -> bool {
        self == NoteKind::Other
    }
}

/// The notes a pair report keeps as warnings (`NoteKind::in_report`), prefixed as the report
/// shows them.
pub fn report_warnings(notes: &[Note]) -> Vec<String> {
    notes
        .iter()
        .filter(|n| n.kind.in_report())
        .map(|n| format!("kubernetes: {n}"))
        .collect()
}

/// One line about how the pods were decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub kind: NoteKind,
    pub text: String,
}

impl Note {
    pub(super) fn other(text: String) -> Note {
        Note {
            kind: NoteKind::Other,
            text,
        }
    }
}

impl std::fmt::Display for Note {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}
