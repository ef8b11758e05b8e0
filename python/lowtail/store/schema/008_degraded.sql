-- Why a run is degraded: trusted figures, but not of the traffic or set-up the file asked
-- for (the generator stalled, the core plan put programs where they disturb each other).
-- A list of strings; NULL in runs stored before.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS degraded_reasons JSON;
