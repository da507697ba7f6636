//! icb-kube (skeleton; being written).
