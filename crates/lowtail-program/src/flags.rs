//! The flags the programs share, declared once as clap argument groups that each
//! program flattens into its own arguments, and `run`: parse, run, exit with a code that
//! means something.

use std::path::{Path, PathBuf};

use clap::Parser;

use crate::args::parse_cpu_list;
use crate::error::Fatal;
use crate::output::{write_json, JsonLines};
use crate::sched::{allowed_cpus, pin_to, run_realtime, set_nice, Policy};

/// `--rt-priority` and `--nice`: how a program's busy thread is scheduled.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Scheduling {
    /// Run under SCHED_FIFO at this priority (1-99; 0: ordinary scheduling), so that
    /// ordinary tasks do not preempt it. The kernel still lends them up to 50 ms per
    /// second of a core they share with it.
    #[arg(long, value_name = "PRIO")]
    pub rt_priority: Option<i32>,
    /// Run under ordinary scheduling at this nice value (-20 to 19) instead: at -20 it
    /// keeps almost all of a core other tasks also use, and loses it only in short time
    /// slices, not in the 50 ms pieces real-time throttling lends them.
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub nice: Option<i32>,
}

impl Scheduling {
    /// Schedule the calling thread as asked and say how it runs. An explicit priority
    /// must succeed; with none given, `default` (if any) is tried and a refusal only
    /// warns, since the program still works, just with less precise timing.
    pub fn apply(&self, program: &str, default: Option<i32>) -> Result<Policy, Fatal> {
        if let Some(n) = self.nice {
            if self.rt_priority.is_some_and(|p| p != 0) {
                return Err(Fatal::usage("--nice applies to ordinary scheduling: leave out --rt-priority or give 0"));
            }
            set_nice(n)?;
            return Ok(Policy::Nice(n));
        }
        match (self.rt_priority, default) {
            (Some(0), _) | (None, None) => Ok(Policy::Ordinary),
            (Some(p), _) => run_realtime(p).map(|()| Policy::RealTime(p)),
            (None, Some(p)) => match run_realtime(p) {
                Ok(()) => Ok(Policy::RealTime(p)),
                Err(e) => {
                    crate::say!("{program}: warning: ordinary scheduling, other tasks may preempt it ({e})");
                    Ok(Policy::Ordinary)
                }
            },
        }
    }
}

/// `--cpu CORE` with the scheduling flags: where and how a program's one busy thread runs.
#[derive(clap::Args, Debug, Clone, Copy, Default)]
pub struct Placement {
    /// Pin the program's busy thread to this core.
    #[arg(long, value_name = "CORE")]
    pub cpu: Option<usize>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub scheduling: Scheduling,
}

impl Placement {
    /// Pin the calling thread (with `--cpu`) and schedule it. `default_when_pinned` is
    /// the real-time priority a program takes by itself when it has a core of its own:
    /// pinned, on a host with more than one core (judged before pinning, which leaves
    /// one allowed core).
    pub fn apply(&self, program: &str, default_when_pinned: Option<i32>) -> Result<Policy, Fatal> {
        let owns_a_core = self.cpu.is_some() && allowed_cpus().len() > 1;
        if let Some(core) = self.cpu {
            pin_to(core)?;
        }
        self.scheduling.apply(program, default_when_pinned.filter(|_| owns_a_core))
    }
}

/// `--cpu LIST` (repeatable) with the scheduling flags: the cores a program spins on,
/// one thread each, all scheduled alike.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Cores {
    /// The cores, as the kernel writes CPU lists (1-3,5); repeat --cpu to add more.
    #[arg(long = "cpu", value_name = "LIST", required = true, value_parser = parse_cpu_list)]
    lists: Vec<Vec<usize>>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub scheduling: Scheduling,
}

impl Cores {
    /// Every core given, sorted and without repeats.
    pub fn cpus(&self) -> Vec<usize> {
        let mut cpus: Vec<usize> = self.lists.iter().flatten().copied().collect();
        cpus.sort_unstable();
        cpus.dedup();
        cpus
    }

    /// Pin the calling thread to `cpu` (one of `cpus()`) and schedule it.
    pub fn apply_on(&self, program: &str, cpu: usize) -> Result<Policy, Fatal> {
        pin_to(cpu)?;
        self.scheduling.apply(program, None)
    }
}

/// `--stats-json FILE`: the program's statistics, one JSON document written at the end.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct StatsJson {
    /// Write the statistics as JSON to this file.
    #[arg(id = "stats_json", long = "stats-json", value_name = "FILE")]
    pub path: Option<PathBuf>,
}

impl StatsJson {
    /// Write the document, atomically, if a file was asked for.
    pub fn write(&self, doc: &serde_json::Value) -> Result<(), Fatal> {
        self.path.as_deref().map_or(Ok(()), |path| write_json(path, doc))
    }
}

/// `--live-json FILE`: running figures, one JSON line a second while the program runs.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LiveJson {
    /// Append a line of running figures (JSON) to this file every second.
    #[arg(id = "live_json", long = "live-json", value_name = "FILE")]
    pub path: Option<PathBuf>,
}

impl LiveJson {
    /// The file of lines, created, if one was asked for.
    pub fn create(&self) -> Result<Option<JsonLines>, Fatal> {
        self.path.as_deref().map(JsonLines::create).transpose()
    }

    /// The file asked for.
    pub fn path(&self) -> Option<&Path> {
        self.path.as_deref()
    }
}

