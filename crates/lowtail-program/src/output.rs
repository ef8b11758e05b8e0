//! The programs' JSON outputs: the statistics document written once at the end
//! (`--stats-json`), and the running figures appended a line at a time (`--live-json`).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::Fatal;

/// Write `value` as JSON to `path` atomically (a reader never sees half a document).
pub fn write_json(path: &Path, value: &serde_json::Value) -> Result<(), Fatal> {
    let tmp = path.with_extension("json.partial");
    let text = serde_json::to_string_pretty(value).expect("statistics serialize");
    std::fs::write(&tmp, text + "\n").and_then(|_| std::fs::rename(&tmp, path)).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Fatal::write(format_args!("writing statistics to {}", path.display()), &e)
    })
}

/// A file of JSON lines, one written (whole, in one call) per `write`.
pub struct JsonLines {
    file: File,
    path: PathBuf,
}

impl JsonLines {
    /// Create (or truncate) `path`.
    pub fn create(path: &Path) -> Result<JsonLines, Fatal> {
        let file = File::create(path).map_err(|e| Fatal::create(path, e))?;
        Ok(JsonLines { file, path: path.to_path_buf() })
    }

    /// Append one line. A reader never sees half a line unless the disk is full.
    pub fn write(&mut self, value: &serde_json::Value) -> Result<(), Fatal> {
        let mut line = value.to_string();
        line.push('\n');
        self.file
            .write_all(line.as_bytes())
            .map_err(|e| Fatal::write(format_args!("writing {}", self.path.display()), &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_statistics_document_is_whole_or_absent() {
        let dir = std::env::temp_dir().join(format!("lowtail-program-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("s.json");
        write_json(&path, &serde_json::json!({"sent": 3})).unwrap();
        let back: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(back["sent"], 3);
        assert!(!dir.join("s.json.partial").exists());
        let mut lines = JsonLines::create(&dir.join("l.jsonl")).unwrap();
        lines.write(&serde_json::json!({"a": 1})).unwrap();
        lines.write(&serde_json::json!({"a": 2})).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("l.jsonl")).unwrap(), "{\"a\":1}\n{\"a\":2}\n");
        let err = write_json(&dir.join("no/such/dir.json"), &serde_json::json!({})).unwrap_err();
        assert!(matches!(err, Fatal::Failed(_)), "{err:?}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
