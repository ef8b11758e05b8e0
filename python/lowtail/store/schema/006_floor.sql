-- The floor an experiment's runs are read against: the calibration runs of the experiment
-- named here (`lowtail run --calibration ID`, or `calibration = ID` in the file), NULL: its own.
ALTER TABLE experiments ADD COLUMN IF NOT EXISTS calibration_experiment_id BIGINT;
