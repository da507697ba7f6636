//! icb-isolate (skeleton; being written).
