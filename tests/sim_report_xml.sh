#!/bin/sh
# A report made by cohort-report from two CSV runs (one labelled
# "<script>...", one with gaps and DP) is well-formed XML, holds one
# polyline per run in each of its four plots, runs nothing and fetches
# nothing; a malformed CSV is refused naming its line. Needs python3
# (exit 77: skipped without it).
set -u
report=$1
command -v python3 >/dev/null 2>&1 || { echo "python3 missing"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/cohort-sim-report-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
{
  echo '# label: fp32 <script>alert(1)</script>'
  echo '# config: mlp:200,200 & codec=fp32'
  echo 'round,accuracy,loss,upload_bytes,sim_time_s,epsilon'
  for r in 1 2 3 4 5 6 7 8; do
    echo "$r,0.$((r + 1)),1.$r,$((r * 800000)),$((r * 12)).5,0.$r"
  done
} >"$dir/a.csv"
{
  echo 'round,accuracy,loss,upload_bytes,sim_time_s,epsilon'
  for r in 1 2 3 4 5 6 7 8; do
    acc=0.$((r + 1))
    [ "$r" = 3 ] && acc=nan
    echo "$r,$acc,,$((r * 5000)),$((r * 3)).1,"
  done
} >"$dir/b.csv"
"$report" --out "$dir/r.html" --title 'Codecs & <links>' --target 0.75 \
  "$dir/a.csv" "$dir/b.csv" || { echo "cohort-report failed"; exit 1; }
python3 - "$dir/r.html" <<'PY' || exit 1
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
svgs = root.findall(".//svg")
assert len(svgs) == 4, f"{len(svgs)} plots, want 4 (epsilon: one run has DP)"
for s in svgs:
    n = len(s.findall("polyline"))
    assert n == 2, f"{n} polylines in a plot, want 2"
tags = {e.tag for e in root.iter()}
assert "script" not in tags and "img" not in tags, tags
for e in root.iter():
    for k, v in e.attrib.items():
        assert not k.startswith("on"), k
        assert "http" not in v and "url(" not in v, (k, v)
text = "".join(root.itertext())
assert "fp32 <script>alert(1)</script>" in text, "label not shown as text"
assert "Codecs & <links>" in text
print("report ok:", len(svgs), "plots")
PY
printf 'round,accuracy,loss,upload_bytes,sim_time_s,epsilon\n1,0.5,,10,1,\n2,x,,20,2,\n' \
  >"$dir/bad.csv"
if "$report" --out "$dir/bad.html" "$dir/bad.csv" 2>"$dir/err"; then
  echo "a malformed CSV was accepted"; exit 1
fi
grep -q 'bad.csv:3: accuracy "x" is not a number' "$dir/err" || {
  echo "unexpected error:"; cat "$dir/err"; exit 1; }
[ ! -e "$dir/bad.html" ] || { echo "a report was written anyway"; exit 1; }
echo "malformed CSV refused: $(cat "$dir/err")"
