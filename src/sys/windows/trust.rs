//! The state files' trust rules on Windows (see `sys/unix/files.rs`'s `trust`
//! for the contract).

use super::{TokenSid, sid_string};
use std::fs::{DirBuilder, Metadata, OpenOptions};
use std::os::windows::ffi::OsStrExt;
use std::os::windows::fs::OpenOptionsExt;
use std::path::Path;
use windows_sys::Win32::Foundation::{HLOCAL, LocalFree};
use windows_sys::Win32::Security::Authorization::{GetNamedSecurityInfoW, SE_FILE_OBJECT};
use windows_sys::Win32::Security::{
    ACCESS_ALLOWED_ACE, ACE_HEADER, ACL, DACL_SECURITY_INFORMATION, EqualSid, GetAce,
    INHERIT_ONLY_ACE, OWNER_SECURITY_INFORMATION, PSECURITY_DESCRIPTOR, PSID,
};
use windows_sys::Win32::Storage::FileSystem::FILE_FLAG_OPEN_REPARSE_POINT;

/// ACE types that grant access and share `ACCESS_ALLOWED_ACE`'s layout
/// (winnt.h; in windows-sys they sit behind a feature of their own).
const ACCESS_ALLOWED_ACE_TYPE: u8 = 0;
const ACCESS_ALLOWED_CALLBACK_ACE_TYPE: u8 = 9;
/// Rights that change a file or what a directory holds: write and
/// append data (add file, add subdirectory), delete a child, delete,
/// change the DACL or the owner, and the generic write and all.
const WRITE_RIGHTS: u32 =
    0x2 | 0x4 | 0x40 | 0x1_0000 | 0x4_0000 | 0x8_0000 | 0x4000_0000 | 0x1000_0000;
/// Any right at all but `SYNCHRONIZE` and reading the attributes or
/// the security descriptor (what `private` forbids others: the 0700 of
/// a runtime directory).
const ANY_ACCESS: u32 = !(0x10_0000 | 0x80 | 0x2_0000);
/// Whom ptyd trusts besides the current user: SYSTEM, Administrators.
const TRUSTED_SIDS: [&str; 2] = ["S-1-5-18", "S-1-5-32-544"];

pub fn private_file(options: &mut OpenOptions) -> &mut OpenOptions {
    options
}

pub fn private_dir(builder: &mut DirBuilder) -> &mut DirBuilder {
    builder
}

pub fn untrusted_path(options: &mut OpenOptions) -> &mut OpenOptions {
    options.custom_flags(FILE_FLAG_OPEN_REPARSE_POINT)
}

/// Makes a directory we just created ours alone, as mode 0700 does on
/// Unix: a protected DACL (nothing inherited from the parent) with
/// full control for us, SYSTEM and Administrators, inherited by what
/// is created inside. Under `%LOCALAPPDATA%` Windows' inherited ACL is
/// already that; elsewhere (and under Wine, whose default DACL lets
/// everyone read) it is not.
pub fn make_private(dir: &Path) -> std::io::Result<()> {
    let me = super::current_user_sid()?;
    set_dacl(
        dir,
        &format!("D:P(A;OICI;FA;;;{me})(A;OICI;FA;;;SY)(A;OICI;FA;;;BA)"),
    )
    .map_err(|e| std::io::Error::new(e.kind(), format!("making {} private: {e}", dir.display())))
}

