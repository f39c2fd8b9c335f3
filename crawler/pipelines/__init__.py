"""Item pipelines: dedup -> WARC -> URL metadata -> index gate (see ``ITEM_PIPELINES``).

Index consumers (a search indexer...) go after the index gate (order > 600):
they receive primary, non-duplicate pages only.
"""
