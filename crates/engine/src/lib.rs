//! icb-engine (skeleton; being written).
