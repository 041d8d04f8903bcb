# Sourced by .ci/run. `section "title"` prints "== title" (as the script always did) and starts
# a clock; when the next section starts, or the script exits (a failure included, so the slow or
# failing step is visible), it prints how long the previous one took, and at exit one line per
# section. The exit status of the script is kept.
_section_title=""
_section_start=""
_section_lines=()

# Wall-clock seconds with a fraction; EPOCHREALTIME (bash 5) may use the locale's comma.
_section_now() {
  if [ -n "${EPOCHREALTIME:-}" ]; then printf '%s' "${EPOCHREALTIME/,/.}"; else date +%s.%N; fi
}

section_end() {
  [ -n "$_section_title" ] || return 0
  local secs
  secs=$(awk -v a="$_section_start" -v b="$(_section_now)" 'BEGIN { printf "%.1f", b - a }')
  echo "-- ${secs} s: $_section_title"
  _section_lines+=("$(printf '%8s s  %s' "$secs" "$_section_title")")
  _section_title=""
}

section() {
  section_end
  _section_title="$1"
  _section_start=$(_section_now)
  echo "== $1"
}

_section_summary() {
  local rc=$?
  section_end
  if [ "${#_section_lines[@]}" -gt 0 ]; then
    echo "== elapsed seconds per section"
    printf '%s\n' "${_section_lines[@]}"
  fi
  exit "$rc"
}
trap _section_summary EXIT
