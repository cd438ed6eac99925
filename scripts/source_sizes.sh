#!/bin/bash
# The size table of docs/ARCHITECTURE.md: for each folder of src/, its
# tracked .h and .cc files (tests included), their lines, and its largest
# file; then the files past STYLE.md's 600-line rule anywhere the size test
# looks (tests/file_size_test.sh), and the count of `grpc::` references
# outside src/rpc/ (lines that hold one; non-test sources, then with the
# tests).
# Usage: scripts/source_sizes.sh [SOURCE_DIR]
set -eu
cd "${1:-$(dirname "$0")/..}"
commas() { echo "$1" | sed -e ':a' -e 's/\B[0-9]\{3\}\>/,&/' -e 'ta'; }
echo "| folder | files | lines | largest file |"
echo "| --- | --- | --- | --- |"
for dir in $(git ls-files src | grep -E '^src/[^/]+/.*\.(cc|h)$' | cut -d/ -f2 | sort -u); do
  mapfile -t files < <(git ls-files "src/$dir" | grep -E '\.(cc|h)$')
  lines=$(cat "${files[@]}" | wc -l)
  read -r big_lines big_file < <(wc -l "${files[@]}" | grep -v ' total$' | sort -n | tail -1)
  printf '| `%s/` | %d | %s | `%s` (%d) |\n' "$dir" "${#files[@]}" "$(commas "$lines")" \
    "${big_file#"src/$dir/"}" "$big_lines"
done
echo
echo "Files past 600 lines:"
git ls-files -- src include tests tools examples bench fuzz python/src | grep -E '\.(cc|h)$' | xargs wc -l |
  grep -v ' total$' | awk '$1 > 600 { printf "  %s (%d)\n", $2, $1 }'
echo
all=$(git ls-files src | grep -E '\.(cc|h)$' | grep -v '^src/rpc/' | xargs grep 'grpc::' | wc -l)
non_test=$(git ls-files src | grep -E '\.(cc|h)$' | grep -v '^src/rpc/' | grep -vE '_test\.cc$' | xargs grep 'grpc::' | wc -l)
echo "grpc:: outside src/rpc/: $non_test in non-test sources, $all with the tests"
