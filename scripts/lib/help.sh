# shellcheck shell=bash
# `--help` (or `-h`) for every script: prints the script's opening comment
# (the lines after the shebang that start with '#') and exits.
#   source "$(dirname "$0")/lib/help.sh"; tally_help "$0" "$@"
tally_help() {
  local script=$1 arg
  shift
  for arg in "$@"; do
    if [[ $arg == --help || $arg == -h ]]; then
      sed -n '2,/^[^#]/{/^#/!q;s/^# \{0,1\}//;p}' "$script"
      exit 0
    fi
  done
}
