#!/usr/bin/env bash
# windows-toolchain.sh: check, build, test and run Rust code for
# x86_64-pc-windows-gnu on Debian 12 (bookworm), running the programs under Wine 8.
#
# ptyd's copy (from the workplace's shared/tools/, so CI does not depend on
# it); .ci/run calls it. One change from the original: `winrun --shutdown`
# waits until the wineserver is gone (-k, then -w), so CI ends with no
# Wine process left behind. Measured times are in docs/benchmarks.md ("Windows CI").
#
# How it works:
#   * Debian's rustc-web/cargo-web plus rust-web-src (the std source of the same
#     version). apt installs 1.96.0 from bookworm-security, which was tested;
#     1.85 from bookworm main was not tested.
#   * cargo -Zbuild-std (allowed on a stable compiler by RUSTC_BOOTSTRAP=1)
#     builds core/alloc/std for the Windows target. The Windows std is not
#     packaged, and rustup cannot download it here.
#   * Linking uses gcc-mingw-w64-x86-64; programs run under wine64 8.0.
#   * std's own crates.io dependencies (libc, hashbrown, ...) are fetched from
#     crates.io the first time; library/Cargo.lock pins them.
#
# What works (tested on bookworm with 2 cores; see README.md beside this file):
#   cargo check / build / test / clippy / run for the windows-gnu target,
#   std (threads, panics with unwinding, HashMap, env), windows-sys, mio 1.x
#   (os-poll, net, os-ext: TCP and named pipes through mio's poller), named
#   pipes, CreatePseudoConsole, reading and writing a ConPTY, ClosePseudoConsole.
#
# What does NOT work, or needs a workaround:
#   * Wine 8.0 has no bcryptprimitives.dll. Rust std >= 1.78 imports
#     ProcessPrng from it, so every Rust exe fails to load
#     (status c0000135). This script builds a 12 KB stub DLL that calls
#     RtlGenRandom and installs it in the Wine prefix.
#   * Wine 8 ConPTY: a child started with PROC_THREAD_ATTRIBUTE_PSEUDOCONSOLE
#     gets no standard handles bound to the pseudo console. It inherits the
#     parent's handles, so `cmd.exe /c echo x` prints to the parent's stdout
#     and nothing arrives on the ConPTY output pipe. A child that opens
#     CONIN$/CONOUT$ itself (a small shim that then runs the real command) works.
#   * Wine 8 ResizePseudoConsole returns E_NOTIMPL (0x80004001).
#   * Wine 8 AF_UNIX sockets: socket(AF_UNIX, SOCK_STREAM, 0) fails with
#     WSAEAFNOSUPPORT (10047).
#   * The rustup toolchains (stable 1.95, nightly 1.97) cannot use Debian's 1.96
#     std source: compiler and library source must be the exact same version.
#   * Debian's libstd-rust-dev-windows is 1.63 (too old for edition 2024) and
#     conflicts with rustc-web.
#
# Usage (as root; apt-get is used):
#   bash windows-toolchain.sh [setup]   install packages, Wine prefix, stub DLL and the
#                                       wrappers wincargo and winrun (idempotent)
#   bash windows-toolchain.sh env       print export lines for `eval` (use /usr/bin/cargo)
#   bash windows-toolchain.sh selftest  setup, then build and test a small crate under Wine
#
# After setup:
#   wincargo check|build|test|clippy|run [args]   cargo for x86_64-pc-windows-gnu
#   winrun prog.exe [args]                        run a Windows program under Wine
#   winrun --shutdown                             stop this prefix's wineserver
#
# Settings (environment):
#   WINTC_BIN   where the wrappers go (default /usr/local/bin)
#   WINTC_HOME  state: Wine prefix, stub DLL, selftest cache
#               (default ${XDG_CACHE_HOME:-$HOME/.cache}/windows-toolchain)
set -euo pipefail

WINTC_BIN=${WINTC_BIN:-/usr/local/bin}
WINTC_HOME=${WINTC_HOME:-${XDG_CACHE_HOME:-$HOME/.cache}/windows-toolchain}
WINTC_PREFIX=${WINTC_PREFIX:-$WINTC_HOME/wineprefix}
TARGET=x86_64-pc-windows-gnu
WINE=/usr/lib/wine/wine64
WINESERVER=/usr/lib/wine/wineserver64
PACKAGES=(rustc-web cargo-web rust-web-src rust-web-clippy gcc-mingw-w64-x86-64 wine64)

