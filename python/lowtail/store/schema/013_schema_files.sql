-- The schema files this database has been given, by name: opening a database applies only
-- the files it lacks (every file is idempotent, so a database made before this table gets
-- them all once more, then its list). Running the twelve files on every open cost more
-- than the rest of storing an analysis.
CREATE TABLE IF NOT EXISTS schema_files (
    name        VARCHAR PRIMARY KEY,
    applied_at  TIMESTAMP NOT NULL DEFAULT current_timestamp
);
