//! Who reads what: per decode rank, the prefill rank(s) it pulls from and the descriptors of
//! each read, laid out as vLLM's NIXL connector lays them out.
//!
//! The buffer model. A rank's buffer for one request holds, back to back, one region per
//! layer and part (K then V for GQA, the latent for MLA) in the order vLLM registers them
//! (`NixlConnectorWorker.register_kv_caches`); each region holds the request's blocks
//! `0..blocks_per_layer`, each block `heads_on_rank × page_size × head_elements × dtype`
//! bytes, heads outermost (the HND layout `NixlConnector.get_required_kvcache_layout` asks
//! for), so one head's slice of a block is contiguous. vLLM's regions hold the whole cache and
//! a request's block ids are scattered; the offsets here are those of a request that owns
//! blocks 0..n of a buffer sized for it, which is what a benchmark allocates.
//!
//! The descriptor order within a read is region-major, then block
//! (`NixlConnectorWorker._get_block_descs_ids`: `region_id * num_blocks + block_id`).

use crate::KvError;
use crate::model::{Attention, KvModel};
use crate::request::{KvDtype, KvShape};
use serde::Serialize;

/// KV heads `start..end` (for MLA, `0..1`: the latent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct HeadRange {
    pub start: u32,
    pub end: u32,
}

impl HeadRange {
    pub fn len(&self) -> u32 {
        self.end.saturating_sub(self.start)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn overlap(&self, other: &HeadRange) -> HeadRange {
        let start = self.start.max(other.start);
        HeadRange {
            start,
            end: self.end.min(other.end).max(start),
        }
    }
}

/// Which part of a layer a region holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum KvPart {
    K,
    V,
    Latent,
}

/// One descriptor pair of a read: `len` bytes from `src_offset` of the prefill rank's buffer
/// to `dst_offset` of the decode rank's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Descriptor {
    pub layer: u32,
    pub part: KvPart,
    pub block: u64,
    pub src_offset: u64,
    pub dst_offset: u64,
    pub len: u64,
}

/// One decode rank's read from one prefill rank: `descriptors` equal-sized pieces, one per
/// region and block, given by strides so a report stays small (11k … 100k+ descriptors per
/// rank are common); [`RankRead::descriptors`] lists them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RankRead {
    pub prefill_rank: u32,
    /// The KV heads this read carries.
    pub heads: HeadRange,
    /// `layers × regions_per_layer × blocks`.
    pub descriptors: u64,
    /// The size of every descriptor.
    pub descriptor_bytes: u64,
    /// `descriptors × descriptor_bytes`.
    pub bytes: u64,
    pub blocks: u64,
    pub regions_per_layer: u32,
    /// Source (prefill buffer): block `j` of region `r` starts at
    /// `r × src_region_bytes + j × src_block_bytes`; the read starts `src_offset_in_block` in.
    pub src_region_bytes: u64,
    pub src_block_bytes: u64,
    pub src_offset_in_block: u64,
    /// Destination (decode buffer), the same way.
    pub dst_region_bytes: u64,
    pub dst_block_bytes: u64,
    pub dst_offset_in_block: u64,
}

impl RankRead {
    /// Descriptor `index` in posting order (region-major, then block); `None` past the end.
    pub fn descriptor(&self, index: u64) -> Option<Descriptor> {
        if index >= self.descriptors || self.blocks == 0 {
            return None;
        }
        let (region, block) = (index / self.blocks, index % self.blocks);
        let per_layer = u64::from(self.regions_per_layer.max(1));
        let part = match (self.regions_per_layer, region % per_layer) {
            (1, _) => KvPart::Latent,
            (_, 0) => KvPart::K,
            _ => KvPart::V,
        };
        // In range by construction: the plan computed the buffer sizes with checked arithmetic.
        Some(Descriptor {
            layer: u32::try_from(region / per_layer).unwrap_or(u32::MAX),
            part,
            block,
            src_offset: region * self.src_region_bytes + block * self.src_block_bytes + self.src_offset_in_block,
            dst_offset: region * self.dst_region_bytes + block * self.dst_block_bytes + self.dst_offset_in_block,
            len: self.descriptor_bytes,
        })
    }

