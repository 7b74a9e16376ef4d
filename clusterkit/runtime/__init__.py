"""Running a fused graph: backends and the heterogeneous executor with fallback."""
