"""Helpers the test suite and the benchmarks share (exports, stacks, servers); never installed."""
