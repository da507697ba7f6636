//! The geometry against figures worked out by hand (the arithmetic is in each test's comment),
//! and invariants every plan must keep: each decode rank's buffer is written exactly once, and
//! every read stays inside the prefill buffer.

use icb_kv::{KvDtype, KvGeometry, KvPart, KvRequest, KvShape, VllmSupport, builtin};

fn geometry(model: &str, isl: u64, page_size: u32, prefill_tp: u32, decode_tp: u32) -> KvGeometry {
    let shape = KvShape {
        page_size,
        prefill_tp,
        decode_tp,
        ..KvShape::new(isl)
    };
    let model = builtin(model).expect("a built-in model");
    KvRequest::new(model, shape)
        .expect("a valid request")
        .geometry()
        .clone()
}

/// DeepSeek-V3 (MLA), 4096 tokens, block 64 (FlashMLA's), bf16, TP8 → TP4.
/// Latent per token per layer: (512 + 64) × 2 B = 1152 B; one block: 64 × 1152 = 73 728 B.
/// Blocks: 4096 / 64 = 64. KV: 61 layers × 64 blocks × 73 728 = 287 834 112 B.
/// Each decode rank reads the whole latent from one prefill rank (2r): 61 × 64 = 3904
/// descriptors of 73 728 B.
#[test]
fn deepseek_v3_mla_tp8_to_tp4() {
    let g = geometry("deepseek-v3", 4096, 64, 8, 4);
    assert_eq!(g.blocks_per_layer, 64);
    assert_eq!(g.regions_per_layer, 1);
    assert_eq!(g.kv_bytes_per_request, 287_834_112);
    assert_eq!((g.prefill_block_bytes, g.decode_block_bytes), (73_728, 73_728));
    assert_eq!(
        g.bytes_read_per_request,
        4 * 287_834_112,
        "every decode rank reads the whole latent"
    );
    assert_eq!(g.vllm_support, VllmSupport::Supported);
    for (rank, plan) in g.decode_ranks.iter().enumerate() {
        assert_eq!(plan.reads.len(), 1, "MLA: one read per decode rank");
        let read = &plan.reads[0];
        assert_eq!(
            read.prefill_rank,
            2 * rank as u32,
            "the first of prefill ranks 2r, 2r+1"
        );
        assert_eq!((read.descriptors, read.descriptor_bytes), (3904, 73_728));
    }
    // Descriptor 65: region 1 (layer 1's latent), block 1: 1 × 64 × 73 728 + 73 728.
    let d = g.decode_ranks[3].reads[0].descriptor(65).expect("in range");
    assert_eq!((d.layer, d.part, d.block), (1, KvPart::Latent, 1));
    assert_eq!((d.src_offset, d.dst_offset, d.len), (4_792_320, 4_792_320, 73_728));
    assert!(g.notes.iter().any(|n| n.contains("MLA: each decode rank")));
    assert!(
        !g.notes.iter().any(|n| n.contains("FlashMLA")),
        "64-token blocks are FlashMLA's own"
    );
    let small_pages = geometry("deepseek-v3", 4096, 16, 8, 4);
    assert!(small_pages.notes.iter().any(|n| n.contains("FlashMLA")));
}

/// MLA with decode TP above prefill TP: decode rank r reads from r / (b/a).
#[test]
fn deepseek_r1_mla_tp2_to_tp8_reads_from_r_over_4() {
    let g = geometry("deepseek-r1", 1000, 64, 2, 8);
    // 1000 / 64 = 15.6: 16 blocks, the last one with 1000 - 15 × 64 = 40 tokens.
    assert_eq!(g.blocks_per_layer, 16);
    assert!(g.notes.iter().any(|n| n.contains("40 of 64")));
    let sources: Vec<u32> = g.decode_ranks.iter().map(|d| d.reads[0].prefill_rank).collect();
    assert_eq!(sources, [0, 0, 0, 0, 1, 1, 1, 1]);
    assert_eq!(g.readers_of(1), [4, 5, 6, 7]);
}

