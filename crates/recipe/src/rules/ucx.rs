//! Reading UCX and NCCL variable values (`UCX_TLS`, `UCX_NET_DEVICES` and transport names are
//! read with `icb_core::fabric`).

pub fn is_truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "y" | "yes" | "true" | "on"
    )
}

pub fn is_falsy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "n" | "no" | "false" | "off" | ""
    )
}
