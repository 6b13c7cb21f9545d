#!/usr/bin/env bash
# docs/api/ has a page cohort_NAME.md for every function the public headers
# declare (and none for a function they do not), its index links each, and
# each shows its prototype; a new function without its page fails here.
#   api_docs.sh SRC
set -euo pipefail
src=$1
declared=$(grep -h '^COHORT_API' "$src/client/include/cohort.h" \
  "$src/common/util/cohort_status.h" | grep -o '^[^(]*(' |
  sed -E 's/.*[ *]([a-z_0-9]+)\($/\1/' | sort)
[[ -n $declared ]] || { echo "FAIL: no COHORT_API function found"; exit 1; }
# A function NAME_sized that the macro NAME calls (the size-versioned
# structs' init) has its page under the macro's name, NAME.md. Topic pages
# (the ABI, the callbacks) may sit beside the functions' pages.
declared=$(echo "$declared" | sed 's/_sized$//' | sort)
pages=$(cd "$src/docs/api" && ls cohort_*.md | sed 's/\.md$//' | sort)
missing=$(comm -23 <(echo "$declared") <(echo "$pages"))
[[ -z $missing ]] || { echo "FAIL: no docs/api page for:" $missing; exit 1; }
stale=$(comm -13 <(echo "$declared") <(echo "$pages"))
[[ -z $stale ]] || { echo "FAIL: docs/api pages of no public function:" $stale; exit 1; }
for f in $declared; do
  grep -q "($f\.md)" "$src/docs/api/README.md" ||
    { echo "FAIL: docs/api/README.md does not link $f.md"; exit 1; }
  grep -q "^$f\b\|[ *]$f(\|[ *]${f}_sized(" "$src/docs/api/$f.md" ||
    { echo "FAIL: docs/api/$f.md does not show $f's prototype"; exit 1; }
done
echo "api_docs: $(echo "$declared" | wc -l) functions, each with its page"
