use std::path::PathBuf;

use crate::error::CaptureError;
use crate::item::Item;
use crate::window::Window;

/// MoonSniff's record file: packed little-endian `{u64 timestamp_ns, u32 id}` records,
/// no header. The id is already extracted, so there is nothing to decode.
pub struct MoonSniffReader {
    window: Window,
    path: PathBuf,
    finished: bool,
    cut: bool,
    warnings: Vec<String>,
}

pub(crate) const RECORD_LEN: usize = 12;

impl MoonSniffReader {
    pub(crate) fn new(window: Window, path: PathBuf) -> Self {
        MoonSniffReader { window, path, finished: false, cut: false, warnings: Vec::new() }
    }
}

impl MoonSniffReader {
    #[inline]
    pub fn next_item(&mut self) -> Result<Option<Item<'_>>, CaptureError> {
        if self.finished {
            return Ok(None);
        }
        let have = match self.window.ensure(RECORD_LEN) {
            Ok(have) => have,
            Err(e) => {
                self.finished = true;
                return Err(CaptureError::read(&self.path, e));
            }
        };
        if have < RECORD_LEN {
            self.finished = true;
            if have > 0 {
                self.cut = true;
                self.warnings.push(format!(
                    "{}: the last record is truncated ({have} of {RECORD_LEN} bytes): dropped it",
                    self.path.display()
                ));
            }
            return Ok(None);
        }
        let r = &self.window.bytes()[..RECORD_LEN];
        let ts = u64::from_le_bytes(r[0..8].try_into().unwrap());
        let id = u32::from_le_bytes(r[8..12].try_into().unwrap());
        self.window.advance(RECORD_LEN);
        Ok(Some(Item::Record { ts_ns: ts as i64, id }))
    }

    pub fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The input ended inside a record.
    pub fn is_cut(&self) -> bool {
        self.cut
    }
}
