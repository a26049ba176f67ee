//! Ctrl-C and SIGTERM as a flag that long-running loops poll, so they can stop their children and remove
//! their cgroups before the process exits.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

/// Whether some [`Cancel::on_signals`] took SIGINT and SIGTERM in this process.
static HANDLED: AtomicBool = AtomicBool::new(false);

/// Set by SIGINT or SIGTERM; holds the signal number (0: none yet).
#[derive(Debug, Clone, Default)]
pub struct Cancel {
    signal: Arc<AtomicUsize>,
}

impl Cancel {
    /// A flag nothing sets (for library callers and tests).
    pub fn new() -> Self {
        Self::default()
    }

    /// A flag set by SIGINT and SIGTERM. From then on those signals no longer end the process by
    /// themselves: the caller must poll [`Cancel::signal`] and exit.
    pub fn on_signals() -> std::io::Result<Self> {
        let c = Cancel::new();
        for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
            signal_hook::flag::register_usize(sig, Arc::clone(&c.signal), sig as usize)?;
        }
        HANDLED.store(true, Ordering::Relaxed);
        Ok(c)
    }

    /// Whether a [`Cancel::on_signals`] took SIGINT and SIGTERM in this process: they then stop its work
    /// gracefully rather than end the process.
    pub fn handled() -> bool {
        HANDLED.load(Ordering::Relaxed)
    }

    /// The signal received, if any.
    pub fn signal(&self) -> Option<i32> {
        match self.signal.load(Ordering::Relaxed) {
            0 => None,
            s => Some(s as i32),
        }
    }

    /// Raises the flag by hand (as if `sig` arrived).
    pub fn trigger(&self, sig: i32) {
        self.signal.store(sig as usize, Ordering::Relaxed);
    }
}
