//! The flags' values, config.json parsing, and every refusal: each a typed error whose one
//! line names what to change.

use icb_kv::{
    Attention, KvDtype, KvError, KvFlags, KvModel, KvRequest, KvShape, KvShapeText, ModelSpec, builtin, builtin_names,
    parse_isl, parse_page_size, parse_tp,
};
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures").join(name)
}

fn request(model: KvModel, prefill_tp: u32, decode_tp: u32) -> Result<KvRequest, KvError> {
    KvRequest::new(
        model,
        KvShape {
            prefill_tp,
            decode_tp,
            ..KvShape::new(8192)
        },
    )
}

#[test]
fn builtin_names_cover_the_issue_models() {
    let names = builtin_names();
    for wanted in [
        "llama-3.1-8b",
        "llama-3.1-70b",
        "qwen3-32b",
        "qwen3-235b-a22b",
        "deepseek-v3",
        "deepseek-r1",
        "gpt-oss-120b",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
    let v3 = builtin("DeepSeek-V3").expect("case-insensitive");
    assert_eq!(v3.layers, 61);
    assert_eq!(
        v3.attention,
        Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64
        }
    );
    assert!(v3.source.contains("deepseek-ai/DeepSeek-V3"));
    let oss = builtin("openai/gpt-oss-120b").expect("by repository id");
    assert!(
        oss.notes.iter().any(|n| n.contains("sliding")),
        "the sliding-window layers are noted"
    );
}

#[test]
fn kv_shape_parses_names_repository_ids_and_paths() {
    assert_eq!(
        "llama-3.1-70b".parse::<ModelSpec>(),
        Ok(ModelSpec::BuiltIn("llama-3.1-70b".into()))
    );
    assert_eq!(
        "meta-llama/Llama-3.1-8B".parse::<ModelSpec>(),
        Ok(ModelSpec::BuiltIn("llama-3.1-8b".into())),
        "the base repository names the same KV shape as -Instruct"
    );
    assert_eq!(
        "./my/config.json".parse::<ModelSpec>(),
        Ok(ModelSpec::ConfigPath("./my/config.json".into()))
    );
    let err = "llama-4".parse::<ModelSpec>().expect_err("unknown");
    let line = err.to_string();
    assert!(matches!(err, KvError::UnknownModel { .. }));
    assert!(
        line.contains("llama-3.1-8b") && line.contains("deepseek-v3") && line.contains("config.json"),
        "{line}"
    );
}

#[test]
fn config_json_fixture_parses_like_the_builtin() {
    let parsed = KvModel::from_config_path(&fixture("llama-3.1-8b-config.json")).expect("parses");
    let built_in = builtin("llama-3.1-8b").expect("built in");
    assert_eq!(
        (parsed.layers, parsed.attention_heads, parsed.attention),
        (32, 32, built_in.attention)
    );
    let mla = KvModel::from_config_path(&fixture("deepseek-v3-config.json")).expect("parses");
    assert_eq!(
        mla.attention,
        Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64
        }
    );
    // The whole path: flags naming the file give the same geometry as the built-in name.
    let shape = KvShape {
        prefill_tp: 8,
        decode_tp: 4,
        ..KvShape::new(8192)
    };
    let from_file = KvFlags {
        kv_shape: ModelSpec::ConfigPath(fixture("llama-3.1-8b-config.json")),
        shape,
    };
    let from_name = KvFlags {
        kv_shape: ModelSpec::BuiltIn("llama-3.1-8b".into()),
        shape,
    };
    let (a, b) = (
        KvRequest::from_flags(&from_file).expect("ok"),
        KvRequest::from_flags(&from_name).expect("ok"),
    );
    assert_eq!(a.geometry().kv_bytes_per_request, b.geometry().kv_bytes_per_request);
    assert_eq!(a.geometry().decode_ranks, b.geometry().decode_ranks);
}

#[test]
fn config_json_defaults_and_nesting() {
    // No num_key_value_heads: MHA, one KV head per query head. No head_dim: 2048 / 16.
    let mha = KvModel::from_config_json(
        r#"{"num_hidden_layers": 24, "num_attention_heads": 16, "hidden_size": 2048}"#,
        "mha",
    )
    .expect("parses");
    assert_eq!(
        mha.attention,
        Attention::Gqa {
            kv_heads: 16,
            head_dim: 128
        }
    );
    // An explicit head_dim wins over hidden_size / heads (Qwen3-32B: 5120 / 64 would be 80).
    let qwen = r#"{"num_hidden_layers": 64, "num_attention_heads": 64, "num_key_value_heads": 8, "hidden_size": 5120, "head_dim": 128}"#;
    let qwen = KvModel::from_config_json(qwen, "qwen").expect("parses");
    assert_eq!(
        qwen.attention,
        Attention::Gqa {
            kv_heads: 8,
            head_dim: 128
        }
    );
    // A multimodal config keeps the language model under text_config.
    let nested = r#"{"model_type": "vlm", "text_config": {"num_hidden_layers": 48, "num_attention_heads": 40, "num_key_value_heads": 8, "head_dim": 128, "sliding_window": 4096}}"#;
    let nested = KvModel::from_config_json(nested, "vlm").expect("parses");
    assert_eq!(nested.layers, 48);
    assert_eq!(nested.notes.len(), 1, "the sliding window is noted");
}

