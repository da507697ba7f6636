//! Verdict rules (placeholder, owned by the core helper).
