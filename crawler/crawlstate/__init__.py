"""The crawl's state in Redis, shared by every part of the crawl: the key layout of each shard
(:mod:`.schema`, :mod:`.keys`), which shard a host lives in (:mod:`.shards`), the compact encodings
that keep it small (:mod:`.compact`, :mod:`.encodings`), the Lua library composed from the schema and
the prelude's helpers (:mod:`.library`, ``lua/``) and the step protocol between the frontier's Python
and its scripts (:mod:`.protocol`). It imports none of the packages that keep their state in it
(robots, URL metadata, duplicates, frontier)."""
