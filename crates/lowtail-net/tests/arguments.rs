//! The four programs' command lines through the real binaries, before any socket is
//! opened (no privileges needed): the build's `--version`, the shared flags in `--help`,
//! and bad arguments as one line on stderr with exit code 2.

use std::process::{Command, Output};

const PROGRAMS: [(&str, &str); 4] = [
    ("lowtail-gen", env!("CARGO_BIN_EXE_lowtail-gen")),
    ("lowtail-cap", env!("CARGO_BIN_EXE_lowtail-cap")),
    ("lowtail-fwd", env!("CARGO_BIN_EXE_lowtail-fwd")),
    ("lowtail-leash", env!("CARGO_BIN_EXE_lowtail-leash")),
];

fn run(binary: &str, args: &[&str]) -> Output {
    Command::new(binary).args(args).output().expect("the program runs")
}

#[test]
fn every_program_prints_the_builds_version() {
    for (name, binary) in PROGRAMS {
        let out = run(binary, &["--version"]);
        assert!(out.status.success(), "{name}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{name} {}", lowtail_version::LONG_VERSION));
    }
}

#[test]
fn the_shared_flags_read_the_same_in_every_help() {
    for (name, binary) in &PROGRAMS[..3] {
        let help = String::from_utf8_lossy(&run(binary, &["--help"]).stdout).into_owned();
        for flag in ["--cpu <CORE>", "--rt-priority <PRIO>", "--nice <N>", "--stats-json <FILE>", "Exit codes"] {
            assert!(help.contains(flag), "{name} --help lacks {flag}");
        }
    }
}

#[test]
fn bad_arguments_are_one_line_and_exit_2() {
    let cases: [(usize, &[&str], &str); 5] = [
        (0, &["--iface", "lo"], "required arguments were not provided: --rate <PPS>"),
        (0, &["--iface", "lo", "--rate", "fast", "--count", "1"], "invalid value 'fast' for '--rate <PPS>'"),
        (1, &["--iface", "lo", "--out", "x.pcap", "--timestamps", "atomic"], "invalid value 'atomic'"),
        (2, &["--in", "lo", "--out", "lo", "--bach", "4"], "(tip: a similar argument exists: '--batch')"),
        (3, &["--grace", "soon"], "is not a duration"),
    ];
    for (program, args, says) in cases {
        let (name, binary) = PROGRAMS[program];
        let out = run(binary, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name} {args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{name} {args:?}: {err:?}");
        assert!(err.starts_with(&format!("{name}: ")) && err.contains(says), "{name} {args:?}: {err}");
    }
}
