//! lowtail-leash: a testbed role on a leash held by its controller.

use std::io::{Read, Write};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use clap::Parser;

use lowtail_net::clock::{monotonic_ns, realtime_ns};
use lowtail_net::signal;
use lowtail_program::args::parse_duration;
use lowtail_program::{Exit, Fatal};

/// Run one testbed role for a controller that may go away: on another host (started over
/// SSH) or as a keeper of set-up that must be undone.
///
/// Starts PROGRAM (if given) in its own process group, with stdin from /dev/null, stdout
/// passed through and stderr to --log. The controller holds the leash through this
/// program's stdin: a line `stop` asks the role to end; any other line is a heartbeat.
/// The role ends when
///
///   * PROGRAM exits by itself,
///   * the controller says `stop`, or SIGINT/SIGTERM arrive,
///   * the controller is gone: stdin closed (its SSH session ended, it was killed) or no
///     heartbeat for --heartbeat-timeout (the network went silent).
///
/// Ending, PROGRAM's process group gets SIGINT (the native programs then write their
/// statistics), SIGTERM after --grace, SIGKILL 2 s later; then every --undo command runs
/// (`sh -c`, the last given first). PROGRAM also gets SIGTERM should this program die
/// (PR_SET_PDEATHSIG), so nothing outlives the leash. Without PROGRAM it only holds: a
/// keeper whose --undo commands run when the controller lets go or is lost.
///
/// Lines for the controller start with `@leash`: `@leash started PID clock RT MONO` (or
/// `@leash holding clock RT MONO`), `@leash stats JSON` (the --stats file on one line, when
/// the program wrote it) and, last, `@leash exit CODE clock RT MONO`, where RT and MONO are
/// CLOCK_REALTIME and CLOCK_MONOTONIC in ns (a difference between their advances is a step
/// of the clock the captures are stamped with).
///
/// Exit code: PROGRAM's (128 + N if a signal N ended it); 0 for a keeper; 2 when PROGRAM
/// cannot be started.
#[derive(Parser, Debug)]
#[command(verbatim_doc_comment)]
struct Args {
    /// The controller is lost when no line came on stdin for this long: 10s, 500ms.
    #[arg(long, value_name = "SECS", value_parser = parse_duration)]
    heartbeat_timeout: Option<Duration>,
    /// How long PROGRAM has between SIGINT and SIGTERM.
    #[arg(long, value_name = "SECS", value_parser = parse_duration, default_value = "5s")]
    grace: Duration,
    /// A shell command to run when the role ends, whatever ends it (repeat; the last given runs first).
    #[arg(long, value_name = "COMMAND")]
    undo: Vec<String>,
    /// Where PROGRAM's stderr goes (appended) [default: this program's stderr].
    #[arg(long, value_name = "FILE")]
    log: Option<PathBuf>,
    /// PROGRAM's statistics file (JSON), passed to the controller on one line when it ends.
    #[arg(long, value_name = "FILE")]
    stats: Option<PathBuf>,
    /// The role's program and its arguments.
    #[arg(last = true, value_name = "PROGRAM")]
    program: Vec<String>,
}

const PROGRAM: &str = "lowtail-leash";
const KILL_AFTER_TERM: Duration = Duration::from_secs(2);

fn main() {
    lowtail_program::run(PROGRAM, run)
}

/// Why the role ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Exited,
    Stop,
    ControllerGone,
    HeartbeatLost,
}

fn run(args: Args) -> Result<i32, Fatal> {
    signal::install()?;
    let mut child = match args.program.split_first() {
        Some((program, rest)) => Some(spawn(program, rest, args.log.as_ref())?),
        None => None,
    };
    match &child {
        Some(c) => say(&format!("started {} {}", c.id(), clocks())),
        None => say(&format!("holding {}", clocks())),
    }
    let mut leash = Leash::new(args.heartbeat_timeout);
    let end = loop {
        if let Some(c) = child.as_mut() {
            if c.try_wait().map_err(|e| Fatal::failed(format!("waiting for the program: {e}")))?.is_some() {
                break End::Exited;
            }
        }
        if signal::stop_requested() {
            break End::Stop;
        }
        if let Some(end) = leash.poll(Duration::from_millis(100)) {
            break end;
        }
    };
    if matches!(end, End::ControllerGone | End::HeartbeatLost) {
        tell(&format!("{}: stopping the role", describe(end)));
    }
    let status = match child.as_mut() {
        Some(c) => Some(stop(c, args.grace)),
        None => None,
    };
    for command in args.undo.iter().rev() {
        undo(command);
    }
    if let Some(doc) = args.stats.as_ref().and_then(|path| std::fs::read_to_string(path).ok()) {
        // JSON outside its strings may hold newlines (inside them they are escaped): one line.
        say(&format!("stats {}", doc.trim().replace(['\n', '\r'], " ")));
    }
    let code = status.map_or(Exit::Ok.code(), exit_code);
    say(&format!("exit {code} {}", clocks()));
    Ok(code)
}

