#!/usr/bin/env bash
# Installs the Python peers `cargo bench -p perfsweep --bench llm` compares against
# (aiperf in its own Python 3.12 virtualenv) and an offline cl100k_base tokenizer they
# load instead of downloading one. Not run in CI. The bench looks in the same place:
#   ${LLM_BENCH_PEERS:-$HOME/.cache/perfsweep/peers}/{aiperf-venv,cl100k}
set -euo pipefail
peers="${LLM_BENCH_PEERS:-$HOME/.cache/perfsweep/peers}"
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$peers"
if [ ! -x "$peers/aiperf-venv/bin/aiperf" ]; then
    # aiperf needs Python >= 3.10; pyenv's 3.12 where present, else python3.
    if command -v pyenv >/dev/null && pyenv versions --bare | grep -q '^3\.12'; then
        PYENV_VERSION="$(pyenv versions --bare | grep '^3\.12' | tail -1)" python -m venv "$peers/aiperf-venv"
    else
        python3 -m venv "$peers/aiperf-venv"
    fi
    "$peers/aiperf-venv/bin/pip" install --quiet aiperf
fi
# The vocabulary comes from the bpe-openai crate in the cargo registry.
(cd "$here/../.." && cargo fetch --quiet)
"$peers/aiperf-venv/bin/python" "$here/cl100k_tokenizer.py" "$peers/cl100k"
echo "peers ready in $peers"
