//! The `pair` result: one struct tree = one JSON schema (`ic-bench.pair/v1`, see `docs/schema.md`).
//!
//! Fields are only ever added within a schema version; renaming or removing one bumps [`PAIR_SCHEMA`].

/// Schema identifier written into every pair report.
pub const PAIR_SCHEMA: &str = "ic-bench.pair/v1";

mod baseline;
mod case;
mod control;
mod criteria;
mod cuda_alloc;
mod gate;
mod gate_pair;
mod kv;
mod report;
mod settings;
mod transport;
mod verdict;

pub use baseline::*;
pub use case::*;
pub use control::*;
pub use criteria::*;
pub use cuda_alloc::*;
pub use gate::*;
pub use kv::*;
pub use report::*;
pub use settings::*;
pub use transport::*;
pub use verdict::*;
