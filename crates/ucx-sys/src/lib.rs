//! ucx-sys (skeleton; being written).
