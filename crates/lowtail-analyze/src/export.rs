//! The matched series as Parquet: the file the tail models read.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow_array::{ArrayRef, Int64Array, RecordBatch, UInt32Array, UInt64Array};
use arrow_schema::{DataType, Field, Schema};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, Encoding};
use parquet::file::properties::WriterProperties;

use crate::error::ExportError;

const BATCH_ROWS: usize = 1 << 16;

/// The matched series' columns in file order, with their Arrow types (none nullable):
/// the packet id (32-bit ids unwrapped), both capture times and their difference, and
/// the packet's flow (the index of its flow in the analysis's flows, from PRE's headers),
/// in PRE order. Python reads this schema from `lowtail._native.SERIES_COLUMNS`.
pub const SERIES_COLUMNS: [(&str, DataType); 5] = [
    ("id", DataType::UInt64),
    ("pre_ts_ns", DataType::Int64),
    ("post_ts_ns", DataType::Int64),
    ("latency_ns", DataType::Int64),
    ("flow", DataType::UInt32),
];

/// The Arrow schema of `SERIES_COLUMNS`.
fn series_schema() -> Schema {
    Schema::new(SERIES_COLUMNS.iter().map(|(name, ty)| Field::new(*name, ty.clone(), false)).collect::<Vec<_>>())
}

/// Streams the matched series (id, pre_ts_ns, post_ts_ns, latency_ns, flow) to Parquet.
///
/// Rows go to a temporary file beside the target that is renamed into place only by
/// `finish`, so a failed or cancelled analysis never leaves a half-written series.
pub struct SeriesWriter {
    writer: ArrowWriter<File>,
    schema: Arc<Schema>,
    tmp: PathBuf,
    target: PathBuf,
    id: Vec<u64>,
    pre: Vec<i64>,
    post: Vec<i64>,
    flow: Vec<u32>,
    rows: u64,
}

impl SeriesWriter {
    /// Start writing the series that `finish` will move to `target`.
    pub fn create(target: &Path) -> Result<Self, ExportError> {
        let schema = Arc::new(series_schema());
        let file_name = target.file_name().ok_or_else(|| ExportError::NotAFileName { path: target.to_path_buf() })?;
        let tmp = target.with_file_name(format!(".{}.partial", file_name.to_string_lossy()));
        let file = File::create(&tmp).map_err(|source| ExportError::Io { path: tmp.clone(), source })?;
        // Timestamps and sequential ids shrink to a few bits per row with delta encoding.
        let props = WriterProperties::builder()
            .set_dictionary_enabled(false)
            .set_encoding(Encoding::DELTA_BINARY_PACKED)
            .set_compression(Compression::SNAPPY)
            .set_max_row_group_row_count(Some(1 << 20))
            .build();
        let writer = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|source| ExportError::Parquet { path: tmp.clone(), source })?;
        Ok(SeriesWriter {
            writer,
            schema,
            tmp,
            target: target.to_path_buf(),
            id: Vec::with_capacity(BATCH_ROWS),
            pre: Vec::with_capacity(BATCH_ROWS),
            post: Vec::with_capacity(BATCH_ROWS),
            flow: Vec::with_capacity(BATCH_ROWS),
            rows: 0,
        })
    }

    /// One matched packet (in PRE order).
    #[inline]
    pub fn push(&mut self, id: u64, pre_ts: i64, post_ts: i64, flow: u32) -> Result<(), ExportError> {
        self.id.push(id);
        self.pre.push(pre_ts);
        self.post.push(post_ts);
        self.flow.push(flow);
        if self.id.len() >= BATCH_ROWS {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), ExportError> {
        if self.id.is_empty() {
            return Ok(());
        }
        let latency: Vec<i64> = self.pre.iter().zip(&self.post).map(|(a, b)| b.saturating_sub(*a)).collect();
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(std::mem::take(&mut self.id))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.pre))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.post))),
            Arc::new(Int64Array::from(latency)),
            Arc::new(UInt32Array::from(std::mem::take(&mut self.flow))),
        ];
        self.rows += columns[0].len() as u64;
        let batch = RecordBatch::try_new(self.schema.clone(), columns)?;
        self.writer.write(&batch).map_err(|source| ExportError::Parquet { path: self.tmp.clone(), source })?;
        self.id.reserve(BATCH_ROWS);
        self.pre.reserve(BATCH_ROWS);
        self.post.reserve(BATCH_ROWS);
        self.flow.reserve(BATCH_ROWS);
        Ok(())
    }

    /// Flush, close and move the file into place; returns the number of rows. On
    /// failure (a full disk) the temporary file is removed too.
    pub fn finish(mut self) -> Result<u64, ExportError> {
        let tmp = self.tmp.clone();
        let closed = self.flush().and_then(|()| {
            let target = self.target.clone();
            self.writer.close().map_err(|source| ExportError::Parquet { path: tmp.clone(), source })?;
            std::fs::rename(&tmp, &target).map_err(|source| ExportError::Io { path: target, source })
        });
        if closed.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        closed.map(|()| self.rows)
    }

    /// Give up: remove the temporary file.
    pub fn abandon(self) {
        let _ = std::fs::remove_file(&self.tmp);
    }
}
