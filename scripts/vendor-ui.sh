#!/bin/sh
# Vendor the web UI's third-party assets into collector/static/vendor/ (the UI never uses a CDN:
# collectors often run on isolated lab networks).
#
# Repeatable: the version is pinned here; the tarball comes from the npm registry through npm
# itself, npm checks its integrity, and VERSIONS records the sha256 of every copied file so a
# diff shows any change. Run from anywhere: scripts/vendor-ui.sh
set -eu

UPLOT_VERSION="1.6.32"

root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/collector/static/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
npm pack --silent "uplot@$UPLOT_VERSION" >/dev/null
tar -xzf "uplot-$UPLOT_VERSION.tgz"

mkdir -p "$dest"
cp package/dist/uPlot.iife.min.js package/dist/uPlot.min.css "$dest/"
cp package/LICENSE "$dest/uPlot.LICENSE"

cd "$dest"
{
    echo "# Written by scripts/vendor-ui.sh; do not edit by hand."
    echo "uplot $UPLOT_VERSION (npm registry, MIT)"
    sha256sum uPlot.iife.min.js uPlot.min.css uPlot.LICENSE
} >VERSIONS
cat VERSIONS
