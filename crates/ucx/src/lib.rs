//! ucx (skeleton; being written).
