//! The identity of a lowtail build, the same in the Python module and in every native
//! program: `lowtail --version` and `lowtail-cap --version` print the same line.
#![warn(missing_docs)]

/// The workspace's version (Cargo.toml), also the Python package's.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");

/// The git commit the build was made from (10 hex digits), or "unknown" outside a git tree.
pub const COMMIT: &str = env!("LOWTAIL_GIT_COMMIT");

/// Cargo's build profile: "release" or "debug".
pub const PROFILE: &str = env!("LOWTAIL_BUILD_PROFILE");

/// "0.1.0 (commit 0123456789, release build)": what `--version` prints after the program's name.
pub const LONG_VERSION: &str = env!("LOWTAIL_LONG_VERSION");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_long_version_names_version_commit_and_profile() {
        assert!(LONG_VERSION.starts_with(VERSION));
        assert!(LONG_VERSION.contains(COMMIT));
        assert!(LONG_VERSION.contains(PROFILE));
        assert!(PROFILE == "release" || PROFILE == "debug", "{PROFILE}");
    }
}
