//! What tests of this and other crates run real cgroups with: the host's backend, or
//! a reason to skip that fails the test under CI.

use super::CgroupBackend;

/// The host's cgroup backend for a test, or `None` (after [`skip`]) where it has none.
pub fn backend() -> Option<CgroupBackend> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return skip("not running as root");
    }
    match CgroupBackend::detect() {
        Ok(b) => Some(b),
        Err(e) => skip(&e.to_string()),
    }
}

/// Says why a test cannot run its real check on this host and gives `None` for the caller to return
/// early; under CI (`CI=true`), where every check must run, fails the test instead.
pub fn skip<T>(why: &str) -> Option<T> {
    if std::env::var("CI").is_ok_and(|v| v == "true" || v == "1") {
        panic!("under CI no test may skip its real check: {why}");
    }
    eprintln!("note: skipping a cgroup test: {why}");
    None
}
