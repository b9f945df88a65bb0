#!/bin/sh
# The generated man pages render without a warning from man (as lintian
# runs it), and the completion scripts parse and complete (bash) or at least
# parse (zsh). Usage: verify_docs.sh DIR (the build's docs/).
set -eu
dir=$1
fail() { echo "verify_docs: $*" >&2; exit 1; }
for page in "$dir"/*.1; do
  warnings=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
  [ -z "$warnings" ] || fail "$page: $warnings"
  LC_ALL=C.UTF-8 man -l "$page" 2>/dev/null | grep -q '^NAME' || fail "$page renders no NAME section"
done
bash -n "$dir/allocscope.bash" || fail "allocscope.bash does not parse"
if command -v zsh >/dev/null; then zsh -n "$dir/_allocscope" || fail "_allocscope does not parse"; fi
# complete WORDS... -> what bash would offer for the last word
complete_words() {
  bash -c '. "$0"; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _allocscope; printf "%s\n" "${COMPREPLY[@]}"' \
    "$dir/allocscope.bash" "$@"
}
expect() {
  want=$1
  shift
  complete_words "$@" | grep -qx -- "$want" || fail "completing '$*' does not offer $want"
}
expect record allocscope rec
expect --max-live-per-process allocscope record --max-live-p
expect dwarf allocscope record --unwind ''
expect stack allocscope report --by ''
expect --listen allocscope agent --li
expect "$$" allocscope record -p ''
[ -z "$(complete_words allocscope record --rate '')" ] || fail "--rate offers words: it takes a size"
echo "verify_docs: $(ls "$dir"/*.1 | wc -l) man pages and 2 completion scripts ok"
