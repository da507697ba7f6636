//! The one signal handler of the binary, `icb_interrupt`'s (what it does and when a command
//! claims it is said there).

pub use icb_interrupt::{Interrupt, Interrupted, signal_name};
