#!/bin/bash
# STYLE.md's size rule: no C++ source or test file past 600 lines ("a file
# past 600 lines is a sign that it holds two things"). Checks every tracked
# .cc/.h under src/, include/, tests/, tools/, examples/, bench/, fuzz/ and
# python/src/. Files that may exceed it for now are listed, each with its
# reason, in tests/file_size_allowlist.txt; an entry whose file no longer
# exceeds the limit (or is gone) fails too, so the list only shrinks.
# Usage: file_size_test.sh SOURCE_DIR
set -u
cd "${1:?usage: $0 SOURCE_DIR}" || exit 2
limit=600
allowlist=tests/file_size_allowlist.txt
dirs=(src include tests tools examples bench fuzz python/src)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- "${dirs[@]}" | grep -E '\.(cc|h)$')
else
  mapfile -t files < <(find "${dirs[@]}" -name '*.cc' -o -name '*.h' 2>/dev/null | sort)
fi
declare -A allowed=()
if [[ -f $allowlist ]]; then
  # "PATH  # why": the first word of each line that is not blank or a comment.
  while read -r path _; do
    [[ -z $path || $path == \#* ]] && continue
    allowed[$path]=1
  done <"$allowlist"
fi
failed=0
declare -A seen=()
for f in "${files[@]}"; do
  [[ -f $f ]] || continue
  n=$(wc -l <"$f")
  if ((n > limit)); then
    if [[ -n ${allowed[$f]:-} ]]; then
      seen[$f]=1
      continue
    fi
    echo "FAIL: $f has $n lines, more than the limit of $limit (STYLE.md: a file past $limit lines holds two" \
         "things). Fix: split it along a seam it already has (a class, a theme of tests) into files of its folder" \
         "and add them to its CMakeLists.txt; only if that cannot be done now, list it in $allowlist with the reason."
    failed=1
  fi
done
for f in "${!allowed[@]}"; do
  if [[ -z ${seen[$f]:-} ]]; then
    if [[ -f $f ]]; then
      echo "FAIL: $f is in $allowlist but has $(wc -l <"$f") lines, within the limit of $limit." \
           "Fix: remove its line from $allowlist."
    else
      echo "FAIL: $allowlist names $f, which is not a tracked file. Fix: remove its line from $allowlist."
    fi
    failed=1
  fi
done
if ((failed == 0)); then
  echo "OK: ${#files[@]} files, none past $limit lines but the ${#allowed[@]} allowed in $allowlist"
fi
exit $failed
