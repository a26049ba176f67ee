//! A cgroup of its own from systemd: where systemd manages the cgroup v2 tree, a process may not make
//! cgroups of its own beside the ones systemd made, but it may ask for a transient scope with delegation
//! (the D-Bus call `systemd-run --scope -p Delegate=yes` makes), which moves it into a cgroup whose
//! subtree it then controls. Root asks the system manager; a user asks their own manager, which hands
//! down whatever controllers the host's policy delegates to users. systemd removes the scope when its
//! last process ends.

use std::time::{Duration, Instant};
use zbus::zvariant::Value;

/// How long the manager may take to move this process into the new scope.
const MOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Moves this process into a new transient scope `synergy-<pid>.scope` with `Delegate=yes`, through
/// the user's manager when `user`, else the system's. Returns once `/proc/self/cgroup` shows the scope,
/// or why it could not.
pub(super) fn start_scope(user: bool) -> Result<(), String> {
    let pid = std::process::id();
    let unit = format!("synergy-{pid}.scope");
    let which = if user { "user" } else { "system" };
    let conn = if user {
        zbus::blocking::Connection::session()
    } else {
        zbus::blocking::Connection::system()
    }
    .map_err(|e| format!("systemd's {which} manager cannot be reached over D-Bus ({e})"))?;
    let properties: Vec<(&str, Value)> = vec![
        (
            "Description",
            Value::from("synergy: a delegated cgroup for its trials"),
        ),
        ("PIDs", Value::from(vec![pid])),
        ("Delegate", Value::from(true)),
        ("CollectMode", Value::from("inactive-or-failed")),
    ];
    let aux: Vec<(&str, Vec<(&str, Value)>)> = Vec::new();
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        "StartTransientUnit",
        &(unit.as_str(), "fail", properties, aux),
    )
    .map_err(|e| format!("systemd's {which} manager refused a delegated scope ({e})"))?;
    let start = Instant::now();
    loop {
        let now = super::v2::own_v2_path().unwrap_or_default();
        if now.ends_with(&unit) {
            return Ok(());
        }
        if start.elapsed() > MOVE_TIMEOUT {
            return Err(format!(
                "systemd's {which} manager made {unit} but this process is still in /{now} after {} s",
                MOVE_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