    /// Every descriptor, in posting order.
    pub fn descriptors(&self) -> impl Iterator<Item = Descriptor> + '_ {
        (0..self.descriptors).filter_map(|i| self.descriptor(i))
    }
}

/// What one decode rank pulls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DecodeRankPlan {
    pub decode_rank: u32,
    /// The KV heads this rank holds (a replica's single head when TP exceeds the heads).
    pub heads: HeadRange,
    pub reads: Vec<RankRead>,
    /// Over all reads.
    pub descriptors: u64,
    pub bytes: u64,
}

/// Whether vLLM's NIXL connector does this transfer, or this crate extends it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "detail", rename_all = "snake_case")]
pub enum VllmSupport {
    Supported,
    /// vLLM refuses this pairing; the plan is the natural generalisation, said here.
    Generalised(String),
}

/// The KV transfer of one request from prefill TP `a` to decode TP `b`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct KvGeometry {
    pub model: String,
    pub attention: Attention,
    pub layers: u32,
    pub isl: u64,
    pub page_size: u32,
    pub kv_dtype: KvDtype,
    pub prefill_tp: u32,
    pub decode_tp: u32,
    /// `ceil(isl / page_size)`: the last block moves whole even when partly filled.
    pub blocks_per_layer: u64,
    /// 2 (K, V) for GQA, 1 (latent) for MLA.
    pub regions_per_layer: u32,
    /// The request's KV, each head counted once, in whole blocks.
    pub kv_bytes_per_request: u64,
    /// What all decode ranks read together: above `kv_bytes_per_request` when decode ranks
    /// hold replicas (TP above the KV heads, MLA).
    pub bytes_read_per_request: u64,
    /// One block of one region on one prefill rank.
    pub prefill_block_bytes: u64,
    pub decode_block_bytes: u64,
    /// One rank's buffer for the request (all its regions).
    pub prefill_rank_bytes: u64,
    pub decode_rank_bytes: u64,
    pub vllm_support: VllmSupport,
    pub decode_ranks: Vec<DecodeRankPlan>,
    pub notes: Vec<String>,
}

impl KvGeometry {
    /// The decode ranks that read from `prefill_rank`.
    pub fn readers_of(&self, prefill_rank: u32) -> Vec<u32> {
        self.decode_ranks
            .iter()
            .filter(|d| d.reads.iter().any(|r| r.prefill_rank == prefill_rank))
            .map(|d| d.decode_rank)
            .collect()
    }
}

fn mul(a: u64, b: u64, what: &'static str) -> Result<u64, KvError> {
    a.checked_mul(b).ok_or(KvError::Overflow { what })
}

/// The KV heads `rank` of a TP group of `tp` holds: a contiguous `heads / tp` share, or, when
/// `tp` exceeds the heads, one head shared by `tp / heads` consecutive ranks (vLLM's GQA
/// weight partitioning; `_physical_head_range` in vllm/distributed/kv_transfer/kv_connector/
/// utils.py). The callers have checked that one of `tp`, `heads` divides the other.
fn heads_on_rank(tp: u32, heads: u32, rank: u32) -> HeadRange {
    if tp <= heads {
        let per_rank = heads / tp;
        HeadRange {
            start: rank * per_rank,
            end: (rank + 1) * per_rank,
        }
    } else {
        let head = rank / (tp / heads);
        HeadRange {
            start: head,
            end: head + 1,
        }
    }
}

/// The prefill ranks decode rank `rank` considers, in order: vLLM's
/// `TpKVTopology.get_target_remote_ranks` (one rank `rank / (b/a)` when `b ≥ a`, else the
/// `a/b` ranks `rank·(a/b) + i`).
fn candidate_sources(prefill_tp: u32, decode_tp: u32, rank: u32) -> std::ops::Range<u32> {
    if decode_tp >= prefill_tp {
        let source = rank / (decode_tp / prefill_tp);
        source..source + 1
    } else {
        let fan_in = prefill_tp / decode_tp;
        rank * fan_in..(rank + 1) * fan_in
    }
}

