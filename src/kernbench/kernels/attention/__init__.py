"""Fused grouped-query attention kernels (decode split-KV, prefill ring, short context)."""