/// Gives `path` the DACL of `sddl` (e.g. `D:P(A;;FA;;;WD)`).
pub(super) fn set_dacl(path: &Path, sddl: &str) -> std::io::Result<()> {
    use windows_sys::Win32::Security::{DACL_SECURITY_INFORMATION, SetFileSecurityW};
    let descriptor = super::SddlDescriptor::new(sddl)?;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    // SAFETY: `wide` is NUL-terminated; the descriptor lives until the
    // end of this function.
    let ok = unsafe { SetFileSecurityW(wide.as_ptr(), DACL_SECURITY_INFORMATION, descriptor.0) };
    if ok == 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// What `path`'s security descriptor says: whether its owner is us,
/// and the rights its DACL grants to someone else (`None`: a null
/// DACL, which grants everyone everything).
struct Access {
    owner_is_us: bool,
    /// (SID as text, rights) of each entry that applies to the object
    /// and names neither us nor a trusted SID.
    others: Option<Vec<(String, u32)>>,
}

fn access(path: &Path) -> std::io::Result<Access> {
    let ours = TokenSid::of(None)?;
    let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
    let mut owner: PSID = std::ptr::null_mut();
    let mut dacl: *mut ACL = std::ptr::null_mut();
    let mut descriptor: PSECURITY_DESCRIPTOR = std::ptr::null_mut();
    // SAFETY: `wide` is NUL-terminated; `owner` and `dacl` point into
    // `descriptor`, which is LocalAlloc'd for us and freed below.
    let error = unsafe {
        GetNamedSecurityInfoW(
            wide.as_ptr(),
            SE_FILE_OBJECT,
            OWNER_SECURITY_INFORMATION | DACL_SECURITY_INFORMATION,
            &mut owner,
            std::ptr::null_mut(),
            &mut dacl,
            std::ptr::null_mut(),
            &mut descriptor,
        )
    };
    if error != 0 {
        let e = std::io::Error::from_raw_os_error(error as i32);
        return Err(std::io::Error::new(
            e.kind(),
            format!("reading the security of {}: {e}", path.display()),
        ));
    }
    // SAFETY: `owner` is a valid SID inside `descriptor`, alive until
    // the free; `ours`' SID lives as long as `ours`.
    let owner_is_us = unsafe { EqualSid(owner, ours.sid()) } != 0;
    let others = if dacl.is_null() {
        None
    } else {
        // SAFETY: `dacl` is a valid ACL inside `descriptor`.
        Some(unsafe { foreign_entries(dacl, &ours) })
    };
    // SAFETY: allocated by GetNamedSecurityInfoW, freed once, after
    // the last use of `owner` and `dacl`.
    unsafe { LocalFree(descriptor as HLOCAL) };
    Ok(Access {
        owner_is_us,
        others,
    })
}

/// The allow entries of `dacl` that apply to the object itself (not
/// inherit-only) and name someone other than us and the trusted SIDs.
///
/// # Safety
/// `dacl` must point to a valid ACL for the duration of the call.
unsafe fn foreign_entries(dacl: *mut ACL, ours: &TokenSid) -> Vec<(String, u32)> {
    let mut found = Vec::new();
    // SAFETY: the caller vouches for `dacl`.
    let count = unsafe { (*dacl).AceCount };
    for index in 0..u32::from(count) {
        let mut ace: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: `index` is below the ACL's count; `ace` receives a
        // pointer into the ACL.
        if unsafe { GetAce(dacl, index, &mut ace) } == 0 {
            continue;
        }
        // SAFETY: every ACE starts with an ACE_HEADER.
        let header = unsafe { *ace.cast::<ACE_HEADER>() };
        if header.AceFlags as u32 & INHERIT_ONLY_ACE != 0
            || !matches!(
                header.AceType,
                ACCESS_ALLOWED_ACE_TYPE | ACCESS_ALLOWED_CALLBACK_ACE_TYPE
            )
        {
            continue;
        }
        let allowed = ace.cast::<ACCESS_ALLOWED_ACE>();
        // SAFETY: both allow types have ACCESS_ALLOWED_ACE's layout;
        // the SID starts at `SidStart` and lies within the ACE.
        let (mask, sid) = unsafe {
            (
                (*allowed).Mask,
                std::ptr::addr_of_mut!((*allowed).SidStart).cast::<std::ffi::c_void>(),
            )
        };
        // SAFETY: `sid` and our SID are valid for the call.
        if unsafe { EqualSid(sid, ours.sid()) } != 0 {
            continue;
        }
        // SAFETY: `sid` is a valid SID inside the ACL.
        let text = unsafe { sid_string(sid) }.unwrap_or_else(|_| "an unreadable SID".into());
        if !TRUSTED_SIDS.contains(&text.as_str()) {
            found.push((text, mask));
        }
    }
    found
}

pub fn is_ours(path: &Path, _meta: &Metadata) -> bool {
    access(path).is_ok_and(|a| a.owner_is_us)
}

pub fn refusal(path: &Path, _meta: &Metadata, what: &str, private: bool) -> Option<String> {
    let access = match access(path) {
        Ok(access) => access,
        Err(e) => return Some(e.to_string()),
    };
    if !access.owner_is_us {
        return Some(format!(
            "{} is owned by another user; ptyd does not trust a {what} another user \
             controls. Take ownership of it (or remove it)",
            path.display()
        ));
    }
    let Some(others) = access.others else {
        return Some(format!(
            "{} has no DACL, so everyone may change it; ptyd does not trust a {what} \
             others can change. Give it your profile's inherited ACL (or remove it)",
            path.display()
        ));
    };
    let forbidden = if private { ANY_ACCESS } else { WRITE_RIGHTS };
    let (sid, mask) = others.iter().find(|(_, mask)| mask & forbidden != 0)?;
    let how = if private { "open to" } else { "writable by" };
    Some(format!(
        "{} is {how} {sid} (access mask {mask:#x}); ptyd does not trust a {what} others \
         can {}. Remove that entry (icacls {} /remove *{sid}) or remove the {what}",
        path.display(),
        if private { "open" } else { "change" },
        path.display()
    ))
}