/// Parse the program's arguments, run `body` and exit with its code. Every program gets
/// `--version` (the build's line, the same as `lowtail --version`), `--help` on stdout
/// with exit 0, and bad arguments as one line on stderr with exit 2; a `Fatal` from
/// `body` is one line prefixed with the program's name, and its kind's exit code.
pub fn run<A: Parser, C: Into<i32>>(program: &'static str, body: impl FnOnce(A) -> Result<C, Fatal>) -> ! {
    let code = match parse::<A>(program, std::env::args_os()).and_then(|args| body(args).map(Into::into)) {
        Ok(code) => code,
        Err(fatal) => {
            // One line, whatever the message holds: callers read the last line of stderr.
            crate::say!("{program}: {}", fatal.to_string().replace('\n', " "));
            fatal.exit().code()
        }
    };
    std::process::exit(code)
}

/// The arguments, or why they are wrong (`--help` and `--version` print and exit here).
pub fn parse<A: Parser>(program: &'static str, argv: impl IntoIterator<Item = std::ffi::OsString>) -> Result<A, Fatal> {
    let command = A::command().name(program).bin_name(program).version(lowtail_version::LONG_VERSION);
    let parsed = command.try_get_matches_from(argv).and_then(|mut m| A::from_arg_matches_mut(&mut m));
    match parsed {
        Ok(args) => Ok(args),
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => Err(Fatal::usage(one_line(&e))),
    }
}

/// clap's error as one line: its message, the arguments it lists and its tip, without
/// the usage block ("unexpected argument '--rat' found (tip: a similar argument exists:
/// '--rate'); see --help").
fn one_line(err: &clap::Error) -> String {
    let text = err.render().to_string();
    let mut message = String::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.starts_with("Usage:") || line.starts_with("For more information") {
            break;
        }
        let line = line.strip_prefix("error: ").unwrap_or(line);
        if message.is_empty() {
            message.push_str(line);
        } else if let Some(tip) = line.strip_prefix("tip: ") {
            message.push_str(&format!(" (tip: {tip})"));
        } else {
            // the arguments a message lists, one a line: "…provided: --rate <PPS>, --count <N>"
            message.push_str(if message.ends_with(':') { " " } else { ", " });
            message.push_str(line);
        }
    }
    message.push_str("; see --help");
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program with every shared flag.
    #[derive(Parser, Debug)]
    struct Toy {
        #[arg(long, value_name = "PPS")]
        rate: u64,
        #[command(flatten)]
        placement: Placement,
        #[command(flatten)]
        stats: StatsJson,
        #[command(flatten)]
        live: LiveJson,
    }

    #[derive(Parser, Debug)]
    struct Probe {
        #[command(flatten)]
        cores: Cores,
    }

    fn toy(args: &[&str]) -> Result<Toy, Fatal> {
        parse::<Toy>("lowtail-toy", std::iter::once("lowtail-toy").chain(args.iter().copied()).map(Into::into))
    }

    fn probe(args: &[&str]) -> Result<Probe, Fatal> {
        parse::<Probe>("lowtail-probe", std::iter::once("lowtail-probe").chain(args.iter().copied()).map(Into::into))
    }

    #[test]
    fn the_shared_flags_have_one_spelling() {
        let t = toy(&["--rate", "5", "--cpu", "1", "--rt-priority", "40", "--stats-json", "s.json", "--nice", "-5"])
            .unwrap();
        assert_eq!((t.rate, t.placement.cpu, t.placement.scheduling.rt_priority), (5, Some(1), Some(40)));
        assert_eq!((t.placement.scheduling.nice, t.stats.path.as_deref()), (Some(-5), Some(Path::new("s.json"))));
        assert!(t.live.path().is_none());
    }

    #[test]
    fn bad_arguments_are_one_line_and_a_usage_error() {
        for (args, says) in [
            (
                &["--rate", "5", "--rat", "3"][..],
                "unexpected argument '--rat' found (tip: a similar argument exists: '--rate')",
            ),
            (&[][..], "the following required arguments were not provided: --rate <PPS>; see --help"),
            (&["--rate", "fast"][..], "invalid value 'fast' for '--rate <PPS>'"),
        ] {
            let err = toy(args).unwrap_err();
            let text = err.to_string();
            assert_eq!(err.exit(), crate::Exit::Usage);
            assert!(text.contains(says), "{text}");
            assert!(!text.contains('\n') && text.ends_with("see --help"), "{text:?}");
        }
    }

    #[test]
    fn cores_are_a_list_or_repeated_and_the_kernels_format() {
        assert_eq!(probe(&["--cpu", "3,1-2"]).unwrap().cores.cpus(), [1, 2, 3]);
        assert_eq!(probe(&["--cpu", "2", "--cpu", "0", "--cpu", "2"]).unwrap().cores.cpus(), [0, 2]);
        let err = probe(&["--cpu", "3-1"]).unwrap_err().to_string();
        assert!(err.contains("runs backwards"), "{err}");
        assert!(probe(&[]).unwrap_err().to_string().contains("--cpu <LIST>"));
    }

    #[test]
    fn nice_and_a_real_time_priority_exclude_each_other() {
        let both = Scheduling { rt_priority: Some(5), nice: Some(0) };
        let err = both.apply("t", None).unwrap_err();
        assert!(err.to_string().contains("--nice applies to ordinary scheduling"), "{err}");
        assert_eq!(Scheduling::default().apply("t", None).unwrap(), Policy::Ordinary);
        assert_eq!(Scheduling { rt_priority: Some(0), nice: None }.apply("t", Some(40)).unwrap(), Policy::Ordinary);
    }
}
