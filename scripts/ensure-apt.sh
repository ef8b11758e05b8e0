#!/usr/bin/env bash
# Install the named Debian packages that are missing (and only those).
#
#   ensure-apt.sh PKG...                             from the release's own suites
#   ensure-apt.sh --backports "PKG PKG..." PKG...    these from the release's backports suite
#
# With --backports, the backports suite of this release (same archive, same key) is added
# with apt pinning: every package of it at priority 1 (never installed or upgraded by
# chance), only the packages named after --backports at 990 (taken from there). Nothing else
# of the system moves to backports. Suricata 7 needs this on bookworm (with libhtp2 0.5.50).
set -euo pipefail
backports=()
if [ "${1:-}" = --backports ]; then
  read -r -a backports <<< "$2"
  shift 2
fi
missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "lowtail: these Debian packages are needed but missing: ${missing[*]} (run as root, or install them)" >&2
  exit 1
fi
if [ ${#backports[@]} -gt 0 ]; then
  codename=$(. /etc/os-release && echo "${VERSION_CODENAME:?}")
  suite="$codename-backports"
  sources=/etc/apt/sources.list.d/lowtail-backports.sources
  pins=/etc/apt/preferences.d/lowtail-backports
  # The archive the system already uses (deb.debian.org unless a mirror is configured).
  uri=$(grep -rhoE '^URIs: *\S+/debian/?$' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -n 1 | awk '{print $2}')
  [ -n "$uri" ] || uri=$(grep -hoE '^deb +\S+/debian/? ' /etc/apt/sources.list 2>/dev/null | head -n 1 | awk '{print $2}')
  [ -n "$uri" ] || uri=http://deb.debian.org/debian
  cat > "$sources.new" <<SOURCES
# Added by lowtail (scripts/ensure-apt.sh): only the packages pinned in $pins come from here.
Types: deb
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
  cat > "$pins.new" <<PINS
# Added by lowtail (scripts/ensure-apt.sh): nothing from $suite but these packages.
Package: *
Pin: release n=$suite
Pin-Priority: 1

Package: ${backports[*]}
Pin: release n=$suite
Pin-Priority: 990
PINS
  mv "$pins.new" "$pins"
  mv "$sources.new" "$sources"
fi
echo "installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# Other builds on a shared machine may hold dpkg's lock for a while: wait rather than fail.
lock=(-o DPkg::Lock::Timeout=600)
apt-get update -qq "${lock[@]}" >/dev/null || true
apt-get install -y -qq --no-install-recommends "${lock[@]}" "${missing[@]}" >/dev/null
