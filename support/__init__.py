"""Tools the tests and the benchmarks share (the multi-host mock web); not part of the crawler."""
