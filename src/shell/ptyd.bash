# ptyd shell integration for bash (4.4 or later): OSC 133 marks (A prompt
# start, B input start, C command start, D;STATUS command finished) and
# OSC 7 (working directory). Safe to source twice and from any rc file; does
# nothing in a non-interactive shell. It composes with what is there: the
# PROMPT_COMMAND string or array gains a hook before and after its entries,
# PS0 and PS1 gain marks at their edges, and DEBUG traps are left alone.
if [[ $- == *i* && -z ${__ptyd_hooks-} ]] &&
    ((BASH_VERSINFO[0] > 4 || (BASH_VERSINFO[0] == 4 && BASH_VERSINFO[1] >= 4))); then
    __ptyd_hooks=1
    # PS0 sets __ptyd_running through this empty array's subscript, the one
    # way a prompt expansion can assign in the shell itself (not a subshell):
    # so D is sent only after a command ran, never for an empty line.
    __ptyd_flag=()
    __ptyd_running=
    __ptyd_cwd=

    __ptyd_urlencode() {
        local LC_ALL=C s=$1 out= c i
        for ((i = 0; i < ${#s}; i++)); do
            c=${s:i:1}
            case $c in
            [a-zA-Z0-9/._~-]) out+=$c ;;
            *) builtin printf -v c '%%%02X' "'$c" && out+=$c ;;
            esac
        done
        REPLY=$out
    }

    # First in PROMPT_COMMAND: sees the command's status, and hands it on.
    __ptyd_precmd_first() {
        local status=$?
        if [[ -n $__ptyd_running ]]; then
            builtin printf '\e]133;D;%s\a' "$status"
            __ptyd_running=
        fi
        return "$status"
    }

    # Last in PROMPT_COMMAND: after the user's hooks rebuilt PS1.
    __ptyd_precmd_last() {
        local status=$?
        if [[ $__ptyd_cwd != "$PWD" ]]; then
            __ptyd_cwd=$PWD
            __ptyd_urlencode "$PWD"
            builtin printf '\e]7;file://%s%s\a' "${HOSTNAME-}" "$REPLY"
        fi
        if [[ $PS1 != *'\[\e]133;B\a\]' ]]; then
            PS1+='\[\e]133;B\a\]'
        fi
        builtin printf '\e]133;A\a'
        return "$status"
    }

    PS0='${__ptyd_flag[__ptyd_running=1]-}\e]133;C\a'"${PS0-}"
    if [[ $(builtin declare -p PROMPT_COMMAND 2>/dev/null) == "declare -a"* ]]; then
        PROMPT_COMMAND=(__ptyd_precmd_first "${PROMPT_COMMAND[@]}" __ptyd_precmd_last)
    elif [[ -n ${PROMPT_COMMAND-} ]]; then
        PROMPT_COMMAND=$'__ptyd_precmd_first\n'"$PROMPT_COMMAND"$'\n__ptyd_precmd_last'
    else
        PROMPT_COMMAND=$'__ptyd_precmd_first\n__ptyd_precmd_last'
    fi
fi
