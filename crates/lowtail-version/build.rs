//! Bakes the git commit and the build profile into the crate, so that `lowtail --version`
//! and every native program's `--version` name the same build.

use std::path::Path;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).current_dir(env!("CARGO_MANIFEST_DIR")).output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !text.is_empty()).then_some(text)
}

fn main() {
    // A source tree without git (a tarball, a crates.io package) says so.
    let commit = git(&["rev-parse", "--short=10", "HEAD"]).unwrap_or_else(|| "unknown".into());
    // Rebuild when HEAD moves: HEAD itself (a checkout) and the branch it names (a commit).
    let mut watched = vec!["HEAD".to_string(), "packed-refs".to_string()];
    if let Some(branch) = git(&["symbolic-ref", "-q", "HEAD"]) {
        watched.push(branch);
    }
    for name in watched {
        if let Some(path) = git(&["rev-parse", "--path-format=absolute", "--git-path", &name]) {
            if Path::new(&path).exists() {
                println!("cargo:rerun-if-changed={path}");
            }
        }
    }
    println!("cargo:rerun-if-changed=build.rs");
    let profile = std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into());
    let version = env!("CARGO_PKG_VERSION");
    println!("cargo:rustc-env=LOWTAIL_GIT_COMMIT={commit}");
    println!("cargo:rustc-env=LOWTAIL_BUILD_PROFILE={profile}");
    println!("cargo:rustc-env=LOWTAIL_LONG_VERSION={version} (commit {commit}, {profile} build)");
}
