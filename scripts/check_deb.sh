#!/usr/bin/env bash
# Builds the Debian package (scripts/package.sh) and checks it without
# installing it on this machine:
#   - `dpkg-deb -c` lists every file the package must hold, `dpkg-deb -f`
#     its name, version and architecture, DEBIAN/conffiles the two conffiles;
#   - `dpkg -x` into a scratch root: the installed binary runs
#     `--check-config` on the installed /etc/sluice/sluice.toml and on the
#     README's example config, the man page
#     is roff (`man -l` renders it when man is here), the completions parse
#     (bash -n; zsh and fish when installed);
#   - `systemd-analyze verify` on the installed unit (its paths pointed into
#     the scratch root), when systemd-analyze exists; skipped with a message
#     otherwise; the unit's ExecReload checks the file before SIGHUP.
#
# Usage: scripts/check_deb.sh   Env: SLUICE_BIN / SLUICE_NO_BUILD=1 as in
# scripts/package.sh (test.sh reuses the release binary e2e.sh built).
set -euo pipefail

source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
cd "$ROOT"
lib_help 2 17 "${1:-}"
need dpkg-deb dpkg
lib_tmp

DEB="$(scripts/package.sh "$LIB_TMP/out" | tail -n 1)"
[[ -f "$DEB" ]] || die "scripts/package.sh made no package"
VERSION="$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)"
ARCH="$(dpkg --print-architecture)"
[[ "$(basename "$DEB")" == "sluice_${VERSION}_${ARCH}.deb" ]] || die "package name $(basename "$DEB")"
[[ "$(dpkg-deb -f "$DEB" Package)" == sluice ]] || die "control: Package"
[[ "$(dpkg-deb -f "$DEB" Version)" == "$VERSION" ]] || die "control: Version"
log "$(basename "$DEB"): $(du -h "$DEB" | cut -f1)"

LIST="$(dpkg-deb -c "$DEB")"
for path in ./usr/sbin/sluice ./lib/systemd/system/sluice.service ./etc/sluice/sluice.toml \
    ./etc/logrotate.d/sluice ./usr/share/man/man8/sluice.8.gz \
    ./usr/share/bash-completion/completions/sluice ./usr/share/zsh/vendor-completions/_sluice \
    ./usr/share/fish/vendor_completions.d/sluice.fish ./usr/share/doc/sluice/copyright \
    ./usr/share/doc/sluice/docs/configuration.md; do
    grep -qE " $path\$" <<<"$LIST" || die "dpkg-deb -c: $path missing"
done
grep -qE '^-rwxr-xr-x root/root .* \./usr/sbin/sluice$' <<<"$LIST" || die "/usr/sbin/sluice: not 0755 root:root"
log "dpkg-deb -c: every file present"

CTRL="$LIB_TMP/control"
dpkg-deb -e "$DEB" "$CTRL"
for f in /etc/sluice/sluice.toml /etc/logrotate.d/sluice; do
    grep -qx "$f" "$CTRL/conffiles" || die "conffiles: $f missing"
done
grep -q 'useradd --system' "$CTRL/postinst" || die "postinst creates no system user"
sh -n "$CTRL/postinst" && sh -n "$CTRL/prerm" && sh -n "$CTRL/postrm" || die "maintainer script syntax"
log "conffiles, maintainer scripts OK"

R="$LIB_TMP/root"
dpkg -x "$DEB" "$R"
out="$("$R/usr/sbin/sluice" --check-config "$R/etc/sluice/sluice.toml" 2>&1)" ||
    die "installed sluice --check-config on the installed example failed: $out"
log "installed binary: --check-config /etc/sluice/sluice.toml OK"
# The README's example config, its log path pointed into the scratch root.
sed -n '/^```toml$/,/^```$/p' README.md | sed '1d;$d' | sed "s#/var/log/sluice/#$R/var/log/sluice/#" >"$LIB_TMP/readme.toml"
[[ -s "$LIB_TMP/readme.toml" ]] || die "README.md has no toml example"
mkdir -p "$R/var/log/sluice"
out="$("$R/usr/sbin/sluice" --check-config "$LIB_TMP/readme.toml" 2>&1)" || die "README.md's example config: $out"
log "README.md's example config: --check-config OK"

gzip -t "$R/usr/share/man/man8/sluice.8.gz" || die "man page: not gzip"
zcat "$R/usr/share/man/man8/sluice.8.gz" | grep -q '^\.TH SLUICE 8' || die "man page: no .TH SLUICE 8"
if command -v man >/dev/null 2>&1; then
    page="$(MANWIDTH=80 man -l "$R/usr/share/man/man8/sluice.8.gz" 2>/dev/null | sed "s/.\x08//g" || true)"
    for want in SYNOPSIS SIGNALS "EXIT STATUS" FILES "SEE ALSO" --keepalive-timeout; do
        grep -q -- "$want" <<<"$page" || die "man -l: no $want"
    done
    log "man -l renders sluice(8)"
else
    log "man not installed: skipped man -l (the page is roff with .TH)"
fi
bash -n "$R/usr/share/bash-completion/completions/sluice" || die "bash completion: syntax"
if command -v zsh >/dev/null 2>&1; then zsh -n "$R/usr/share/zsh/vendor-completions/_sluice" || die "zsh completion: syntax"; fi
if command -v fish >/dev/null 2>&1; then fish -n "$R/usr/share/fish/vendor_completions.d/sluice.fish" || die "fish completion: syntax"; fi
log "completions OK"

UNIT="$R/lib/systemd/system/sluice.service"
grep -qx 'LogsDirectory=sluice' "$UNIT" || die "unit: no LogsDirectory=sluice"
grep -qx 'RuntimeDirectory=sluice' "$UNIT" || die "unit: no RuntimeDirectory=sluice"
reloads="$(grep '^ExecReload=' "$UNIT")"
[[ "$(head -n 1 <<<"$reloads")" == *"--check-config"* && "$(tail -n 1 <<<"$reloads")" == *"-HUP"* ]] ||
    die "unit: ExecReload must run --check-config, then send SIGHUP"
if command -v systemd-analyze >/dev/null 2>&1; then
    sed "s#/usr/sbin/sluice#$R/usr/sbin/sluice#g; s#/etc/sluice/#$R/etc/sluice/#g" "$UNIT" >"$LIB_TMP/sluice.service"
    # MANPATH: its Documentation=man:sluice(8) must resolve to the installed page.
    out="$(MANPATH="$R/usr/share/man" systemd-analyze verify "$LIB_TMP/sluice.service" 2>&1)" || die "systemd-analyze verify failed: $out"
    [[ -z "$out" ]] || die "systemd-analyze verify warns: $out"
    log "systemd-analyze verify: installed unit OK"
else
    log "systemd-analyze not installed: skipped verifying the unit"
fi
log "OK"