log() { printf '[windows-toolchain] %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

install_packages() {
    local missing=() p
    for p in "${PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
    done
    if ((${#missing[@]})); then
        [ "$(id -u)" = 0 ] || die "need root to install: ${missing[*]}"
        log "installing ${missing[*]}"
        # Always update first: on a fresh machine apt may have no lists, or
        # lists that are too old to have rustc-web.
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
    # The compiler and the std source must be the very same version (a
    # security update may have moved one of them): upgrade both together.
    if ! versions_match; then
        [ "$(id -u)" = 0 ] || die "rustc-web and rust-web-src differ in version; need root to upgrade them"
        log "rustc-web and rust-web-src differ in version: upgrading both"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            rustc-web cargo-web rust-web-src rust-web-clippy >/dev/null
        versions_match || die "rustc $(/usr/bin/rustc -V) does not match std source $(readlink -f /usr/lib/rustlib/src/rust)"
    fi
    [ -f /usr/lib/rustlib/src/rust/library/Cargo.lock ] || die "no library/Cargo.lock in rust-web-src"
}

versions_match() {
    local rel src
    rel=$(/usr/bin/rustc -vV | sed -n 's/^release: //p')
    src=$(basename "$(readlink -f /usr/lib/rustlib/src/rust)")
    [ "$src" = "rustc-$rel" ]
}

# Wine 8.0 lacks bcryptprimitives.dll, which Rust's std imports ProcessPrng from.
build_stub() {
    if [ -e /usr/lib/x86_64-linux-gnu/wine/x86_64-windows/bcryptprimitives.dll ]; then
        return 0 # this Wine has its own
    fi
    mkdir -p "$WINTC_HOME"
    [ -f "$WINTC_HOME/bcryptprimitives.dll" ] && return 0
    log "building bcryptprimitives.dll stub"
    local src="$WINTC_HOME/bcryptprimitives.c"
    cat > "$src" <<'EOF'
/* bcryptprimitives.dll for Wine < 9: Rust's std imports ProcessPrng from it. */
#include <windows.h>
BOOLEAN WINAPI SystemFunction036(PVOID buf, ULONG len); /* RtlGenRandom */
__declspec(dllexport) BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T len) {
    while (len) {
        ULONG n = len > 0x40000000 ? 0x40000000 : (ULONG)len;
        if (!SystemFunction036(data, n)) return FALSE;
        data += n;
        len -= n;
    }
    return TRUE;
}
EOF
    x86_64-w64-mingw32-gcc -O2 -shared -s -o "$WINTC_HOME/bcryptprimitives.dll.tmp" "$src" -ladvapi32
    mv "$WINTC_HOME/bcryptprimitives.dll.tmp" "$WINTC_HOME/bcryptprimitives.dll"
}

write_wrappers() {
    mkdir -p "$WINTC_BIN"
    cat > "$WINTC_BIN/winrun.tmp" <<EOF
#!/bin/sh
# Run a Windows program under Wine with the windows-toolchain prefix.
# Generated by windows-toolchain.sh.
WINTC_HOME=\${WINTC_HOME:-$WINTC_HOME}
WINEPREFIX=\${WINTC_PREFIX:-$WINTC_PREFIX}
WINEDEBUG=\${WINEDEBUG:--all}
WINEARCH=win64
WINEDLLOVERRIDES=\${WINEDLLOVERRIDES:-mscoree=;mshtml=}
export WINEPREFIX WINEDEBUG WINEARCH WINEDLLOVERRIDES
# -k asks the server to end; -w then waits until it has, so a CI step that
# shuts down does not leave a wineserver holding the prefix behind it.
if [ "\${1:-}" = --shutdown ]; then $WINESERVER -k 2>/dev/null; exec $WINESERVER -w; fi
if [ ! -f "\$WINEPREFIX/system.reg" ]; then
    $WINE wineboot -u >/dev/null 2>&1 || true
    $WINESERVER -w
fi
if [ -f "\$WINTC_HOME/bcryptprimitives.dll" ] && [ ! -f "\$WINEPREFIX/drive_c/windows/system32/bcryptprimitives.dll" ]; then
    cp "\$WINTC_HOME/bcryptprimitives.dll" "\$WINEPREFIX/drive_c/windows/system32/"
fi
exec $WINE "\$@"
EOF
    cat > "$WINTC_BIN/wincargo.tmp" <<EOF
#!/bin/sh
# cargo for $TARGET: Debian's rustc-web + -Zbuild-std, mingw-w64 linker,
# tests and \`cargo run\` under Wine (winrun). Generated by windows-toolchain.sh.
# /usr/bin first, so Debian's cargo-clippy/clippy-driver are found, not rustup's proxies.
PATH=/usr/bin:\$PATH
RUSTC=/usr/bin/rustc
RUSTDOC=/usr/bin/rustdoc
RUSTC_BOOTSTRAP=1
CARGO_UNSTABLE_BUILD_STD=\${CARGO_UNSTABLE_BUILD_STD:-std,panic_abort}
CARGO_BUILD_TARGET=\${CARGO_BUILD_TARGET:-$TARGET}
CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$WINTC_BIN/winrun
export PATH RUSTC RUSTDOC RUSTC_BOOTSTRAP CARGO_UNSTABLE_BUILD_STD CARGO_BUILD_TARGET \\
    CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER
unset RUSTUP_TOOLCHAIN
exec /usr/bin/cargo "\$@"
EOF
    chmod 755 "$WINTC_BIN/winrun.tmp" "$WINTC_BIN/wincargo.tmp"
    mv "$WINTC_BIN/winrun.tmp" "$WINTC_BIN/winrun"
    mv "$WINTC_BIN/wincargo.tmp" "$WINTC_BIN/wincargo"
}

setup_prefix() {
    mkdir -p "$WINTC_HOME"
    if [ ! -f "$WINTC_PREFIX/system.reg" ]; then
        log "creating Wine prefix $WINTC_PREFIX (about 10 s)"
    fi
    # winrun creates the prefix and copies the stub when they are missing.
    "$WINTC_BIN/winrun" cmd.exe /c exit 0 >/dev/null 2>&1 || die "Wine cannot run cmd.exe in $WINTC_PREFIX"
}

print_env() {
    cat <<EOF
# Windows cross toolchain (windows-toolchain.sh). Use /usr/bin/cargo, not the rustup proxy:
export RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc RUSTC_BOOTSTRAP=1
export CARGO_UNSTABLE_BUILD_STD=std,panic_abort
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_LINKER=x86_64-w64-mingw32-gcc
export CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER=$WINTC_BIN/winrun
# then: /usr/bin/cargo test --target $TARGET
EOF
}

setup() {
    install_packages
    build_stub
    write_wrappers
    setup_prefix
    log "ready: $(/usr/bin/rustc -V), $(x86_64-w64-mingw32-gcc -dumpversion) mingw-w64 gcc, $($WINE --version)"
    log "use: wincargo check|build|test|clippy ...  /  winrun prog.exe"
}

selftest() {
    setup
    SELFTEST_DIR=$(mktemp -d)
    trap 'rm -rf "$SELFTEST_DIR"' EXIT
    local dir=$SELFTEST_DIR
    mkdir -p "$dir/src"
    cat > "$dir/Cargo.toml" <<'EOF2'
[package]
name = "wintc-selftest"
version = "0.1.0"
edition = "2024"

[dependencies]
EOF2
    cat > "$dir/src/main.rs" <<'EOF2'
use std::collections::HashMap;

fn main() {
    let mut m = HashMap::new();
    m.insert("os", std::env::consts::OS);
    let t = std::thread::spawn(|| 40 + 2).join().unwrap();
    let caught = std::panic::catch_unwind(|| panic!("expected")).is_err();
    println!("selftest: {m:?} thread={t} caught_panic={caught}");
}

#[cfg(test)]
mod tests {
    #[test]
    fn runs_on_windows() {
        assert_eq!(std::env::consts::OS, "windows");
    }
}
EOF2
    log "selftest: build std and a crate, run its test and main under Wine (first time about 1 min)"
    export CARGO_TARGET_DIR="$WINTC_HOME/selftest-target"
    if ! (cd "$dir" && "$WINTC_BIN/wincargo" test) > "$dir/test.log" 2>&1; then
        tail -n 40 "$dir/test.log" >&2
        die "selftest: wincargo test failed"
    fi
    grep 'test result' "$dir/test.log" >&2
    (cd "$dir" && "$WINTC_BIN/wincargo" run -q 2>/dev/null) > "$dir/out" || true
    cat "$dir/out" >&2
    grep -q '"os": "windows"}.*thread=42 caught_panic=true' "$dir/out" || die "selftest: unexpected output from wincargo run"
    log "selftest passed"
}

case "${1:-setup}" in
    setup) setup ;;
    env) print_env ;;
    selftest) selftest ;;
    *) die "usage: $0 [setup|env|selftest]" ;;
esac
