//! UCX's protocol selection tables (`UCX_PROTO_INFO`), parsed, and the receiving side's view
//! of a rendezvous tag message read out of them.
//!
//! UCX prints one table per endpoint (or remote-key) configuration and operation:
//!
//! ```text
//! | initiator intra-node cfg#1                                       |
//! | remote memory read by ucp_get*(multi) into host memory from host |
//! | Count | Range  | Description |              Config               |
//! |     8 | 0..inf | zero-copy   | cma/memory                        |
//! ```
//!
//! (`Count` only with `UCX_PROTO_INFO=used`). [`parse`] reads every table out of a log or a
//! `ucp_worker_print_info` dump, prefixes and separators ignored.
//!
//! For a rendezvous tag message the receiver chooses how the bytes move: its "rendezvous data
//! fetch" table says whether it reads them (`zero-copy read from remote`, a cuda_copy pipeline)
//! or has the sender send them (`(?) zero-copy flushed write to remote` on UCX_RNDV_SCHEME=
//! put_zcopy, `(?) fragmented copy-in copy-out`). A `(?)` row only guesses: what it names
//! depends on the peer. Where the receiver has the sender send, the sender's own "rendezvous
//! data send" table says how it did (`zero-copy flushed write to remote | cma/memory`). The
//! sender's tag_send row only guesses too (UCX marks it `(?)`), and so does the info string of
//! its request (measured on UCX 1.22, `tests/fixtures/ucx/`). [`receive_view`] picks the
//! receiver's rows for one case, [`send_view`] the sender's.
//!
//! Pure string work: no UCX, no I/O, and no input can make it panic.

use crate::classify::{data_path_from_info, severity_rank};
use crate::model::{MemoryPair, MemoryType, ProtocolSide, ProtocolView};

/// One protocol table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoTable {
    /// `initiator intra-node cfg#1`: endpoint name, locality, configuration.
    pub endpoint: String,
    /// `remote memory read by ucp_get*(multi) into host memory from host`.
    pub operation: String,
    pub rows: Vec<ProtoRow>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProtoRow {
    /// Operations that used the row (`used` mode); `None` in `y` mode.
    pub count: Option<u64>,
    pub min: u64,
    /// `u64::MAX` for `inf`.
    pub max: u64,
    /// `zero-copy`, `multi-frag copy-in`, `software emulation`, …
    pub description: String,
    /// `cma/memory`, `tcp/lo`, `rc_mlx5/mlx5_0:1 50% + rc_mlx5/mlx5_1:1 50%`, …
    pub config: String,
}

impl ProtoRow {
    /// The row's range as UCX writes it (`0..8K` is written back in bytes, `8193..inf`).
    pub fn range_text(&self) -> String {
        let max = if self.max == u64::MAX {
            "inf".to_string()
        } else {
            self.max.to_string()
        };
        if self.min == self.max {
            max
        } else {
            format!("{}..{max}", self.min)
        }
    }
}

/// The table cells of a log line, or `None` for a line that is not a table row.
fn cells(line: &str) -> Option<Vec<String>> {
    let start = line.find('|')?;
    let body = line[start..].trim_end();
    if !body.ends_with('|') || body.len() < 2 {
        return None;
    }
    Some(
        body[1..body.len() - 1]
            .split('|')
            .map(|c| c.trim().to_string())
            .collect(),
    )
}

/// `16516`, `8K`, `inf` → bytes.
fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    if s == "inf" {
        return Some(u64::MAX);
    }
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1u64 << 10),
        'M' | 'm' => (&s[..s.len() - 1], 1 << 20),
        'G' | 'g' => (&s[..s.len() - 1], 1 << 30),
        'T' | 't' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

/// `0..8K`, `8193..inf`, `16516` → (min, max); a range whose start is past its end is not one
/// (found by the `ucx_proto_tables` fuzz target: such a row could never match a size).
pub fn parse_range(s: &str) -> Option<(u64, u64)> {
    match s.split_once("..") {
        Some((a, b)) => Some((parse_size(a)?, parse_size(b)?)).filter(|(min, max)| min <= max),
        None => parse_size(s).map(|v| (v, v)),
    }
}

/// Every protocol table in a UCX log.
pub fn parse(log: &str) -> Vec<ProtoTable> {
    let mut tables = Vec::new();
    let mut titles: Vec<String> = Vec::new();
    let mut columns: Option<(Option<usize>, usize, usize, usize)> = None;
    let mut rows: Vec<ProtoRow> = Vec::new();
    let mut flush = |titles: &mut Vec<String>, columns: &mut Option<_>, rows: &mut Vec<ProtoRow>| {
        if titles.len() >= 2 && !rows.is_empty() {
            tables.push(ProtoTable {
                endpoint: titles[0].clone(),
                operation: titles[1].clone(),
                rows: std::mem::take(rows),
            });
        }
        titles.clear();
        rows.clear();
        *columns = None;
    };
    for line in log.lines() {
        let Some(c) = cells(line) else { continue };
        if c.len() == 1 {
            if columns.is_some() || !rows.is_empty() || titles.len() >= 2 {
                flush(&mut titles, &mut columns, &mut rows);
            }
            titles.push(c[0].clone());
            continue;
        }
        let pos = |name: &str| c.iter().position(|x| x == name);
        if let (Some(r), Some(d), Some(cf)) = (pos("Range"), pos("Description"), pos("Config")) {
            columns = Some((pos("Count"), r, d, cf));
            continue;
        }
        let Some((count_i, range_i, desc_i, cfg_i)) = columns else {
            continue;
        };
        let get = |i: usize| c.get(i).cloned().unwrap_or_default();
        let range = get(range_i);
        if range.is_empty() {
            // A continuation line: the configuration of a multi-lane row wrapped.
            if let Some(last) = rows.last_mut() {
                let more = get(cfg_i);
                if !more.is_empty() {
                    last.config = format!("{} {more}", last.config);
                }
            }
            continue;
        }
        let Some((min, max)) = parse_range(&range) else {
            continue;
        };
        rows.push(ProtoRow {
            count: count_i.and_then(|i| get(i).parse().ok()),
            min,
            max,
            description: get(desc_i),
            config: get(cfg_i),
        });
    }
    flush(&mut titles, &mut columns, &mut rows);
    tables
}

