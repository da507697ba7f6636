//! icb-recipe (skeleton; being written).
