"""TPC-H and TPC-DS as benchmark datasets: the cached data of hive_join_opts.tpc at the
benchmark's scale."""

from __future__ import annotations

from pathlib import Path

from .. import tpc
from .model import Dataset


def dataset(benchmark: str, name: str) -> Dataset:
    """A benchmark dataset named `name` whose folder only points at the cached TPC data of its
    scale."""

    def write(spark, folder: Path, scale: float) -> None:
        (folder / "source").write_text(str(tpc.generate(benchmark, scale)))

    def reg(spark, folder: Path) -> None:
        tpc.register(spark, benchmark, Path((folder / "source").read_text()))

    return Dataset(name, write, reg)