/// Byte sizes shared by every read.
struct Sizes {
    head_block_bytes: u64,
    prefill_block_bytes: u64,
    decode_block_bytes: u64,
    blocks: u64,
    regions: u64,
    regions_per_layer: u32,
}

/// The geometry of an already-validated request (see [`crate::KvRequest::new`]).
pub(crate) fn plan(model: &KvModel, shape: &KvShape) -> Result<KvGeometry, KvError> {
    let sizes = sizes(model, shape)?;
    let heads = model.attention.kv_heads();
    let blocks_in_buffer = mul(sizes.regions, sizes.blocks, "regions × blocks")?;
    // The buffers first: every offset and per-rank sum below stays inside them, so once they
    // fit in u64 the rest does too.
    let prefill_rank_bytes = mul(blocks_in_buffer, sizes.prefill_block_bytes, "a prefill rank's buffer")?;
    let decode_rank_bytes = mul(blocks_in_buffer, sizes.decode_block_bytes, "a decode rank's buffer")?;
    let kv_bytes = mul(
        mul(blocks_in_buffer, u64::from(heads), "blocks × heads")?,
        sizes.head_block_bytes,
        "KV bytes",
    )?;
    let decode_ranks: Vec<DecodeRankPlan> = (0..shape.decode_tp)
        .map(|rank| plan_rank(heads, shape, &sizes, rank))
        .collect::<Result<_, _>>()?;
    let bytes_read = decode_ranks.iter().try_fold(0u64, |sum, d| sum.checked_add(d.bytes));
    Ok(KvGeometry {
        model: model.name.clone(),
        attention: model.attention,
        layers: model.layers,
        isl: shape.isl,
        page_size: shape.page_size,
        kv_dtype: shape.kv_dtype,
        prefill_tp: shape.prefill_tp,
        decode_tp: shape.decode_tp,
        blocks_per_layer: sizes.blocks,
        regions_per_layer: sizes.regions_per_layer,
        kv_bytes_per_request: kv_bytes,
        bytes_read_per_request: bytes_read.ok_or(KvError::Overflow {
            what: "bytes read per request",
        })?,
        prefill_block_bytes: sizes.prefill_block_bytes,
        decode_block_bytes: sizes.decode_block_bytes,
        prefill_rank_bytes,
        decode_rank_bytes,
        vllm_support: vllm_support(&model.attention, shape),
        decode_ranks,
        notes: notes(model, shape),
    })
}

fn sizes(model: &KvModel, shape: &KvShape) -> Result<Sizes, KvError> {
    let heads = model.attention.kv_heads();
    let page = u64::from(shape.page_size);
    let head_block_bytes = mul(
        mul(page, model.attention.head_elements(), "block elements")?,
        shape.kv_dtype.bytes(),
        "block bytes",
    )?;
    // A rank holds heads / tp heads, or one (a replica) when tp exceeds them.
    let rank_block = |tp: u32| mul(u64::from((heads / tp).max(1)), head_block_bytes, "block bytes per rank");
    let regions_per_layer = model.attention.regions_per_layer();
    Ok(Sizes {
        head_block_bytes,
        prefill_block_bytes: rank_block(shape.prefill_tp)?,
        decode_block_bytes: rank_block(shape.decode_tp)?,
        blocks: shape.isl.div_ceil(page),
        regions: u64::from(model.layers) * u64::from(regions_per_layer),
        regions_per_layer,
    })
}

