"""Benchmarks: dataset loaders (both folder layouts) and the retrieval benchmark runner."""

from toolweave.benchmark.datasets import BenchDataset, BenchQuery, load_dataset, resolve_dataset
from toolweave.benchmark.runner import BenchResult, run_benchmark

__all__ = ["BenchDataset", "BenchQuery", "BenchResult", "load_dataset", "resolve_dataset", "run_benchmark"]
