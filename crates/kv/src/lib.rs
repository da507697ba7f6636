//! icb-kv: the KV transfer a disaggregated deployment really does for one request.
//!
//! Given a model (a built-in name or a Hugging Face `config.json`), a prompt length, a block
//! size, a KV dtype and the prefill and decode TP sizes `a` and `b`, [`KvRequest::new`] checks
//! the shape the way the engine would and computes a [`KvGeometry`]: the KV bytes of the
//! request (a plain integer), blocks per layer, bytes per block per rank, and for every decode
//! rank the reads it posts — from which prefill rank, how many descriptors (layers × K/V ×
//! blocks; MLA has one latent region), each descriptor's size and its offsets in the prefill
//! and decode buffers. Nothing moves here: `pair --kv-shape` (issue 20) feeds this to the
//! transfer engines. The crate is pure apart from reading a config.json given by path.
//!
//! Sources. The model numbers are the `config.json` fields of each model's Hugging Face
//! repository ([`model`]). The layout follows vLLM's NIXL connector,
//! `vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py` (`NixlConnectorWorker`:
//! `register_kv_caches`, `add_remote_agent`, `_validate_remote_agent_handshake`,
//! `_read_blocks_for_req`, `_get_block_descs_ids`) and `TpKVTopology` in
//! `vllm/distributed/kv_transfer/kv_connector/utils.py` (`tp_ratio`, `is_kv_replicated`,
//! `get_target_remote_ranks`):
//!
//! - K and V are separate regions per layer; blocks are HND, so a head's slice of a block is
//!   contiguous and a TP split is a byte range of every block.
//! - `b ≥ a`: decode rank `r` reads from prefill rank `r / (b/a)` the heads it holds, at offset
//!   `(r mod b/a) × decode block bytes` in every block (vLLM's `rank_offset`).
//! - `a > b`: decode rank `r` reads from the `a/b` prefill ranks `r·(a/b) + i`, each whole
//!   prefill block landing at `i × prefill block bytes` in its own block (vLLM's
//!   `src_xfer_handles_by_tp_ratio`). vLLM refuses this when the prefill side replicates the
//!   KV heads (`a` > KV heads); here each distinct head is read once, as vLLM's newer
//!   `HeteroTPTransferConfig` does for hybrid models. (Older vLLM counted `a` = KV heads as
//!   replicated too — `is_kv_replicated` was `tp // heads >= 1` — and so refused e.g.
//!   Llama-3.1-70B TP8 → TP4; the current rule is `tp > heads`, which this crate follows.)
//! - TP above the KV heads: `tp / heads` consecutive ranks hold a replica of one head; a
//!   decode rank reads its head from the prefill rank holding it. vLLM's connector handles
//!   this when both sides replicate; with a prefill side that does not (e.g. TP 8 → TP 16 of
//!   Llama-3.1-8B's 8 heads) its handshake check refuses, and the plan here is the natural
//!   generalisation. [`KvGeometry::vllm_support`] says which case a plan is.
//! - MLA: the latent is the same on every rank; a decode rank reads it whole from one prefill
//!   rank (the first of its `a/b` when `a > b`, vLLM's "MLA opt" in `_read_blocks_for_req`).
//!
//! Left out, with a note in the geometry: sliding-window layers (counted as full), prefill and
//! decode block sizes that differ, per-token fp8 scales, and prefix-cache hits (a request here
//! moves all its blocks).
#![forbid(unsafe_code)]

mod error;
pub mod geometry;
pub mod model;
pub mod request;

pub use error::KvError;
pub use geometry::{DecodeRankPlan, Descriptor, HeadRange, KvGeometry, KvPart, RankRead, VllmSupport};
pub use model::{Attention, KvModel, builtin, builtin_names};
pub use request::{
    DEFAULT_PAGE_SIZE, KvDtype, KvFlags, KvRequest, KvShape, KvShapeText, ModelSpec, parse_isl, parse_page_size,
    parse_tp,
};
