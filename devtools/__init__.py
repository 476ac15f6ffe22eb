"""Development-only helpers shared by tests, the demo and the benchmarks. Never deployed."""