/// Llama-3.1-8B (8 KV heads, head_dim 128), 8192 tokens, block 16, bf16.
/// One head's block: 16 × 128 × 2 = 4096 B. Blocks: 512. KV: 32 layers × 2 (K, V) × 512
/// blocks × 8 heads × 4096 = 1 073 741 824 B (1 GiB, 128 KiB a token).
/// TP8 → TP16: decode ranks 2h and 2h+1 each hold a replica of head h and read it whole from
/// prefill rank h: 32 × 2 × 512 = 32 768 descriptors of 4096 B (128 MiB) each.
#[test]
fn llama_8b_decode_tp16_reads_head_replicas() {
    let g = geometry("llama-3.1-8b", 8192, 16, 8, 16);
    assert_eq!(g.kv_bytes_per_request, 1 << 30);
    assert_eq!((g.prefill_block_bytes, g.decode_block_bytes), (4096, 4096));
    assert_eq!(
        g.bytes_read_per_request,
        2 << 30,
        "each head is read by two decode ranks"
    );
    assert!(matches!(g.vllm_support, VllmSupport::Generalised(_)));
    for plan in &g.decode_ranks {
        let read = &plan.reads[0];
        assert_eq!(plan.reads.len(), 1);
        assert_eq!(plan.heads.start, plan.decode_rank / 2);
        assert_eq!(read.prefill_rank, plan.decode_rank / 2);
        assert_eq!(
            (read.descriptors, read.descriptor_bytes, read.bytes),
            (32_768, 4096, 128 << 20)
        );
        assert_eq!((read.src_offset_in_block, read.dst_offset_in_block), (0, 0));
    }
}

/// Llama-3.1-8B TP2 → TP16: prefill rank 0 holds heads 0..4 (16 384 B a block); decode rank 5
/// holds head 5 / 2 = 2 and reads it at 2 × 4096 = 8192 B into every prefill block.
/// Descriptor 1 (K of layer 0, block 1): src 16 384 + 8192 = 24 576, dst 4096.
/// Descriptor 512 (V of layer 0, block 0): src 512 × 16 384 + 8192 = 8 396 800, dst 512 × 4096.
#[test]
fn llama_8b_tp2_to_tp16_offsets_into_the_prefill_block() {
    let g = geometry("llama-3.1-8b", 8192, 16, 2, 16);
    assert_eq!(g.prefill_block_bytes, 16_384);
    let read = &g.decode_ranks[5].reads[0];
    assert_eq!((read.prefill_rank, read.src_offset_in_block), (0, 8192));
    let k = read.descriptor(1).expect("in range");
    assert_eq!(
        (k.part, k.block, k.src_offset, k.dst_offset),
        (KvPart::K, 1, 24_576, 4096)
    );
    let v = read.descriptor(512).expect("in range");
    assert_eq!((v.layer, v.part, v.block), (0, KvPart::V, 0));
    assert_eq!((v.src_offset, v.dst_offset), (8_396_800, 2_097_152));
}

/// TP16 → TP16 replicates on both sides: vLLM's connector supports it (offset 0, whole block).
#[test]
fn llama_8b_tp16_both_sides_is_vllm_supported() {
    let g = geometry("llama-3.1-8b", 8192, 16, 16, 16);
    assert_eq!(g.vllm_support, VllmSupport::Supported);
    assert!(g.decode_ranks.iter().all(|d| d.reads[0].prefill_rank == d.decode_rank));
}

/// Llama-3.1-70B (80 layers, 8 KV heads), 8192 tokens, block 16, bf16, TP8 → TP4.
/// KV: 80 × 2 × 512 × 8 × 4096 = 2 684 354 560 B (320 KiB a token).
/// Prefill blocks hold 1 head (4096 B), decode blocks 2 (8192 B). Decode rank 1 holds heads
/// 2..4 and reads prefill rank 2 (head 2, to offset 0) and 3 (head 3, to offset 4096):
/// 80 × 2 × 512 = 81 920 descriptors of 4096 B per read, 163 840 per rank.
#[test]
fn llama_70b_tp8_to_tp4_gathers_from_two_prefill_ranks() {
    let g = geometry("llama-3.1-70b", 8192, 16, 8, 4);
    assert_eq!(g.kv_bytes_per_request, 2_684_354_560);
    assert_eq!(
        g.bytes_read_per_request, g.kv_bytes_per_request,
        "no replicas: each head read once"
    );
    assert_eq!((g.prefill_block_bytes, g.decode_block_bytes), (4096, 8192));
    assert_eq!(g.vllm_support, VllmSupport::Supported);
    let plan = &g.decode_ranks[1];
    assert_eq!(plan.descriptors, 163_840);
    let sources: Vec<(u32, u64)> = plan
        .reads
        .iter()
        .map(|r| (r.prefill_rank, r.dst_offset_in_block))
        .collect();
    assert_eq!(sources, [(2, 0), (3, 4096)]);
    // Descriptor 513 of the read from prefill rank 3: V of layer 0, block 1.
    // src: 512 × 4096 + 4096 = 2 101 248; dst: 512 × 8192 + 8192 + 4096 = 4 206 592.
    let d = plan.reads[1].descriptor(513).expect("in range");
    assert_eq!((d.layer, d.part, d.block), (0, KvPart::V, 1));
    assert_eq!((d.src_offset, d.dst_offset, d.len), (2_101_248, 4_206_592, 4096));
    // The last descriptor (V of layer 79, block 511) ends where the prefill buffer does.
    let last = plan.reads[1].descriptor(81_919).expect("in range");
    assert_eq!((last.layer, last.part, last.block), (79, KvPart::V, 511));
    assert_eq!(last.src_offset + last.len, g.prefill_rank_bytes);
    assert_eq!(plan.reads[1].descriptor(81_920), None);
    assert_eq!(g.readers_of(3), [1]);
}

