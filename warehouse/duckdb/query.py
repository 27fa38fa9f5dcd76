#!/usr/bin/env python3
"""Runs SQL over a perfsweep warehouse with DuckDB: the independent engine of
warehouse/tests/duckdb.rs and the bench's comparison.

Reads {"root": DIR, "queries": [SQL, ...], "repeat": N} on stdin; every table of the
warehouse is a view over its Parquet files (Hive partitions, `date` kept a string as in
DataFusion). Prints {"duckdb": VERSION, "results": [[row, ...], ...], "seconds": [best
of N per query], "setup_seconds": S}; each row is a list of JSON values.
"""
import datetime
import decimal
import glob
import json
import os
import sys
import time

import duckdb

TABLES = {
    "benchmark_run_fact": True,
    "serving_outcome_fact": True,
    "training_outcome_fact": True,
    "system_outcome_fact": True,
    "telemetry_slice_fact": True,
    "software_version_dim": False,
    "hardware_topology_dim": False,
    "cluster_region_dim": False,
    "workload_dim": False,
    "artifact_lineage_dim": False,
}


def plain(value):
    if isinstance(value, decimal.Decimal):
        return float(value)
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    return value


def main():
    request = json.load(sys.stdin)
    root = request["root"]
    repeat = max(1, int(request.get("repeat", 1)))
    started = time.perf_counter()
    con = duckdb.connect()
    for table, partitioned in TABLES.items():
        pattern = os.path.join(root, table, "*/*/*.parquet" if partitioned else "*.parquet")
        if not glob.glob(pattern):
            continue
        options = ", hive_partitioning = true, hive_types_autocast = false" if partitioned else ""
        con.execute(f"CREATE VIEW {table} AS SELECT * FROM read_parquet('{pattern}'{options})")
    setup = time.perf_counter() - started
    results, seconds = [], []
    for sql in request["queries"]:
        best = None
        rows = []
        for _ in range(repeat):
            began = time.perf_counter()
            rows = con.execute(sql).fetchall()
            took = time.perf_counter() - began
            best = took if best is None else min(best, took)
        results.append([[plain(v) for v in row] for row in rows])
        seconds.append(best)
    json.dump({"duckdb": duckdb.__version__, "results": results, "seconds": seconds,
               "setup_seconds": setup}, sys.stdout)


if __name__ == "__main__":
    main()