fn describe(end: End) -> &'static str {
    match end {
        End::Exited | End::Stop => "the role ended",
        End::ControllerGone => "the controller is gone (stdin closed)",
        End::HeartbeatLost => "no heartbeat from the controller",
    }
}

fn spawn(program: &str, args: &[String], log: Option<&PathBuf>) -> Result<Child, Fatal> {
    let mut command = Command::new(program);
    command.args(args).stdin(Stdio::null());
    if let Some(path) = log {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Fatal::failed(format!("opening the log {}: {e}", path.display())))?;
        command.stderr(file);
    }
    // SAFETY: setpgid and prctl are async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        command.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 || libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    command.spawn().map_err(|e| Fatal::usage(format!("cannot start {program}: {e}")))
}

/// SIGINT to the program's group, SIGTERM after `grace`, SIGKILL after two more seconds.
fn stop(child: &mut Child, grace: Duration) -> ExitStatus {
    let group = child.id() as libc::pid_t;
    for (sig, wait) in [(libc::SIGINT, grace), (libc::SIGTERM, KILL_AFTER_TERM), (libc::SIGKILL, Duration::MAX)] {
        if let Ok(Some(status)) = child.try_wait() {
            return status;
        }
        // SAFETY: signalling the process group this program created for its child.
        unsafe { libc::kill(-group, sig) };
        let deadline = Instant::now().checked_add(wait);
        loop {
            match child.try_wait() {
                Ok(Some(status)) => return status,
                Ok(None) => {}
                Err(_) => break,
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    child.wait().unwrap_or_else(|_| ExitStatus::from_raw(libc::SIGKILL))
}

fn exit_code(status: ExitStatus) -> i32 {
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
}

fn undo(command: &str) {
    let done = Command::new("/bin/sh").arg("-c").arg(command).stdin(Stdio::null()).status();
    match done {
        Ok(status) if status.success() => {}
        Ok(status) => tell(&format!("undo `{command}` exited with {}", exit_code(status))),
        Err(e) => tell(&format!("undo `{command}` could not run: {e}")),
    }
}

/// A message on stderr. Not eprintln!, which panics when stderr is gone: it is, when the
/// controller's SSH session went, and the role must still be stopped and undone then.
fn tell(message: &str) {
    let _ = writeln!(std::io::stderr(), "{PROGRAM}: {message}");
}

/// One line for the controller; a controller that is gone cannot read it, which is fine.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "@leash {line}");
    let _ = out.flush();
}

fn clocks() -> String {
    format!("clock {} {}", realtime_ns(), monotonic_ns())
}

/// The controller's end of the leash: stdin.
struct Leash {
    heartbeat_timeout: Option<Duration>,
    last_heard: Instant,
    pending: Vec<u8>,
    closed: bool,
}

impl Leash {
    fn new(heartbeat_timeout: Option<Duration>) -> Leash {
        Leash { heartbeat_timeout, last_heard: Instant::now(), pending: Vec::new(), closed: false }
    }

    /// Wait up to `timeout` for the controller; why the role must end, if it must.
    fn poll(&mut self, timeout: Duration) -> Option<End> {
        if self.closed {
            std::thread::sleep(timeout);
            return Some(End::ControllerGone);
        }
        let mut fds = [libc::pollfd { fd: libc::STDIN_FILENO, events: libc::POLLIN, revents: 0 }];
        // SAFETY: one valid pollfd.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 1, timeout.as_millis() as libc::c_int) };
        if ready > 0 {
            let mut buf = [0u8; 512];
            match std::io::stdin().lock().read(&mut buf) {
                Ok(0) => {
                    self.closed = true;
                    return Some(End::ControllerGone);
                }
                Ok(n) => {
                    self.last_heard = Instant::now();
                    self.pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
                        let line: Vec<u8> = self.pending.drain(..=end).collect();
                        if line.trim_ascii() == b"stop" {
                            return Some(End::Stop);
                        }
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.closed = true;
                    return Some(End::ControllerGone);
                }
            }
        }
        match self.heartbeat_timeout {
            Some(t) if self.last_heard.elapsed() > t => Some(End::HeartbeatLost),
            _ => None,
        }
    }
}