/// Qwen3-235B-A22B has 4 KV heads: TP8 prefill replicates each on two ranks. Decode TP2 rank 1
/// needs heads 2..4; of prefill ranks 4..8 (heads 2, 2, 3, 3) it reads 4 and 6 once each —
/// the generalisation of a case vLLM refuses.
#[test]
fn qwen3_235b_tp8_to_tp2_reads_each_replicated_head_once() {
    let g = geometry("qwen3-235b-a22b", 2048, 16, 8, 2);
    assert!(matches!(g.vllm_support, VllmSupport::Generalised(_)));
    let sources: Vec<u32> = g.decode_ranks[1].reads.iter().map(|r| r.prefill_rank).collect();
    assert_eq!(sources, [4, 6]);
    assert_eq!(g.bytes_read_per_request, g.kv_bytes_per_request);
}

/// fp8 halves every byte count.
#[test]
fn fp8_halves_the_bytes() {
    let model = builtin("llama-3.1-70b").expect("built in");
    let shape = KvShape {
        kv_dtype: KvDtype::Fp8,
        prefill_tp: 8,
        decode_tp: 8,
        ..KvShape::new(8192)
    };
    let g = KvRequest::new(model, shape).expect("valid").geometry().clone();
    assert_eq!(g.kv_bytes_per_request, 2_684_354_560 / 2);
}

/// The report carries the byte count as a plain JSON integer.
#[test]
fn kv_bytes_serialize_as_a_plain_integer() {
    let g = geometry("llama-3.1-70b", 8192, 16, 8, 4);
    let json = serde_json::to_value(&g).expect("serializable");
    assert_eq!(json["kv_bytes_per_request"], serde_json::json!(2_684_354_560u64));
    assert_eq!(json["attention"]["kind"], "gqa");
    assert_eq!(json["vllm_support"]["status"], "supported");
    assert_eq!(json["decode_ranks"][1]["reads"][1]["prefill_rank"], 3);
}

/// For every pairing: each decode rank's descriptors tile its buffer exactly once, and every
/// descriptor lies inside the prefill buffer it reads.
#[test]
fn every_plan_writes_each_decode_byte_once_and_reads_in_bounds() {
    let models = ["llama-3.1-8b", "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b"];
    let tps = [1, 2, 4, 8, 16, 32];
    let mut checked = 0;
    for model in models {
        for &a in &tps {
            for &b in &tps {
                let shape = KvShape {
                    page_size: 16,
                    prefill_tp: a,
                    decode_tp: b,
                    ..KvShape::new(40)
                };
                let model = builtin(model).expect("built in");
                let Ok(request) = KvRequest::new(model.clone(), shape) else {
                    continue;
                };
                check_tiling(request.geometry(), &format!("{} TP{a}→TP{b}", model.name));
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 4 * 6 * 6, "every model accepts every TP size listed");
}

fn check_tiling(g: &KvGeometry, label: &str) {
    for plan in &g.decode_ranks {
        let mut written: Vec<(u64, u64)> = Vec::new();
        for read in &plan.reads {
            for d in read.descriptors() {
                assert!(
                    d.src_offset + d.len <= g.prefill_rank_bytes,
                    "{label}: read past the prefill buffer"
                );
                written.push((d.dst_offset, d.dst_offset + d.len));
            }
        }
        written.sort_unstable();
        let mut end = 0;
        for (start, stop) in written {
            assert_eq!(
                start, end,
                "{label} decode rank {}: a gap or an overlap",
                plan.decode_rank
            );
            end = stop;
        }
        assert_eq!(
            end, g.decode_rank_bytes,
            "{label} decode rank {}: buffer not filled",
            plan.decode_rank
        );
    }
}
