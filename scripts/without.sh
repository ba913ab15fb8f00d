#!/usr/bin/env bash
# Run a command as on a machine without some programs: every PATH folder that holds one of them is
# replaced by a folder of links to everything else in it.
#   scripts/without.sh ffmpeg,ffprobe,rg -- pnpm test
#   scripts/without.sh newcomer -- pnpm test      # every optional program the README says is not needed
#
# `newcomer` stands for bwrap, ffmpeg, ffprobe, rg, chromium and postgres. `postgres` hides the machine's
# PostgreSQL: its programs on PATH, and /usr/lib/postgresql (covered by an empty folder in a mount
# namespace of the command's own when run as root; MUSE_PG_SYSTEM=off tells the test server to pass
# over it in any case), so the tests start the server that comes from npm.
set -euo pipefail
if [ $# -lt 3 ] || [ "$2" != "--" ]; then
  echo "usage: $0 prog1,prog2,...|newcomer -- command [args...]" >&2
  exit 2
fi
IFS=, read -r -a asked <<<"$1"
shift 2
hide=()
pg=false
for h in "${asked[@]}"; do
  case "$h" in
    newcomer) hide+=(bwrap ffmpeg ffprobe rg chromium); pg=true ;;
    postgres | postgresql) pg=true ;;
    *) hide+=("$h") ;;
  esac
done
if $pg; then hide+=(initdb postgres pg_ctl pg_ctlcluster pg_isready psql); fi
# outside /tmp (a sandboxed command gets a private /tmp, and would lose the PATH), and open to
# other users (a test server started as another user runs programs through it)
shadow=$(mktemp -d "$( [ -d /var/tmp ] && echo /var/tmp || echo "${TMPDIR:-/tmp}")/musekit-without-XXXXXX")
chmod 755 "$shadow"
trap 'rm -rf "$shadow"' EXIT
newpath=()
i=0
IFS=: read -r -a dirs <<<"$PATH"
for dir in "${dirs[@]}"; do
  holds=false
  for h in "${hide[@]}"; do [ -e "$dir/$h" ] && holds=true; done
  if ! $holds; then newpath+=("$dir"); continue; fi
  i=$((i + 1))
  mkdir -p "$shadow/$i"
  for f in "$dir"/* "$dir"/.[!.]*; do
    [ -e "$f" ] || continue
    name=${f##*/}
    skip=false
    for h in "${hide[@]}"; do [ "$name" = "$h" ] && skip=true; done
    $skip || ln -s "$f" "$shadow/$i/$name"
  done
  newpath+=("$shadow/$i")
done
PATH=$(IFS=:; echo "${newpath[*]}")
export PATH
for h in "${hide[@]}"; do
  if command -v "$h" >/dev/null 2>&1; then echo "$0: $h is still on PATH" >&2; exit 1; fi
done
echo "$0: hidden: ${hide[*]}" >&2
if $pg; then
  export MUSE_PG_SYSTEM=off
  if [ -d /usr/lib/postgresql ] && [ "$(id -u)" = 0 ] && unshare -m true 2>/dev/null; then
    unshare -m bash -c 'mount -t tmpfs -o ro,size=4k musekit-without /usr/lib/postgresql && exec "$@"' bash "$@"
    exit 0
  fi
fi
"$@"
