-- VM DuTs (testbed/vm): how the guest ran, and its interrupts beside the host's.

-- kvm | tcg (QEMU's emulator: latencies are an emulator's) for a VM DuT; NULL for every other DuT.
ALTER TABLE runs ADD COLUMN IF NOT EXISTS virtualization VARCHAR;

-- host: the host's /proc/interrupts (InterruptSampler); guest: a VM guest's own, sent over its
-- control port and stamped with the host's clock on arrival (cpu = the guest's vCPU).
ALTER TABLE run_interrupts ADD COLUMN IF NOT EXISTS source VARCHAR DEFAULT 'host';
