//! The probe's command line through the real binary: the shared spelling of the
//! scheduling flags, CPU lists, and bad arguments as one line with exit code 2.

use std::process::{Command, Output};

fn noise(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lowtail-noise")).args(args).output().expect("lowtail-noise runs")
}

fn one_line_error(out: &Output) -> String {
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    assert!(err.starts_with("lowtail-noise: "), "{err}");
    err
}

#[test]
fn it_probes_every_core_of_a_cpu_list_given_once_or_repeated() {
    let core = lowtail_program::sched::allowed_cpus()[0];
    for args in
        [vec!["--cpu", &*core.to_string()], vec!["--cpu", &*format!("{core},{core}"), "--cpu", &*core.to_string()]]
    {
        let out = noise(&[&args[..], &["--duration", "20ms", "--threshold-ns", "100000"]].concat());
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON document");
        let cpus: Vec<u64> = doc["cores"].as_array().unwrap().iter().map(|c| c["cpu"].as_u64().unwrap()).collect();
        assert_eq!(cpus, [core as u64]);
        assert_eq!(doc["requested_duration_ns"], 20_000_000);
    }
}

#[test]
fn the_main_thread_pinned_apart_leaves_the_probed_core_to_its_thread() {
    let cpus = lowtail_program::sched::allowed_cpus();
    let (Some(&main), Some(&probed)) = (cpus.first(), cpus.last()) else { return };
    if main == probed {
        return; // one core
    }
    let (main, probed) = (main.to_string(), probed.to_string());
    let out = noise(&["--cpu", &probed, "--main-cpu", &main, "--duration", "10ms", "--threshold-ns", "100000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn bad_arguments_are_one_line_and_exit_2() {
    for (args, says) in [
        (&["--cpus", "0", "--duration", "1s"][..], "unexpected argument '--cpus'"),
        (&["--cpu", "0", "--duration", "1s", "--fifo", "50"][..], "unexpected argument '--fifo'"),
        (&["--duration", "1s"][..], "--cpu <LIST>"),
        (&["--cpu", "3-1", "--duration", "1s"][..], "runs backwards"),
        (&["--cpu", "0", "--duration", "soon"][..], "is not a duration"),
        (&["--cpu", "0", "--duration", "0s"][..], "--duration must be positive"),
        (&["--cpu", "0", "--duration", "10ms", "--rt-priority", "100"][..], "outside 1..99"),
        (&["--cpu", "4095", "--duration", "10ms"][..], "cannot pin to core 4095"),
    ] {
        let err = one_line_error(&noise(args));
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn help_and_version_go_to_stdout_with_exit_0() {
    let help = noise(&["--help"]);
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in ["--cpu <LIST>", "--rt-priority", "--nice", "--duration", "Exit codes"] {
        assert!(text.contains(flag), "{flag} missing from --help");
    }
    let version = noise(&["--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("lowtail-noise {}", lowtail_version::LONG_VERSION)
    );
}
