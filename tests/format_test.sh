#!/bin/bash
# Every C++ file the project tracks is formatted as .clang-format says (Google
# style, 120 columns). On failure it names each file and the command that
# fixes it. Usage: format_test.sh SOURCE_DIR
set -u
cd "${1:?usage: $0 SOURCE_DIR}" || exit 2
if ! command -v clang-format >/dev/null; then
  echo "format_test: clang-format is not installed (apt-get install clang-format; scripts/install_deps.sh does)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files '*.cc' '*.h')
else
  mapfile -t files < <(find src include tests python/src bench tools examples fuzz -name '*.cc' -o -name '*.h')
fi
# One clang-format run over all files; its diagnostics start with "FILE:LINE:COL:".
mapfile -t bad < <(clang-format --dry-run --Werror "${files[@]}" 2>&1 |
                   grep -oE '^[^: ]+:[0-9]+:[0-9]+: (warning|error)' | cut -d: -f1 | sort -u)
if [ "${#bad[@]}" -ne 0 ]; then
  echo "format_test: ${#bad[@]} of ${#files[@]} files are not formatted:" >&2
  printf '  %s\n' "${bad[@]}" >&2
  echo "fix: clang-format -i ${bad[*]}" >&2
  exit 1
fi
echo "format_test: ${#files[@]} files formatted"
