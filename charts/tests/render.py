#!/usr/bin/env python3
"""Renders the perfsweep chart offline with Helm's own Go SDK (PyPI helm-python-sdk) and
prints the manifests as multi-document YAML on stdout.

    python3 charts/tests/render.py [--values FILE]... [--set-json KEY=JSON]...
                                   [--release NAME] [--namespace NS] [--include-crds]

Exit status: 0 rendered; 1 Helm refused (bad values, template error; the message on
stderr); 3 helm-python-sdk is not installed (operator/tests/controller/rbac_completeness.rs then
reports the test as SKIPPED with this message).
"""

import argparse
import os
import sys

CHART = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "perfsweep")
MISSING = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--values", action="append", default=[], help="a values YAML file")
    parser.add_argument(
        "--set-json", action="append", default=[], help="KEY=JSON, as helm --set-json"
    )
    parser.add_argument("--release", default="perfsweep")
    parser.add_argument("--namespace", default="perfsweep-system")
    parser.add_argument(
        "--include-crds", action="store_true", help="also print the chart's crds/ files"
    )
    args = parser.parse_args()
    try:
        import helm_python as helm
    except ImportError as error:
        print(
            f"helm-python-sdk is not installed ({error}); "
            "python3 -m pip install helm-python-sdk==0.2.2",
            file=sys.stderr,
        )
        return MISSING

    values: dict = {}
    for path in args.values:
        with open(path, encoding="utf-8") as file:
            values = merge(values, helm.values_from_yaml(file.read()))
    for expression in args.set_json:
        values = merge(values, helm.parse_set_json(expression))
    try:
        with helm.Chart.load(CHART) as chart:
            manifests = chart.render(
                values=values,
                name=args.release,
                namespace=args.namespace,
                is_install=True,
            )
            crds = chart.crds if args.include_crds else []
    except helm.HelmError as error:
        print(f"helm: {error}", file=sys.stderr)
        return 1
    out = sys.stdout
    for crd in sorted(crds, key=lambda c: c["name"]):
        out.write(f"---\n# Source: {crd['name']}\n{crd['data'].rstrip()}\n")
    for path in sorted(manifests):
        text = manifests[path].strip()
        if not text or path.endswith("NOTES.txt"):
            continue
        out.write(f"---\n# Source: {path}\n{text}\n")
    return 0


def merge(base: dict, override: dict) -> dict:
    """Deep merge, as Helm coalesces several -f/--set sources: maps merge, others replace."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge(merged[key], value)
        else:
            merged[key] = value
    return merged


if __name__ == "__main__":
    sys.exit(main())
