//! The Windows side of the OS boundary. The Unix items of `sys/mod.rs`
//! (fd flags, peer credentials, `flock`, signals, fd passing) serve the
//! daemon, which is not built on Windows yet (`lib.rs`); what is here is
//! what the ConPTY backend (`pty/windows.rs`) and its tests share.

#[cfg(test)]
use windows_sys::Win32::System::LibraryLoader::{GetModuleHandleW, GetProcAddress};

/// Whether this process runs under Wine rather than Windows: Wine's ntdll
/// exports `wine_get_version`, Windows' does not. Only tests ask, to work
/// around what Wine 8 lacks (see `pty/windows.rs`); the backend itself is
/// written for Windows and never branches on it.
#[cfg(test)]
pub fn running_under_wine() -> bool {
    let ntdll: Vec<u16> = "ntdll.dll\0".encode_utf16().collect();
    // SAFETY: `ntdll` is a NUL-terminated UTF-16 string that outlives the
    // call; GetModuleHandleW does not take a reference on the module.
    let module = unsafe { GetModuleHandleW(ntdll.as_ptr()) };
    if module.is_null() {
        return false;
    }
    // SAFETY: `module` is ntdll's handle (loaded in every process for its
    // whole life) and the name is a NUL-terminated C string.
    unsafe { GetProcAddress(module, c"wine_get_version".as_ptr().cast()) }.is_some()
}
