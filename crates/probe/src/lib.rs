//! icb-probe (skeleton; being written).
