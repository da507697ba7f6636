//! A container's log: its stdout and stderr as one byte stream (in the order the process wrote
//! them, like a container runtime's log), with per-line timestamps for `timestamps`/`sinceSeconds`,
//! and a change signal so `follow` streams push each line as it arrives.

use std::sync::Mutex;

use tokio::sync::watch;

struct Inner {
    data: Vec<u8>,
    /// Start offset and arrival time of every line (the last may still be open).
    lines: Vec<(usize, jiff::Timestamp)>,
    done: bool,
}

pub struct LogBuf {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

/// What a reader gets: bytes to send, where to continue, and whether the container has ended.
pub struct Chunk {
    pub bytes: Vec<u8>,
    pub next: usize,
    pub done: bool,
}

impl LogBuf {
    pub fn new() -> Self {
        let (changed, _) = watch::channel(0);
        LogBuf {
            inner: Mutex::new(Inner {
                data: Vec::new(),
                lines: Vec::new(),
                done: false,
            }),
            changed,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub fn append(&self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let now = jiff::Timestamp::now();
        let mut inner = self.lock();
        for b in bytes {
            let at_line_start = inner.data.last().is_none_or(|last| *last == b'\n');
            if at_line_start {
                let offset = inner.data.len();
                inner.lines.push((offset, now));
            }
            inner.data.push(*b);
        }
        let len = inner.data.len() as u64;
        drop(inner);
        self.changed.send_replace(len);
    }

    /// The container ended: readers that reach the end stop.
    pub fn finish(&self) {
        self.lock().done = true;
        self.changed.send_modify(|v| *v += 1);
    }

    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Where a read starts for `tailLines` / `sinceSeconds`.
    pub fn start_offset(&self, tail_lines: Option<usize>, since: Option<jiff::Timestamp>) -> usize {
        let inner = self.lock();
        let mut start = 0;
        if let Some(n) = tail_lines {
            start = match inner.lines.len().checked_sub(n) {
                None => 0,
                Some(first) => inner.lines.get(first).map(|(o, _)| *o).unwrap_or(inner.data.len()),
            };
        }
        if let Some(since) = since {
            let first = inner
                .lines
                .iter()
                .find(|(_, t)| *t >= since)
                .map(|(o, _)| *o)
                .unwrap_or(inner.data.len());
            start = start.max(first);
        }
        start
    }

    /// Everything from `from` on, with RFC 3339 timestamps before each line when asked.
    pub fn read_from(&self, from: usize, timestamps: bool) -> Chunk {
        let inner = self.lock();
        let end = inner.data.len();
        let from = from.min(end);
        let bytes = if !timestamps {
            inner.data[from..end].to_vec()
        } else {
            let mut out = Vec::with_capacity(end - from + 64);
            let first = inner.lines.partition_point(|(o, _)| *o < from);
            let mut cursor = from;
            for (offset, ts) in &inner.lines[first..] {
                out.extend_from_slice(&inner.data[cursor..*offset]);
                out.extend_from_slice(format!("{ts:.9} ").as_bytes());
                cursor = *offset;
            }
            out.extend_from_slice(&inner.data[cursor..end]);
            out
        };
        Chunk {
            bytes,
            next: end,
            done: inner.done,
        }
    }

    pub fn contents(&self) -> Vec<u8> {
        self.lock().data.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_and_timestamps() {
        let log = LogBuf::new();
        log.append(b"one\ntwo\nthr");
        log.append(b"ee\n");
        assert_eq!(log.read_from(0, false).bytes, b"one\ntwo\nthree\n");
        let tail = log.start_offset(Some(2), None);
        assert_eq!(log.read_from(tail, false).bytes, b"two\nthree\n");
        assert_eq!(log.start_offset(Some(10), None), 0);
        assert_eq!(log.start_offset(Some(0), None), 14, "tailLines=0 gives nothing");
        let stamped = String::from_utf8(log.read_from(tail, true).bytes).unwrap();
        let lines: Vec<&str> = stamped.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].ends_with("Z two") && lines[0].contains('T'), "{stamped}");
        let chunk = log.read_from(0, false);
        assert!(!chunk.done);
        log.finish();
        assert!(log.read_from(chunk.next, false).done);
        let future = jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60);
        assert_eq!(log.start_offset(None, Some(future)), 14);
    }
}
