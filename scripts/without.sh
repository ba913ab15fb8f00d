#!/usr/bin/env bash
# Run a command as on a machine without some programs: every PATH folder that holds one of them is
# replaced by a folder of links to everything else in it.
#   scripts/without.sh ffmpeg,ffprobe,rg -- pnpm test
set -euo pipefail
if [ $# -lt 3 ] || [ "$2" != "--" ]; then
  echo "usage: $0 prog1,prog2,... -- command [args...]" >&2
  exit 2
fi
IFS=, read -r -a hide <<<"$1"
shift 2
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
"$@"
