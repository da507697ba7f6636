//! Classification of UCX transport reports (placeholder, owned by the core helper).
