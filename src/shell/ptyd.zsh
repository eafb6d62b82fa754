# ptyd shell integration for zsh: OSC 133 marks (A prompt start, B input
# start, C command start, D;STATUS command finished) and OSC 7 (working
# directory), through the precmd and preexec hook arrays. Safe to source
# twice; does nothing in a non-interactive shell.
if [[ -o interactive && -z ${__ptyd_hooks-} ]]; then
    typeset -g __ptyd_hooks=1 __ptyd_running= __ptyd_cwd=

    # First among the precmd hooks: sees the command's status.
    __ptyd_precmd_first() {
        local st=$?
        if [[ -n $__ptyd_running ]]; then
            builtin printf '\e]133;D;%s\a' $st
            __ptyd_running=
        fi
        return $st
    }

    # Last among the precmd hooks, after themes rebuilt PS1.
    __ptyd_precmd_last() {
        local st=$?
        if [[ $__ptyd_cwd != $PWD ]]; then
            __ptyd_cwd=$PWD
            local LC_ALL=C out= c i
            for ((i = 1; i <= ${#PWD}; i++)); do
                c=${PWD[i]}
                case $c in
                [a-zA-Z0-9/._~-]) out+=$c ;;
                *) builtin printf -v c '%%%02X' "'$c"; out+=$c ;;
                esac
            done
            builtin printf '\e]7;file://%s%s\a' ${HOST-} $out
        fi
        if [[ $PS1 != *$'%{\e]133;B\a%}' ]]; then
            PS1+=$'%{\e]133;B\a%}'
        fi
        builtin printf '\e]133;A\a'
        return $st
    }

    __ptyd_preexec() {
        __ptyd_running=1
        builtin printf '\e]133;C\a'
        # Keep our first and last hooks at the ends of precmd_functions,
        # whatever the user's rc files added since (not while zsh iterates
        # over the array: this runs between prompts).
        precmd_functions=(__ptyd_precmd_first
            ${precmd_functions:#__ptyd_precmd_(first|last)} __ptyd_precmd_last)
    }

    typeset -ga precmd_functions preexec_functions
    precmd_functions=(__ptyd_precmd_first ${precmd_functions[@]} __ptyd_precmd_last)
    preexec_functions+=(__ptyd_preexec)
fi
