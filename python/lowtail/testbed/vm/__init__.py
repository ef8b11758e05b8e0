"""The VM device under test (`kind = "vm"`): the guest image lowtail builds (kernels.py,
kmod.py, cpio.py, image.py, guest-init.sh), QEMU and its control channels (qemu.py), and
the DuT kind (dut.py). What a TCG run's latencies mean is said by lowtail.core.virtualization."""
