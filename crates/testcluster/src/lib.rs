//! icb-testcluster (skeleton; being written).
