//! icb-report (skeleton; being written).
