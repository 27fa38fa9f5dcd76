#!/usr/bin/env python3
"""The dependency tree's licences and duplicates, checked offline (what `cargo deny check
licenses bans` would check, without its advisory database, which needs the network).

- Licences: every crate's SPDX expression must be satisfiable with the licences in
  ALLOWED (permissive ones, compatible with perfsweep's Apache-2.0).
- Duplicates: a crate in two or more versions costs build time on 2 cores; each one is
  listed in .ci/duplicates.txt with the reason it cannot be unified. A new duplicate, or a
  listed one that is gone, fails the check so that the list stays true.

Reads `cargo tree` for x86_64 Linux (the only target built), with the lock file as is.
`--self-test` checks the SPDX evaluation itself.
"""

from __future__ import annotations

import collections
import re
import subprocess
import sys
from pathlib import Path

ALLOWED = {
    "MIT", "Apache-2.0", "Apache-2.0 WITH LLVM-exception", "BSD-2-Clause", "BSD-3-Clause",
    "ISC", "Zlib", "Unicode-3.0", "Unicode-DFS-2016", "Unlicense", "0BSD", "CC0-1.0",
    "BSL-1.0",
}
ROOT = Path(__file__).resolve().parent.parent
DUPLICATES = ROOT / ".ci" / "duplicates.txt"


def tokens(expression: str) -> list[str]:
    # Old crates write "MIT/Apache-2.0" for "MIT OR Apache-2.0".
    expression = expression.replace("/", " OR ")
    expression = re.sub(r"\s+WITH\s+", "_WITH_", expression)
    return re.findall(r"\(|\)|[^\s()]+", expression)


def satisfiable(expression: str) -> bool:
    """Whether the SPDX expression can be met with ALLOWED licences (AND binds tighter)."""
    items = tokens(expression)
    position = 0

    def primary() -> bool:
        nonlocal position
        token = items[position]
        position += 1
        if token == "(":
            value = disjunction()
            position += 1  # the closing parenthesis
            return value
        return token.replace("_WITH_", " WITH ") in ALLOWED

    def conjunction() -> bool:
        nonlocal position
        value = primary()
        while position < len(items) and items[position] == "AND":
            position += 1
            value = primary() and value
        return value

    def disjunction() -> bool:
        nonlocal position
        value = conjunction()
        while position < len(items) and items[position] == "OR":
            position += 1
            value = conjunction() or value
        return value

    try:
        return disjunction() and position == len(items)
    except IndexError:
        return False


def self_test() -> None:
    cases = {
        "MIT OR Apache-2.0": True, "MIT/Apache-2.0": True, "(MIT OR Apache-2.0) AND Unicode-3.0": True,
        "Apache-2.0 WITH LLVM-exception": True, "GPL-3.0": False, "MIT AND GPL-3.0": False,
        "GPL-3.0 OR MIT": True, "(GPL-2.0 AND MIT) OR BSD-3-Clause": True, "(": False, "": False,
        "AGPL-3.0 OR (SSPL-1.0 AND MIT)": False,
    }
    failed = [f"{text!r}: expected {want}" for text, want in cases.items() if satisfiable(text) != want]
    if failed:
        sys.exit("self-test failed: " + "; ".join(failed))
    print(f"self-test: {len(cases)} SPDX expressions evaluated as expected")


def main() -> None:
    if "--self-test" in sys.argv:
        self_test()
        return
    # `cargo tree` shows what is built for this target with the features in use (cargo
    # metadata's resolve also lists optional dependencies no feature turns on).
    tree = subprocess.run(
        ["cargo", "tree", "--locked", "--workspace", "-e", "normal,build,dev", "--target", "x86_64-unknown-linux-gnu",
         "--prefix", "none", "--format", "{p}|{l}"],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    seen = {}
    for line in tree.splitlines():
        # "(*)" marks a crate cargo tree printed before: the same crate.
        crate, _, licence = line.replace(" (*)", "").partition("|")
        words = crate.split()
        # Workspace members carry their path: only crates from registries are checked.
        if len(words) < 2 or any(word.startswith("(/") for word in words):
            continue
        seen[(words[0], words[1].lstrip("v"))] = licence.strip()
    packages = [{"name": name, "version": version, "license": licence} for (name, version), licence in sorted(seen.items())]
    problems = []
    for package in packages:
        licence = package.get("license") or ""
        if not satisfiable(licence):
            problems.append(f"licence: {package['name']} {package['version']} is {licence or 'unstated'!r}, not in the allowed list")
    versions = collections.defaultdict(set)
    for package in packages:
        versions[package["name"]].add(package["version"])
    duplicated = {name: sorted(v) for name, v in versions.items() if len(v) > 1}
    listed = {}
    for line in DUPLICATES.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition(":")
            listed[name.strip()] = reason.strip()
    for name, found in sorted(duplicated.items()):
        if name not in listed:
            problems.append(f"duplicate: {name} in versions {', '.join(found)}: unify it, or list it in .ci/duplicates.txt with the reason")
    for name in sorted(set(listed) - set(duplicated)):
        problems.append(f"duplicate: {name} is listed in .ci/duplicates.txt but no longer duplicated: remove the line")
    print(f"{len(packages)} crates from registries; {len(duplicated)} in more than one version (each listed with its reason)")
    for problem in problems:
        print(f"  FAIL {problem}")
    if problems:
        sys.exit(1)


if __name__ == "__main__":
    main()
