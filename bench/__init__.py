"""Benchmarks: each module ``bench/<name>.py`` has ``run() -> dict[str, float]``; never timed tests."""