#[test]
fn config_json_missing_fields_are_named() {
    let cases = [
        (
            r#"{"num_attention_heads": 32, "hidden_size": 4096}"#,
            "num_hidden_layers",
        ),
        (
            r#"{"num_hidden_layers": 32, "hidden_size": 4096}"#,
            "num_attention_heads",
        ),
        (r#"{"num_hidden_layers": 32, "num_attention_heads": 32}"#, "hidden_size"),
        (
            r#"{"num_hidden_layers": 61, "num_attention_heads": 128, "kv_lora_rank": 512}"#,
            "qk_rope_head_dim",
        ),
        (
            r#"{"num_hidden_layers": "32", "num_attention_heads": 32, "head_dim": 128}"#,
            "num_hidden_layers",
        ),
    ];
    for (json, field) in cases {
        let err = KvModel::from_config_json(json, "cfg.json").expect_err(field);
        assert!(
            matches!(err, KvError::ConfigMissingField { field: f, .. } if f == field),
            "{field}: {err}"
        );
        let line = err.to_string();
        assert!(
            line.contains(field) && line.contains("cfg.json") && !line.contains('\n'),
            "{line}"
        );
    }
    let odd = r#"{"num_hidden_layers": 2, "num_attention_heads": 3, "hidden_size": 100}"#;
    assert!(matches!(
        KvModel::from_config_json(odd, "odd"),
        Err(KvError::ConfigInconsistent { field: "head_dim", .. })
    ));
    assert!(matches!(
        KvModel::from_config_json("[1, 2]", "list"),
        Err(KvError::ConfigNotJson { .. })
    ));
    assert!(matches!(
        KvModel::from_config_json("{oops", "broken"),
        Err(KvError::ConfigNotJson { .. })
    ));
    let dir = ModelSpec::ConfigPath(fixture(""))
        .load()
        .expect_err("a directory without config.json");
    assert!(dir.to_string().contains("config.json"), "{dir}");
    let repo_id = "mistralai/Mistral-7B-v0.1"
        .parse::<ModelSpec>()
        .expect("path-like")
        .load()
        .expect_err("not built in");
    assert!(
        matches!(repo_id, KvError::UnknownModel { .. }),
        "an org/model id that is no file: {repo_id}"
    );
    let missing = ModelSpec::ConfigPath(fixture("no-such-config.json"))
        .load()
        .expect_err("no file");
    assert!(matches!(missing, KvError::ConfigUnreadable { .. }));
    assert!(missing.to_string().contains("no-such-config.json"));
}

#[test]
fn flag_values_parse_and_refuse() {
    assert_eq!(parse_isl("8192"), Ok(8192));
    assert_eq!(parse_isl("131_072"), Ok(131_072));
    assert_eq!(parse_page_size("16"), Ok(16));
    assert_eq!(parse_tp("--decode-tp", "8"), Ok(8));
    assert_eq!("FP8".parse::<KvDtype>(), Ok(KvDtype::Fp8));
    assert_eq!("bfloat16".parse::<KvDtype>().map(KvDtype::bytes), Ok(2));
    for (result, flag) in [
        (parse_isl("0").map(|_| ()), "--isl"),
        (parse_isl("8k").map(|_| ()), "--isl"),
        (parse_page_size("-16").map(|_| ()), "--page-size"),
        (parse_page_size("99999999999").map(|_| ()), "--page-size"),
        (parse_tp("--prefill-tp", "zero").map(|_| ()), "--prefill-tp"),
        ("int4".parse::<KvDtype>().map(|_| ()), "--kv-dtype"),
    ] {
        let err = result.expect_err(flag);
        assert!(matches!(err, KvError::BadValue { flag: f, .. } if f == flag), "{err}");
    }
}

#[test]
fn shape_text_fills_the_defaults_and_names_the_bad_flag() {
    let defaults = KvShapeText::default().shape(Some(1 << 30)).unwrap();
    assert_eq!(
        defaults,
        KvShape {
            isl: 8192,
            max_rank_bytes: Some(1 << 30),
            ..KvShape::new(8192)
        }
    );
    let text = KvShapeText {
        prefill_tp: Some("8".into()),
        decode_tp: Some("4".into()),
        kv_dtype: Some("fp8".into()),
        ..KvShapeText::default()
    };
    let flags = text.flags("llama-3.1-70b", None).unwrap();
    assert_eq!(
        (flags.shape.prefill_tp, flags.shape.decode_tp, flags.shape.kv_dtype),
        (8, 4, KvDtype::Fp8)
    );
    let bad = KvShapeText {
        decode_tp: Some("0".into()),
        ..KvShapeText::default()
    };
    let err = bad.shape(None).expect_err("TP 0");
    assert!(
        matches!(
            err,
            KvError::BadValue {
                flag: "--decode-tp",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn tp_sizes_the_engine_refuses() {
    // 12 does not divide Llama-3.1-8B's 32 query heads.
    let err = request(builtin("llama-3.1-8b").expect("built in"), 12, 12).expect_err("refused");
    assert!(
        matches!(
            err,
            KvError::TpMismatch {
                flag: "--prefill-tp",
                tp: 12,
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("32 attention heads"));
    // 6 divides 12 query heads but neither divides 4 KV heads nor is a multiple of them.
    let odd = r#"{"num_hidden_layers": 2, "num_attention_heads": 12, "num_key_value_heads": 4, "head_dim": 64}"#;
    let err = request(KvModel::from_config_json(odd, "odd").expect("parses"), 2, 6).expect_err("refused");
    assert!(
        matches!(
            err,
            KvError::TpMismatch {
                flag: "--decode-tp",
                tp: 6,
                ..
            }
        ),
        "{err}"
    );
    let line = err.to_string();
    assert!(
        line.contains("4 KV heads") && line.contains("one of 1, 2, 4, 12"),
        "{line}"
    );
    // MLA's latent is replicated: only the query heads bound the TP size.
    assert!(request(builtin("deepseek-v3").expect("built in"), 16, 64).is_ok());
}

#[test]
fn tp_sizes_that_are_not_multiples_of_each_other() {
    let mha = r#"{"num_hidden_layers": 2, "num_attention_heads": 24, "head_dim": 64}"#;
    let err = request(KvModel::from_config_json(mha, "mha").expect("parses"), 4, 6).expect_err("refused");
    assert_eq!(err, KvError::TpRatio { prefill: 4, decode: 6 });
    assert!(err.to_string().contains("--prefill-tp 4 and --decode-tp 6"));
}

#[test]
fn zero_values_built_by_hand_are_refused() {
    let model = builtin("llama-3.1-8b").expect("built in");
    assert_eq!(KvRequest::new(model.clone(), KvShape::new(0)), Err(KvError::ZeroIsl));
    let no_page = KvShape {
        page_size: 0,
        ..KvShape::new(16)
    };
    assert!(matches!(
        KvRequest::new(model.clone(), no_page),
        Err(KvError::BadValue {
            flag: "--page-size",
            ..
        })
    ));
    let no_tp = KvShape {
        decode_tp: 0,
        ..KvShape::new(16)
    };
    assert!(matches!(
        KvRequest::new(model, no_tp),
        Err(KvError::BadValue {
            flag: "--decode-tp",
            ..
        })
    ));
}

#[test]
fn a_request_over_the_rank_limit_is_refused() {
    // Llama-3.1-70B, 8192 tokens, TP8 → TP4: a decode rank holds 2.5 GiB / 4 = 640 MiB.
    let shape = KvShape {
        prefill_tp: 8,
        decode_tp: 4,
        max_rank_bytes: Some(512 << 20),
        ..KvShape::new(8192)
    };
    let err = KvRequest::new(builtin("llama-3.1-70b").expect("built in"), shape).expect_err("too large");
    assert_eq!(
        err,
        KvError::RequestTooLarge {
            side: "decode",
            needed: 640 << 20,
            limit: 512 << 20
        }
    );
    assert!(err.to_string().contains("lower --isl"));
    let fits = KvShape {
        max_rank_bytes: Some(640 << 20),
        ..shape
    };
    assert!(KvRequest::new(builtin("llama-3.1-70b").expect("built in"), fits).is_ok());
}

#[test]
fn absurd_sizes_overflow_into_an_error_not_a_panic() {
    let shape = KvShape {
        page_size: u32::MAX,
        ..KvShape::new(u64::MAX)
    };
    let err = KvRequest::new(builtin("llama-3.1-70b").expect("built in"), shape).expect_err("overflow");
    assert!(matches!(err, KvError::Overflow { .. }), "{err}");
}
