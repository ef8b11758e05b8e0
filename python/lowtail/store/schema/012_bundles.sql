-- Runs brought from another database (`lowtail import` of a bundle `lowtail export` wrote).
-- One row per bundle imported; a bundle is known by the checksum of its contents, so
-- importing it again changes nothing.
CREATE SEQUENCE IF NOT EXISTS import_id_seq START 1;
CREATE TABLE IF NOT EXISTS imports (
    import_id    BIGINT PRIMARY KEY DEFAULT nextval('import_id_seq'),
    imported_at  TIMESTAMP NOT NULL DEFAULT current_timestamp,
    bundle_id    VARCHAR NOT NULL,      -- sha256 over the bundle's files and their checksums
    origin       JSON NOT NULL,         -- the exporting host, database and lowtail version
    manifest     JSON NOT NULL,         -- the bundle's manifest, as read
    data_dir     VARCHAR NOT NULL       -- where its matched series were put
);
-- The new id of every imported row: kind = experiment | run | analysis | model.
CREATE TABLE IF NOT EXISTS import_ids (
    import_id  BIGINT NOT NULL,
    kind       VARCHAR NOT NULL,
    old_id     BIGINT NOT NULL,
    new_id     BIGINT NOT NULL
);
-- NULL: measured in this database; else where it came from (import id, bundle, host,
-- database, its id there).
ALTER TABLE experiments ADD COLUMN IF NOT EXISTS origin JSON;
