"""Policy: physical/virtual addressing, allocators, MMU, and routing helpers."""
