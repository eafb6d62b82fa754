# ptyd shell integration for fish: OSC 133 marks (A prompt start, C command
# start, D;STATUS command finished) and OSC 7 (working directory), on fish's
# own events. Safe to source twice.
if status is-interactive; and not set -q __ptyd_hooks
    set -g __ptyd_hooks 1

    function __ptyd_prompt --on-event fish_prompt
        if test "$__ptyd_cwd" != "$PWD"
            set -g __ptyd_cwd $PWD
            printf '\e]7;file://%s%s\a' "$hostname" (string escape --style=url -- $PWD)
        end
        printf '\e]133;A\a'
    end

    function __ptyd_preexec --on-event fish_preexec
        printf '\e]133;C\a'
    end

    function __ptyd_postexec --on-event fish_postexec
        printf '\e]133;D;%s\a' $status
    end
end
