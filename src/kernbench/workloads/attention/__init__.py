"""GQA attention workloads: decode split-KV, prefill ring, short-context mappings."""