/// The memory type UCX names after `marker` in an operation title. UCX writes host memory as
/// `host memory` and GPU memory with its device when it knows it: `cuda/GPU0`, `cuda/dev[1]`, or
/// plain `cuda` (recorded on an H200, NIXL 1.5.1's UCX 1.23). `host memory` → `host`,
/// `cuda/GPU0` → `cuda`.
pub fn memory_after<'a>(op: &'a str, marker: &str) -> Option<&'a str> {
    let rest = &op[op.find(marker)? + marker.len()..];
    let word = rest.split_whitespace().next()?;
    word.split('/').next()
}

/// The title of the receiver's tables: how it gets a rendezvous message's data.
const FETCH_TABLE: &str = "rendezvous data fetch";
/// The title of the sender's tables: how it sends a rendezvous message's data when the receiver
/// asked for it (a put scheme: `rendezvous data send(multi) from host memory to host`).
const SEND_TABLE: &str = "rendezvous data send";

fn is_loopback(t: &ProtoTable) -> bool {
    t.endpoint.split_whitespace().any(|w| w == "self")
}

/// Whether `op` is a table titled `title` for data between the case's memory types: `near`
/// names this side's memory, `far` the peer's, as UCX orders them (`rendezvous data fetch(multi)
/// into host memory from host`, `rendezvous data send(multi) from host memory to host`).
fn is_table_for(op: &str, title: &str, (near, far): (&str, &str), (mine, peers): (MemoryType, MemoryType)) -> bool {
    let Some(rest) = op.strip_prefix(title) else {
        return false;
    };
    let Some(near_at) = rest.find(near) else {
        return false;
    };
    memory_after(rest, near) == Some(mine.as_str())
        && memory_after(&rest[near_at + near.len()..], far) == Some(peers.as_str())
}

/// The receiving side's view of a rendezvous tag message of `size` bytes: the rows of its
/// "rendezvous data fetch" tables for the case's memory types whose range holds `size` (a
/// `used` row must have been used). Loopback (`self`) tables count only when nothing else
/// matches. Where tables disagree (UCX keeps one per variant: `(multi)`, plain), the worst
/// class is the view and every protocol is named. `None`: the tables say nothing about it.
pub fn receive_view(tables: &[ProtoTable], memory: MemoryPair, size: u64) -> Option<ProtocolView> {
    let ends = (memory.target, memory.initiator);
    view_of(tables, ProtocolSide::Target, size, |op| {
        is_table_for(op, FETCH_TABLE, (" into ", " from "), ends)
    })
}

/// The sending side's view of how it moved a rendezvous tag message of `size` bytes when the
/// receiver had it send the data (a put scheme, or a receiver's `(?)` fragmented row): the rows
/// of its "rendezvous data send" tables for the case's memory types, chosen as
/// [`receive_view`] chooses. UCX creates such a table only once a receiver asked this side to
/// send data; a sender whose receivers always read has none. `None`: the tables say nothing
/// about it.
pub fn send_view(tables: &[ProtoTable], memory: MemoryPair, size: u64) -> Option<ProtocolView> {
    let ends = (memory.initiator, memory.target);
    view_of(tables, ProtocolSide::Initiator, size, |op| {
        is_table_for(op, SEND_TABLE, (" from ", " to "), ends)
    })
}

/// `side`'s view from the rows of the tables `wanted` accepts whose range holds `size`.
fn view_of(
    tables: &[ProtoTable],
    side: ProtocolSide,
    size: u64,
    wanted: impl Fn(&str) -> bool,
) -> Option<ProtocolView> {
    let matching: Vec<(&ProtoTable, &ProtoRow)> = tables
        .iter()
        .filter(|t| wanted(&t.operation))
        .flat_map(|t| t.rows.iter().map(move |r| (t, r)))
        .filter(|(_, r)| r.min <= size && size <= r.max && r.count != Some(0))
        .collect();
    let remote: Vec<_> = matching.iter().filter(|(t, _)| !is_loopback(t)).copied().collect();
    let chosen = if remote.is_empty() { matching } else { remote };
    let mut views: Vec<ProtocolView> = Vec::new();
    for (_, row) in chosen {
        // "no data fetch" (a 0-byte message) names no transport: not a view.
        let Some(path) = data_path_from_info(&format!("{} {}", row.description, row.config)) else {
            continue;
        };
        let view = ProtocolView {
            side,
            protocol: format!("rendezvous {}", path.protocol),
            transports: path.transports,
            class: path.class,
            depends_on_peer: row.description.starts_with("(?)"),
        };
        if !views.contains(&view) {
            views.push(view);
        }
    }
    let worst = views.iter().min_by_key(|v| severity_rank(v.class))?.clone();
    let mut protocols: Vec<&str> = Vec::new();
    for v in &views {
        if !protocols.contains(&v.protocol.as_str()) {
            protocols.push(&v.protocol);
        }
    }
    Some(ProtocolView {
        protocol: protocols.join(" or "),
        depends_on_peer: views.iter().any(|v| v.depends_on_peer),
        ..worst
    })
}

#[cfg(test)]
#[path = "proto_tables_tests.rs"]
mod tests;
