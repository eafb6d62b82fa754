# ptyd: fish runs this from XDG_DATA_DIRS' vendor_conf.d. It puts the user's
# XDG_DATA_DIRS back and loads ptyd's shell integration.
if set -q PTYD_FISH_XDG_DATA_DIRS
    set -gx XDG_DATA_DIRS $PTYD_FISH_XDG_DATA_DIRS
    set -e PTYD_FISH_XDG_DATA_DIRS
else
    set -e XDG_DATA_DIRS
end
source @PTYD_SHELL_DIR@/ptyd.fish
