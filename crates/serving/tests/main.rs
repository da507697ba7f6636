//! icb-serving's tests: one binary (issue 37).

mod common;
mod figures;
mod prometheus;
