"""Preference pairs: schema, A/B presentation, validation, source loaders, demo data and splits."""

from __future__ import annotations

from rubriclab.data._clean import DEFAULT_MAX_CHARS, DROP_REASONS, clean_pairs, drop_oversized, max_chars_of
from rubriclab.data._io import file_format, jsonl_rows, read_pairs, read_rows, write_pairs, write_splits
from rubriclab.data._loaders import DEMO_DOMAINS, LOADERS, LoadResult, load_source, load_source_detailed
from rubriclab.data._parsers import ARENA_CATEGORY_FLAGS, FORMATS, parse_rows, render_messages
from rubriclab.data._schema import Pair, present, present_both_orders, stable_hash, stable_id, swap_for
from rubriclab.data._splits import (
    PREMISE_SPLITS,
    RIPD_SPLITS,
    allocate,
    bench_target_splits,
    build_splits,
    premise_splits,
)

__all__ = [
    "ARENA_CATEGORY_FLAGS",
    "DEMO_DOMAINS",
    "DEFAULT_MAX_CHARS",
    "DROP_REASONS",
    "drop_oversized",
    "max_chars_of",
    "FORMATS",
    "LOADERS",
    "PREMISE_SPLITS",
    "RIPD_SPLITS",
    "LoadResult",
    "Pair",
    "allocate",
    "bench_target_splits",
    "build_splits",
    "clean_pairs",
    "load_source",
    "load_source_detailed",
    "parse_rows",
    "premise_splits",
    "present",
    "present_both_orders",
    "read_pairs",
    "file_format",
    "jsonl_rows",
    "read_rows",
    "render_messages",
    "stable_hash",
    "stable_id",
    "swap_for",
    "write_pairs",
    "write_splits",
]
