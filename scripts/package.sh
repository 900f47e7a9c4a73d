#!/usr/bin/env bash
# Builds the Debian package sluice_<version>_<arch>.deb with dpkg-deb over a
# staged tree (no cargo-deb, no debhelper needed):
#   /usr/sbin/sluice                          the release binary (stripped)
#   /lib/systemd/system/sluice.service        packaging/sluice.service
#   /etc/sluice/sluice.toml                   examples/sluice.toml (conffile)
#   /etc/logrotate.d/sluice                   packaging/sluice.logrotate (conffile)
#   /usr/share/man/man8/sluice.8.gz           `sluice --print-man`
#   bash, zsh, fish completions               `sluice --print-completions SHELL`
#   /usr/share/doc/sluice/                    README.md, docs/*.md, examples/groups.toml
#   DEBIAN/postinst, prerm, postrm            packaging/debian/: the `sluice` system
#                                             user; enable, start, stop
#
# Usage: scripts/package.sh [OUTDIR]   (default: target/debian; prints the .deb's path last)
# Env:   SLUICE_BIN=path     package this binary instead of building
#        SLUICE_NO_BUILD=1   package target/release/sluice as it is
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
lib_help 2 17 "${1:-}"
need dpkg-deb gzip install sed

OUT="${1:-$ROOT/target/debian}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
lib_tmp
lib_sluice_bin >&2

VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
[[ -n "$VERSION" ]] || die "no version in Cargo.toml"
ARCH="$(dpkg --print-architecture 2>/dev/null || echo amd64)"
STAGE="$LIB_TMP/sluice_${VERSION}_${ARCH}"
DEB="$OUT/sluice_${VERSION}_${ARCH}.deb"

inst() { # MODE SRC DEST (DEST relative to the staged root)
    install -D -m "$1" "$2" "$STAGE/$3"
}

inst 0755 "$SLUICE" usr/sbin/sluice
if command -v strip >/dev/null 2>&1; then strip --strip-unneeded "$STAGE/usr/sbin/sluice"; fi
inst 0644 packaging/sluice.service lib/systemd/system/sluice.service
inst 0644 examples/sluice.toml etc/sluice/sluice.toml
inst 0644 packaging/sluice.logrotate etc/logrotate.d/sluice

mkdir -p "$STAGE/usr/share/man/man8"
"$SLUICE" --print-man | gzip -9n >"$STAGE/usr/share/man/man8/sluice.8.gz"
mkdir -p "$STAGE/usr/share/bash-completion/completions" \
    "$STAGE/usr/share/zsh/vendor-completions" "$STAGE/usr/share/fish/vendor_completions.d"
"$SLUICE" --print-completions bash >"$STAGE/usr/share/bash-completion/completions/sluice"
"$SLUICE" --print-completions zsh >"$STAGE/usr/share/zsh/vendor-completions/_sluice"
"$SLUICE" --print-completions fish >"$STAGE/usr/share/fish/vendor_completions.d/sluice.fish"

DOC=usr/share/doc/sluice
inst 0644 packaging/debian/copyright "$DOC/copyright"
inst 0644 README.md "$DOC/README.md"
inst 0644 ARCHITECTURE.md "$DOC/ARCHITECTURE.md"
for f in docs/*.md; do inst 0644 "$f" "$DOC/$f"; done
inst 0644 examples/groups.toml "$DOC/examples/groups.toml"

mkdir -p "$STAGE/DEBIAN"
for f in postinst prerm postrm; do install -m 0755 "packaging/debian/$f" "$STAGE/DEBIAN/$f"; done
printf '/etc/sluice/sluice.toml\n/etc/logrotate.d/sluice\n' >"$STAGE/DEBIAN/conffiles"
SIZE_KB="$(du -sk --exclude=DEBIAN "$STAGE" | cut -f1)"
# The binary links only libc (and the loader), symbols up to GLIBC_2.x.
GLIBC="$(objdump -T "$STAGE/usr/sbin/sluice" 2>/dev/null | sed -n 's/.*GLIBC_\([0-9][0-9.]*\).*/\1/p' | sort -uV | tail -n 1 || true)"
cat >"$STAGE/DEBIAN/control" <<CONTROL
Package: sluice
Version: $VERSION
Architecture: $ARCH
Maintainer: sluice developers <sluice@localhost>
Installed-Size: $SIZE_KB
Depends: libc6${GLIBC:+ (>= $GLIBC)}, passwd
Recommends: logrotate
Section: httpd
Priority: optional
Description: HTTP/1.1 and HTTP/2 reverse proxy with a keep-alive pool and backpressure
 sluice runs one poll loop per process (--workers N: one per core on one
 port), keeps upstream connections in a keep-alive pool, streams request
 and response bodies at once under watermarks, balances over upstream
 groups with health checks, and exposes Prometheus metrics and /status on
 an admin listener. The systemd unit checks the config before a reload.
CONTROL

dpkg-deb --root-owner-group --build "$STAGE" "$DEB" >/dev/null
log "built $DEB" >&2
echo "$DEB"
