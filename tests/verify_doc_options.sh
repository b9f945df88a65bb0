#!/usr/bin/env bash
# Every long option (--name) that README.md and docs/*.md name is one that
# allocscope's --help lists. Usage: verify_doc_options.sh ALLOCSCOPE SOURCE_DIR
#
# Where an option is named:
# * in an `allocscope SUBCOMMAND ...` command line (inline code or a fenced
#   block): it must be in that subcommand's --help (`allocscope --opt`: in
#   the top-level --help). The line ends at a lone `--` (what follows is the
#   launched command's), a pipe, `;`, `&&` or a ` #` comment; single-quoted
#   arguments are skipped.
# * in inline code that starts with a subcommand's name (`record --peak`):
#   in that subcommand's --help.
# * in other inline code that starts with an option (`--rate 1`): in some
#   subcommand's --help.
# Inline code that starts with another program (`go tool pprof -raw`,
# `cmake --install build`, `apt-get install --reinstall`, `ld.so --list`)
# names that program's options, and is skipped; so are fenced lines that
# are not allocscope command lines (curl, go tool pprof, YAML).
set -euo pipefail
bin=$1
src=$2

# Options of other programs that the docs name alone, outside a command
# line of theirs: none of them is allocscope's.
FOREIGN=(
  --perf-basic-prof # Node.js: writes the /tmp/perf-PID.map that names JIT frames (docs/outputs.md)
  --enable-shared   # CPython's configure: builds libpython3.X.so (docs/python.md)
)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The long options of a --help text: the first column of each option line
# ("  -p,--pid PID ...", "  --children,--no-children{false}").
help_options() {
  awk '/^ +-/ { n = split($1, names, ","); for (i = 1; i <= n; ++i) print names[i] }' |
    sed -n 's/^\(--[a-z][a-z0-9-]*\).*/\1/p' | sort -u
}

"$bin" --help >"$tmp/main.help"
help_options <"$tmp/main.help" >"$tmp/main.opts"
subs=$(sed -n '/^Subcommands:/,$s/^  \([a-z][a-z-]*\) .*/\1/p' "$tmp/main.help")
[ -n "$subs" ] || { echo "verify_doc_options: $bin --help lists no subcommand" >&2; exit 1; }
for s in $subs; do
  "$bin" "$s" --help | help_options >"$tmp/$s.opts"
  [ -s "$tmp/$s.opts" ] || { echo "verify_doc_options: '$bin $s --help' lists no option" >&2; exit 1; }
done
for s in $subs; do cat "$tmp/$s.opts"; done | sort -u >"$tmp/any.opts"
printf '%s\n' "${FOREIGN[@]}" | sort -u >"$tmp/foreign.opts"

# FILE:LINE <tab> WHERE <tab> --option, WHERE a subcommand, "main" (the
# top-level options) or "any" (some subcommand's).
docs=("$src/README.md" "$src"/docs/*.md)
awk -v subs="$(echo "$subs" | paste -sd'|')" -v q="'" '
  function emit(text, where, ln,   pre, opt) {
    while (match(text, /--[a-z][a-z0-9-]*/)) {
      pre = RSTART > 1 ? substr(text, RSTART - 1, 1) : " "
      opt = substr(text, RSTART, RLENGTH)
      text = substr(text, RSTART + RLENGTH)
      if (pre !~ /[A-Za-z0-9_-]/) printf "%s:%d\t%s\t%s\n", file, ln, where, opt
    }
  }
  # The allocscope command lines in text; returns whether there was one.
  function commands(text, ln,   found, rest, word, seg) {
    found = 0
    while (match(text, /(^|[^A-Za-z0-9_.-])allocscope +[a-z-]/)) {
      rest = substr(text, RSTART + RLENGTH - 1)
      text = rest
      word = rest
      sub(/[ ].*/, "", word)
      if (word ~ ("^(" subs ")$")) { where = word; rest = substr(rest, length(word) + 1) }
      else if (word ~ /^-/) where = "main"
      else continue
      found = 1
      seg = rest
      gsub(q "[^" q "]*" q, q q, seg)
      if (match(seg, /(^| )--( |$)|[|;&`]| #/)) seg = substr(seg, 1, RSTART - 1)
      emit(seg, where, ln)
    }
    return found
  }
  function span(s, ln,   first) {
    gsub(/\\\|/, "|", s)
    if (commands(s, ln)) return
    gsub(q "[^" q "]*" q, q q, s)
    if (match(s, /(^| )--( |$)/)) s = substr(s, 1, RSTART - 1)
    sub(/^ +/, "", s)
    sub(/^sudo +/, "", s)
    first = s
    sub(/[ ].*/, "", first)
    if (first ~ ("^(" subs ")$")) emit(s, first, ln)
    else if (first ~ /^-/) emit(s, "any", ln)
  }
  function paragraph(   text, from, to) {
    text = para
    while ((from = index(text, "`")) > 0) {
      text = substr(text, from + 1)
      if ((to = index(text, "`")) == 0) break
      span(substr(text, 1, to - 1), paraline)
      text = substr(text, to + 1)
    }
    para = ""
  }
  FNR == 1 { if (para != "") paragraph(); file = FILENAME; fence = 0; cont = "" }
  /^ *```/ { if (para != "") paragraph(); fence = !fence; next }
  fence {
    if (/\\$/) { if (cont == "") contline = FNR; cont = cont substr($0, 1, length($0) - 1) " "; next }
    if (cont != "") { commands(cont $0, contline); cont = "" } else commands($0, FNR)
    next
  }
  /^[ \t]*$/ { if (para != "") paragraph(); next }
  { if (para == "") paraline = FNR; para = para " " $0 }
  END { if (para != "") paragraph() }
' "${docs[@]}" >"$tmp/named"

failures=0
checked=0
while IFS=$'\t' read -r at where opt; do
  checked=$((checked + 1))
  grep -qxF -- "$opt" "$tmp/$where.opts" && continue
  if [ "$where" = any ] && grep -qxF -- "$opt" "$tmp/foreign.opts"; then continue; fi
  at=${at#"$src/"}
  case $where in
    any) echo "verify_doc_options: $at: $opt is in no subcommand's --help" >&2 ;;
    main) echo "verify_doc_options: $at: $opt is not in 'allocscope --help'" >&2 ;;
    *) echo "verify_doc_options: $at: $opt is not in 'allocscope $where --help'" >&2 ;;
  esac
  failures=$((failures + 1))
done <"$tmp/named"
[ "$failures" -eq 0 ] || exit 1
echo "verify_doc_options: $checked options named in README.md and docs/*.md ($(cut -f3 "$tmp/named" | sort -u | wc -l) distinct), all in allocscope's --help"
