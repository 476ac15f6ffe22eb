"""The README's generated tables are what bench/results says, and the benchmark figures say what they measured."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devtools import readme_bench
from devtools.readme_bench import BENCH_ROWS, README, RESULTS, ReadmeBenchError, Row, rewrite


def test_the_readme_tables_are_generated_from_the_committed_results() -> None:
    text = README.read_text()
    assert rewrite(text) == text, "README.md differs from bench/results: run `make readme-bench` and commit both"


def test_every_benchmark_the_table_quotes_has_its_results_file_and_every_benchmark_a_row() -> None:
    quoted = {row.bench for row in BENCH_ROWS}
    benchmarks = {p.stem for p in (RESULTS.parent).glob("*.py") if not p.stem.startswith("_")}
    assert quoted == benchmarks
    assert all((RESULTS / f"{name}.json").is_file() for name in quoted)


def test_a_figure_no_results_file_has_fails_naming_the_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "x.json").write_text(json.dumps({"a": 1.0}))

    assert Row("x", "`a` {a}", "—").render(tmp_path) == "| `x` | `a` 1 | — |"
    with pytest.raises(ReadmeBenchError, match=r"bench/results/x.json has no 'b'"):
        Row("x", "{b}", "—").render(tmp_path)
    with pytest.raises(ReadmeBenchError, match="make bench BENCH=y"):
        Row("y", "{a}", "—").render(tmp_path)


def test_a_block_without_its_markers_fails() -> None:
    with pytest.raises(ReadmeBenchError, match="expected one <!-- t:begin -->"):
        rewrite("no markers", Path(), {"t": lambda _: ""})


def test_check_mode_reports_a_stale_readme_without_writing_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    readme = tmp_path / "README.md"
    readme.write_text("".join(f"<!-- {name}:begin -->\nstale\n<!-- {name}:end -->\n" for name in readme_bench.BLOCKS))
    monkeypatch.setattr(readme_bench, "README", readme)

    assert readme_bench.main(["--check"]) == 1
    assert "stale" in readme.read_text()
    assert readme_bench.main([]) == 0
    assert readme_bench.main(["--check"]) == 0


def test_closed_loop_reports_wall_clock_and_aws_seconds_on_one_compression() -> None:
    from bench.closed_loop import side_by_side
    from devtools.local_system import IMAGE_METRICS_INTERVAL_S, TIME_SCALE
    from gateway.config import Environment

    # The local system compresses the gateway's metrics interval by the alarms' scale, from the image's own.
    assert Environment.model_fields["metrics_interval_s"].default == IMAGE_METRICS_INTERVAL_S
    figures = side_by_side("x", total_s=5.0, emulated_s=4.0)
    assert figures["x_wall_s"] == 5.0
    assert figures["x_aws_equiv_s"] == 4.0 * TIME_SCALE + 1.0
    assert side_by_side("x", None, 4.0) == {"x_wall_s": -1.0, "x_aws_equiv_s": -1.0}
