# Shows that the bash, zsh and fish completions generated from each tool's CLI11 definitions
# offer an option's choices as its values (the same set --help shows), offer each subcommand only
# its own flags (no --version after a subcommand, where it is an error), complete `--opt=` values,
# and that every script loads in its shell. bash and fish completions are run, not just read.
set -u
tools=(dyn-route dyn-trace dyn-replay dyn-bind dyn-bench dyn-mocker)
for t in "${tools[@]}"; do
  "$t" --generate=bash >"$t.bash" && "$t" --generate=zsh >"_$t" && "$t" --generate=fish >"$t.fish" || echo "$t: generation failed"
  bash -n "$t.bash" || echo "$t.bash: syntax error"
  zsh -n "_$t" || echo "_$t: syntax error"
  fish --no-execute "$t.fish" || echo "$t.fish: syntax error"
done
# bash: run the completion function as readline would (COMP_WORDS, COMP_CWORD), print COMPREPLY.
comp() {
  bash -c 'source "$1.bash"; COMP_WORDS=("${@:1}"); COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ));
           f="_${1//-/_}"; "$f"; printf "%s\n" "${COMPREPLY[@]}" | sort | tr "\n" " "; echo' _ "$@"
}
echo "== bash: dyn-route serve --router-mode <TAB>"
comp dyn-route serve --router-mode ''
echo "== the choices --help shows"
dyn-route serve --help | grep -o -- '--router-mode TEXT:{[^}]*}' | sed 's/.*{//; s/}//' | tr , '\n' | sort | tr '\n' ' '; echo
echo "== bash: dyn-route serve --router-mode=k<TAB>"
comp dyn-route serve --router-mode = k
echo "== bash: dyn-bench report --format <TAB>"
comp dyn-bench report --format ''
echo "== bash: dyn-route <TAB> (subcommands)"
comp dyn-route ''
echo "== bash: --version offered at the top level, not after a subcommand"
comp dyn-route --ver
comp dyn-route serve --ver
echo "== bash: per-subcommand flags (--worker is serve's, not decide's)"
comp dyn-route serve --work
comp dyn-route decide --work
echo "== bash: a tool without subcommands: dyn-replay --router-mode <TAB>, --session-headers <TAB>"
comp dyn-replay --router-mode ''
comp dyn-replay --session-headers ''
echo "== fish: the same questions"
fcomp() { fish -c "source $1.fish; complete -C '$2'" | cut -f1 | sort | tr '\n' ' '; echo; }
fcomp dyn-route 'dyn-route serve --router-mode '
fcomp dyn-route 'dyn-route serve --ver'
fcomp dyn-route 'dyn-route --ver'
fcomp dyn-route 'dyn-route decide --work'
fcomp dyn-route 'dyn-route serve --work'
fcomp dyn-bench 'dyn-bench report --format '
echo "== zsh: serve's _arguments spec has the choices; decide's has no --worker"
awk '/^        serve\)/,/;;/' _dyn-route | grep -o -- "'--router-mode=\[[^]]*\]:[^:]*:([^)]*)'" | sed 's/\[.*\]//'
awk '/^        decide\)/,/;;/' _dyn-route | grep -c -- "'--worker=" || true
