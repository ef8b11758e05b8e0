-- The database's identity: a random id made when the database is created (or first opened
-- by a version that knows it), stored also with every experiment's data directory
-- (store/datadir.py), so that no two databases share, rewrite or delete each other's files.
CREATE TABLE IF NOT EXISTS database_identity (
    database_id  VARCHAR NOT NULL,
    created_at   TIMESTAMP NOT NULL DEFAULT current_timestamp
);
