//! `open` on a real file (format sniffing from the file itself, then the reader),
//! so it gets its own target. The file lives in /dev/shm when it exists.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lowtail_capture::{open, OpenOptions};

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else { return };
    let mut bytes = match sel % 4 {
        0 => common::PCAP_MAGICS[(sel as usize / 4) % 6].to_vec(),
        1 => vec![0x0a, 0x0d, 0x0d, 0x0a],
        _ => Vec::new(),
    };
    bytes.extend_from_slice(rest);
    let dir = if std::path::Path::new("/dev/shm").is_dir() { "/dev/shm" } else { "/tmp" };
    let path = std::path::PathBuf::from(format!("{dir}/lowtail-fuzz-{}.mscap", std::process::id()));
    std::fs::write(&path, &bytes).expect("write the input file");
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let options = OpenOptions { force_moonsniff: sel % 4 == 3, ..OpenOptions::default() };
    match open(&path, &options) {
        Ok(mut r) => common::drain(&mut r, &name, sel & 0x80 != 0, Some(bytes.len())),
        Err(e) => common::one_line(&e.to_string(), &name),
    }
    let _ = std::fs::remove_file(&path);
});
