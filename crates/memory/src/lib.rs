//! icb-memory (skeleton; being written).
