# shellcheck shell=bash
# Sourced by the experiment scripts here.
# sim_run OUT NAME ARGS...: runs cohort-sim ($sim, set by the caller) with
# ARGS and --csv OUT/NAME.csv, its round lines in OUT/NAME.log. A run
# whose CSV exists is skipped, so an interrupted script resumes where it
# stopped; the CSV is written beside and renamed when the run ends.
sim_run() {
  local out=$1 name=$2
  shift 2
  [[ -s $out/$name.csv ]] && return 0
  echo "== $name" >&2
  nice -n 10 "${sim:?}" "$@" --csv "$out/$name.csv.part" >"$out/$name.log"
  mv "$out/$name.csv.part" "$out/$name.csv"
}
