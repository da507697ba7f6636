//! icb-control: the control protocol `serve` and `connect` speak over TCP, both engines' (UCX's
//! and NIXL's): the messages and the bounds every received one is checked against
//! ([`messages`]), and the frame format that carries them ([`wire`]: magic, version, a bounded
//! length, a JSON body).
//!
//! Why its own crate: this is pure protocol (types, validation, bytes in and out of any
//! `AsyncRead`/`AsyncWrite`), with no UCX, NIXL, CUDA or sockets. icb-engine re-exports it as
//! `icb_engine::{messages, wire}` and builds its sessions on it; the `control_frame` and
//! `control_message` fuzz targets (`fuzz/`) depend on it alone, so their sanitizer build does not
//! compile the engines and their FFI crates.
#![forbid(unsafe_code)]

pub mod messages;
pub mod wire;

pub use wire::{MAX_FRAME_BYTES, PROTOCOL_VERSION};
