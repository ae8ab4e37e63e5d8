//! The glue as a child process that never outlives ina3d.
//!
//! `ina3d` blocks SIGINT, SIGTERM and SIGHUP in every thread and takes them in one waiting
//! thread (the binary's `main.rs`), which removes temporaries and exits. A child started
//! plainly would inherit that blocked mask and ina3d's process group, so a signal that
//! ends ina3d would leave an ns-3 run going until it next wrote to its closed pipe. Every
//! glue run therefore starts through [`spawn`], which in the child, between fork and exec:
//!
//! - empties the signal mask, so the glue takes the default actions again;
//! - puts it in a process group of its own, which ina3d can signal as a whole;
//! - asks Linux to SIGKILL it when its parent dies (`PR_SET_PDEATHSIG`), and checks the
//!   parent is still the one that forked it, since a parent dying before the request is
//!   not covered by it.
//!
//! The parent side registers the group while the child lives: [`kill_all`] (called by the
//! signal thread before it exits) kills every registered group, and dropping a
//! [`GlueChild`] that was not waited for (an error or a panic on the way) kills its group
//! too. Linux sends the parent-death signal when the *thread* that forked exits: the
//! thread that spawns must wait for the child, as `run::run_glue` does.

use std::collections::BTreeSet;
use std::io;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::Mutex;

/// Process groups of the glue runs alive now (each the group's leader pid).
static LIVE: Mutex<BTreeSet<i32>> = Mutex::new(BTreeSet::new());

fn live() -> std::sync::MutexGuard<'static, BTreeSet<i32>> {
    // a panic while holding the lock leaves a set that is still right
    LIVE.lock().unwrap_or_else(|e| e.into_inner())
}

/// A running glue process in its own process group; its group is killed when dropped
/// before [`GlueChild::wait`] returned.
#[derive(Debug)]
pub struct GlueChild {
    child: Child,
    /// The group id (= the child's pid); `None` once reaped.
    group: Option<i32>,
}

impl GlueChild {
    /// The standard library's handle, for taking the child's pipes.
    pub fn inner(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the child to exit; its group leaves the registry.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self.child.wait()?;
        if let Some(g) = self.group.take() {
            live().remove(&g);
        }
        Ok(status)
    }
}

impl Drop for GlueChild {
    fn drop(&mut self) {
        if let Some(g) = self.group.take() {
            // SAFETY: a plain kill(2) of the group this process created.
            unsafe { libc::killpg(g, libc::SIGKILL) };
            let _ = self.child.wait();
            live().remove(&g);
        }
    }
}

/// Starts `cmd` as described in the module doc: empty signal mask, own process group,
/// killed when ina3d dies.
pub fn spawn(cmd: &mut Command) -> io::Result<GlueChild> {
    // SAFETY: getpid(2) has no preconditions.
    let parent = unsafe { libc::getpid() };
    cmd.process_group(0);
    // SAFETY: the closure runs in the forked child before exec and calls only
    // async-signal-safe functions (sigemptyset, sigprocmask, prctl, getppid) on memory of
    // its own stack.
    unsafe {
        cmd.pre_exec(move || {
            let mut empty: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut empty);
            if libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut()) != 0 {
                return Err(io::Error::last_os_error());
            }
            #[cfg(target_os = "linux")]
            {
                let kill = libc::SIGKILL as libc::c_ulong;
                if libc::prctl(libc::PR_SET_PDEATHSIG, kill, 0, 0, 0) != 0 {
                    return Err(io::Error::last_os_error());
                }
                // the parent died between fork and prctl: nobody will read this run
                if libc::getppid() != parent {
                    return Err(io::Error::from_raw_os_error(libc::ESRCH));
                }
            }
            Ok(())
        });
    }
    let child = cmd.spawn()?;
    let group = child.id() as i32;
    live().insert(group);
    Ok(GlueChild {
        child,
        group: Some(group),
    })
}

/// Kills (SIGKILL) every glue process group still running; the number of groups
/// signalled. For the signal thread, just before the process exits.
pub fn kill_all() -> usize {
    let groups = live();
    for &g in groups.iter() {
        // SAFETY: a plain kill(2) of a group this process created.
        unsafe { libc::killpg(g, libc::SIGKILL) };
    }
    groups.len()
}
