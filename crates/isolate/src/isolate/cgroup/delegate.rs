//! A cgroup of its own from systemd: where systemd manages the cgroup v2 tree, a process may not make
//! cgroups of its own beside the ones systemd made, but it may ask for a transient scope with delegation
//! (the D-Bus call `systemd-run --scope -p Delegate=yes` makes), which moves it into a cgroup whose
//! subtree it then controls. Root asks the system manager; a user asks their own manager, which hands
//! down whatever controllers the host's policy delegates to users. systemd removes the scope when its
//! last process ends.

use std::time::{Duration, Instant};
use zbus::zvariant::Value;

/// The scope synergy `pid` asks for.
fn scope_name(pid: u32) -> String {
    format!("{SCOPE_PREFIX}{pid}{SCOPE_SUFFIX}")
}

const SCOPE_PREFIX: &str = "synergy-";
const SCOPE_SUFFIX: &str = ".scope";

fn which(user: bool) -> &'static str {
    if user {
        "user"
    } else {
        "system"
    }
}

/// The D-Bus connection to the user's manager (`user`) or the system's.
fn connect(user: bool) -> Result<zbus::blocking::Connection, String> {
    if user {
        zbus::blocking::Connection::session()
    } else {
        zbus::blocking::Connection::system()
    }
    .map_err(|e| {
        format!(
            "systemd's {} manager cannot be reached over D-Bus ({e})",
            which(user)
        )
    })
}

/// Calls `method` of systemd's manager interface with `body`.
fn manager<B>(
    conn: &zbus::blocking::Connection,
    method: &str,
    body: &B,
) -> zbus::Result<zbus::message::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    conn.call_method(
        Some("org.freedesktop.systemd1"),
        "/org/freedesktop/systemd1",
        Some("org.freedesktop.systemd1.Manager"),
        method,
        body,
    )
}

/// One unit of `ListUnitsByPatterns`' answer: name, description, load, active and sub state, followed
/// unit, object path, queued job id, job type, job path.
type ListedUnit = (
    String,
    String,
    String,
    String,
    String,
    String,
    zbus::zvariant::OwnedObjectPath,
    u32,
    String,
    zbus::zvariant::OwnedObjectPath,
);

/// Stops every scope of a synergy process that `dead` says is gone (`synergy-<pid>.scope`, which a
/// `kill -9` leaves running with the trial's workload inside): systemd kills what is inside and removes
/// its cgroups, as for any unit it stops. Returns each such scope with its pid and, where systemd refused,
/// why. Nothing when the manager cannot be reached: then there are no scopes of its to stop.
pub fn stop_dead_scopes(
    user: bool,
    dead: &dyn Fn(i32) -> bool,
) -> Vec<(String, i32, Option<String>)> {
    let Ok(conn) = connect(user) else {
        return Vec::new();
    };
    let states: Vec<&str> = Vec::new();
    let patterns = vec![format!("{SCOPE_PREFIX}*{SCOPE_SUFFIX}")];
    let units: Vec<ListedUnit> = match manager(&conn, "ListUnitsByPatterns", &(states, patterns))
        .and_then(|reply| reply.body().deserialize())
    {
        Ok(units) => units,
        Err(_) => return Vec::new(),
    };
    units
        .into_iter()
        .filter_map(|u| {
            let pid: i32 =
                u.0.strip_prefix(SCOPE_PREFIX)?
                    .strip_suffix(SCOPE_SUFFIX)?
                    .parse()
                    .ok()?;
            (pid > 0 && dead(pid)).then_some((u.0, pid))
        })
        .map(|(unit, pid)| {
            let error = manager(&conn, "StopUnit", &(unit.as_str(), "replace"))
                .err()
                .map(|e| format!("systemd's {} manager did not stop it ({e})", which(user)));
            (unit, pid, error)
        })
        .collect()
}

/// How long the manager may take to move this process into the new scope.
const MOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Moves this process into a new transient scope `synergy-<pid>.scope` with `Delegate=yes`, through
/// the user's manager when `user`, else the system's. Returns once `/proc/self/cgroup` shows the scope,
/// or why it could not.
pub(super) fn start_scope(user: bool) -> Result<(), String> {
    let pid = std::process::id();
    let unit = scope_name(pid);
    let which = which(user);
    let conn = connect(user)?;
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
    manager(
        &conn,
        "StartTransientUnit",
        &(unit.as_str(), "fail", properties, aux),
    )
    .map_err(|e| format!("systemd's {which} manager refused a delegated scope ({e})"))?;
    let start = Instant::now();
    loop {
        let now = super::paths::own_v2_path().unwrap_or_default();
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