/// One decode rank: each candidate source contributes the heads it holds that this rank needs
/// and no earlier source gave (a replicated prefill side holds the same head on several
/// ranks: read it once, as vLLM's `HeteroTPTransferConfig` picks `fa_read_targets`).
fn plan_rank(heads: u32, shape: &KvShape, sizes: &Sizes, rank: u32) -> Result<DecodeRankPlan, KvError> {
    let needed = heads_on_rank(shape.decode_tp, heads, rank);
    let mut reads: Vec<RankRead> = Vec::new();
    for source in candidate_sources(shape.prefill_tp, shape.decode_tp, rank) {
        let held = heads_on_rank(shape.prefill_tp, heads, source);
        let carried = needed.overlap(&held);
        if carried.is_empty() || reads.iter().any(|r| r.heads.overlap(&carried) == carried) {
            continue;
        }
        reads.push(read(sizes, source, carried, needed.start, held.start)?);
    }
    let descriptors = reads.iter().map(|r| r.descriptors).sum();
    let bytes = reads.iter().map(|r| r.bytes).sum();
    Ok(DecodeRankPlan {
        decode_rank: rank,
        heads: needed,
        reads,
        descriptors,
        bytes,
    })
}

fn read(sizes: &Sizes, source: u32, carried: HeadRange, dst_first: u32, src_first: u32) -> Result<RankRead, KvError> {
    let descriptors = mul(sizes.regions, sizes.blocks, "descriptors")?;
    let descriptor_bytes = mul(u64::from(carried.len()), sizes.head_block_bytes, "descriptor bytes")?;
    let head_offset = |first: u32| u64::from(carried.start - first) * sizes.head_block_bytes;
    Ok(RankRead {
        prefill_rank: source,
        heads: carried,
        descriptors,
        descriptor_bytes,
        bytes: mul(descriptors, descriptor_bytes, "bytes per read")?,
        blocks: sizes.blocks,
        regions_per_layer: sizes.regions_per_layer,
        src_region_bytes: mul(sizes.blocks, sizes.prefill_block_bytes, "region bytes")?,
        src_block_bytes: sizes.prefill_block_bytes,
        src_offset_in_block: head_offset(src_first),
        dst_region_bytes: mul(sizes.blocks, sizes.decode_block_bytes, "region bytes")?,
        dst_block_bytes: sizes.decode_block_bytes,
        dst_offset_in_block: head_offset(dst_first),
    })
}

/// Where this pairing stands in vLLM's NIXL connector
/// (vllm/distributed/kv_transfer/kv_connector/v1/nixl_connector.py,
/// `NixlConnectorWorker._validate_remote_agent_handshake`).
fn vllm_support(attention: &Attention, shape: &KvShape) -> VllmSupport {
    let heads = attention.kv_heads();
    let (a, b) = (shape.prefill_tp, shape.decode_tp);
    if attention.is_mla() || a == b {
        return VllmSupport::Supported;
    }
    if a > b && a > heads {
        return VllmSupport::Generalised(format!(
            "vLLM refuses prefill TP > decode TP when the prefill side replicates the {heads} KV heads; each decode rank here reads every distinct head once, from the first of its prefill ranks that holds it"
        ));
    }
    if b > a && b > heads && a <= heads {
        return VllmSupport::Generalised(format!(
            "vLLM expects the prefill block to be decode block × {} and refuses decode TP above the {heads} KV heads unless prefill TP is too; each decode rank here reads its one head from the prefill rank that holds it",
            b / a
        ));
    }
    VllmSupport::Supported
}

fn notes(model: &KvModel, shape: &KvShape) -> Vec<String> {
    let mut notes = model.notes.clone();
    let tail = shape.isl % u64::from(shape.page_size);
    if tail != 0 {
        notes.push(format!(
            "the last block holds {tail} of {} tokens and moves whole (descriptors are whole blocks)",
            shape.page_size
        ));
    }
    if model.attention.is_mla() && !shape.page_size.is_multiple_of(64) {
        notes.push(format!(
            "MLA on CUDA: vLLM's FlashMLA backend uses 64-token blocks (it raises --block-size to 64); this plan uses {}",
            shape.page_size
        ));
    }
    if model.attention.is_mla() && shape.prefill_tp > shape.decode_tp {
        notes.push("MLA: each decode rank reads the latent from the first of its prefill ranks only; vLLM notifies the others without reading".to_string());
    }
    notes
}
