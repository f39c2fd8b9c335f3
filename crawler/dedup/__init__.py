"""Content deduplication: exact (payload digest) and near (SimHash)."""
