#!/usr/bin/env bash
# Installs what ingot's build and tests need, and nothing system-wide that
# pip would touch: Debian -dev packages via apt, Python test packages into a
# private target directory ($INGOT_PYDEPS, default ~/.cache/ingot/pip/test).
# Idempotent and fast when everything is present.
#
#   scripts/setup.sh build    Debian packages needed to build ingot
#   scripts/setup.sh test     those plus what the tests need (default)
#   scripts/setup.sh fuzz     build packages plus clang and its libFuzzer runtime
set -euo pipefail
WHAT=${1:-test}
APT_PKGS=(pkg-config libpcre2-dev libcjson-dev libmicrohttpd-dev libcurl4-openssl-dev)
TEST_APT_PKGS=(libsimde-dev openssl)
FUZZ_APT_PKGS=(clang libclang-rt-dev)
PY_PKGS=(gguf==0.19.0 numpy openai jsonschema)
PYDEPS=${INGOT_PYDEPS:-$HOME/.cache/ingot/pip/test}

[ "$WHAT" = test ] && APT_PKGS+=("${TEST_APT_PKGS[@]}")
[ "$WHAT" = fuzz ] && APT_PKGS+=("${FUZZ_APT_PKGS[@]}")
missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >&2
fi

case $WHAT in build | fuzz) exit 0 ;; esac

# promtool (test_server checks /metrics with it): the binary out of
# Debian's prometheus package, unpacked into a private directory rather
# than installed, which would also install and start the Prometheus server.
PROMDIR=${INGOT_PROMTOOL_DIR:-$HOME/.cache/ingot/promtool}
if ! command -v promtool >/dev/null && [ ! -x "$PROMDIR/promtool" ]; then
  echo "setup: unpacking promtool from Debian's prometheus package into $PROMDIR" >&2
  tmp=$(mktemp -d)
  ( cd "$tmp" && { apt-get download prometheus >/dev/null 2>&1 ||
      { apt-get update -qq && apt-get download prometheus >/dev/null 2>&1; }; } ) >&2
  dpkg-deb -x "$tmp"/prometheus_*.deb "$tmp/x"
  mkdir -p "$PROMDIR"
  cp "$tmp/x/usr/bin/promtool" "$PROMDIR/promtool"
  rm -rf "$tmp"
fi

stamp="$PYDEPS/.ingot-stamp"
want="${PY_PKGS[*]}"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
  echo "setup: installing Python test packages into $PYDEPS: $want" >&2
  mkdir -p "$PYDEPS"
  python3 -m pip install -q --disable-pip-version-check --target "$PYDEPS" --upgrade "${PY_PKGS[@]}" >&2
  echo "$want" > "$stamp"
fi
