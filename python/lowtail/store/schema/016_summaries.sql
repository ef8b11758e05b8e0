-- The latencies of an analysis as the statistics need them (issue 22): their exact
-- distribution and their counts per time block (`_native.SeriesSummary`, compressed), so
-- that plain analyses pool exactly and every interval allows for clustered packets without
-- the matched series. `format` is the summary's format version.
CREATE TABLE IF NOT EXISTS analysis_summaries (
    analysis_id  BIGINT PRIMARY KEY,
    format       INTEGER NOT NULL,
    summary      BLOB NOT NULL
);
